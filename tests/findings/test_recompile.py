"""recompile: frame recompilations inside the trace, a one-time cost.

Family: torch.compile over changing input shapes: dynamic=False recompiles on every new dim 0,
the default promotes the dim to dynamic after the first change; dynamic=True never recompiles.
"""

from __future__ import annotations


def _rule(session):
    return {f.rule: f for f in session.report().findings}.get("recompile")


def test_static_sweep_recompiles_on_each_new_shape(sample):
    got = _rule(sample("compile_sweep/mlp_compile-static-sweep"))
    # The capture manifest counted 3 recompiles (calls 4, 8, 12: shape_change on dim 0).
    assert got.severity == "warning" and got.resource == "once" and got.quantities["recompiles"] == 3
    assert [e.name for e in got.evidence] == ["compile 0/1", "compile 0/2", "compile 0/3"]
    assert got.saving_ns_per_step == sum(e.dur_ns_per_step for e in got.evidence)
    assert "mark_dynamic" in got.fix


def test_dynamic_sweep_and_a_steady_compiled_loop_are_silent(sample):
    # Near miss: the same sweep compiled with dynamic=True compiles once; mlp_compile never changes shape.
    assert _rule(sample("compile_sweep/mlp_compile-dynamic-sweep")) is None
    assert _rule(sample("mlp_compile")) is None
