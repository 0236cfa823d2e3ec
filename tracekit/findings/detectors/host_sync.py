"""The ``host_sync`` rule: calls that block the host until the GPU has caught up, inside an op or in
none (a ``torch.cuda.synchronize()`` straight under the step), priced by the GPU idle they caused.

Which calls: every blocking call of the steady steps (:func:`tracekit.analyses.syncs.blocking_calls`:
synchronise calls, synchronous copies, copies to or from pageable memory) except those of the ops
``pageable_copy`` owns (:func:`tracekit.findings.detectors.pageable_copy.owned_ops`: a large pageable
copy and the synchronise after it are one blocked interval, priced there). So ``.item()``,
``.cpu()`` of a small tensor, ``.tolist()``, ``nonzero()``, a small pageable copy and its stream
synchronise, and op-less synchronise calls are this rule's — except an op-less synchronise that
ends its step (no launch of GPU work after it in the step): that is how benchmark, timing and
profiling loops delimit steps on purpose (``torch.cuda.synchronize()`` before the clock is read;
the sample captures do it), and the GPU idle after it is the next step's prologue, which the step
decomposition already charges to what the host did then (data loading, dispatch, Python). A
``.item()`` that ends the step (the loss logged every step) stays: that is the rule's own family.

The price is the GPU idle the calls caused (:mod:`tracekit.analyses.syncs`: while the host is
blocked it queues nothing, so once the work queued before the call drains the GPU idles, and keeps
idling in the gaps while the host, its lead lost, dispatches the rest of the step; at most the GPU
work the call waited for — not a collective, where the rank waits for its peers), measured in the
trace, so ``resource="wall"``. It is about 0 when the GPU stayed busy throughout: the host's blocked
time alone is not a saving. ``PAGEABLE_COPY_MIN_BYTES`` is the boundary with ``pageable_copy``.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import syncs
from tracekit.findings.detectors.pageable_copy import PAGEABLE_COPY_MIN_BYTES, owned_ops
from tracekit.findings.evidence import as_evidence, costs_enough
from tracekit.findings.model import Context, Finding, Rule
from tracekit.trace import KERNEL_LAUNCH_APIS

RULE = Rule(
    id="host_sync",
    title="the host waits for the GPU inside the step, and the GPU idles until it launches again",
    severity="warning",
    needs=("synchronise calls, synchronous and small pageable copies in the steady steps, with the GPU "
           "work around them (tracekit.analyses.syncs)"),
    thresholds={"PAGEABLE_COPY_MIN_BYTES": PAGEABLE_COPY_MIN_BYTES},
    fix=("keep values on the device: no .item(), .cpu(), .tolist(), nonzero(), `if tensor:` or "
         "torch.cuda.synchronize() in the step (log every N steps, torch.cuda.Event, copy from pinned "
         "memory with non_blocking=True)"),
)


def detect(context: Context) -> list[Finding]:
    launches = context.in_steady(context.launches)
    owned = owned_ops(context.memcpys)
    calls = syncs.blocking_calls(launches, context.memcpys).filter(
        ~pl.col("idx").is_in(owned["launch_idx"].drop_nulls().implode())
        & (pl.col("op_idx").is_null() | ~pl.col("op_idx").is_in(owned["op_idx"].drop_nulls().implode())))
    # The last launch of GPU work in each step: an op-less synchronise after it ends the step.
    last = (launches.filter(pl.col("name").is_in(list(KERNEL_LAUNCH_APIS)))
            .group_by("step").agg(_last_launch=pl.col("end").max()))
    calls = (calls.join(last, on="step", how="left")
             .filter(pl.col("top_op").is_not_null() | (pl.col("ts") < pl.col("_last_launch").fill_null(0)))
             .drop("_last_launch"))
    if calls.height == 0:
        return []
    limits = context.trace.steps.select(step="number", limit="end")
    calls = calls.join(limits, on="step", how="left", maintain_order="left")
    # An op-less call is named by itself: a synchronise straight under the step is the user's own.
    calls = syncs.idle_windows(calls, context.gpu).with_columns(
        role=pl.when(pl.col("top_op").is_null()).then(pl.lit("launch")).otherwise(pl.lit("op")),
        who=pl.coalesce("top_op", "name"))
    calls = syncs.idle_ns(calls, context.gpu)
    n = context.n
    rows = (calls.sort("ts").group_by("role", "who", maintain_order=True).agg(
        steps=pl.col("step").unique().sort(), first_step=pl.col("step").first(), first_ts=pl.col("ts").min(),
        per_step=pl.coalesce("op_idx", "idx").n_unique() / n,
        blocked_ns=pl.col("dur").sum() / n,
        detail=pl.col("call").unique(maintain_order=True).str.join(" + "), idle_ns=pl.col("idle_ns").sum() / n)
            .sort(["idle_ns", "blocked_ns", "who"], descending=[True, True, False])
            .select("role", name="who", steps="steps", first_step="first_step", first_ts="first_ts",
                    per_step="per_step", ns_per_step="blocked_ns", bytes_per_step=pl.lit(None, pl.Float64),
                    detail=pl.format("blocks in {}; GPU idle {} µs per step", "detail",
                                     (pl.col("idle_ns") / 1e3).round(1))))
    steps = sorted({s for ss in rows["steps"].to_list() for s in ss})
    caused = float(calls["idle_ns"].sum()) / n
    if not costs_enough(context, steps, caused):
        return []
    blocked = float(calls["dur"].sum()) / n
    return [RULE.finding(steps, as_evidence(rows), blocked, caused,
                         "the GPU idle the blocking calls caused (tracekit.analyses.syncs): from when the work "
                         "queued before them drained to the step's end, at most the GPU work (not "
                         "communication) they waited for",
                         syncs_per_step=round(calls.height / n, 3), blocked_ns_per_step=round(blocked),
                         resource="wall")]
