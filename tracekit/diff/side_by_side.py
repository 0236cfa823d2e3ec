"""Compile or hand-tuned? N traces of one workload side by side: what each paid once, what each costs
per call, and after how many calls a compilation pays for itself.

Contract: :func:`compare` takes ``(label, report)`` pairs (:class:`~tracekit.results.report.Report`, with its
``compilation``) and the index of the baseline, and returns a frozen :class:`Comparison`: one
:class:`Row` per trace and the verdict as data (:class:`~tracekit.results.verdict.Verdict` clauses of
:data:`VERDICT_KINDS`, the vocabulary ``tracekit diff`` speaks too), which the renderers word.
``--fail-if`` gates are tested against it by :func:`tracekit.diff.gates.evaluate_comparison`. Pure.

Figures per trace (from :mod:`tracekit.analyses.compilations`): shapes seen (distinct shape keys),
frame compilations and recompiles, compile CPU time (frame compilations with their autotuning and
run-time compile work), CUDA-graph records, first-call JIT time, and the steady state per call — GPU
time and CPU dispatch (:data:`STEADY_RULE`). The one-off cost of a trace is its compile CPU time +
graph-record time + JIT time.

**Break-even** (:data:`BREAK_EVEN_RULE`): against the baseline B, trace X pays for its extra one-off
cost ``O_X - O_B`` with the wall time it saves per call, ``w_B - w_X`` (a steady unit's wall: what a
caller waits for one call, whichever of CPU and GPU bounds it): after ``n = ceil((O_X - O_B) /
(w_B - w_X))`` calls. ``pays_off`` when both are positive; ``immediately`` (n = 0) when X costs no
more once and no more per call; ``slower`` (never) when X costs more once and does not save per call;
``overtaken`` when X costs less once but more per call (B catches up after ``n`` calls);
``unmeasured`` without a steady wall time on either side. Wall time is the basis because a GPU saving
pays nothing in a loop the CPU bounds (a shape sweep of small calls is: compiled 499.6 µs vs eager
294.1 µs of wall per call while its GPU time fell); the steady GPU time per call is shown beside it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tracekit.results.verdict import Subject, Value, Verdict
from tracekit.errors import UsageError
from tracekit.results.comparison import BreakEven, Comparison, Row

if TYPE_CHECKING:
    from tracekit.results.report import Report

STEADY_RULE = ("Steady per call: per shape key (the Input Dims of one op per unit), the median over the trace's "
               "steady units (not compiling, recompiling, recording a CUDA graph, JIT-compiling, cold or warming "
               "up), weighted by how many units ran each shape; GPU work launched by a compilation is never counted")
BREAK_EVEN_RULE = ("Break-even: calls n = ceil((O_X - O_B) / (w_B - w_X)) after which trace X has paid its extra one-off "
                   "cost O (compile CPU + CUDA-graph records + first-call JIT) with the steady wall time w it saves per "
                   "call (a steady unit's wall, whichever of CPU and GPU bounds it) against the baseline B; 'never' "
                   "when X costs more once and saves no wall time per call")
#: The verdict's clauses, in the order they are worded, each about traces (subjects of role
#: ``trace``): ``compiled`` / ``jit`` / ``none`` (one per trace but the baseline: what it paid and
#: whether it pays off), ``fastest`` (the lowest steady GPU time per call), ``cpu_bound`` (the
#: traces whose steady CPU dispatch exceeds their GPU time).
VERDICT_KINDS = ("compiled", "jit", "none", "fastest", "cpu_bound")


def label_of(path: str) -> str:
    """A trace's label: its file name without ``.json``, ``.gz``, ``.parquet``."""
    name = os.path.basename(path)
    for suffix in (".gz", ".json", ".parquet"):
        name = name.removesuffix(suffix)
    return name or os.path.basename(path)


def _row(label: str, report: Report, is_baseline: bool) -> Row:
    comp = report.compilation
    if comp is None:
        from tracekit.analyses.compilations import Compilations

        comp = Compilations()
    t, s = comp.totals(), comp.steady or {}
    return Row(
        label=label, path=report.facts.path, is_baseline=is_baseline, shapes=t["shapes"], units=s.get("units", 0),
        steady_units=s.get("steady_units", 0), set_aside=dict(s.get("set_aside", {})),
        compilations=t["compilations"], recompiles=t["recompiles"], dynamic_promotions=t["dynamic_promotions"],
        shape_changes=t["triggers"].get("shape_change", 0), compile_ns=t["compile_ns"],
        recompile_ns=t["recompile_ns"], graph_records=t["graph_records"], graph_replays=t["graph_replays"],
        record_ns=t["record_ns"], jit_ns=t["jit_ns"], set_aside_count=t["set_aside_count"],
        set_aside_gpu_ns=t["set_aside_gpu_ns"], gpu_ns=s.get("gpu_ns"), cpu_dispatch_ns=s.get("cpu_dispatch_ns"),
        wall_ns=s.get("wall_ns"))


