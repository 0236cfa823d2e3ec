"""Interval arithmetic on frames of ``ts``/``end`` (Int64 ns): unions, busy time, gaps.

Streams overlap, so GPU busy time is the length of the union of activity intervals, never the sum
of durations. All functions are vectorised Polars; sorting uses ``ts`` then ``end``.
"""

from __future__ import annotations

import polars as pl


def merge(intervals: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """Merge overlapping or touching ``[ts, end)`` intervals within each ``by`` group.

    Returns columns ``*by, ts i64, end i64`` sorted by ``by`` then ``ts``; no two rows of a group
    overlap.
    """
    by = by or []
    if intervals.height == 0:
        return intervals.select(*by, "ts", "end")
    ordered = intervals.select(*by, "ts", "end").sort([*by, "ts", "end"])
    prev_end = pl.col("end").cum_max().shift(1)
    if by:
        prev_end = prev_end.over(by)
    starts_new = (pl.col("ts") > pl.col("_prev_end")) | pl.col("_prev_end").is_null()
    group = starts_new.cast(pl.Int64).cum_sum()
    if by:
        group = group.over(by)
    return (
        ordered.with_columns(_prev_end=prev_end)
        .with_columns(_group=group)
        .group_by([*by, "_group"], maintain_order=True)
        .agg(pl.col("ts").min(), pl.col("end").max())
        .drop("_group")
        .sort([*by, "ts"])
    )


def union_ns(intervals: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """Length of the union of intervals per group: columns ``*by, busy_ns i64``.

    Empty-safe: no intervals give one row of 0 without groups, and no rows (with the group columns'
    dtypes) with them.
    """
    by = by or []
    if intervals.height == 0:
        if not by:
            return pl.DataFrame({"busy_ns": [0]}, schema={"busy_ns": pl.Int64})
        return pl.DataFrame(schema={**{b: intervals.schema[b] for b in by}, "busy_ns": pl.Int64})
    if intervals.select(
            pl.col("ts").has_nulls() | pl.col("end").has_nulls() | (pl.col("end") < pl.col("ts")).any()).item():
        return _union_ns_merged(intervals, by)
    # In ts order each interval adds what lies beyond the furthest end before it in its group
    # (everything between its start and that end is already covered): no merged intervals, and
    # one sort key (ties in ts add the same total in any order).
    reach = pl.col("end").cum_max().shift(1)
    if by:
        reach = reach.over(by)
    added = (pl.col("end") - pl.max_horizontal("ts", reach)).clip(lower_bound=0)
    ordered = intervals.select(*by, "ts", "end").sort("ts")
    if not by:
        total = ordered.select(added.sum()).item()
        return pl.DataFrame({"busy_ns": [int(total or 0)]}, schema={"busy_ns": pl.Int64})
    return (ordered.with_columns(_added=added)
            .group_by(by).agg(busy_ns=pl.col("_added").sum()).sort(by))


def _union_ns_merged(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    merged = merge(intervals, by)
    if not by:
        total = int((merged["end"] - merged["ts"]).sum()) if merged.height else 0
        return pl.DataFrame({"busy_ns": [total]}, schema={"busy_ns": pl.Int64})
    return merged.group_by(by, maintain_order=True).agg(busy_ns=(pl.col("end") - pl.col("ts")).sum())
