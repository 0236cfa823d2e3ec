"""``tracekit diff`` as a document: the verdict and per-step quantities (and the ``--fail-if``
gates), A's and B's step timelines, the per-class chart, then the detail tables and how the figures
were measured.

Cells are plain strings, or :class:`~tracekit.render.text.Code` for names (kernels, ops). The view
words a :class:`~tracekit.results.diff.Diff`; it never computes a figure nor decides what counts:
medians, deltas and noise come from the Diff, the verdict's clauses from its findings
(:mod:`tracekit.render.views.verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tracekit.classify.names import short_kernel_name
from tracekit.render import timeline
from tracekit.render.document import (Bullets, Chart, Charts, Document, Paragraph, Section, StepDrawing, Table,
                                      TimelineChoice, Timelines, Title, Verdict)
from tracekit.render.text import Code, Rows
from tracekit.render.views.blocks import gates_table, table
from tracekit.render.views.findings import changes_table as findings_changes
from tracekit.render.views.verdict import fmt_delta, fmt_status, fmt_value, joined_ops, kname, verdict_parts

if TYPE_CHECKING:
    from tracekit.results.diff import Diff
    from tracekit.results.gates import GateResult

#: Width (user units and CSS pixels) a step timeline is drawn at; the longer of a pair of steps
#: gets it, the shorter a share in proportion to its duration (one time scale for both).
TIMELINE_WIDTH = 1200
#: Narrowest the shorter timeline of a pair is drawn (its lanes' labels need the room).
MIN_TIMELINE_WIDTH = 360


def document(diff: Diff, gate_results: Sequence[GateResult] = ()) -> Document:
    """The diff's document; its sections: verdict, timeline, charts, details."""
    headers, rows = quantity_rows(diff)
    top: list = [Verdict("Verdict", tuple(verdict_parts(diff))),
                 Table("Per step (median over steps)", tuple(headers), tuple(tuple(r) for r in rows), status=True,
                       headed=False)]
    missing = unavailable_line(diff)
    if missing:
        top.append(Paragraph((missing,), tone="muted"))
    if gate_results:
        top.append(gates_table(gate_rows(gate_results), gate_results))
    details: list = [table(t, status=True, folded=True) for t in detail_tables(diff)]
    details.append(Bullets(tuple(method_lines(diff)), "How this was measured", folded=True, tone="muted"))
    a, b = diff.a.label, diff.b.label
    return Document("diff", Title(f"tracekit diff: {a} → {b}", ("tracekit diff: ", Code(a), " → ", Code(b)), 3), (
        Section("verdict", "Verdict", tuple(top)),
        Section("timeline", "Step timelines, A above B", (timelines(diff),)),
        Section("charts", "Charts", (Charts((Chart("class_time_a_vs_b", diff, "class_time_a_vs_b",
                                                   "GPU time per kernel class per step, A vs B",
                                                   "GPU time per kernel class, A vs B"),)),)),
        Section("details", "Details", tuple(details)),
    ), "comment")


def summary(diff: Diff) -> Document:
    """The diff's compact document (what a notebook shows under a cell): its verdict section alone,
    the verdict and the per-step quantities, and the findings that appeared or vanished."""
    full = document(diff)
    changes = [("new in B", f) for f in diff.findings_new] + [("resolved in B", f) for f in diff.findings_resolved]
    extra = (table(findings_changes(changes), status=True),) if changes else ()
    return Document("diff", full.title, (replace(full.sections[0], blocks=full.sections[0].blocks + extra),),
                    full.layout)


def step_width(dur: int, longest: int) -> int:
    """The width to draw a step of ``dur`` ns at, so that its time axis has the scale of the
    ``longest`` step's drawn at :data:`TIMELINE_WIDTH` (the lane labels' column is not time)."""
    if longest <= 0:
        return TIMELINE_WIDTH
    fixed = timeline.LABEL_WIDTH + timeline.RIGHT_MARGIN
    return max(MIN_TIMELINE_WIDTH, round(fixed + (TIMELINE_WIDTH - fixed) * dur / longest))


