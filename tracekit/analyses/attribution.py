"""Link every GPU activity to the launch call that issued it, and through it to the CPU op tree.

Contract: :func:`analyze` returns an :class:`Attribution` whose ``gpu`` frame has one row per kernel,
memcpy and memset of the trace (annotations and syncs excluded) with:

    (all columns of ``Trace.gpu``) +
    launch_idx u32?, launch_api str?, launch_ts i64?, launch_end i64?, launch_tid str?,
    link str? ("correlation" | "flow" | null when no launch was found),
    op_idx u32?, cpu_op str?, top_op str?, annotation str?, module str?,
    step i64? (the ProfilerStep#N whose span contains the launch call; null when the launch call is
               not in the trace — see :func:`orphans`),
    graph str?, graph_source str? (a CUDA-graph replay's graph, and where its op came from:
               :mod:`tracekit.analyses.graph_replays`),
    kernel_class str, library str, decoded str (JSON object), rule str,
    aux_before str? ("+"-joined non-kernel calls issued just before this launch in the same op:
                     cudaMemsetAsync, cudaMemcpyAsync, cudaOccupancy…; null when none),
    occupancy_query bool (an occupancy query preceded this launch in the same op)

Linking: equal ``correlation`` first (one launch may own many activities: ``cudaGraphLaunch``
replays a whole graph under one correlation; each replayed activity keeps the graph launch as its
launch, and gets the op, module and annotation that launched its node at capture where
:mod:`tracekit.analyses.graph_replays` can tell them — else those of the graph launch). Activities whose correlation matches no launch fall back to ``ac2g``
flows: the flow finish sits on the activity (same pid/tid/ts), its start on the launch call.

Orphans: an activity whose launch call is not in the trace (no launch with its correlation, no
flow) belongs to no step — never to the step its own timestamp falls in. Those are kernels launched
before profiling began (the profiler's first buffer holds their completion, not their launch: their
correlation ids are lower than every launch call's in the trace) or, rarely, whose launch record was
lost; :func:`orphans` counts them by that reason so the report can state them on their own.

``launches`` is the op tree's launch frame plus ``gpu_kinds`` (list of kinds it launched),
``aux_before`` and ``occupancy_query`` as above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import graph_replays, intervals, op_tree
from tracekit.analyses import steps as steps_analysis
from tracekit.classify import classify_frame
from tracekit.trace import GPU_WORK_KINDS, Trace

OCCUPANCY_PREFIX = "cudaOccupancy"
#: Host calls that may precede a kernel launch inside the same op without launching a kernel.
AUX_CALLS = ("cudaMemsetAsync", "cudaMemcpyAsync", "hipMemsetAsync", "hipMemcpyAsync")


@dataclass(frozen=True)
class Attribution:
    """GPU activity attributed to launches, ops, annotations and steps (see module docstring)."""

    tree: op_tree.OpTree
    gpu: pl.DataFrame
    launches: pl.DataFrame
    #: CUDA-graph replays and how their activities were attributed (:mod:`tracekit.analyses.graph_replays`).
    graphs: graph_replays.GraphReplays = field(default_factory=graph_replays.GraphReplays)


def analyze(trace: Trace, *, companion: graph_replays.Companion | None = None) -> Attribution:
    """Attribute every kernel/memcpy/memset of ``trace``; pure, no I/O. ``companion``
    (:func:`companion_of`) attributes CUDA-graph replays that the trace's own captures do not."""
    work = trace.gpu.filter(pl.col("kind").is_in(GPU_WORK_KINDS))
    tree = op_tree.build(trace, work["correlation"])
    launches = _annotate_launches(tree.launches, work)
    gpu = _link(trace, work, launches)
    gpu, graphs = graph_replays.attribute(trace, gpu, launches, companion)
    gpu = _assign_steps(gpu, trace.steps)
    gpu = classify_frame(gpu, vendor=trace.meta.vendor)
    return Attribution(tree=tree, gpu=_by_ts_idx(gpu), launches=launches, graphs=graphs)


def companion_of(trace: Trace, path: str) -> graph_replays.Companion:
    """A companion trace (``--graph-companion``) as graph attribution reads it: its captures and its
    launched activities with their ops (``path``: how the report names it)."""
    work = trace.gpu.filter(pl.col("kind").is_in(GPU_WORK_KINDS))
    tree = op_tree.build(trace, work["correlation"])
    launches = _annotate_launches(tree.launches, work)
    return graph_replays.companion(path, trace, launches, _link(trace, work, launches), tree.ops)


