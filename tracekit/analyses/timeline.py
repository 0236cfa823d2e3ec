"""The step timeline as data: what each unit's picture shows, gathered from the other analyses.

Contract: :func:`analyze` takes a trace's :class:`~tracekit.analyses.pipeline.Analyses` and returns
:class:`Timelines`, one :class:`StepTimeline` per unit (ProfilerStep, or unit of a trace without
steps) in the order of the per-step summary. It computes nothing the other analyses know: nesting
depth is the op tree's (:mod:`tracekit.analyses.op_tree`), kernel classes and launch links are the
attribution's, idle gaps and their causes are :mod:`tracekit.analyses.launch_gaps`', round trips
:mod:`tracekit.analyses.round_trips`' and compile spans :mod:`tracekit.analyses.compilations`'.
Vectorised over all units at once, so it stays cheap on a trace of millions of events.

Per unit:

* **window** ``start_ns``–``end_ns``: the unit's CPU span ∪ the GPU window of the work it launched;
* ``cpu`` — ops and launch calls that start in the unit's CPU span, any thread (op tree rows):
  ``lane str`` (``cpu:<tid>``), ``depth u16`` (nesting depth, 0 = the outermost mark drawn on that
  lane in this unit), ``name str``, ``ts i64``, ``end i64``, ``kind str`` (``op`` | ``launch``),
  ``correlation i64?`` (launch calls only), ``idx u32`` (the event's trace idx), ``fold_depth u16?``
  (the mark's row when the lane is folded to its launching depth, null when folding hides it:
  :func:`_fold_depths`);
* ``gpu`` — the kernels, memcpys and memsets the unit launched (attribution's ``step``):
  ``lane str`` (``gpu:<device>:<stream>``), ``name``, ``short`` (the shortened kernel name),
  ``klass`` (kernel class), ``library``, ``kind``, ``ts``, ``end``, ``correlation``, ``id u32`` (the
  trace idx: what ``links`` and ``round_trips`` point at);
* ``gaps`` — the device's idle gaps ended by the unit's work, clipped to the window: ``ts``, ``end``,
  ``cause`` (:data:`tracekit.analyses.launch_gaps.CAUSES`), ``device i64``;
* ``links`` — one per launch call drawn whose work is drawn, to its first activity:
  ``correlation``, ``launch_ts``, ``launch_lane``, ``launch_depth u16``, ``kernel_id u32``;
* ``round_trips`` — tensors written by one kernel and read back by another of the unit:
  ``producer_id u32``, ``consumer_id u32``, ``bytes i64``, ``label str`` (``"[8192, 3072] bf16"``);
* ``host`` — the unit's host state over its CPU span (:func:`tracekit.analyses.decomposition.state_spans`):
  ``ts``, ``end``, ``state`` (``op_free``: the whole span; ``dispatch`` | ``data`` | ``blocked``: the
  union of the states up to it in the decomposition's priority), in that drawing order: painted over
  one another they show each instant's state;
* ``compile_spans`` — compile work that started in the unit: ``ts``, ``end``, ``kind`` (``compile``,
  ``recompile``, ``autotune``, ``graph_record``, ``runtime``), ``label`` (span name and compile id);
* ``busy`` — how busy each GPU device was over the window, in :data:`BUSY_BINS` equal bins of it:
  ``device i64``, ``ts``, ``end`` (the bin), ``busy_ns i64`` (the length of the union of the
  device's GPU work of the unit inside the bin; bins with none are not rows). Computed from every
  activity the unit launched, not only the drawn ones, so on a device that is the only one the
  unit used, the bins' ``busy_ns`` add up to the per-step summary's ``gpu_busy_ns``;
* ``merged`` — the CPU and GPU marks the caps left out, as runs: per lane (and nesting depth), marks
  less than 1/:data:`MERGE_PIECES` of the window apart form one run, so a capped unit still shows
  where work ran: ``group str`` (``cpu`` | ``gpu``), ``lane``, ``depth u16``, ``ts``, ``end``,
  ``count u32`` (marks in the run), ``busy_ns i64`` (their summed durations);
* ``left_out`` — marks not kept because of the caps, by kind (``op``, ``launch``, ``kernel``,
  ``memcpy``, ``memset``, ``gap``, ``link``, ``round_trip``, ``compile``, ``merged_run``); ``{}`` when
  none.

Caps (:data:`CAPS`): a unit keeps its longest marks (ties: the earliest) up to the cap of its kind, so
an op's ancestors are kept before it; a launch call ranks with the op that made it (it is kept with
that op, before shorter ops), round trips rank by bytes. The default unit gets the full caps; the others share
:data:`TOTAL_MARKS` so that all units of a long trace stay a bounded picture. A link or a round
trip is kept only when both its ends are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from tracekit.analyses import decomposition, intervals, steps as steps_analysis
from tracekit.trace import empty_frame as _empty

if TYPE_CHECKING:
    from tracekit.analyses.pipeline import Analyses

#: Marks kept per unit at most, by group (the default unit's budget).
CAPS: dict[str, int] = {"cpu": 4000, "gpu": 4000, "gaps": 2000, "round_trips": 500, "compile": 200,
                        "merged": 2000, "host": 3000}
#: Left-out marks closer than this fraction of the window merge into one run (1 px of a 1,200 px
#: drawing); a unit whose runs are capped lower merges at a quarter of its cap, so that its runs still
#: cover where work ran.
MERGE_PIECES = 1200
#: The marks kept over all units but the default one: each gets an equal share per group (CPU, GPU,
#: gaps, round trips; links follow the GPU marks), at least :data:`MIN_MARKS_PER_UNIT`, so that every
#: unit of a 1 GB trace stays drawable in one page (``bench/timelines.py``: 100 MB of train_eager
#: steps, 30 units at the default unit's caps each, made a 64 MB page).
TOTAL_MARKS = 30_000
#: Bins of a unit's window in its GPU utilisation strip: about one per 2 px of a 1,200 px drawing,
#: so a 1,000-kernel step whose GPU is busy 12 % of the time reads as 12 %, not as a solid bar.
BUSY_BINS = 600
#: Levels of nested user annotations a folded CPU lane shows (a deeper annotation is hidden until
#: the lane is unfolded), so a folded lane has at most 3 + 3 rows: the outermost mark, the
#: annotations, the GPU-launching top ops and the launch calls.
FOLD_ANNOTATIONS = 3
MIN_MARKS_PER_UNIT = 25

CPU_SCHEMA: dict[str, pl.DataType] = {
    "lane": pl.String, "depth": pl.UInt16, "name": pl.String, "ts": pl.Int64, "end": pl.Int64,
    "kind": pl.String, "correlation": pl.Int64, "idx": pl.UInt32, "fold_depth": pl.UInt16,
}
GPU_SCHEMA: dict[str, pl.DataType] = {
    "lane": pl.String, "name": pl.String, "short": pl.String, "klass": pl.String, "library": pl.String,
    "kind": pl.String, "ts": pl.Int64, "end": pl.Int64, "correlation": pl.Int64, "id": pl.UInt32,
}
GAPS_SCHEMA: dict[str, pl.DataType] = {"ts": pl.Int64, "end": pl.Int64, "cause": pl.String, "device": pl.Int64}
LINKS_SCHEMA: dict[str, pl.DataType] = {
    "correlation": pl.Int64, "launch_ts": pl.Int64, "launch_lane": pl.String, "launch_depth": pl.UInt16,
    "kernel_id": pl.UInt32,
}
ROUND_TRIPS_SCHEMA: dict[str, pl.DataType] = {
    "producer_id": pl.UInt32, "consumer_id": pl.UInt32, "bytes": pl.Int64, "label": pl.String,
}
COMPILE_SCHEMA: dict[str, pl.DataType] = {"ts": pl.Int64, "end": pl.Int64, "kind": pl.String, "label": pl.String}
HOST_SCHEMA: dict[str, pl.DataType] = {"ts": pl.Int64, "end": pl.Int64, "state": pl.String}
BUSY_SCHEMA: dict[str, pl.DataType] = {"device": pl.Int64, "ts": pl.Int64, "end": pl.Int64, "busy_ns": pl.Int64}
#: The state a ``host`` row of each decomposition layer shows.
HOST_LAYERS = {1: "blocked", 2: "data", 3: "dispatch", 4: "op_free"}
MERGED_SCHEMA: dict[str, pl.DataType] = {
    "group": pl.String, "lane": pl.String, "depth": pl.UInt16, "ts": pl.Int64, "end": pl.Int64,
    "count": pl.UInt32, "busy_ns": pl.Int64,
}


@dataclass(frozen=True, repr=False)
class StepTimeline:
    """One unit's timeline (module docstring). Times are Int64 ns on the trace's clock; the frames'
    columns are the module docstring's (``cpu``, ``gpu``, ``gaps``, ``links``, ``round_trips``,
    ``compile_spans``, ``host``, ``merged``). ``tracekit.render.timeline.draw(step)`` draws it as SVG."""

    number: int
    name: str
    start_ns: int
    end_ns: int
    cpu: pl.DataFrame = field(default_factory=lambda: _empty(CPU_SCHEMA))
    gpu: pl.DataFrame = field(default_factory=lambda: _empty(GPU_SCHEMA))
    gaps: pl.DataFrame = field(default_factory=lambda: _empty(GAPS_SCHEMA))
    links: pl.DataFrame = field(default_factory=lambda: _empty(LINKS_SCHEMA))
    round_trips: pl.DataFrame = field(default_factory=lambda: _empty(ROUND_TRIPS_SCHEMA))
    compile_spans: pl.DataFrame = field(default_factory=lambda: _empty(COMPILE_SCHEMA))
    host: pl.DataFrame = field(default_factory=lambda: _empty(HOST_SCHEMA))
    busy: pl.DataFrame = field(default_factory=lambda: _empty(BUSY_SCHEMA))
    merged: pl.DataFrame = field(default_factory=lambda: _empty(MERGED_SCHEMA))
    left_out: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line, what the drawing's title says (the frames are the attributes)."""
        left = sum(self.left_out.values())
        return (f"<StepTimeline {self.name}: window {(self.end_ns - self.start_ns) / 1e6:.3f} ms, "
                f"{self.cpu.height:,} CPU marks, {self.gpu.height:,} GPU activities, {self.gaps.height:,} idle gaps"
                + (f", {left:,} marks left out" if left else "") + ">")


