"""The ``kernel_time_varies`` rule: one kernel, launched with the same shape the same number of times in
several steady steps, whose time per step spreads widely: info, the cause is outside the trace.

The shape is part of the kernel's identity: a kernel is grouped by its name, its launch grid and block
(the kernel row's ``grid``/``block``) and the input dims of the op that launched it (``Input Dims``).
A shape sweep (a serving loop over batch sizes, a benchmark over sizes) then makes one group per
shape, and a spread is only claimed within one shape — the shape is the variance otherwise. A kernel
whose trace records neither launch geometry nor input dims cannot be told apart by shape and is left
alone.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Kernel time varies: a kernel's time per step spread (max − min) at least this share of its
#: median per step ...
VARIANCE_MIN_SPREAD = 0.5
#: ... and at least this long (µs-scale kernels jitter by their own size).
VARIANCE_MIN_NS = 50_000
#: ... over at least this many steady steps with the same shape and launch count (two points are a
#: difference, not a spread; three make a slow step stand out from its neighbours).
VARIANCE_MIN_STEPS = 3


RULE = Rule(
    id="kernel_time_varies",
    title="a kernel's time varies widely between steps at the same shape",
    severity="info",
    needs="a kernel's total time per steady step, by launch grid/block and input dims (same launches per step)",
    thresholds={"VARIANCE_MIN_SPREAD": VARIANCE_MIN_SPREAD, "VARIANCE_MIN_NS": VARIANCE_MIN_NS,
                "VARIANCE_MIN_STEPS": VARIANCE_MIN_STEPS},
    fix=("look for contention (other streams, clocks, another process) or data-dependent work; "
         "compare the slow step's neighbours in Perfetto"),
)


def shaped_kernels(context: Context) -> pl.DataFrame:
    """The steady kernels with ``shape`` (String): grid, block and the launching op's input dims;
    null when the trace records none of them."""
    kernels = context.steady_gpu.filter(pl.col("kind") == "kernel")
    dims = context.trace.ops.select(pl.col("idx").alias("op_idx"), "input_dims")
    kernels = kernels.join(dims, on="op_idx", how="left") if "op_idx" in kernels.columns else (
        kernels.with_columns(input_dims=pl.lit(None, pl.String)))
    known = pl.any_horizontal(pl.col("grid").is_not_null(), pl.col("block").is_not_null(),
                              pl.col("input_dims").is_not_null())
    shape = pl.concat_str([pl.lit("grid "), pl.col("grid").fill_null("?"), pl.lit(" block "),
                           pl.col("block").fill_null("?"), pl.lit(" dims "), pl.col("input_dims").fill_null("?")])
    return kernels.with_columns(shape=pl.when(known).then(shape))


def detect(context: Context) -> list[Finding]:
    if len(context.steady) < VARIANCE_MIN_STEPS:
        return []
    kernels = shaped_kernels(context).filter(pl.col("shape").is_not_null())
    per = kernels.group_by("name", "shape", "step").agg(ns=pl.col("dur").sum(), count=pl.len(), ts=pl.col("ts").min())
    stats = (per.group_by("name", "shape").agg(n=pl.len(), counts=pl.col("count").n_unique(),
                                               lo=pl.col("ns").min(), hi=pl.col("ns").max(), med=pl.col("ns").median(),
                                               slow_step=pl.col("step").sort_by("ns").last(),
                                               slow_ts=pl.col("ts").sort_by("ns").last(),
                                               steps=pl.col("step").sort(),
                                               per_step=pl.col("count").median())
             .filter((pl.col("n") >= VARIANCE_MIN_STEPS) & (pl.col("counts") == 1)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_NS)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_SPREAD * pl.col("med")))
             .sort(["hi", "name", "shape"], descending=[True, False, False]))
    if stats.height == 0:
        return []
    evidence = [Evidence("kernel", r["name"], r["slow_step"], r["slow_ts"], float(r["per_step"]), int(r["med"]),
                         detail=f"{r['lo']:,}–{r['hi']:,} ns per step over {r['n']} steps at {r['shape']}")
                for r in stats.head(5).iter_rows(named=True)]
    cost = float((stats["hi"] - stats["med"]).sum())
    steps = sorted({s for steps in stats["steps"].to_list() for s in steps})
    return [RULE.finding(steps, evidence, cost, None, "not projected: the cause is outside the trace",
                         kernels=stats.height, resource="gpu")]
