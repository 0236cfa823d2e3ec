"""Each unit's wall split into what the host was doing and what the GPU did meanwhile.

Contract: :func:`analyze` takes the trace (its ``steps`` the unit windows), its attributed GPU work
(attribution's ``gpu``: ``step``, ``ts``, ``end``, ``launch_idx``, ``decoded``) and the per-unit
summary (:func:`tracekit.analyses.steps.summarize`) and returns a :class:`Decomposition`. It is the
base every finding's wall price is taken from: a finding says which part it would shrink.

The CPU side. A unit's CPU span (``cpu_span_ns``: the span of its ProfilerStep, or found unit, on
its thread) is split into four exclusive parts that sum to it exactly. Each instant of the span
takes the first of these states that holds, in this priority:

1. ``blocked`` — inside a call that returns only once the device has caught up: a synchronise call
   (:data:`SYNC_CALL_PATTERN`: ``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
   ``hipEventSynchronize``…); a copy call that is synchronous whatever it copies
   (:data:`BLOCKING_COPY_CALLS`: ``cudaMemcpy``…); or an async copy call
   (:data:`ASYNC_COPY_CALLS`) whose GPU memcpy row has pageable host memory at either end (the
   row's name, ``Memcpy DtoH (Device -> Pageable)``, decoded by
   :func:`tracekit.classify.misc.decode_memcpy`: the runtime stages a pageable copy through a
   bounce buffer and returns only once it is done). ``aten::item`` and
   ``aten::_local_scalar_dense`` count through the calls they make: the part of their span
   covered by such a call (their stream synchronise, or their copy to pageable memory) is blocked,
   the rest of them is dispatch. So an ``.item()`` of a CPU tensor, which makes no such call, is
   never a wait, and an item whose copy lands in pinned memory is blocked exactly while it
   synchronises;
2. ``data`` — inside a data-loading span (:data:`DATA_PREFIXES`, :data:`DATA_FUNCTION_PATTERN`,
   :data:`DATA_ANNOTATIONS`) and not blocked: waiting for the next batch, whatever ops the loader
   runs inside (collate, pin memory) — time the input pipeline costs the step;
3. ``dispatch`` — inside any other ``cpu_op`` or runtime/driver call: the host issuing work;
4. ``op_free`` — the rest: in no op at all (Python between ops, sleeps, unprofiled work).

Blocked comes first because a wait is the most specific cause (a data loader that synchronises
is waiting for the GPU, not for data); data before dispatch because a loader's own ops are the
loader's cost, not the model's dispatch.

Which threads count: all threads of the unit's process, seen as one timeline — an instant is in
the highest-priority state that any of the process's threads is in then. Why: the main thread
hands backward to autograd's device thread and waits for it in native code without an op span, so
the main thread alone would call backward "op-free"; adding the threads' times would count the same
wall time twice and no longer sum to the span. The union never exceeds the span. A blocking call
on any thread counts as blocked: a sync in backward (a gradient hook's ``.item()``) stalls the
``backward()`` the main thread waits in. The limit of the rule: a side thread of the same process
(a pin-memory thread, a logger) that is busy or blocked while the main thread runs Python is
counted for the process. Other processes (DataLoader workers) never count. Spans are clipped to
the unit's span; one crossing a unit boundary counts in each unit for the part inside it.

The GPU side. ``gpu_busy_ns`` is the summary's (the union of the unit's own GPU work). The unit's
GPU window here starts earlier than the summary's (its first start to last end of that work): at the
previous unit's last GPU end, or at the unit's own CPU start when that is later. The part before its
first GPU work is ``gpu_lead_ns``: the GPU done with the previous unit and waiting for this one's first
launch — where an input pipeline's stall shows (the public ResNet training trace: the DataLoader's
time is between the units' own GPU windows, not inside them). ``gpu_idle_ns`` is the summary's idle
time inside its own window plus the lead. The idle time is
split by the state the unit's process was in at each idle instant, by the same priority
(``idle_while_blocked_ns``, ``idle_while_data_ns``, ``idle_while_dispatch_ns``,
``idle_while_op_free_ns``; they sum to ``gpu_idle_ns`` exactly). The GPU runs behind the host, so
the host state at an idle instant is taken from the process's whole timeline, not only from the
unit's own CPU span: an idle gap while the host already dispatches the next unit is
``idle_while_dispatch``.

The limit: :data:`LIMIT_RULE` (``gpu`` when the unit's GPU busy time is at least
:data:`GPU_LIMIT_MIN_BUSY_FRAC` of its wall, else the largest CPU part, ties broken by the
priority above). The whole trace's limit is the same rule over the steady units' totals.

Frames:

``units`` (:data:`UNITS_SCHEMA`), one row per unit in the summary's order: ``step i64``, ``pid
str``, ``tid str`` (the unit's thread), ``cpu_span_ns i64``, ``blocked_ns i64``, ``data_ns i64``,
``dispatch_ns i64``, ``op_free_ns i64`` (the four sum to ``cpu_span_ns``), ``wall_ns i64``,
``gpu_busy_ns i64`` (the summary's), ``gpu_lead_ns i64``, ``gpu_idle_ns i64`` (the summary's plus
the lead), ``idle_while_blocked_ns i64``,
``idle_while_data_ns i64``, ``idle_while_dispatch_ns i64``, ``idle_while_op_free_ns i64`` (they
sum to ``gpu_idle_ns``), ``limit str`` (:data:`LIMITS`), ``steady bool`` (the unit is one the
medians and totals are taken over: :func:`tracekit.analyses.steps.steady_steps`).

``totals`` (:data:`TOTALS_SCHEMA`), over the steady units, one row per part in :data:`PARTS`
order: ``part str``, ``of str`` (the whole it is a part of: ``cpu_span``, ``wall``,
``gpu_window`` or ``gpu_idle``), ``total_ns i64``, ``median_ns f64`` (median per unit),
``share f64`` (``total_ns`` over the total of ``of``; 0 when that is 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.steps import steady_steps
from tracekit.trace import Trace

#: Runtime/driver calls that wait for the device (CUDA runtime, CUDA driver, HIP).
SYNC_CALL_PATTERN = r"^(?:cuda|cu|hip)\w*Synchronize$"
#: Copy calls that are synchronous with the host whatever memory they copy (the runtime's
#: non-``Async`` copies return once the copy is done).
BLOCKING_COPY_CALLS = frozenset({
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
    "hipMemcpy", "hipMemcpy2D", "hipMemcpyDtoH", "hipMemcpyHtoD",
})
#: Async copy calls: blocking when their GPU memcpy row has pageable host memory at either end.
ASYNC_COPY_CALLS = frozenset({"cudaMemcpyAsync", "cudaMemcpy2DAsync", "hipMemcpyAsync", "hipMemcpyWithStream"})
#: The memory kind of a memcpy row's end (``decode_memcpy``'s ``src``/``dst``) that makes its copy blocking.
PAGEABLE = "Pageable"

#: Name prefixes of data-loading spans (any category), with where they come from.
DATA_PREFIXES = {
    "enumerate(DataLoader)": "torch.utils.data's iterator records each batch as "
                             "`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` "
                             "(`_MultiProcessingDataLoaderIter` with workers)",
}
#: ``python_function`` spans (``with_stack``) of the DataLoader iterator's ``__next__``.
DATA_FUNCTION_PATTERN = r"torch/utils/data/dataloader\.py\(\d+\): __next__$"
#: User annotations (``record_function``) that name data loading, compared case-insensitively, and
#: Lightning's span for fetching the next training batch.
DATA_ANNOTATIONS = frozenset({
    "data", "data_loading", "data loading", "dataloader", "data_loader", "data_load", "load_data",
    "load_batch", "get_batch", "next_batch", "fetch_batch", "[_trainingepochloop].train_dataloader_next",
})

#: The host states, in priority order (the first that holds at an instant wins).
STATES = ("blocked", "data", "dispatch", "op_free")
#: A unit's limit: ``gpu`` or one of :data:`STATES`.
LIMITS = ("gpu", *STATES)
#: At this GPU busy fraction of wall the GPU limits the unit: removing every host cost could then
#: shorten it by at most a tenth, less than any CPU part can claim to price (stricter than the
#: summary's compute-bound 0.80, which asks only whether the GPU was saturated).
GPU_LIMIT_MIN_BUSY_FRAC = 0.90
LIMIT_RULE = (f"gpu when gpu_busy_ns >= {GPU_LIMIT_MIN_BUSY_FRAC} x wall_ns; else the largest of "
              "blocked, data, dispatch, op_free (ties: that order)")

UNITS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "pid": pl.String, "tid": pl.String, "cpu_span_ns": pl.Int64,
    "blocked_ns": pl.Int64, "data_ns": pl.Int64, "dispatch_ns": pl.Int64, "op_free_ns": pl.Int64,
    "wall_ns": pl.Int64, "gpu_busy_ns": pl.Int64, "gpu_lead_ns": pl.Int64, "gpu_idle_ns": pl.Int64,
    "idle_while_blocked_ns": pl.Int64, "idle_while_data_ns": pl.Int64, "idle_while_dispatch_ns": pl.Int64,
    "idle_while_op_free_ns": pl.Int64, "limit": pl.String, "steady": pl.Boolean,
}
#: The ``totals`` rows: (part, the whole it is a part of); each is a ``units`` column ``<part>_ns``.
PARTS = (
    ("blocked", "cpu_span"), ("data", "cpu_span"), ("dispatch", "cpu_span"), ("op_free", "cpu_span"),
    ("gpu_busy", "wall"), ("gpu_busy", "gpu_window"), ("gpu_idle", "gpu_window"),
    ("idle_while_blocked", "gpu_idle"), ("idle_while_data", "gpu_idle"),
    ("idle_while_dispatch", "gpu_idle"), ("idle_while_op_free", "gpu_idle"),
)
TOTALS_SCHEMA: dict[str, pl.DataType] = {
    "part": pl.String, "of": pl.String, "total_ns": pl.Int64, "median_ns": pl.Float64, "share": pl.Float64,
}
_SPANS = {"pid": pl.String, "ts": pl.Int64, "end": pl.Int64, "layer": pl.Int8}


@dataclass(frozen=True)
class Decomposition:
    """Each unit's CPU span and GPU idle time by host state, and the limits (module docstring).

    Attributes
    ----------
    units : DataFrame
        :data:`UNITS_SCHEMA`, one row per unit in the summary's order.
    totals : DataFrame
        :data:`TOTALS_SCHEMA`, over the steady units, in :data:`PARTS` order (empty without units).
    limit : str or None
        The steady units' limit (:data:`LIMIT_RULE` over their totals); None without units.
    limit_share : float or None
        The limiting part's share: of the steady units' wall for ``gpu``, else of their CPU span
        (the public ResNet training trace's steady units: ``data``, 0.63 of their CPU span waiting
        for the DataLoader).
    """

    units: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=UNITS_SCHEMA))
    totals: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TOTALS_SCHEMA))
    limit: str | None = None
    limit_share: float | None = None


def analyze(trace: Trace, gpu: pl.DataFrame, summary: pl.DataFrame) -> Decomposition:
    """The :class:`Decomposition` of ``trace``'s units.

    Parameters
    ----------
    trace
        The trace, its ``steps`` the unit windows.
    gpu
        Its attributed GPU work (``step i64?, ts i64, end i64, launch_idx u32?, decoded str``): the
        frame the summary was made from.
    summary
        The per-unit summary (:data:`tracekit.analyses.steps.SUMMARY_SCHEMA`).
    """
    if summary.height == 0:
        return Decomposition()
    windows = _cpu_windows(trace, summary)
    levels = _levels(host_spans(trace, gpu, windows["pid"].unique()))
    cpu = _clip(levels, windows.select("step", "pid", ts="cpu_start_ns",
                                       end=pl.col("cpu_start_ns") + pl.col("cpu_span_ns")))
    gpu_windows = _gpu_windows(summary, windows)
    busy = intervals.merge(gpu.filter(pl.col("step").is_not_null()).select("step", "ts", "end"), by=["step"])
    covered = (_covered(cpu, "cpu").join(_covered(_clip(levels, gpu_windows), "gpu", busy), on="step",
                                         how="full", coalesce=True))
    units = (summary.select("step", "cpu_span_ns", "wall_ns", "gpu_busy_ns", "gpu_idle_ns")
             .join(gpu_windows.select("step", "gpu_lead_ns"), on="step", how="left", maintain_order="left")
             .with_columns(pl.col("gpu_lead_ns").fill_null(0))
             .with_columns(gpu_idle_ns=pl.col("gpu_idle_ns") + pl.col("gpu_lead_ns"))
             .join(windows.select("step", "pid", "tid"), on="step", how="left", maintain_order="left")
             .join(covered, on="step", how="left", maintain_order="left")
             .with_columns(pl.col("^(cpu|gpu)_upto_\\d$").fill_null(0))
             .with_columns(
                 blocked_ns=pl.col("cpu_upto_1"), data_ns=pl.col("cpu_upto_2") - pl.col("cpu_upto_1"),
                 dispatch_ns=pl.col("cpu_upto_3") - pl.col("cpu_upto_2"),
                 op_free_ns=pl.col("cpu_span_ns") - pl.col("cpu_upto_3"),
                 # Each covered union holds the busy time: past it, the idle time in that state.
                 idle_while_blocked_ns=pl.max_horizontal("gpu_upto_1", "gpu_busy_ns") - pl.col("gpu_busy_ns"),
                 idle_while_data_ns=pl.col("gpu_upto_2") - pl.max_horizontal("gpu_upto_1", "gpu_busy_ns"),
                 idle_while_dispatch_ns=pl.col("gpu_upto_3") - pl.col("gpu_upto_2"),
                 idle_while_op_free_ns=pl.col("gpu_idle_ns") + pl.col("gpu_busy_ns")
                 - pl.max_horizontal("gpu_upto_3", "gpu_busy_ns"))
             .with_columns(limit=limit_expr(), steady=pl.col("step").is_in(steady_steps(summary)))
             .select(list(UNITS_SCHEMA)).cast(UNITS_SCHEMA))  # type: ignore[arg-type]
    steady = units.filter(pl.col("steady"))
    limit, share = _trace_limit(steady)
    totals = _totals(steady)
    return Decomposition(units=units, totals=totals, limit=limit, limit_share=share)


def state_spans(trace: Trace, gpu: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """Where each host state held inside each unit's CPU span, for drawing: ``step i64, ts i64, end
    i64, layer i8`` — layer k rows are the union of the spans of states 1..k (1 blocked, 2 blocked or
    data, 3 blocked, data or dispatch), clipped to the unit; painted 3, 2, 1 over the span (op-free)
    they show each instant's state. Same inputs as :func:`analyze`."""
    if summary.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "ts": pl.Int64, "end": pl.Int64, "layer": pl.Int8})
    windows = _cpu_windows(trace, summary)
    levels = _levels(host_spans(trace, gpu, windows["pid"].unique()))
    return _clip(levels, windows.select("step", "pid", ts="cpu_start_ns",
                                        end=pl.col("cpu_start_ns") + pl.col("cpu_span_ns")))


