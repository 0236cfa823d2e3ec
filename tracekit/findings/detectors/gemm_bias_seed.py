"""The ``gemm_bias_seed`` rule: device-to-device memcpys a GEMM op launches (the output seeded with the bias
before the GEMM accumulates onto it): info, usually fine.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.copies import COPY_MIN_NS, GEMM_OPS, copy_finding, copy_rows, copy_work
from tracekit.findings.evidence import MIN_STEP_SHARE
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="gemm_bias_seed",
    title="a device-to-device copy seeds a GEMM's output (torch.compile's addmm lowering)",
    severity="info",
    needs="device-to-device memcpys launched by a GEMM op (aten::addmm, aten::baddbmm)",
    thresholds={"COPY_MIN_NS": COPY_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("usually fine (the GEMM accumulates onto the bias); a bias-free Linear or a bias epilogue "
         "avoids it"),
)


def detect(context: Context) -> list[Finding]:
    copies = copy_work(context).filter(pl.col("cpu_op").is_in(GEMM_OPS) & (pl.col("kind") == "memcpy"))
    if copies.height == 0:
        return []
    return copy_finding(context, copy_rows(context, copies, pl.col("cpu_op"), pl.col("top_op")), RULE)