def timelines(diff: Diff) -> Timelines:
    """A's and B's timelines of each aligned pair of steps, one above the other on one time scale;
    the last pair (the steadiest) shown first."""
    ta, tb = diff.a.timelines, diff.b.timelines
    if ta is None or tb is None:
        return Timelines((), "", "no timelines (this diff was computed without them)")
    steps_a, steps_b = {s.number: s for s in ta.steps}, {s.number: s for s in tb.steps}
    pairs = [(ua, ub) for ua, ub in diff.unit_pairs if ua in steps_a and ub in steps_b]
    choices = []
    for n, (ua, ub) in enumerate(pairs):
        sa, sb = steps_a[ua], steps_b[ub]
        longest = max(sa.end_ns - sa.start_ns, sb.end_ns - sb.start_ns)
        drawings = tuple(
            StepDrawing(step, step_width(step.end_ns - step.start_ns, longest), f"{side.lower()}{n}",
                        f"timeline_{side.lower()}", f"step timeline of {side} ({label}, {step.name})",
                        f"{side}: {label} — {step.name}")
            for side, label, step in (("A", diff.a.label, sa), ("B", diff.b.label, sb)))
        choices.append(TimelineChoice(str(n), f"A {diff.a.unit_labels.get(ua, ua)} ↔ B {diff.b.unit_labels.get(ub, ub)}",
                                      drawings))
    return Timelines(tuple(choices), str(len(pairs) - 1), "no aligned steps to draw")


#: Quantities shown shape by shape under their per-sweep row when shapes vary (every quantity of
#: every shape is in the JSON and in ``Diff.per_step``).
PER_SHAPE_ROWS = ("gpu_time", "cpu_time", "kernels", "round_trip_bytes")


def quantity_rows(diff: Diff) -> tuple[list[str], list[list[str]]]:
    n = min(len(diff.a.units), len(diff.b.units))
    if diff.shapes:
        first = f"per sweep (one step of each of {len(diff.shapes)} shapes: sum of each shape's median)"
    elif not diff.structural:
        first = "per sweep (one step of each of a trace's own shapes; no shape in common)"
    else:
        first = f"per step (median of {n})" if n > 1 else "per step"
    headers = [first, "A", "B", "Δ", "noise ±", ""]
    rows = []
    syncs_found = any(f.kind == "host_sync" for f in diff.findings)
    for q in diff.quantities.values():
        if q.key in ("memcpys", "memsets", "preop_tax", "round_trip_tensors", "graph_launches") and q.a == 0 and q.b == 0:
            continue
        if q.key == "host_sync" and not syncs_found:  # shown when the verdict speaks of host syncs
            continue
        rows.append([q.label, fmt_value(q.a, q.unit), fmt_value(q.b, q.unit), fmt_delta(q),
                     fmt_value(q.noise, q.unit), fmt_status(q)])
        if q.key in PER_SHAPE_ROWS:
            for shape in diff.shapes:
                s = shape.quantities[q.key]
                rows.append([f"  {q.label} · {shape.key} (median of {min(len(shape.units_a), len(shape.units_b))})",
                             fmt_value(s.a, s.unit), fmt_value(s.b, s.unit), fmt_delta(s), fmt_value(s.noise, s.unit),
                             fmt_status(s)])
    return headers, rows


def unavailable_line(diff: Diff) -> str | None:
    if not diff.unavailable:
        return None
    by_reason: dict[str, list[str]] = {}
    for key, reason in diff.unavailable.items():
        by_reason.setdefault(reason, []).append(key)
    return "Not measured: " + "; ".join(f"{', '.join(keys)} ({reason})" for reason, keys in by_reason.items())


def gate_rows(results: Sequence[GateResult]) -> Rows:
    from tracekit.diff import gates as gates_mod

    rows = []
    for r in results:
        metric = r.gate.metric
        unit = "ns" if metric in gates_mod.TIME_METRICS else "bytes" if metric in gates_mod.BYTE_METRICS else "count"
        if r.observed is None:
            observed = "–"
        elif r.gate.relative:
            observed = f"{r.observed:+.1f}%" if abs(r.observed) != float("inf") else (
                "new" if r.observed > 0 else "gone")
        else:
            observed = ("+" if r.observed > 0 else "-" if r.observed < 0 else "±") + fmt_value(abs(r.observed), unit)
        status = "FAILED" if r.failed else ("exceeded, within noise: passes" if r.exceeded else "passes")
        rows.append([Code(r.gate.text), observed, status])
    return ("Gates", ["gate", "observed change", "result"], rows)


