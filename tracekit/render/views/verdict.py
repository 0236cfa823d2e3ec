"""The diff's words: its verdict, one clause per finding (:mod:`tracekit.diff.diff_verdict`), and how a
quantity, its change and its status read. Every format says the same sentence; ``tracekit.diff/1``
carries it as plain text (:func:`plain`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tracekit.classify.names import short_kernel_name
from tracekit.render.text import Code, us

if TYPE_CHECKING:
    from tracekit.results.diff import Diff, Quantity
    from tracekit.results.verdict import Verdict


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


def joined_ops(ops: Sequence[str]) -> str:
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
    ops, n = joined_ops([s.name for s in f.of("op")]), int(_n(f, "kernels"))
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
    def shown(v: object) -> str:  # a field one kernel's name does not carry
        return "(not in the name)" if v is None else str(v)

    fields = "; ".join(", ".join(f"{k} {shown(va)}→{shown(vb)}" for k, va, vb in s.changes) or "name"
                       for s in f.of("after"))
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
    n, changed = int(_n(f, "kernels")), int(f.quantities.get("changed") or 0)
    if changed:
        return [f"{n:,} of {n + changed:,} GEMM{'s' if n + changed > 1 else ''} unchanged ({changed:,} changed)"]
    if f.subjects:
        return ["the same GEMM kernel ", kname(f.subjects[0])]
    return [f"the {_count_word(n)} GEMMs unchanged"]


def _count_change(f: Verdict) -> list[str]:
    (op,), (x,), (y,) = f.of("launched_by"), f.of("before"), f.of("after")
    a, b = int(_n(f, "a")), int(_n(f, "b"))
    same = short_kernel_name(x.name, dict(x.decoded)) == short_kernel_name(y.name, dict(y.decoded))
    names = [kname(y)] if same else [kname(x), " / ", kname(y)]
    return [*names, f": {a} → {b} per step (kernels of ", Code(op.name), ")"]


def _device_choice(f: Verdict) -> list[str]:
    before, after, ops = f.of("before"), f.of("after"), f.of("launched_by")
    seg: list[str] = []
    for n, (x, y, op) in enumerate(zip(before, after, ops)):
        seg += ([", "] if n else []) + [Code(op.name), " runs ", kname(y), " instead of ", kname(x)]
    n = int(_n(f, "kernels"))
    return [*seg, f"{f' ({n} kernels in all)' if n > len(before) else ''} — the device's library choosing its "
            "kernels, not a change of the program"]


def _per(f: Verdict) -> str:
    """What a figure is per: ``step``, or ``sweep`` (one step of each shape) when shapes vary."""
    return str(f.quantities.get("per", "step"))


def _gpu_time(f: Verdict) -> list[str]:
    a, b = fmt_value(_n(f, "a"), "ns"), fmt_value(_n(f, "b"), "ns")
    noise, per = f"±{fmt_value(_n(f, 'noise'), 'ns')}", _per(f)
    if _n(f, "delta") == 0:
        return [f"GPU time per {per} unchanged ({a})"]
    if f.quantities["within_noise"]:
        return [f"GPU time per {per} {a} → {b}, within the step-to-step noise ({noise}): neither a win nor a loss"]
    pct = f"{_n(f, 'delta_pct'):+.1f}%" if f.quantities["delta_pct"] is not None else "new"
    return [f"GPU time per {per} {a} → {b} ({pct}, outside the step-to-step noise of {noise})"]


def _token_time(f: Verdict) -> list[str]:
    a, b = fmt_value(_n(f, "a"), "ns"), fmt_value(_n(f, "b"), "ns")
    phase = f.quantities["phase"]
    if a == b:
        return [f"wall per {phase} token unchanged ({a})"]
    if f.quantities["within_noise"]:
        return [f"wall per {phase} token {a} → {b}, within the iteration-to-iteration noise "
                f"(±{fmt_value(_n(f, 'noise'), 'ns')})"]
    pct = f" ({_n(f, 'delta_pct'):+.1f}%)" if f.quantities["delta_pct"] is not None else ""
    return [f"wall per {phase} token {a} → {b}{pct}"]


def _round_trip_bytes(f: Verdict) -> list[str]:
    delta, n = _n(f, "bytes_delta"), abs(int(_n(f, "tensors_delta")))
    count = f"{_count_word(n)} round-trip tensor{'s' if n != 1 else ''} " if n else "round trips "
    seg: list[str] = [f"{count}({abs(int(delta)):,} B) {'fewer' if delta < 0 else 'more'} per {_per(f)}"]
    if f.of("producer"):
        seg += [": ", Code(f.of("producer")[0].name), " → ", Code(f.of("consumer")[0].name),
                f" {f.quantities['shape']} now stays inside the fused kernel"]
        if _n(f, "more_tensors"):
            seg.append(f" (and {int(_n(f, 'more_tensors'))} more)")
    return seg


def _preop_tax(f: Verdict) -> list[str]:
    a, b = _n(f, "a"), _n(f, "b")
    if a == 0:
        return [f"the CPU now pays {fmt_value(b, 'ns')} of compile pre-ops per {_per(f)}"]
    if b == 0:
        return [f"the CPU no longer pays {fmt_value(a, 'ns')} of compile pre-ops per {_per(f)}"]
    return [f"compile pre-ops {fmt_value(a, 'ns')} → {fmt_value(b, 'ns')} per {_per(f)}"]


def _cpu_time(f: Verdict) -> list[str]:
    return [f"CPU dispatch per {_per(f)} {fmt_value(_n(f, 'a'), 'ns')} → {fmt_value(_n(f, 'b'), 'ns')}"]


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
        return [f"{fmt_value(n, 'count')} hidden {noun}{'s' if n != 1 else ''} per {_per(f)} "
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
        return ["a host sync appeared: ", Code(sync.name), f" {fmt_value(b, 'ns')} per {_per(f)} "
                f"({fmt_value(cb, 'count')} call{'s' if cb != 1 else ''})"]
    if b == 0:
        return ["the host sync ", Code(sync.name), f" ({fmt_value(a, 'ns')} per {_per(f)}) is gone"]
    calls = f" ({fmt_value(ca, 'count')} → {fmt_value(cb, 'count')} calls)" if ca != cb else ""
    return ["host sync ", Code(sync.name), f" {fmt_value(a, 'ns')} → {fmt_value(b, 'ns')} per {_per(f)}{calls}"]


def _graph_launches(f: Verdict) -> list[str]:
    a, b = fmt_value(_n(f, "a"), "count"), fmt_value(_n(f, "b"), "count")
    if _n(f, "a") == 0:
        return [f"CUDA-graph launches appeared ({b} per {_per(f)})"]
    if _n(f, "b") == 0:
        return [f"CUDA-graph launches vanished ({a} per {_per(f)} in A)"]
    return [f"CUDA-graph launches per {_per(f)} {a} → {b}"]


def _launches(f: Verdict) -> list[str]:
    return [f"{fmt_value(_n(f, 'a'), 'count')} → {fmt_value(_n(f, 'b'), 'count')} launch calls per {_per(f)}"]


def _shape_basis(f: Verdict) -> str:
    return "annotated shape" if f.quantities.get("basis") == "annotation" else "input shape"


def _per_shape(f: Verdict) -> list[str]:
    n, only_a, only_b = int(_n(f, "shapes")), int(_n(f, "only_a")), int(_n(f, "only_b"))
    left = [f"{k} only {side} ran" for k, side in ((only_a, "A"), (only_b, "B")) if k]
    tail = f" ({' and '.join(left)} left out)" if left else ""
    return [f"compared shape by shape: {_count_word(n)} {_shape_basis(f)}s both traces ran{tail}, "
            "figures per sweep (one step of each shape)"]


def _no_common_shape(f: Verdict) -> list[str]:
    a, b = int(_n(f, "shapes_a")), int(_n(f, "shapes_b"))
    return [f"A and B have no {_shape_basis(f)} in common (A ran {_count_word(a)}, B {_count_word(b)}): "
            "no kernel, op or tensor is compared, only totals per sweep (one step of each of a trace's own shapes)"]


#: How each kind of finding is worded (kinds: :mod:`tracekit.diff.diff_verdict`).
CLAUSES: dict[str, Callable[[Verdict], list[str]]] = {
    "fusion": _fusion, "split": _split, "variant_change": _variant_change, "replaced": _replaced,
    "more_replaced": lambda f: [f"{f.quantities['kernels']} more kernels replaced"],
    "more_count_changes": lambda f: [f"{f.quantities['ops']} more ops launch another number of kernels per step"],
    "removed": _named_or_counted, "added": _named_or_counted, "gemms_unchanged": _gemms_unchanged,
    "same_kernels": lambda f: ["the same kernels"], "gpu_time": _gpu_time,
    "round_trip_bytes": _round_trip_bytes, "preop_tax": _preop_tax, "cpu_time": _cpu_time,
    "quiet_ops_gone": _quiet_ops_gone, "memsets": _hidden("memset"), "memcpys": _hidden("memcpy"),
    "launches": _launches, "different_devices": _different_devices, "different_versions": _different_versions,
    "different_world_size": _different_world_size, "host_sync": _host_sync, "graph_launches": _graph_launches,
    "per_shape": _per_shape, "no_common_shape": _no_common_shape, "count_change": _count_change,
    "device_choice": _device_choice, "token_time": _token_time,
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
    if all(f.kind in SETUP_KINDS or f.kind == "per_shape" for f in diff.findings):
        out += ["; ", NO_OTHER_CHANGE]
    out.append(".")
    return out


def _count_word(n: int) -> str:
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    return words[n] if n < len(words) else f"{n:,}"


def plain(parts: Sequence[str]) -> str:
    return "".join(parts)
