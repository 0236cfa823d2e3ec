"""``dtype_cast``: casts made every step — autocast's weight casts under ``aten::linear``, gradients cast
back (``ToCopyBackward0``), a loss's ``.float()`` — fires on converting copy kernels under a cast op,
with the bf16-weights / autocast-cache / fused-loss fix; silent on a ``.to()`` that converts no dtype
(a device move or memory format: a transfer) and under its floor."""

from __future__ import annotations

from pathlib import Path

from copy_loop import CAST, COPY, COPY_RULES, CopyLoop, findings

import tracekit

AUTOCAST = ["aten::linear", "aten::to", "aten::_to_copy", "aten::copy_"]
BACK = ["autograd::engine::evaluate_function: ToCopyBackward0", "ToCopyBackward0", "aten::to", "aten::_to_copy",
        "aten::copy_"]
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_fires_on_autocast_weight_casts_and_their_backward(tmp_path):
    loop = CopyLoop()
    for i in range(loop.steps):
        for _ in range(4):  # four weights cast, 10 µs each, and their gradients cast back, 5 µs each
            loop.copy(i, AUTOCAST, CAST, 10.0)
            loop.copy(i, BACK, CAST, 5.0)
    got = findings(loop.write(tmp_path))
    f = got["dtype_cast"]
    assert f.cost_ns_per_step == 60_000 and f.resource == "gpu" and f.severity == "warning"
    assert [(e.name, e.count_per_step, e.dur_ns_per_step) for e in f.evidence] == [
        ("aten::linear", 4, 40_000), ("ToCopyBackward0", 4, 20_000)]
    assert "bf16" in f.fix and "autocast" in f.fix and "fused cross-entropy" in f.fix
    assert not set(got) & (set(COPY_RULES) - {"dtype_cast"})


def test_silent_on_a_to_that_converts_no_dtype(tmp_path):
    loop = CopyLoop()
    for i in range(loop.steps):  # gpu_kernel_impl_nocast under aten::to: a memory-format change, not a cast
        loop.copy(i, ["aten::to", "aten::_to_copy", "aten::copy_"], COPY, 50.0)
    assert not set(findings(loop.write(tmp_path))) & set(COPY_RULES)


def test_silent_under_its_share_of_gpu_busy(tmp_path):
    loop = CopyLoop(gemm_us=1000.0)
    for i in range(loop.steps):  # 8 µs of 1009 µs GPU busy
        loop.copy(i, AUTOCAST, CAST, 8.0)
    assert "dtype_cast" not in findings(loop.write(tmp_path))


def test_the_autocast_training_loop(tmp_path):
    """train_eager: GPT-2 small under bf16 autocast with fp32 weights, loss on logits.float(). Checked by
    hand from the trace: per steady step 122 weight casts under aten::linear (433 µs), 122 + 1 gradient
    casts back (ToCopyBackward0: 781 + 279 µs), the logits' .float() (aten::to, 599 µs), 24 casts in
    AddBackward0 (97 µs): 2.19 ms of 15.4 ms GPU busy — but the 61.5 ms step is host-bound, so info."""
    f = next(f for f in tracekit.open(str(SAMPLES / "train_eager.json.gz")).report().findings
             if f.rule == "dtype_cast")
    rows = {(e.name, e.count_per_step) for e in f.evidence}
    assert {("aten::linear", 122), ("aten::to", 1), ("AddBackward0", 24), ("ToCopyBackward0", 122)} <= rows
    assert 2_150_000 < f.cost_ns_per_step < 2_250_000
    assert f.severity == "info" and f.saving_wall_ns < 0.01 * 61_500_000
