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
    if (intervals.schema["ts"] == intervals.schema["end"] == pl.Int64) and not _unordered(intervals):
        merged = _merge_runs(intervals.select(*by, "ts", "end").sort("ts"), by)
        if merged is not None:
            return merged
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
    if _unordered(intervals):
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


def subtract(intervals: pl.DataFrame, cut: pl.DataFrame) -> pl.DataFrame:
    """The parts of ``intervals`` (``ts``, ``end``) that no interval of ``cut`` covers: columns ``ts
    i64, end i64``, merged and sorted by ``ts``.

    Every boundary of either frame splits the time line into pieces that each frame either covers
    whole or not at all; a piece is kept when ``intervals`` covers it and ``cut`` does not.
    """
    kept = merge(intervals.select("ts", "end"))
    gone = merge(cut.select("ts", "end"))
    if kept.height == 0 or gone.height == 0:
        return kept.select(pl.col("ts").cast(pl.Int64), pl.col("end").cast(pl.Int64))
    points = pl.concat([kept["ts"], kept["end"], gone["ts"], gone["end"]]).cast(pl.Int64).unique().sort()
    pieces = pl.DataFrame({"ts": points.head(-1), "end": points.tail(-1)})
    keep = _covered(pieces["ts"], kept) & ~_covered(pieces["ts"], gone)
    return merge(pieces.filter(keep))


def _covered(times: pl.Series, merged: pl.DataFrame) -> pl.Series:
    """Whether each time lies inside one of ``merged``'s (sorted, disjoint) ``[ts, end)`` intervals."""
    at = merged["ts"].search_sorted(times, side="right").cast(pl.Int64) - 1
    ends = merged["end"].gather(at.clip(lower_bound=0))
    return ((at >= 0) & (times < ends)).fill_null(False)


def _unordered(intervals: pl.DataFrame) -> bool:
    """Whether some interval lacks a time or ends before it starts (the running-maximum paths need
    neither)."""
    return bool(intervals.select(
        pl.col("ts").has_nulls() | pl.col("end").has_nulls() | (pl.col("end") < pl.col("ts")).any()).item())


def _lift(ordered: pl.DataFrame, by: list[str]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """For ``ordered`` (sorted by ``ts``, no nulls, no end before its start) whose ``by`` groups are
    each one run of rows (steps, devices that do not interleave in time): the groups' ``by`` values
    in run order, and ``ordered`` plus ``_start`` (a run's first row), ``_lift``, ``_ts`` and
    ``_end``, the times lifted by run number × the trace's span so that each run lies above the one
    before it. None when a group has several runs or lifted times would not fit in Int64.

    Then the furthest end before a row within its group is a running maximum over the whole column:
    no per-group window.
    """
    starts = pl.any_horizontal(pl.int_range(pl.len()) == 0, *(pl.col(b).ne_missing(pl.col(b).shift(1)) for b in by))
    marked = ordered.with_columns(_start=starts)
    heads = marked.filter(pl.col("_start")).select(by)
    if by and heads.is_duplicated().any():
        return None
    lo, hi = marked.select(pl.col("ts").min(), pl.col("end").max()).row(0)
    span = hi - lo + 1
    if int(marked["_start"].sum()) * span >= 2 ** 62 or abs(lo) >= 2 ** 62:
        return None
    lift = (pl.col("_start").cum_sum().cast(pl.Int64) - 1) * span - lo
    return heads, (marked.with_columns(_lift=lift)
                   .with_columns(_ts=pl.col("ts") + pl.col("_lift"), _end=pl.col("end") + pl.col("_lift")))


def _runs(ordered: pl.DataFrame, by: list[str]) -> pl.DataFrame | None:
    """:func:`union_ns` of ``ordered`` through :func:`_lift`, else None."""
    lifted = _lift(ordered, by)
    if lifted is None:
        return None
    heads, frame = lifted
    # Each row adds max(end, reach) - max(ts, reach), reach being the running maximum of the ends
    # before it (lifted times are >= 0, so -1 stands for "none").
    upto = pl.col("_end").cum_max()
    added = upto - pl.max_horizontal("_ts", upto.shift(1, fill_value=-1))
    # A run's total: the running sum at its last row minus the one at the row before it.
    totals = (frame.select(_last=pl.col("_start").shift(-1, fill_value=True), _sum=added.cum_sum())
              .filter(pl.col("_last"))["_sum"])
    return heads.with_columns(busy_ns=totals.diff().fill_null(totals.first())).sort(by)


def _merge_runs(ordered: pl.DataFrame, by: list[str]) -> pl.DataFrame | None:
    """:func:`merge` of ``ordered`` through :func:`_lift`, else None: a merged interval starts at a
    row that starts after every end before it and ends at the running maximum before the next one."""
    lifted = _lift(ordered, by)
    if lifted is None:
        return None
    upto = pl.col("_end").cum_max()
    frame = lifted[1].with_columns(_new=pl.col("_ts") > upto.shift(1, fill_value=-1), _upto=upto)
    merged = pl.concat([
        frame.filter(pl.col("_new")).select(*by, "ts"),
        frame.filter(pl.col("_new").shift(-1, fill_value=True)).select(end=pl.col("_upto") - pl.col("_lift")),
    ], how="horizontal")
    # Within a group the rows are in time order already: a stable sort by the group orders by both.
    return merged.sort(by, maintain_order=True) if by else merged


def _union_ns_merged(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    merged = merge(intervals, by)
    if not by:
        total = int((merged["end"] - merged["ts"]).sum()) if merged.height else 0
        return pl.DataFrame({"busy_ns": [total]}, schema={"busy_ns": pl.Int64})
    return merged.group_by(by, maintain_order=True).agg(busy_ns=(pl.col("end") - pl.col("ts")).sum())
