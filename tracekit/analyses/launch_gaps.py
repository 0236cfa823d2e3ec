"""Launch gaps: how long each launch call took, how long its work queued, where the GPU sat idle
and why, and whether each step is overhead-bound or compute-bound.

Contract: :func:`analyze` takes a :class:`~tracekit.trace.Trace` and its
:class:`~tracekit.analyses.attribution.Attribution` and returns a frozen :class:`LaunchGapsReport`.
Pure: no printing, no I/O. Times are Int64 ns. "Activity" below means a kernel, memcpy or memset
(GPU annotations and ``cuda_sync`` rows are not work).

Definitions (the renderer states them from :data:`THRESHOLDS`):

* **launch_dur_ns** — the launch call's duration (``cudaLaunchKernel``, ``cuLaunchKernelEx``,
  ``cudaMemsetAsync``, ``cudaGraphLaunch`` …). Every kernel of a CUDA-graph replay shares the one
  ``cudaGraphLaunch`` call, so its duration is counted once per replayed kernel.
* **queue_delay_ns** — GPU start minus the end of the launch call, floored at 0 (a kernel may start
  before its launch call returns). Null when the activity has no launch call in the trace. When the
  GPU clock is skewed against the CPU's (:mod:`tracekit.analyses.clock`, the report's ``clock``),
  the estimated offset is taken off GPU times first — here and in the gap causes below, which also
  compare a launch call's end with a GPU time — so the skew is never shown as queue delay.
* **GPU busy** — the length of the union of activity intervals (streams overlap; never a sum).
* **Step membership** — an activity belongs to the ``ProfilerStep#N`` whose CPU span contains its
  launch call (attribution's ``step``) — HTA's rule too, except that HTA also matches the GPU copies
  of ProfilerStep (see :mod:`tracekit.hta_oracle`, which aligns the two).
* **Per step** — GPU window, busy, idle, wall, CPU dispatch, verdict and the cold flag are the
  per-step summary of :mod:`tracekit.analyses.steps` (``per_step`` is that summary): idle is the gaps
  *between* the step's own work, HTA's per-iteration definition (``_get_idle_time_for_kernels``): on
  the H200 samples our per-step busy/idle equal HTA's to the ns; HTA also counts ``cuda_sync`` rows
  as busy, we do not.
* **Gaps** — per device, every hole between consecutive merged busy intervals over the whole trace.
  A gap's ``step`` is that of the activity that ends it (``next_*``); ``in_step_window`` says whether
  it lies inside that step's GPU window (those gaps make up ``gpu_idle_ns`` on a single stream).
  Cause, first rule that matches:

  1. ``sync`` — the GPU waited for the CPU (rule 3's test) while the CPU was blocked in a
     synchronisation: a host ``*Synchronize`` call (``cudaDeviceSynchronize``,
     ``cudaStreamSynchronize``, ``cudaEventSynchronize`` …) or a ``cuda_sync`` GPU row of the same
     device overlaps the gap. A sync overlapping a gap whose next kernel was already queued did not
     cause it (the gap falls through to rules 4–5);
  2. ``profiler_overhead`` — the GPU waited for the CPU while an ``overhead`` row ("Activity Buffer
     Request", CPU-side profiler work) overlaps the gap;
  3. ``cpu_bound`` — the GPU waited for the CPU: the next activity's launch call ended after
     ``gap start - 2 µs``. The 2 µs tolerance is the launch latency of an idle H200 (launch call end
     to kernel start: 1.6–2.1 µs p50–p90 on the sample traces), so a launch that returned just before
     the GPU drained still made it wait. HTA's ``host_wait`` uses launch *start* > previous end;
  4. ``back_to_back`` — shorter than 5 µs with the next activity already queued: the GPU front-end
     moving between kernels (HTA's ``kernel_wait`` threshold is 30 of the trace's units);
  5. ``other`` — anything else (e.g. a cross-stream event wait).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.analyses import attribution as attribution_mod
from tracekit.analyses import clock as clock_mod
from tracekit.analyses import intervals
from tracekit.analyses.steps import (COLD_STEP_FACTOR, COMPUTE_BOUND_MIN_BUSY_FRAC,
                                     OVERHEAD_BOUND_MIN_CPU_OVER_GPU, SYNC_CALL_SUFFIX, VERDICTS,
                                     verdict_expr)
from tracekit.trace import GPU_WORK_KINDS, Trace

CPU_BOUND_TOLERANCE_NS = 2_000
BACK_TO_BACK_MAX_NS = 5_000
PERCENTILES = (50, 90, 99)

CAUSES = ("sync", "profiler_overhead", "cpu_bound", "back_to_back", "other")
__all__ = ["CAUSES", "COLD_STEP_FACTOR", "COMPUTE_BOUND_MIN_BUSY_FRAC", "OVERHEAD_BOUND_MIN_CPU_OVER_GPU",
           "PER_STEP_SCHEMA", "SYNC_CALL_SUFFIX", "THRESHOLDS", "VERDICTS", "LaunchGapsReport", "analyze",
           "distributions", "percentiles", "verdict_expr"]

THRESHOLDS: dict[str, Any] = {
    "cpu_bound_tolerance_ns": CPU_BOUND_TOLERANCE_NS,
    "back_to_back_max_ns": BACK_TO_BACK_MAX_NS,
    "compute_bound_min_busy_frac": COMPUTE_BOUND_MIN_BUSY_FRAC,
    "overhead_bound_min_cpu_over_gpu": OVERHEAD_BOUND_MIN_CPU_OVER_GPU,
    "cold_step_factor": COLD_STEP_FACTOR,
    "queue_delay_rule": "GPU start - launch call end, floored at 0",
    "step_window_rule": "GPU window = first start to last end of the step's own activities (by launch "
                        "call); idle = window - union busy; wall = max(CPU ProfilerStep span, GPU window)",
    "cpu_dispatch_rule": "union of cpu_op and launch spans of the step's process within its CPU span, "
                         "minus *Synchronize calls",
    "verdict_rule": "no-gpu if the step launched nothing (not-analysed when the trace's device activity is of a "
                    "kind tracekit does not analyse); compute-bound if GPU busy >= CPU dispatch or "
                    "GPU busy >= 80% of wall; overhead-bound if CPU dispatch >= 2x GPU busy; else mixed; "
                    "then a step whose decomposition limit is data (the host mostly waits for its data loader) is "
                    "input-bound unless GPU busy >= 80% of wall, and an overhead-bound or mixed one whose limit "
                    "is op-free (Python, sleeps: no op) is host-bound, and a compute-bound one whose communication "
                    "kernels run with no compute beside them for >= 50% of its GPU busy time is communication-bound",
    "cold_rule": "first step wall > 2x median wall of the other steps; so is a new input shape's first step "
                 "against the other steps of that shape, and a step warming up a CUDA-graph tree",
    "steady_rule": "Not steady state (left out of diff medians): warm-up = the steps after a cold first step "
                   "still slower than 2x the median step; compiling = a torch.compile frame compilation "
                   "(recompiling: not the frame's first); graph record = a CUDA graph recorded; JIT warm-up = "
                   "a Triton kernel compiled on its first call; cut short = the last unit delimited by "
                   "iteration markers",
    "gap_cause_rule": "GPU waited for CPU = next launch call ended after gap start - 2 us; then first "
                      "match: sync (waited for CPU and a sync call/row overlaps); profiler_overhead "
                      "(waited for CPU and an overhead row overlaps); cpu_bound (waited for CPU); "
                      "back_to_back (gap < 5 us); else other",
}

PER_ACTIVITY_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "name": pl.String, "kind": pl.String, "kernel_class": pl.String,
    "launch_api": pl.String, "step": pl.Int64, "device": pl.Int64, "stream": pl.Int64,
    "ts": pl.Int64, "end": pl.Int64, "launch_ts": pl.Int64, "launch_end": pl.Int64,
    "launch_dur_ns": pl.Int64, "queue_delay_ns": pl.Int64,
}
_STAT_COLS = [f"{m}_{s}_ns" for m in ("launch_dur", "queue_delay")
              for s in (*(f"p{p}" for p in PERCENTILES), "max")]
DISTRIBUTIONS_SCHEMA: dict[str, pl.DataType] = {
    "group": pl.String, "key": pl.String, "count": pl.UInt32, **{c: pl.Int64 for c in _STAT_COLS},
}
GAPS_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
    "dur_ns": pl.Int64, "cause": pl.String, "next_kernel": pl.String, "next_launch_api": pl.String,
    "in_step_window": pl.Boolean,
}
PER_STEP_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "cpu_start_ns": pl.Int64, "cpu_span_ns": pl.Int64, "gpu_start_ns": pl.Int64,
    "gpu_window_ns": pl.Int64, "wall_ns": pl.Int64, "cpu_dispatch_ns": pl.Int64,
    "gpu_busy_ns": pl.Int64, "gpu_idle_ns": pl.Int64, "gpu_busy_frac": pl.Float64,
    "activity_count": pl.UInt32, "verdict": pl.String, "cold": pl.Boolean, "warmup": pl.Boolean,
    "compile": pl.Boolean, "recompile": pl.Boolean, "graph_record": pl.Boolean, "jit": pl.Boolean,
    "partial": pl.Boolean, "steady": pl.Boolean, "state": pl.String,
}
IDLE_BY_CAUSE_SCHEMA: dict[str, pl.DataType] = {"cause": pl.String, "gaps": pl.UInt32, "dur_ns": pl.Int64}
PER_DEVICE_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "busy_ns": pl.Int64,
    "idle_ns": pl.Int64, **{f"idle_{c}_ns": pl.Int64 for c in CAUSES},
}


@dataclass(frozen=True)
class LaunchGapsReport:
    """Launch and queue times, idle gaps with causes, per-step verdicts (see module docstring).

    ``per_activity``: one row per kernel/memcpy/memset, columns :data:`PER_ACTIVITY_SCHEMA`, sorted
    by ``ts`` then ``idx``.
    ``distributions``: :data:`DISTRIBUTIONS_SCHEMA`; ``group`` is ``"class"`` (key = kernel_class)
    or ``"launch_api"`` (key = API, ``"(none)"`` for unlinked activity); percentiles are nearest-rank
    over activities with a launch call (null when none); sorted by group, count desc, key.
    ``gaps``: :data:`GAPS_SCHEMA`, sorted by device, start_ns.
    ``per_step``: :data:`PER_STEP_SCHEMA`, one row per ProfilerStep, sorted by cpu_start_ns, step.
    ``per_device``: :data:`PER_DEVICE_SCHEMA`; the window is the device's first activity start to
    its last activity end; ``idle_<cause>_ns`` split ``idle_ns`` by gap cause.
    ``queue_delay_ns``: ``{"p50", "p90", "p99", "max"}`` over all linked activities (None if none).
    ``thresholds``: :data:`THRESHOLDS`.
    ``idle_by_cause``: :data:`IDLE_BY_CAUSE_SCHEMA`, the gaps summed by cause (see :func:`idle_by_cause`).
    ``clock``: the clock check (:func:`tracekit.analyses.clock.check`): ``skewed``, ``offset_ns``
    (taken off GPU times in ``queue_delay_ns`` and the gap causes when skewed) and its evidence.
    """

    per_activity: pl.DataFrame
    distributions: pl.DataFrame
    gaps: pl.DataFrame
    per_step: pl.DataFrame
    per_device: pl.DataFrame
    queue_delay_ns: dict[str, int | None]
    thresholds: dict[str, Any]
    idle_by_cause: pl.DataFrame
    clock: dict[str, Any] = field(default_factory=dict)


def analyze(trace: Trace, attributed: attribution_mod.Attribution, *,
            summary: pl.DataFrame) -> LaunchGapsReport:
    """Compute the launch-gap report of ``trace`` from its attribution; ``summary`` is the trace's
    per-step summary (:func:`tracekit.analyses.steps.summarize`, made by
    :mod:`tracekit.analyses.pipeline` before this analysis)."""
    clock = clock_mod.check(attributed.gpu)
    offset = clock["offset_ns"] or 0
    per_activity = _per_activity(attributed.gpu, offset)
    gaps = _gaps(trace, per_activity, offset)
    per_step = summary.select(list(PER_STEP_SCHEMA))
    return LaunchGapsReport(
        per_activity=per_activity,
        distributions=distributions(per_activity),
        gaps=gaps,
        per_step=per_step,
        per_device=_per_device(per_activity, gaps),
        queue_delay_ns=percentiles(per_activity["queue_delay_ns"]),
        thresholds=dict(THRESHOLDS),
        idle_by_cause=idle_by_cause(gaps),
        clock=clock,
    )


# -- per activity -------------------------------------------------------------------------------

def _per_activity(gpu: pl.DataFrame, offset: int = 0) -> pl.DataFrame:
    work = gpu.filter(pl.col("kind").is_in(GPU_WORK_KINDS))
    if work.height == 0:
        return pl.DataFrame(schema=PER_ACTIVITY_SCHEMA)
    return (
        work.with_columns(
            launch_dur_ns=pl.col("launch_end") - pl.col("launch_ts"),
            queue_delay_ns=pl.max_horizontal(pl.col("ts") - offset - pl.col("launch_end"), pl.lit(0)),
        )
        .with_columns(queue_delay_ns=pl.when(pl.col("launch_end").is_not_null())
                      .then(pl.col("queue_delay_ns")))
        .select(list(PER_ACTIVITY_SCHEMA))
        .cast(PER_ACTIVITY_SCHEMA)  # type: ignore[arg-type]
        .sort(["ts", "idx"])
    )


def _nearest_rank(values: pl.Series, pct: int) -> int:
    # Nearest-rank percentile: the smallest value with at least pct% of values at or below it.
    rank = max(1, -(-pct * len(values) // 100))
    return values[rank - 1]


def percentiles(series: pl.Series) -> dict[str, int | None]:
    values = series.drop_nulls().sort()
    n = values.len()
    out: dict[str, int | None] = {f"p{p}": (_nearest_rank(values, p) if n else None) for p in PERCENTILES}
    out["max"] = values[-1] if n else None
    return out


def _stat_exprs(column: str, metric: str) -> list[pl.Expr]:
    """Nearest-rank percentiles and max of ``column`` per group (null when it has no values)."""
    values = pl.col(column).drop_nulls().sort()
    n = pl.col(column).count()
    exprs = [values.get((((p * n + 99) // 100).clip(lower_bound=1) - 1).cast(pl.Int64), null_on_oob=True)
             .alias(f"{metric}_p{p}_ns") for p in PERCENTILES]
    exprs.append(pl.col(column).max().alias(f"{metric}_max_ns"))
    return exprs


def distributions(per_activity: pl.DataFrame) -> pl.DataFrame:
    parts = []
    for group, column in (("class", "kernel_class"), ("launch_api", "launch_api")):
        parts.append(
            per_activity.group_by(key=pl.col(column).fill_null("(none)"))
            .agg(pl.len().alias("count"), *_stat_exprs("launch_dur_ns", "launch_dur"),
                 *_stat_exprs("queue_delay_ns", "queue_delay"))
            .with_columns(group=pl.lit(group))
        )
    frame = pl.concat(parts, how="vertical_relaxed").select(list(DISTRIBUTIONS_SCHEMA)).cast(
        DISTRIBUTIONS_SCHEMA)  # type: ignore[arg-type]
    return frame.sort(["group", "count", "key"], descending=[False, True, False])


# -- gaps ---------------------------------------------------------------------------------------

def _blockers(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Merged sync intervals (``device`` -1 = every device) and merged profiler-overhead intervals."""
    gpu_sync = trace.gpu.filter(pl.col("kind") == "sync").select(
        pl.col("device").fill_null(-1), "ts", "end")
    host_sync = trace.launches.filter(pl.col("name").str.ends_with(SYNC_CALL_SUFFIX)).select(
        pl.lit(-1, pl.Int64).alias("device"), "ts", "end")
    sync = pl.concat([gpu_sync, host_sync], how="vertical_relaxed")
    overhead = trace.overhead.select("ts", "end")
    return sync, intervals.merge(overhead)


