"""Compilation as rows of display strings: the report's "Compilation" section and ``tracekit compare``.

Like :mod:`tracekit.render.sections`, each table is ``(title, headers, rows)`` of plain strings (names
as :class:`~tracekit.render.text.Code`), shared by the terminal and Markdown renderers, which escape
them; the compare verdict is worded here from its findings (:mod:`tracekit.diff.side_by_side`), so every
format says the same sentence. Nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracekit.classify.names import short_kernel_name
from tracekit.render.text import Code, Table, us

if TYPE_CHECKING:
    from tracekit.diff.gates import GateResult
    from tracekit.diff.side_by_side import Comparison
    from tracekit.diff.verdict import Verdict
    from tracekit.report import Report

#: How a frame compilation's trigger and a unit's state are worded.
TRIGGER_WORDS = {"first": "first compile", "dynamic_promotion": "recompile, dynamic-shape promotion",
                 "shape_change": "recompile, input shapes changed", "recompile": "recompile, cause not in the trace"}
STATE_WORDS = {"compile": "compile", "recompile": "recompile", "graph_record": "CUDA-graph record",
               "jit_warmup": "JIT warm-up", "cold": "cold", "warmup": "warm-up", "partial": "cut short",
               "steady": "steady"}
PHASE_WORDS = {"dynamo_tracing": "Dynamo tracing", "aot": "AOTAutograd", "inductor": "Inductor codegen",
               "triton_compile": "Triton compile", "autotuning": "autotuning", "guards": "guards",
               "other": "other"}


def duration(ns: int | float | None) -> str:
    """A duration in the unit that reads best: ``812.4 µs``, ``92.2 ms``, ``3.21 s``; "–" for none."""
    if ns is None:
        return "–"
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.1f} ms"
    return us(ns)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _label(report: Report, step: int | None) -> str:
    from tracekit.render.sections import step_label

    return "" if step is None else step_label(report, step)


# -- the report's section -----------------------------------------------------------------------------

def summary_line(report: Report) -> str | None:
    """One sentence for the report's facts: what compilation the trace holds (None when none)."""
    comp = report.compilation
    if comp is None or not comp.found:
        return None
    t = comp.totals()
    parts = []
    if t["compilations"]:
        recompiles = ""
        if t["recompiles"]:
            causes = [_count(t["triggers"][k], one, many) for k, one, many in (
                ("dynamic_promotion", "dynamic-shape promotion", None),
                ("shape_change", "on changed input shapes", "on changed input shapes"),
                ("recompile", "cause not in the trace", "causes not in the trace")) if t["triggers"].get(k)]
            recompiles = f" ({_count(t['recompiles'], 'recompile')}: {', '.join(causes)})"
        parts.append(f"{_count(t['compilations'], 'frame compilation')}{recompiles}, "
                     f"{duration(t['compile_ns'])} of CPU")
    if t["set_aside_count"]:
        parts.append(f"{_count(t['set_aside_count'], 'GPU activity', 'GPU activities')} "
                     f"({duration(t['set_aside_gpu_ns'])}) launched by compilation set aside")
    if t["graph_records"] or t["graph_replays"]:
        parts.append(f"{_count(t['graph_records'], 'CUDA-graph record')}, {_count(t['graph_replays'], 'replay')}")
    if t["jits"]:
        parts.append(f"{_count(t['jits'], 'first-call JIT')}, {duration(t['jit_ns'])}")
    return "; ".join(parts)


def steady_line(report: Report) -> str | None:
    """Which units the tables describe, when some were set aside (None when all are steady)."""
    if not report.set_aside_units:
        return None
    counts: dict[str, int] = {}
    for state in report.set_aside_units.values():
        counts[state] = counts.get(state, 0) + 1
    total = report.steps.height
    why = ", ".join(f"{n} {STATE_WORDS.get(s, s)}" for s, n in counts.items())
    return (f"{total - len(report.set_aside_units)} of {total} steady; set aside: {why} "
            f"(kernels and throughput tables: steady units only)")


