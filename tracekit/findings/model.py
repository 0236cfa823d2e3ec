"""What a finding rule is, what it reads and what it yields.

Contract: a :class:`Rule` is one row of the rule table (id, title, severity, the evidence it reads,
its thresholds — each a named constant in the rule's module with the reason it has that value —
and the one-line fix with the PyTorch knob). Its detector reads a :class:`Context` (built once per
trace by :func:`tracekit.findings.engine.analyze`) and returns :class:`Finding` rows made by
:meth:`Rule.finding`, each with :class:`Evidence`.

A :class:`Finding` carries ``rule``, ``title``, ``severity`` (``warning``: costs time every step and
has a known fix; ``info``: worth knowing, not a defect on its own), ``steps`` (the unit numbers it
occurs in), ``evidence`` (:class:`Evidence` rows), ``cost_ns_per_step`` (measured: GPU or CPU time the
problem takes per step; for a one-time cost — a cold step, a recompile — the cost itself, with
``quantities["once"]`` true), ``saving_ns_per_step`` with ``saving_basis`` (projected from the trace: bytes ÷
the device's bandwidth, a copy's time against pinned bandwidth, launch overhead × launches…; None when
the trace cannot price it), ``fix`` and ``thresholds`` (the rule's constants, printed with it).

``resource`` names what the fix would shrink (:data:`RESOURCES`), and the engine prices that on the
critical path (:mod:`tracekit.findings.wall`): ``saving_wall_ns`` is what the step's wall time would
lose, with ``wall_basis`` saying how it was projected, and ``severity`` follows it (a rule whose table
row says ``warning`` yields a warning only when the wall saving clears the floor; ``info`` else).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl

from tracekit.trace import Trace

Value = int | float | str | bool | None
#: Severities, most severe first (the engine's sort order).
SEVERITIES = ("warning", "info")
#: What a finding's saving shrinks, which decides how it reaches the wall (:mod:`tracekit.findings.wall`):
#: ``gpu`` GPU time; ``host`` the host's own work (dispatch, data loading, op-free Python);
#: ``wall`` wall time measured directly (GPU idle a stall or a sync caused); ``once`` a one-time cost.
RESOURCES = ("gpu", "host", "wall", "once")


@dataclass(frozen=True)
class Evidence:
    """One thing a finding saw: ``role`` (op | kernel | launch | memcpy | step | tensor), its
    ``name``, the unit ``step`` and ``ts_ns`` of its first occurrence among the steady steps,
    ``count_per_step``, ``dur_ns_per_step`` (GPU time for kernels/copies, host time for launch
    calls and ops), ``bytes_per_step`` where known and ``detail`` (a shape, a sync call, a direction)."""

    role: str
    name: str
    step: int | None = None
    ts_ns: int | None = None
    count_per_step: float | None = None
    dur_ns_per_step: int | None = None
    bytes_per_step: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Finding:
    """One problem found (module docstring)."""

    rule: str
    title: str
    severity: str
    steps: tuple[int, ...]
    evidence: tuple[Evidence, ...]
    cost_ns_per_step: int
    saving_ns_per_step: int | None
    saving_basis: str
    fix: str
    thresholds: Mapping[str, Value] = field(default_factory=dict)
    quantities: Mapping[str, Value] = field(default_factory=dict)
    resource: str = "gpu"
    saving_wall_ns: int | None = None
    wall_basis: str = ""


@dataclass(frozen=True)
class Rule:
    """A row of the rule table: its ``id`` (what ``--fail-if finding:ID`` names), what it looks for
    (``title``), how bad (``severity``), what it reads (``needs``), its ``thresholds`` (name →
    value; the reasons are the constants' comments in the rule's module) and the ``fix``."""

    id: str
    title: str
    severity: str
    needs: str
    thresholds: Mapping[str, Value]
    fix: str

    def finding(self, steps: list[int], evidence: list[Evidence], cost: float, saving: float | None,
                basis: str, *, resource: str, **quantities: Value) -> Finding:
        """A :class:`Finding` of this rule: ``cost`` and ``saving`` (ns per step of ``resource``,
        :data:`RESOURCES`) rounded, a negative saving taken as none saved, ``steps`` sorted; not yet
        priced on the wall (the engine does that)."""
        if resource not in RESOURCES:
            raise ValueError(f"resource {resource!r} is not one of {RESOURCES}")
        return Finding(rule=self.id, title=self.title, severity=self.severity, resource=resource,
                       steps=tuple(sorted(int(s) for s in steps)), evidence=tuple(evidence),
                       cost_ns_per_step=int(round(cost)),
                       saving_ns_per_step=None if saving is None else int(round(max(saving, 0))),
                       saving_basis=basis, fix=self.fix, thresholds=dict(self.thresholds),
                       quantities=quantities)


@dataclass(frozen=True)
class Context:
    """What every detector reads: the trace, its attributed GPU work and launch calls tagged with
    their unit, the step summary, the steady steps, round-trip tensors and traffic, compile pre-ops,
    the device's ceilings, and (when passed) the compile analysis."""

    trace: Trace
    gpu: pl.DataFrame
    launches: pl.DataFrame
    summary: pl.DataFrame
    steady: list[int]
    tensors: pl.DataFrame
    traffic: pl.DataFrame
    compile_preops: pl.DataFrame
    ceilings: Mapping[str, Any] | None
    compilations: Any = None
    #: The GPU work of the steady steps (``gpu`` filtered once).
    steady_gpu: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: The trace's :class:`tracekit.analyses.memory.MemoryReport` when the caller has it (the report
    #: does): the out-of-memory rule reads it instead of building the op tree again.
    memory: Any = None
    #: The op tree's ops (:class:`tracekit.analyses.op_tree.OpTree` ``ops``: the trace's ops with
    #: ``parent_idx``, ``depth``, ``cpu_op``, ``top_op``… and ``step``): what a rule walks to find
    #: the spans around an op, by parent links instead of by time.
    tree_ops: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: Each unit's CPU span and GPU idle by host state (:class:`tracekit.analyses.decomposition.Decomposition`):
    #: what the wall prices and the stall/overhead rules read.
    decomposition: Any = None
    #: Every memcpy with its decoded ``direction``, ``src``, ``dst`` (decoded once, on these rows only:
    #: parsing every activity's ``decoded`` JSON per rule was most of the engine's time on big traces).
    memcpys: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def n(self) -> int:
        return max(len(self.steady), 1)

    def in_steady(self, frame: pl.DataFrame, column: str = "step") -> pl.DataFrame:
        return frame.filter(pl.col(column).is_in(self.steady))


class Analysed(Protocol):
    """What the engine reads of the pipeline's bundle (:class:`tracekit.analyses.pipeline.Analyses`,
    which sits above this room and so is named here by shape): the trace with its units as steps,
    the per-unit summary, the attribution, round trips, compile pre-ops and compilations, memory,
    the device's ceilings, the step decomposition and the op tree's ops."""

    trace: Trace
    steps: pl.DataFrame
    attribution: Any
    round_trips: Any
    compile_preops: pl.DataFrame
    compilation: Any
    memory: Any
    ceilings: Mapping[str, Any] | None
    decomposition: Any
    ops: pl.DataFrame


class RuleModule(Protocol):
    """A module of :mod:`tracekit.findings.detectors`: one rule's table row and its detector."""

    RULE: Rule

    def detect(self, context: Context) -> list[Finding]:
        """The rule's findings in ``context`` (none, or one)."""
        ...
