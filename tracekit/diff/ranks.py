"""Two sets of ranks compared (``tracekit diff DIR_A DIR_B``): per-rank medians and per-collective
bus bandwidth.

Contract: :func:`diff` takes two :class:`~tracekit.results.ranks.RankReport` (each with its
``steps``) and returns a :class:`~tracekit.results.rank_diff.RankDiff`:

- ``ranks`` (:data:`~tracekit.results.rank_diff.RANKS_SCHEMA`): one row per rank of either side,
  by rank: its step count on each side and, per figure (``step``: the step's CPU span,
  ``busy``: GPU busy time, ``exposed``: communication no compute overlaps, ``wait``: time waited
  at matched collectives for the last arriver), the median over its steps in A and in B and
  ``B − A``. A median, not a mean: one step stalled by a checkpoint or a data hiccup moves it
  little. A rank on one side only has nulls on the other;
- ``collectives`` (:data:`~tracekit.results.rank_diff.COLLECTIVES_SCHEMA`): the matched collectives
  of each side (:mod:`tracekit.analyses.skew`) paired by kind, process group and order: the
  ``n``-th all_reduce of group ``g`` in A with the ``n``-th of ``g`` in B (instances numbered by
  first arrival). Bytes and bus bandwidth on each side and B's bandwidth over A's
  (``busbw_ratio``); a collective on one side only keeps its row with nulls on the other.
"""

from __future__ import annotations

import polars as pl

from tracekit.results.rank_diff import COLLECTIVES_SCHEMA, FIGURES, RANKS_SCHEMA, RankDiff
from tracekit.results.ranks import STEPS_SCHEMA, RankReport


def diff(a: RankReport, b: RankReport) -> RankDiff:
    """``a`` (before) and ``b`` (after) compared (module docstring)."""
    return RankDiff(a=a, b=b, ranks=_ranks(a, b), collectives=_collectives(a, b))


def _medians(report: RankReport, side: str) -> pl.DataFrame:
    steps = report.steps if report.steps is not None else pl.DataFrame(schema=STEPS_SCHEMA)
    return steps.group_by("rank").agg(
        pl.len().cast(pl.UInt32).alias(f"steps_{side}"),
        *[pl.col(column).median().round(0).cast(pl.Int64).alias(f"{figure}_{side}_ns")
          for figure, column in FIGURES])


def _ranks(a: RankReport, b: RankReport) -> pl.DataFrame:
    joined = _medians(a, "a").join(_medians(b, "b"), on="rank", how="full", coalesce=True)
    return (joined.with_columns(*[(pl.col(f"{figure}_b_ns") - pl.col(f"{figure}_a_ns")).alias(f"{figure}_delta_ns")
                                  for figure, _ in FIGURES])
            .select(list(RANKS_SCHEMA)).cast(RANKS_SCHEMA).sort("rank"))  # type: ignore[arg-type]


def _ordered(report: RankReport, side: str) -> pl.DataFrame:
    if report.skew is None:
        return pl.DataFrame(schema={"kind": pl.String, "pg": pl.String, "order": pl.UInt32,
                                    f"instance_{side}": pl.UInt32, f"bytes_{side}": pl.Int64,
                                    f"busbw_{side}_gbps": pl.Float64})
    return (report.skew.instances.sort("instance")
            .with_columns(pl.col("pg").fill_null(""))
            .with_columns(order=pl.int_range(pl.len(), dtype=pl.UInt32).over("kind", "pg"))
            .select("kind", "pg", "order", pl.col("instance").alias(f"instance_{side}"),
                    pl.col("bytes").alias(f"bytes_{side}"), pl.col("busbw_gbps").alias(f"busbw_{side}_gbps")))


def _collectives(a: RankReport, b: RankReport) -> pl.DataFrame:
    joined = _ordered(a, "a").join(_ordered(b, "b"), on=["kind", "pg", "order"], how="full", coalesce=True)
    return (joined.with_columns(busbw_ratio=pl.when(pl.col("busbw_a_gbps") > 0)
                                .then(pl.col("busbw_b_gbps") / pl.col("busbw_a_gbps")))
            .select(list(COLLECTIVES_SCHEMA)).cast(COLLECTIVES_SCHEMA)  # type: ignore[arg-type]
            .sort(pl.coalesce("instance_a", "instance_b"), "kind", "pg", "order"))
