"""The ``zero_grad_fill`` rule: kernels inside ``Optimizer.zero_grad``: gradients filled with zeros instead of
set to None, priced by the fill kernels' GPU time.
"""

from __future__ import annotations

from tracekit.findings.detectors.annotated import by_op_inside, in_annotation
from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps
from tracekit.findings.model import Context, Finding, Rule

#: zero_grad filling: at least this many kernels in ``Optimizer.zero_grad`` per step (set_to_none
#: launches none).
ZERO_GRAD_MIN_KERNELS = 1


RULE = Rule(
    id="zero_grad_fill",
    title="zero_grad fills gradients with zeros instead of setting them to None",
    severity="warning",
    needs="kernels inside an Optimizer.zero_grad annotation",
    thresholds={"ZERO_GRAD_MIN_KERNELS": ZERO_GRAD_MIN_KERNELS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix="optimizer.zero_grad(set_to_none=True) (the default since torch 2.0)",
)


def detect(context: Context) -> list[Finding]:
    kernels = in_annotation(context, "Optimizer.zero_grad")
    if kernels.height / context.n < ZERO_GRAD_MIN_KERNELS:
        return []
    rows, steps = by_op_inside(context, kernels)
    if not enough_steps(context, steps):
        return []
    cost = float(kernels["dur"].sum()) / context.n
    return [RULE.finding(steps, as_evidence(rows), cost, cost,
                         "the fill kernels' GPU time (set_to_none launches none; backward then writes "
                         "gradients instead of adding to zeros)",
                         kernels_per_step=round(kernels.height / context.n, 3), resource="gpu")]
