"""Peak ceilings of known GPUs: HBM bandwidth and dense tensor-core FLOP rates, by device name.

Contract: :func:`ceilings_for` matches a device name as the trace's ``deviceProperties`` writes it
(``"NVIDIA H200"``, ``"NVIDIA H100 80GB HBM3"``, ``"NVIDIA A100-SXM4-80GB"``, ``"AMD Instinct
MI300X"``…) against :data:`GPUS` and returns a ceilings dict, or None for an unknown device:

    {"device": str (the table's name), "hbm_bytes_per_s": float, "flops": {dtype: FLOP/s},
     "flops_per_s": float | None (for the requested dtype), "dtype": str, "source": "table",
     "reference": str}

Figures are the vendors' datasheet peaks, *dense* (NVIDIA quotes tensor rates "with sparsity"; those
are halved here), decimal units (1 TB/s = 1e12 B/s). ``fp32`` is the non-tensor FP32 rate, which is
what a PyTorch fp32 matmul gets unless TF32 is enabled; ``tf32`` is listed separately. Peaks are
upper bounds nobody reaches: the H200 sample manifest measured 4.26 TB/s (device copy) and
704 TFLOP/s (8192³ bf16 matmul) against 4.8 TB/s and 989 TFLOP/s here.

Overrides (:func:`apply_overrides`) take ``{"hbm_gbps": 4300, "bf16_tflops": 790, ...}`` (any of
``hbm_gbps``, ``<dtype>_tflops``) from flags or from a capture manifest's measured ``ceilings``
(:func:`manifest_overrides`).
"""

from __future__ import annotations

import re
from typing import Any

TB = 1e12
TFLOP = 1e12


def _gpu(name: str, pattern: str, hbm_tbps: float, bf16: float, fp16: float, fp32: float,
         tf32: float | None, fp8: float | None, reference: str) -> dict[str, Any]:
    flops = {"bf16": bf16 * TFLOP, "fp16": fp16 * TFLOP, "fp32": fp32 * TFLOP}
    if tf32 is not None:
        flops["tf32"] = tf32 * TFLOP
    if fp8 is not None:
        flops["fp8"] = fp8 * TFLOP
    return {"device": name, "pattern": re.compile(pattern, re.IGNORECASE),
            "hbm_bytes_per_s": round(hbm_tbps * 1000) * 1e9, "flops": flops, "reference": reference}


#: Ordered: the first pattern that matches the device name wins (specific variants before generic).
GPUS: tuple[dict[str, Any], ...] = (
    # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): H200 NVL 4.8 TB/s, BF16/FP16
    # 1,671 TFLOPS and FP8 3,341 with sparsity, FP32 60, TF32 835 (sparse).
    _gpu("H200 NVL", r"H200.*NVL", 4.8, 835.5, 835.5, 60.0, 417.5, 1670.5,
         "NVIDIA H200 datasheet (H200 NVL), dense = sparse/2"),
    # H200 SXM: 141 GB HBM3e at 4.8 TB/s; BF16/FP16 1,979 TFLOPS and FP8 3,958 with sparsity;
    # FP32 67; TF32 989 (sparse).
    _gpu("H200 SXM", r"H200|GH200.*144", 4.8, 989.5, 989.5, 67.0, 494.5, 1979.0,
         "NVIDIA H200 datasheet (H200 SXM), dense = sparse/2"),
    # NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100): H100 NVL 3.9 TB/s, BF16 1,671
    # sparse; FP32 60.
    _gpu("H100 NVL", r"H100.*NVL", 3.9, 835.5, 835.5, 60.0, 417.5, 1670.5,
         "NVIDIA H100 datasheet (H100 NVL), dense = sparse/2"),
    # H100 PCIe: 80 GB HBM2e at 2.0 TB/s; BF16/FP16 1,513 sparse; FP32 51; TF32 756 sparse.
    _gpu("H100 PCIe", r"H100.*PCIe", 2.0, 756.5, 756.5, 51.0, 378.0, 1513.0,
         "NVIDIA H100 datasheet (H100 PCIe), dense = sparse/2"),
    # H100 SXM5: 80 GB HBM3 at 3.35 TB/s; BF16/FP16 1,979 sparse; FP32 67; TF32 989 sparse.
    _gpu("H100 SXM", r"H100|GH200", 3.35, 989.5, 989.5, 67.0, 494.5, 1979.0,
         "NVIDIA H100 datasheet (H100 SXM), dense = sparse/2"),
    # NVIDIA A100 datasheet: BF16/FP16 312 dense (624 sparse), FP32 19.5, TF32 156 dense.
    # Bandwidth: 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB (SXM/PCIe) 1,555 GB/s.
    _gpu("A100 80GB PCIe", r"A100.*80GB.*PCIe|A100.*PCIe.*80GB", 1.935, 312.0, 312.0, 19.5, 156.0,
         None, "NVIDIA A100 datasheet (80GB PCIe)"),
    _gpu("A100 80GB SXM", r"A100.*80GB", 2.039, 312.0, 312.0, 19.5, 156.0, None,
         "NVIDIA A100 datasheet (80GB SXM)"),
    _gpu("A100 40GB", r"A100", 1.555, 312.0, 312.0, 19.5, 156.0, None,
         "NVIDIA A100 datasheet (40GB)"),
    # NVIDIA HGX B200 (nvidia.com/en-us/data-center/hgx): 8 GPUs, 64 TB/s HBM3e = 8 TB/s each;
    # per 8 GPUs FP16/BF16 36 PFLOPS, TF32 18, FP8 72 with sparsity; FP32 600 TFLOPS.
    _gpu("B200", r"B200", 8.0, 2250.0, 2250.0, 75.0, 1125.0, 4500.0,
         "NVIDIA HGX B200 datasheet, per GPU, dense = sparse/2"),
    # AMD Instinct MI300X datasheet: 5.3 TB/s HBM3; BF16/FP16 1,307.4 TFLOPS dense; FP32 (matrix
    # and vector) 163.4; TF32 653.7; FP8 2,614.9 dense.
    _gpu("MI300X", r"MI300X|gfx942", 5.3, 1307.4, 1307.4, 163.4, 653.7, 2614.9,
         "AMD Instinct MI300X datasheet"),
)

