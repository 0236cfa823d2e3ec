"""The ``dtype_cast`` rule: dtype casts made every step — autocast re-casting fp32 weights for each op
(``aten::linear > aten::to``), their gradients cast back (``ToCopyBackward0``), a loss's ``.float()`` of
the logits — by the op that asked for them (:mod:`.copies`: cause ``cast``, a copy kernel under
``aten::to``/``aten::_to_copy`` or the autograd node that casts back).
"""

from __future__ import annotations

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, cause_finding
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="dtype_cast",
    title="dtype casts in the hot path: tensors are converted between dtypes every step",
    severity="warning",
    needs="copy kernels under aten::to / aten::_to_copy (autocast's weight casts, explicit .to()/.float()) and "
          "ToCopyBackward0 (gradients cast back), by the op that asked for them",
    thresholds={"COPY_MIN_BUSY_SHARE": COPY_MIN_BUSY_SHARE},
    fix=("cast once, not every step: keep the weights in bf16 (model.to(torch.bfloat16), fp32 master weights in "
         "the optimizer) or run forward in one torch.autocast region so its weight-cast cache is reused; "
         "compute the loss from bf16 logits with a fused cross-entropy instead of .float() on the logits"),
)


def detect(context: Context) -> list[Finding]:
    return cause_finding(context, "cast", RULE,
                         "the casts' GPU time (a tensor kept in the dtype it is used in needs no cast)")
