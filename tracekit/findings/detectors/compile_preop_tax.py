"""The ``compile_preop_tax`` rule: torch.compile's CPU wrappers (guards, pre-ops,
:func:`tracekit.analyses.dispatch.compile_preops`) per step: info (when they set the pace,
``overhead_bound`` is the warning).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Compile pre-op tax below this per step is not worth a line (always info: when the wrappers set
#: the pace, ``overhead_bound`` is the warning).
PREOP_MIN_NS = 10_000


RULE = Rule(
    id="compile_preop_tax",
    title="torch.compile's CPU wrappers (guards, pre-ops) cost time on every call",
    severity="info",
    needs="compile pre-ops per step (tracekit.analyses.dispatch.compile_preops)",
    thresholds={"PREOP_MIN_NS": PREOP_MIN_NS},
    fix=("CUDA graphs (mode='reduce-overhead') or fewer, larger compiled regions; "
         "torch._dynamo.config.cache_size_limit if it recompiles"),
)


def detect(context: Context) -> list[Finding]:
    preops = context.compile_preops
    if preops.height == 0 or "step" not in preops.columns:
        return []
    preops = context.in_steady(preops)
    if preops.height == 0:
        return []
    cost = float(preops["cpu_ns"].sum()) / context.n
    if cost < PREOP_MIN_NS:
        return []
    # Info only: when the wrappers set the pace, overhead_bound says so with the launch figures.
    busy = float(context.in_steady(context.summary)["gpu_busy_ns"].median() or 0)
    rows = (preops.group_by("name", "kind").agg(steps=pl.col("step").unique().sort(),
                                                first_step=pl.col("step").min(),
                                                per_step=pl.col("count").sum() / context.n,
                                                ns_per_step=pl.col("cpu_ns").sum() / context.n)
            .sort(["ns_per_step", "name"], descending=[True, False]))
    first_ts = context.trace.ops.filter(pl.col("name").is_in(rows["name"].implode())).group_by("name").agg(
        first_ts=pl.col("ts").min())
    rows = rows.join(first_ts, on="name", how="left").with_columns(
        role=pl.lit("op"), bytes_per_step=pl.lit(None, pl.Float64), detail=pl.col("kind"))
    return [RULE.finding(steps_of(rows), as_evidence(rows.head(6)), cost, None,
                         "not projected: CUDA graphs remove most of it, fewer regions part of it",
                         gpu_busy_ns=int(busy), resource="host")]
