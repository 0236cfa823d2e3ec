"""The ``ddp_bucket_copy`` rule: DistributedDataParallel's reducer copying each gradient into its
all-reduce bucket (a copy run by AccumulateGrad's post-hook, in a process that runs DDP) — the copy
``gradient_as_bucket_view=True`` removes by making ``.grad`` a view of the bucket (:mod:`.copies`:
cause ``ddp_bucket``).
"""

from __future__ import annotations

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, cause_finding
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="ddp_bucket_copy",
    title="DDP copies every gradient into its all-reduce bucket",
    severity="warning",
    needs="copy kernels under AccumulateGrad's post-hook (DDP's reducer) in a process that runs DDP",
    thresholds={"COPY_MIN_BUSY_SHARE": COPY_MIN_BUSY_SHARE},
    fix=("DistributedDataParallel(model, gradient_as_bucket_view=True): gradients are then views of the "
         "buckets and are not copied (nor is the bucket copied back)"),
)


def detect(context: Context) -> list[Finding]:
    return cause_finding(context, "ddp_bucket", RULE,
                         "the bucket copies' GPU time (a gradient that is a bucket view is not copied)")
