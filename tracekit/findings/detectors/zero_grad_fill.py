"""The ``zero_grad_fill`` rule: kernels inside ``Optimizer.zero_grad``: gradients filled with zeros instead of
set to None.

What ``set_to_none=True`` saves, measured in the trace: the fill kernels themselves, and in the next
backward the ``AccumulateGrad`` ``add_`` kernels that add each new gradient to the zeros (with
``None`` gradients, AccumulateGrad takes the new gradient as it is and launches nothing) — at most
one per zeroed tensor per step (with gradient accumulation over micro-batches, the later
micro-batches' adds stay). That GPU time is the saving; where the host sets the pace, the
zero_grad ops' own CPU time is (:func:`tracekit.findings.detectors.priced.best_resource`). The rule
fires when the saving over the steady window is at least the warning floor
(:func:`tracekit.findings.evidence.costs_enough`).
"""

from __future__ import annotations

import json

import polars as pl

from tracekit.findings.detectors.annotated import by_op_inside, in_annotation
from tracekit.findings.detectors.priced import best_resource
from tracekit.findings.evidence import as_evidence, costs_enough
from tracekit.findings.model import Context, Finding, Rule

#: zero_grad filling: at least this many kernels in ``Optimizer.zero_grad`` per step (set_to_none
#: launches none).
ZERO_GRAD_MIN_KERNELS = 1
#: The autograd node whose in-place ``add_`` accumulates a new gradient into an existing one.
ACCUMULATE_NODE = "AccumulateGrad"


RULE = Rule(
    id="zero_grad_fill",
    title="zero_grad fills gradients with zeros instead of setting them to None",
    severity="warning",
    needs="kernels inside an Optimizer.zero_grad annotation, and AccumulateGrad add_ kernels in backward",
    thresholds={"ZERO_GRAD_MIN_KERNELS": ZERO_GRAD_MIN_KERNELS},
    fix="optimizer.zero_grad(set_to_none=True) (the default since torch 2.0)",
)


def _tensors(dims: str | None) -> int:
    """How many tensors a zeroing op's ``Input Dims`` name: a foreach op's first argument is a list
    of shapes, ``zero_``/``fill_`` take one."""
    try:
        first = json.loads(dims or "")[0]
    except (ValueError, IndexError, TypeError):
        return 1
    return len(first) if isinstance(first, list) and first and isinstance(first[0], list) else 1


def detect(context: Context) -> list[Finding]:
    fills = in_annotation(context, "Optimizer.zero_grad")
    if fills.height / context.n < ZERO_GRAD_MIN_KERNELS:
        return []
    rows, steps = by_op_inside(context, fills)
    ops = context.trace.ops.select(pl.col("idx").alias("op_idx"), "input_dims", pl.col("dur").alias("op_dur"))
    zeroing = fills.select("step", "op_idx").unique().join(ops, on="op_idx", how="left")
    zeroed = zeroing.group_by("step").agg(
        tensors=pl.col("input_dims").fill_null("").map_elements(_tensors, return_dtype=pl.Int64).sum(),
        host=pl.col("op_dur").sum())
    # The first ``tensors`` accumulating adds of each step: those a None gradient would not launch.
    adds = (context.steady_gpu.filter((pl.col("kind") == "kernel") & (pl.col("cpu_op") == "aten::add_")
                                      & pl.col("top_op").fill_null("").str.contains(ACCUMULATE_NODE))
            .sort("ts").join(zeroed.select("step", "tensors"), on="step", how="inner")
            .filter(pl.int_range(pl.len()).over("step") < pl.col("tensors")))
    fill_ns = float(fills["dur"].sum()) / context.n
    add_ns = float(adds["dur"].sum()) / context.n
    host_ns = float(zeroed["host"].sum()) / context.n
    resource, saving = best_resource(context, {"gpu": fill_ns + add_ns, "host": host_ns or None})
    if not costs_enough(context, steps, saving or 0.0):
        return []
    evidence = as_evidence(rows)
    if adds.height:
        add_rows = by_op_inside(context, adds.with_columns(annotation=pl.col("top_op")))[0]
        evidence += as_evidence(add_rows.head(1))
    basis = ("the fill kernels' GPU time and the AccumulateGrad add_ kernels that add new gradients to "
             "the zeros (None gradients launch neither)" if resource == "gpu"
             else "the zero_grad ops' CPU time (set_to_none launches nothing; the host sets the pace)")
    return [RULE.finding(steps, evidence, fill_ns + add_ns, saving, basis,
                         kernels_per_step=round(fills.height / context.n, 3),
                         accumulate_adds_per_step=round(adds.height / context.n, 3),
                         fill_ns_per_step=int(fill_ns), add_ns_per_step=int(add_ns), resource=resource)]
