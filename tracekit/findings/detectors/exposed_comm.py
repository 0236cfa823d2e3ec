"""The ``exposed_comm`` rule: communication kernels (NCCL/RCCL collectives and the other kernels the
classifier files as ``communication``) that no compute kernel overlaps, for a large share of the step.

Per steady step, as HolisticTraceAnalysis' ``get_comm_comp_overlap`` (and
:mod:`tracekit.analyses.breakdown`'s overlap table) measure it: ``comm`` and ``compute`` are the
unions of the step's communication and other kernels, ``overlapped = |comm ∩ compute|`` and the
exposed communication is ``comm − overlapped``. The rule fires when the exposed communication is at
least :data:`EXPOSED_MIN_STEP_SHARE` of the steady steps' wall, in steps the GPU limits
(:data:`REQUIRED_LIMIT`). A ``communication-bound`` step (:func:`tracekit.analyses.steps.refine_verdict`:
exposed communication at least half its GPU busy time) is left to its verdict: there part or all of
the collectives' time may be this rank waiting for a late peer, which one trace cannot tell apart
(``tracekit report DIR`` names the rank the others waited for) — on the four such public ranks it
was waiting, and overlap tuning would not help.

The price. Overlap puts communication and compute side by side; the GPU's timeline then lasts
``max(comm, compute)`` instead of ``comm + compute − overlapped``, so the most overlap can save is
``min(comm, compute) − overlapped`` per step: the compute not yet hiding any communication. With
little compute (a step that mostly waits for its peers) the saving is small however long the
collectives are — that time is the peers' (rank skew, the many-ranks analysis), not overlap's. It
is GPU-timeline time, so ``resource="gpu"``: the wall gains it only where the host is not the limit
(:mod:`tracekit.findings.wall`). ``resource="wall"`` would claim it even in a host-bound step.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.breakdown import COMMUNICATION
from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Exposed communication worth a finding: 5 % of the step (the issue's bar; below it overlap tuning
#: — bucket sizes, prefetch — buys less than run-to-run variation of a multi-rank step).
EXPOSED_MIN_STEP_SHARE = 0.05
#: The steady steps' limit (:mod:`tracekit.analyses.decomposition`) under which the GPU's timeline is
#: the step's critical path, so that hiding communication shortens the step. A rank the host limits
#: gains nothing from a shorter GPU timeline, and there its long collectives are mostly the rank
#: waiting for its peers: on the public 8-rank DLRM step (dispatch-limited, 1 ms of compute in
#: 13-20 ms) rank 0's first all_to_all kernel takes 2146 µs, the straggler rank 7's 10 µs.
REQUIRED_LIMIT = "gpu"


RULE = Rule(
    id="exposed_comm",
    title="communication kernels run with no compute beside them (exposed on the step's critical path)",
    severity="warning",
    needs="communication and compute kernels of the steady steps, with the steps' wall",
    thresholds={"EXPOSED_MIN_STEP_SHARE": EXPOSED_MIN_STEP_SHARE, "REQUIRED_LIMIT": REQUIRED_LIMIT},
    fix=("overlap communication with compute: DDP's gradient buckets (bucket_cap_mb, no sync points "
         "in backward, gradient_as_bucket_view=True to skip the bucket copies), FSDP prefetch "
         "(forward_prefetch=True, backward_prefetch=BACKWARD_PRE), async collectives (async_op=True, "
         "wait() just before the result is used); on many ranks, first check that the time is not "
         "waiting for a late rank (tracekit report DIR)"),
)


def detect(context: Context) -> list[Finding]:
    kernels = context.steady_gpu.filter(pl.col("kind") == "kernel")
    is_comm = pl.col("kernel_class") == COMMUNICATION
    comm_rows = kernels.filter(is_comm)
    # Only where the GPU limits the step: in a communication-bound step one rank's trace cannot tell
    # transfer from waiting for a late peer (on the public DLRM ranks 1 and 3 and the TP2 Llama ranks
    # it is waiting: the answer key's verdicts), and the overlap fixes would be a confident wrong
    # answer. The step's verdict says communication-bound; ``tracekit report DIR`` names the late rank.
    if comm_rows.height == 0 or context.decomposition.limit != REQUIRED_LIMIT:
        return []

    def union(rows: pl.DataFrame, name: str) -> pl.DataFrame:
        return intervals.union_ns(rows.select("step", "ts", "end"), by=["step"]).rename({"busy_ns": name})

    steps = pl.DataFrame({"step": context.steady}, schema={"step": pl.Int64})
    per_step = (steps.join(union(comm_rows, "comm"), on="step", how="left")
                .join(union(kernels.filter(~is_comm), "compute"), on="step", how="left")
                .join(union(kernels, "both"), on="step", how="left").fill_null(0)
                .with_columns(overlapped=pl.col("comm") + pl.col("compute") - pl.col("both"))
                .with_columns(exposed=pl.col("comm") - pl.col("overlapped"),
                              hideable=(pl.min_horizontal("comm", "compute") - pl.col("overlapped"))
                              .clip(lower_bound=0)))
    wall = float(context.in_steady(context.decomposition.units)["wall_ns"].sum())
    exposed = float(per_step["exposed"].sum())
    n = context.n
    rows = grouped(context, comm_rows, ["name"], "kernel", name="name", detail="top_op")
    # ``grouped`` joins the distinct ops, "" when none: calls no op made.
    ops = pl.when(pl.col("detail") != "").then(pl.col("detail")).otherwise(pl.lit("no op"))
    rows = rows.with_columns(detail=pl.lit("launched by ") + ops)
    hit = steps_of(rows)
    saving = float(per_step["hideable"].sum()) / n
    if wall <= 0 or exposed < EXPOSED_MIN_STEP_SHARE * wall or not costs_enough(context, hit, saving):
        return []
    comm = float(per_step["comm"].sum())
    return [RULE.finding(hit, as_evidence(rows), exposed / n, saving,
                         "min(communication, compute) − their overlap per step: the compute that could "
                         "hide communication and does not (overlap can save no more)",
                         exposed_share_of_wall=round(exposed / wall, 3),
                         overlap_frac=round(1 - exposed / comm, 3) if comm else None, resource="gpu")]



