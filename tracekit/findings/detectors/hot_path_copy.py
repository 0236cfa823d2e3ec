"""The ``hot_path_copy`` rule: copy kernels and device-to-device memcpys, by the op that asked for them
(GEMM ops' memcpys are :mod:`~tracekit.findings.detectors.gemm_bias_seed`).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.copies import COPY_MIN_NS, GEMM_OPS, copy_finding, copy_rows, copy_work
from tracekit.findings.evidence import MIN_STEP_SHARE
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="hot_path_copy",
    title="extra copies in the hot path: an op copies a tensor every step",
    severity="warning",
    needs="copy kernels and device-to-device memcpys, by the op that asked for them",
    thresholds={"COPY_MIN_NS": COPY_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("drop the copy: use tensors as stored (F.linear takes the weight transposed), avoid "
         ".contiguous()/.clone()/.to() of device tensors in the step"),
)


def detect(context: Context) -> list[Finding]:
    copies = copy_work(context).filter(~pl.col("cpu_op").is_in(GEMM_OPS) | (pl.col("kind") != "memcpy"))
    if copies.height == 0:
        return []
    top = pl.col("top_op").str.replace(r"^autograd::engine::evaluate_function: ", "")
    return copy_finding(context, copy_rows(context, copies, top, pl.col("cpu_op")), RULE)