def _overlaps(gaps: pl.DataFrame, merged: pl.DataFrame) -> pl.Series:
    """For each gap, whether any of the disjoint sorted ``merged`` intervals overlaps it."""
    if gaps.height == 0:
        return pl.Series([], dtype=pl.Boolean)
    if merged.height == 0:
        return pl.Series([False] * gaps.height, dtype=pl.Boolean)
    # The last merged interval starting before the gap ends is the only candidate (disjoint, sorted).
    probe = gaps.select(pl.col("end_ns"), pl.col("start_ns")).with_row_index("_row")
    found = probe.sort("end_ns").join_asof(
        merged.select(pl.col("ts").alias("_bts"), pl.col("end").alias("_bend")).sort("_bts"),
        left_on="end_ns", right_on="_bts", strategy="backward", allow_exact_matches=False,
    ).sort("_row")
    return (found["_bend"].fill_null(-(2**62)) > found["start_ns"]).alias("overlap")


def _gaps(trace: Trace, per_activity: pl.DataFrame, offset: int = 0) -> pl.DataFrame:
    work = per_activity.filter(pl.col("device").is_not_null())
    if work.height == 0:
        return pl.DataFrame(schema=GAPS_SCHEMA)
    merged = intervals.merge(work.select("device", "ts", "end"), by=["device"])
    holes = (
        merged.with_columns(start_ns=pl.col("end").shift(1).over("device"))
        .filter(pl.col("start_ns").is_not_null())
        .select("device", "start_ns", end_ns=pl.col("ts"))
        .with_columns(dur_ns=pl.col("end_ns") - pl.col("start_ns"))
    )
    if holes.height == 0:
        return pl.DataFrame(schema=GAPS_SCHEMA)
    # The activity that ends a gap: the first (by idx) to start at the gap's end on that device.
    # per_activity is sorted by ts then idx, so a stable sort by device orders by device, ts, idx,
    # and the first of each (device, ts) is the row where either changes.
    first = (work.select("device", "ts", "step", "name", "launch_api", "launch_end")
             .sort("device", maintain_order=True)
             .filter(pl.col("device").ne_missing(pl.col("device").shift(1))
                     | pl.col("ts").ne_missing(pl.col("ts").shift(1)) | (pl.int_range(pl.len()) == 0))
             .select("device", pl.col("ts").alias("end_ns"), "step",
                     pl.col("name").alias("next_kernel"), pl.col("launch_api").alias("next_launch_api"),
                     pl.col("launch_end").alias("_next_launch_end")))
    # Holes come in (device, start_ns) order (merged intervals are disjoint and sorted).
    holes = holes.join(first, on=["device", "end_ns"], how="left", maintain_order="left")

    sync, overhead = _blockers(trace)
    sync_hit = pl.Series([False] * holes.height, dtype=pl.Boolean)
    for device in holes["device"].unique().sort().to_list():
        mask = (holes["device"] == device)
        device_sync = intervals.merge(sync.filter(pl.col("device").is_in([device, -1])))
        hit = _overlaps(holes.filter(mask), device_sync)
        positions = mask.arg_true()
        sync_hit = sync_hit.scatter(positions, hit)
    overhead_hit = _overlaps(holes, overhead)
    waited = (pl.col("_next_launch_end") + offset > pl.col("start_ns") - CPU_BOUND_TOLERANCE_NS).fill_null(False)
    holes = holes.with_columns(_sync=sync_hit, _overhead=overhead_hit).with_columns(
        cause=pl.when(waited & pl.col("_sync")).then(pl.lit("sync"))
        .when(waited & pl.col("_overhead")).then(pl.lit("profiler_overhead"))
        .when(waited).then(pl.lit("cpu_bound"))
        .when(pl.col("dur_ns") < BACK_TO_BACK_MAX_NS).then(pl.lit("back_to_back"))
        .otherwise(pl.lit("other"))
    )
    windows = _step_windows(per_activity)
    holes = holes.join(windows, on="step", how="left").with_columns(
        in_step_window=(pl.col("start_ns") >= pl.col("_wstart")) & (pl.col("end_ns") <= pl.col("_wend"))
    ).with_columns(pl.col("in_step_window").fill_null(False))
    return holes.select(list(GAPS_SCHEMA)).cast(GAPS_SCHEMA).sort(["device", "start_ns"])  # type: ignore[arg-type]


