"""The ``occupancy_query`` rule: ``cudaOccupancy*`` calls on the launch path, by the op that makes them,
when that op is one the user chose and could replace.

PyTorch code never calls ``cudaOccupancy*`` itself: the queries come from inside an op sizing its own
launch. Inside a GEMM or convolution (cuBLAS, cuDNN, CUTLASS, MIOpen, rocBLAS) they are the library's
own heuristics — the user cannot cache or avoid them, and they are left out here. What remains are
ops that size their grid at run time through CUB (``nonzero``, ``unique``, ``sort``,
``masked_select``, embedding backward, fbgemm's sparse ops): still the op's own cost, which only
replacing the op removes. So the rule fires only when those queries cost at least the warning floor
over the steady window (:func:`tracekit.findings.evidence.costs_enough`), and stays info.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule
from tracekit.findings.wall import WARN_MIN_NS, WARN_MIN_STEP_SHARE  # the floor costs_enough applies

#: Kernel classes whose libraries (cuBLAS, cuDNN, CUTLASS, MIOpen, rocBLAS, hipBLASLt) query
#: occupancy inside their own heuristics: an op that launches one of these is a library call, not
#: a choice the user can undo.
LIBRARY_CLASSES = ("gemm", "conv", "attention")


RULE = Rule(
    id="occupancy_query",
    title="occupancy queries before launches (cudaOccupancy* calls of ops that size their grid at run time)",
    severity="info",
    needs="cudaOccupancy* calls made by ops that launch no GEMM/convolution/attention kernel",
    thresholds={"WARN_MIN_STEP_SHARE": WARN_MIN_STEP_SHARE, "WARN_MIN_NS": WARN_MIN_NS},
    fix=("the op (CUB-based: nonzero, unique, sort, masked_select, embedding backward) sizes its launch on "
         "every call; the query cannot be cached from user code — only replacing the op removes it (a "
         "fixed-size mask or torch.where instead of nonzero/masked_select, which also synchronise)"),
)


def detect(context: Context) -> list[Finding]:
    queries = context.in_steady(context.launches).filter(pl.col("name").str.starts_with("cudaOccupancy"))
    if queries.height == 0:
        return []
    library = context.gpu.filter(pl.col("kernel_class").is_in(LIBRARY_CLASSES)).get_column("op_idx").drop_nulls()
    queries = queries.filter(~pl.col("op_idx").is_in(library.unique().implode()))
    cost = float(queries["dur"].sum()) / context.n
    rows = grouped(context, queries.with_columns(call=pl.col("name")), ["cpu_op"], "op", name="cpu_op",
                   detail="call")
    steps = steps_of(rows)
    if queries.height == 0 or not costs_enough(context, steps, cost):
        return []
    return [RULE.finding(steps, as_evidence(rows), cost, cost,
                         "the queries' CPU time (replacing the op removes them, and its kernels' launches)",
                         queries_per_step=round(queries.height / context.n, 3), resource="host")]