def _cpu_windows(trace: Trace, summary: pl.DataFrame) -> pl.DataFrame:
    """``step, cpu_start_ns, cpu_span_ns, pid, tid``: each unit's CPU span and its thread."""
    return (summary.select("step", "cpu_start_ns", "cpu_span_ns")
            .join(trace.steps.select(pl.col("number").alias("step"), "pid", "tid"), on="step", how="left"))


def _gpu_windows(summary: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Each unit's GPU window with its lead (module docstring): ``step, pid, ts, end, gpu_lead_ns``;
    units without GPU work have none."""
    own_end = pl.col("gpu_start_ns") + pl.col("gpu_window_ns")
    return (summary.filter(pl.col("gpu_start_ns").is_not_null())
            .join(windows.select("step", "pid"), on="step", how="left")
            .sort("gpu_start_ns")
            .with_columns(_prev_end=own_end.shift(1).over("pid"))
            .with_columns(ts=pl.min_horizontal("gpu_start_ns", pl.max_horizontal("cpu_start_ns", "_prev_end")))
            .select("step", "pid", "ts", end=own_end, gpu_lead_ns=pl.col("gpu_start_ns") - pl.col("ts")))


def restrict(found: Decomposition, step: int) -> Decomposition:
    """``found`` for unit ``step`` alone: its row, totals over it, its limit and share (as if it
    were the only steady unit)."""
    units = found.units.filter(pl.col("step") == step)
    limit, share = _trace_limit(units)
    return Decomposition(units=units, totals=_totals(units), limit=limit, limit_share=share)


def host_spans(trace: Trace, gpu: pl.DataFrame, pids: pl.Series) -> pl.DataFrame:
    """The host spans of the processes ``pids`` that decide a state: ``pid str, ts i64, end i64,
    layer i8`` (1 blocked, 2 data, 3 dispatch: the priority of :data:`STATES`), unclipped."""
    pageable = gpu.filter(pl.col("launch_idx").is_not_null() & (pl.col("kind") == "memcpy")).filter(
        (pl.col("decoded").str.json_path_match("$.src") == PAGEABLE)
        | (pl.col("decoded").str.json_path_match("$.dst") == PAGEABLE))["launch_idx"]
    blocking = blocking_call(pl.col("name"), pl.col("idx").is_in(pageable.implode()))
    launches = (trace.launches.lazy().filter(pl.col("pid").is_in(pids.implode()))
                .select("pid", "ts", "end", layer=pl.when(blocking).then(1).otherwise(3).cast(pl.Int8)))
    data = data_span()
    # Annotations and Python frames are labels over ops, not work: only the data-loading ones count.
    ops = (trace.ops.lazy().filter(pl.col("pid").is_in(pids.implode()))
           .select("pid", "ts", "end", layer=pl.when(data).then(2).when(pl.col("cat") == "cpu_op").then(3)
                   .cast(pl.Int8))
           .filter(pl.col("layer").is_not_null()))
    return pl.concat([launches, ops]).cast(_SPANS).collect()  # type: ignore[arg-type]


def data_span() -> pl.Expr:
    """Whether an op (``name``, ``cat``) is a data-loading span (:data:`DATA_PREFIXES`,
    :data:`DATA_FUNCTION_PATTERN`, :data:`DATA_ANNOTATIONS`)."""
    name = pl.col("name")
    return (pl.any_horizontal(*(name.str.starts_with(prefix) for prefix in DATA_PREFIXES))
            | ((pl.col("cat") == "python_function") & name.str.contains(DATA_FUNCTION_PATTERN))
            | ((pl.col("cat") == "user_annotation") & name.str.to_lowercase().is_in(list(DATA_ANNOTATIONS))))


def blocking_call(name: pl.Expr, pageable_copy: pl.Expr) -> pl.Expr:
    """Whether a runtime/driver call named ``name`` blocks the host until the device has caught up:
    a synchronise call, a synchronous copy call, or an async copy call whose copy has pageable
    memory at an end (``pageable_copy``). The one definition :mod:`tracekit.analyses.syncs` shares."""
    return (name.str.contains(SYNC_CALL_PATTERN) | name.is_in(list(BLOCKING_COPY_CALLS))
            | (name.is_in(list(ASYNC_COPY_CALLS)) & pageable_copy))


def limit_expr() -> pl.Expr:
    """:data:`LIMIT_RULE` over ``gpu_busy_ns``, ``wall_ns`` and the four ``<state>_ns`` columns."""
    parts = [pl.col(f"{state}_ns") for state in STATES]
    rule = pl.when((pl.col("wall_ns") > 0) & (pl.col("gpu_busy_ns") >= GPU_LIMIT_MIN_BUSY_FRAC * pl.col("wall_ns")))
    rule = rule.then(pl.lit("gpu"))
    for i, state in enumerate(STATES[:-1]):
        rule = rule.when(parts[i] >= pl.max_horizontal(parts[i + 1:])).then(pl.lit(state))  # type: ignore[assignment]
    return rule.otherwise(pl.lit(STATES[-1])).alias("limit")


def _clip(spans: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``spans`` (``pid, ts, end, layer``) cut to the ``windows`` (``step, pid, ts, end``) of their
    process they overlap: ``step i64, ts i64, end i64, layer i8``, one row per overlap."""
    if spans.height == 0 or windows.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, "ts": pl.Int64, "end": pl.Int64, "layer": pl.Int8})
    order = windows.sort("ts", "step")
    # Windows [first, last) that can overlap a span, by binary search (no cross join): the first
    # whose running-maximum end passes its start, up to the last starting before its end. Steps do
    # not overlap, so a span usually gets one row; the filter below drops any window in the range
    # (overlapping units) that it does not touch.
    first = order["end"].cum_max().search_sorted(spans["ts"], side="right").cast(pl.Int64)
    last = order["ts"].search_sorted(spans["end"], side="left").cast(pl.Int64)
    ranged = spans.with_columns(_first=first, _last=last)
    one = pl.col("_last") - pl.col("_first") == 1
    # Nearly every span meets one window: only the others are exploded into one row per window.
    ranged = pl.concat([
        ranged.filter(one).select(*spans.columns, _w=pl.col("_first")),
        ranged.filter(pl.col("_last") - pl.col("_first") > 1)
        .select(*spans.columns, _w=pl.int_ranges("_first", "_last")).explode("_w"),
    ])
    hit = order.select(pl.all().name.prefix("_win_")).gather(ranged["_w"])
    return (pl.concat([ranged, hit], how="horizontal").lazy()
            .filter(pl.col("pid") == pl.col("_win_pid"))
            .select(pl.col("_win_step").alias("step"), pl.max_horizontal("ts", "_win_ts").alias("ts"),
                    pl.min_horizontal("end", "_win_end").alias("end"), "layer")
            .filter(pl.col("end") > pl.col("ts")).collect())