#: Short dtype names (as :data:`tracekit.shapes.DTYPE_SHORT` gives them) → the table's rate key.
DTYPE_RATE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "tf32": "tf32",
              "fp8e4m3": "fp8", "fp8e5m2": "fp8"}


def ceilings_for(device_name: str, dtype: str = "bf16") -> dict[str, Any] | None:
    """The datasheet ceilings of the GPU named ``device_name``, or None when it is not in the table."""
    if not device_name:
        return None
    for gpu in GPUS:
        if gpu["pattern"].search(device_name):
            flops = dict(gpu["flops"])
            return {
                "device": gpu["device"], "hbm_bytes_per_s": gpu["hbm_bytes_per_s"], "flops": flops,
                "flops_per_s": flops.get(DTYPE_RATE.get(dtype, dtype)), "dtype": dtype,
                "source": "table", "reference": gpu["reference"],
            }
    return None


OVERRIDE_KEYS = ("hbm_gbps", "bf16_tflops", "fp16_tflops", "fp32_tflops", "tf32_tflops", "fp8_tflops")


def apply_overrides(ceilings: dict[str, Any] | None, overrides: dict[str, Any] | None,
                    *, device: str = "unknown", dtype: str = "bf16") -> dict[str, Any] | None:
    """``ceilings`` with ``overrides`` ({"hbm_gbps": 4300, "bf16_tflops": 790}) applied.

    ``source`` becomes ``overrides["source"]`` when given (e.g. ``"manifest"``), else ``"flags"``.
    Unknown keys raise ValueError so a typo in a flag is not silently ignored.
    """
    if not overrides:
        return ceilings
    unknown = sorted(k for k in overrides if k not in OVERRIDE_KEYS and k != "source")
    if unknown:
        raise ValueError(f"unknown ceiling override(s): {', '.join(unknown)} "
                         f"(known: {', '.join(OVERRIDE_KEYS)})")
    base = dict(ceilings) if ceilings else {
        "device": device, "hbm_bytes_per_s": None, "flops": {}, "flops_per_s": None,
        "dtype": dtype, "reference": ""}
    flops = dict(base.get("flops") or {})
    if overrides.get("hbm_gbps") is not None:
        base["hbm_bytes_per_s"] = float(overrides["hbm_gbps"]) * 1e9
    for key, value in overrides.items():
        if key.endswith("_tflops") and value is not None:
            flops[key[: -len("_tflops")]] = float(value) * TFLOP
    base["flops"] = flops
    base["flops_per_s"] = flops.get(DTYPE_RATE.get(base.get("dtype", dtype), dtype))
    base["source"] = overrides.get("source", "flags")
    return base


def manifest_overrides(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Measured ceilings from a ``tracekit capture`` manifest (``device.ceilings``) as overrides.

    ``d2d_copy.TB_per_s`` counts bytes read + written, the same counting as the traffic model.
    """
    measured = (manifest.get("device") or {}).get("ceilings") or {}
    out: dict[str, Any] = {}
    copy = measured.get("d2d_copy") or {}
    if copy.get("TB_per_s"):
        out["hbm_gbps"] = float(copy["TB_per_s"]) * 1000.0
    for key, value in measured.items():
        match = re.match(r"matmul_(\w+?)_\d+$", key)
        if match and isinstance(value, dict) and value.get("TFLOP_per_s"):
            out[f"{match.group(1)}_tflops"] = float(value["TFLOP_per_s"])
    if not out:
        return None
    out["source"] = "manifest"
    return out


#: L2 (last-level on-chip) cache per device, by the table's name (:data:`GPUS` ``device``; vendors'
#: architecture whitepapers; MI300X: its 256 MiB Infinity Cache, which sits in front of HBM): what a
#: tensor must exceed to make a round trip through HBM rather than stay on chip.
L2_BYTES = {"H200 NVL": 50 << 20, "H200 SXM": 50 << 20, "H100 NVL": 50 << 20, "H100 PCIe": 50 << 20,
            "H100 SXM": 50 << 20, "A100 80GB PCIe": 40 << 20, "A100 80GB SXM": 40 << 20,
            "A100 40GB": 40 << 20, "B200": 126 << 20, "MI300X": 256 << 20}
