"""Regression gates for ``tracekit diff A B --fail-if EXPR``.

Grammar (one expression per ``--fail-if``, repeatable; spaces are allowed anywhere)::

    EXPR   := METRIC OP VALUE
    METRIC := gpu_time | cpu_time | idle_time | kernels | launches | round_trip_bytes
              | round_trip_tensors | memsets | memcpys | preop_tax | host_sync | graph_launches
              | peak_memory
    OP     := ">" | ">=" | "<" | "<="
    VALUE  := [+|-] NUMBER [UNIT]
    UNIT   := "%"                                   (relative to A, any metric)
            | "ns" | "us" | "µs" | "ms" | "s"        (time metrics: gpu_time, cpu_time, idle_time, preop_tax,
                                                     host_sync)
            | "B" | "KB" | "MB" | "GB" | "KiB" | "MiB" | "GiB"   (round_trip_bytes, peak_memory)
            | nothing                               (counts; or 0 for any metric)

Every metric is a per-step figure (the median over each trace's profiled steps) and the gate tests
the change ``B - A``: ``gpu_time>+5%`` fails when B's GPU time per step is more than 5 % above A's;
``kernels>+0`` when B launches any more kernels per step; ``round_trip_bytes>+0`` when any more
bytes round-trip through memory per step; ``cpu_time>+20us`` when CPU dispatch grew by more than
20 µs per step; ``gpu_time<-10%`` when B is more than 10 % *faster* (to catch a suspicious win).

A gate fails only when its threshold is exceeded **and** the change is outside the step-to-step
noise (see :mod:`tracekit.diff.compare`); an exceeded threshold within noise is reported, not
failed. So a trace compared with itself passes every gate. Metrics: ``gpu_time`` GPU busy time,
``cpu_time`` CPU dispatch time, ``idle_time`` GPU idle inside the step, ``kernels`` kernel count,
``launches`` launch calls, ``round_trip_bytes``/``round_trip_tensors`` intermediate tensors written
to and read back from HBM, ``memsets``/``memcpys`` hidden memory operations, ``preop_tax`` the CPU
time of torch.compile's wrappers, ``host_sync`` the time the CPU was blocked in host syncs
(``aten::item``, ``cudaStreamSynchronize``, device-to-host copies: ``host_sync>+1ms``),
``graph_launches`` CUDA-graph launch calls (``graph_launches<-0`` fails when replays vanished). A gate on a metric the traces cannot provide (e.g. ``cpu_time``
with ``--unit``) is a usage error (exit 2). Exit status of ``tracekit diff``: 0 all gates pass,
1 one or more failed (the output lists which), 2 bad input.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from tracekit.errors import UsageError

TIME_METRICS = ("gpu_time", "cpu_time", "idle_time", "preop_tax", "host_sync")
BYTE_METRICS = ("round_trip_bytes", "peak_memory")
COUNT_METRICS = ("kernels", "launches", "round_trip_tensors", "memsets", "memcpys", "graph_launches")
METRICS = TIME_METRICS[:3] + ("kernels", "launches", "round_trip_bytes", "round_trip_tensors",
                              "memsets", "memcpys", "preop_tax", "host_sync", "graph_launches",
                              "peak_memory")
#: Why a metric is missing when the traces cannot give it (else "not measured").
MISSING = {"peak_memory": "a trace has no [memory] events: record them with profile_memory=True"}
_TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_BYTE_UNITS = {"b": 1, "kb": 1_000, "mb": 1_000_000, "gb": 1_000_000_000, "kib": 1024,
               "mib": 1024 ** 2, "gib": 1024 ** 3}
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def size_bytes(text: str) -> int | None:
    """``"2GiB"``, ``"512 MB"``, ``"100"`` as bytes (the units of byte metrics); None if not a size."""
    m = _SIZE.match(text)
    scale = _BYTE_UNITS.get(m.group(2).lower()) if m and m.group(2) else 1
    return round(float(m.group(1)) * scale) if m and scale else None


_EXPR = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|>|<)\s*([+-]?)\s*(\d+(?:\.\d+)?)\s*([%a-zA-Zµ]*)\s*$")


@dataclass(frozen=True)
class Gate:
    """A parsed ``--fail-if`` expression; ``value`` is in % when ``relative`` else in base units."""

    text: str
    metric: str
    op: str
    value: float
    relative: bool


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    observed: float | None  # delta in % when relative, else in base units (ns, bytes, count)
    exceeded: bool
    within_noise: bool

    @property
    def failed(self) -> bool:
        return self.exceeded and not self.within_noise


def parse(text: str, *, metrics: tuple[str, ...] = METRICS, time_metrics: tuple[str, ...] = TIME_METRICS,
          example: str = "gpu_time>+5%") -> Gate:
    """Parse one expression; a malformed one raises :class:`UsageError` naming the problem.
    ``metrics``/``time_metrics``: the names a command accepts (``tracekit compare`` has its own)."""
    m = _EXPR.match(text)
    if not m:
        raise UsageError(f"--fail-if {text!r}: expected METRIC OP VALUE, e.g. '{example}'")
    metric, op, sign, number, unit = m.groups()
    if metric not in metrics:
        raise UsageError(f"--fail-if {text!r}: unknown metric {metric!r} (choose from {', '.join(metrics)})")
    value = float(number) * (-1 if sign == "-" else 1)
    if unit == "%":
        return Gate(text.strip(), metric, op, value, True)
    if metric in time_metrics:
        scale = _TIME_UNITS.get(unit)
        if scale is None and not (unit == "" and value == 0):
            raise UsageError(f"--fail-if {text!r}: {metric} needs a time unit (ns, us, ms, s) or %")
    elif metric in BYTE_METRICS:
        scale = _BYTE_UNITS.get(unit.lower()) if unit else 1
        if scale is None:
            raise UsageError(f"--fail-if {text!r}: {metric} takes B, KB, MB, GB, KiB, MiB, GiB or %")
    else:
        if unit:
            raise UsageError(f"--fail-if {text!r}: {metric} is a count; give a plain number or %")
        scale = 1
    return Gate(text.strip(), metric, op, value * (scale or 1), False)


def evaluate(gates: list[Gate], diff) -> list[GateResult]:
    """Test each gate against ``diff`` (a :class:`tracekit.diff.compare.Diff`)."""
    results = []
    for gate in gates:
        q = diff.quantities.get(gate.metric)
        if q is None:
            reason = diff.unavailable.get(gate.metric, MISSING.get(gate.metric, "not measured"))
            raise UsageError(f"--fail-if {gate.text!r}: {gate.metric} is not available ({reason})")
        if gate.relative:
            observed = q.delta_pct if q.delta_pct is not None else (
                0.0 if q.delta == 0 else math.copysign(math.inf, q.delta))
        else:
            observed = q.delta
        results.append(GateResult(gate, observed, bool(_OPS[gate.op](observed, gate.value)), q.within_noise))
    return results
