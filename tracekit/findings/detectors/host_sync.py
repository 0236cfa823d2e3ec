"""The ``host_sync`` rule: synchronise calls and device-to-host copies launched under a CPU op, priced
by the host's blocked time (:func:`tracekit.analyses.syncs.measure`).
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses.steps import SYNC_CALL_SUFFIX
from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule
from tracekit.trace import Trace

#: Host sync: blocked at least this long per step in syncs an op triggered (a sync of a few µs on
#: an idle device costs nothing; one that waits for queued work costs that work's latency).
SYNC_MIN_NS = 20_000


RULE = Rule(
    id="host_sync",
    title="an op synchronises the host with the GPU inside the step",
    severity="warning",
    needs="Synchronize calls and device-to-host copies launched under a CPU op (tracekit.diff.syncs)",
    thresholds={"SYNC_MIN_NS": SYNC_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("keep values on the device: no .item(), .cpu(), .tolist(), nonzero() or `if tensor:` in the "
         "step (log every N steps, torch.cuda.Event / non_blocking copies)"),
)


def detect(context: Context) -> list[Finding]:
    from tracekit.analyses import syncs

    launches = context.in_steady(context.launches).filter(pl.col("top_op").is_not_null())
    d2h = context.memcpys.filter(pl.col("direction") == "DtoH")
    d2h_idx = d2h["launch_idx"].drop_nulls().implode()
    # A pageable host-to-device copy synchronises by itself: pageable_copy prices it, not this rule
    # (a device-to-host copy synchronises because the host wants the value: that is this rule).
    pageable = context.memcpys.filter(pl.col("src") == "Pageable")[
        "op_idx"].drop_nulls().implode()
    blocking = launches.filter((pl.col("name").str.ends_with(SYNC_CALL_SUFFIX) | pl.col("idx").is_in(d2h_idx))
                               & ~pl.col("op_idx").is_in(pageable))
    if blocking.height == 0:
        return []
    windows = context.trace.steps.filter(pl.col("number").is_in(context.steady))
    measured, _ = syncs.measure(_with_launches(context.trace, blocking), context.gpu, windows)
    rows = grouped(context, blocking.with_columns(call=pl.col("name")), ["top_op"], "op", name="top_op",
                   detail="call", count="op_idx")
    rows = rows.with_columns(detail=pl.lit("blocks in ") + pl.col("detail"))
    steps = steps_of(rows)
    cost = float(measured["ns"].sum()) / context.n
    if cost < SYNC_MIN_NS or not enough_steps(context, steps):
        return []
    return [RULE.finding(steps, as_evidence(rows), cost, cost,
                         "the host's blocked time (tracekit.diff.syncs): the CPU could queue the next "
                         "work instead", syncs_per_step=round(blocking.height / context.n, 3), resource="wall")]


def _with_launches(trace: Trace, launches: pl.DataFrame) -> Trace:
    """``trace`` seeing only ``launches`` and no CPU op: ``aten::item`` counts as a sync only
    through the copy and synchronise it launches (``item()`` on a CPU tensor launches neither)."""
    from dataclasses import replace

    return replace(trace, launches=launches.select(trace.launches.columns),
                   ops=trace.ops.clear())
