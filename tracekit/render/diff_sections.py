"""The diff's and the check's content as display rows, shared by the Markdown and terminal renderers.

Cells are plain strings, or :class:`Code` for names (kernels, ops) that Markdown shows as code.
Functions format a :class:`~tracekit.diff.compare.Diff`; they never compute a figure the Diff does
not hold (medians, deltas and noise all come from it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracekit.classify.names import describe_decoded, short_kernel_name
from tracekit.diff import gates as gates_mod
from tracekit.diff.align import Fusion
from tracekit.render.text import us

if TYPE_CHECKING:
    from tracekit.diff.expect import Item


class Code(str):
    """A name shown as code in Markdown and plain in the terminal."""


Table = tuple[str, list[str], list[list[str]]]


def kname(k) -> Code:
    return Code(short_kernel_name(k.name, k.decoded))


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "ns":
        return us(int(round(value)))
    if unit == "bytes":
        return f"{int(value):,} B"
    return f"{value:,.1f}" if not float(value).is_integer() else f"{int(value):,}"


def fmt_delta(q) -> str:
    sign = "+" if q.delta > 0 else ("-" if q.delta < 0 else "±")
    text = sign + fmt_value(abs(q.delta), q.unit)
    if q.delta and q.delta_pct is not None:
        text += f" ({q.delta_pct:+.1f}%)"
    elif q.delta and q.a == 0:
        text += " (new)"
    return text


def fmt_status(q) -> str:
    return {"same": "same", "within noise": "within noise", "up": "higher", "down": "lower"}[q.direction]


def _ops(ops: tuple[str, ...]) -> str:
    return " + ".join(ops) if ops else "?"


def _fusion_parts(f: Fusion) -> list[str]:
    cls = f.after.kernel_class
    head = f"fused {_ops(f.ops)} ({len(f.before)} kernels) into "
    if f.evidence == "GEMM epilogue":
        return [f"fused {_ops(f.ops)} into the GEMM's epilogue (", kname(f.after), " replaces ",
                kname(f.before[0]), f" + {len(f.before) - 1} kernel{'s' if len(f.before) > 2 else ''})"]
    if cls == "triton_fused":
        return [head + "one Inductor Triton kernel ", kname(f.after)]
    if cls == "triton_custom":
        tail = [" (launched by ", Code(f.after.cpu_op), ")"] if f.after.cpu_op else []
        return [head + "one hand-written Triton kernel ", kname(f.after), *tail]
    return [head + f"one {cls} kernel ", kname(f.after)]


def verdict_parts(diff) -> list[str]:
    """The verdict as a list of segments; :class:`Code` segments are names."""
    parts: list[list[str]] = []
    al = diff.alignment
    for f in al.fusions:
        parts.append(_fusion_parts(f))
    for s in al.splits:
        parts.append(["split ", kname(s.before), f" into {len(s.after)} kernels"])
    if al.changed:
        n = len(al.changed)
        parts.append([f"{n} kernel{'s' if n > 1 else ''} changed variant (" +
                      "; ".join(", ".join(f"{k} {va}→{vb}" for k, va, vb in c.fields[:3]) or "name"
                                for c in al.changed[:2]) + ")"])
    for x, y in al.replaced[:2]:
        parts.append([kname(x), " replaced by ", kname(y), f" ({x.kernel_class} → {y.kernel_class})"])
    if len(al.replaced) > 2:
        parts.append([f"{len(al.replaced) - 2} more kernels replaced"])
    for kernels, verb in ((al.removed, "removed"), (al.added, "added")):
        if 0 < len(kernels) <= 2:
            seg: list[str] = []
            for n, x in enumerate(kernels):
                seg += ([" and "] if n else []) + [kname(x)]
            parts.append(seg + [f" {verb}"])
        elif kernels:
            parts.append([f"{len(kernels)} kernels {verb}"])
    gemms = [ka for ka, _ in al.unchanged if ka.kernel_class == "gemm"]
    if diff.structural_change and gemms:
        if len(gemms) == 1:
            parts.append(["the same GEMM kernel ", kname(gemms[0])])
        else:
            parts.append([f"the {_count_word(len(gemms))} GEMMs unchanged"])
    elif diff.structural_change and al.is_identical:
        parts.append(["the same kernels"])
    q = diff.quantities.get("gpu_time")
    if q is not None and (q.delta != 0 or diff.structural_change):
        noise = f"±{fmt_value(q.noise, 'ns')}"
        if q.delta == 0:
            parts.append([f"GPU time per step unchanged ({fmt_value(q.a, 'ns')})"])
        elif q.within_noise:
            parts.append([f"GPU time per step {fmt_value(q.a, 'ns')} → {fmt_value(q.b, 'ns')}, "
                          f"within the step-to-step noise ({noise}): neither a win nor a loss"])
        else:
            pct = f"{q.delta_pct:+.1f}%" if q.delta_pct is not None else "new"
            parts.append([f"GPU time per step {fmt_value(q.a, 'ns')} → {fmt_value(q.b, 'ns')} "
                          f"({pct}, outside the step-to-step noise of {noise})"])
    rt, rn = diff.quantities.get("round_trip_bytes"), diff.quantities.get("round_trip_tensors")
    if rt is not None and rt.delta != 0:
        word = "fewer" if rt.delta < 0 else "more"
        n = abs(int(rn.delta)) if rn and rn.delta else 0
        count = (f"{_count_word(n)} round-trip tensor{'s' if n != 1 else ''} " if n else "round trips ")
        seg = [f"{count}({abs(int(rt.delta)):,} B) {word} per step"]
        gone = diff.tensors_fused_away
        if rt.delta < 0 and gone:
            seg += [": ", Code(gone[0]["producer_op"]), " → ", Code(gone[0]["consumer_op"]),
                    f" {gone[0]['shape']} now stays inside the fused kernel"]
            if len(gone) > 1:
                seg.append(f" (and {len(gone) - 1} more)")
        parts.append(seg)
    tax = diff.quantities.get("preop_tax")
    if tax is not None and tax.delta != 0:
        if tax.a == 0:
            parts.append([f"the CPU now pays {fmt_value(tax.b, 'ns')} of compile pre-ops per step"])
        elif tax.b == 0:
            parts.append([f"the CPU no longer pays {fmt_value(tax.a, 'ns')} of compile pre-ops per step"])
        elif not tax.within_noise:
            parts.append([f"compile pre-ops {fmt_value(tax.a, 'ns')} → {fmt_value(tax.b, 'ns')} per step"])
    cpu = diff.quantities.get("cpu_time")
    if cpu is not None and cpu.delta != 0 and not cpu.within_noise:
        parts.append([f"CPU dispatch per step {fmt_value(cpu.a, 'ns')} → {fmt_value(cpu.b, 'ns')}"])
    quiet = [o for o in diff.cpu_ops_removed if not o.launches_gpu]
    if quiet:
        seg: list[str] = ["CPU dispatch of "]
        for n, o in enumerate(quiet[:4]):
            seg += ([", "] if n else []) + [Code(o.name)]
        more = f" and {len(quiet) - 4} more" if len(quiet) > 4 else ""
        seg.append(f"{more} (ops that launch no GPU work) is gone")
        parts.append(seg)
    for key, noun in (("memsets", "memset"), ("memcpys", "memcpy")):
        hq = diff.quantities.get(key)
        if hq is not None and hq.delta != 0 and not hq.within_noise:
            n = abs(hq.delta)
            parts.append([f"{fmt_value(n, 'count')} hidden {noun}{'s' if n != 1 else ''} per step "
                          f"{'appeared' if hq.delta > 0 else 'disappeared'} ({fmt_value(hq.a, 'count')} → "
                          f"{fmt_value(hq.b, 'count')})"])
    launches = diff.quantities.get("launches")
    if launches is not None and launches.delta != 0 and not launches.within_noise:
        parts.append([f"{fmt_value(launches.a, 'count')} → {fmt_value(launches.b, 'count')} launch calls per step"])
    if not parts:
        return ["No change: the same kernels run in every step and every quantity is within the "
                "step-to-step noise."]
    out: list[str] = []
    for n, part in enumerate(parts):
        if n:
            out.append("; ")
        first = part[0]
        if n == 0 and not isinstance(first, Code):
            first = first[:1].upper() + first[1:]
        out += [first, *part[1:]]
    out.append(".")
    return out


def _count_word(n: int) -> str:
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    return words[n] if n < len(words) else f"{n:,}"


def plain(parts: list[str]) -> str:
    return "".join(parts)


def quantity_rows(diff) -> tuple[list[str], list[list[str]]]:
    n = min(len(diff.a.units), len(diff.b.units))
    headers = [f"per step (median of {n})" if n > 1 else "per step", "A", "B", "Δ", "noise ±", ""]
    rows = []
    for q in diff.quantities.values():
        if q.key in ("memcpys", "memsets", "preop_tax", "round_trip_tensors") and q.a == 0 and q.b == 0:
            continue
        rows.append([q.label, fmt_value(q.a, q.unit), fmt_value(q.b, q.unit), fmt_delta(q),
                     fmt_value(q.noise, q.unit), fmt_status(q)])
    return headers, rows


def unavailable_line(diff) -> str | None:
    if not diff.unavailable:
        return None
    by_reason: dict[str, list[str]] = {}
    for key, reason in diff.unavailable.items():
        by_reason.setdefault(reason, []).append(key)
    return "Not measured: " + "; ".join(f"{', '.join(keys)} ({reason})" for reason, keys in by_reason.items())


def gate_rows(results: list[gates_mod.GateResult]) -> Table:
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


def changes_table(diff) -> Table:
    al = diff.alignment
    rows: list[list[str]] = []
    for f in al.fusions:
        rows.append([f"fusion ({f.evidence})", Code(" + ".join(short_kernel_name(k.name, k.decoded) for k in f.before)),
                     kname(f.after), _ops(f.ops)])
    for s in al.splits:
        rows.append([f"split ({s.evidence})", kname(s.before),
                     Code(" + ".join(short_kernel_name(k.name, k.decoded) for k in s.after)), _ops(s.ops)])
    for c in al.changed:
        rows.append(["variant changed", kname(c.before), kname(c.after),
                     ", ".join(f"{k}: {va} → {vb}" for k, va, vb in c.fields) or "name only"])
    for x, y in al.replaced:
        rows.append(["replaced", kname(x), kname(y), f"{x.kernel_class} → {y.kernel_class}"])
    for k in al.removed:
        rows.append(["removed", kname(k), "", k.kernel_class])
    for k in al.added:
        rows.append(["added", "", kname(k), k.kernel_class])
    for ka, kb, n in _unique_unchanged(al):
        rows.append([f"unchanged ×{n}" if n > 1 else "unchanged", kname(ka), kname(kb), ka.kernel_class])
    title = f"Kernel changes (one step; the same in {diff.pairs_agreeing} of {len(diff.unit_pairs)} step pairs)"
    return (title, ["change", "A", "B", "detail"], rows)


def _unique_unchanged(al):
    """Unchanged kernels once per identity, in order, with how often each runs in the step."""
    counts: dict[str, int] = {}
    for ka, _ in al.unchanged:
        counts[ka.identity] = counts.get(ka.identity, 0) + 1
    seen, out = set(), []
    for ka, kb in al.unchanged:
        if ka.identity not in seen:
            seen.add(ka.identity)
            out.append((ka, kb, counts[ka.identity]))
    return out


def class_table(diff) -> Table:
    rows = [[Code(q.label), fmt_value(q.a, "ns"), fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"),
             fmt_status(q)] for q in diff.classes]
    return ("GPU time per kernel class (per step)", ["class", "A", "B", "Δ", "noise ±", ""], rows)


def kernel_table(diff) -> Table:
    rows = []
    for kt in diff.kernel_times:
        q = kt.quantity
        rows.append([Code(short_kernel_name(kt.name_a)), kt.kernel_class, fmt_value(q.a, "ns"),
                     fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"), fmt_status(q)])
    return ("GPU time per unchanged kernel (per step)",
            ["kernel", "class", "A", "B", "Δ", "noise ±", ""], rows)


def cpu_ops_table(diff) -> Table:
    rows = []
    for label, ops in (("gone in B", diff.cpu_ops_removed), ("new in B", diff.cpu_ops_added)):
        for o in ops:
            rows.append([label, Code(o.name), fmt_value(o.count, "count"), fmt_value(o.cpu_ns, "ns"),
                         "yes" if o.launches_gpu else "no"])
    return ("CPU ops that appeared or disappeared (per step)",
            ["", "op", "count", "CPU time (inclusive)", "launches GPU work"], rows)


def preops_table(diff) -> Table:
    kinds = sorted(set(diff.preops_a) | set(diff.preops_b))
    rows = [[k, fmt_value(diff.preops_a.get(k, 0), "ns"), fmt_value(diff.preops_b.get(k, 0), "ns")] for k in kinds]
    return ("torch.compile pre-ops (CPU per step; the tax is cache_lookup + pregraph_bytecode + aot_prologue)",
            ["wrapper", "A", "B"], rows)


def tensors_table(diff) -> Table:
    rows = []
    for side, label, tensors in (("A", diff.a, diff.tensors_a), ("B", diff.b, diff.tensors_b)):
        step = label.unit_labels[label.units[-1]] if label.units else ""
        for t in tensors:
            rows.append([f"{side} ({step})", Code(t["producer_op"]), Code(t["consumer_op"]), t["shape"],
                         t["dtype"], fmt_value(t["bytes"], "bytes")])
    return ("Round-trip tensors (written to HBM by one kernel, read back by a later one; last step)",
            ["trace", "written by", "read by", "shape", "dtype", "bytes"], rows)


def hidden_table(diff) -> Table:
    keys = sorted(set(diff.hidden_a) | set(diff.hidden_b))
    rows = [[Code(k), fmt_value(diff.hidden_a.get(k, 0), "count"), fmt_value(diff.hidden_b.get(k, 0), "count")]
            for k in keys]
    return ("Hidden memset / memcpy (per step)", ["activity", "A", "B"], rows)


def method_lines(diff) -> list[str]:
    from tracekit.diff.compare import NOISE_RULE
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
    return lines + list(diff.notes)


def detail_tables(diff) -> list[Table]:
    return [changes_table(diff), class_table(diff), kernel_table(diff), cpu_ops_table(diff),
            preops_table(diff), hidden_table(diff)] + (
                [tensors_table(diff)] if "round_trip_bytes" not in diff.unavailable else [])


def check_rows(result) -> Table:
    rows = [[r.key, Code(expected_text(r)), observed_text(r), "met" if r.met else "BROKEN"] for r in result.items]
    return ("Expectations", ["expectation", "expected", "observed", "result"], rows)


def check_title(result) -> str:
    broken = sum(1 for r in result.items if not r.met)
    return (f"{result.trace}: {len(result.items) - broken} of {len(result.items)} expectations met"
            + (f", {broken} broken" if broken else ""))


def describe(k) -> str:
    return describe_decoded(k.decoded)


# -- an expectation's figures as words (every format shows the same text) -------------------------

def _us(ns: float) -> int | float:
    # The file's µs limit back from ns: an integer limit prints as one ("240", not "240.0").
    return int(ns) // 1000 if isinstance(ns, int) and ns % 1000 == 0 else ns / 1000


#: (unit, op) -> the expected value as words, for bounds.
_EXPECTED: dict[tuple[str, str], Callable[[Any], str]] = {
    ("count", "=="): lambda v: f"exactly {v}", ("count", ">="): lambda v: f"≥ {v}",
    ("count", "<="): lambda v: f"≤ {v:,}", ("bytes", "<="): lambda v: f"≤ {v:,}",
    ("percent", ">="): lambda v: f"≥ {v}%", ("ns", "<="): lambda v: f"≤ {_us(v):,} µs",
}
#: unit -> one observed value as words.
_OBSERVED: dict[str, Callable[[Any], str]] = {
    "count": lambda v: f"{int(v):,}", "bytes": lambda v: f"{int(v):,}",
    "percent": lambda v: f"{v:.1f}%", "ns": lambda v: f"{v / 1000:,.1f} µs",
}


def expected_text(item: Item) -> str:
    """What the expectation asks, in words: "exactly 4", "≤ 240 µs", "present", or the pattern."""
    if item.unit == "names":
        return str(item.expected_value)
    if item.unit == "bool":
        return "present" if item.expected_value else "absent"
    return _EXPECTED[item.unit, item.op](item.expected_value)


def observed_text(item: Item) -> str:
    """What the units showed, in words: "5 in every step", "4–5 across steps", "absent"…"""
    if item.unit == "names":
        if item.op == "present":
            return (f"{item.example} in every step" if item.met else
                    f"in {item.steps_present} of {item.steps} steps" if item.steps_present else "absent")
        return "absent" if item.met else f"{item.example} in {item.steps_present} of {item.steps} steps"
    if item.unit == "bool":
        return ("present in every step" if item.steps and item.steps_present == item.steps else
                "absent in every step" if not item.steps_present else
                f"present in {item.steps_present} of {item.steps} steps")
    if item.observed_min is None or item.observed_max is None:
        return "no steps"
    word = _OBSERVED[item.unit]
    if item.observed_min == item.observed_max:
        return f"{word(item.observed_min)} in every step"
    return f"{word(item.observed_min)}–{word(item.observed_max)} across steps"
