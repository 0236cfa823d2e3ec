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

What a blocking call costs the GPU (:func:`blocking_calls`, :func:`idle_windows`, :func:`idle_ns`):
the calls that return only once the device has caught up are the decomposition's ``blocked`` ones
(:mod:`tracekit.analyses.decomposition`: a synchronise call, a synchronous copy call, an async copy
to or from pageable memory). While the host is blocked it queues nothing, so the GPU, once it has
drained what was queued, idles until the host has returned and launched the next work. The GPU idle
a call caused is the GPU's idle time inside its window ``[ts, next)``, ``next`` the start of the
first GPU work at or after the call's return: about 0 when the GPU stayed busy throughout (another
stream kept it working, or the next launch reached it before it ran dry). A call that waited for no
GPU work (none ended while it ran: the device was already idle) drained nothing: its window is the
call alone, so only its own time counts, not the host's dispatch after it. Windows are merged before
they are measured, so an idle gap two calls share (``.item()``'s copy and its stream synchronise)
counts once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.decomposition import ASYNC_COPY_CALLS, BLOCKING_COPY_CALLS, PAGEABLE, SYNC_CALL_PATTERN
from tracekit.analyses.round_trips import GRAPH_LAUNCH_APIS
from tracekit.analyses.steps import SYNC_CALL_SUFFIX, tag_steps
from tracekit.trace import GPU_WORK_KINDS, Trace

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


def blocking_calls(launches: pl.DataFrame, memcpys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``launches`` (a launches frame, any extra columns kept) that block the host until
    the device has caught up (module docstring), plus ``call str``: the call's name, ``(DtoH)``,
    ``(HtoD)``… appended for a copy to or from pageable memory. ``memcpys``: the memcpy rows with
    their ``launch_idx`` and decoded ``src``, ``dst``, ``direction`` (the engine's ``memcpys``)."""
    pageable = memcpys.filter(pl.col("launch_idx").is_not_null()
                              & ((pl.col("src") == PAGEABLE) | (pl.col("dst") == PAGEABLE)))
    direction = pageable.select(idx=pl.col("launch_idx").cast(launches.schema["idx"]), _direction="direction")
    name = pl.col("name")
    found = launches.join(direction.unique("idx", keep="first"), on="idx", how="left", maintain_order="left")
    return (found.filter(name.str.contains(SYNC_CALL_PATTERN) | name.is_in(list(BLOCKING_COPY_CALLS))
                         | (name.is_in(list(ASYNC_COPY_CALLS)) & pl.col("_direction").is_not_null()))
            .with_columns(call=pl.when(pl.col("_direction").is_not_null())
                          .then(name + " (" + pl.col("_direction").fill_null("pageable") + ")").otherwise(name))
            .drop("_direction"))


def idle_windows(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """``calls`` (``ts``, ``end``, ``limit``: the end of the unit holding the call) plus ``window_end
    i64``: the end of the window whose GPU idle the call may have caused (module docstring). When some
    GPU work (``gpu``'s kernels, copies and memsets) ended while the call ran, the call drained the
    GPU's queue: the window runs on to the next blocking call of ``calls`` or the unit's end,
    whichever comes first, and at least to the first GPU work after the return (a synchronise that
    ends the unit causes the idle before the next unit's first work). Else the call waited for
    nothing: the window is the call alone."""
    work = gpu.filter(pl.col("kind").is_in(list(GPU_WORK_KINDS)))
    starts, ends = work["ts"].sort(), work["end"].sort()
    if calls.height == 0 or starts.len() == 0:
        return calls.with_columns(window_end=pl.col("end"))
    calls = calls.sort("ts", "end")
    after = starts.search_sorted(calls["end"], side="left").cast(pl.Int64)
    first = starts.gather(after.clip(upper_bound=starts.len() - 1))
    waited = (ends.search_sorted(calls["end"], side="right").cast(pl.Int64)
              > ends.search_sorted(calls["ts"], side="right").cast(pl.Int64))
    stop = pl.min_horizontal(pl.col("ts").shift(-1).fill_null(pl.col("limit")), pl.col("limit"))
    reach = pl.max_horizontal(stop, pl.when(after < starts.len()).then(first), pl.col("end"))
    return calls.with_columns(window_end=pl.when(waited).then(reach).otherwise(pl.col("end")).cast(pl.Int64))


def idle_ns(windows: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """``windows`` (calls with ``ts``, ``end``, ``window_end``: :func:`idle_windows`) plus ``idle_ns
    i64``: each call's share of the GPU idle the calls caused. Overlapping windows are merged; a
    merged window's idle is its length less the GPU work (``gpu``) inside it, at most the time its
    calls blocked the host (had they not blocked, the host's work after them would have come that
    much earlier, no more), shared among its calls by their blocked time. The shares sum to the
    idle of the union, each instant counted once."""
    if windows.height == 0:
        return windows.with_columns(idle_ns=pl.lit(0, pl.Int64))
    ordered = (windows.sort("ts", "end").with_columns(_reach=pl.col("window_end").cum_max().shift(1))
               .with_columns(_group=(pl.col("_reach").is_null() | (pl.col("ts") > pl.col("_reach"))).cum_sum()))
    merged = ordered.group_by("_group").agg(lo=pl.col("ts").min(), hi=pl.col("window_end").max(),
                                            blocked=(pl.col("end") - pl.col("ts")).sum()).sort("lo")
    busy = intervals.merge(gpu.filter(pl.col("kind").is_in(list(GPU_WORK_KINDS))).select("ts", "end"))
    starts, stops = busy["ts"], busy["end"]
    done = pl.concat([pl.Series([0], dtype=pl.Int64), (stops - starts).cum_sum()])

    def upto(times: pl.Series) -> pl.Series:
        """Busy time before each of ``times``: the intervals that start by t, less the part of the
        last of them that runs past t (merged intervals are disjoint and sorted)."""
        if starts.len() == 0:
            return pl.zeros(times.len(), pl.Int64, eager=True)
        i = starts.search_sorted(times, side="right").cast(pl.Int64)
        past = (stops.gather((i - 1).clip(lower_bound=0)) - times).clip(lower_bound=0)
        return done.gather(i) - pl.select(pl.when(i > 0).then(past).otherwise(0)).to_series()

    merged = merged.with_columns(
        _idle=pl.min_horizontal(pl.col("hi") - pl.col("lo") - (upto(merged["hi"]) - upto(merged["lo"])), "blocked"))
    share = pl.when(pl.col("blocked") > 0).then((pl.col("end") - pl.col("ts")) / pl.col("blocked")).otherwise(0)
    return (ordered.join(merged.select("_group", "_idle", "blocked"), on="_group", how="left")
            .with_columns(idle_ns=(pl.col("_idle") * share).round().cast(pl.Int64))
            .drop("_reach", "_group", "_idle", "blocked"))
