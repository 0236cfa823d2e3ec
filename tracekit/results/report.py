"""The core report: trace facts, steps, kernels, launch paths, zero-kernel ops, compile pre-ops.

Contract: :func:`build` takes a trace's analyses (:class:`tracekit.analyses.pipeline.Analyses`, the
one bundle) and returns a frozen :class:`Report`, a view of the bundle: it selects and filters, and
runs no analysis again; renderers format it and never compute. ``step`` selects one ProfilerStep
(its number); without it every table covers the whole trace except ``paths``, which shows one
representative step (the last, the steadiest after warm-up) so it stays readable on long traces.

JSON contract ``tracekit.report/1`` (see :func:`tracekit.render.json.to_data`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import polars as pl

from tracekit.analyses import attribution, breakdown as breakdown_mod, decomposition as decomposition_mod
from tracekit.analyses import dispatch, kernels, launch_gaps
from tracekit.analyses import pipeline, round_trips, steps as steps_analysis, throughput
from tracekit.analyses.compilations import Compilations
from tracekit.analyses.decomposition import Decomposition
from tracekit.analyses.memory import MemoryReport
from tracekit.analyses.graph_replays import GraphReplays
from tracekit.analyses.serving import Serving
from tracekit.analyses.timeline import Timelines
from tracekit.analyses.units import Units
from tracekit.errors import UsageError
from tracekit.findings import Finding
from tracekit.results.display import Displayed, short_list, short_name
from tracekit.trace import UNANALYSED, Trace

#: Rows of the path table when the trace has no steps to pick one from.
MAX_PATH_ROWS_WITHOUT_STEPS = 200


@dataclass(frozen=True)
class Facts:
    """What the trace is: file, device(s), versions, vendor, steps."""

    path: str
    size_bytes: int
    event_count: int
    vendor: str
    time_format: str
    devices: list[dict[str, Any]]
    versions: dict[str, str]
    distributed: dict[str, Any] | None
    #: The numbers of the trace's units (its ProfilerSteps, else the units found: ``Report.units``).
    step_numbers: list[int]
    graph_hashes: list[str]
    #: What the load left out or could not analyse (:class:`tracekit.trace.TraceMeta`).
    unanalysed_activity: dict[str, int] = field(default_factory=dict)
    #: The same events by device family (``{"MTIA": 25814}``), most first: what the facts name.
    unanalysed_families: dict[str, int] = field(default_factory=dict)
    dropped_events: dict[str, int] = field(default_factory=dict)
    partial: str | None = None
    #: Events ``tracekit annotate`` added to the file, set aside by the load (0 for a profiler's trace).
    annotations: int = 0


@dataclass(frozen=True, repr=False)
class Report(Displayed):
    """Everything ``tracekit report`` shows, as data (``tracekit.open(path).report()``).

    Every table is a Polars DataFrame; times are Int64 nanoseconds.

    Attributes
    ----------
    facts : Facts
        The file, its device(s), versions, vendor and step numbers.
    selected_step : int or None
        The ``--step`` the tables are restricted to (a unit number).
    path_step : int or None
        The step ``paths`` shows (the selected one, else the last).
    units : tracekit.analyses.units.Units or None
        What the trace's steps are: its ``ProfilerStep#N`` spans, or the iteration units found
        without them (``kind``, ``name``, ``source``, ``rule``, ``windows``). Every table "per step"
        is per unit; ``steps`` rows are named after the units (``mlp_fwd#3``, ``iteration#2``,
        ``whole trace``).
    steps : DataFrame
        One row per unit: ``name str, number i64, start_ns i64, dur_ns i64`` (its CPU span),
        ``gpu_busy_ns i64`` (union of the GPU work launched in it), ``kernel_count u32,
        gpu_activity_count u32`` (kernels; kernels + memcpys + memsets). Work whose launch call is
        not in the trace is in no step (``orphans``).
    breakdown : tracekit.analyses.breakdown.Breakdown or None
        The first table to read on an unknown trace: GPU time per kernel class and per library as a
        share of busy time (``shares``), per stream (``streams``), and the share of communication
        kernel time that compute overlaps (``overlap``), each for the whole trace (``scope
        "trace"``) and per unit (``scope "unit"``; only the selected one with ``--step``).
    orphans : DataFrame
        GPU work whose launch call is not in the trace, by reason and kind:
        :data:`tracekit.analyses.attribution.ORPHANS_SCHEMA` (``reason str`` — ``before_trace`` |
        ``launch_missing``, ``kind str, count u32, dur_ns i64, busy_ns i64, first_ns i64,
        last_end_ns i64``); whole trace, also with ``--step``.
    kernels : DataFrame
        GPU activity by name (of the steady units and the work outside every unit when some units
        are not steady: ``set_aside_units``; GPU work launched by a compilation never counts): ``name str, kernel_class str, library str, kind str, count u32,
        total_ns i64, mean_ns i64, launch_api str?, cpu_op str?, decoded str`` (JSON object of the
        fields decoded from the name), sorted by ``total_ns`` descending.
    paths : DataFrame
        The launch path of every kernel of ``path_step`` in launch order: ``step i64?, scope str?,
        top_op str?, cpu_op str?, kernel str, kernel_class str, launch str, dur_ns i64``.
    zero_kernel_ops : DataFrame
        CPU ops whose subtree launches nothing: ``name str, count u32, cpu_ns i64``.
    compile_preops : DataFrame
        torch.compile's wrappers per step: ``step i64?, name str, kind str, count u32, cpu_ns i64,
        graph_hash str?``.
    launch_gaps : tracekit.analyses.launch_gaps.LaunchGapsReport
        Per-step wall, dispatch, busy, idle and verdict (``per_step``), idle gaps with their cause.
    round_trips : tracekit.analyses.round_trips.RoundTripReport
        Tensors written to HBM and read back in the same step (``tensors``, ``bytes_per_step``).
    throughput : tracekit.analyses.throughput.ThroughputReport
        Achieved TFLOP/s or GB/s per kernel against the device's ceilings (``kernels``).
    attribution : tracekit.analyses.attribution.Attribution or None
        The whole-trace attribution the tables came from (None in a report stored by ``convert``);
        its ``gpu`` is the workload: GPU work launched inside compile work (autotuning) is left out.
    compilation : tracekit.analyses.compilations.Compilations or None
        Frame compilations, recompiles, autotuning set aside, CUDA-graph records and replays,
        first-call JITs, and each unit's shape key and compile flags (whole trace, also with
        ``--step``); None in a report made before it existed.
    memory : tracekit.analyses.memory.MemoryReport or None
        Memory from the ``[memory]`` events: per device the allocated/reserved curves, the peak per
        unit and for the trace with the op running then, the blocks alive at the peak by allocating
        op, per-op allocations, fragmentation and headroom, out-of-memory events (whole trace, also
        with ``--step``; ``events`` is 0 for a trace recorded without ``profile_memory=True``).
    extra : dict
        ``{"hta": DataFrame}`` with ``--hta``.
    findings : tuple of tracekit.findings.Finding
        What is wrong, with its evidence, measured cost, projected saving on the wall and fix
        (:mod:`tracekit.findings`; warnings first), over the steady steps or the ``--step``.
    decomposition : tracekit.analyses.decomposition.Decomposition or None
        Each unit's CPU span by host state (blocked, data, dispatch, op-free), its GPU idle time by
        what the host did meanwhile, and what limits it; ``limit`` and ``limit_share`` are the
        steady units' (the ``--step`` unit's with ``--step``, whose ``units`` are then its row only).
        None in a report made before it existed.
    """

    #: The result kind: its view is ``tracekit.render.views.report``, its JSON contract
    #: ``tracekit.render.json.report`` (the renderers find both by this name).
    kind: ClassVar[str] = "report"

    facts: Facts
    selected_step: int | None
    path_step: int | None
    paths_truncated: bool
    steps: pl.DataFrame
    kernels: pl.DataFrame
    paths: pl.DataFrame
    zero_kernel_ops: pl.DataFrame
    compile_preops: pl.DataFrame
    #: None in reports made before units existed.
    units: Units | None = None
    orphans: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=attribution.ORPHANS_SCHEMA))
    breakdown: breakdown_mod.Breakdown | None = None
    launch_gaps: launch_gaps.LaunchGapsReport | None = None
    round_trips: round_trips.RoundTripReport | None = None
    throughput: throughput.ThroughputReport | None = None
    #: The whole-trace attribution the tables were built from (never step-filtered); None in a
    #: stored report (:mod:`tracekit.results.store` leaves it out).
    attribution: attribution.Attribution | None = None
    #: ``{"hta": DataFrame}`` with ``--hta`` (:func:`tracekit.hta_oracle.side_by_side`).
    extra: dict[str, pl.DataFrame] = field(default_factory=dict)
    memory: MemoryReport | None = None
    #: Empty in a report made before findings.
    findings: tuple[Finding, ...] = ()
    compilation: Compilations | None = None
    #: The units set aside from ``kernels`` and ``throughput`` (not steady: compiling, cold, …),
    #: with their state; empty when every unit is steady, none is, or with ``--step``.
    set_aside_units: dict[str, str] = field(default_factory=dict)
    #: Every unit's timeline, only when asked for (``Session.report(timelines=True)``, for a
    #: renderer that draws them); None otherwise.
    timelines: Timelines | None = None
    decomposition: Decomposition | None = None
    #: A serving or generation loop's phases, tokens and cost per token (every unit, also with
    #: ``--step``); None for any other trace and in a report made before it existed.
    serving: Serving | None = None
    #: CUDA-graph replays and where their ops came from (every unit, also with ``--step``); None in a
    #: report made before it existed.
    graphs: GraphReplays | None = None

    def __repr__(self) -> str:
        """One line: the file, its steps and median step wall, what limits it, the findings' rules
        (``<Report mlp_eager.json.gz: 3 steps, median 1.50 ms, limit dispatch 76%, 1 finding: unfused_pointwise>``);
        in a notebook the report shows as HTML instead (:mod:`tracekit.results.display`)."""
        name = short_name(self.facts.path.replace("\\", "/").rsplit("/", 1)[-1])
        parts = [f"step {self.selected_step}" if self.selected_step is not None
                 else f"{self.steps.height} step{'s' if self.steps.height != 1 else ''}"]
        wall = self._median_wall_ns()
        if wall is not None:
            parts.append(f"median {wall / 1e6:.2f} ms" if self.selected_step is None else f"{wall / 1e6:.2f} ms")
        found = self.decomposition
        if found is not None and found.limit is not None:
            parts.append(f"limit {found.limit} {100 * (found.limit_share or 0):.0f}%")
        count = len(self.findings)
        rules = list(dict.fromkeys(f.rule for f in self.findings))
        parts.append(f"{count} finding{'s' if count != 1 else ''}" + (f": {short_list(rules)}" if rules else ""))
        return f"<Report {name}: {', '.join(parts)}>"

    def _median_wall_ns(self) -> float | None:
        """The median wall of the steady units (the selected one's with ``--step``), else of the steps' CPU spans."""
        found = self.decomposition
        if found is not None and found.units.height:
            units = found.units if self.selected_step is not None else found.units.filter(pl.col("steady"))
            if units.height:
                return float(units["wall_ns"].median())
        return float(self.steps["dur_ns"].median()) if self.steps.height else None


def check_step(trace: Trace, step: int | None) -> None:
    """Raise :class:`UsageError` naming the trace's steps when ``step`` is not one of them
    (``trace.steps``: its ProfilerSteps, or its units after :meth:`~tracekit.analyses.units.Units.apply`)."""
    numbers = trace.steps["number"].to_list()
    if step is not None and step not in numbers:
        available = ", ".join(str(n) for n in numbers) or "none"
        raise UsageError(f"step {step} is not in {trace.meta.path} (steps: {available})")


def build(bundle: pipeline.Analyses, *, step: int | None = None) -> Report:
    """The report of the trace whose analyses are ``bundle``; ``step`` restricts every table to that
    unit (``ProfilerStep#step``, or the unit numbered ``step`` of a trace without steps).

    The device ceilings (``--ceiling``) and the units (``--unit``) are the bundle's
    (:func:`tracekit.analyses.pipeline.run`); HolisticTraceAnalysis' figures (``--hta``) and the
    timelines are added by :meth:`tracekit.session.Session.report`, on top of this report.
    """
    trace = bundle.trace
    check_step(trace, step)
    numbers = trace.steps["number"].to_list()
    attributed, gaps, trips = bundle.attribution, bundle.launch_gaps, bundle.round_trips
    aside = _set_aside_units(bundle.steps) if step is None else {}
    steady_only = pl.col("step").is_null() | ~pl.col("step").is_in([int(n) for n in aside])
    rates = throughput.analyze(trace, attributed, _in_step(trips.traffic, step).filter(steady_only),
                               ceilings_override=bundle.ceilings_override)
    ops = _in_step(bundle.ops, step)
    gpu = _in_step(attributed.gpu, step)
    step_table = _in_step(steps_analysis.table(bundle.steps), step, "number")
    path_step = step if step is not None else (numbers[-1] if numbers else None)
    path_rows = gpu.filter(pl.col("step") == path_step) if path_step is not None else gpu
    paths = dispatch.launch_paths(path_rows)
    truncated = path_step is None and paths.height > MAX_PATH_ROWS_WITHOUT_STEPS
    if truncated:
        paths = paths.head(MAX_PATH_ROWS_WITHOUT_STEPS)
    preops = _in_step(bundle.compile_preops, step)
    meta = trace.meta
    facts = Facts(
        path=meta.path, size_bytes=meta.size_bytes, event_count=meta.event_count,
        vendor=meta.vendor, time_format=meta.time_format,
        devices=[
            {"id": d.id, "name": d.name, "compute_capability": d.compute_capability,
             "num_sms": d.num_sms, "total_global_mem": d.total_global_mem}
            for d in meta.devices
        ],
        versions=dict(sorted(meta.versions.items())), distributed=meta.distributed,
        step_numbers=numbers, graph_hashes=dispatch.graph_hashes(preops),
        unanalysed_activity=dict(meta.unanalysed_activity),
        unanalysed_families=_families(meta.unanalysed_activity), dropped_events=dict(meta.dropped_events),
        partial=meta.partial, annotations=meta.annotations,
    )
    # The findings of one unit come from the same bundle through the same rule engine.
    found = bundle.findings if step is None else pipeline.findings(bundle, step=step)
    return Report(
        findings=found, facts=facts, selected_step=step, path_step=path_step, paths_truncated=truncated,
        steps=step_table, kernels=kernels.analyze(gpu.filter(steady_only)), paths=paths,
        zero_kernel_ops=dispatch.zero_kernel_ops(ops), compile_preops=preops, units=bundle.units,
        orphans=attribution.orphans(attributed.gpu, attributed.launches),
        breakdown=_breakdown_in_step(bundle.breakdown, step),
        launch_gaps=_gaps_in_step(gaps, step), round_trips=_trips_in_step(trips, step),
        throughput=rates, attribution=attributed, memory=bundle.memory,
        compilation=bundle.compilation, set_aside_units=aside,
        decomposition=_decomposition_in_step(bundle.decomposition, step), serving=bundle.serving,
        graphs=attributed.graphs,
    )


def _decomposition_in_step(found: Decomposition, step: int | None) -> Decomposition:
    """Every unit's decomposition, or unit ``step``'s only, with that unit's limit as the limit."""
    if step is None:
        return found
    return decomposition_mod.restrict(found, step)


def _set_aside_units(summary: pl.DataFrame) -> dict[str, str]:
    """``{unit number (text): state}`` of the units that are not steady, when some are and some are
    not (the tables then describe the steady state); else empty."""
    aside = summary.filter(~pl.col("steady"))
    if aside.height == 0 or aside.height == summary.height:
        return {}
    return {str(n): state for n, state in zip(aside["step"].to_list(), aside["state"].to_list())}


def _in_step(frame: pl.DataFrame, step: int | None, column: str = "step") -> pl.DataFrame:
    return frame if step is None else frame.filter(pl.col(column) == step)


def _gaps_in_step(gaps: launch_gaps.LaunchGapsReport, step: int | None) -> launch_gaps.LaunchGapsReport:
    """The launch-gap report restricted to one step (percentiles and idle by cause recomputed)."""
    if step is None:
        return gaps
    activity, step_gaps = _in_step(gaps.per_activity, step), _in_step(gaps.gaps, step)
    return replace(
        gaps, per_activity=activity, gaps=step_gaps,
        per_step=_in_step(gaps.per_step, step),
        distributions=launch_gaps.distributions(activity),
        queue_delay_ns=launch_gaps.percentiles(activity["queue_delay_ns"]),
        idle_by_cause=launch_gaps.idle_by_cause(step_gaps),
    )


def _breakdown_in_step(found: breakdown_mod.Breakdown, step: int | None) -> breakdown_mod.Breakdown:
    """The whole-trace rows and those of unit ``step`` only (all units without ``step``)."""
    if step is None:
        return found
    keep = (pl.col("scope") == "trace") | (pl.col("unit") == step)
    return replace(found, shares=found.shares.filter(keep), streams=found.streams.filter(keep),
                   overlap=found.overlap.filter(keep))


def _trips_in_step(trips: round_trips.RoundTripReport, step: int | None) -> round_trips.RoundTripReport:
    if step is None:
        return trips
    return replace(trips, traffic=_in_step(trips.traffic, step), tensors=_in_step(trips.tensors, step),
                   tensor_kernels=_in_step(trips.tensor_kernels, step),  # row for row with tensors
                   bytes_per_step=_in_step(trips.bytes_per_step, step))


def _families(by_category: dict[str, int]) -> dict[str, int]:
    """Device activity tracekit does not analyse, by device family (MTIA, HPU, …), most first."""
    families: dict[str, int] = {}
    for cat, n in by_category.items():
        family = UNANALYSED.get(cat, (cat, ""))[0]
        families[family] = families.get(family, 0) + n
    return dict(sorted(families.items(), key=lambda kv: (-kv[1], kv[0])))