def break_even(x: Row, base: Row) -> BreakEven:
    """X's break-even against the baseline (module docstring)."""
    if x.wall_ns is None or base.wall_ns is None:
        return BreakEven("unmeasured", None, None, None)
    extra, saving = x.one_off_ns - base.one_off_ns, base.wall_ns - x.wall_ns
    if extra <= 0 and saving >= 0:
        return BreakEven("immediately", 0, extra, saving)
    if extra > 0 and saving > 0:
        return BreakEven("pays_off", math.ceil(extra / saving), extra, saving)
    if extra > 0:
        return BreakEven("slower", None, extra, saving)
    return BreakEven("overtaken", math.ceil(-extra / -saving), extra, saving)


def compare(items: Sequence[tuple[str, Report]], *, baseline: int = 0) -> Comparison:
    """Compare ``(label, report)`` pairs against the one at index ``baseline``."""
    if not items:
        raise UsageError("compare needs at least one trace")
    if not 0 <= baseline < len(items):
        raise UsageError(f"baseline index {baseline} is not one of the {len(items)} traces")
    rows = [_row(label, report, i == baseline) for i, (label, report) in enumerate(items)]
    base = rows[baseline]
    rows = [r if r.is_baseline else _with_break_even(r, base) for r in rows]
    return Comparison(rows=tuple(rows), baseline=baseline, findings=tuple(_verdict(rows, baseline)))


def _with_break_even(row: Row, base: Row) -> Row:
    return replace(row, break_even=break_even(row, base))


def _traces(*rows: Row) -> tuple[Subject, ...]:
    return tuple(Subject("trace", r.label) for r in rows)


def _verdict(rows: list[Row], baseline: int) -> list[Verdict]:
    """The comparison's clauses in :data:`VERDICT_KINDS` order (see there)."""
    base = rows[baseline]
    compiled = [r for r in rows if r.compilations and r.gpu_ns is not None]
    best_compiled = min(compiled, key=lambda r: (r.gpu_ns, r.label)) if compiled else None
    out: list[Verdict] = []
    for r in rows:
        if r.is_baseline:
            continue
        be = r.break_even
        q: dict[str, Value] = {
            "shapes": r.shapes, "baseline": base.label, "break_even_calls": be.calls if be else None,
            "break_even_reason": be.reason if be else None, "gpu_ns": r.gpu_ns, "one_off_ns": r.one_off_ns,
            "wall_ns": r.wall_ns, "baseline_wall_ns": base.wall_ns, "baseline_gpu_ns": base.gpu_ns}
        if r.compilations:
            q.update(compilations=r.compilations, recompiles=r.recompiles, dynamic_promotions=r.dynamic_promotions,
                     shape_changes=r.shape_changes, compile_ns=r.compile_ns, graph_records=r.graph_records)
            out.append(Verdict("compiled", _traces(r), q))
            continue
        if best_compiled is not None and r.gpu_ns is not None and best_compiled.gpu_ns:
            q.update(versus=best_compiled.label, versus_pct=100.0 * (r.gpu_ns / best_compiled.gpu_ns - 1.0))
        if r.jit_ns:
            q.update(jit_ns=r.jit_ns)
            out.append(Verdict("jit", _traces(r), q))
        else:
            out.append(Verdict("none", _traces(r), q))
    measured = [r for r in rows if r.gpu_ns is not None]
    if len(measured) > 1:
        fastest = min(measured, key=lambda r: (r.gpu_ns, r.label))
        out.append(Verdict("fastest", _traces(fastest), {"gpu_ns": fastest.gpu_ns}))
    bound = [r for r in measured if r.cpu_dispatch_ns is not None and r.cpu_dispatch_ns > r.gpu_ns]
    if bound:
        out.append(Verdict("cpu_bound", _traces(*bound),
                           {"traces": tuple(r.label for r in bound),
                            "cpu_dispatch_ns": tuple(r.cpu_dispatch_ns for r in bound),
                            "gpu_ns": tuple(r.gpu_ns for r in bound)}))
    return out
