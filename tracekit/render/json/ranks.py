"""``tracekit.ranks/1`` (``tracekit report DIR``): ``{schema, directory, slowest, culprit, world_size,
missing_ranks: [[first, last]], ranks: [{file, rank, steps, mean_step_ns, max_step_ns, gpu_busy_ns,
kernel_count, error, verdict, comm_ns, exposed_comm_ns, wait_ns, caused_ns}], collectives}``.
``world_size`` is null when no trace states one; ``missing_ranks`` lists the runs of ranks no file
holds (empty when none is missing).

``slowest`` is the file with the longest mean step (kept for the contract; often a rank that waited),
``culprit`` the rank the others waited for most (null when no collective matched). ``collectives`` is
null when fewer than two ranks have collective calls, else ``{match, unmatched_share, reference,
offsets: [{rank, offset_ns, spread_ns, matched}], culprits: [{step, rank, caused_ns, instances,
victims, worst_instance, lost_phase, lost_ns}], instances: [...], waits: [...], ranks: [{rank,
calls, unmatched, wait_ns, caused_ns, last_at}]}`` — the frames of
:class:`tracekit.analyses.skew.Skew`, rows as objects.
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
    cross = rank_report.skew
    collectives = None
    if cross is not None:
        collectives = {"match": cross.match, "unmatched_share": cross.unmatched_share, "reference": cross.reference,
                       "offsets": cross.offsets.to_dicts(), "culprits": cross.culprits.to_dicts(),
                       "instances": cross.instances.to_dicts(), "waits": cross.waits.to_dicts(),
                       "ranks": cross.ranks.to_dicts()}
    return {"schema": SCHEMA, "directory": rank_report.directory, "slowest": rank_report.slowest,
            "culprit": rank_report.culprit, "world_size": rank_report.world_size,
            "missing_ranks": [list(run) for run in rank_report.missing],
            "ranks": rank_report.ranks.to_dicts(), "collectives": collectives}
