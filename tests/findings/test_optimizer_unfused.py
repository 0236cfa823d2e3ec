"""optimizer_unfused: a for-loop optimizer, priced on what limits the step.

Family: torch.optim optimizers with ``foreach=False`` (or on types without foreach): several
per-parameter kernels inside ``Optimizer.step``. Host-bound loops pay the launches (the DLRM ranks'
Adagrad: 64 launches, ~0.29 ms of a 14.5 ms dispatch-bound step); GPU-bound loops pay the extra
passes over the state, which only a fused kernel removes — foreach does not (the planted sample's
foreach control is slower than its for-loop).
"""

from __future__ import annotations

from tracekit.findings.detectors import optimizer_unfused


def _rule(session):
    return {f.rule: f for f in session.report().findings}.get("optimizer_unfused")


def test_planted_for_loop_adamw_is_priced_by_the_fused_kernels_gpu_saving(sample):
    got = _rule(sample("antipatterns/antipatterns_optimizer-unfused"))
    assert got.severity == "warning" and got.resource == "gpu" and "fused=True" in got.fix
    assert got.quantities["kernels_per_step"] == 64 and got.evidence[0].detail == "inside Optimizer.step#AdamW.step"
    # 606.7 µs of for-loop GPU time per step × (1 − 0.4).
    assert got.saving_ns_per_step == round(got.quantities["gpu_ns_per_step"] * (1 - optimizer_unfused.FUSED_PASS_SHARE))
    # Measured against the fused control (antipatterns_healthy, aten::_fused_adamw_): 7.428 − 6.998 ms.
    planted = sample("antipatterns/antipatterns_optimizer-unfused").analyses().decomposition.units
    fused = sample("antipatterns/antipatterns_healthy").analyses().decomposition.units
    measured = planted["wall_ns"].median() - fused["wall_ns"].median()
    assert measured / 2 <= got.saving_wall_ns <= 2 * measured


def test_foreach_and_fused_controls_are_silent(sample):
    for name in ("antipatterns/antipatterns_optimizer-foreach", "antipatterns/antipatterns_healthy", "train_eager"):
        assert _rule(sample(name)) is None, name
