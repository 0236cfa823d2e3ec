"""The ``input_stall`` rule: the GPU idle between a step's last activity and the next step's first, waiting
for its first launch (not for a synchronise that kept the CPU from running ahead).
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses.steps import SYNC_CALL_SUFFIX
from tracekit.findings.evidence import MIN_STEP_SHARE, enough_steps
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Input stall: the GPU idle before a step's first activity, waiting for its launch, for at least
#: this share of the step's wall time (less is the profiler's own step prologue) ...
STALL_MIN_SHARE = 0.10
#: ... and at least this long (a few tens of µs between steps is Python and the profiler).
STALL_MIN_NS = 100_000
#: A synchronise that ends within this of the GPU going idle was waiting for it (clocks of CPU and
#: GPU agree to a few µs on one host).
SYNC_SLACK_NS = 10_000


RULE = Rule(
    id="input_stall",
    title="the GPU waits for the CPU before each step's first launch (input pipeline stall)",
    severity="warning",
    needs="previous step's last GPU end, this step's first launch call and first GPU start",
    thresholds={"STALL_MIN_SHARE": STALL_MIN_SHARE, "STALL_MIN_NS": STALL_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("prefetch the next batch: DataLoader(num_workers>0, pin_memory=True, prefetch_factor), "
         "copies with non_blocking=True"),
)


def detect(context: Context) -> list[Finding]:
    work = context.gpu.filter(pl.col("step").is_not_null())
    if work.height == 0:
        return []
    per = (work.group_by("step").agg(first_ts=pl.col("ts").min(), last_end=pl.col("end").max(),
                                     first_launch=pl.col("launch_ts").min(),
                                     first_launch_end=pl.col("launch_end").min())
           .join(context.summary.select("step", "name", "cpu_start_ns", "wall_ns", "verdict"), on="step")
           .sort("cpu_start_ns")
           .with_columns(prev_end=pl.col("last_end").shift(1))
           .with_columns(idle=pl.col("first_ts") - pl.col("prev_end")))
    syncs = (context.launches.filter(pl.col("name").str.ends_with(SYNC_CALL_SUFFIX))
             .select(pl.col("end").alias("sync_end")).sort("sync_end"))
    # The last synchronise ending before the step's first launch: if it was still waiting when the
    # GPU went idle, the CPU could not run ahead (a sync after each step), not an input stall.
    per = (per.filter(pl.col("first_launch").is_not_null()).sort("first_launch")
           .join_asof(syncs, left_on="first_launch", right_on="sync_end", strategy="backward"))
    rows = context.in_steady(per).filter(
        (pl.col("sync_end").is_null() | (pl.col("sync_end") < pl.col("prev_end") - SYNC_SLACK_NS))
        & (pl.col("verdict") != "overhead-bound") & (pl.col("first_launch") >= pl.col("prev_end"))
        & (pl.col("idle") >= STALL_MIN_NS) & (pl.col("idle") >= STALL_MIN_SHARE * pl.col("wall_ns")))
    steps = rows["step"].to_list()
    if not enough_steps(context, steps):
        return []
    evidence = [Evidence("step", r["name"], r["step"], r["prev_end"], 1.0, int(r["idle"]),
                         detail=f"GPU idle from the previous step's last activity to this step's first; "
                                f"its first launch call at {r['first_launch']:,} ns")
                for r in rows.head(3).iter_rows(named=True)]
    idle = float(rows["idle"].median()) * len(steps) / context.n
    return [RULE.finding(steps, evidence, idle, idle,
                         "the idle time itself, if the next batch is ready when the step starts", resource="wall")]
