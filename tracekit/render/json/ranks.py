"""``tracekit.ranks/1`` (``tracekit report DIR``): ``{schema, directory, slowest, world_size,
missing_ranks: [[first, last]], ranks: [{file, rank, steps, mean_step_ns, max_step_ns, gpu_busy_ns,
kernel_count, error}]}``. ``world_size`` is null when no trace states one; ``missing_ranks`` lists
the runs of ranks no file holds (empty when none is missing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from tracekit.results.ranks import RankReport


#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.ranks/1"


def data(rank_report: RankReport) -> dict[str, Any]:
    """A directory's per-rank summary following the ``tracekit.ranks/1`` contract."""
    return {"schema": SCHEMA, "directory": rank_report.directory, "slowest": rank_report.slowest,
            "world_size": rank_report.world_size, "missing_ranks": [list(run) for run in rank_report.missing],
            "ranks": rank_report.ranks.to_dicts()}
