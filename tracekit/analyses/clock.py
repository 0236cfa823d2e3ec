"""Whether the GPU's timestamps agree with the CPU's: clock skew between the two sides of a trace.

Kineto writes CPU events on the host clock and GPU activity on the clock CUPTI converts from the
GPU's; on some systems the two disagree by a near-constant offset (or drift apart). Queue delay
(GPU start − launch call end) then measures the skew, not the queue. Two tests, either of which
says "skewed":

1. **Work that starts before its launch call** — impossible on one clock. More than
   :data:`MIN_EARLY_SHARE` of the activities with a launch call start over
   :data:`EARLY_TOLERANCE_NS` before their launch call *starts* (the end is not the test: a blocking
   copy runs while its call is still open).
2. **An idle GPU that waits for a launch that already returned** — an activity that starts after its
   device was idle for at least :data:`IDLE_GAP_NS` (nothing queued ahead of it) started as soon as
   its launch reached the GPU: its queue delay is the launch latency (1–3 µs on every unskewed trace
   we have). When the median of those delays exceeds :data:`MAX_IDLE_START_DELAY_NS`, the offset is
   skew. Only the first activity of each launch counts (a CUDA-graph replay's later kernels share
   one launch call and wait behind the graph's earlier ones).

The **offset estimate** (GPU clock − CPU clock, launch latency included) is the median queue delay of
those idle-start activities (else of all activities with a launch call); ``spread`` is their
p10–p90, which is wide when the clocks drift rather than sit apart.

Contract: :func:`check` takes attributed GPU work (``kind, device, ts, end, idx, launch_idx,
launch_ts, launch_end``) and returns a plain dict (:data:`FIELDS`), JSON-ready.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracekit.trace import GPU_WORK_KINDS

EARLY_TOLERANCE_NS = 5_000
MIN_EARLY_SHARE = 0.01
IDLE_GAP_NS = 5_000
MAX_IDLE_START_DELAY_NS = 1_000_000
RULE = (f"skewed when more than {100 * MIN_EARLY_SHARE:.0f}% of launched GPU activities start over "
        f"{EARLY_TOLERANCE_NS // 1000} us before their launch call starts, or when activities starting on a GPU idle "
        f"for >= {IDLE_GAP_NS // 1000} us have a median queue delay over {MAX_IDLE_START_DELAY_NS // 1_000_000} ms; "
        "offset = that median (GPU clock - CPU clock, launch latency included)")
#: The keys of :func:`check`'s dict.
FIELDS = ("skewed", "offset_ns", "linked", "early", "idle_starts", "idle_start_delay_p10_ns",
          "idle_start_delay_p50_ns", "idle_start_delay_p90_ns", "rule")


def check(gpu: pl.DataFrame) -> dict[str, Any]:
    """The clock check of attributed GPU work (module docstring)."""
    work = gpu.lazy().filter(pl.col("kind").is_in(GPU_WORK_KINDS)).select(
        "device", "ts", "end", "idx", "launch_idx", "launch_ts", "launch_end").collect()
    linked = work.filter(pl.col("launch_ts").is_not_null())
    early = int(linked.filter(pl.col("ts") < pl.col("launch_ts") - EARLY_TOLERANCE_NS).height)
    ordered = work.filter(pl.col("device").is_not_null()).sort(["device", "ts", "idx"]).with_columns(
        _reach=pl.col("end").cum_max().shift(1).over("device"))
    idle = (ordered.filter(pl.col("launch_ts").is_not_null()
                           & ((pl.col("ts") - pl.col("_reach")) >= IDLE_GAP_NS))
            .unique(subset=["launch_idx"], keep="first", maintain_order=True))
    delays = (idle if idle.height else linked).select(delay=pl.col("ts") - pl.col("launch_end"))["delay"]
    quantile = (lambda q: int(delays.quantile(q, "nearest"))) if delays.len() else (lambda q: None)  # type: ignore[arg-type]
    median = quantile(0.5)
    skewed = bool(linked.height and early > MIN_EARLY_SHARE * linked.height) or bool(
        idle.height and median is not None and median > MAX_IDLE_START_DELAY_NS)
    return {"skewed": skewed, "offset_ns": median if skewed else None, "linked": linked.height,
            "early": early, "idle_starts": idle.height,
            "idle_start_delay_p10_ns": quantile(0.1) if idle.height else None,
            "idle_start_delay_p50_ns": median if idle.height else None,
            "idle_start_delay_p90_ns": quantile(0.9) if idle.height else None, "rule": RULE}
