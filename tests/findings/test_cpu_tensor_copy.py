"""The ``cpu_tensor_copy`` rule (TorchTidy's ExtraCUDACopy): fires on a tensor filled on the CPU in the
step and copied to the device right after (``torch.zeros(n).to("cuda")``), priced at the host time of
the fill and the copy; silent on a batch copied without a fill before it (a DataLoader's batch), and
on every keyed trace today (their host-to-device copies are input batches and a few bytes of
indices)."""

from __future__ import annotations

from factory import make_kernel, make_launch, make_op, make_step, write_trace

import tracekit

GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def _loop(tmp_path, fill: bool):
    """Three 1 ms steps: (``fill``: aten::zeros over 50 µs, its aten::zero_ → aten::fill_ on the CPU),
    then aten::to over 240 µs copying 4 MiB host-to-device (pageable), then a 500 µs GEMM."""
    events = []
    for i in range(3):
        t0 = 10.0 + i * 1010.0
        events.append(make_step(i, t0, 1000.0))
        if fill:
            events += [make_op("aten::zeros", t0 + 10, 50), make_op("aten::empty", t0 + 11, 4),
                       make_op("aten::zero_", t0 + 16, 40), make_op("aten::fill_", t0 + 17, 38)]
        corr = 100 + 2 * i
        events += [make_op("aten::to", t0 + 70, 240), make_op("aten::_to_copy", t0 + 71, 238),
                   make_op("aten::copy_", t0 + 75, 230), make_launch("cudaMemcpyAsync", t0 + 80, 220, corr),
                   make_kernel("Memcpy HtoD (Pageable -> Device)", t0 + 90, 200, corr, kind="memcpy",
                               bytes=4 << 20),
                   make_op("aten::mm", t0 + 320, 10), make_launch("cudaLaunchKernel", t0 + 321, 5, corr + 1),
                   make_kernel(GEMM, t0 + 330, 500, corr + 1)]
    return tracekit.open(str(write_trace(tmp_path / "t.json", events))).report().findings


def _rule(findings):
    return next((f for f in findings if f.rule == "cpu_tensor_copy"), None)


def test_fires_on_a_tensor_filled_on_the_cpu_then_copied(tmp_path):
    found = _rule(_loop(tmp_path, fill=True))
    assert found is not None and found.severity == "warning" and found.resource == "host"
    assert found.steps == (0, 1, 2)
    (e,) = found.evidence
    assert e.name == "aten::to" and e.count_per_step == 1
    assert e.detail == "aten::zeros on the CPU (aten::zero_), then copied to the device"
    assert found.cost_ns_per_step == 290_000  # the 50 µs fill and the 240 µs copy call
    assert "device=" in found.fix


def test_silent_on_a_batch_copied_without_a_fill(tmp_path):
    assert _rule(_loop(tmp_path, fill=False)) is None
