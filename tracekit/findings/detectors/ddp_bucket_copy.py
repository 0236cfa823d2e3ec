"""The ``ddp_bucket_copy`` rule: DistributedDataParallel's reducer copying each gradient into its
all-reduce bucket (a copy run by AccumulateGrad's post-hook, in a process that runs DDP) — the copy
``gradient_as_bucket_view=True`` removes by making ``.grad`` a view of the bucket (:mod:`.copies`:
cause ``ddp_bucket``).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, copy_finding, copy_rows, of_cause, user_op
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
    copies = of_cause(context, "ddp_bucket")
    if copies.height == 0:
        return []
    return copy_finding(context, copy_rows(context, copies, user_op(), pl.col("cpu_op")), RULE,
                        basis="the bucket copies' GPU time (a gradient that is a bucket view is not copied)")