def changes_table(diff: Diff) -> Rows:
    al = diff.alignment
    rows: list[list[str]] = []
    for f in al.fusions:
        rows.append([f"fusion ({f.evidence})", Code(" + ".join(short_kernel_name(k.name, k.decoded) for k in f.before)),
                     kname(f.after), joined_ops(f.ops)])
    for s in al.splits:
        rows.append([f"split ({s.evidence})", kname(s.before),
                     Code(" + ".join(short_kernel_name(k.name, k.decoded) for k in s.after)), joined_ops(s.ops)])
    for c in al.changed:
        rows.append(["variant changed", kname(c.before), kname(c.after),
                     ", ".join(f"{k}: {va} → {vb}" for k, va, vb in c.fields) or "name only"])
    for x, y in al.replaced:
        rows.append(["replaced", kname(x), kname(y), f"{x.kernel_class} → {y.kernel_class}"])
    for x, y in al.device_choices:
        rows.append(["device's kernel choice", kname(x), kname(y), f"both launched by {x.cpu_op}"])
    for c in al.count_changes:
        rows.append([f"count {c.a} → {c.b}", Code(", ".join(dict.fromkeys(short_kernel_name(k.name, k.decoded) for k in c.before))),
                     Code(", ".join(dict.fromkeys(short_kernel_name(k.name, k.decoded) for k in c.after))),
                     f"kernels of {c.cpu_op}"])
    for k in al.removed:
        rows.append(["removed", kname(k), "", k.kernel_class])
    for k in al.added:
        rows.append(["added", "", kname(k), k.kernel_class])
    for ka, kb, n in al.unchanged_once():
        rows.append([f"unchanged ×{n}" if n > 1 else "unchanged", kname(ka), kname(kb), ka.kernel_class])
    step = f"one step of {diff.aligned_shape}" if diff.aligned_shape else "one step"
    title = f"Kernel changes ({step}; the same in {diff.pairs_agreeing} of {len(diff.unit_pairs)} step pairs)"
    return (title, ["change", "A", "B", "detail"], rows)


def class_table(diff: Diff) -> Rows:
    rows = [[Code(q.label), fmt_value(q.a, "ns"), fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"),
             fmt_status(q)] for q in diff.classes]
    return (f"GPU time per kernel class (per {diff.per})", ["class", "A", "B", "Δ", "noise ±", ""], rows)


