"""Compilation read from the trace itself: torch.compile's frame compilations and recompiles, Inductor's
autotuning, CUDA-graph records and replays, and the first-call JIT of hand-written Triton kernels — and
what each unit was doing, so that the steady state is measured on steady units only.

Contract: :func:`analyze` takes a trace whose ``steps`` are its units
(:meth:`tracekit.analyses.units.Units.apply`) and its attribution (``gpu`` with ``step`` = the unit
holding the launch call) and returns a frozen :class:`Compilations`. Pure and vectorised: a trace
without compile work costs one regex pass over its op and launch names, the shape keys and the JIT
check over Triton kernels.

**Compile work** (:data:`WORK_RULES`, the first rule matching a span's name): a Dynamo frame
compilation (``_compile.compile_inner``), Inductor autotuning (``CachingAutotuner.benchmark_all_configs``,
run the first time a new graph runs), a CUDA-graph record (``CUDAGraphNode.record``, or a
``cudaGraphInstantiate*`` call outside one), or other work Dynamo times at run time (any other
``… (dynamo_timed)`` span, e.g. the CUDA-graph trees' warm-up). Spans and launch calls of every
thread are matched; one nested in another work span is part of it (only the outermost count).

**Compile id** of a work span: the ``compile_id=F/C`` that Dynamo writes into the ``…_data:``
annotations inside it; without one, the ``Torch-Compiled Region: F/C`` that follows a frame
compilation on its thread, or that encloses an autotuning, record or run-time span.

**Phases** (:data:`PHASE_RULES`): the CPU time of a frame compilation split by the innermost span of
a known phase covering each instant (names compared without `` (dynamo_timed)``); time under no
phase span is ``other`` (Dynamo's own bookkeeping, garbage collection). Its autotuning is the phase
``autotuning``, its other run-time work ``other``: the phases of a compilation add up to its
``total_ns``.

**Set aside**: GPU work launched inside compile work (autotuning benchmarks and their L2-flush
fills, anything a compilation runs on the device) is not the workload: :meth:`Compilations.workload`
drops it from the attributed GPU frame every table, median and throughput is computed from, and
``set_aside`` counts it per compilation and name.

**Shape key** of a unit: the ``Input Dims`` of one op, the same for the whole trace — the op name
(with a digit in its dims, outside compile work) found in the most units, ties to the one seen
first. A unit without that op (a CUDA-graph warm-up runs the graph's ops, not its input copy) takes
the key of the next unit that has one. Units of one key ran the same input shapes.

**Trigger** of a frame compilation (:data:`TRIGGERS`): ``first`` — compile index 0 of its frame (or,
without an id, the frame's first compilation in the trace); ``dynamic_promotion`` — a recompile
after which the graph is dynamic: it holds a ``pgo.dynamic_whitelist`` span (Dynamo writes it only
when automatic dynamic shapes has marked input dimensions dynamic) or its graph later runs units of
more than one shape key; ``shape_change`` — another recompile where the key op's input dims differ
between the last unit before it and the unit it compiled in (or the next unit with the op);
``recompile`` — a recompile the trace gives no cause for. ``dynamic`` is the same evidence for any
compilation (a ``dynamic=True`` first compile whose graph runs every shape). ``changed`` names the
dims that differ (``input 0 dim 0: 64 → 32``).

**JIT on first call** (:data:`JIT_LIBRARIES`): the first launch of a Triton kernel outside compile
work, whose launching op took at least :data:`JIT_MIN_NS` and :data:`JIT_FACTOR` × the median of
the same op's later launches of that kernel (a kernel launched once cannot be judged). ``jit_ns`` =
first − that median.

**Units** (``units``): per unit its shape key, the compile work that started in it, whether a
frame compilation (``compile``), a recompile (``recompile``), a graph record (``graph_record``), a
JIT (``jit``) or other run-time compile work (``runtime``: a cold call) happened in it. The per-step
summary (:func:`tracekit.analyses.steps.summarize`) turns these into the units' states.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.shapes import kineto_text, parse_dims
from tracekit.trace import Trace

#: What counts as compile work: (kind, regex on the op or launch-call name, why), first match wins.
WORK_RULES: tuple[tuple[str, str, str], ...] = (
    ("compile", r"^_compile\.compile_inner(?: \(dynamo_timed\))?$",
     "one Dynamo frame compilation: bytecode tracing, AOTAutograd, Inductor, Triton compile, guards"),
    ("autotune", r"^CachingAutotuner\.benchmark_all_configs(?: \(dynamo_timed\))?$",
     "Inductor benchmarking a kernel's configurations the first time a new graph runs (real launches)"),
    ("graph_record", r"^CUDAGraphNode\.record(?: \(dynamo_timed\))?$",
     "torch.compile (mode='reduce-overhead') recording a CUDA graph"),
    ("graph_record", r"^(?:cuda|hip)GraphInstantiate",
     "a CUDA graph instantiated (torch.cuda.graph, a serving engine's capture): the end of a record"),
    ("runtime", r" \(dynamo_timed\)$",
     "other compile-time work Dynamo times while a compiled graph runs (CUDA-graph trees' warm-up, …)"),
)
WORK_KINDS = ("compile", "autotune", "graph_record", "runtime")
#: Phases of a frame compilation: (phase, regex on a span name without " (dynamo_timed)", why).
PHASE_RULES: tuple[tuple[str, str, str], ...] = (
    ("dynamo_tracing", r"^(?:bytecode_tracing|insert_deferred_runtime_asserts)$",
     "Dynamo running the frame's bytecode symbolically into an FX graph"),
    ("guards", r"^(?:build_guards|pgo\.)",
     "building the guards that decide when the compiled graph may be reused"),
    ("triton_compile", r"^(?:async_compile\.|PyCodeCache\.|TritonBundler\.|CachingAutotuner\.precompile|"
                       r"StaticAutotunerFuture|compile_file)",
     "compiling the generated Triton kernels to cubins and loading the generated module"),
    ("autotuning", r"^CachingAutotuner\.benchmark_all_configs",
     "benchmarking kernel configurations on the GPU"),
    ("inductor", r"^(?:compile_fx|inductor_compile|fx_codegen_and_compile|GraphLowering\.|Scheduler\.|"
                 r"PythonWrapperCodegen\.|_recursive_(?:pre|joint|post)_grad_passes|pass\.|"
                 r"additional_fake_tensor_prop|OutputGraph\.call_user_compiler|backend_compile)",
     "Inductor: graph passes, lowering, scheduling and code generation"),
    ("aot", r"^(?:create_aot_dispatcher_function|aot_)",
     "AOTAutograd: functionalising the graph and tracing forward (and backward)"),
)
PHASES = ("dynamo_tracing", "aot", "inductor", "triton_compile", "autotuning", "guards", "other")
#: How a frame compilation was triggered (module docstring), in the order they are worded.
TRIGGERS = {
    "first": "the frame's first compilation",
    "dynamic_promotion": "a recompile after which the graph is dynamic (automatic dynamic shapes)",
    "shape_change": "a recompile because input shapes changed",
    "recompile": "a recompile the trace gives no cause for",
}
#: Libraries whose kernels are compiled when first launched (Triton's JIT).
JIT_LIBRARIES = ("triton", "inductor")
#: A first launch is a JIT when its op took this long ...
JIT_MIN_NS = 1_000_000
#: ... and this many times the median of the op's later launches of the kernel.
JIT_FACTOR = 10.0
#: Launch calls that replay a CUDA graph.
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
DYNAMIC_EVIDENCE = r"^pgo\.dynamic_whitelist"
REGION_PREFIX = "Torch-Compiled Region: "
_ID = r"(\d+/\d+)"

WORK_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String, "name": pl.String, "compile_id": pl.String, "step": pl.Int64, "pid": pl.String,
    "tid": pl.String, "ts": pl.Int64, "end": pl.Int64, "dur": pl.Int64,
}
COMPILATIONS_SCHEMA: dict[str, pl.DataType] = {
    "compile_id": pl.String, "frame": pl.Int64, "index": pl.Int64, "step": pl.Int64, "ts": pl.Int64,
    "cpu_ns": pl.Int64, "autotune_ns": pl.Int64, "runtime_ns": pl.Int64, "total_ns": pl.Int64,
    "trigger": pl.String, "dynamic": pl.Boolean, "key_op": pl.String, "shape_before": pl.String,
    "shape_after": pl.String, "changed": pl.String, "set_aside_count": pl.UInt32, "set_aside_gpu_ns": pl.Int64,
    "steps_run": pl.UInt32, "shapes_run": pl.UInt32,
}
PHASES_SCHEMA: dict[str, pl.DataType] = {"compile_id": pl.String, "phase": pl.String, "cpu_ns": pl.Int64}
SET_ASIDE_SCHEMA: dict[str, pl.DataType] = {
    "compile_id": pl.String, "work": pl.String, "kind": pl.String, "name": pl.String, "count": pl.UInt32,
    "gpu_ns": pl.Int64,
}
JIT_SCHEMA: dict[str, pl.DataType] = {
    "kernel": pl.String, "op": pl.String, "step": pl.Int64, "first_ns": pl.Int64, "later_ns": pl.Int64,
    "later_count": pl.UInt32, "jit_ns": pl.Int64,
}
UNITS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "shape": pl.String, "compile": pl.Boolean, "recompile": pl.Boolean,
    "graph_record": pl.Boolean, "jit": pl.Boolean, "runtime": pl.Boolean, "compile_ids": pl.String,
    "compile_ns": pl.Int64, "record_ns": pl.Int64, "jit_ns": pl.Int64, "graph_records": pl.UInt32,
    "graph_replays": pl.UInt32, "set_aside_count": pl.UInt32, "set_aside_gpu_ns": pl.Int64,
}
_ASIDE_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "compile_id": pl.String, "work": pl.String, "work_ts": pl.Int64, "kind": pl.String,
    "name": pl.String, "dur": pl.Int64,
}


@dataclass(frozen=True)
class Compilations:
    """Compilation found in one trace (see the module docstring). Times are Int64 nanoseconds.

    Attributes
    ----------
    compilations : DataFrame
        One row per frame compilation (:data:`COMPILATIONS_SCHEMA`), in time order: ``compile_id
        str?`` (``F/C``), ``frame i64?, index i64?``, ``step i64?`` (the unit it started in), ``ts``,
        ``cpu_ns`` (the compilation span), ``autotune_ns`` and ``runtime_ns`` (its autotuning and
        other run-time compile work, by compile id), ``total_ns`` (their sum), ``trigger str``
        (:data:`TRIGGERS`), ``dynamic bool``, ``key_op, shape_before, shape_after, changed str?``
        (the shape evidence of a recompile), ``set_aside_count u32, set_aside_gpu_ns i64`` (the GPU
        work it launched), ``steps_run u32, shapes_run u32`` (units whose ``Torch-Compiled Region``
        ran its graph, and their distinct shape keys).
    phases : DataFrame
        ``compile_id str?, phase str, cpu_ns i64`` (:data:`PHASES`), per compilation in time order.
    work : DataFrame
        Every outermost compile-work span (:data:`WORK_SCHEMA`): ``kind`` (:data:`WORK_KINDS`),
        ``name, compile_id, step, pid, tid, ts, end, dur``, sorted by ``ts``.
    set_aside : DataFrame
        GPU work launched inside compile work, per compile id, work kind, activity kind and name:
        :data:`SET_ASIDE_SCHEMA` (``count u32, gpu_ns i64`` summed durations), largest first.
    jit : DataFrame
        First-call JITs (:data:`JIT_SCHEMA`): ``kernel, op, step, first_ns, later_ns, later_count,
        jit_ns``, in time order.
    units : DataFrame
        Per unit (:data:`UNITS_SCHEMA`): ``step``, ``shape`` (its shape key), flags ``compile,
        recompile, graph_record, jit, runtime``, ``compile_ids`` (comma-joined), ``compile_ns`` (CPU
        time of the compile, autotuning and run-time work in it), ``record_ns`` (graph records),
        ``jit_ns``, ``graph_records, graph_replays`` (``cudaGraphLaunch`` calls), ``set_aside_count,
        set_aside_gpu_ns``; sorted by step.
    key_op : str or None
        The op whose ``Input Dims`` are the units' shape keys.
    """

    compilations: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COMPILATIONS_SCHEMA))
    phases: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PHASES_SCHEMA))
    work: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=WORK_SCHEMA))
    set_aside: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SET_ASIDE_SCHEMA))
    jit: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=JIT_SCHEMA))
    units: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=UNITS_SCHEMA))
    key_op: str | None = None
    #: The steady state per call (:func:`steady`), once the units' states are known.
    steady: dict[str, Any] = field(default_factory=dict)
    #: ``idx u32`` of every GPU activity set aside (what :meth:`workload` drops).
    aside_idx: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema={"idx": pl.UInt32}))

    @property
    def found(self) -> bool:
        """Whether the trace holds any compilation, compile work, graph replay or JIT."""
        return bool(self.work.height or self.jit.height or self.units["graph_replays"].sum())

    def workload(self, gpu: pl.DataFrame) -> pl.DataFrame:
        """``gpu`` (attributed GPU work) without the activities launched inside compile work."""
        return gpu if self.aside_idx.height == 0 else gpu.join(self.aside_idx, on="idx", how="anti",
                                                                  maintain_order="left")

    def totals(self) -> dict[str, Any]:
        """Whole-trace figures: ``compilations, recompiles, compile_ns`` (frame compilations with
        their autotuning and run-time work), ``frame_compile_ns, autotune_ns, runtime_ns``,
        ``recompile_ns`` (the recompiles' ``total_ns``), ``dynamic_promotions, graph_records,
        graph_replays, record_ns, jit_ns, jits, set_aside_count, set_aside_gpu_ns``, ``shapes`` (distinct
        shape keys), ``triggers`` (count per trigger)."""
        c, u = self.compilations, self.units
        recompiles = c.filter(pl.col("trigger") != "first")
        work = self.work

        def kind_ns(kind: str) -> int:
            return int(work.filter(pl.col("kind") == kind)["dur"].sum())

        return {
            "compilations": c.height, "recompiles": recompiles.height,
            "compile_ns": kind_ns("compile") + kind_ns("autotune") + kind_ns("runtime"),
            "frame_compile_ns": kind_ns("compile"), "autotune_ns": kind_ns("autotune"),
            "runtime_ns": kind_ns("runtime"), "recompile_ns": int(recompiles["total_ns"].sum()),
            "dynamic_promotions": c.filter(pl.col("trigger") == "dynamic_promotion").height,
            "graph_records": int(u["graph_records"].sum()), "graph_replays": int(u["graph_replays"].sum()),
            "record_ns": kind_ns("graph_record"), "jit_ns": int(self.jit["jit_ns"].sum()), "jits": self.jit.height,
            "set_aside_count": int(self.set_aside["count"].sum()), "set_aside_gpu_ns": int(self.set_aside["gpu_ns"].sum()),
            "shapes": u["shape"].drop_nulls().n_unique(),
            "triggers": {t: c.filter(pl.col("trigger") == t).height for t in TRIGGERS},
        }


def analyze(trace: Trace, gpu: pl.DataFrame) -> Compilations:
    """The compilation of ``trace`` (its ``steps`` are its units) from its attributed GPU work
    ``gpu`` (:class:`~tracekit.analyses.attribution.Attribution`'s frame, ``step`` = the unit of the
    launch call)."""
    work = _work(trace)
    aside = _set_aside(gpu, work)
    keys, key_op = _shape_keys(trace, work)
    jit = _jit(trace, gpu.filter(~pl.col("idx").is_in(aside["idx"].implode())) if aside.height else gpu)
    compiles = _compilations(trace, work, aside, keys, key_op)
    units = _units(trace, work, aside, keys, jit, compiles)
    return Compilations(
        compilations=compiles, phases=_phases(trace, work), work=work, set_aside=_aside_table(aside), jit=jit,
        units=units, key_op=key_op, aside_idx=aside.select("idx"))


#: The states of :func:`tracekit.analyses.steps.summarize` that set a unit aside, in display order.
SET_ASIDE_STATES = ("compile", "recompile", "graph_record", "jit_warmup", "cold", "warmup", "partial")


def steady(summary: pl.DataFrame) -> dict[str, Any]:
    """The steady state per call of a trace from its per-step summary (with ``shape`` and ``state``).

    Per shape key, the median over its steady units of ``gpu_busy_ns``, ``cpu_dispatch_ns`` and
    ``wall_ns``; the trace's figure is the mean of those medians weighted by how many units (of any
    state) ran each shape — the cost of one call of the trace's own mix of shapes, where a plain
    median over a sweep would pick one shape's figure. Shapes without a steady unit drop out of the
    weights; with no steady unit at all, every unit counts (as the medians elsewhere do).

    Returns ``{units, steady_units, shapes, gpu_ns, cpu_dispatch_ns, wall_ns, set_aside: {state:
    units}}`` (figures None for a trace without units; ``set_aside`` in :data:`SET_ASIDE_STATES`
    order, states with no unit left out).
    """
    n = summary.height
    out: dict[str, Any] = {"units": n, "steady_units": 0, "shapes": 0, "gpu_ns": None, "cpu_dispatch_ns": None,
                           "wall_ns": None, "set_aside": {}}
    if n == 0:
        return out
    frame = summary.with_columns(pl.col("shape").fill_null(""))
    counts = frame.group_by("state").agg(n=pl.len())
    by_state = dict(zip(counts["state"].to_list(), counts["n"].to_list()))
    steady_rows = frame.filter(pl.col("steady"))
    measured = steady_rows if steady_rows.height else frame
    medians = measured.group_by("shape").agg(pl.col("gpu_busy_ns", "cpu_dispatch_ns", "wall_ns").median())
    weights = frame.group_by("shape").agg(_n=pl.len())
    mixed = medians.join(weights, on="shape").with_columns(_w=pl.col("_n") / pl.col("_n").sum())
    figures = mixed.select((pl.col(c) * pl.col("_w")).sum().round(0).cast(pl.Int64)
                           for c in ("gpu_busy_ns", "cpu_dispatch_ns", "wall_ns")).row(0)
    out.update(steady_units=steady_rows.height, shapes=frame.filter(pl.col("shape") != "")["shape"].n_unique(),
               gpu_ns=figures[0], cpu_dispatch_ns=figures[1], wall_ns=figures[2],
               set_aside={state: by_state[state] for state in SET_ASIDE_STATES if by_state.get(state)})
    return out


def _within(frame: pl.DataFrame, time_col: str, spans: pl.DataFrame, thread_col: str = "tid") -> pl.Series:
    """Per row of ``frame``, the row of ``spans`` (``tid, ts, end``, sorted by ``ts``, disjoint on a
    thread) whose ``[ts, end)`` holds ``time_col`` on the row's thread (``thread_col``), else null.
    Binary search: the (possibly large) frame is never sorted."""
    if spans.height == 0 or frame.height == 0:
        return pl.Series("_span", [None] * frame.height, dtype=pl.Int64)
    windows = spans.select("ts", "end", number=pl.int_range(spans.height, dtype=pl.Int64))
    at = steps_analysis.tag_steps(frame.select(time_col, thread_col), windows, time_col, "_span")["_span"]
    same = spans["tid"].gather(at) == frame[thread_col]
    return pl.select(pl.when(same).then(at)).to_series().alias("_span")


# -- compile work ----------------------------------------------------------------------------------

def _kind_expr(rules: tuple[tuple[str, str, str], ...], column: str = "name") -> pl.Expr:
    """The label of the first rule whose regex matches ``column`` (null when none does)."""
    out = pl.lit(None, pl.String)
    for label, pattern, _ in reversed(rules):
        out = pl.when(pl.col(column).str.contains(pattern)).then(pl.lit(label)).otherwise(out)
    return out


def _work(trace: Trace) -> pl.DataFrame:
    """Outermost compile-work spans with their kind, compile id and unit (module docstring)."""
    cols = ["idx", "name", "pid", "tid", "ts", "end"]
    pattern = "|".join(f"(?:{p})" for _, p, _ in WORK_RULES)
    spans = pl.concat([trace.ops.select(cols), trace.launches.select(cols)]).filter(
        pl.col("name").str.contains(pattern))
    if spans.height == 0:
        return pl.DataFrame(schema=WORK_SCHEMA)
    ordered = spans.sort(["pid", "tid", "ts", "end", "idx"], descending=[False, False, False, True, False])
    nested = (pl.col("ts") < pl.col("end").cum_max().shift(1).over(["pid", "tid"])).fill_null(False)
    outer = ordered.filter(~nested).with_columns(kind=_kind_expr(WORK_RULES), dur=pl.col("end") - pl.col("ts"))
    outer = _compile_ids(trace, outer.sort(["ts", "idx"]))
    outer = steps_analysis.tag_steps(outer, trace.steps, "ts")
    return outer.select(list(WORK_SCHEMA)).cast(WORK_SCHEMA).sort(["ts", "compile_id"])  # type: ignore[arg-type]


def _compile_ids(trace: Trace, work: pl.DataFrame) -> pl.DataFrame:
    """``work`` (sorted by ts) plus ``compile_id``: a ``compile_id=F/C`` annotation inside the span,
    else the ``Torch-Compiled Region`` after a compilation or around other work (module docstring)."""
    notes = (trace.ops.filter(pl.col("cat") == "user_annotation")  # few: the text test runs on those
             .filter(pl.col("name").str.contains("compile_id=", literal=True))
             .select("pid", "tid", pl.col("ts").alias("_at"),
                     pl.col("name").str.extract(r"compile_id=" + _ID, 1).alias("_note_id"))
             .filter(pl.col("_note_id").is_not_null()).sort("_at"))
    work = (work.join_asof(notes, left_on="ts", right_on="_at", by=["pid", "tid"], strategy="forward", check_sortedness=False)
            .with_columns(_note_id=pl.when(pl.col("_at") < pl.col("end")).then(pl.col("_note_id"))).drop("_at"))
    regions = (trace.ops.filter(pl.col("name").str.starts_with(REGION_PREFIX))
               .select("pid", "tid", pl.col("ts").alias("_at"), pl.col("end").alias("_region_end"),
                       pl.col("name").str.extract(_ID, 1).alias("_region_id")).sort("_at"))
    after = (work.select("idx", "pid", "tid", "end").sort("end")
             .join_asof(regions.drop("_region_end"), left_on="end", right_on="_at", by=["pid", "tid"],
                        strategy="forward", check_sortedness=False).select("idx", pl.col("_region_id").alias("_next_id")))
    around = (work.select("idx", "pid", "tid", "ts", "end")
              .join_asof(regions, left_on="ts", right_on="_at", by=["pid", "tid"], strategy="backward", check_sortedness=False)
              .select("idx", pl.when(pl.col("_region_end") >= pl.col("end")).then(pl.col("_region_id"))
                      .alias("_around_id")))
    return (work.join(after, on="idx", how="left").join(around, on="idx", how="left")
            .with_columns(compile_id=pl.coalesce(
                "_note_id", pl.when(pl.col("kind") == "compile").then(pl.col("_next_id"))
                .otherwise(pl.col("_around_id"))))
            .drop("_note_id", "_next_id", "_around_id").sort(["ts", "idx"]))


def _set_aside(gpu: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """GPU activities whose launch call lies inside compile work on its thread (:data:`_ASIDE_SCHEMA`)."""
    if work.height == 0 or gpu.height == 0:
        return pl.DataFrame(schema=_ASIDE_SCHEMA)
    spans = work.sort("ts")
    launched = gpu.filter(pl.col("launch_ts").is_not_null())
    at = _within(launched, "launch_ts", spans, "launch_tid")
    found = launched.with_columns(at).filter(pl.col("_span").is_not_null())
    found = found.with_columns(compile_id=spans["compile_id"].gather(found["_span"]),
                               work=spans["kind"].gather(found["_span"]), work_ts=spans["ts"].gather(found["_span"]))
    return found.select(list(_ASIDE_SCHEMA)).cast(_ASIDE_SCHEMA)  # type: ignore[arg-type]


def _aside_table(aside: pl.DataFrame) -> pl.DataFrame:
    if aside.height == 0:
        return pl.DataFrame(schema=SET_ASIDE_SCHEMA)
    return (aside.group_by("compile_id", "work", "kind", "name")
            .agg(count=pl.len(), gpu_ns=pl.col("dur").sum())
            .select(list(SET_ASIDE_SCHEMA)).cast(SET_ASIDE_SCHEMA)  # type: ignore[arg-type]
            .sort(["gpu_ns", "compile_id", "work", "kind", "name"], descending=[True, False, False, False, False],
                  nulls_last=True))


# -- phases ------------------------------------------------------------------------------------------

def _phases(trace: Trace, work: pl.DataFrame) -> pl.DataFrame:
    """CPU time per phase of each frame compilation and its autotuning and run-time work (module
    docstring): each span of a known phase keeps its time minus that of the phase spans nearest
    inside it; a root's unclaimed time is ``other`` (``autotuning`` for an autotuning root)."""
    roots = work.filter(pl.col("kind") != "graph_record").sort("ts")
    if roots.height == 0:
        return pl.DataFrame(schema=PHASES_SCHEMA)
    ops = trace.ops.select("idx", "name", "pid", "tid", "ts", "end")
    ops = ops.with_columns(_within(ops, "ts", roots)).filter(pl.col("_span").is_not_null())
    root_of = roots.select(_span=pl.int_range(roots.height, dtype=pl.Int64), _root_ts=pl.col("ts"),
                           _root_end=pl.col("end"), _root_kind=pl.col("kind"), compile_id=pl.col("compile_id"))
    inside = ops.join(root_of, on="_span").filter(pl.col("end") <= pl.col("_root_end"))
    is_root = (pl.col("ts") == pl.col("_root_ts")) & (pl.col("end") == pl.col("_root_end"))
    inside = (inside.with_columns(_base=pl.col("name").str.strip_suffix(" (dynamo_timed)"))
              .with_columns(phase=pl.when(is_root).then(pl.when(pl.col("_root_kind") == "autotune")
                                                        .then(pl.lit("autotuning")).otherwise(pl.lit("other")))
                            .otherwise(_kind_expr(PHASE_RULES, "_base"))))
    marked = inside.filter(pl.col("phase").is_not_null()).select("_span", "idx", "ts", "end", "phase", "compile_id",
                                                                  "_root_ts")
    # The nearest marked span enclosing each one (same root): the latest to start among those that
    # start no later and end no earlier, earlier in (ts, -end, idx) order so equal spans form a chain.
    pairs = (marked.select("_span", "idx", "ts", "end")
             .join(marked.select("_span", pl.col("idx").alias("_up"), pl.col("ts").alias("_up_ts"),
                                 pl.col("end").alias("_up_end")), on="_span")
             .filter((pl.col("_up_ts") <= pl.col("ts")) & (pl.col("_up_end") >= pl.col("end"))
                     & ((pl.col("_up_ts") < pl.col("ts")) | (pl.col("_up_end") > pl.col("end"))
                        | (pl.col("_up") < pl.col("idx"))))
             .sort(["idx", "_up_ts", "_up_end", "_up"], descending=[False, True, False, True])
             .unique(subset=["idx"], keep="first"))
    claimed = (pairs.select("_up", _dur=pl.col("end") - pl.col("ts")).group_by("_up").agg(_claimed=pl.col("_dur").sum())
               .rename({"_up": "idx"}))
    exclusive = (marked.join(claimed, on="idx", how="left")
                 .with_columns(cpu_ns=pl.col("end") - pl.col("ts") - pl.col("_claimed").fill_null(0)))
    order = {p: i for i, p in enumerate(PHASES)}
    return (exclusive.group_by("compile_id", "phase").agg(pl.col("cpu_ns").sum(), _first=pl.col("_root_ts").min())
            .with_columns(_first=pl.col("_first").min().over(pl.col("compile_id")),
                          _order=pl.col("phase").replace_strict(order, default=len(order), return_dtype=pl.Int64))
            .sort(["_first", "compile_id", "_order"], nulls_last=True)
            .select(list(PHASES_SCHEMA)).cast(PHASES_SCHEMA))  # type: ignore[arg-type]


