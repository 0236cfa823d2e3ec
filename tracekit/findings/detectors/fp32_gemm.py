"""The ``fp32_gemm`` rule: GEMM kernels decoded as fp32 without tensor cores (math ``simt`` or ``fp32``),
priced against the device's tf32 peak.

The saving is GPU time (resource ``gpu``): on a step the host paces, TF32 shortens kernels the host
is not waiting for, and the wall price says so (≈ 0). The rule fires when the GEMMs' saving, over the
steady window, is at least the warning floor (:func:`tracekit.findings.evidence.costs_enough`).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule
from tracekit.findings.wall import WARN_MIN_NS, WARN_MIN_STEP_SHARE  # the floor costs_enough applies


RULE = Rule(
    id="fp32_gemm",
    title="float32 GEMMs run without tensor cores (SIMT / IEEE fp32, no TF32)",
    severity="warning",
    needs="GEMM kernels the classifier decodes as dtype fp32 with math simt or fp32",
    thresholds={"WARN_MIN_STEP_SHARE": WARN_MIN_STEP_SHARE, "WARN_MIN_NS": WARN_MIN_NS},
    fix=("torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision('high')) "
         "or torch.autocast(device_type='cuda', dtype=torch.bfloat16)"),
)


def detect(context: Context) -> list[Finding]:
    # Class first, then the decoded fields of the GEMMs' distinct ``decoded`` texts only (a few).
    gemms = context.steady_gpu.filter(pl.col("kernel_class") == "gemm")
    fp32 = gemms.select(pl.col("decoded").unique()).filter(
        (pl.col("decoded").str.json_path_match("$.dtype") == "fp32")
        & pl.col("decoded").str.json_path_match("$.math").is_in(["simt", "fp32"]))
    gemms = gemms.filter(pl.col("decoded").is_in(fp32.get_column("decoded").implode()))
    if gemms.height == 0:
        return []
    busy = float(context.in_steady(context.summary)["gpu_busy_ns"].sum()) / context.n
    cost = float(gemms["dur"].sum()) / context.n
    rows = grouped(context, gemms, ["cpu_op", "name"], "kernel", name="name", detail="cpu_op")
    rows = rows.with_columns(detail=pl.lit("launched by ") + pl.col("detail").fill_null("no op"))
    steps = steps_of(rows)
    flops = (context.ceilings or {}).get("flops") or {}
    saving, basis = None, "unknown device: no fp32/tf32 peak rates to compare"
    if flops.get("fp32") and flops.get("tf32"):
        saving = cost * (1 - flops["fp32"] / flops["tf32"])
        basis = (f"GEMM time × (1 − fp32 peak ÷ tf32 peak) = × (1 − {flops['fp32'] / 1e12:g} ÷ "
                 f"{flops['tf32'] / 1e12:g} TFLOP/s) for {context.ceilings.get('device')}")
    if busy <= 0 or not costs_enough(context, steps, cost if saving is None else saving):
        return []
    return [RULE.finding(steps, as_evidence(rows.head(6)), cost, saving, basis,
                         gemm_share_of_busy=round(cost / busy, 4), gemms_per_step=round(gemms.height / context.n, 3),
                         resource="gpu")]