def _levels(spans: pl.DataFrame) -> pl.DataFrame:
    """Per process, the merged union of the spans of layer 1 to k, as rows of ``layer`` k (k = 1, 2,
    3): ``pid, ts, end, layer``; the rows of one process and level are disjoint. Merged once here,
    the far fewer rows are clipped to windows and need no union there."""
    return pl.concat([
        intervals.merge(spans.filter(pl.col("layer") <= k).select("pid", "ts", "end"), by=["pid"])
        .with_columns(layer=pl.lit(k, pl.Int8)) for k in (1, 2, 3)
    ]).cast(_SPANS)  # type: ignore[arg-type]


def _covered(levels: pl.DataFrame, prefix: str, busy: pl.DataFrame | None = None) -> pl.DataFrame:
    """``step, <prefix>_upto_1 .. _upto_3``: per step, the length covered by the clipped ``levels``
    of each k (disjoint: a sum), or with ``busy`` (``step, ts, end``) by their union with it."""
    out = levels.select("step").unique()
    for k in (1, 2, 3):
        rows = levels.filter(pl.col("layer") == k).select("step", "ts", "end")
        if busy is None:
            upto = rows.group_by("step").agg(busy_ns=(pl.col("end") - pl.col("ts")).sum())
        else:
            upto = intervals.union_ns(pl.concat([busy.select(rows.columns).cast(rows.schema), rows]), by=["step"])
        out = out.join(upto.rename({"busy_ns": f"{prefix}_upto_{k}"}), on="step", how="left")
    return out.cast({"step": pl.Int64})


