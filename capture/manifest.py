"""The capture manifest: what was recorded, where, on what, and how fast.

Contract: ``<out>/manifest.json`` (schema ``tracekit.capture-manifest/1``, sorted keys) holds
``created_utc``, ``command``, ``device`` (name, sm_count, compute_capability, memory, ``ceilings``),
``versions`` (python, torch, triton, cuda, cudnn, kernels, liger_kernel, tracekit), ``settings``
(schedule, record_shapes, profile_memory, with_stack, execution_trace variants) and ``captures``: one
entry per variant/mode with ``status`` (``ok`` | ``failed`` | ``skipped``), shapes, dtype, label,
``trace_file``, ``timing``, ``correctness``, ``kernel_source`` (liger) and, when not ok, ``error``.
Entries add what their capture knows: the sweep ``calls``, ``ground_truth``, ``steady_timing`` and
``sweep`` (capture/sweep.py); an antipattern's ``planted``, ``evidence``, ``control``, ``control_for``,
``incidental``, ``steps``, ``schedule``, ``losses`` (capture/antipatterns.py); ``allocator`` with
``--profile-memory`` (capture/ground_truth.py); ``sync_after_each_step: false`` where the loop ran
without a per-step synchronise.
:meth:`Manifest.write` replaces the file atomically; the CLI calls it after every capture.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import platform
from pathlib import Path
from typing import Any

from capture.record import write_bytes_atomic
from tracekit.about import DISTRIBUTION

SCHEMA = "tracekit.capture-manifest/1"


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "triton": None,
        "kernels": _dist_version("kernels"),
        "liger_kernel": _dist_version("liger-kernel"),
        "tracekit": _dist_version(DISTRIBUTION),
    }
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    if out["tracekit"] is None:
        from tracekit import __version__

        out["tracekit"] = __version__
    return out


def device_info(device: str) -> dict[str, Any]:
    import torch

    if device != "cuda":
        return {"type": "cpu", "name": platform.processor() or platform.machine()}
    props = torch.cuda.get_device_properties(0)
    return {
        "type": "cuda",
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": props.total_memory,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "driver": _driver_version(),
    }


def _driver_version() -> str | None:
    try:
        import subprocess

        res = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )
        return res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _finite(obj: Any) -> Any:
    """Strict JSON has no NaN/Infinity: write them as strings a reader cannot mistake for a number."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class Manifest:
    """In-memory manifest, written whole (atomically) after every change."""

    def __init__(self, path: Path, *, command: str, device: dict, versions: dict, settings: dict) -> None:
        self.path = path
        self.doc: dict[str, Any] = {
            "schema": SCHEMA,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "command": command,
            "device": device,
            "versions": versions,
            "settings": settings,
            "captures": [],
        }

    @property
    def captures(self) -> list[dict[str, Any]]:
        return self.doc["captures"]

    def add(self, entry: dict[str, Any]) -> None:
        self.captures.append(entry)
        self.write()

    def write(self) -> None:
        text = json.dumps(_finite(self.doc), indent=2, sort_keys=True, allow_nan=False, default=str) + "\n"
        write_bytes_atomic(self.path, text.encode())
