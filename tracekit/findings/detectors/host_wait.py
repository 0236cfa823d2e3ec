"""What the stall, cold-run and overhead rules share: how long the GPU sat idle while the host was
in one state, and which launch calls were the driver loading a kernel for the first time.

Contract: :func:`idle_while` takes host segments (``pid str, ts i64, end i64`` plus any columns)
and returns them tagged with their unit (``step i64``, clipped to its CPU span) and the part of
each during which the device had no work and the host was not blocked on it: ``idle_ns i64`` (none
at all on a trace without a device: CPU-only).
:func:`cold_launches` returns the kernel launch calls that took at least
:data:`COLD_LAUNCH_MIN_NS` and were the first launch of their kernel in the trace:
``idx u32, name str, ts i64, dur i64, step i64?, kernel str``, sorted by ``ts``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.steps import tag_steps
from tracekit.findings.model import Context

#: A kernel launch call this long is not launch overhead (a launch costs 2–20 µs; a full launch
#: queue blocks for about one kernel's time): on the first launch of a kernel it is the driver
#: loading the kernel's module (CUDA lazy loading) or creating the context. Seen in the public
#: traces: 1–347 ms first launches of single-pass forwards (A100 MoE, RTX 4090 TP2 Llama).
COLD_LAUNCH_MIN_NS = 1_000_000
#: Launch calls of kernels (not copies, memsets or graph replays): the calls that lazy loading slows.
KERNEL_LAUNCH_PATTERN = r"^(?:cuda|cu|hip|hipExt)(?:Module)?LaunchKernel(?:ExC|Ex)?(?:_v\d+)?$"


def covered_ns(ts: np.ndarray, end: np.ndarray, cover: pl.DataFrame) -> np.ndarray:
    """Per segment ``[ts, end)``, the length covered by the union of ``cover`` (``ts, end``)."""
    merged = intervals.merge(cover.select("ts", "end")) if cover.height else cover
    if merged.height == 0 or len(ts) == 0:
        return np.zeros(len(ts), dtype=np.int64)
    starts, ends = merged["ts"].to_numpy(), merged["end"].to_numpy()
    before = np.concatenate([[0], np.cumsum(ends - starts)])  # covered length before each merged interval

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(starts, x, side="right") - 1
        inside = np.where(i >= 0, np.clip(x - starts[np.maximum(i, 0)], 0, ends[np.maximum(i, 0)]
                                          - starts[np.maximum(i, 0)]), 0)
        return before[np.maximum(i, 0)] * (i >= 0) + inside

    return upto(end) - upto(ts)


def idle_while(context: Context, segments: pl.DataFrame, blocked: pl.DataFrame) -> pl.DataFrame:
    """``segments`` (``pid, ts, end``…) of the units' processes, merged per process, tagged with the
    unit whose CPU span holds their start and clipped to it: ``pid, step i64, ts, end, idle_ns``,
    where ``idle_ns`` is the part with no device work (any stream, any unit) and outside the
    ``blocked`` spans (``ts, end``: the decomposition's blocked state ranks first, a wait for the
    device is not a stall)."""
    units = context.decomposition.units
    schema = {"pid": pl.String, "step": pl.Int64, "ts": pl.Int64, "end": pl.Int64, "idle_ns": pl.Int64}
    # A trace whose device recorded nothing (vendor "cpu": no device activity, no launch call) has no
    # GPU to sit idle — a CPU-only run, gloo ranks waiting for each other in their data span — so no
    # segment is a stall of it.
    if segments.height == 0 or units.height == 0 or context.trace.meta.vendor == "cpu":
        return pl.DataFrame(schema=schema)
    merged = intervals.merge(segments.select("pid", "ts", "end"), by=["pid"])
    windows = context.trace.steps.select("number", "ts", "end", "pid")
    tagged = (tag_steps(merged, context.trace.steps)
              .join(windows.rename({"ts": "_wts", "end": "_wend", "number": "step"}), on=["step", "pid"])
              .select("pid", "step", ts=pl.max_horizontal("ts", "_wts"), end=pl.min_horizontal("end", "_wend"))
              .filter(pl.col("end") > pl.col("ts")).sort("ts"))
    cover = pl.concat([context.gpu.select("ts", "end"), blocked.select("ts", "end")]).cast(pl.Int64)
    ts, end = tagged["ts"].to_numpy(), tagged["end"].to_numpy()
    return tagged.with_columns(idle_ns=pl.Series(end - ts - covered_ns(ts, end, cover), dtype=pl.Int64)).cast(schema)


def cold_launches(context: Context) -> pl.DataFrame:
    """The first launches of a kernel that took at least :data:`COLD_LAUNCH_MIN_NS` (module
    docstring): the driver loading code, a one-time cost of a cold process."""
    schema = {"idx": pl.UInt32, "name": pl.String, "ts": pl.Int64, "dur": pl.Int64, "step": pl.Int64,
              "kernel": pl.String}
    launches = context.launches.filter(pl.col("name").str.contains(KERNEL_LAUNCH_PATTERN)
                                       & (pl.col("dur") >= COLD_LAUNCH_MIN_NS))
    gpu = context.gpu.filter(pl.col("kind") == "kernel")
    if launches.height == 0 or gpu.height == 0:
        return pl.DataFrame(schema=schema)
    first = gpu.sort("ts").group_by("name", maintain_order=True).agg(pl.col("launch_idx").first())
    return (launches.join(first.rename({"name": "kernel", "launch_idx": "idx"}), on="idx")
            .select(list(schema)).cast(schema).sort("ts"))  # type: ignore[arg-type]
