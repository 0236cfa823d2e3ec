"""``tracekit diff DIR_A DIR_B``'s result: two sets of ranks compared (made by
:func:`tracekit.diff.ranks.diff`, worded by the renderers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from tracekit.results.ranks import RankReport

#: The figures compared per rank: (name in the columns, column of ``RankReport.steps``).
FIGURES = (("step", "step_ns"), ("busy", "gpu_busy_ns"), ("exposed", "exposed_comm_ns"), ("wait", "wait_ns"))

RANKS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64, "steps_a": pl.UInt32, "steps_b": pl.UInt32,
    **{f"{figure}_{part}_ns": pl.Int64 for figure, _ in FIGURES for part in ("a", "b", "delta")},
}
COLLECTIVES_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String, "pg": pl.String, "order": pl.UInt32, "instance_a": pl.UInt32, "instance_b": pl.UInt32,
    "bytes_a": pl.Int64, "bytes_b": pl.Int64, "busbw_a_gbps": pl.Float64, "busbw_b_gbps": pl.Float64,
    "busbw_ratio": pl.Float64,
}


@dataclass(frozen=True)
class RankDiff:
    """Two directories of ranks compared.

    Attributes
    ----------
    a, b : RankReport
        The two sides (A before, B after), as ``tracekit report DIR`` gives them.
    ranks : DataFrame
        :data:`RANKS_SCHEMA`, by rank: ``rank i64, steps_a u32?, steps_b u32?`` and, for each of
        ``step``, ``busy``, ``exposed``, ``wait``, ``<figure>_a_ns``, ``<figure>_b_ns`` (the median
        over the rank's steps on that side) and ``<figure>_delta_ns`` (B − A); null where the rank
        or the figure is absent (``wait`` without matched collectives).
    collectives : DataFrame
        :data:`COLLECTIVES_SCHEMA`: the matched collectives paired by ``kind, pg, order`` (the
        ``order``-th collective of that kind and group on each side), their instance numbers, bytes
        and bus bandwidth (GB/s) on each side and ``busbw_ratio`` (B over A).
    """

    #: The result kind: its view is ``tracekit.render.views.rank_diff``, its JSON contract
    #: ``tracekit.render.json.rank_diff``.
    kind: ClassVar[str] = "rank_diff"

    a: RankReport
    b: RankReport
    ranks: pl.DataFrame
    collectives: pl.DataFrame
