"""The ``input_stall`` rule: the GPU sits idle while the host waits for the DataLoader's next batch.

Read from the step decomposition (:mod:`tracekit.analyses.decomposition`): its ``data`` state is
time under a data-loading span (``enumerate(DataLoader)#…__next__``, the iterator's ``__next__``
frame, a user ``data``/``get_batch`` annotation). What the stall costs is the part of that time
during which the device had no work at all (any stream, any unit, so a loader that overlaps the
previous step's kernels costs nothing) and the host was not blocked on it: the idle it caused,
measured in the trace (``resource="wall"``). Aggregated over the steady window
(:func:`tracekit.findings.evidence.costs_enough`): a loader that starves the GPU in 14 of 29 steps
fires, with the steps it hit. The step's verdict does not matter: a step that waits for data is
not made overhead-bound by it (the decomposition puts that wait in ``data``, never ``dispatch``).

Not this rule: GPU idle before a step's first launch while the host runs Python or
torch.compile's guards and prologue (``op_free``/``dispatch``: the compiled MLP) — no data span,
no input stall.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import decomposition
from tracekit.findings import wall
from tracekit.findings.detectors.host_wait import idle_while
from tracekit.findings.evidence import costs_enough
from tracekit.findings.model import Context, Evidence, Finding, Rule
from tracekit.findings.wall import WARN_MIN_NS, WARN_MIN_STEP_SHARE

#: The loader's iterator class when it runs in the main process (``num_workers=0``): every batch is
#: loaded, collated and transformed on the training thread.
SINGLE_PROCESS_ITER = "_SingleProcessDataLoaderIter"

RULE = Rule(
    id="input_stall",
    title="the GPU waits for the input pipeline (the host is in the DataLoader while the GPU idles)",
    severity="warning",
    needs="the decomposition's data state (DataLoader __next__, data annotations) against GPU busy",
    # The stall must cost the warning floor over the steady window (the wall's own floor: 1 % of the
    # median steady step and 20 µs), and a unit counts as hit when its own stall clears it.
    thresholds={"WARN_MIN_STEP_SHARE": WARN_MIN_STEP_SHARE, "WARN_MIN_NS": WARN_MIN_NS},
    fix=("load batches ahead of the step: DataLoader(num_workers=N>0, pin_memory=True, prefetch_factor>=2, "
         "persistent_workers=True), copies with non_blocking=True; with workers already, more workers or "
         "cheaper per-sample transforms"),
)


def detect(context: Context) -> list[Finding]:
    dec = context.decomposition
    if dec is None or dec.units.height == 0 or dec.units.filter(pl.col("data_ns") > 0).height == 0:
        return []
    spans = decomposition.host_spans(context.trace, context.gpu, dec.units["pid"].unique())
    data = spans.filter(pl.col("layer") == 2)
    stalls = context.in_steady(idle_while(context, data, spans.filter(pl.col("layer") == 1)))
    if stalls.height == 0:
        return []
    units = dec.units.filter(pl.col("step").is_in(context.steady))
    floor = wall.floor_ns(units)
    per_unit = stalls.group_by("step").agg(idle_ns=pl.col("idle_ns").sum(), ts=pl.col("ts").min())
    hit = per_unit.filter(pl.col("idle_ns") >= floor).sort("ts")
    ns_per_step = float(per_unit["idle_ns"].sum()) / context.n
    if hit.height == 0 or not costs_enough(context, hit["step"].to_list(), ns_per_step):
        return []
    names = (data.join(context.trace.ops.select("pid", "ts", "end", "name"), on=["pid", "ts", "end"])
             .sort(pl.col("end") - pl.col("ts"), descending=True)["name"].unique(maintain_order=True).to_list())
    name = names[0] if names else "data loading"
    data_ns = float(units["data_ns"].sum()) / context.n
    worst = hit.sort("idle_ns", descending=True).row(0, named=True)
    detail = (f"GPU idle {ns_per_step / 1e6:,.2f} ms per steady step while the host waited for data "
              f"({data_ns / 1e6:,.2f} ms per step in the loader), in {hit.height} of {len(context.steady)} "
              "steady steps")
    if SINGLE_PROCESS_ITER in name:
        detail += "; the loader runs in the main process (num_workers=0)"
    evidence = [Evidence("op", name, int(hit["step"][0]), int(hit["ts"][0]), round(hit.height / context.n, 3),
                         int(round(ns_per_step)), detail=detail),
                Evidence("step", _unit_name(context, worst["step"]), worst["step"], worst["ts"], 1.0,
                         int(worst["idle_ns"]), detail="the longest stall: GPU idle while the host waited for data")]
    return [RULE.finding(hit["step"].to_list(), evidence, ns_per_step, ns_per_step,
                         "the GPU idle while the host waited for the DataLoader, over the steady steps: gone if "
                         "the next batch is ready when the step asks for it",
                         resource="wall", stalled_steps=hit.height, data_ns_per_step=int(round(data_ns)))]


def _unit_name(context: Context, step: int) -> str:
    names = context.summary.filter(pl.col("step") == step)["name"]
    return names[0] if names.len() else f"step {step}"