@dataclass(frozen=True, repr=False)
class Timelines:
    """Every unit's timeline and the one shown first; a sequence of :class:`StepTimeline` in unit
    order (``for step in timelines``, ``len(timelines)``, ``timelines[0]``; :meth:`step` finds one
    by its unit number)."""

    steps: tuple[StepTimeline, ...] = ()
    #: The unit shown first: the report's selected step, else the one its path table shows.
    default_step: int | None = None

    def step(self, number: int) -> StepTimeline | None:
        """The timeline of unit ``number`` (None if the trace has no such unit)."""
        return next((s for s in self.steps if s.number == number), None)

    def __iter__(self) -> Iterator[StepTimeline]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, index: int) -> StepTimeline:
        """The timeline at position ``index`` in unit order (by unit number: :meth:`step`)."""
        return self.steps[index]

    def __repr__(self) -> str:
        numbers = [s.number for s in self.steps]
        shown = ", ".join(map(str, numbers[:8])) + (", …" if len(numbers) > 8 else "")
        return f"<Timelines: {len(numbers)} step{'s' if len(numbers) != 1 else ''} ({shown}), shown first {self.default_step}>"


def analyze(whole: Analyses, *, default_step: int | None = None) -> Timelines:
    """Every unit's :class:`StepTimeline` of a trace from its analyses ``whole``
    (:func:`tracekit.analyses.pipeline.run`); ``default_step`` is the unit shown first (None: the last)."""
    summary = whole.steps
    if summary.height == 0:
        return Timelines()
    numbers = summary["step"].to_list()
    if default_step not in numbers:
        default_step = numbers[-1]
    windows = summary.select(
        "step", "name",
        start=pl.min_horizontal("cpu_start_ns", pl.col("gpu_start_ns").fill_null(pl.col("cpu_start_ns"))),
        end=pl.max_horizontal(pl.col("cpu_start_ns") + pl.col("cpu_span_ns"),
                              pl.col("gpu_start_ns").fill_null(pl.col("cpu_start_ns")) + pl.col("gpu_window_ns")),
    )
    share = max(MIN_MARKS_PER_UNIT, TOTAL_MARKS // (4 * max(1, len(numbers) - 1)))
    # Runs are cheap and keep a capped unit honest: they get four shares.
    shares = {k: 4 * share if k == "merged" else share for k in CAPS}
    caps = pl.DataFrame({"step": numbers}, schema={"step": pl.Int64}).with_columns(
        **{f"cap_{k}": pl.when(pl.col("step") == default_step).then(v).otherwise(min(v, shares[k])).cast(pl.Int64)
           for k, v in CAPS.items()})

    cpu, cpu_out, cpu_left = _capped(_relative_depth(_cpu(whole)), caps, "cpu", "dur")
    cpu = _fold_depths(_cpu_lanes(cpu).with_columns(pl.col("name").fill_null("")))
    gpu_all = _gpu(whole)
    gpu, gpu_out, gpu_left = _capped(gpu_all, caps, "gpu", "dur")
    gaps, gaps_out, _ = _capped(_gaps(whole, windows), caps, "gaps", "dur", kind="gap")
    links, links_out = _links(gpu_all, gpu, cpu)
    trips, trips_out = _round_trips(whole, gpu, caps)
    spans, spans_out, _ = _capped(_compile_spans(whole), caps, "compile", "dur", kind="compile")
    merged, merged_out, _ = _capped(_merged(cpu_left, gpu_left, windows, caps), caps, "merged", "dur",
                                    kind="merged_run")
    host, host_out, _ = _capped(_host(whole), caps, "host", "dur", kind="host_state")
    gpu = _short_names(gpu)
    busy = _busy(gpu_all, windows)

    parts = {
        "cpu": _by_step(cpu, CPU_SCHEMA), "gpu": _by_step(gpu, GPU_SCHEMA), "gaps": _by_step(gaps, GAPS_SCHEMA),
        "links": _by_step(links, LINKS_SCHEMA), "round_trips": _by_step(trips, ROUND_TRIPS_SCHEMA),
        "compile_spans": _by_step(spans, COMPILE_SCHEMA), "merged": _by_step(merged, MERGED_SCHEMA),
        "busy": _by_step(busy, BUSY_SCHEMA),
        "host": _by_step(host.sort("step", "layer", "ts", descending=[False, True, False]), HOST_SCHEMA),
    }
    left_out: dict[int, dict[str, int]] = {}
    for frame in (cpu_out, gpu_out, gaps_out, links_out, trips_out, spans_out, merged_out, host_out):
        for step, kind, n in frame.iter_rows():
            left_out.setdefault(step, {})[kind] = n
    steps = []
    for number, name, start, end in windows.iter_rows():
        got = {key: frames.get(number) for key, frames in parts.items()}
        steps.append(StepTimeline(
            number=number, name=name, start_ns=start, end_ns=end,
            **{key: frame for key, frame in got.items() if frame is not None},
            left_out=dict(sorted(left_out.get(number, {}).items()))))
    return Timelines(steps=tuple(steps), default_step=default_step)


# ---- the marks of every unit, with ``step`` and a ``dur`` to rank them by -------------------------

def _cpu(whole: Analyses) -> pl.DataFrame:
    """Ops and launch calls; ``dur`` ranks them for the cap: an op's own duration, a launch call's
    that of the op that made it (so a launch is kept with its op, before shorter ops)."""
    tree = whole.attribution.tree
    # What a folded lane keeps (:func:`_fold_depths`): user annotations that launch GPU work, and
    # the top ops (cpu_ops under no other cpu_op: the call in the user's code) that do.
    parents = tree.ops.select(parent_idx="idx", _parent_cpu_op="direct_cpu_op_idx")
    role = (pl.when(pl.col("launches_gpu") & (pl.col("cat") == "user_annotation")).then(pl.lit("annotation"))
            .when(pl.col("launches_gpu") & (pl.col("cat") == "cpu_op") & pl.col("_parent_cpu_op").is_null())
            .then(pl.lit("top_op")))
    ops = tree.ops.join(parents, on="parent_idx", how="left", maintain_order="left").select(
        "tid", "depth", "name", "ts", "end", kind=pl.lit("op"), correlation=pl.lit(None, pl.Int64), idx="idx",
        dur=pl.col("end") - pl.col("ts"), role=role)
    op_dur = ops.select(op_idx="idx", op_dur="dur")
    launches = tree.launches.select(
        "tid", "depth", "name", "ts", "end", kind=pl.lit("launch"), correlation="correlation", idx="idx",
        op_idx="op_idx", role=pl.lit("launch")).join(op_dur, on="op_idx", how="left", maintain_order="left").select(
        pl.exclude("op_idx", "op_dur"), dur=pl.col("op_dur").fill_null(pl.col("end") - pl.col("ts")))
    marks = pl.concat([ops, launches], how="diagonal_relaxed")
    marks = steps_analysis.tag_steps(marks, whole.trace.steps).filter(pl.col("step").is_not_null())
    # ``lane`` is the bare thread id here; :func:`_cpu_lanes` names the lanes of the few marks kept.
    return marks.select(
        "step", lane="tid", depth=pl.col("depth").cast(pl.Int64), name="name", ts="ts", end="end", kind="kind",
        correlation="correlation", idx="idx", dur="dur", role="role")


def _cpu_lanes(frame: pl.DataFrame, where: pl.Expr | bool = True) -> pl.DataFrame:
    """``lane`` from a thread id to its lane name (``cpu:<tid>``) where ``where`` holds."""
    named = pl.lit("cpu:") + pl.col("lane").fill_null("?")
    return frame.with_columns(lane=pl.when(where).then(named).otherwise(pl.col("lane")))


def _gpu(whole: Analyses) -> pl.DataFrame:
    gpu = whole.attribution.gpu.filter(pl.col("step").is_not_null())
    return gpu.select(
        "step", lane=pl.format("gpu:{}:{}", pl.col("device").fill_null(0), pl.col("stream").fill_null(0)),
        name=pl.col("name").fill_null(""), decoded="decoded", klass="kernel_class", library="library",
        kind="kind", ts="ts", end="end", correlation="correlation", id="idx", dur="dur",
        launch_idx="launch_idx", launch_ts="launch_ts", launch_tid="launch_tid")


def _gaps(whole: Analyses, windows: pl.DataFrame) -> pl.DataFrame:
    gaps = whole.launch_gaps.gaps.filter(pl.col("step").is_not_null()).join(
        windows.select("step", "start", "end"), on="step", how="inner", maintain_order="left")
    return gaps.select(
        "step", ts=pl.max_horizontal("start_ns", "start"), end=pl.min_horizontal("end_ns", "end"),
        cause="cause", device="device").filter(pl.col("end") > pl.col("ts")).with_columns(
        dur=pl.col("end") - pl.col("ts"))


def _host(whole: Analyses) -> pl.DataFrame:
    """The host-state layers of every unit (rows painted in layer order 3, 2, 1)."""
    spans = decomposition.state_spans(whole.trace, whole.attribution.gpu, whole.steps)
    # A layer-k row equal to a row of layer k-1 holds no instant of state k: drawn, it would only be
    # hidden under that row, and name a state the host was not in.
    below = spans.select("step", "ts", "end", layer=(pl.col("layer") + 1).cast(pl.Int8))
    spans = spans.join(below, on=["step", "ts", "end", "layer"], how="anti", maintain_order="left")
    # The unit's whole CPU span under them: op-free wherever no state above holds.
    span = whole.steps.select("step", ts="cpu_start_ns", end=pl.col("cpu_start_ns") + pl.col("cpu_span_ns"),
                              layer=pl.lit(4, pl.Int8))
    return pl.concat([spans, span.cast(spans.schema)]).select(  # type: ignore[arg-type]
        "step", "ts", "end", "layer", state=pl.col("layer").replace_strict(HOST_LAYERS, return_dtype=pl.String),
        dur=pl.col("end") - pl.col("ts"))


def _compile_spans(whole: Analyses) -> pl.DataFrame:
    compiled = whole.compilation
    work = compiled.work.filter(pl.col("step").is_not_null())
    recompiles = compiled.compilations.filter(pl.col("trigger") != "first")["compile_id"].drop_nulls()
    kind = pl.when((pl.col("kind") == "compile") & pl.col("compile_id").is_in(recompiles.to_list())).then(
        pl.lit("recompile")).otherwise(pl.col("kind"))
    label = pl.when(pl.col("compile_id").is_not_null()).then(
        pl.format("{} [{}]", pl.col("name"), pl.col("compile_id"))).otherwise(pl.col("name"))
    return work.select("step", "ts", "end", kind=kind, label=label.fill_null(""), dur=pl.col("end") - pl.col("ts"))


# ---- caps ------------------------------------------------------------------------------------------

_LEFT_OUT_SCHEMA = {"step": pl.Int64, "kind": pl.String, "count": pl.Int64}


def _capped(marks: pl.DataFrame, caps: pl.DataFrame, group: str, by: str, *,
             kind: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``(kept, left out counted by step and kind, the marks left out)``: per step the ``cap_<group>``
    marks with the largest ``by`` (ties: earliest, then trace order), in time order."""
    cap = f"cap_{group}"
    marks = marks.join(caps.select("step", cap), on="step", how="left", maintain_order="left")
    # The cap-th largest ``by`` of each step: the marks below it are left out without being sorted
    # (most of a big trace's marks).
    floor = marks.group_by("step").agg(_floor=pl.col(by).top_k(pl.col(cap).first()).min())
    marks = marks.join(floor, on="step", how="left", maintain_order="left")
    candidate = (pl.col(by) >= pl.col("_floor")).fill_null(True)
    ranked = marks.filter(candidate).sort(["step", by, "ts"], descending=[False, True, False], maintain_order=True)
    ranked = ranked.with_columns(_rank=pl.int_range(pl.len()).over("step"))
    keep = pl.col("_rank") < pl.col(cap)
    helpers = ["_rank", "_floor", cap]
    left = pl.concat([ranked.filter(~keep).drop(helpers), marks.filter(~candidate).drop("_floor", cap)])
    kind_col = pl.lit(kind) if kind else pl.col("kind")
    out = (left.group_by("step", kind_col.alias("kind")).agg(count=pl.len().cast(pl.Int64))
           .select(list(_LEFT_OUT_SCHEMA)).cast(_LEFT_OUT_SCHEMA))  # type: ignore[arg-type]
    kept = ranked.filter(keep).drop(helpers).sort(["step", "ts", by], descending=[False, False, True],
                                                  maintain_order=True)
    return kept, out, left


def _links(gpu_all: pl.DataFrame, gpu: pl.DataFrame, cpu: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One link per launch call with work in the unit, to its first drawn activity (a graph launch
    replays many), kept when the launch call is drawn too; the others are left out."""
    launched = gpu_all.filter(pl.col("launch_idx").is_not_null()).group_by("step").agg(
        count=pl.col("launch_idx").n_unique().cast(pl.Int64))
    firsts = (gpu.filter(pl.col("launch_idx").is_not_null()).sort(["step", "ts", "id"])
              .unique(subset=["step", "launch_idx"], keep="first", maintain_order=True))
    drawn = cpu.filter(pl.col("kind") == "launch").select(
        "step", launch_idx="idx", launch_lane="lane", launch_depth="depth", launch_call_ts="ts")
    kept = firsts.join(drawn, on=["step", "launch_idx"], how="inner", maintain_order="left")
    left = (launched.join(kept.group_by("step").agg(drawn=pl.len().cast(pl.Int64)), on="step", how="left")
            .select("step", kind=pl.lit("link"), count=pl.col("count") - pl.col("drawn").fill_null(0))
            .filter(pl.col("count") > 0))
    return kept.select("step", "correlation", launch_ts="launch_call_ts", launch_lane="launch_lane",
                       launch_depth="launch_depth", kernel_id="id"), left


def _round_trips(whole: Analyses, gpu: pl.DataFrame, caps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    trips = whole.round_trips
    pairs = trips.tensor_kernels.select("producer_idx", "consumer_idx").hstack(
        trips.tensors.select("step", "bytes", "shape", "dtype"))
    ids = gpu.select("step", "id")
    pairs = pairs.filter(pl.col("step").is_not_null())
    drawn = (pairs.join(ids, left_on=["step", "producer_idx"], right_on=["step", "id"], how="semi", maintain_order="left")
             .join(ids, left_on=["step", "consumer_idx"], right_on=["step", "id"], how="semi", maintain_order="left"))
    left_ends = (pairs.group_by("step").agg(count=pl.len().cast(pl.Int64))
                 .join(drawn.group_by("step").agg(drawn=pl.len().cast(pl.Int64)), on="step", how="left")
                 .select("step", kind=pl.lit("round_trip"), count=pl.col("count") - pl.col("drawn").fill_null(0))
                 .filter(pl.col("count") > 0))
    kept, left_cap, _ = _capped(
        drawn.with_columns(ts=pl.lit(0, pl.Int64)), caps, "round_trips", "bytes",
        kind="round_trip")
    left = (pl.concat([left_ends, left_cap]).group_by("step", "kind").agg(pl.col("count").sum())
            .select(list(_LEFT_OUT_SCHEMA)))
    return kept.select(
        "step", producer_id="producer_idx", consumer_id="consumer_idx", bytes="bytes",
        label=pl.format("{} {}", pl.col("shape").fill_null("?"), pl.col("dtype").fill_null("?"))), left


def _merged(cpu_left: pl.DataFrame, gpu_left: pl.DataFrame, windows: pl.DataFrame,
            caps: pl.DataFrame) -> pl.DataFrame:
    """The left-out marks as runs (module docstring), with ``step`` and ``dur`` (the run's length)."""
    left = pl.concat([
        cpu_left.select("step", group=pl.lit("cpu"), lane="lane", depth="depth", ts="ts", end="end"),
        gpu_left.select("step", group=pl.lit("gpu"), lane="lane", depth=pl.lit(0, pl.Int64), ts="ts", end="end"),
    ], how="vertical_relaxed")
    if left.height == 0:
        return left.with_columns(count=pl.lit(0, pl.UInt32), busy_ns=pl.lit(0, pl.Int64), dur=pl.lit(0, pl.Int64))
    pieces = pl.min_horizontal(pl.lit(MERGE_PIECES, pl.Int64), (pl.col("cap_merged") // 4).clip(1))
    apart = windows.join(caps.select("step", "cap_merged"), on="step", how="left").select(
        "step", "start", _apart=((pl.col("end") - pl.col("start")) // pieces).clip(1))
    key = ["step", "group", "lane", "depth"]
    # Marks starting in one piece of the window are less than a piece apart, so they are in one run:
    # gathering them first (no sort) leaves few rows to sort (millions of left-out marks on a 1 GB
    # trace). The run rule on the pieces' hulls then gives the same runs as on the marks.
    pieces_hull = (left.join(apart, on="step", how="left")
                   .group_by(*key, _piece=(pl.col("ts") - pl.col("start")) // pl.col("_apart"))
                   .agg(ts=pl.col("ts").min(), end=pl.col("end").max(), count=pl.len().cast(pl.UInt32),
                        busy_ns=(pl.col("end") - pl.col("ts")).sum(), _apart=pl.col("_apart").first()))
    prev_end = pl.col("end").cum_max().shift(1).over(key)
    runs = (pieces_hull.sort([*key, "ts", "end"])
            .with_columns(_run=(prev_end.is_null() | (pl.col("ts") > prev_end + pl.col("_apart"))).cum_sum())
            .group_by("_run", maintain_order=True)
            .agg(pl.col(key).first(), ts=pl.col("ts").min(), end=pl.col("end").max(),
                 count=pl.col("count").sum(), busy_ns=pl.col("busy_ns").sum()))
    return _cpu_lanes(runs.drop("_run"), pl.col("group") == "cpu").with_columns(dur=pl.col("end") - pl.col("ts"))


def _fold_depths(cpu: pl.DataFrame) -> pl.DataFrame:
    """``fold_depth``: each kept CPU mark's row when its lane is folded to the launching depth, null
    for a mark the folded lane hides.

    A folded lane shows what says where GPU work came from and nothing else: the lane's outermost
    marks (the step, or the thread's top-level span), the user annotations whose subtree launches
    GPU work (:data:`FOLD_ANNOTATIONS` levels of them), the top ops that launch GPU work (the
    outermost cpu_op: ``aten::linear`` rather than the ``aten::addmm`` inside it, whose name the
    launch's link and hover still lead to) and the launch calls. The Python frames of a
    ``with_stack`` trace (30 levels and more) and the nested ATen ops under a top op (14 levels in a
    vLLM decode step) are hidden: the full lane shows them. A mark's row is the number of shown
    marks that enclose it, so no two marks of one row overlap (marks of one thread nest) and a
    folded lane has at most ``FOLD_ANNOTATIONS + 3`` rows.

    One sweep per lane over the kept marks (at most the caps' 4,000 per unit)."""
    shown = (pl.col("depth") == 0) | pl.col("role").is_not_null()
    rows = (cpu.with_row_index("_row").filter(shown).sort(["step", "lane", "ts", "depth", "idx"])
            .select("_row", "step", "lane", "depth", "ts", "end", "role").rows())
    fold: dict[int, int] = {}
    stack: list[tuple[int, str]] = []  # enclosing shown marks of the lane: (end, role)
    key = None
    for row, step, lane, depth, ts, end, role in rows:
        if (step, lane) != key:
            key, stack = (step, lane), []
        while stack and stack[-1][0] <= ts and not (stack[-1][0] == ts == end):
            stack.pop()
        if depth != 0 and role == "annotation" and sum(r == "annotation" for _, r in stack) >= FOLD_ANNOTATIONS:
            continue
        fold[row] = len(stack)
        if role != "launch":
            stack.append((end, "outer" if depth == 0 else role))
    found = pl.DataFrame({"_row": list(fold), "fold_depth": list(fold.values())},
                         schema={"_row": pl.UInt32, "fold_depth": pl.UInt16})
    return cpu.with_row_index("_row").join(found, on="_row", how="left", maintain_order="left").drop("_row")


def _busy(gpu_all: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The ``busy`` rows of every unit (module docstring), with ``step``."""
    if gpu_all.height == 0:
        return pl.DataFrame(schema={"step": pl.Int64, **BUSY_SCHEMA})
    work = gpu_all.select("step", "ts", "end", device=pl.col("lane").str.split(":").list.get(1).cast(pl.Int64))
    merged = intervals.merge(work, by=["step", "device"])
    span = (pl.col("_wend") - pl.col("_start")).clip(1)

    def edge(b: pl.Expr) -> pl.Expr:  # bin b's start: whole ns, so the bins tile the window exactly
        return pl.col("_start") + b * span // BUSY_BINS

    def bin_of(t: pl.Expr) -> pl.Expr:
        return ((t - pl.col("_start")).clip(0) * BUSY_BINS // span).clip(0, BUSY_BINS - 1)

    bins = (merged.join(windows.select("step", _start="start", _wend="end"), on="step", how="inner")
            .with_columns(_bin=pl.int_ranges(bin_of(pl.col("ts")), bin_of(pl.col("end")) + 1))
            .explode("_bin")
            .with_columns(_lo=edge(pl.col("_bin")), _hi=edge(pl.col("_bin") + 1))
            .with_columns(_part=pl.min_horizontal("end", "_hi") - pl.max_horizontal("ts", "_lo"))
            .filter(pl.col("_part") > 0))
    return (bins.group_by("step", "device", "_bin").agg(ts=pl.col("_lo").first(), end=pl.col("_hi").first(),
                                                         busy_ns=pl.col("_part").sum())
            .sort("step", "device", "_bin").select("step", *BUSY_SCHEMA))


# ---- finishing -------------------------------------------------------------------------------------

def _relative_depth(cpu: pl.DataFrame) -> pl.DataFrame:
    """Depth counted from the outermost mark drawn on the lane in the unit (a loop's enclosing
    spans would otherwise push every unit's ops down)."""
    return cpu.with_columns(depth=(pl.col("depth") - pl.col("depth").min().over("step", "lane")).cast(pl.UInt16))


def _short_names(gpu: pl.DataFrame) -> pl.DataFrame:
    from tracekit.classify.names import short_kernel_name

    distinct = gpu.select("name", "decoded").unique(maintain_order=True)
    shorts = distinct.with_columns(short=pl.Series(
        [short_kernel_name(n, d) for n, d in distinct.iter_rows()], dtype=pl.String))
    return gpu.join(shorts, on=["name", "decoded"], how="left", nulls_equal=True, maintain_order="left")


def _by_step(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> dict[int, pl.DataFrame]:
    if frame.height == 0:
        return {}
    parts = frame.select("step", *schema).cast(schema).partition_by("step", as_dict=True, maintain_order=True)  # type: ignore[arg-type]
    return {key[0]: part.drop("step") for key, part in parts.items()}