def idle_by_cause(gaps: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` summed by cause: one row per cause of :data:`CAUSES`, those without gaps as 0 (so
    every cause has a figure), sorted by ``dur_ns`` descending, then cause.

    Columns :data:`IDLE_BY_CAUSE_SCHEMA`: ``cause str, gaps u32`` (how many), ``dur_ns i64`` (their
    total length).
    """
    totals = gaps.group_by("cause").agg(gaps=pl.len(), dur_ns=pl.col("dur_ns").sum())
    return (pl.DataFrame({"cause": list(CAUSES)}, schema={"cause": pl.String})
            .join(totals, on="cause", how="left")
            .with_columns(pl.col("gaps").fill_null(0), pl.col("dur_ns").fill_null(0))
            .cast(IDLE_BY_CAUSE_SCHEMA)  # type: ignore[arg-type]
            .sort(["dur_ns", "cause"], descending=[True, False]))


def _step_windows(per_activity: pl.DataFrame) -> pl.DataFrame:
    return (per_activity.filter(pl.col("step").is_not_null())
            .group_by("step").agg(_wstart=pl.col("ts").min(), _wend=pl.col("end").max()))


# -- per device ---------------------------------------------------------------------------------

def _per_device(per_activity: pl.DataFrame, gaps: pl.DataFrame) -> pl.DataFrame:
    work = per_activity.filter(pl.col("device").is_not_null())
    if work.height == 0:
        return pl.DataFrame(schema=PER_DEVICE_SCHEMA)
    busy = intervals.union_ns(work.select("device", "ts", "end"), by=["device"])
    span = work.group_by("device").agg(start_ns=pl.col("ts").min(), end_ns=pl.col("end").max())
    by_cause = gaps.group_by("device").agg(
        **{f"idle_{c}_ns": pl.col("dur_ns").filter(pl.col("cause") == c).sum() for c in CAUSES})
    table = (span.join(busy, on="device").join(by_cause, on="device", how="left")
             .with_columns(idle_ns=pl.col("end_ns") - pl.col("start_ns") - pl.col("busy_ns"),
                           **{f"idle_{c}_ns": pl.col(f"idle_{c}_ns").fill_null(0) for c in CAUSES}))
    return table.select(list(PER_DEVICE_SCHEMA)).cast(PER_DEVICE_SCHEMA).sort("device")  # type: ignore[arg-type]