# -- shapes, JIT, compilations, units ----------------------------------------------------------------

def _outside(frame: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``frame`` (``tid, ts``) that start outside every compile-work span of their thread."""
    if work.height == 0 or frame.height == 0:
        return frame
    return frame.filter(_within(frame, "ts", work.sort("ts")).is_null())


def _shape_keys(trace: Trace, work: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """``step i64, shape str?`` per unit and the key op (module docstring)."""
    steps = trace.steps.select(pl.col("number").alias("step"), "ts").sort("ts")
    empty = steps.select("step", shape=pl.lit(None, pl.String))
    if steps.height == 0:
        return empty, None
    shaped = (trace.ops.lazy().select("name", "tid", "ts", "input_dims")
              .filter(pl.col("input_dims").str.contains("[0-9]")).collect())
    shaped = steps_analysis.tag_steps(_outside(shaped, work), trace.steps, "ts").filter(pl.col("step").is_not_null())
    if shaped.height == 0:
        return empty, None
    per_unit = shaped.group_by("step", "name").agg(pl.col("input_dims").sort_by("ts").first(),
                                                   _first=pl.col("ts").min())
    best = (per_unit.group_by("name").agg(_units=pl.len(), _first=pl.col("_first").min())
            .sort(["_units", "_first", "name"], descending=[True, False, False]).row(0, named=True)["name"])
    # The key is written as Kineto writes it: a trace re-saved minified keys its units the same.
    chosen = per_unit.filter(pl.col("name") == best).select("step", "input_dims")  # one row per unit
    chosen = chosen.select("step", shape=pl.Series([kineto_text(v) for v in chosen["input_dims"]], dtype=pl.String))
    keys = (steps.join(chosen, on="step", how="left")
            .with_columns(pl.col("shape").backward_fill()).select("step", "shape"))
    return keys, best


def _jit(trace: Trace, gpu: pl.DataFrame) -> pl.DataFrame:
    """First launches of Triton kernels whose op took far longer than its later launches (module docstring)."""
    triton = gpu.filter(pl.col("library").is_in(JIT_LIBRARIES) & pl.col("op_idx").is_not_null()
                        & (pl.col("kind") == "kernel"))
    if triton.height == 0:
        return pl.DataFrame(schema=JIT_SCHEMA)
    ops = trace.ops.select(pl.col("idx").alias("op_idx"), pl.col("name").alias("op"), pl.col("dur").alias("_op_ns"))
    calls = (triton.select("name", "op_idx", "step", "launch_ts", "idx").join(ops, on="op_idx", how="inner")
             .sort(["name", "launch_ts", "idx"]))
    found = (calls.group_by("name")
             .agg(pl.col("op").first(), pl.col("step").first(), first_ns=pl.col("_op_ns").first(),
                  later_ns=pl.col("_op_ns").slice(1).median(), later_count=(pl.len() - 1).cast(pl.UInt32),
                  _ts=pl.col("launch_ts").first(), _op_idx=pl.col("op_idx").first())
             .filter((pl.col("later_count") > 0) & (pl.col("first_ns") >= JIT_MIN_NS)
                     & (pl.col("first_ns") >= JIT_FACTOR * pl.col("later_ns")))
             .with_columns(pl.col("later_ns").round(0).cast(pl.Int64))
             .with_columns(jit_ns=pl.col("first_ns") - pl.col("later_ns")))
    # One op that compiled several kernels on its first call is one JIT, named by its first kernel.
    found = found.sort(["_ts", "name"]).unique(subset=["_op_idx"], keep="first", maintain_order=True)
    return found.rename({"name": "kernel"}).select(list(JIT_SCHEMA)).cast(JIT_SCHEMA)  # type: ignore[arg-type]


def _dims_change(before: str | None, after: str | None) -> str | None:
    """``input 0 dim 0: 64 → 32; …`` — the tensor dims that differ between two ``Input Dims`` texts
    (a TensorList's tensors are ``input 0[1]``)."""
    if before is None or after is None or before == after:
        return None
    parts: list[str] = []

    def walk(a: Any, b: Any, where: str) -> None:
        shape_a = isinstance(a, tuple) and all(isinstance(d, int) for d in a)
        shape_b = isinstance(b, tuple) and all(isinstance(d, int) for d in b)
        if shape_a and shape_b and len(a) == len(b):
            parts.extend(f"{where} dim {d}: {p} → {q}" for d, (p, q) in enumerate(zip(a, b)) if p != q)
        elif isinstance(a, tuple) and isinstance(b, tuple) and not shape_a and not shape_b and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{where}[{i}]")
        elif a != b:
            parts.append(f"{where}: {list(a) if isinstance(a, tuple) else a} → {list(b) if isinstance(b, tuple) else b}")

    a, b = parse_dims(before), parse_dims(after)
    for i, (x, y) in enumerate(zip(a, b)):
        walk(x, y, f"input {i}")
    if len(a) != len(b):
        parts.append(f"{len(a)} → {len(b)} inputs")
    return "; ".join(parts) or "input dims differ"


def _compilations(trace: Trace, work: pl.DataFrame, aside: pl.DataFrame, keys: pl.DataFrame,
                  key_op: str | None) -> pl.DataFrame:
    frames = work.filter(pl.col("kind") == "compile")
    if frames.height == 0:
        return pl.DataFrame(schema=COMPILATIONS_SCHEMA)
    rows = frames.with_columns(
        frame=pl.col("compile_id").str.extract(r"^(\d+)/", 1).cast(pl.Int64),
        index=pl.col("compile_id").str.extract(r"/(\d+)$", 1).cast(pl.Int64))
    by_id = (work.filter(pl.col("kind").is_in(["autotune", "runtime"]) & pl.col("compile_id").is_not_null())
             .group_by("compile_id").agg(autotune_ns=pl.col("dur").filter(pl.col("kind") == "autotune").sum(),
                                          runtime_ns=pl.col("dur").filter(pl.col("kind") == "runtime").sum()))
    gpu_by_id = aside.group_by("compile_id").agg(set_aside_count=pl.len(), set_aside_gpu_ns=pl.col("dur").sum())
    regions = steps_analysis.tag_steps(
        trace.ops.filter(pl.col("name").str.starts_with(REGION_PREFIX))
        .select("ts", compile_id=pl.col("name").str.extract(_ID, 1)), trace.steps, "ts")
    runs = (regions.filter(pl.col("step").is_not_null()).join(keys, on="step", how="left")
            .group_by("compile_id").agg(steps_run=pl.col("step").n_unique(), shapes_run=pl.col("shape").drop_nulls().n_unique()))
    dynamic_ids = _dynamic_evidence(trace, frames)
    rows = (rows.join(by_id, on="compile_id", how="left").join(gpu_by_id, on="compile_id", how="left")
            .join(runs, on="compile_id", how="left")
            .with_columns(pl.col("autotune_ns", "runtime_ns", "set_aside_gpu_ns").fill_null(0),
                          pl.col("set_aside_count", "steps_run", "shapes_run").fill_null(0),
                          cpu_ns=pl.col("dur"), _pgo=pl.col("ts").is_in(dynamic_ids.implode()))
            .with_columns(total_ns=pl.col("cpu_ns") + pl.col("autotune_ns") + pl.col("runtime_ns"),
                          dynamic=pl.col("_pgo") | (pl.col("shapes_run") > 1))
            .sort(["ts", "compile_id"]))
    # Shape evidence: the key op's dims in the last unit before the compiling one and in the unit
    # (or the next one that has the op).
    shapes = keys.sort("step")
    own = shapes.rename({"shape": "shape_after"})
    before = shapes.with_columns(shape_before=pl.col("shape").shift(1)).select("step", "shape_before")
    rows = rows.join(own, on="step", how="left").join(before, on="step", how="left")
    first_of_frame = pl.col("ts") == pl.col("ts").min().over(pl.col("frame").fill_null(-1))
    is_first = pl.when(pl.col("index").is_not_null()).then(pl.col("index") == 0).otherwise(first_of_frame)
    rows = rows.with_columns(
        changed=pl.struct("shape_before", "shape_after").map_elements(
            lambda r: _dims_change(r["shape_before"], r["shape_after"]), return_dtype=pl.String),
        key_op=pl.lit(key_op, pl.String), _first=is_first)
    rows = rows.with_columns(trigger=pl.when(pl.col("_first")).then(pl.lit("first"))
                             .when(pl.col("dynamic")).then(pl.lit("dynamic_promotion"))
                             .when(pl.col("changed").is_not_null()).then(pl.lit("shape_change"))
                             .otherwise(pl.lit("recompile")))
    return rows.select(list(COMPILATIONS_SCHEMA)).cast(COMPILATIONS_SCHEMA)  # type: ignore[arg-type]


def _dynamic_evidence(trace: Trace, frames: pl.DataFrame) -> pl.Series:
    """``ts`` of the frame compilations holding a ``pgo.dynamic_whitelist`` span."""
    marks = trace.ops.filter(pl.col("name").str.contains(DYNAMIC_EVIDENCE)).select("tid", "ts")
    spans = frames.sort("ts")
    if marks.height == 0:
        return pl.Series("ts", [], dtype=pl.Int64)
    at = _within(marks, "ts", spans).drop_nulls()
    return spans["ts"].gather(at).unique()


def _units(trace: Trace, work: pl.DataFrame, aside: pl.DataFrame, keys: pl.DataFrame, jit: pl.DataFrame,
           compiles: pl.DataFrame) -> pl.DataFrame:
    steps = trace.steps.select(pl.col("number").alias("step"))
    if steps.height == 0:
        return pl.DataFrame(schema=UNITS_SCHEMA)
    in_units = work.filter(pl.col("step").is_not_null())
    per_work = in_units.group_by("step").agg(
        compile=(pl.col("kind") == "compile").any(), graph_record=(pl.col("kind") == "graph_record").any(),
        runtime=(pl.col("kind") == "runtime").any(),
        compile_ids=pl.col("compile_id").filter(pl.col("kind") == "compile").drop_nulls().unique(maintain_order=True)
        .str.join(","),
        compile_ns=pl.col("dur").filter(pl.col("kind") != "graph_record").sum(),
        record_ns=pl.col("dur").filter(pl.col("kind") == "graph_record").sum(),
        graph_records=(pl.col("kind") == "graph_record").sum().cast(pl.UInt32))
    recompiling = compiles.filter(pl.col("trigger") != "first")["step"].drop_nulls().implode()
    replays = steps_analysis.tag_steps(
        _outside(trace.launches.filter(pl.col("name").is_in(GRAPH_LAUNCHES)).select("pid", "tid", "ts"), work),
        trace.steps, "ts").group_by("step").agg(graph_replays=pl.len().cast(pl.UInt32))
    jits = jit.group_by("step").agg(jit_ns=pl.col("jit_ns").sum())
    if aside.height:
        aside_steps = steps_analysis.tag_steps(aside.select("dur", ts=pl.col("work_ts")), trace.steps, "ts")
        by_step = aside_steps.group_by("step").agg(set_aside_count=pl.len().cast(pl.UInt32),
                                                   set_aside_gpu_ns=pl.col("dur").sum())
    else:
        by_step = pl.DataFrame(schema={"step": pl.Int64, "set_aside_count": pl.UInt32, "set_aside_gpu_ns": pl.Int64})
    out = (steps.join(keys, on="step", how="left").join(per_work, on="step", how="left")
           .join(replays, on="step", how="left").join(jits, on="step", how="left").join(by_step, on="step", how="left")
           .with_columns(pl.col("compile", "graph_record", "runtime").fill_null(False),
                         pl.col("compile_ns", "record_ns", "jit_ns", "set_aside_gpu_ns").fill_null(0),
                         pl.col("graph_records", "graph_replays", "set_aside_count").fill_null(0),
                         recompile=pl.col("step").is_in(recompiling), jit=pl.col("jit_ns").is_not_null() & (pl.col("jit_ns") > 0)))
    return out.select(list(UNITS_SCHEMA)).cast(UNITS_SCHEMA).sort("step")  # type: ignore[arg-type]


__all__ = ["Compilations", "PHASE_RULES", "TRIGGERS", "WORK_RULES", "analyze"]
