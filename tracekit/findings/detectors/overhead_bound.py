"""The ``overhead_bound`` rule: steps whose CPU dispatch outruns the GPU's work by far, with enough launches
for CUDA graphs or torch.compile to take off the CPU (the step verdict ``overhead-bound``).
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.findings.evidence import MIN_STEP_SHARE, enough_steps
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Overhead-bound: CPU dispatch at least this multiple of GPU busy (the study's "CPU ≫ GPU", as the
#: step verdict takes it: :data:`tracekit.analyses.steps.OVERHEAD_BOUND_MIN_CPU_OVER_GPU`).
OVERHEAD_CPU_OVER_GPU = steps_analysis.OVERHEAD_BOUND_MIN_CPU_OVER_GPU
#: ... with at least this many launch calls per step: the remedies (CUDA graphs, compile) remove
#: launch overhead, which needs launches to be there; a step of a few launches whose CPU time
#: dominates is bound by Python or by the profiler's own per-op cost (``record_shapes``), which a
#: trace cannot tell from dispatch (the sample Liger and compiled MLPs: 6 and 4 launches, GPU-bound
#: outside the profiler).
OVERHEAD_MIN_LAUNCHES = 20


RULE = Rule(
    id="overhead_bound",
    title="steps are overhead-bound: the CPU issues work slower than the GPU runs it",
    severity="warning",
    needs="per-step CPU dispatch vs GPU busy; launch calls per step and their mean cost",
    thresholds={"OVERHEAD_CPU_OVER_GPU": OVERHEAD_CPU_OVER_GPU, "OVERHEAD_MIN_LAUNCHES": OVERHEAD_MIN_LAUNCHES,
                "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile, "
         "or a larger batch"),
)


def detect(context: Context) -> list[Finding]:
    rows = context.in_steady(context.summary).filter(pl.col("verdict") == "overhead-bound")
    steps = rows["step"].to_list()
    if not enough_steps(context, steps):
        return []
    calls = context.launches.filter(pl.col("step").is_in(steps) & pl.col("gpu_kinds").list.len().gt(0))
    per_step = calls.height / len(steps)
    if per_step < OVERHEAD_MIN_LAUNCHES:
        return []
    mean_call = calls["dur"].mean() if calls.height else 0
    idle = float((rows["wall_ns"] - rows["gpu_busy_ns"]).median())
    first = rows.row(0, named=True)
    evidence = [Evidence("step", first["name"], first["step"], first["cpu_start_ns"], 1.0,
                         int(first["cpu_dispatch_ns"]),
                         detail=f"CPU dispatch {first['cpu_dispatch_ns']:,} ns vs GPU busy "
                                f"{first['gpu_busy_ns']:,} ns"),
                Evidence("launch", "launch calls", first["step"],
                         int(calls["ts"].min()) if calls.height else None, round(per_step, 3),
                         int(round(per_step * (mean_call or 0))), detail=f"mean {mean_call or 0:,.0f} ns per call")]
    return [RULE.finding(steps, evidence, idle, per_step * (mean_call or 0),
                         "launch overhead × launches per step (what CUDA graphs take off the CPU)",
                         launches_per_step=round(per_step, 3), mean_launch_ns=int(mean_call or 0),
                         gpu_busy_ns=int(rows["gpu_busy_ns"].median()),
                         cpu_dispatch_ns=int(rows["cpu_dispatch_ns"].median()), resource="host")]
