"""tracekit.analyses.intervals: union lengths per group, whichever path computes them.

Groups that are one run of rows in time order (steps) take the running-maximum path, groups that
interleave (streams, scopes) the per-group window; both must give the merged intervals' length.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from tracekit.analyses import intervals

SCHEMA = {"g": pl.Int64, "h": pl.String, "ts": pl.Int64, "end": pl.Int64}


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def test_union_of_runs_by_hand():
    # Group 1: [0,10) ∪ [5,12) ∪ [20,25) = 12 + 5 = 17; group 2 starts before group 1's furthest
    # end (12 > 11) but only its own [11,14) ∪ [13,15) = 4 counts; group 3: [30,30) adds 0.
    frame = _frame([(1, None, 0, 10), (1, None, 5, 12), (2, None, 11, 14), (2, None, 13, 15),
                    (1, None, 20, 25), (3, None, 30, 30)])
    got = intervals.union_ns(frame.select("g", "ts", "end"), by=["g"])
    assert got.to_dicts() == [{"g": 1, "busy_ns": 17}, {"g": 2, "busy_ns": 4}, {"g": 3, "busy_ns": 0}]
    # Groups in one run each, in time order (the fast path's case): 1 then 2, and a null group.
    runs = _frame([(None, None, 0, 4), (None, None, 2, 6), (1, None, 10, 20), (1, None, 12, 15),
                   (2, None, 19, 23)])
    assert intervals.union_ns(runs.select("g", "ts", "end"), by=["g"]).to_dicts() == [
        {"g": None, "busy_ns": 6}, {"g": 1, "busy_ns": 10}, {"g": 2, "busy_ns": 4}]


@pytest.mark.slow
def test_union_matches_merged_intervals():
    rng = random.Random(7)
    for trial in range(200):
        n = rng.randint(1, 40)
        rows = []
        for i in range(n):
            ts = (i * 10 if trial % 2 else rng.randint(0, 100)) + rng.randint(0, 5)
            group = i * 3 // n if trial % 2 else rng.choice([None, 1, 2])
            rows.append((group, rng.choice(["a", None]), ts, ts + rng.randint(0, 30)))
        frame = _frame(rows)
        for by in (["g"], ["g", "h"], ["h"]):
            merged = intervals.merge(frame, by).group_by(by).agg(busy_ns=(pl.col("end") - pl.col("ts")).sum())
            got = intervals.union_ns(frame, by)
            assert got.schema == pl.Schema({**{b: SCHEMA[b] for b in by}, "busy_ns": pl.Int64})
            assert got.equals(merged.sort(by)), (rows, by)


def test_merge_by_hand():
    # In time order device 0's rows come first, then device 1's (one run each: the running-maximum
    # path): [0,5) and [5,8) touch and merge, [2,3) lies inside; device 1's empty [12,12) touches
    # [9,12). Listed with device 1 first: the result is sorted by device, then start.
    runs = pl.DataFrame({"d": [1, 1, 0, 0, 0], "ts": [9, 12, 0, 2, 5], "end": [12, 12, 5, 3, 8]})
    assert intervals.merge(runs, ["d"]).rows() == [(0, 0, 8), (1, 9, 12)]
    # Device 0 comes back after device 1 (interleaved: the per-group window path): device 0 keeps
    # [0,4) and [6,7) apart; device 1's [1,10) holds [3,5); without groups all is [0,10).
    mixed = pl.DataFrame({"d": [0, 1, 1, 0], "ts": [0, 1, 3, 6], "end": [4, 10, 5, 7]})
    assert intervals.merge(mixed, ["d"]).rows() == [(0, 0, 4), (0, 6, 7), (1, 1, 10)]
    assert intervals.merge(mixed).rows() == [(0, 10)]
