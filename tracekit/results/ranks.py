"""``tracekit report DIR``'s result: one summary row per rank trace (made by
:func:`tracekit.ranks.analyze`, worded by the renderers)."""

from __future__ import annotations

from typing import ClassVar

from dataclasses import dataclass

import polars as pl


RANK_SCHEMA = {
    "file": pl.String, "rank": pl.Int64, "steps": pl.UInt32, "mean_step_ns": pl.Int64,
    "max_step_ns": pl.Int64, "gpu_busy_ns": pl.Int64, "kernel_count": pl.UInt32, "error": pl.String,
}


@dataclass(frozen=True)
class RankReport:
    """Per-rank summary of a directory of traces.

    Attributes
    ----------
    directory : str
        The directory as given.
    ranks : DataFrame
        One row per trace file (:data:`RANK_SCHEMA`): ``file str, rank i64?, steps u32,
        mean_step_ns i64?, max_step_ns i64?, gpu_busy_ns i64, kernel_count u32, error str?``, sorted
        by rank then file.
    slowest : str or None
        The file whose mean step is longest (ties: lowest rank); None when no file has a step.
    world_size : int or None
        The run's world size, as the traces' ``distributedInfo.world_size`` state it (they agree:
        :func:`tracekit.ranks.check_set`); None when none states it.
    missing : tuple of (int, int)
        The ranks of the world (without a world size: below the highest rank) that no file of the
        directory holds, as ``(first, last)`` runs, lowest first; empty when none is missing.
    """

    #: The result kind: its view is ``tracekit.render.views.ranks``, its JSON contract
    #: ``tracekit.render.json.ranks`` (the renderers find both by this name).
    kind: ClassVar[str] = "ranks"

    directory: str
    ranks: pl.DataFrame
    slowest: str | None
    world_size: int | None = None
    missing: tuple[tuple[int, int], ...] = ()
