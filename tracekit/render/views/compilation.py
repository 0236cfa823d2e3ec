"""The report's compilation worded: its one-line facts, its "Compilation" tables and the rules
behind them (:mod:`tracekit.analyses.compilations`).

Each table is ``(title, headers, rows)`` of display strings (names as
:class:`~tracekit.render.text.Code`); the report's view (:mod:`tracekit.render.views.report`) puts
them in its document. Nothing here computes a figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.classify.names import short_kernel_name
from tracekit.render.text import Code, Rows, counted, duration, us
from tracekit.render.views.labels import step_label

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: How a frame compilation's trigger and a unit's state are worded.
TRIGGER_WORDS = {"first": "first compile", "dynamic_promotion": "recompile, dynamic-shape promotion",
                 "shape_change": "recompile, input shapes changed", "recompile": "recompile, cause not in the trace"}
STATE_WORDS = {"compile": "compile", "recompile": "recompile", "graph_record": "CUDA-graph record",
               "jit_warmup": "JIT warm-up", "cold": "cold", "warmup": "warm-up", "partial": "cut short",
               "steady": "steady"}
PHASE_WORDS = {"dynamo_tracing": "Dynamo tracing", "aot": "AOTAutograd", "inductor": "Inductor codegen",
               "triton_compile": "Triton compile", "autotuning": "autotuning", "guards": "guards",
               "other": "other"}


def _label(report: Report, step: int | None) -> str:
    return "" if step is None else step_label(report, step)


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
            causes = [counted(t["triggers"][k], one, many) for k, one, many in (
                ("dynamic_promotion", "dynamic-shape promotion", None),
                ("shape_change", "on changed input shapes", "on changed input shapes"),
                ("recompile", "cause not in the trace", "causes not in the trace")) if t["triggers"].get(k)]
            recompiles = f" ({counted(t['recompiles'], 'recompile')}: {', '.join(causes)})"
        parts.append(f"{counted(t['compilations'], 'frame compilation')}{recompiles}, "
                     f"{duration(t['compile_ns'])} of CPU")
    if t["set_aside_count"]:
        parts.append(f"{counted(t['set_aside_count'], 'GPU activity', 'GPU activities')} "
                     f"({duration(t['set_aside_gpu_ns'])}) launched by compilation set aside")
    if t["graph_records"] or t["graph_replays"]:
        parts.append(f"{counted(t['graph_records'], 'CUDA-graph record')}, {counted(t['graph_replays'], 'replay')}")
    if t["jits"]:
        parts.append(f"{counted(t['jits'], 'first-call JIT')}, {duration(t['jit_ns'])}")
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


def report_tables(report: Report) -> list[Rows]:
    """The "Compilation" section: compilations, their phases, the units' states, the GPU work set
    aside and first-call JITs — only the tables that have rows; none for a trace without any."""
    comp = report.compilation
    if comp is None or not comp.found:
        return []
    tables: list[Rows] = []
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


def phases_table(report: Report) -> Rows:
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
