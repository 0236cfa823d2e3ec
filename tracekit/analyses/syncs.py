"""Host syncs and CUDA-graph launches per unit: what the host waited for ("``aten::item`` time 4.8 →
32.5 ms per step") and how often it replayed a graph ("CUDA-graph launches appeared").

Contract: :func:`analyze` takes a trace (its ``steps`` the unit windows) and its attributed GPU
activity (with ``decoded``) and returns :class:`HostSyncs`; :func:`measure` does the same over any
unit windows. Frames:

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
run what was queued, idles; after the call returns the host has lost its lead, and the GPU idles
in the gaps while the host dispatches the next work, until it is ahead again. The GPU idle a call
caused is the GPU's idle time from when the work queued before it finished to the unit's end, at
most the lead the host lost — the GPU work other than communication that the call waited for: had
it not waited, the host's work after it would have come that much earlier, no more (calls whose
windows overlap share the idle, and the cap is their summed lead). It is about 0 when the GPU stayed
busy throughout, and when the call waited for a collective (the rank waits for its peers there,
not for its host). A call that found nothing queued drained nothing and caused no idle. Windows are
merged before they are measured, so an idle gap that two calls share (``.item()``'s copy and its
stream synchronise) counts once. The ``host_sync`` finding is priced with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.breakdown import COMMUNICATION
from tracekit.analyses.decomposition import PAGEABLE, blocking_call
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
    direction = pageable.select(idx=pl.col("launch_idx").cast(launches.schema["idx"]),
                                _direction=pl.col("direction").fill_null("pageable"))
    name = pl.col("name")
    found = launches.join(direction.unique("idx", keep="first"), on="idx", how="left", maintain_order="left")
    return (found.filter(blocking_call(name, pl.col("_direction").is_not_null()))
            .with_columns(call=pl.when(pl.col("_direction").is_not_null())
                          .then(name + " (" + pl.col("_direction") + ")").otherwise(name))
            .drop("_direction"))


def idle_windows(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """``calls`` (``ts``, ``end``, ``limit``: the end of the unit holding the call) plus
    ``window_start i64``, ``window_end i64`` (the window whose GPU idle the call may have caused,
    module docstring) and ``waited_ns i64`` (the lead the host lost). ``gpu``: the GPU work (kernels,
    copies, memsets) with ``launch_ts`` and ``kernel_class``.

    The call drained the GPU's queue when work launched before it was still to finish when it
    started: the window then opens when that work has finished (idle before it, with work queued,
    is the work waiting on something else — another stream, a peer — not on the host) and runs on to
    the unit's end (the host dispatches the rest of the unit without the lead it lost), and at least
    to the first GPU work after the call returned (a call that ends the unit causes the idle before
    the next unit's first work). Else the call waited for nothing and caused no idle: its window is
    empty (its own time is a call like any other, dispatch).

    ``waited_ns`` is the GPU's busy time on work other than communication while the call waited:
    the work the host had queued ahead. Time the GPU spent in a collective, or idle behind one,
    would pass with or without the synchronise — the rank waits for its peers there (exposed
    communication, rank skew), not for its own host."""
    work = gpu.filter(pl.col("kind").is_in(list(GPU_WORK_KINDS)))
    if calls.height == 0 or work.height == 0:
        return calls.with_columns(window_start=pl.col("ts"), window_end=pl.col("ts"), waited_ns=pl.lit(0, pl.Int64))
    starts = work["ts"].sort()
    launched = work.filter(pl.col("launch_ts").is_not_null()).sort("launch_ts").with_columns(
        _drained=pl.col("end").cum_max())
    calls = calls.sort("ts", "end")
    before = launched["launch_ts"].search_sorted(calls["ts"], side="left").cast(pl.Int64)
    drain = launched["_drained"].gather((before - 1).clip(lower_bound=0))
    drain = pl.select(pl.when(before > 0).then(drain)).to_series().fill_null(0)
    after = starts.search_sorted(calls["end"], side="left").cast(pl.Int64)
    first = starts.gather(after.clip(upper_bound=starts.len() - 1))
    reach = pl.max_horizontal(pl.col("limit"), pl.when(after < starts.len()).then(first), pl.col("end"))
    drained = drain > calls["ts"]
    until = pl.min_horizontal(pl.lit(drain), pl.col("end"))
    compute = _busy_before(work.filter(pl.col("kernel_class").fill_null("") != COMMUNICATION))
    opened = calls.with_columns(_until=until)
    waited = compute(opened["_until"]) - compute(opened["ts"])
    return calls.with_columns(
        window_start=pl.when(drained).then(until).otherwise(pl.col("ts")),
        window_end=pl.when(drained).then(reach).otherwise(pl.col("ts")),
        waited_ns=pl.when(drained).then(waited.clip(lower_bound=0)).otherwise(0)).cast(
        {"window_start": pl.Int64, "window_end": pl.Int64, "waited_ns": pl.Int64})


def idle_ns(windows: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """``windows`` (calls with ``window_start``, ``window_end``, ``waited_ns``: :func:`idle_windows`)
    plus ``idle_ns i64``: each call's share of the GPU idle the calls caused. Overlapping windows
    are merged; a merged window's idle is its length less the GPU work (``gpu``) inside it, at most
    the lead its calls lost (their summed ``waited_ns``: had they not waited, the host's work after
    them would have come that much earlier, no more), shared among its calls by their ``waited_ns``.
    The shares sum to the idle of the union, each instant counted once."""
    if windows.height == 0:
        return windows.with_columns(idle_ns=pl.lit(0, pl.Int64))
    ordered = (windows.sort("window_start", "window_end").with_columns(_reach=pl.col("window_end").cum_max().shift(1))
               .with_columns(_group=(pl.col("_reach").is_null() | (pl.col("window_start") > pl.col("_reach")))
                             .cum_sum()))
    merged = ordered.group_by("_group").agg(lo=pl.col("window_start").min(), hi=pl.col("window_end").max(),
                                            lead=pl.col("waited_ns").sum()).sort("lo")
    busy = _busy_before(gpu.filter(pl.col("kind").is_in(list(GPU_WORK_KINDS))))
    merged = merged.with_columns(
        _idle=pl.min_horizontal(pl.col("hi") - pl.col("lo") - (busy(merged["hi"]) - busy(merged["lo"])), "lead"))
    share = pl.when(pl.col("lead") > 0).then(pl.col("waited_ns") / pl.col("lead")).otherwise(0)
    return (ordered.join(merged.select("_group", "_idle", "lead"), on="_group", how="left")
            .with_columns(idle_ns=(pl.col("_idle") * share).round().cast(pl.Int64))
            .drop("_reach", "_group", "_idle", "lead"))


def _busy_before(work: pl.DataFrame) -> Callable[[pl.Series], pl.Series]:
    """A function giving, for each of some times, the length of the union of ``work``'s ``[ts,
    end)`` intervals before it."""
    busy = intervals.merge(work.select("ts", "end"))
    starts, stops = busy["ts"], busy["end"]
    done = pl.concat([pl.Series([0], dtype=pl.Int64), (stops - starts).cum_sum()])

    def upto(times: pl.Series) -> pl.Series:
        # The merged intervals starting by t, less the part of the last of them that runs past t.
        if starts.len() == 0:
            return pl.zeros(times.len(), pl.Int64, eager=True)
        i = starts.search_sorted(times, side="right").cast(pl.Int64)
        past = (stops.gather((i - 1).clip(lower_bound=0)) - times).clip(lower_bound=0)
        return done.gather(i) - pl.select(pl.when(i > 0).then(past).otherwise(0)).to_series()

    return upto
