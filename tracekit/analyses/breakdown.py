"""Where the GPU time goes: per kernel class, per library and per stream, for the whole trace and for
each unit, and how much of the communication kernels' time compute kernels overlap.

Contract: :func:`analyze` takes the attributed GPU work (``kind, kernel_class, library, device,
stream, ts, end, dur, step``: attribution's frame, ``step`` being the unit that launched it) and
the per-step summary (:func:`tracekit.analyses.steps.summarize`, for the steady units), and returns
a frozen :class:`Breakdown`. Scope ``"trace"`` covers every activity of the trace, those launched
before it began included; scope ``"unit"`` (with ``unit``) the activities launched in that unit.

* **GPU time** of a group is the sum of its activities' durations; **busy** is the length of the
  union of a scope's activity intervals (streams overlap: never a sum). ``busy_share =
  gpu_ns / busy_ns`` of the scope, so the shares of one scope add up to more than 1 when streams
  overlap. ``median_unit_share`` (trace rows) is the median of the group's share over the steady
  units (a unit without the group counts 0; all units when none is steady).
* **Streams**: per (device, stream), the activity count, GPU time and busy time (union on the
  stream), and that busy time as a share of the scope's busy.
* **Communication overlap** is HolisticTraceAnalysis' ``get_comm_comp_overlap``: the communication
  kernels' intervals (class ``communication``) and the compute kernels' intervals (every other
  kernel; memcpy and memset are neither) are each merged, and ``overlap_frac = |comm ∩ compute| /
  |comm|``. One figure per scope over all the trace's devices, as HTA computes one per rank trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses import steps as steps_analysis

COMMUNICATION = "communication"
GROUPS = {"class": "kernel_class", "library": "library"}

SHARES_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "unit": pl.Int64, "group": pl.String, "key": pl.String, "count": pl.UInt32,
    "gpu_ns": pl.Int64, "busy_share": pl.Float64, "median_unit_share": pl.Float64,
}
STREAMS_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "unit": pl.Int64, "device": pl.Int64, "stream": pl.Int64, "count": pl.UInt32,
    "gpu_ns": pl.Int64, "busy_ns": pl.Int64, "busy_share": pl.Float64,
}
OVERLAP_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "unit": pl.Int64, "comm_count": pl.UInt32, "comm_ns": pl.Int64,
    "compute_ns": pl.Int64, "overlapped_ns": pl.Int64, "overlap_frac": pl.Float64,
}


@dataclass(frozen=True)
class Breakdown:
    """GPU time by class, library and stream, and communication overlap (module docstring).

    ``shares``: :data:`SHARES_SCHEMA` — ``scope str`` (trace | unit), ``unit i64?``, ``group str``
    (class | library), ``key str``, ``count u32``, ``gpu_ns i64``, ``busy_share f64``,
    ``median_unit_share f64?`` (trace rows only); sorted by scope (trace first), unit, group,
    ``gpu_ns`` descending, key.
    ``streams``: :data:`STREAMS_SCHEMA`, sorted by scope, unit, device, stream.
    ``overlap``: :data:`OVERLAP_SCHEMA` — ``comm_count u32``, ``comm_ns`` and ``compute_ns`` (each
    merged), ``overlapped_ns``, ``overlap_frac f64?`` (null without communication); one row per
    scope, sorted by scope, unit.
    """

    shares: pl.DataFrame
    streams: pl.DataFrame
    overlap: pl.DataFrame


def analyze(gpu: pl.DataFrame, summary: pl.DataFrame | None = None) -> Breakdown:
    """The breakdown of the attributed GPU work ``gpu``; ``summary`` names the steady units."""
    # Sorted once by start: every union below reads rows of it in time order (no sort of its own).
    work = gpu.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"])).select(
        "kind", "kernel_class", "library", "device", "stream", "ts", "end", "dur", "step").sort("ts")
    busy = _per_scope(work, [], _union("busy_ns"))
    steady = steps_analysis.steady_steps(summary) if summary is not None and summary.height else None
    return Breakdown(shares=_shares(work, busy, steady), streams=_streams(work, busy),
                     overlap=_overlap(work, busy.select("scope", "unit")))


def _per_scope(work: pl.DataFrame, keys: list[str],
               compute: Callable[[pl.DataFrame, list[str]], pl.DataFrame]) -> pl.DataFrame:
    """``scope, unit, *keys`` and the columns ``compute(rows, by)`` adds per ``by`` group: over all
    of ``work`` (scope ``trace``, unit null), then over the rows a unit launched, per unit (scope
    ``unit``). A scope without rows has none.

    The two scopes are computed apart rather than as one frame with both: half the rows, no string
    key, and the units' groups are runs in time for :func:`tracekit.analyses.intervals.union_ns`
    (the trace scope spans them all).
    """
    units = work.filter(pl.col("step").is_not_null()).rename({"step": "unit"})
    parts = []
    if work.height:
        parts.append(compute(work, keys).select(pl.lit("trace").alias("scope"), pl.lit(None, pl.Int64).alias("unit"),
                                                pl.all()))
    if units.height:
        parts.append(compute(units, ["unit", *keys]).select(pl.lit("unit").alias("scope"), pl.all()))
    if parts:
        # Plain columns, as one group_by over both scopes gives: Polars keeps two one-row parts of
        # equal value as one constant, and divides by a constant through its reciprocal (a share
        # one bit off the quotient).
        return pl.DataFrame(list(pl.concat(parts).iter_columns()))
    return compute(work.rename({"step": "unit"}), ["unit", *keys]).select(pl.lit(None, pl.String).alias("scope"),
                                                                         pl.all()).clear()


def _union(name: str) -> Callable[[pl.DataFrame, list[str]], pl.DataFrame]:
    """For :func:`_per_scope`: the union of the rows' intervals per group, as ``name``."""
    return lambda rows, by: intervals.union_ns(rows.select(*by, "ts", "end"), by=by).rename({"busy_ns": name})


