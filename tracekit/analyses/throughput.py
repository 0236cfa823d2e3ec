"""Achieved throughput per kernel against the device's ceilings (a roofline per kernel).

Contract: :func:`analyze` takes the trace, its attribution and the ``traffic`` frame of
:func:`tracekit.analyses.round_trips.analyze`, and returns a frozen :class:`ThroughputReport`.

``device`` is the name of the device the kernels ran on (``deviceProperties`` entry whose id is the
kernels' most common ``device``; the first entry otherwise). ``ceilings`` is
:func:`tracekit.devices.ceilings_for` of it, with ``ceilings_override`` applied
(``{"hbm_gbps": 4300, "bf16_tflops": 790}``; ``source`` becomes ``"flags"``, or the override's own
``source`` such as ``"manifest"``); None when the device is unknown and nothing was given — then
every fraction is null.

``kernels`` — one row per kernel name and problem (same op model, dtype, bytes and FLOPs per call),
most total time first (then name and the other group keys, so the order is total):
    name str, kernel_class str, op str?, model str, dtype str?, math str? (the type the kernel
    computes in, rated against: the ``math`` its name shows — ``tf32`` for an fp32 GEMM run on tensor
    cores, ``sm90_xmma_gemm_f32f32_tf32f32_f32…`` — else ``dtype``), count u32, total_ns i64,
    mean_ns f64, bytes i64? (read + written, per call), flops i64? (per call),
    achieved_bytes_per_s f64?, achieved_flops_per_s f64?, achieved_gbps f64?, achieved_tflops f64?,
    peak_bytes_per_s f64?, peak_flops_per_s f64? (for the kernel's ``math``), frac_bw f64?,
    frac_flops f64?, intensity f64? (FLOP/byte), ridge f64? (peak FLOP/s ÷ peak B/s),
    bound str? ("memory" | "compute"), headline str ("flops" for GEMMs, "bytes" otherwise: the figure
    a report should show), headline_frac f64? (frac_flops or frac_bw accordingly)

Achieved rates are total bytes (FLOPs) over total kernel time across the group's calls, i.e. per-call
figure ÷ mean duration. Bytes follow the traffic model (each operand moved once); a kernel that
re-reads operands from HBM moves more than that, so ``frac_bw`` is a lower bound on its real
bandwidth use. Kernels without a model (``model == "unknown"``) keep null figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from tracekit import devices
from tracekit.analyses.attribution import Attribution
from tracekit.trace import Trace

#: Kernel classes whose headline figure is FLOP/s rather than bytes/s.
COMPUTE_CLASSES = frozenset({"gemm", "attention", "conv"})
KERNELS_SCHEMA = {
    "name": pl.String, "kernel_class": pl.String, "op": pl.String, "model": pl.String,
    "dtype": pl.String, "math": pl.String, "count": pl.UInt32, "total_ns": pl.Int64, "mean_ns": pl.Float64,
    "bytes": pl.Int64, "flops": pl.Int64, "achieved_bytes_per_s": pl.Float64,
    "achieved_flops_per_s": pl.Float64, "achieved_gbps": pl.Float64, "achieved_tflops": pl.Float64,
    "peak_bytes_per_s": pl.Float64, "peak_flops_per_s": pl.Float64, "frac_bw": pl.Float64,
    "frac_flops": pl.Float64, "intensity": pl.Float64, "ridge": pl.Float64, "bound": pl.String,
    "headline": pl.String, "headline_frac": pl.Float64,
}


@dataclass(frozen=True)
class ThroughputReport:
    """Per-kernel achieved bandwidth and FLOP rate against the device ceilings."""

    device: str
    ceilings: dict[str, Any] | None
    kernels: pl.DataFrame


def device_name(trace: Trace, attributed: Attribution | None = None) -> str:
    """The name of the device the trace's kernels ran on ("" when the trace names none)."""
    devs = trace.meta.devices
    if not devs:
        return ""
    if attributed is not None:
        counts = (attributed.gpu.filter((pl.col("kind") == "kernel") & pl.col("device").is_not_null())
                  .group_by("device").len().sort(["len", "device"], descending=[True, False]))
        if counts.height:
            top = counts.item(0, "device")  # the most kernels; the lowest id on a tie
            for d in devs:
                if d.id == top:
                    return d.name
    return devs[0].name


