"""The ``cold_first_step`` rule: the trace measured a cold start, a one-time cost that warm-up removes.

Two kinds of evidence, one cause:

- steps the step summary marks cold or warm-up (:mod:`tracekit.analyses.steps`: the first step, or
  a new shape's first, slower than twice the median of the others), each by its wall time above
  the median of the steady steps, when that excess is at least :data:`COLD_MIN_EXCESS_NS`. Steps
  holding a recompilation are left to the ``recompile`` rule, which prices their compile time;
- in a single-pass trace (one unit: nothing to compare with), the first launches of kernels that
  took milliseconds (:func:`tracekit.findings.detectors.host_wait.cold_launches`: CUDA lazy
  module loading, context creation), by their time.

Either way the price is paid once (``resource="once"``), never per step, and the fix is to profile
after warm-up.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.findings.detectors.host_wait import COLD_LAUNCH_MIN_NS, cold_launches
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Cold first step: wall time above this multiple of the median of the others (the step summary's
#: rule, :data:`tracekit.analyses.steps.COLD_STEP_FACTOR`).
COLD_FACTOR = steps_analysis.COLD_STEP_FACTOR
#: ... by at least this much: the profiler's first active step carries its own set-up (0.1–0.4 ms
#: on the H200 sample micro-benchmarks, twice a 64×64 matmul's step), while what warm-up removes
#: (CUDA context, cuBLAS/cuDNN handles, lazy module loading, autotuning) costs milliseconds or more.
COLD_MIN_EXCESS_NS = 1_000_000


RULE = Rule(
    id="cold_first_step",
    title="the trace measures a cold start (lazy init, module loading, autotuning inside the window)",
    severity="warning",
    needs="per-step wall time; in a single-pass trace, the first launch of each kernel",
    thresholds={"COLD_FACTOR": COLD_FACTOR, "COLD_MIN_EXCESS_NS": COLD_MIN_EXCESS_NS,
                "COLD_LAUNCH_MIN_NS": COLD_LAUNCH_MIN_NS},
    fix=("profile after warm-up: torch.profiler.schedule(wait=1, warmup=1, active=N), or run the model "
         "once before profiling (a single-pass trace measures CUDA context creation and lazy module loading)"),
)


def detect(context: Context) -> list[Finding]:
    summary = context.summary
    if summary.height == 1:
        return _single_pass(context)
    cold = summary.filter((pl.col("cold") | pl.col("warmup")) & ~pl.col("recompile"))
    others = summary.filter(pl.col("steady"))
    if cold.height == 0 or others.height == 0:
        return []
    median = float(others["wall_ns"].median())
    cold = cold.with_columns(excess=pl.col("wall_ns") - median).filter(pl.col("excess") >= COLD_MIN_EXCESS_NS)
    if cold.height == 0:
        return []
    evidence = [Evidence("step", r["name"], r["step"], r["cpu_start_ns"], 1.0, int(r["wall_ns"]),
                         detail=f"{r['wall_ns'] / median:,.1f}× the median steady step ({r['state']})")
                for r in cold.iter_rows(named=True)]
    excess = float(cold["excess"].sum())
    return [RULE.finding(cold["step"].to_list(), evidence, excess, excess,
                         "the cold steps' wall time above the median steady step (once, not every step; "
                         "recompiling steps are the recompile rule's)",
                         median_step_ns=int(median), once=True, resource="once")]


def _single_pass(context: Context) -> list[Finding]:
    slow = cold_launches(context)
    total = float(slow["dur"].sum()) if slow.height else 0.0
    if total < COLD_MIN_EXCESS_NS:
        return []
    ordered = slow.sort("dur", descending=True)
    evidence = [Evidence("launch", r["name"], r["step"], r["ts"], 1.0, int(r["dur"]),
                         detail=f"first launch of {r['kernel'][:80]}")
                for r in ordered.head(3).iter_rows(named=True)]
    return [RULE.finding([s for s in slow["step"].unique().to_list() if s is not None], evidence, total, total,
                         f"the {slow.height} first launches that took ≥ {COLD_LAUNCH_MIN_NS / 1e6:g} ms "
                         "(the driver loading code), once",
                         cold_launches=slow.height, once=True, resource="once")]