def report_tables(report: Report) -> list[Table]:
    """The "Compilation" section: compilations, their phases, the units' states, the GPU work set
    aside and first-call JITs — only the tables that have rows; none for a trace without any."""
    comp = report.compilation
    if comp is None or not comp.found:
        return []
    tables: list[Table] = []
    if comp.compilations.height:
        rows = [[r["compile_id"] or "?", _label(report, r["step"]), TRIGGER_WORDS.get(r["trigger"], r["trigger"]),
                 "dynamic" if r["dynamic"] else "static", r["changed"] or "", duration(r["cpu_ns"]),
                 duration(r["autotune_ns"] + r["runtime_ns"]), duration(r["total_ns"]),
                 f"{r['set_aside_count']:,} ({duration(r['set_aside_gpu_ns'])})" if r["set_aside_count"] else ""]
                for r in comp.compilations.iter_rows(named=True)]
        key = f" (dims of {comp.key_op})" if comp.key_op else ""
        tables.append((f"Compilation: frame compilations{key}",
                       ["compile id", "unit", "trigger", "graph", "dims changed", "compile CPU",
                        "autotuning + run time", "total", "GPU work set aside"], rows))
        tables.append(phases_table(report))
    states = report.launch_gaps.per_step if report.launch_gaps is not None else None
    if states is not None and "state" in states.columns:
        by_step = {r["step"]: r for r in comp.units.iter_rows(named=True)}
        rows = []
        for r in states.iter_rows(named=True):
            u = by_step.get(r["step"], {})
            rows.append([_label(report, r["step"]), STATE_WORDS.get(r["state"], r["state"]), u.get("shape") or "",
                         u.get("compile_ids") or "", duration(u.get("compile_ns") or None) if u.get("compile_ns") else "",
                         str(u.get("graph_records") or ""), str(u.get("graph_replays") or ""),
                         duration(u["jit_ns"]) if u.get("jit_ns") else "", us(r["gpu_busy_ns"]),
                         us(r["cpu_dispatch_ns"])])
        shape = f"shape ({comp.key_op} dims)" if comp.key_op else "shape"
        tables.append(("Compilation: units by state", ["unit", "state", shape, "compiled", "compile CPU",
                                                       "graph records", "graph replays", "JIT", "GPU busy",
                                                       "CPU dispatch"], rows))
    if comp.set_aside.height:
        rows = [[r["compile_id"] or "?", r["work"], r["kind"], Code(short_kernel_name(r["name"], None)),
                 f"{r['count']:,}", duration(r["gpu_ns"])] for r in comp.set_aside.iter_rows(named=True)]
        tables.append(("Compilation: GPU work launched by compilation (set aside from every other table)",
                       ["compile id", "inside", "kind", "name", "count", "GPU time"], rows))
    if comp.jit.height:
        rows = [[Code(r["kernel"]), Code(r["op"]), _label(report, r["step"]), duration(r["first_ns"]),
                 duration(r["later_ns"]), str(r["later_count"]), duration(r["jit_ns"])]
                for r in comp.jit.iter_rows(named=True)]
        tables.append(("Compilation: Triton JIT on first call", ["kernel", "op", "unit", "first call",
                                                                  "later calls (median)", "later calls",
                                                                  "JIT time"], rows))
    return tables


def phases_table(report: Report) -> Table:
    """CPU time of each frame compilation by phase (one column per phase that took any time)."""
    comp = report.compilation
    phases = [p for p in PHASE_WORDS if comp.phases.filter(comp.phases["phase"] == p)["cpu_ns"].sum() > 0]
    by_id: dict[Any, dict[str, int]] = {}
    for r in comp.phases.iter_rows(named=True):
        by_id.setdefault(r["compile_id"], {})[r["phase"]] = r["cpu_ns"]
    rows = [[cid or "?", *[duration(v.get(p, 0)) for p in phases], duration(sum(v.values()))]
            for cid, v in by_id.items()]
    return ("Compilation: CPU time by phase", ["compile id", *[PHASE_WORDS[p] for p in phases], "total"], rows)


def notes(report: Report) -> list[str]:
    """The rules behind the Compilation section (none for a trace without compilation)."""
    comp = report.compilation
    if comp is None or not comp.found:
        return []
    from tracekit.analyses import compilations as C

    return [f"Compilation: triggers — first = compile index 0 of a frame; dynamic-shape promotion = a recompile "
            f"holding pgo.dynamic_whitelist (automatic dynamic shapes marked dims dynamic) or whose graph ran "
            f"more than one shape; input shapes changed = the shape key's Input Dims differ from the unit "
            f"before. GPU work launched inside compile work (autotuning) is set aside from every table, "
            f"median and throughput. First-call JIT: a Triton kernel's first launch whose op took >= "
            f"{C.JIT_MIN_NS / 1e6:g} ms and >= {C.JIT_FACTOR:g}x the median of its later launches.",
            "Steady per call: per shape key the median over its steady units, weighted by the units of each "
            "shape."]


# -- tracekit compare ---------------------------------------------------------------------------------

def compare_table(comparison: Comparison) -> Table:
    """One row per trace: the columns of ``tracekit compare``."""
    rows = []
    for row in comparison.rows:
        be = row.break_even
        if row.is_baseline:
            be_text = "baseline"
        elif be is None:
            be_text = "–"
        elif be.calls is None:
            be_text = "never" if be.reason == "slower" else "–"
        elif be.reason == "overtaken":
            be_text = f"ahead for {be.calls:,} calls"
        else:
            be_text = f"{be.calls:,}" if be.calls else "from the first call"
        rows.append([row.label, str(row.shapes), str(row.compilations), str(row.recompiles),
                     duration(row.compile_ns) if row.compilations else "–",
                     str(row.graph_records) if row.graph_records else "–",
                     duration(row.jit_ns) if row.jit_ns else "–", us(row.gpu_ns), us(row.cpu_dispatch_ns),
                     f"{row.steady_units}/{row.units}", be_text])
    return (f"Compile or hand-tuned? (baseline: {comparison.baseline_label})",
            ["trace", "shapes", "compiles", "recompiles", "compile CPU", "graph records", "JIT",
             "GPU/call", "CPU/call", "steady", "break-even calls"], rows)