def _math_types(gpu: pl.DataFrame) -> pl.DataFrame:
    """``name, math``: the type each kernel computes in when its decoded name says one the device
    table rates (``tf32``, ``bf16``, …; the classifier's ``math`` field), one row per name."""
    if "decoded" not in gpu.columns:
        return pl.DataFrame(schema={"name": pl.String, "math": pl.String})
    # Parse each distinct ``decoded`` text once (tens of them on a million-kernel trace), not per row.
    rated = (gpu.select(pl.col("decoded").unique()).drop_nulls()
             .with_columns(math=pl.col("decoded").str.json_path_match("$.math"))
             .filter(pl.col("math").is_in(list(devices.DTYPE_RATE))))
    return (gpu.select("name", "decoded").filter(pl.col("decoded").is_in(rated.get_column("decoded").implode()))
            .unique("name", keep="first", maintain_order=True)
            .join(rated, on="decoded", how="left", maintain_order="left").select("name", "math"))


def analyze(trace: Trace, attributed: Attribution, traffic: pl.DataFrame, *,
            ceilings_override: dict[str, Any] | None = None) -> ThroughputReport:
    """Group kernels by name and problem, and rate them against the ceilings; pure."""
    name = device_name(trace, attributed)
    ceilings = devices.apply_overrides(devices.ceilings_for(name), ceilings_override, device=name or "unknown")
    kernels = traffic.filter(pl.col("kind") == "kernel").with_columns(
        bytes=pl.col("bytes_read") + pl.col("bytes_written"))
    if kernels.height == 0:
        return ThroughputReport(device=name, ceilings=ceilings, kernels=pl.DataFrame(schema=KERNELS_SCHEMA))
    grouped = kernels.group_by(["name", "kernel_class", "op", "model", "dtype", "bytes", "flops"]).agg(
        count=pl.len().cast(pl.UInt32), total_ns=pl.col("dur_ns").sum())
    grouped = grouped.join(_math_types(attributed.gpu), on="name", how="left").with_columns(
        math=pl.coalesce("math", "dtype"))
    hbm = (ceilings or {}).get("hbm_bytes_per_s")
    rates = (ceilings or {}).get("flops") or {}
    peak_flops = pl.col("math").replace_strict(
        {k: rates.get(v) for k, v in devices.DTYPE_RATE.items()}, default=None, return_dtype=pl.Float64)
    seconds = pl.col("total_ns").cast(pl.Float64) / 1e9
    out = grouped.with_columns(
        mean_ns=pl.col("total_ns").cast(pl.Float64) / pl.col("count"),
        achieved_bytes_per_s=pl.when(pl.col("total_ns") > 0).then(
            pl.col("bytes").cast(pl.Float64) * pl.col("count") / seconds),
        achieved_flops_per_s=pl.when(pl.col("total_ns") > 0).then(
            pl.col("flops").cast(pl.Float64) * pl.col("count") / seconds),
        peak_bytes_per_s=pl.lit(hbm, dtype=pl.Float64),
        peak_flops_per_s=peak_flops,
        intensity=pl.when(pl.col("bytes") > 0).then(pl.col("flops").cast(pl.Float64) / pl.col("bytes")),
    ).with_columns(
        achieved_gbps=pl.col("achieved_bytes_per_s") / 1e9,
        achieved_tflops=pl.col("achieved_flops_per_s") / 1e12,
        frac_bw=pl.col("achieved_bytes_per_s") / pl.col("peak_bytes_per_s"),
        frac_flops=pl.col("achieved_flops_per_s") / pl.col("peak_flops_per_s"),
        ridge=pl.col("peak_flops_per_s") / pl.col("peak_bytes_per_s"),
    ).with_columns(
        bound=pl.when(pl.col("intensity").is_null() | pl.col("ridge").is_null()).then(None)
        .when(pl.col("intensity") >= pl.col("ridge")).then(pl.lit("compute")).otherwise(pl.lit("memory")),
        headline=pl.when(pl.col("kernel_class").is_in(list(COMPUTE_CLASSES))).then(pl.lit("flops"))
        .otherwise(pl.lit("bytes")),
    ).with_columns(
        headline_frac=pl.when(pl.col("headline") == "flops").then(pl.col("frac_flops"))
        .otherwise(pl.col("frac_bw")),
    )
    keys = ["total_ns", "name", "kernel_class", "op", "model", "dtype", "bytes", "flops"]
    out = out.select(list(KERNELS_SCHEMA)).cast(KERNELS_SCHEMA).sort(
        keys, descending=[True] + [False] * (len(keys) - 1), nulls_last=True)
    return ThroughputReport(device=name, ceilings=ceilings, kernels=out)