def _by_ts_idx(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` sorted by (ts, idx); checked first, as it often is already (a sort moves every column)."""
    in_order = frame.select((pl.col("ts").diff() > 0) | ((pl.col("ts").diff() == 0)
                                                         & (pl.col("idx").cast(pl.Int64).diff() > 0))).to_series()
    # The first row has no diff; a null anywhere else sorts (nulls go first).
    return frame if in_order.slice(1).fill_null(False).all() else frame.sort(["ts", "idx"])


def _link(trace: Trace, work: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    launch_cols = launches.select(
        pl.col("idx").alias("launch_idx"), pl.col("name").alias("launch_api"),
        pl.col("ts").alias("launch_ts"), pl.col("end").alias("launch_end"),
        pl.col("tid").alias("launch_tid"), pl.col("pid").alias("launch_pid"), "correlation",
        "op_idx", "cpu_op", "top_op", "annotation", "module", "aux_before", "occupancy_query",
    )
    # Correlation ids are unique per launch; keep the first if a broken trace repeats one.
    by_corr = launch_cols.filter(pl.col("correlation").is_not_null())
    first = by_corr["correlation"].is_first_distinct()
    if not first.all():
        by_corr = by_corr.filter(first)
    linked = work.join(by_corr, on="correlation", how="left", maintain_order="left").with_columns(
        link=pl.when(pl.col("launch_idx").is_not_null()).then(pl.lit("correlation")))
    missing = linked.filter(pl.col("launch_idx").is_null())
    if missing.height and trace.flows.height:
        linked = _link_by_flows(linked, trace.flows, launch_cols)
    return linked.drop("launch_pid")


def _link_by_flows(linked: pl.DataFrame, flows: pl.DataFrame, launch_cols: pl.DataFrame) -> pl.DataFrame:
    """Fallback for activities whose correlation matched nothing: follow ac2g flows."""
    ac2g = flows.filter(pl.col("cat") == "ac2g")
    finish = ac2g.filter(pl.col("ph") == "f").select("id", "pid", "tid", "ts")
    start = ac2g.filter(pl.col("ph") == "s").select(
        "id", pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
        pl.col("ts").alias("launch_ts"))
    ends = finish.join(start, on="id", how="inner").unique(subset=["pid", "tid", "ts"], keep="first")
    targets = ends.join(launch_cols.drop("correlation"), on=["launch_pid", "launch_tid", "launch_ts"],
                        how="inner").unique(subset=["pid", "tid", "ts"], keep="first")
    cols = [c for c in targets.columns if c not in ("id", "pid", "tid", "ts")]
    missing = linked.filter(pl.col("launch_idx").is_null()).drop(cols + ["link"])
    found = missing.join(targets.drop("id"), on=["pid", "tid", "ts"], how="left", maintain_order="left")
    found = found.with_columns(
        link=pl.when(pl.col("launch_idx").is_not_null()).then(pl.lit("flow")))
    return pl.concat([linked.filter(pl.col("launch_idx").is_not_null()),
                      found.select(linked.columns)], how="vertical_relaxed")


def _assign_steps(gpu: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The step of an activity is the ProfilerStep span containing its launch call (null without one)."""
    return steps_analysis.tag_steps(gpu, steps, "launch_ts")


#: Why an activity has no launch call in the trace (the ``reason`` of :func:`orphans`).
ORPHAN_REASONS = {
    "before_trace": "launched before the trace began",
    "launch_missing": "launch call missing from the trace",
}
ORPHANS_SCHEMA: dict[str, pl.DataType] = {
    "reason": pl.String, "kind": pl.String, "count": pl.UInt32, "dur_ns": pl.Int64, "busy_ns": pl.Int64,
    "first_ns": pl.Int64, "last_end_ns": pl.Int64,
}


def orphans(gpu: pl.DataFrame, launches: pl.DataFrame) -> pl.DataFrame:
    """GPU work without a launch call in the trace, by reason and kind (:data:`ORPHANS_SCHEMA`).

    ``gpu`` is :class:`Attribution`'s frame, ``launches`` its launch frame. ``reason`` is
    ``before_trace`` when the activity's correlation id is lower than that of every launch call of
    the trace (CUPTI numbers launches in order, so it was issued before the first recorded one), or
    when it has no correlation id or the trace records no launch call at all; else
    ``launch_missing``. ``dur_ns`` sums durations, ``busy_ns`` is the union of their intervals,
    ``first_ns``/``last_end_ns`` the first start and last end. Sorted by reason, then kind.
    """
    lost = gpu.filter(pl.col("launch_idx").is_null())
    if lost.height == 0:
        return pl.DataFrame(schema=ORPHANS_SCHEMA)
    lowest = launches["correlation"].drop_nulls().min() if launches.height else None
    before = (pl.lit(True) if lowest is None
              else pl.col("correlation").is_null() | (pl.col("correlation") < lowest))
    lost = lost.with_columns(reason=pl.when(before).then(pl.lit("before_trace"))
                             .otherwise(pl.lit("launch_missing")))
    busy = intervals.union_ns(lost.select("reason", "kind", "ts", "end"), by=["reason", "kind"])
    return (lost.group_by("reason", "kind")
            .agg(count=pl.len(), dur_ns=pl.col("dur").sum(), first_ns=pl.col("ts").min(),
                 last_end_ns=pl.col("end").max())
            .join(busy, on=["reason", "kind"], how="left")
            .select(list(ORPHANS_SCHEMA)).cast(ORPHANS_SCHEMA)  # type: ignore[arg-type]
            .sort(["reason", "kind"]))


def _annotate_launches(launches: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Per launch: what it launched, and which aux calls preceded it within the same op."""
    launches = _by_ts_idx(_with_gpu_kinds(launches, work))
    # Per thread, launches in time order form scopes: runs of consecutive launches under the same op.
    # Within a scope, a kernel launch owns the aux calls issued since the previous kernel launch.
    # The threads are taken one after another by a stable sort on an integer code of (pid, tid); the
    # scope and owner numbers are computed in that order and put back in the launches' own order.
    is_kernel = pl.col("gpu_kinds").list.contains("kernel").fill_null(False)
    keys = launches.select(
        _kernel=is_kernel, _op=pl.col("op_idx"),
        _thread=pl.struct(pl.col("pid").cast(pl.Categorical).to_physical(),
                          pl.col("tid").cast(pl.Categorical).to_physical()).rank("dense"),
        _row=pl.int_range(pl.len(), dtype=pl.UInt32),
    )
    ordered = keys.sort("_thread", maintain_order=True, nulls_last=False).select(
        "_row",
        _scope=(pl.col("_thread").ne_missing(pl.col("_thread").shift(1))
                | pl.col("_op").ne_missing(pl.col("_op").shift(1))).cum_sum(),
        # Kernel launches before this row: equal for a kernel launch and the aux calls it owns.
        _owner=pl.col("_kernel").cast(pl.UInt32).cum_sum() - pl.col("_kernel").cast(pl.UInt32),
    )
    back = pl.int_range(launches.height, dtype=pl.UInt32, eager=True)
    back = back.scatter(ordered["_row"], back)  # launch row -> its position in ``ordered``
    launches = launches.with_columns(
        _kernel=keys["_kernel"], _scope=ordered["_scope"].gather(back), _owner=ordered["_owner"].gather(back))
    names = launches["name"].unique()
    aux_names = names.filter(names.str.starts_with(OCCUPANCY_PREFIX) | names.is_in(pl.Series(AUX_CALLS).implode()))
    pending = (
        launches.filter(~pl.col("_kernel") & pl.col("name").is_in(aux_names.to_list()))
        .group_by("_scope", "_owner")
        .agg(_aux=pl.col("name").str.join("+"),
             _occupancy=pl.col("name").str.starts_with(OCCUPANCY_PREFIX).any())
    )
    return (
        launches.join(pending, on=["_scope", "_owner"], how="left", maintain_order="left")
        .with_columns(
            aux_before=pl.when(pl.col("_kernel")).then(pl.col("_aux")).cast(pl.String),
            occupancy_query=(pl.col("_kernel") & pl.col("_occupancy").fill_null(False)).cast(pl.Boolean),
        )
        .drop("_kernel", "_scope", "_owner", "_aux", "_occupancy")
    )


def _with_gpu_kinds(launches: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """``launches`` plus ``gpu_kinds``: the sorted distinct kinds of the work under its correlation
    (null when there is none).

    Each kind is a bit, set where the launch's correlation is among that kind's; each distinct set
    of bits is spelled as a list once (a list per correlation group costs ~10x more).
    """
    kinds = work["kind"].drop_nulls().unique().sort().to_list()
    if not kinds:
        return launches.with_columns(gpu_kinds=pl.lit(None, pl.List(pl.String)))
    bits = pl.sum_horizontal(
        [pl.col("correlation").is_in(work.filter(pl.col("kind") == kind)["correlation"].drop_nulls().unique()
                                     .implode()).fill_null(False).cast(pl.Int64) * (1 << i)
         for i, kind in enumerate(kinds)])
    launches = launches.with_columns(_bits=bits)
    masks = launches["_bits"].unique()
    spelled = pl.DataFrame({"_bits": masks.filter(masks != 0)}).with_columns(
        gpu_kinds=pl.concat_list([pl.when((pl.col("_bits") & (1 << i)) != 0).then(pl.lit(kind))
                                  for i, kind in enumerate(kinds)]).list.drop_nulls())
    return launches.join(spelled, on="_bits", how="left", maintain_order="left").drop("_bits")
