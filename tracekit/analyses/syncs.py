"""Host syncs and CUDA-graph launches per unit: what the host waited for ("``aten::item`` time 4.8 →
32.5 ms per step") and how often it replayed a graph ("CUDA-graph launches appeared").

Contract: :func:`analyze` takes a trace (its ``steps`` the unit windows) and its attributed GPU
activity (with ``decoded``) and returns :class:`HostSyncs`; :func:`measure` does the same over any
unit windows (the ``host_sync`` finding measures the steady units' blocking calls with it). Frames:

``syncs``: ``unit i64, name str, count i64, ns i64`` — per unit, the host's time blocked waiting
for the device, by what blocked it (:data:`SYNC_OPS`; a runtime call ending in ``Synchronize``;
a device-to-host memcpy's launch call, named ``<call> (DtoH)``). Only the outermost of nested
syncs on a thread counts (``aten::item`` → ``aten::_local_scalar_dense`` → ``cudaMemcpyAsync`` +
``cudaStreamSynchronize`` is one ``aten::item``), so the names of a unit add up to its host-sync
time without counting any wait twice. A sync belongs to the unit holding its start.

``graphs``: ``unit i64, graph_launches i64`` — graph launch calls (:data:`GRAPH_LAUNCH_APIS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses.round_trips import GRAPH_LAUNCH_APIS
from tracekit.analyses.steps import SYNC_CALL_SUFFIX, tag_steps
from tracekit.trace import Trace

#: CPU ops that block the host until the device has caught up, with why.
SYNC_OPS = {
    "aten::item": "reads one value of a device tensor on the host (`.item()`, `if tensor:`)",
    "aten::_local_scalar_dense": "the copy `aten::item` makes: a device-to-host copy and a stream sync",
}
SYNC_SCHEMA = {"unit": pl.Int64, "name": pl.String, "count": pl.Int64, "ns": pl.Int64}
GRAPH_SCHEMA = {"unit": pl.Int64, "graph_launches": pl.Int64}
_SPAN = ("name", "pid", "tid", "ts", "end")


@dataclass(frozen=True)
class HostSyncs:
    """The host's blocked time and graph launches per unit (module docstring).

    Attributes
    ----------
    syncs : DataFrame
        :data:`SYNC_SCHEMA`: ``unit i64, name str, count i64, ns i64``, sorted by unit and name.
    graphs : DataFrame
        :data:`GRAPH_SCHEMA`: ``unit i64, graph_launches i64``, sorted by unit.
    """

    syncs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SYNC_SCHEMA))
    graphs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GRAPH_SCHEMA))


def analyze(trace: Trace, gpu: pl.DataFrame) -> HostSyncs:
    """The :class:`HostSyncs` of ``trace`` per unit (its ``steps``); ``gpu`` is its attributed GPU work."""
    syncs, graphs = measure(trace, gpu, trace.steps)
    return HostSyncs(syncs=syncs, graphs=graphs)


def measure(trace: Trace, gpu: pl.DataFrame, windows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(syncs, graphs)`` of ``trace`` per unit of ``windows`` (``number, ts, end``); see the module."""
    launches = trace.launches
    d2h = gpu.filter((pl.col("kind") == "memcpy") & pl.col("launch_idx").is_not_null()
                     & (pl.col("decoded").str.json_path_match("$.direction") == "DtoH"))["launch_idx"]
    spans = pl.concat([
        trace.ops.filter((pl.col("cat") == "cpu_op") & pl.col("name").is_in(list(SYNC_OPS))).select(_SPAN),
        launches.filter(pl.col("name").str.ends_with(SYNC_CALL_SUFFIX)).select(_SPAN),
        launches.filter(pl.col("idx").is_in(d2h.implode()) & ~pl.col("name").str.ends_with(SYNC_CALL_SUFFIX))
        .select(pl.col("name") + " (DtoH)", *_SPAN[1:]),
    ])
    # The outermost sync of each nest: a span ending within one that started before it is inside it.
    spans = (spans.sort(["pid", "tid", "ts", pl.col("end")], descending=[False, False, False, True])
             .with_columns(_outer_end=pl.col("end").cum_max().shift(1).over(["pid", "tid"]))
             .filter(pl.col("_outer_end").is_null() | (pl.col("end") > pl.col("_outer_end"))))
    syncs = (_units(spans, windows).group_by("unit", "name")
             .agg(count=pl.len().cast(pl.Int64), ns=(pl.col("end") - pl.col("ts")).sum().cast(pl.Int64))
             .sort("unit", "name").cast(SYNC_SCHEMA))  # type: ignore[arg-type]
    graphs = (_units(launches.filter(pl.col("name").is_in(list(GRAPH_LAUNCH_APIS))), windows)
              .group_by("unit").agg(graph_launches=pl.len().cast(pl.Int64)).sort("unit")
              .cast(GRAPH_SCHEMA))  # type: ignore[arg-type]
    return syncs, graphs


def _units(frame: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    return tag_steps(frame, windows, "ts").rename({"step": "unit"}).filter(pl.col("unit").is_not_null())
