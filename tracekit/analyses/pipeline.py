"""The one place a trace's analyses run, in order, into one bundle that everything downstream reads.

Contract: :func:`run` takes a loaded :class:`~tracekit.trace.Trace` and returns a frozen
:class:`Analyses` — the report (:func:`tracekit.results.report.build`), the per-unit profile
(:func:`tracekit.analyses.profile.build`), the timelines, ``diff`` and ``check`` all read it and
never go back to the trace's events to analyse them again. The stages, in order:

1. attribution (:mod:`tracekit.analyses.attribution`): every GPU activity to its launch call and ops;
2. units (:mod:`tracekit.analyses.units`): the trace's ProfilerSteps, the spans named by ``unit``
   (``--unit``), or the iteration units found without steps; the trace's ``steps`` become them;
3. compilations (:mod:`tracekit.analyses.compilations`): GPU work launched inside compile work
   (autotuning) leaves the workload here, before any figure is taken;
4. the per-unit summary (:func:`tracekit.analyses.steps.summarize`), with each unit's state, and
   the step decomposition (:mod:`tracekit.analyses.decomposition`) its verdicts are read against;
5. launch gaps, 6. round trips, 7. the GPU time breakdown, 8. memory, 9. host syncs, and a serving
   loop's phases and tokens (:mod:`tracekit.analyses.serving`);
10. the findings (:mod:`tracekit.findings`), once, from the bundle itself.

Round trips (the longest stage) need only stages 1–3: a second thread runs them while this one
runs stages 4, 5, 7, 8 and 9. Polars releases the GIL inside its calls, so the two overlap
(``analyse()`` of the 1 GB benchmark trace on 2 cores, 6 alternating runs: median 2.11 s all in one
thread, 2.02 s so).

:func:`basis` runs stages 1–4 only (what a per-rank summary needs, :mod:`tracekit.ranks`);
:func:`findings` prices the findings of one unit (``report --step``) from a bundle, through the same
rule engine with the same inputs; :func:`with_ceilings` gives a bundle's findings under other
device ceilings without running the analyses again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from tracekit import devices
from tracekit import findings as findings_engine
from tracekit.analyses import attribution as attribution_mod
from tracekit.analyses import breakdown as breakdown_mod
from tracekit.analyses import compilations as compilations_mod
from tracekit.analyses import decomposition as decomposition_mod
from tracekit.analyses import dispatch, launch_gaps as launch_gaps_mod, memory as memory_mod
from tracekit.analyses import round_trips as round_trips_mod
from tracekit.analyses import serving as serving_mod
from tracekit.analyses import steps as steps_analysis
from tracekit.analyses import syncs as syncs_mod
from tracekit.analyses import units as units_mod
from tracekit.analyses.graph_replays import Companion
from tracekit.analyses.throughput import device_name
from tracekit.errors import UsageError
from tracekit.execution_trace import ExecutionTrace
from tracekit.findings import Finding
from tracekit.trace import Trace


@dataclass(frozen=True)
class Basis:
    """Stages 1–4 of the pipeline: what every later stage starts from.

    Attributes
    ----------
    trace : tracekit.trace.Trace
        The trace with its unit windows as its ``steps`` (:meth:`tracekit.analyses.units.Units.apply`).
    attribution : tracekit.analyses.attribution.Attribution
        Its ``gpu`` is the workload: ``step`` is the unit holding the launch call, and GPU work
        launched inside compile work (autotuning) is left out (it is in ``compilation``).
    units : tracekit.analyses.units.Units
        What the trace's units are, and why.
    compilation : tracekit.analyses.compilations.Compilations
        Compilations, autotuning set aside, graph records, JITs, each unit's compile flags, and the
        steady state per call (``steady``).
    steps : DataFrame
        The per-unit summary (:data:`tracekit.analyses.steps.SUMMARY_SCHEMA`): spans, GPU busy and
        idle, dispatch, verdict, state.
    """

    trace: Trace
    attribution: attribution_mod.Attribution
    units: units_mod.Units
    compilation: compilations_mod.Compilations
    steps: pl.DataFrame


@dataclass(frozen=True)
class Analyses(Basis):
    """Every analysis of one trace on one choice of units (module docstring); times Int64 ns.

    Attributes
    ----------
    trace, attribution, units, compilation, steps
        Stages 1–4 (:class:`Basis`).
    launch_gaps : tracekit.analyses.launch_gaps.LaunchGapsReport
        Per-unit wall, dispatch, busy, idle and verdict (``per_step``), idle gaps with their cause.
    round_trips : tracekit.analyses.round_trips.RoundTripReport
        Tensors written to HBM and read back in the same unit, and every kernel's traffic.
    breakdown : tracekit.analyses.breakdown.Breakdown
        GPU time per kernel class, library and stream, and communication overlap.
    memory : tracekit.analyses.memory.MemoryReport
        The ``[memory]`` events: peaks per unit, blocks alive at the peak, out-of-memory events.
    host_syncs : tracekit.analyses.syncs.HostSyncs
        The host's blocked time by what blocked it, and graph launch calls, per unit.
    ops : DataFrame
        The op tree's ops (:class:`tracekit.analyses.op_tree.OpTree`'s ``ops``) plus ``step i64?``:
        the unit holding each op's start.
    compile_preops : DataFrame
        torch.compile's wrappers per unit (:data:`tracekit.analyses.dispatch.PREOP_SCHEMA`).
    ceilings : dict or None
        The device's ceilings (:func:`tracekit.devices.ceilings_for` of the device that ran the
        most kernels, with ``ceilings_override`` applied); None for a device not in the table.
    ceilings_override : dict or None
        The ceilings the caller replaced (``--ceiling``: ``{"hbm_gbps": 4300}``), as given.
    decomposition : tracekit.analyses.decomposition.Decomposition
        Each unit's CPU span by host state (blocked, data, dispatch, op-free), its GPU idle time by
        what the host did meanwhile, and its limit: what findings are priced on and the verdict reads.
    findings : tuple of tracekit.findings.Finding
        What is wrong over the steady units, warnings first, priced with ``ceilings`` and on the wall
        through ``decomposition``.
    serving : tracekit.analyses.serving.Serving or None
        A serving or generation loop's iterations by phase, their tokens and cost per token; None
        for any other trace.
    """

    launch_gaps: launch_gaps_mod.LaunchGapsReport
    round_trips: round_trips_mod.RoundTripReport
    breakdown: breakdown_mod.Breakdown
    memory: memory_mod.MemoryReport
    host_syncs: syncs_mod.HostSyncs
    ops: pl.DataFrame
    compile_preops: pl.DataFrame
    ceilings: dict[str, Any] | None
    decomposition: decomposition_mod.Decomposition
    ceilings_override: dict[str, Any] | None = None
    findings: tuple[Finding, ...] = field(default=())
    serving: serving_mod.Serving | None = None


def basis(trace: Trace, *, unit: str | None = None, companion: Companion | None = None) -> Basis:
    """Stages 1–4 of ``trace``: attribution, units (``unit``: a span name to use, as ``--unit``),
    compilations and the per-unit summary."""
    scoped, attributed, found, compiled = _scope(trace, unit, companion)
    summary, compiled = _summarize(scoped, attributed, found, compiled)
    summary, _ = _decompose(scoped, attributed, summary)
    return Basis(trace=scoped, attribution=attributed, units=found, compilation=compiled, steps=summary)


def run(trace: Trace, *, execution_trace: ExecutionTrace | None = None, unit: str | None = None,
        ceilings: dict[str, Any] | None = None, companion: Companion | None = None) -> Analyses:
    """Every analysis of ``trace`` (module docstring), then its findings.

    Parameters
    ----------
    trace
        The loaded trace.
    execution_trace
        Its execution trace, which makes round-trip links exact (None: inferred from shapes).
    unit
        A span name to use as the units (``--unit``); None: the trace's own (ProfilerSteps, else found).
    ceilings
        Device ceilings to replace (``{"hbm_gbps": 4300, "bf16_tflops": 790}``, ``--ceiling``).
    companion
        A companion trace for CUDA-graph replays (``--graph-companion``,
        :func:`tracekit.analyses.attribution.companion_of`).

    Raises
    ------
    tracekit.errors.UsageError
        When ``unit`` names no span of the trace, or ``ceilings`` names an unknown ceiling.
    """
    scoped, attributed, found, compiled = _scope(trace, unit, companion)
    with ThreadPoolExecutor(max_workers=1) as pool:
        trips = pool.submit(round_trips_mod.analyze, scoped, attributed, execution_trace=execution_trace)
        summary, compiled = _summarize(scoped, attributed, found, compiled)
        summary, parts = _decompose(scoped, attributed, summary)
        gaps = launch_gaps_mod.analyze(scoped, attributed, summary=summary)
        split = breakdown_mod.analyze(attributed.gpu, summary)
        held = memory_mod.analyze(scoped, attributed.tree.ops)
        syncs = syncs_mod.analyze(scoped, attributed.gpu)
        ops = steps_analysis.tag_steps(attributed.tree.ops, scoped.steps)
        bundle = Analyses(
            trace=scoped, attribution=attributed, units=found, compilation=compiled, steps=summary,
            launch_gaps=gaps, round_trips=trips.result(), breakdown=split, memory=held, host_syncs=syncs,
            ops=ops, compile_preops=dispatch.compile_preops(ops),
            ceilings=_ceilings(scoped, attributed, ceilings), decomposition=parts, ceilings_override=ceilings,
            serving=serving_mod.analyze(scoped, attributed.gpu, summary))
    return replace(bundle, findings=findings(bundle))


def findings(bundle: Analyses, *, step: int | None = None) -> tuple[Finding, ...]:
    """The findings of ``bundle`` over its steady units, or over unit ``step`` only."""
    return findings_engine.analyze(bundle, step=step)


def with_ceilings(bundle: Analyses, ceilings: dict[str, Any] | None) -> Analyses:
    """``bundle`` under other device ceilings (``ceilings``: the overrides, None for the table's):
    only the ceilings and the findings they price change."""
    priced = replace(bundle, ceilings=_ceilings(bundle.trace, bundle.attribution, ceilings),
                     ceilings_override=ceilings)
    return replace(priced, findings=findings(priced))


def _scope(trace: Trace, unit: str | None, companion: Companion | None = None) -> tuple[
        Trace, attribution_mod.Attribution, units_mod.Units, compilations_mod.Compilations]:
    """Stages 1–3: the trace with its units as steps, its attribution (the workload only), its
    units and its compilations."""
    attributed = attribution_mod.analyze(trace, companion=companion)
    found = units_mod.detect(trace, attributed.gpu, unit)
    if found.kind != "ProfilerStep":
        attributed = replace(attributed, gpu=found.tag(attributed.gpu))
    scoped = found.apply(trace)
    compiled = compilations_mod.analyze(scoped, attributed.gpu)
    # Autotuning benchmarks and other GPU work a compilation launched are not the workload.
    attributed = replace(attributed, gpu=compiled.workload(attributed.gpu))
    return scoped, attributed, found, compiled


def _summarize(scoped: Trace, attributed: attribution_mod.Attribution, found: units_mod.Units,
               compiled: compilations_mod.Compilations) -> tuple[pl.DataFrame, compilations_mod.Compilations]:
    """Stage 4: the per-unit summary, and the compilations with the steady state per call."""
    summary = steps_analysis.summarize(scoped, attributed.gpu, compile_marks=compiled.units, partial=found.partial)
    return summary, replace(compiled, steady=compilations_mod.steady(summary))


def _decompose(scoped: Trace, attributed: attribution_mod.Attribution,
               summary: pl.DataFrame) -> tuple[pl.DataFrame, decomposition_mod.Decomposition]:
    """The step decomposition, and the summary with its verdicts read against it
    (:func:`tracekit.analyses.steps.refine_verdict`)."""
    parts = decomposition_mod.analyze(scoped, attributed.gpu, summary)
    exposed = breakdown_mod.exposed_per_unit(attributed.gpu)
    return steps_analysis.refine_verdict(summary, parts.units, exposed), parts


def _ceilings(trace: Trace, attributed: attribution_mod.Attribution,
              override: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ceilings of the device that ran the trace's kernels, ``override`` applied (what
    :func:`tracekit.analyses.throughput.analyze` rates against too)."""
    name = device_name(trace, attributed)
    try:
        return devices.apply_overrides(devices.ceilings_for(name), override, device=name or "unknown")
    except ValueError as err:  # an unknown override key: the user's typo
        raise UsageError(str(err)) from None