def _totals(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """For :func:`_per_scope`: the activity count and GPU time per group."""
    return rows.group_by(by).agg(count=pl.len(), gpu_ns=pl.col("dur").sum())


def _share(numerator: str) -> pl.Expr:
    return pl.when(pl.col("busy_ns") > 0).then(pl.col(numerator) / pl.col("busy_ns"))


def _shares(work: pl.DataFrame, busy: pl.DataFrame, steady: list[int] | None) -> pl.DataFrame:
    by = ["scope", "unit"]
    parts = []
    for group, column in GROUPS.items():
        keyed = work.with_columns(key=pl.col(column).fill_null("?"))
        parts.append(_per_scope(keyed, ["key"], _totals).with_columns(group=pl.lit(group)))
    frame = pl.concat(parts).join(busy, on=by, how="left", nulls_equal=True).with_columns(
        busy_share=_share("gpu_ns"))
    units = (frame.filter(pl.col("scope") == "unit")["unit"].unique().to_list()
             if steady is None else steady)
    if units:
        grid = frame.filter(pl.col("scope") == "trace").select("group", "key").join(
            pl.DataFrame({"unit": units}, schema={"unit": pl.Int64}), how="cross")
        medians = (grid.join(frame.filter(pl.col("scope") == "unit").select("unit", "group", "key", "busy_share"),
                             on=["unit", "group", "key"], how="left")
                   .group_by("group", "key").agg(median_unit_share=pl.col("busy_share").fill_null(0.0).median()))
        frame = frame.join(medians.with_columns(scope=pl.lit("trace")), on=["scope", "group", "key"], how="left")
    else:
        frame = frame.with_columns(median_unit_share=pl.lit(None, pl.Float64))
    return (frame.select(list(SHARES_SCHEMA)).cast(SHARES_SCHEMA)  # type: ignore[arg-type]
            .sort(["scope", "unit", "group", "gpu_ns", "key"], descending=[False, False, False, True, False],
                  nulls_last=False))


def _streams(work: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    keys = ["scope", "unit", "device", "stream"]
    if work.height == 0:
        return pl.DataFrame(schema=STREAMS_SCHEMA)
    on_stream = _per_scope(work, ["device", "stream"], _union("_busy"))
    frame = (_per_scope(work, ["device", "stream"], _totals)
             .join(on_stream, on=keys, how="left", nulls_equal=True)
             .join(busy, on=["scope", "unit"], how="left", nulls_equal=True)
             .with_columns(busy_share=_share("_busy"))
             .drop("busy_ns").rename({"_busy": "busy_ns"}))
    return (frame.select(list(STREAMS_SCHEMA)).cast(STREAMS_SCHEMA)  # type: ignore[arg-type]
            .sort(["scope", "unit", "device", "stream"]))


EXPOSED_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "comm_ns": pl.Int64, "overlapped_ns": pl.Int64, "exposed_comm_ns": pl.Int64,
}


def exposed_per_unit(gpu: pl.DataFrame) -> pl.DataFrame:
    """Per unit of the attributed GPU work ``gpu``: the communication kernels' merged time
    (``comm_ns``), the part of it some compute kernel overlaps (``overlapped_ns``, as in
    ``overlap``) and the rest, ``exposed_comm_ns = comm_ns − overlapped_ns``: communication with no
    compute on any stream beside it (:data:`EXPOSED_SCHEMA`, units with communication only,
    sorted by step)."""
    work = gpu.filter((pl.col("kind") == "kernel") & pl.col("step").is_not_null()).select(
        "kind", "kernel_class", "ts", "end", "step").sort("ts")
    if work.filter(pl.col("kernel_class") == COMMUNICATION).height == 0:
        return pl.DataFrame(schema=EXPOSED_SCHEMA)
    units = work.select(pl.lit("unit").alias("scope"), pl.col("step").alias("unit")).unique()
    found = _overlap(work, units).filter((pl.col("scope") == "unit") & (pl.col("comm_ns") > 0))
    return (found.select(step="unit", comm_ns="comm_ns", overlapped_ns="overlapped_ns",
                         exposed_comm_ns=pl.col("comm_ns") - pl.col("overlapped_ns"))
            .cast(EXPOSED_SCHEMA).sort("step"))  # type: ignore[arg-type]


def _overlap(work: pl.DataFrame, scopes: pl.DataFrame) -> pl.DataFrame:
    """Per scope of ``scopes`` (``scope, unit``: each scope with work once)."""
    by = ["scope", "unit"]
    is_kernel = pl.col("kind") == "kernel"
    if work.filter(is_kernel).height == 0:
        return pl.DataFrame(schema=OVERLAP_SCHEMA)
    is_comm, is_compute = pl.col("kernel_class") == COMMUNICATION, pl.col("kernel_class") != COMMUNICATION

    def union(rows: pl.Expr, name: str) -> pl.DataFrame:
        found = _per_scope(work.filter(rows), [], _union(name))
        return found if found.height else scopes.with_columns(pl.lit(0, pl.Int64).alias(name))

    # |comm ∩ compute| = |comm| + |compute| − |comm ∪ compute|, each a union of merged intervals.
    comm_count = _per_scope(work.filter(is_kernel & is_comm), [], lambda rows, by: rows.group_by(by).agg(comm_count=pl.len())
                            if by else rows.select(comm_count=pl.len()))
    frame = (scopes
             .join(comm_count, on=by, how="left", nulls_equal=True)
             .join(union(is_kernel & is_comm, "comm_ns"), on=by, how="left", nulls_equal=True)
             .join(union(is_kernel & is_compute, "compute_ns"), on=by, how="left", nulls_equal=True)
             .join(union(is_kernel & (is_comm | is_compute), "_both"), on=by, how="left", nulls_equal=True)
             .with_columns(pl.col("comm_count").fill_null(0), pl.col("comm_ns").fill_null(0),
                           pl.col("compute_ns").fill_null(0), pl.col("_both").fill_null(0))
             .with_columns(overlapped_ns=pl.col("comm_ns") + pl.col("compute_ns") - pl.col("_both"))
             .with_columns(overlap_frac=pl.when(pl.col("comm_ns") > 0)
                           .then(pl.col("overlapped_ns") / pl.col("comm_ns"))))
    return (frame.select(list(OVERLAP_SCHEMA)).cast(OVERLAP_SCHEMA)  # type: ignore[arg-type]
            .sort(["scope", "unit"]))