def finding_sentence(f: Verdict) -> str:
    """One finding of a comparison as a sentence (:data:`tracekit.diff.side_by_side.VERDICT_KINDS`)."""
    q = f.quantities
    who = f.subject
    shapes = f"Over {_count(q['shapes'], 'shape')}, " if q.get("shapes") else ""
    if f.kind == "compiled":
        causes = []
        if q.get("dynamic_promotions"):
            causes.append(f"{q['dynamic_promotions']} dynamic-shape promotion{'s' if q['dynamic_promotions'] != 1 else ''}")
        if q.get("shape_changes"):
            causes.append(f"{q['shape_changes']} on changed input shapes")
        recompiled = ("did not recompile" if not q["recompiles"] else
                      f"recompiled {_times(q['recompiles'])}" + (f" ({', '.join(causes)})" if causes else ""))
        text = (f"{shapes}{who} compiled {_times(q['compilations'])} and {recompiled}, costing "
                f"{duration(q['compile_ns'])} of CPU")
        if q.get("graph_records"):
            text += f" and {_count(q['graph_records'], 'CUDA-graph record')}"
        return text + _payoff(q) + "."
    if f.kind == "jit":
        return (f"{shapes}{who} needed no compilation but {duration(q['jit_ns'])} of Triton JIT on its first call"
                f"{_payoff(q)}{_versus(q)}.")
    if f.kind == "none":
        return f"{shapes}{who} shows no compilation or JIT in the trace{_payoff(q)}{_versus(q)}."
    if f.kind == "fastest":
        return f"Fastest steady state: {who}, {us(q['gpu_ns'])} of GPU time per call."
    if f.kind == "cpu_bound":
        many = len(q.get("traces", ())) > 1
        return (f"Steady CPU dispatch per call exceeds GPU time per call in {who}: "
                f"{'these loops' if many else 'this loop'} would wait on the CPU without syncs, so a GPU saving "
                f"would not show as wall time there (profiling inflates CPU time; the break-even counts GPU time).")
    return f"{who}: {f.kind}"


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _payoff(q: dict[str, Any]) -> str:
    calls, reason, base = q.get("break_even_calls"), q.get("break_even_reason"), q.get("baseline")
    if base is None or reason is None:
        return ""
    if reason == "pays_off":
        return f", and pays off after ~{calls:,} calls against {base}"
    if reason == "immediately":
        return f", and is ahead of {base} from the first call"
    if reason == "slower":
        return f", and never pays off against {base} (its steady state is not faster)"
    if reason == "overtaken":
        return f", and is ahead of {base} only for its first ~{calls:,} calls (its steady state is slower)"
    return ""


def _versus(q: dict[str, Any]) -> str:
    ref, pct = q.get("versus"), q.get("versus_pct")
    if ref is None or pct is None:
        return ""
    if abs(pct) < 0.05:
        return f"; it matches {ref}'s steady state"
    return f"; it is within {abs(pct):.1f} % of {ref}'s steady state ({'slower' if pct > 0 else 'faster'})"


def verdict_lines(comparison: Comparison) -> list[str]:
    """The comparison's verdict, one sentence per finding."""
    return [finding_sentence(f) for f in comparison.findings]


def method_lines(comparison: Comparison) -> list[str]:
    """How the figures were measured (under the table)."""
    from tracekit.diff.side_by_side import BREAK_EVEN_RULE, STEADY_RULE

    return [STEADY_RULE, BREAK_EVEN_RULE]


def gate_rows(results: Sequence[GateResult]) -> Table:
    """The ``--fail-if`` gates of a comparison: the most extreme value and the traces that failed."""
    from tracekit.diff.gates import TIME_METRICS

    rows = []
    for r in results:
        if r.observed is None:
            observed = "–"
        elif r.gate.relative:
            observed = f"{r.observed:+.1f}%" if abs(r.observed) != float("inf") else "new"
        elif r.observed == float("inf"):
            observed = "never"
        elif r.gate.metric in TIME_METRICS:
            observed = duration(r.observed)
        else:
            observed = f"{r.observed:,.0f}"
        rows.append([Code(r.gate.text), observed, "FAILED: " + ", ".join(r.traces) if r.failed else "passes"])
    return ("Gates", ["gate", "most extreme", "result"], rows)