def _totals(steady: pl.DataFrame) -> pl.DataFrame:
    if steady.height == 0:
        return pl.DataFrame(schema=TOTALS_SCHEMA)
    sums = steady.with_columns(gpu_window_ns=pl.col("gpu_busy_ns") + pl.col("gpu_idle_ns")).sum()
    rows = []
    for part, whole in PARTS:
        total, of = int(sums[f"{part}_ns"].item()), int(sums[f"{whole}_ns"].item())
        rows.append({"part": part, "of": whole, "total_ns": total, "median_ns": float(steady[f"{part}_ns"].median()),
                     "share": total / of if of else 0.0})
    return pl.DataFrame(rows, schema=TOTALS_SCHEMA)


def _trace_limit(steady: pl.DataFrame) -> tuple[str | None, float | None]:
    """The steady units' limit (:data:`LIMIT_RULE` over their sums) and its share: of their wall for
    ``gpu``, else of their CPU span."""
    if steady.height == 0:
        return None, None
    sums = steady.sum()
    limit = sums.select(limit_expr()).item()
    part, whole = ("gpu_busy_ns", "wall_ns") if limit == "gpu" else (f"{limit}_ns", "cpu_span_ns")
    of = sums[whole].item()
    return limit, sums[part].item() / of if of else 0.0
