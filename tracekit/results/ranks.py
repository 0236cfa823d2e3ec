"""``tracekit report DIR``'s result: one summary row per rank trace (made by
:func:`tracekit.ranks.analyze`, worded by the renderers)."""

from __future__ import annotations

from typing import ClassVar

from dataclasses import dataclass

import polars as pl

from tracekit.analyses.skew import Skew


RANK_SCHEMA = {
    "file": pl.String, "rank": pl.Int64, "steps": pl.UInt32, "mean_step_ns": pl.Int64,
    "max_step_ns": pl.Int64, "gpu_busy_ns": pl.Int64, "kernel_count": pl.UInt32, "error": pl.String,
    "verdict": pl.String, "comm_ns": pl.Int64, "exposed_comm_ns": pl.Int64, "wait_ns": pl.Int64,
    "caused_ns": pl.Int64,
}
#: Per loaded rank and kernel class: its kernels' summed time and share of the rank's kernel time.
CLASSES_SCHEMA = {
    "file": pl.String, "rank": pl.Int64, "kernel_class": pl.String, "gpu_ns": pl.Int64, "share": pl.Float64,
}
#: Every rank's steps (:attr:`RankReport.steps`): the step's CPU span, GPU busy time, exposed
#: communication and the wait at matched collectives (null when none matched).
STEPS_SCHEMA = {
    "rank": pl.Int64, "step": pl.Int64, "step_ns": pl.Int64, "gpu_busy_ns": pl.Int64,
    "exposed_comm_ns": pl.Int64, "wait_ns": pl.Int64,
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
        mean_step_ns i64?, max_step_ns i64?, gpu_busy_ns i64, kernel_count u32, error str?,
        verdict str?`` (the verdict most of its steps have, ties: the first in
        :data:`tracekit.analyses.steps.VERDICTS` order), ``comm_ns i64?`` and ``exposed_comm_ns
        i64?`` (its communication kernels' merged time over all steps and the part no compute
        overlaps: :func:`tracekit.analyses.breakdown.exposed_per_unit`), ``wait_ns i64?`` (what it
        waited at matched collectives for the last arriver, waits in flight together once) and
        ``caused_ns i64?`` (what the others waited for it), sorted by rank then file.
    slowest : str or None
        The file whose mean step is longest (ties: lowest rank); None when no file has a step. The
        longest step is often the rank that waited most, not the one that was late: ``skew`` names
        that one.
    skew : tracekit.analyses.skew.Skew or None
        The collectives matched across the ranks: clock offsets, each instance's last arriver and
        waits, the culprit per step (:mod:`tracekit.analyses.skew`); None when fewer than two ranks
        have collective calls.
    world_size : int or None
        The run's world size, as the traces' ``distributedInfo.world_size`` state it (they agree:
        :func:`tracekit.ranks.check_set`); None when none states it.
    missing : tuple of (int, int)
        The ranks of the world (without a world size: below the highest rank) that no file of the
        directory holds, as ``(first, last)`` runs, lowest first; empty when none is missing.
    classes : DataFrame or None
        The class shares (:data:`CLASSES_SCHEMA`): per loaded file and kernel class, its kernels'
        summed time ``gpu_ns`` and ``share`` of the file's kernel time (null when that is 0), sorted
        by rank, file, then time (longest first) and class; from the per-rank summaries.
    steps : DataFrame or None
        Every rank's steps (:data:`STEPS_SCHEMA`, by rank then step): what ``tracekit diff DIR_A
        DIR_B`` takes the per-rank medians of; None for a report made without them.
    """

    #: The result kind: its view is ``tracekit.render.views.ranks``, its JSON contract
    #: ``tracekit.render.json.ranks`` (the renderers find both by this name).
    kind: ClassVar[str] = "ranks"

    directory: str
    ranks: pl.DataFrame
    slowest: str | None
    world_size: int | None = None
    missing: tuple[tuple[int, int], ...] = ()
    skew: Skew | None = None
    classes: pl.DataFrame | None = None
    steps: pl.DataFrame | None = None

    @property
    def culprit(self) -> int | None:
        """The rank the others waited for most over all steps (ties: lowest rank); None when no
        rank waited."""
        if self.skew is None or self.skew.ranks.height == 0:
            return None
        top = self.skew.ranks.sort("caused_ns", "rank", descending=[True, False]).row(0, named=True)
        return top["rank"] if top["caused_ns"] > 0 else None
