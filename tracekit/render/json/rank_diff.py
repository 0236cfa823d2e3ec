"""``tracekit.rank_diff/1`` (``tracekit diff DIR_A DIR_B``): ``{schema, a: {directory, culprit},
b: {directory, culprit}, ranks: [{rank, steps_a, steps_b, step_a_ns, step_b_ns, step_delta_ns,
busy_a_ns, busy_b_ns, busy_delta_ns, exposed_a_ns, exposed_b_ns, exposed_delta_ns, wait_a_ns,
wait_b_ns, wait_delta_ns}], collectives: [{kind, pg, order, instance_a, instance_b, bytes_a,
bytes_b, busbw_a_gbps, busbw_b_gbps, busbw_ratio}]}``.

Per rank, each figure's median over its steps on each side and B − A (null where the rank or the
figure is absent); collectives paired by kind, process group (``""``: the default) and order
(:mod:`tracekit.diff.ranks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracekit.results.rank_diff import RankDiff

#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.rank_diff/1"


def data(result: RankDiff) -> dict[str, Any]:
    """Two directories of ranks compared, following the ``tracekit.rank_diff/1`` contract."""
    return {"schema": SCHEMA,
            "a": {"directory": result.a.directory, "culprit": result.a.culprit},
            "b": {"directory": result.b.directory, "culprit": result.b.culprit},
            "ranks": result.ranks.to_dicts(), "collectives": result.collectives.to_dicts()}
