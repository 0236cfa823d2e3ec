"""``tracekit compare`` as a document: the traces side by side, the verdict worded from the
comparison's findings (:mod:`tracekit.diff.side_by_side`) so every format says the same sentences, the
``--fail-if`` gates and how the figures were measured. Nothing here computes a figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracekit.render.document import Bullets, Document, Section, Title
from tracekit.render.text import Code, Rows, counted, duration, us
from tracekit.render.views.blocks import gates_table, table

if TYPE_CHECKING:
    from tracekit.results.gates import GateResult
    from tracekit.results.comparison import Comparison
    from tracekit.results.verdict import Verdict


def document(comparison: Comparison, gate_results: Sequence[GateResult] = ()) -> Document:
    """Title, the comparison's table, the verdict, the gates (when given), the method."""
    title = f"tracekit compare: {len(comparison.rows)} traces"
    blocks: list = [table(compare_table(comparison)),
                    Bullets(tuple(verdict_lines(comparison)), "Verdict", marker="  ", title_in_term=True)]
    if gate_results:
        blocks.append(gates_table(gate_rows(gate_results), gate_results))
    blocks.append(Bullets(tuple(method_lines(comparison)), "How this was measured", folded=True, tone="muted"))
    return Document("compare", Title(title, (title,), 3), (Section("compare", "Comparison", tuple(blocks)),),
                    "comment")



def compare_table(comparison: Comparison) -> Rows:
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
                     duration(row.jit_ns) if row.jit_ns else "–", us(row.wall_ns), us(row.gpu_ns),
                     us(row.cpu_dispatch_ns), f"{row.steady_units}/{row.units}", be_text])
    return (f"Compile or hand-tuned? (baseline: {comparison.baseline_label})",
            ["trace", "shapes", "compiles", "recompiles", "compile CPU", "graph records", "JIT",
             "wall/call", "GPU/call", "CPU/call", "steady", "break-even calls (wall)"], rows)


def finding_sentence(f: Verdict) -> str:
    """One finding of a comparison as a sentence (:data:`tracekit.diff.side_by_side.VERDICT_KINDS`)."""
    q = f.quantities
    who = f.subject
    shapes = f"Over {counted(q['shapes'], 'shape')}, " if q.get("shapes") else ""
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
            text += f" and {counted(q['graph_records'], 'CUDA-graph record')}"
        return text + _payoff(q) + "."
    if f.kind == "jit":
        return (f"{shapes}{who} needed no compilation but {duration(q['jit_ns'])} of Triton JIT on its first call"
                f"{_payoff(q)}{_versus(q)}.")
    if f.kind == "none":
        return f"{shapes}{who} shows no compilation or JIT in the trace{_payoff(q)}{_versus(q)}."
    if f.kind == "fastest":
        return f"Lowest steady GPU time per call: {who}, {us(q['gpu_ns'])}."
    if f.kind == "cpu_bound":
        many = len(q.get("traces", ())) > 1
        return (f"Steady CPU dispatch per call exceeds GPU time per call in {who}: "
                f"{'these loops' if many else 'this loop'} would wait on the CPU without syncs, so a GPU saving "
                f"would not show as wall time there (profiling inflates CPU time; the break-even counts wall time).")
    return f"{who}: {f.kind}"


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _payoff(q: dict[str, Any]) -> str:
    calls, reason, base = q.get("break_even_calls"), q.get("break_even_reason"), q.get("baseline")
    if base is None or reason is None:
        return ""
    per_call = _per_call(q)
    if reason == "pays_off":
        return f", and pays off after ~{calls:,} calls against {base}{per_call}"
    if reason == "immediately":
        return f", and is ahead of {base} from the first call{per_call}"
    if reason == "slower":
        return f", and never pays off against {base}: its steady wall time per call is not shorter{per_call}"
    if reason == "overtaken":
        return f", and is ahead of {base} only for its first ~{calls:,} calls: its steady wall time per call is longer{per_call}"
    return ""


def _per_call(q: dict[str, Any]) -> str:
    """Wall time per call against the baseline's, GPU time beside it (the break-even counts wall)."""
    wall, base_wall = q.get("wall_ns"), q.get("baseline_wall_ns")
    if wall is None or base_wall is None:
        return ""
    text = f" ({us(wall)} vs {us(base_wall)} of wall per call"
    gpu, base_gpu = q.get("gpu_ns"), q.get("baseline_gpu_ns")
    if gpu is not None and base_gpu is not None:
        text += f"; GPU {us(gpu)} vs {us(base_gpu)}"
    return text + ")"


def _versus(q: dict[str, Any]) -> str:
    ref, pct = q.get("versus"), q.get("versus_pct")
    if ref is None or pct is None:
        return ""
    if abs(pct) < 0.05:
        return f"; it matches {ref}'s steady GPU time per call"
    return (f"; its steady GPU time per call is within {abs(pct):.1f} % of {ref}'s "
            f"({'slower' if pct > 0 else 'faster'})")


def verdict_lines(comparison: Comparison) -> list[str]:
    """The comparison's verdict, one sentence per finding."""
    return [finding_sentence(f) for f in comparison.findings]


def method_lines(comparison: Comparison) -> list[str]:
    """How the figures were measured (under the table)."""
    from tracekit.diff.side_by_side import BREAK_EVEN_RULE, STEADY_RULE

    return [STEADY_RULE, BREAK_EVEN_RULE]


def gate_rows(results: Sequence[GateResult]) -> Rows:
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
