"""The ``kernel_time_varies`` rule: kernels launched equally often in every steady step whose time per step
spreads widely: info, the cause is outside the trace.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Kernel time varies: a kernel's time per step spread (max − min) at least this share of its
#: median per step ...
VARIANCE_MIN_SPREAD = 0.5
#: ... and at least this long (µs-scale kernels jitter by their own size).
VARIANCE_MIN_NS = 50_000


RULE = Rule(
    id="kernel_time_varies",
    title="a kernel's time varies widely between steps",
    severity="info",
    needs="a kernel's total time per steady step (same launches in every step)",
    thresholds={"VARIANCE_MIN_SPREAD": VARIANCE_MIN_SPREAD, "VARIANCE_MIN_NS": VARIANCE_MIN_NS},
    fix=("look for contention (other streams, clocks, another process) or data-dependent work; "
         "compare the slow step's neighbours in Perfetto"),
)


def detect(context: Context) -> list[Finding]:
    if len(context.steady) < 3:
        return []
    kernels = context.steady_gpu.filter(pl.col("kind") == "kernel")
    per = kernels.group_by("name", "step").agg(ns=pl.col("dur").sum(), count=pl.len(), ts=pl.col("ts").min())
    stats = (per.group_by("name").agg(steps=pl.col("step").sort(), n=pl.len(), counts=pl.col("count").n_unique(),
                                      lo=pl.col("ns").min(), hi=pl.col("ns").max(), med=pl.col("ns").median(),
                                      slow_step=pl.col("step").sort_by("ns").last(),
                                      slow_ts=pl.col("ts").sort_by("ns").last(),
                                      per_step=pl.col("count").median())
             .filter((pl.col("n") == len(context.steady)) & (pl.col("counts") == 1)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_NS)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_SPREAD * pl.col("med")))
             .sort(["hi", "name"], descending=[True, False]))
    if stats.height == 0:
        return []
    evidence = [Evidence("kernel", r["name"], r["slow_step"], r["slow_ts"], float(r["per_step"]), int(r["med"]),
                         detail=f"{r['lo']:,}–{r['hi']:,} ns per step")
                for r in stats.head(5).iter_rows(named=True)]
    cost = float((stats["hi"] - stats["med"]).sum())
    return [RULE.finding(list(context.steady), evidence, cost, None,
                         "not projected: the cause is outside the trace", kernels=stats.height, resource="gpu")]
