"""The ``hot_path_copy`` rule: layout copies the model's code makes every step — ``.contiguous()`` of a
transposed or strided view, a ``reshape``/``flatten`` that cannot stay a view, a ``.clone()`` the model
calls, and the copy AccumulateGrad makes when a gradient arrives in another layout than its parameter
— by the op that asked for them. Copies of other causes are other rules' (:mod:`.copies`): dtype casts
(``dtype_cast``), cat-grown caches (``kv_cache_cat``), convolution layout transposes
(``conv_layout_transpose``), DDP bucket copies (``ddp_bucket_copy``), GEMM output seeds
(``gemm_bias_seed``); KV-cache writes, FBGEMM permutes, fp8 cast-transposes, collectives' unpacking
and compiled graphs' own copies are no rule's.
"""

from __future__ import annotations

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, cause_finding
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="hot_path_copy",
    title="layout copies in the hot path: the model copies a tensor to change its layout every step",
    severity="warning",
    needs="copy kernels and device-to-device memcpys under aten::contiguous, a reshape's clone, a clone the "
          "model calls, or AccumulateGrad's copy of a gradient in another layout",
    thresholds={"COPY_MIN_BUSY_SHARE": COPY_MIN_BUSY_SHARE},
    fix=("avoid the copy and keep the layout: use tensors as stored (F.linear takes the weight as stored, "
         "no .t().contiguous()), drop defensive .clone(), transpose back instead of .contiguous() before a "
         "reshape; a gradient then arrives in its parameter's layout and AccumulateGrad need not copy it"),
)


def detect(context: Context) -> list[Finding]:
    return cause_finding(context, "layout", RULE, "the copies' GPU time (a copy not made costs nothing)")
