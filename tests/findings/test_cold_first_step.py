"""The ``cold_first_step`` rule: fires on a cold first step (the planted capture, a hand-built loop) and
on a single-pass trace whose first launches take milliseconds (lazy module loading: the public MoE
forward), as a one-time cost; silent on the profiler's sub-millisecond first-active-step artefact,
on a single pass of fast launches, and on the recompiling steps the recompile rule prices."""

from __future__ import annotations

import pytest
from answer_key import REAL_COPIES
from factory import make_kernel, make_launch, make_op, make_step, write_trace

import tracekit

KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")


def _cold(findings):
    return next((f for f in findings if f.rule == "cold_first_step"), None)


def _steps(tmp_path, step_us: list[float], *, first_launch_us: float = 5.0, launches: int = 1):
    """One step per ``step_us`` (10 µs apart), each with ``launches`` launches of one kernel; the very
    first launch of the trace takes ``first_launch_us``."""
    events, corr = [], 1
    t0 = 10.0
    for i, dur in enumerate(step_us):
        events.append(make_step(i, t0, dur))
        at = t0 + 10
        for _ in range(launches):
            call = first_launch_us if corr == 1 else 5.0
            events += [make_op("aten::fill_", at, call + 2), make_launch("cudaLaunchKernel", at + 1, call, corr),
                       make_kernel(KERNEL, at + call + 2, 3, corr)]
            at += call + 10
            corr += 1
        t0 += dur + 10
    return tracekit.open(str(write_trace(tmp_path / "t.json", events))).report().findings


def test_silent_on_the_profilers_first_active_step_artefact(tmp_path):
    # matmul_add_eager-64's shape: the first active step is 360 µs against 195 and 129 µs: 2.8x the
    # median, but 0.2 ms of profiler set-up is not a cold start worth warming up for.
    assert _cold(_steps(tmp_path, [360.0, 195.0, 129.0])) is None
    # 3 ms against 1 ms steps: a real cold step, 2 ms above the median, once.
    cold = _cold(_steps(tmp_path, [3000.0, 1000.0, 1000.0, 1000.0]))
    assert cold is not None and cold.steps == (0,) and cold.resource == "once"
    assert cold.saving_ns_per_step == 2_000_000 and cold.severity == "warning"


def test_a_single_pass_with_slow_first_launches_is_a_cold_run(tmp_path):
    # One unit of 40 ms whose first launch takes 30 ms (the driver loading the kernel's module), then
    # 30 launches of 5 µs: a cold run priced once at the slow launch, not launch overhead per step.
    found = _steps(tmp_path, [40_000.0], first_launch_us=30_000.0, launches=31)
    cold = _cold(found)
    assert cold is not None and cold.resource == "once" and cold.severity == "warning"
    assert cold.saving_ns_per_step == 30_000_000
    assert cold.evidence[0].name == "cudaLaunchKernel" and cold.evidence[0].dur_ns_per_step == 30_000_000
    assert "warm-up" in cold.fix
    assert not any(f.rule == "overhead_bound" for f in found)
    # The same pass with fast launches measured no cold start.
    assert _cold(_steps(tmp_path, [40_000.0], launches=31)) is None


def test_recompiling_steps_are_left_to_the_recompile_rule(sample):
    findings = sample("compile_sweep/mlp_compile-static-sweep").report().findings
    cold = _cold(findings)
    # mlp_fwd#0 holds the first compile; #4, #8 and #12 recompile (priced by the recompile rule).
    assert cold.steps == (0,)
    recompile = next(f for f in findings if f.rule == "recompile")
    assert set(recompile.steps) == {4, 8, 12}


def test_the_planted_cold_step_is_a_warning(sample):
    cold = _cold(sample("antipatterns/antipatterns_cold-first-step").report().findings)
    # ProfilerStep#0 lasts 218.5 ms against a 7.0 ms median steady step: 211.5 ms once.
    assert cold.severity == "warning" and cold.steps == (0,) and cold.evidence[0].name == "ProfilerStep#0"
    assert 211e6 < cold.saving_wall_ns < 212e6


def test_the_single_pass_moe_forward_is_a_cold_run():
    path = REAL_COPIES / "CodingPlatelets__SwitchTransformers__a100-80gb-moe-forward.json.gz"
    if not path.is_file():
        pytest.skip("the public MoE trace is not in tests/data/real")
    findings = tracekit.open(str(path)).report().findings
    cold = _cold(findings)
    # Recounted from the raw events: 18 first launches of a kernel take >= 1 ms, 486.5 ms in all
    # (347 ms for indexSelectLargeIndex).
    assert cold is not None and cold.quantities["cold_launches"] == 18
    assert cold.saving_ns_per_step == 486_502_000 and cold.evidence[0].dur_ns_per_step == 347_117_000
    assert not any(f.rule == "overhead_bound" for f in findings)
