"""The ``allocator_churn`` rule: the CUDA caching allocator going back to the driver in the steady
steps — ``cudaMalloc`` *and* ``cudaFree`` (``hipMalloc``/``hipFree``) calls there, step after step.

PyTorch's caching allocator keeps freed blocks and reuses them, so a warm loop makes no
``cudaMalloc``. It calls ``cudaFree`` only to give cached memory back: ``torch.cuda.empty_cache()``,
or an allocation that failed and retries after releasing the cache (memory pressure, fragmentation).
So frees in the steady window, recurring over steps, with allocations, is the allocator churning:
each call costs host time (``cudaMalloc`` of a large block takes hundreds of µs; ``cudaFree``
synchronises the device). A few ``cudaMalloc`` without any free is the pool still growing (a larger
batch, optimizer state made at its first step): it stops by itself, and is not this rule's. Priced by
the host time of the calls (``resource="host"``).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: The allocator's calls into the driver: CUDA runtime and HIP (the caching allocator's only ways to
#: get and return device memory without expandable segments).
MALLOC_CALLS = frozenset({"cudaMalloc", "hipMalloc"})
FREE_CALLS = frozenset({"cudaFree", "hipFree"})
#: Churn recurs: the frees must come back in at least this many steady steps. One step's free is a
#: one-time event (a single retry after an out-of-memory, one empty_cache() outside the loop).
MIN_CHURN_STEPS = 2


RULE = Rule(
    id="allocator_churn",
    title="the caching allocator calls cudaMalloc/cudaFree in the steady steps (memory returned and re-taken)",
    severity="warning",
    needs="cudaMalloc/cudaFree (hipMalloc/hipFree) calls in the steady steps, with their host time",
    thresholds={"MIN_CHURN_STEPS": MIN_CHURN_STEPS},
    fix=("keep the allocator's cache: no torch.cuda.empty_cache() in the loop; set "
         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation; lower the peak "
         "(smaller batch, activation checkpointing) when it runs near the memory limit"),
)


def detect(context: Context) -> list[Finding]:
    calls = context.in_steady(context.launches).filter(pl.col("name").is_in(list(MALLOC_CALLS | FREE_CALLS)))
    frees = calls.filter(pl.col("name").is_in(list(FREE_CALLS)))
    if frees.height == 0 or calls.filter(pl.col("name").is_in(list(MALLOC_CALLS))).height == 0:
        return []
    rows = grouped(context, calls, ["name"], "launch", name="name", detail="top_op")
    # ``grouped`` joins the distinct ops, "" when none: calls no op made.
    ops = pl.when(pl.col("detail") != "").then(pl.col("detail")).otherwise(pl.lit("no op"))
    rows = rows.with_columns(detail=pl.lit("under ") + ops)
    steps = steps_of(rows)
    cost = float(calls["dur"].sum()) / context.n
    freed_in = set(frees["step"].drop_nulls().to_list())
    if len(freed_in) < MIN_CHURN_STEPS or not costs_enough(context, steps, cost):
        return []
    return [RULE.finding(steps, as_evidence(rows), cost, cost,
                         "the host time of the cudaMalloc/cudaFree calls: a warm caching allocator makes none",
                         mallocs_per_step=round(calls.height / context.n - frees.height / context.n, 3),
                         frees_per_step=round(frees.height / context.n, 3), resource="host")]
