"""The ``occupancy_query`` rule: ``cudaOccupancy*`` calls on the launch path, by the op that makes them.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Occupancy queries: at least this many per step.
OCCUPANCY_MIN_PER_STEP = 1


RULE = Rule(
    id="occupancy_query",
    title="occupancy queries before launches (cudaOccupancy* calls on the launch path)",
    severity="info",
    needs="launch calls preceded by a cudaOccupancy* call in the same op",
    thresholds={"OCCUPANCY_MIN_PER_STEP": OCCUPANCY_MIN_PER_STEP, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("usually an op that sizes its grid on the fly (nonzero, sort, CUB); cache the launch "
         "configuration or avoid the op in the step"),
)


def detect(context: Context) -> list[Finding]:
    queries = context.in_steady(context.launches).filter(pl.col("name").str.starts_with("cudaOccupancy"))
    if queries.height / context.n < OCCUPANCY_MIN_PER_STEP:
        return []
    rows = grouped(context, queries.with_columns(call=pl.col("name")), ["top_op"], "op", name="top_op",
                   detail="call")
    steps = steps_of(rows)
    if not enough_steps(context, steps):
        return []
    cost = float(queries["dur"].sum()) / context.n
    return [RULE.finding(steps, as_evidence(rows), cost, cost,
                         "the queries' CPU time", queries_per_step=round(queries.height / context.n, 3), resource="host")]
