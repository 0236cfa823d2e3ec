"""The ``out_of_memory`` rule: ``[OutOfMemory]`` events of the trace's memory analysis
(:mod:`tracekit.analyses.memory`): the failed request, the totals, the op that asked.

Priced as a one-time cost (resource ``once``): the wall time of the steps it hit — a failed
allocation raises, and the work of that step is lost (or, when a caller catches it and retries,
done again) — so it is a warning whenever those steps are a visible part of the trace. An OOM
outside every step has no price and stays info.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Out of memory: one ``[OutOfMemory]`` event is an allocation the caching allocator could not serve
#: even after freeing its cache (the run raised, or a caller caught it and carried on degraded).
OOM_MIN_EVENTS = 1


RULE = Rule(
    id="out_of_memory",
    title="the caching allocator ran out of device memory ([OutOfMemory] events)",
    severity="warning",
    needs="[OutOfMemory] events: the failed request, the totals, the op that asked (tracekit.analyses.memory)",
    thresholds={"OOM_MIN_EVENTS": OOM_MIN_EVENTS},
    fix=("see the report's Memory section for what held the memory at the peak; lower the batch or sequence "
         "length, torch.utils.checkpoint for activations, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
         "when reserved far exceeds allocated"),
)


def detect(context: Context) -> list[Finding]:
    memory_rows = context.trace.memory
    if memory_rows.height == 0 or int(memory_rows["oom"].sum()) < OOM_MIN_EVENTS:
        return []
    found = context.memory
    if found is None:  # a caller without the memory analysis: build it (op tree included) only now
        from tracekit.analyses import memory

        found = memory.analyze(context.trace)
    ooms = steps_analysis.tag_steps(found.out_of_memory, context.trace.steps)
    if ooms.height < OOM_MIN_EVENTS:
        return []
    evidence = [Evidence("op", r["op"] or "(no op)", r["step"], r["ts"], bytes_per_step=r["bytes"],
                         detail=f"{r['device']}: {_bytes(r['bytes'])} requested with {_bytes(r['allocated'])} allocated, "
                                f"{_bytes(r['reserved'])} reserved")
                for r in ooms.head(10).iter_rows(named=True)]
    steps = sorted({s for s in ooms["step"].to_list() if s is not None})
    units = context.decomposition.units if context.decomposition is not None else None
    lost = (float(units.filter(pl.col("step").is_in(steps))["wall_ns"].sum())
            if units is not None and steps else None)
    return [RULE.finding(steps, evidence, lost or 0, lost or None,
                         "the wall time of the steps the failed allocation hit (their work is lost or redone)",
                         events=ooms.height, largest_request_bytes=int(ooms["bytes"].max() or 0), once=True,
                         resource="once")]


def _bytes(value: int | None) -> str:
    """A figure of the event, or that the event did not carry it (hand-edited or truncated traces)."""
    return "an unknown number of bytes" if value is None else f"{value:,} B"
