"""Regression gates: ``tracekit diff A B --fail-if EXPR`` and ``tracekit compare TRACE… --fail-if EXPR``.

Contract: one grammar (:func:`parse`) for both commands, each command's metrics as data
(:data:`DIFF_GATES`, :data:`COMPARE_GATES`: a metric's name, its unit, the figure it reads), and
one :class:`GateResult` for a gate tested on a diff (:func:`evaluate`) or a comparison
(:func:`evaluate_comparison`). A malformed gate or one the inputs cannot give raises
:class:`~tracekit.errors.UsageError` (exit 2).

Grammar (one expression per ``--fail-if``, repeatable; spaces are allowed anywhere)::

    EXPR   := METRIC OP VALUE
    METRIC := a name of the command's table (diff: gpu_time | cpu_time | idle_time | kernels | launches
              | round_trip_bytes | round_trip_tensors | memsets | memcpys | preop_tax | host_sync
              | graph_launches | peak_memory; compare: recompiles | compilations | graph_records
              | compile_time | jit_time | gpu_time | cpu_time | break_even)
    OP     := ">" | ">=" | "<" | "<="
    VALUE  := [+|-] NUMBER [UNIT]
    UNIT   := "%"                                   (relative to A / the baseline, any metric)
            | "ns" | "us" | "µs" | "ms" | "s"        (time metrics: unit "ns" in the table)
            | "B" | "KB" | "MB" | "GB" | "KiB" | "MiB" | "GiB"   (byte metrics: unit "bytes")
            | nothing                               (counts; or 0 for any metric)

**tracekit diff.** Every metric is a per-step figure (the median over each trace's profiled
steps) and the gate tests the change ``B - A``: ``gpu_time>+5%`` fails when B's GPU time per step
is more than 5 % above A's; ``kernels>+0`` when B launches any more kernels per step;
``round_trip_bytes>+0`` when any more bytes round-trip through memory per step;
``cpu_time>+20us`` when CPU dispatch grew by more than 20 µs per step; ``gpu_time<-10%`` when B is
more than 10 % *faster* (to catch a suspicious win).

A gate fails only when its threshold is exceeded **and** the change is outside the step-to-step
noise (see :mod:`tracekit.results.diff`); an exceeded threshold within noise is reported, not
failed. So a trace compared with itself passes every gate. Metrics: ``gpu_time`` GPU busy time,
``cpu_time`` CPU dispatch time, ``idle_time`` GPU idle inside the step, ``kernels`` kernel count,
``launches`` launch calls, ``round_trip_bytes``/``round_trip_tensors`` intermediate tensors written
to and read back from HBM, ``memsets``/``memcpys`` hidden memory operations, ``preop_tax`` the CPU
time of torch.compile's wrappers, ``host_sync`` the time the CPU was blocked in host syncs
(``aten::item``, ``cudaStreamSynchronize``, device-to-host copies: ``host_sync>+1ms``),
``graph_launches`` CUDA-graph launch calls (``graph_launches<-0`` fails when replays vanished),
``peak_memory`` the peak of memory allocated. A gate on a metric the traces cannot provide (e.g.
``cpu_time`` with ``--unit``) is a usage error (exit 2). Exit status of ``tracekit diff``: 0 all
gates pass, 1 one or more failed (the output lists which), 2 bad input.

**tracekit compare.** Each metric is a per-trace figure (:class:`~tracekit.diff.side_by_side.Row`;
times in ns) tested on every trace; with ``%`` the change against the baseline, the baseline itself
left out. ``recompiles>0`` fails when any trace recompiled, ``compile_time>2s`` when any spent more
than 2 s compiling, ``break_even>1000`` when a trace needs more than 1000 calls to pay off (never
counts as infinite). A failed gate names the traces that exceed it; there is no noise test.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit.results.diff import QUANTITIES
from tracekit.errors import UsageError
from tracekit.results.gates import Gate, GateResult

if TYPE_CHECKING:
    from tracekit.results.diff import Diff
    from tracekit.results.comparison import Comparison


@dataclass(frozen=True)
class Metric:
    """One ``--fail-if`` metric of a command.

    Attributes
    ----------
    name : str
        What an expression names (``gpu_time``).
    unit : str
        ``"ns"`` | ``"bytes"`` | ``"count"``: which units VALUE takes besides ``%``.
    reads : str
        The figure it tests: a :class:`~tracekit.results.diff.Diff` quantity key, or a
        :meth:`~tracekit.diff.side_by_side.Row.value` key.
    """

    name: str
    unit: str
    reads: str


@dataclass(frozen=True)
class GateMetrics:
    """The metrics one command's ``--fail-if`` accepts.

    Attributes
    ----------
    metrics : tuple of Metric
        In the order a usage error lists them.
    example : str
        An expression a usage error shows.
    """

    metrics: tuple[Metric, ...]
    example: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def get(self, name: str) -> Metric | None:
        """The metric called ``name``; None when the command has none."""
        return next((m for m in self.metrics if m.name == name), None)


#: ``tracekit diff``: the diff's headline quantities (:data:`tracekit.results.diff.QUANTITIES`).
DIFF_GATES = GateMetrics(tuple(Metric(key, unit, key) for key, _label, unit, _column in QUANTITIES), "gpu_time>+5%")
#: ``tracekit compare``: per-trace figures of a comparison's rows.
COMPARE_GATES = GateMetrics((
    Metric("recompiles", "count", "recompiles"), Metric("compilations", "count", "compilations"),
    Metric("graph_records", "count", "graph_records"), Metric("compile_time", "ns", "compile_ns"),
    Metric("jit_time", "ns", "jit_ns"), Metric("gpu_time", "ns", "gpu_ns"), Metric("cpu_time", "ns", "cpu_dispatch_ns"),
    Metric("break_even", "count", "break_even_calls"),
), "recompiles>0")
#: Metric names that take a time (in ns) or a size (in bytes), in either command; a name means the
#: same figure's unit in both.
TIME_METRICS = tuple(dict.fromkeys(m.name for t in (DIFF_GATES, COMPARE_GATES) for m in t.metrics if m.unit == "ns"))
BYTE_METRICS = tuple(dict.fromkeys(m.name for t in (DIFF_GATES, COMPARE_GATES) for m in t.metrics
                                   if m.unit == "bytes"))
#: Why a diff metric is missing when the traces cannot give it (else "not measured").
MISSING = {"peak_memory": "a trace has no [memory] events: record them with profile_memory=True",
           "prefill_token_time": "a trace has no prefill iterations with a token count (a serving loop's)",
           "decode_token_time": "a trace has no decode iterations with a token count (a serving loop's)"}
_TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
#: Byte units as ``--help`` shows them; read in any case.
BYTE_UNIT_NAMES = ("B", "KB", "MB", "GB", "KiB", "MiB", "GiB")
_BYTE_UNITS = dict(zip((n.lower() for n in BYTE_UNIT_NAMES), (1, 1_000, 1_000_000, 1_000_000_000, 1024,
                                                            1024 ** 2, 1024 ** 3)))
#: How ``--help`` calls the metrics of each unit, in the order it lists them.
_KINDS = (("ns", "Time metrics"), ("bytes", "Size metrics"), ("count", "Count metrics"))
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def grammar_help(metrics: GateMetrics, reference: str) -> str:
    """The grammar and ``metrics`` (a command's table) in a few sentences: what ``--fail-if``'s
    ``--help`` says (all a pip user has), written from the tables :func:`parse` reads, so it names
    exactly the metrics and units the parser accepts; ``reference``: what ``%`` is relative to."""
    units = {"ns": f"a time ({' '.join(_TIME_UNITS)})", "bytes": f"a size ({' '.join(BYTE_UNIT_NAMES)})",
             "count": "nothing for a count"}
    kinds = [(unit, title) for unit, title in _KINDS if any(m.unit == unit for m in metrics.metrics)]
    groups = [f"{title}: {', '.join(m.name for m in metrics.metrics if m.unit == unit)}." for unit, title in kinds]
    return (f"EXPR is METRIC OP VALUE, OP one of {' '.join(_OPS)}, VALUE a number (a sign optional) followed by % "
            f"(of {reference}) or by the metric's unit: {', '.join(units[unit] for unit, _ in kinds)}. "
            + " ".join(groups))


def size_bytes(text: str) -> int | None:
    """``"2GiB"``, ``"512 MB"``, ``"100"`` as bytes (the units of byte metrics); None if not a size."""
    m = _SIZE.match(text)
    scale = _BYTE_UNITS.get(m.group(2).lower()) if m and m.group(2) else 1
    return round(float(m.group(1)) * scale) if m and scale else None


_EXPR = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*([%a-zA-Zµ]*)\s*$")


def parse(text: str, metrics: GateMetrics = DIFF_GATES) -> Gate:
    """Parse one expression over ``metrics`` (the command's table); a malformed one raises
    :class:`UsageError` naming the problem."""
    m = _EXPR.match(text)
    if not m:
        raise UsageError(f"--fail-if {text!r}: expected METRIC OP VALUE, e.g. '{metrics.example}'")
    name, op, sign, number, unit = m.groups()
    metric = metrics.get(name)
    if metric is None:
        raise UsageError(f"--fail-if {text!r}: unknown metric {name!r} (choose from {', '.join(metrics.names)})")
    value = float(number) * (-1 if sign == "-" else 1)
    if unit == "%":
        return Gate(text.strip(), name, op, value, True)
    if metric.unit == "ns":
        scale = _TIME_UNITS.get(unit)
        if scale is None and not (unit == "" and value == 0):
            raise UsageError(f"--fail-if {text!r}: {name} needs a time unit (ns, us, ms, s) or %")
    elif metric.unit == "bytes":
        scale = _BYTE_UNITS.get(unit.lower()) if unit else 1
        if scale is None:
            raise UsageError(f"--fail-if {text!r}: {name} takes B, KB, MB, GB, KiB, MiB, GiB or %")
    else:
        if unit:
            raise UsageError(f"--fail-if {text!r}: {name} is a count; give a plain number or %")
        scale = 1
    return Gate(text.strip(), name, op, value * (scale or 1), False)


def _percent(value: float, reference: float) -> float:
    """``value`` as a change in % of ``reference``; a change from 0 is infinite (signed)."""
    if reference:
        return 100.0 * (value / reference - 1.0)
    return 0.0 if value == 0 else math.copysign(math.inf, value)


def evaluate(gates: Sequence[Gate], diff: Diff) -> list[GateResult]:
    """Test each gate (of :data:`DIFF_GATES`) against ``diff``."""
    results = []
    for gate in gates:
        q = diff.quantities.get(gate.metric)
        if q is None:
            reason = diff.unavailable.get(gate.metric, MISSING.get(gate.metric, "not measured"))
            raise UsageError(f"--fail-if {gate.text!r}: {gate.metric} is not available ({reason})")
        if gate.relative:
            observed = q.delta_pct if q.delta_pct is not None else _percent(q.b, q.a)
        else:
            observed = q.delta
        results.append(GateResult(gate, observed, bool(_OPS[gate.op](observed, gate.value)), q.within_noise))
    return results


def evaluate_comparison(gates: Sequence[Gate], comparison: Comparison) -> list[GateResult]:
    """Test each gate (of :data:`COMPARE_GATES`) on every trace of ``comparison`` (relative gates
    on every trace but the baseline)."""
    base = comparison.rows[comparison.baseline]
    results = []
    for gate in gates:
        metric = COMPARE_GATES.get(gate.metric)
        if metric is None:
            raise UsageError(f"--fail-if {gate.text!r}: {gate.metric} is not a metric of tracekit compare")
        values: list[tuple[str, float]] = []
        for row in comparison.rows:
            value = row.value(metric.reads)
            if value is None:
                continue
            if gate.relative:
                ref = base.value(metric.reads)
                if row.is_baseline or ref is None:
                    continue
                value = _percent(value, ref)
            values.append((row.label, value))
        if not values:
            raise UsageError(f"--fail-if {gate.text!r}: {gate.metric} is not measured in these traces")
        pick = max if gate.op in (">", ">=") else min
        failing = tuple(label for label, v in values if _OPS[gate.op](v, gate.value))
        results.append(GateResult(gate, pick(v for _, v in values), bool(failing), traces=failing))
    return results
