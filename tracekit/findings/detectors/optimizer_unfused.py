"""The ``optimizer_unfused`` rule: kernels inside ``Optimizer.step`` that are not ``multi_tensor_apply_kernel``:
a for-loop optimizer.

A fused optimizer saves two things: the per-parameter launch calls (host time) and GPU time — it
moves each state tensor once (:data:`FUSED_PASS_SHARE`) where the for-loop's elementwise ops each
read and write their own. Both are projected on the wall and the finding carries the one that
saves more (:func:`tracekit.findings.detectors.priced.best_resource`): launches where the host sets
the pace, GPU time where the GPU does. ``foreach=True`` only saves launches: its
``multi_tensor_apply`` kernels still make one pass per op, and on a GPU-bound step it can be slower
than the for-loop (the planted sample's foreach control is). The rule fires when the saving over
the steady window is at least the warning floor (:func:`tracekit.findings.evidence.costs_enough`).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.annotated import by_op_inside, in_annotation
from tracekit.findings.detectors.priced import best_resource
from tracekit.findings.evidence import as_evidence, costs_enough
from tracekit.findings.model import Context, Finding, Rule

#: Unfused optimizer: at least this many non-multi-tensor kernels in ``Optimizer.step`` per step
#: (a fused or foreach optimizer launches a handful of ``multi_tensor_apply_kernel``; a for-loop
#: one launches several kernels per parameter).
OPTIMIZER_MIN_KERNELS = 8
#: The share of the for-loop's GPU time a fused optimizer still takes: it reads param, grad and the
#: state once and writes them back once (AdamW: 7 tensor passes; Adagrad: 5), where the for-loop's
#: ops make ~20 (AdamW: lerp_, mul_, addcmul_, sqrt, div, add_, mul_, addcdiv_) and ~11 (Adagrad).
#: The planted AdamW sample: for-loop 607 µs of GPU per step, fused 264 µs (0.43).
FUSED_PASS_SHARE = 0.4


RULE = Rule(
    id="optimizer_unfused",
    title="the optimizer runs a for-loop over parameters (no foreach/fused kernels)",
    severity="warning",
    needs="kernels inside an Optimizer.step annotation that are not multi_tensor_apply_kernel",
    thresholds={"OPTIMIZER_MIN_KERNELS": OPTIMIZER_MIN_KERNELS, "FUSED_PASS_SHARE": FUSED_PASS_SHARE},
    fix=("fused=True where the optimizer has a CUDA fused kernel (torch.optim.Adam/AdamW/SGD(..., fused=True)), "
         "else foreach=True; foreach saves only the launches and can be slower on a GPU-bound step"),
)


def detect(context: Context) -> list[Finding]:
    kernels = in_annotation(context, "Optimizer.step").filter(
        pl.col("decoded").str.json_path_match("$.template").fill_null("") != "multi_tensor_apply_kernel")
    if kernels.height / context.n < OPTIMIZER_MIN_KERNELS:
        return []
    rows, steps = by_op_inside(context, kernels)
    calls = context.launches.filter(pl.col("idx").is_in(kernels["launch_idx"].drop_nulls().implode()))
    launch_ns = float(calls["dur"].sum()) / context.n
    cost = float(kernels["dur"].sum()) / context.n
    resource, saving = best_resource(context, {"host": launch_ns, "gpu": cost * (1 - FUSED_PASS_SHARE)})
    if not costs_enough(context, steps, saving or 0.0):
        return []
    basis = ("the per-parameter launch calls' CPU time (a fused optimizer launches a few)" if resource == "host"
             else f"the for-loop's GPU time × (1 − {FUSED_PASS_SHARE:g}): a fused kernel moves each state "
                  "tensor once")
    return [RULE.finding(steps, as_evidence(rows.head(8)), cost + launch_ns, saving, basis,
                         kernels_per_step=round(kernels.height / context.n, 3), gpu_ns_per_step=int(cost),
                         launch_ns_per_step=int(launch_ns), resource=resource)]
