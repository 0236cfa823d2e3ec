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
    ordered = intervals.select(*by, "ts", "end").sort("ts")
    if not by:
        added = (pl.col("end") - pl.max_horizontal("ts", pl.col("end").cum_max().shift(1))).clip(lower_bound=0)
        total = ordered.select(added.sum()).item()
        return pl.DataFrame({"busy_ns": [int(total or 0)]}, schema={"busy_ns": pl.Int64})
    runs = _runs(ordered, by)
    if runs is not None:
        return runs
    reach = pl.col("end").cum_max().shift(1).over(by)
    added = (pl.col("end") - pl.max_horizontal("ts", reach)).clip(lower_bound=0)
    return (ordered.with_columns(_added=added)
            .group_by(by).agg(busy_ns=pl.col("_added").sum()).sort(by))


def _runs(ordered: pl.DataFrame, by: list[str]) -> pl.DataFrame | None:
    """:func:`union_ns` of ``ordered`` (sorted by ``ts``, no nulls) when each group is one run of
    rows (steps, devices that do not interleave in time), else None.

    Then the furthest end before a row is a running maximum over the whole column once each run is
    lifted above the one before it (run number × the trace's span): no per-group window.
    """
    starts = pl.any_horizontal(pl.int_range(pl.len()) == 0, *(pl.col(b).ne_missing(pl.col(b).shift(1)) for b in by))
    marked = ordered.with_columns(_start=starts)
    heads = marked.filter(pl.col("_start")).select(by)
    if heads.is_duplicated().any():
        return None
    lo, hi = marked.select(pl.col("ts").min(), pl.col("end").max()).row(0)
    span = hi - lo + 1
    if heads.height * span >= 2 ** 62 or abs(lo) >= 2 ** 62:  # lifted times must fit in Int64
        return None
    lift = (pl.col("_start").cum_sum().cast(pl.Int64) - 1) * span - lo
    lifted = (marked.with_columns(_lift=lift)
              .select("_start", _ts=pl.col("ts") + pl.col("_lift"), _end=pl.col("end") + pl.col("_lift")))
    # Each row adds max(end, reach) - max(ts, reach), reach being the running maximum of the ends
    # before it (lifted times are >= 0, so -1 stands for "none").
    upto = pl.col("_end").cum_max()
    added = upto - pl.max_horizontal("_ts", upto.shift(1, fill_value=-1))
    # A run's total: the running sum at its last row minus the one at the row before it.
    totals = (lifted.select(_last=pl.col("_start").shift(-1, fill_value=True), _sum=added.cum_sum())
              .filter(pl.col("_last"))["_sum"])
    return heads.with_columns(busy_ns=totals.diff().fill_null(totals.first())).sort(by)


def _union_ns_merged(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    merged = merge(intervals, by)
    if not by:
        total = int((merged["end"] - merged["ts"]).sum()) if merged.height else 0
        return pl.DataFrame({"busy_ns": [total]}, schema={"busy_ns": pl.Int64})
    return merged.group_by(by, maintain_order=True).agg(busy_ns=(pl.col("end") - pl.col("ts")).sum())