def kernel_table(diff: Diff) -> Rows:
    rows = []
    for kt in diff.kernel_times:
        q = kt.quantity
        rows.append([Code(short_kernel_name(kt.name_a)), kt.kernel_class, fmt_value(q.a, "ns"),
                     fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"), fmt_status(q)])
    per = f"per step of {diff.aligned_shape}" if diff.aligned_shape else "per step"
    return (f"GPU time per unchanged kernel ({per})",
            ["kernel", "class", "A", "B", "Δ", "noise ±", ""], rows)


def cpu_ops_table(diff: Diff) -> Rows:
    rows = []
    for label, ops in (("gone in B", diff.cpu_ops_removed), ("new in B", diff.cpu_ops_added)):
        for o in ops:
            rows.append([label, Code(o.name), fmt_value(o.count, "count"), fmt_value(o.cpu_ns, "ns"),
                         "yes" if o.launches_gpu else "no"])
    return (f"CPU ops that appeared or disappeared (per {diff.per})",
            ["", "op", "count", "CPU time (inclusive)", "launches GPU work"], rows)


def preops_table(diff: Diff) -> Rows:
    kinds = sorted(set(diff.preops_a) | set(diff.preops_b))
    rows = [[k, fmt_value(diff.preops_a.get(k, 0), "ns"), fmt_value(diff.preops_b.get(k, 0), "ns")] for k in kinds]
    return (f"torch.compile pre-ops (CPU per {diff.per}; the tax is cache_lookup + pregraph_bytecode + aot_prologue)",
            ["wrapper", "A", "B"], rows)


def tensors_table(diff: Diff) -> Rows:
    rows = []
    for side, p, tensors, unit in (("A", diff.a, diff.tensors_a, diff.tensor_units[0]),
                                   ("B", diff.b, diff.tensors_b, diff.tensor_units[1])):
        step = p.unit_labels.get(unit, "") if unit is not None else ""
        for t in tensors:
            rows.append([f"{side} ({step})", Code(t["producer_op"]), Code(t["consumer_op"]), t["shape"],
                         t["dtype"], fmt_value(t["bytes"], "bytes")])
    return ("Round-trip tensors (written to HBM by one kernel, read back by a later one; last step)",
            ["trace", "written by", "read by", "shape", "dtype", "bytes"], rows)


def hidden_table(diff: Diff) -> Rows:
    keys = sorted(set(diff.hidden_a) | set(diff.hidden_b))
    rows = [[Code(k), fmt_value(diff.hidden_a.get(k, 0), "count"), fmt_value(diff.hidden_b.get(k, 0), "count")]
            for k in keys]
    return (f"Hidden memset / memcpy (per {diff.per})", ["activity", "A", "B"], rows)


def method_lines(diff: Diff) -> list[str]:
    from tracekit.results.diff import NOISE_RULE
    a, b = diff.a, diff.b
    lines = [
        f"A: {a.label}, {len(a.units)} {a.unit_kind} unit(s): {', '.join(a.unit_labels[u] for u in a.units)}",
        f"B: {b.label}, {len(b.units)} {b.unit_kind} unit(s): {', '.join(b.unit_labels[u] for u in b.units)}",
        f"Noise rule: {NOISE_RULE}.",
        (f"With {min(len(a.units), len(b.units))} steps per trace the spread is a coarse estimate (the range of "
         "a few samples, not a confidence interval); profile more steps for a firmer verdict."
         if min(len(a.units), len(b.units)) > 1 else
         "A trace with a single step gives no noise estimate: every change of its figures counts."),
        "Kernel identity: class + decoded name (Inductor's graph index ignored); unchanged GEMMs anchor the "
        "alignment; fusions from Inductor's fused-op list, the launching CPU op's name, or position.",
    ]
    if diff.shapes or not diff.structural:
        basis = ("the text after each annotation's number" if diff.a.shape_basis == "annotation" else
                 "the shape key (the input dims of one op, written after its name)")
        lines.append(f"Shapes vary within a trace, so units are paired by shape ({basis}): the k-th unit of a shape "
                     "in A with the k-th of the same shape in B; a figure per sweep is the sum over the shapes of "
                     "each shape's median (its noise the sum of the per-shape spreads).")
    return lines + list(diff.notes)


def host_sync_table(diff: Diff) -> Rows:
    rows = []
    for s in diff.host_syncs:
        q = s.quantity
        rows.append([Code(s.name), fmt_value(q.a, "ns"), fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"),
                     fmt_status(q), fmt_value(s.count_a, "count"), fmt_value(s.count_b, "count")])
    return (f"Host syncs (the CPU blocked waiting for the GPU; outermost sync of each nest, per {diff.per})",
            ["sync", "A", "B", "Δ", "noise ±", "", "calls A", "calls B"], rows)


def detail_tables(diff: Diff) -> list[Rows]:
    syncs = [host_sync_table(diff)] if any(f.kind == "host_sync" for f in diff.findings) else []
    changed = [("new in B", f) for f in diff.findings_new] + [("resolved in B", f) for f in diff.findings_resolved]
    found = [findings_changes(changed)] if changed else []
    if not diff.structural:  # no shape in common: only totals were compared
        return found + [class_table(diff), preops_table(diff), hidden_table(diff)] + syncs
    return found + [changes_table(diff), class_table(diff), kernel_table(diff), cpu_ops_table(diff),
            preops_table(diff), hidden_table(diff)] + syncs + (
                [tensors_table(diff)] if "round_trip_bytes" not in diff.unavailable else [])
