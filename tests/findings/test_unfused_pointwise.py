"""unfused_pointwise: an elementwise chain whose intermediate round-trips through HBM, priced on what
limits the step.

Family: eager activations and their gates (GeGLU/SwiGLU: gelu→mul and the backward's products),
residual adds, scale/shift chains. A GPU-bound step pays the round trip's HBM time; a host-bound
step pays the extra op's dispatch — the fix (torch.compile, a fused kernel such as Liger's GeGLU)
removes both, and the finding carries whichever reaches the wall.
"""

from __future__ import annotations

import gzip
import json

from tracekit.findings.detectors import unfused_pointwise
from tracekit.findings.model import Context


def _rule(session):
    return {f.rule: f for f in session.report().findings}.get("unfused_pointwise")


def test_gpu_bound_training_loop_is_priced_by_hbm_traffic(sample):
    got = _rule(sample("antipatterns/antipatterns_pointwise-unfused"))
    assert got.severity == "warning" and got.resource == "gpu" and "torch.compile" in got.fix
    assert got.evidence[0].name == "aten::gelu → aten::mul" and got.evidence[0].detail == "[8192, 4096] fp32"
    # 16 [8192, 4096] fp32 tensors (16 · 8192 · 4096 · 4 = 2,147,483,648 B) written and read back per
    # step at 4.8 TB/s. Shape inference links none across aten::mse_loss and its backward (no traffic
    # model): the last block's forward products read by its backward are not counted (a floor).
    assert got.quantities["round_trip_bytes_per_step"] == 16 * 8192 * 4096 * 4 == 2_147_483_648
    assert got.saving_ns_per_step == round(2 * 2_147_483_648 / 4.8e12 * 1e9)
    # Measured against the compiled control: median steady step 10.70 ms vs 10.04 ms.
    planted = sample("antipatterns/antipatterns_pointwise-unfused").analyses().decomposition.units
    control = sample("antipatterns/antipatterns_pointwise-fused").analyses().decomposition.units
    measured = planted["wall_ns"].median() - control["wall_ns"].median()
    assert measured / 2 <= got.saving_wall_ns <= 2 * measured


def test_dispatch_bound_forward_is_priced_by_the_extra_ops_dispatch(sample):
    # mlp_eager: 1.50 ms steps with 0.23 ms of GPU work; fusing gelu→mul removes one op's dispatch,
    # the cheaper of the two: min(aten::gelu, aten::mul) CPU time per step, recounted from the raw events.
    raw = json.load(gzip.open("sample_traces/mlp_eager.json.gz"))["traceEvents"]
    ops = [e for e in raw if e.get("cat") == "cpu_op"]
    total = 0.0
    for step in (e for e in raw if e.get("name", "").startswith("ProfilerStep#")):
        inside = {e["name"]: e["dur"] for e in ops if step["ts"] <= e["ts"] < step["ts"] + step["dur"]}
        total += min(inside["aten::gelu"], inside["aten::mul"])
    got = _rule(sample("mlp_eager"))
    assert got.resource == "host" and got.severity == "warning"
    assert abs(got.saving_ns_per_step - total * 1000 / 3) <= 1
    # The HBM price alone (50 MB × 2 ÷ 4.8 TB/s = 21 µs) would reach the wall of this step only partly.
    assert got.quantities["hbm_ns_per_step"] == 20_971 < got.saving_wall_ns


def test_fused_controls_are_silent(sample):
    for name in ("antipatterns/antipatterns_pointwise-fused", "mlp_liger", "mlp_compile"):
        assert _rule(sample(name)) is None, name


def test_the_floor_is_half_the_devices_l2():
    # H200: 50 MiB of L2, so an intermediate under 25 MiB stays on chip between neighbours;
    # an unknown device falls back to 1 MiB.
    h200 = Context(*[None] * 8, ceilings={"device": "H200 SXM"})
    unknown = Context(*[None] * 8, ceilings=None)
    assert unfused_pointwise.min_bytes(h200) == 25 << 20
    assert unfused_pointwise.min_bytes(unknown) == unfused_pointwise.POINTWISE_MIN_BYTES == 1 << 20
