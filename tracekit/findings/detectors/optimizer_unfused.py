"""The ``optimizer_unfused`` rule: kernels inside ``Optimizer.step`` that are not ``multi_tensor_apply_kernel``:
a for-loop optimizer, priced by its launch calls' CPU time.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.annotated import by_op_inside, in_annotation
from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps
from tracekit.findings.model import Context, Finding, Rule

#: Unfused optimizer: at least this many non-multi-tensor kernels in ``Optimizer.step`` per step
#: (a fused or foreach optimizer launches a handful of ``multi_tensor_apply_kernel``; a for-loop
#: one launches several kernels per parameter).
OPTIMIZER_MIN_KERNELS = 8


RULE = Rule(
    id="optimizer_unfused",
    title="the optimizer runs a for-loop over parameters (no foreach/fused kernels)",
    severity="warning",
    needs="kernels inside an Optimizer.step annotation that are not multi_tensor_apply_kernel",
    thresholds={"OPTIMIZER_MIN_KERNELS": OPTIMIZER_MIN_KERNELS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix="torch.optim.AdamW(..., fused=True) (or foreach=True)",
)


def detect(context: Context) -> list[Finding]:
    kernels = in_annotation(context, "Optimizer.step").filter(
        pl.col("decoded").str.json_path_match("$.template").fill_null("") != "multi_tensor_apply_kernel")
    if kernels.height / context.n < OPTIMIZER_MIN_KERNELS:
        return []
    rows, steps = by_op_inside(context, kernels)
    if not enough_steps(context, steps):
        return []
    calls = context.launches.filter(pl.col("idx").is_in(kernels["launch_idx"].drop_nulls().implode()))
    launch_ns = float(calls["dur"].sum()) / context.n
    cost = float(kernels["dur"].sum()) / context.n
    return [RULE.finding(steps, as_evidence(rows.head(8)), cost + launch_ns, launch_ns,
                         "the per-parameter launch calls' CPU time (a fused optimizer launches a few)",
                         kernels_per_step=round(kernels.height / context.n, 3), gpu_ns_per_step=int(cost), resource="host")]
