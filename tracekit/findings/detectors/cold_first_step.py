"""The ``cold_first_step`` rule: steps marked cold or warm-up by the step summary: their wall time above the
median of the others, a one-time cost.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Cold first step: wall time above this multiple of the median of the others (the step summary's
#: rule, :data:`tracekit.analyses.steps.COLD_STEP_FACTOR`).
COLD_FACTOR = steps_analysis.COLD_STEP_FACTOR


RULE = Rule(
    id="cold_first_step",
    title="the first step is cold (lazy init, autotuning, allocator growth inside the window)",
    severity="warning",
    needs="per-step wall time",
    thresholds={"COLD_FACTOR": COLD_FACTOR},
    fix=("warm up before measuring: torch.profiler.schedule(wait=1, warmup=1, active=N) or skip the "
         "first steps"),
)


def detect(context: Context) -> list[Finding]:
    summary = context.summary
    cold = summary.filter(pl.col("cold") | pl.col("warmup"))
    if cold.height == 0:
        return []
    others = summary.filter(~(pl.col("cold") | pl.col("warmup")))
    median = float(others["wall_ns"].median()) if others.height else 0.0
    evidence = [Evidence("step", r["name"], r["step"], r["cpu_start_ns"], 1.0, int(r["wall_ns"]),
                         detail=f"{r['wall_ns'] / median:.1f}× the median step" if median else None)
                for r in cold.iter_rows(named=True)]
    excess = float((cold["wall_ns"] - median).sum())
    return [RULE.finding(cold["step"].to_list(), evidence, excess, excess,
                         "the cold steps' wall time above the median step (once, not every step)",
                         median_step_ns=int(median), once=True, resource="once")]
