"""``tracekit compare``'s result: traces side by side, each with its one-off and steady figures and
its break-even against the baseline, and the verdict as data (built by
:func:`tracekit.diff.side_by_side.compare`, worded by the renderers)."""

from __future__ import annotations

from typing import ClassVar

import math
from dataclasses import dataclass

from tracekit.results.verdict import Verdict


@dataclass(frozen=True)
class BreakEven:
    """When trace X has paid for its one-off cost against the baseline (module docstring)."""

    reason: str
    calls: int | None
    extra_ns: int | None
    saving_ns: int | None


@dataclass(frozen=True)
class Row:
    """One trace's figures (times in ns; ``None`` where the trace cannot give them)."""

    label: str
    path: str
    is_baseline: bool
    shapes: int
    units: int
    steady_units: int
    set_aside: dict[str, int]
    compilations: int
    recompiles: int
    dynamic_promotions: int
    shape_changes: int
    compile_ns: int
    recompile_ns: int
    graph_records: int
    graph_replays: int
    record_ns: int
    jit_ns: int
    set_aside_count: int
    set_aside_gpu_ns: int
    gpu_ns: int | None
    cpu_dispatch_ns: int | None
    wall_ns: int | None
    break_even: BreakEven | None = None

    @property
    def one_off_ns(self) -> int:
        """What the trace paid once: compile CPU + graph records + first-call JIT."""
        return self.compile_ns + self.record_ns + self.jit_ns

    def value(self, key: str) -> float | None:
        """The figure ``key`` (a field, or ``break_even_calls``) as a number for a ``--fail-if`` gate
        (:data:`tracekit.diff.gates.COMPARE_GATES`); a break-even that never comes is infinite."""
        if key == "break_even_calls":
            be = self.break_even
            if be is None or be.reason in ("unmeasured",) or self.is_baseline:
                return None
            return math.inf if be.calls is None else float(be.calls)
        value = getattr(self, key)
        return None if value is None else float(value)


@dataclass(frozen=True)
class Comparison:
    """Traces side by side (module docstring).

    Attributes
    ----------
    rows : tuple of Row
        One per trace, in the order given.
    baseline : int
        The index of the baseline row.
    findings : tuple of Verdict
        The verdict as data, in the order it is worded (:data:`VERDICT_KINDS`).
    """

    #: The result kind: its view is ``tracekit.render.views.compare``, its JSON contract
    #: ``tracekit.render.json.compare`` (the renderers find both by this name).
    kind: ClassVar[str] = "compare"

    rows: tuple[Row, ...]
    baseline: int
    findings: tuple[Verdict, ...]

    @property
    def baseline_label(self) -> str:
        return self.rows[self.baseline].label
