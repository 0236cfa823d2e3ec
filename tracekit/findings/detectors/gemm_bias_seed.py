"""The ``gemm_bias_seed`` rule: device-to-device memcpys a GEMM op launches (the output seeded with the bias
before the GEMM accumulates onto it): info, usually fine.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.copies import copy_finding, copy_rows, of_cause
from tracekit.findings.model import Context, Finding, Rule

#: An info note that names the DtoD memcpy a user sees beside a GEMM in the timeline: worth stating
#: from a quarter of the copy rules' floor (0.25 % of GPU busy), as it explains rather than asks a fix.
SEED_MIN_BUSY_SHARE = 0.0025

RULE = Rule(
    id="gemm_bias_seed",
    title="a device-to-device copy seeds a GEMM's output (torch.compile's addmm lowering)",
    severity="info",
    needs="device-to-device memcpys launched by a GEMM op (aten::addmm, aten::baddbmm)",
    thresholds={"SEED_MIN_BUSY_SHARE": SEED_MIN_BUSY_SHARE},
    fix=("usually fine (the GEMM accumulates onto the bias); a bias-free Linear or a bias epilogue "
         "avoids it"),
)


def detect(context: Context) -> list[Finding]:
    copies = of_cause(context, "gemm_seed")
    if copies.height == 0:
        return []
    return copy_finding(context, copy_rows(context, copies, pl.col("cpu_op"), pl.col("top_op")), RULE,
                        share=SEED_MIN_BUSY_SHARE)
