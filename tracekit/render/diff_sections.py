"""The diff's and the check's content as display rows, shared by the terminal, Markdown and JSON renderers.

Cells are plain strings, or :class:`~tracekit.render.text.Code` for names (kernels, ops) that
Markdown shows as code. Functions word a :class:`~tracekit.diff.result.Diff` or a
:class:`~tracekit.diff.expect.CheckResult`; they never compute a figure nor decide what counts:
medians, deltas and noise come from the Diff, the verdict's clauses from its findings
(:mod:`tracekit.diff.diff_verdict`), an expectation's figures from its check item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tracekit.classify.names import short_kernel_name
from tracekit.render.text import Code, Table, us

if TYPE_CHECKING:
    from tracekit.diff.expect import CheckResult, Item
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff, Quantity
    from tracekit.diff.verdict import Verdict


class Kernel(Protocol):
    """What naming a kernel needs (a diff's kernel reference or a finding's subject)."""

    @property
    def name(self) -> str: ...

    @property
    def decoded(self) -> Mapping[str, Any]: ...


def kname(k: Kernel) -> Code:
    return Code(short_kernel_name(k.name, dict(k.decoded)))


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "ns":
        return us(int(round(value)))
    if unit == "bytes":
        return f"{int(value):,} B"
    return f"{value:,.1f}" if not float(value).is_integer() else f"{int(value):,}"


def fmt_delta(q: Quantity) -> str:
    sign = "+" if q.delta > 0 else ("-" if q.delta < 0 else "±")
    text = sign + fmt_value(abs(q.delta), q.unit)
    if q.delta and q.delta_pct is not None:
        text += f" ({q.delta_pct:+.1f}%)"
    elif q.delta and q.a == 0:
        text += " (new)"
    return text


def fmt_status(q: Quantity) -> str:
    return {"same": "same", "within noise": "within noise", "up": "higher", "down": "lower"}[q.direction]


def _ops(ops: Sequence[str]) -> str:
    return " + ".join(ops) if ops else "?"


# -- the verdict: one clause per finding ---------------------------------------------------------

def _n(f: Verdict, key: str) -> float:
    """A number of a finding (the kinds' quantities are documented in :mod:`tracekit.diff.diff_verdict`)."""
    value = f.quantities[key]
    if not isinstance(value, (int, float)):
        raise TypeError(f"{f.kind}.{key} is not a number: {value!r}")
    return value


def _fusion(f: Verdict) -> list[str]:
    before, (after,) = f.of("before"), f.of("after")
    ops, n = _ops([s.name for s in f.of("op")]), int(_n(f, "kernels"))
    head = f"fused {ops} ({n} kernels) into "
    if f.quantities["evidence"] == "GEMM epilogue":
        return [f"fused {ops} into the GEMM's epilogue (", kname(after), " replaces ",
                kname(before[0]), f" + {n - 1} kernel{'s' if n > 2 else ''})"]
    if after.kernel_class == "triton_fused":
        return [head + "one Inductor Triton kernel ", kname(after)]
    if after.kernel_class == "triton_custom":
        tail = [" (launched by ", Code(s.name), ")"] if (s := next(iter(f.of("launched_by")), None)) else []
        return [head + "one hand-written Triton kernel ", kname(after), *tail]
    return [head + f"one {after.kernel_class} kernel ", kname(after)]


def _split(f: Verdict) -> list[str]:
    return ["split ", kname(f.of("before")[0]), f" into {int(_n(f, 'kernels'))} kernels"]


def _variant_change(f: Verdict) -> list[str]:
    n = int(_n(f, "kernels"))
    fields = "; ".join(", ".join(f"{k} {va}→{vb}" for k, va, vb in s.changes) or "name" for s in f.of("after"))
    return [f"{n} kernel{'s' if n > 1 else ''} changed variant ({fields})"]


def _replaced(f: Verdict) -> list[str]:
    (x,), (y,) = f.of("before"), f.of("after")
    return [kname(x), " replaced by ", kname(y), f" ({x.kernel_class} → {y.kernel_class})"]


def _named_or_counted(f: Verdict) -> list[str]:
    if not f.subjects:
        return [f"{int(_n(f, 'kernels'))} kernels {f.kind}"]
    seg: list[str] = []
    for n, s in enumerate(f.subjects):
        seg += ([" and "] if n else []) + [kname(s)]
    return seg + [f" {f.kind}"]


def _gemms_unchanged(f: Verdict) -> list[str]:
    if f.subjects:
        return ["the same GEMM kernel ", kname(f.subjects[0])]
    return [f"the {_count_word(int(_n(f, 'kernels')))} GEMMs unchanged"]


def _gpu_time(f: Verdict) -> list[str]:
    a, b = fmt_value(_n(f, "a"), "ns"), fmt_value(_n(f, "b"), "ns")
    noise = f"±{fmt_value(_n(f, 'noise'), 'ns')}"
    if _n(f, "delta") == 0:
        return [f"GPU time per step unchanged ({a})"]
    if f.quantities["within_noise"]:
        return [f"GPU time per step {a} → {b}, within the step-to-step noise ({noise}): neither a win nor a loss"]
    pct = f"{_n(f, 'delta_pct'):+.1f}%" if f.quantities["delta_pct"] is not None else "new"
    return [f"GPU time per step {a} → {b} ({pct}, outside the step-to-step noise of {noise})"]


def _round_trip_bytes(f: Verdict) -> list[str]:
    delta, n = _n(f, "bytes_delta"), abs(int(_n(f, "tensors_delta")))
    count = f"{_count_word(n)} round-trip tensor{'s' if n != 1 else ''} " if n else "round trips "
    seg: list[str] = [f"{count}({abs(int(delta)):,} B) {'fewer' if delta < 0 else 'more'} per step"]
    if f.of("producer"):
        seg += [": ", Code(f.of("producer")[0].name), " → ", Code(f.of("consumer")[0].name),
                f" {f.quantities['shape']} now stays inside the fused kernel"]
        if _n(f, "more_tensors"):
            seg.append(f" (and {int(_n(f, 'more_tensors'))} more)")
    return seg


def _preop_tax(f: Verdict) -> list[str]:
    a, b = _n(f, "a"), _n(f, "b")
    if a == 0:
        return [f"the CPU now pays {fmt_value(b, 'ns')} of compile pre-ops per step"]
    if b == 0:
        return [f"the CPU no longer pays {fmt_value(a, 'ns')} of compile pre-ops per step"]
    return [f"compile pre-ops {fmt_value(a, 'ns')} → {fmt_value(b, 'ns')} per step"]


def _cpu_time(f: Verdict) -> list[str]:
    return [f"CPU dispatch per step {fmt_value(_n(f, 'a'), 'ns')} → {fmt_value(_n(f, 'b'), 'ns')}"]


def _quiet_ops_gone(f: Verdict) -> list[str]:
    seg: list[str] = ["CPU dispatch of "]
    for n, s in enumerate(f.subjects):
        seg += ([", "] if n else []) + [Code(s.name)]
    more = int(_n(f, "ops")) - len(f.subjects)
    seg.append(f"{f' and {more} more' if more > 0 else ''} (ops that launch no GPU work) is gone")
    return seg


def _hidden(noun: str) -> Callable[[Verdict], list[str]]:
    def words(f: Verdict) -> list[str]:
        delta = _n(f, "delta")
        n = abs(delta)
        return [f"{fmt_value(n, 'count')} hidden {noun}{'s' if n != 1 else ''} per step "
                f"{'appeared' if delta > 0 else 'disappeared'} ({fmt_value(_n(f, 'a'), 'count')} → "
                f"{fmt_value(_n(f, 'b'), 'count')})"]
    return words


#: Version keys as words, with how their values read ("12080" -> "12.8" for CUDA's version numbers).
_VERSION_WORDS: dict[str, tuple[str, Callable[[str], str]]] = {
    "cuda_runtime_version": ("CUDA runtime", lambda v: _cuda_version(v)),
    "cuda_driver_version": ("CUDA driver", lambda v: _cuda_version(v)),
    "cupti_version": ("CUPTI", str), "roctracer_version": ("roctracer", str),
    "rocprofiler_version": ("rocprofiler", str), "hip_runtime_version": ("HIP runtime", str),
    "hip_driver_version": ("HIP driver", str), "nccl_version": ("NCCL", str),
}
_DEVICE_PREFIXES = ("NVIDIA ", "Tesla ", "GeForce ", "AMD ", "Instinct ", "Radeon ")


def _cuda_version(value: str) -> str:
    """CUDA's 1000 * major + 10 * minor as major.minor; anything else as written."""
    if not value.isdigit() or int(value) < 1000:
        return value
    n = int(value)
    return f"{n // 1000}.{n % 1000 // 10}"


def _device(names: str) -> str:
    out = []
    for name in names.split(" + "):
        short = name
        while short.startswith(_DEVICE_PREFIXES):
            short = short.split(" ", 1)[1]
        out.append(short or name)
    return " + ".join(out)


def _different_devices(f: Verdict) -> list[str]:
    a, b = str(f.quantities["a"]), str(f.quantities["b"])
    sa, sb = _device(a), _device(b)
    if sa == sb:
        sa, sb = a, b
    return [f"A: {sa}, B: {sb} — kernel times are not comparable across devices"]


def _different_versions(f: Verdict) -> list[str]:
    def side(n: int) -> str:
        parts = []
        for s in f.subjects:
            key, *values = s.changes[0]
            label, word = _VERSION_WORDS.get(key, (key, str))
            parts.append(f"{label} {word(str(values[n]))}")
        return ", ".join(parts)
    return [f"A: {side(0)}; B: {side(1)} — other software versions can change the kernels and their times"]


def _different_world_size(f: Verdict) -> list[str]:
    return [f"A: world size {f.quantities['a']}, B: world size {f.quantities['b']} — each rank's share of the "
            "work differs"]


def _host_sync(f: Verdict) -> list[str]:
    (sync,) = f.of("cpu_op")
    a, b, ca, cb = _n(f, "a"), _n(f, "b"), _n(f, "count_a"), _n(f, "count_b")
    if a == 0:
        return ["a host sync appeared: ", Code(sync.name), f" {fmt_value(b, 'ns')} per step "
                f"({fmt_value(cb, 'count')} call{'s' if cb != 1 else ''})"]
    if b == 0:
        return ["the host sync ", Code(sync.name), f" ({fmt_value(a, 'ns')} per step) is gone"]
    calls = f" ({fmt_value(ca, 'count')} → {fmt_value(cb, 'count')} calls)" if ca != cb else ""
    return ["host sync ", Code(sync.name), f" {fmt_value(a, 'ns')} → {fmt_value(b, 'ns')} per step{calls}"]


def _graph_launches(f: Verdict) -> list[str]:
    a, b = fmt_value(_n(f, "a"), "count"), fmt_value(_n(f, "b"), "count")
    if _n(f, "a") == 0:
        return [f"CUDA-graph launches appeared ({b} per step)"]
    if _n(f, "b") == 0:
        return [f"CUDA-graph launches vanished ({a} per step in A)"]
    return [f"CUDA-graph launches per step {a} → {b}"]


def _launches(f: Verdict) -> list[str]:
    return [f"{fmt_value(_n(f, 'a'), 'count')} → {fmt_value(_n(f, 'b'), 'count')} launch calls per step"]


#: How each kind of finding is worded (kinds: :mod:`tracekit.diff.diff_verdict`).
CLAUSES: dict[str, Callable[[Verdict], list[str]]] = {
    "fusion": _fusion, "split": _split, "variant_change": _variant_change, "replaced": _replaced,
    "more_replaced": lambda f: [f"{f.quantities['kernels']} more kernels replaced"],
    "removed": _named_or_counted, "added": _named_or_counted, "gemms_unchanged": _gemms_unchanged,
    "same_kernels": lambda f: ["the same kernels"], "gpu_time": _gpu_time,
    "round_trip_bytes": _round_trip_bytes, "preop_tax": _preop_tax, "cpu_time": _cpu_time,
    "quiet_ops_gone": _quiet_ops_gone, "memsets": _hidden("memset"), "memcpys": _hidden("memcpy"),
    "launches": _launches, "different_devices": _different_devices, "different_versions": _different_versions,
    "different_world_size": _different_world_size, "host_sync": _host_sync, "graph_launches": _graph_launches,
}
NO_CHANGE = "No change: the same kernels run in every step and every quantity is within the step-to-step noise."
#: After findings about the traces' setup alone (:data:`tracekit.diff.diff_verdict.SETUP_KINDS`).
NO_OTHER_CHANGE = "no other change: the same kernels run in every step and every quantity is within the step-to-step noise"


def verdict_parts(diff: Diff) -> list[str]:
    """The verdict as a list of segments, one clause per finding; :class:`Code` segments are names."""
    from tracekit.diff.diff_verdict import SETUP_KINDS

    if not diff.findings:
        return [NO_CHANGE]
    out: list[str] = []
    for n, finding in enumerate(diff.findings):
        first, *rest = CLAUSES[finding.kind](finding)
        if n:
            out.append("; ")
        elif not isinstance(first, Code):
            first = first[:1].upper() + first[1:]
        out += [first, *rest]
    if all(f.kind in SETUP_KINDS for f in diff.findings):
        out += ["; ", NO_OTHER_CHANGE]
    out.append(".")
    return out


def _count_word(n: int) -> str:
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    return words[n] if n < len(words) else f"{n:,}"


def plain(parts: Sequence[str]) -> str:
    return "".join(parts)


def quantity_rows(diff: Diff) -> tuple[list[str], list[list[str]]]:
    n = min(len(diff.a.units), len(diff.b.units))
    headers = [f"per step (median of {n})" if n > 1 else "per step", "A", "B", "Δ", "noise ±", ""]
    rows = []
    syncs_found = any(f.kind == "host_sync" for f in diff.findings)
    for q in diff.quantities.values():
        if q.key in ("memcpys", "memsets", "preop_tax", "round_trip_tensors", "graph_launches") and q.a == 0 and q.b == 0:
            continue
        if q.key == "host_sync" and not syncs_found:  # shown when the verdict speaks of host syncs
            continue
        rows.append([q.label, fmt_value(q.a, q.unit), fmt_value(q.b, q.unit), fmt_delta(q),
                     fmt_value(q.noise, q.unit), fmt_status(q)])
    return headers, rows


def unavailable_line(diff: Diff) -> str | None:
    if not diff.unavailable:
        return None
    by_reason: dict[str, list[str]] = {}
    for key, reason in diff.unavailable.items():
        by_reason.setdefault(reason, []).append(key)
    return "Not measured: " + "; ".join(f"{', '.join(keys)} ({reason})" for reason, keys in by_reason.items())


def gate_rows(results: Sequence[GateResult]) -> Table:
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


def changes_table(diff: Diff) -> Table:
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
    for ka, kb, n in al.unchanged_once():
        rows.append([f"unchanged ×{n}" if n > 1 else "unchanged", kname(ka), kname(kb), ka.kernel_class])
    title = f"Kernel changes (one step; the same in {diff.pairs_agreeing} of {len(diff.unit_pairs)} step pairs)"
    return (title, ["change", "A", "B", "detail"], rows)


def class_table(diff: Diff) -> Table:
    rows = [[Code(q.label), fmt_value(q.a, "ns"), fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"),
             fmt_status(q)] for q in diff.classes]
    return ("GPU time per kernel class (per step)", ["class", "A", "B", "Δ", "noise ±", ""], rows)


def kernel_table(diff: Diff) -> Table:
    rows = []
    for kt in diff.kernel_times:
        q = kt.quantity
        rows.append([Code(short_kernel_name(kt.name_a)), kt.kernel_class, fmt_value(q.a, "ns"),
                     fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"), fmt_status(q)])
    return ("GPU time per unchanged kernel (per step)",
            ["kernel", "class", "A", "B", "Δ", "noise ±", ""], rows)


def cpu_ops_table(diff: Diff) -> Table:
    rows = []
    for label, ops in (("gone in B", diff.cpu_ops_removed), ("new in B", diff.cpu_ops_added)):
        for o in ops:
            rows.append([label, Code(o.name), fmt_value(o.count, "count"), fmt_value(o.cpu_ns, "ns"),
                         "yes" if o.launches_gpu else "no"])
    return ("CPU ops that appeared or disappeared (per step)",
            ["", "op", "count", "CPU time (inclusive)", "launches GPU work"], rows)


def preops_table(diff: Diff) -> Table:
    kinds = sorted(set(diff.preops_a) | set(diff.preops_b))
    rows = [[k, fmt_value(diff.preops_a.get(k, 0), "ns"), fmt_value(diff.preops_b.get(k, 0), "ns")] for k in kinds]
    return ("torch.compile pre-ops (CPU per step; the tax is cache_lookup + pregraph_bytecode + aot_prologue)",
            ["wrapper", "A", "B"], rows)


def tensors_table(diff: Diff) -> Table:
    rows = []
    for side, label, tensors in (("A", diff.a, diff.tensors_a), ("B", diff.b, diff.tensors_b)):
        step = label.unit_labels[label.units[-1]] if label.units else ""
        for t in tensors:
            rows.append([f"{side} ({step})", Code(t["producer_op"]), Code(t["consumer_op"]), t["shape"],
                         t["dtype"], fmt_value(t["bytes"], "bytes")])
    return ("Round-trip tensors (written to HBM by one kernel, read back by a later one; last step)",
            ["trace", "written by", "read by", "shape", "dtype", "bytes"], rows)


def hidden_table(diff: Diff) -> Table:
    keys = sorted(set(diff.hidden_a) | set(diff.hidden_b))
    rows = [[Code(k), fmt_value(diff.hidden_a.get(k, 0), "count"), fmt_value(diff.hidden_b.get(k, 0), "count")]
            for k in keys]
    return ("Hidden memset / memcpy (per step)", ["activity", "A", "B"], rows)


def method_lines(diff: Diff) -> list[str]:
    from tracekit.diff.result import NOISE_RULE
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


def host_sync_table(diff: Diff) -> Table:
    rows = []
    for s in diff.host_syncs:
        q = s.quantity
        rows.append([Code(s.name), fmt_value(q.a, "ns"), fmt_value(q.b, "ns"), fmt_delta(q), fmt_value(q.noise, "ns"),
                     fmt_status(q), fmt_value(s.count_a, "count"), fmt_value(s.count_b, "count")])
    return ("Host syncs (the CPU blocked waiting for the GPU; outermost sync of each nest, per step)",
            ["sync", "A", "B", "Δ", "noise ±", "", "calls A", "calls B"], rows)


def detail_tables(diff: Diff) -> list[Table]:
    syncs = [host_sync_table(diff)] if any(f.kind == "host_sync" for f in diff.findings) else []
    from tracekit.render.finding_sections import changes_table as findings_changes

    changed = [("new in B", f) for f in diff.findings_new] + [("resolved in B", f) for f in diff.findings_resolved]
    found = [findings_changes(changed)] if changed else []
    return found + [changes_table(diff), class_table(diff), kernel_table(diff), cpu_ops_table(diff),
            preops_table(diff), hidden_table(diff)] + syncs + (
                [tensors_table(diff)] if "round_trip_bytes" not in diff.unavailable else [])


def check_rows(result: CheckResult) -> Table:
    rows = [[r.key, Code(expected_text(r)), observed_text(r), "met" if r.met else "BROKEN"] for r in result.items]
    return ("Expectations", ["expectation", "expected", "observed", "result"], rows)


def check_title(result: CheckResult) -> str:
    broken = sum(1 for r in result.items if not r.met)
    return (f"{result.trace}: {len(result.items) - broken} of {len(result.items)} expectations met"
            + (f", {broken} broken" if broken else ""))


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
