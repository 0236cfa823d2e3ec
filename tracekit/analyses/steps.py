"""Per-step figures: wall span, GPU busy time (union over streams) and kernel count.

Contract: :func:`tag_steps` adds a ``step`` column (the ProfilerStep#N span containing a time
column, else null); :func:`analyze` returns one row per step:
``name str, number i64, start_ns i64, dur_ns i64, gpu_busy_ns i64, kernel_count u32,
gpu_activity_count u32`` sorted by ``start_ns``. ``kernel_count`` counts kernels only (memcpy and
memset excluded); GPU rows belong to the step of their launch call (see attribution).
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses import intervals

STEP_COLUMNS = {
    "name": pl.String, "number": pl.Int64, "start_ns": pl.Int64, "dur_ns": pl.Int64,
    "gpu_busy_ns": pl.Int64, "kernel_count": pl.UInt32, "gpu_activity_count": pl.UInt32,
}


def tag_steps(frame: pl.DataFrame, steps: pl.DataFrame, time_col: str = "ts") -> pl.DataFrame:
    """``frame`` plus ``step i64?``: the number of the step whose ``[ts, end)`` holds ``time_col``."""
    if steps.height == 0 or frame.height == 0:
        return frame.with_columns(step=pl.lit(None, pl.Int64))
    windows = steps.select(pl.col("ts").alias("_step_ts"), pl.col("end").alias("_step_end"),
                           pl.col("number").alias("step")).sort("_step_ts")
    # The last window starting at or before each time (join_asof "backward" picks the last of
    # equal starts too), found by binary search: no sort of the (large) frame.
    times = frame[time_col].cast(windows["_step_ts"].dtype)
    found = windows["_step_ts"].search_sorted(times, side="right").cast(pl.Int64) - 1
    at = pl.select(pl.when(times.is_not_null() & (found >= 0)).then(found)).to_series()
    step = pl.select(pl.when(times < windows["_step_end"].gather(at))
                     .then(windows["step"].gather(at))).to_series()
    return frame.with_columns(step.alias("step"))


def analyze(steps: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """Per-step table from the trace's ``steps`` and the attributed ``gpu`` frame (with ``step``)."""
    if steps.height == 0:
        return pl.DataFrame(schema=STEP_COLUMNS)
    in_steps = gpu.filter(pl.col("step").is_not_null())
    busy = intervals.union_ns(in_steps.select("step", "ts", "end"), by=["step"])
    counts = in_steps.group_by("step").agg(
        kernel_count=(pl.col("kind") == "kernel").sum().cast(pl.UInt32),
        gpu_activity_count=pl.len().cast(pl.UInt32),
    )
    table = (
        steps.select("name", "number", pl.col("ts").alias("start_ns"), pl.col("dur").alias("dur_ns"))
        .join(busy.rename({"step": "number"}), on="number", how="left")
        .join(counts.rename({"step": "number"}), on="number", how="left")
        .with_columns(
            pl.col("busy_ns").fill_null(0).alias("gpu_busy_ns"),
            pl.col("kernel_count").fill_null(0), pl.col("gpu_activity_count").fill_null(0),
        )
        .drop("busy_ns")
        .sort("start_ns", "number")
    )
    return table.select(list(STEP_COLUMNS)).cast(STEP_COLUMNS)  # type: ignore[arg-type]
