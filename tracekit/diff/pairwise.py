"""Diff two traces' profiles: pair their units, align their kernels, measure every per-step
quantity with its noise, and judge what changed.

Contract: :func:`diff` takes two :class:`~tracekit.analyses.profile.Profile` (A = before, B = after)
and returns a frozen :class:`~tracekit.results.diff.Diff` (its quantities follow the noise rule of
:mod:`tracekit.results.diff`); its ``findings`` are the verdict as data (which changes count,
:mod:`tracekit.diff.diff_verdict`). Pure: no printing, no I/O.

**Units.** A's and B's units (ProfilerSteps or ``--unit`` spans) are paired in order; every unit's
kernel sequence is aligned (:mod:`tracekit.diff.align`). The structural changes reported are those
of the most common sequence pair (ties: the later pair, the steadiest after warm-up);
``pairs_agreeing`` says in how many unit pairs the alignment found exactly the same changes.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import replace
from typing import Any

import polars as pl

from tracekit.diff import align as align_mod
from tracekit.diff.diff_verdict import judge
from tracekit.analyses.profile import Profile
from tracekit.results.alignment import Alignment
from tracekit.results.diff import (
    QUANTITIES,
    Diff,
    HostSync,
    KernelTime,
    OpChange,
    Quantity,
    plain_number,
    quantity,
)


def _column(profile: Profile, column: str) -> list[int]:
    values = profile.per_unit[column].to_list()
    return [int(v) for v in values if v is not None]


def _signature(al: Alignment) -> tuple:
    ids = lambda ks: tuple(k.identity for k in ks)  # noqa: E731
    return (tuple((ids(f.before), f.after.identity) for f in al.fusions),
            tuple((s.before.identity, ids(s.after)) for s in al.splits),
            tuple((c.before.identity, c.after.identity) for c in al.changed),
            tuple((x.identity, y.identity) for x, y in al.replaced),
            ids(al.removed), ids(al.added))


def _per_unit_by(frame: pl.DataFrame, units: list[int], key: str, value: str) -> dict[str, list[int]]:
    """{key: [value per unit, 0 where absent]} in unit order."""
    out: dict[str, list[int]] = {}
    index = {u: n for n, u in enumerate(units)}
    for row in frame.iter_rows(named=True):
        out.setdefault(row[key], [0] * len(units))[index[row["unit"]]] += row[value]
    return out


def _median_by(frame: pl.DataFrame, units: list[int], key: str, value: str) -> dict[str, float]:
    return {k: plain_number(statistics.median(v)) for k, v in _per_unit_by(frame, units, key, value).items()}


def _align_pairs(a: Profile, b: Profile, pairs: tuple[tuple[int, int], ...]) -> list[Alignment]:
    """The alignment of every unit pair, each distinct pair of sequences aligned once.

    A profile shares one :class:`KernelRef` per distinct kernel among its sequences, so two units
    that ran the same kernels have sequences of the same objects; steady training steps repeat,
    and a 300-step trace needs a handful of alignments instead of 300.
    """
    done: dict[tuple[tuple[int, ...], tuple[int, ...]], Alignment] = {}
    out = []
    for ua, ub in pairs:
        seq_a, seq_b = a.sequences[ua], b.sequences[ub]
        key = (tuple(map(id, seq_a)), tuple(map(id, seq_b)))
        if key not in done:
            done[key] = align_mod.align(seq_a, seq_b)
        out.append(done[key])
    return out


def diff(a: Profile, b: Profile) -> Diff:
    """Diff two profiles (A before, B after; see module docstring)."""
    notes: list[str] = []
    if a.unit_kind != b.unit_kind:
        notes.append(f"A is split into {a.unit_kind} units and B into {b.unit_kind} units")
    n = min(len(a.units), len(b.units))
    if len(a.units) != len(b.units):
        notes.append(f"A has {len(a.units)} units and B {len(b.units)}; the first {n} are paired for "
                     "kernel alignment, every steady unit counts in the medians")
    for side, p in (("A", a), ("B", b)):
        if p.excluded:
            left = ", ".join(f"{p.unit_labels[u]} ({why})" for u, why in sorted(p.excluded.items()))
            notes.append(f"{side}: {left} left out as not steady state")
    pairs = tuple(zip(a.units[:n], b.units[:n]))
    alignments = _align_pairs(a, b, pairs)
    if alignments:
        signatures = [_signature(al) for al in alignments]
        counts = Counter(signatures)
        best = max(range(len(signatures)), key=lambda i: (counts[signatures[i]], i))
        alignment, agreeing = alignments[best], counts[signatures[best]]
    else:
        alignment, agreeing = align_mod.align((), ()), 0

    unavailable = {**b.unavailable, **a.unavailable}
    for side, p in (("B", b), ("A", a)):
        if "round_trip_bytes" in unavailable or "round_trip_unknown" not in p.per_unit.columns:
            continue
        unknown = max((v for v in p.per_unit["round_trip_unknown"].to_list() if v is not None), default=0)
        if unknown:
            unavailable["round_trip_bytes"] = unavailable["round_trip_tensors"] = (
                f"{side} has up to {unknown} kernels per step without a traffic model (e.g. a CUDA-graph "
                "replay), so its round trips are incomplete")
    quantities: dict[str, Quantity] = {}
    for key, label, unit, column in QUANTITIES:
        if key in unavailable or (key == "peak_memory" and not (_column(a, column) and _column(b, column))):
            continue  # peak memory needs [memory] events in both traces
        quantities[key] = quantity(key, label, unit, _column(a, column), _column(b, column))

    class_a = _per_unit_by(a.class_ns, a.units, "kernel_class", "ns")
    class_b = _per_unit_by(b.class_ns, b.units, "kernel_class", "ns")
    classes = tuple(
        quantity(f"class:{c}", c, "ns", class_a.get(c, [0] * len(a.units)), class_b.get(c, [0] * len(b.units)))
        for c in sorted(set(class_a) | set(class_b)))

    kern_a = _per_unit_by(a.kernel_ns, a.units, "identity", "ns")
    kern_b = _per_unit_by(b.kernel_ns, b.units, "identity", "ns")
    seen: set[str] = set()
    kernel_times = []
    for ka, kb in alignment.unchanged:
        if ka.identity in seen:
            continue
        seen.add(ka.identity)
        kernel_times.append(KernelTime(ka.name, kb.name, ka.kernel_class, quantity(
            f"kernel:{ka.identity}", ka.name, "ns", kern_a.get(ka.identity, []), kern_b.get(kb.identity, []))))
    kernel_times.sort(key=lambda k: (-k.quantity.a, k.name_a))

    removed, added = _op_changes(a, b)
    measured = Diff(
        a=a, b=b, unit_pairs=pairs, alignment=alignment, pairs_agreeing=agreeing,
        quantities=quantities, unavailable=dict(sorted(unavailable.items())), classes=classes,
        kernel_times=tuple(kernel_times), cpu_ops_removed=removed, cpu_ops_added=added,
        preops_a=_median_by(a.preops, a.units, "kind", "cpu_ns"),
        preops_b=_median_by(b.preops, b.units, "kind", "cpu_ns"),
        hidden_a=_hidden(a), hidden_b=_hidden(b), tensors_a=tuple(_tensor_rows(a)), tensors_b=tuple(_tensor_rows(b)),
        tensors_fused_away=tuple(_fused_away(_tensor_rows(a), alignment)),
        notes=tuple(notes) + alignment.notes, host_syncs=_host_syncs(a, b),
        findings_new=tuple(f for f in b.findings if f.rule not in {g.rule for g in a.findings}),
        findings_resolved=tuple(f for f in a.findings if f.rule not in {g.rule for g in b.findings}),
    )
    return replace(measured, findings=judge(measured))


def _host_syncs(a: Profile, b: Profile) -> tuple[HostSync, ...]:
    times_a, times_b = _per_unit_by(a.syncs, a.units, "name", "ns"), _per_unit_by(b.syncs, b.units, "name", "ns")
    counts_a, counts_b = _median_by(a.syncs, a.units, "name", "count"), _median_by(b.syncs, b.units, "name", "count")
    out = [HostSync(name, quantity(f"host_sync:{name}", name, "ns", times_a.get(name, [0] * len(a.units)),
                                   times_b.get(name, [0] * len(b.units))),
                    counts_a.get(name, 0), counts_b.get(name, 0))
           for name in set(times_a) | set(times_b)]
    return tuple(sorted(out, key=lambda s: (-max(s.quantity.a, s.quantity.b), s.name)))


def _tensor_rows(p: Profile) -> list[dict[str, Any]]:
    """The round trips of the last unit (the steadiest after warm-up), in the analysis' order."""
    if not p.units or p.tensors.height == 0:
        return []
    return p.tensors.filter(pl.col("unit") == p.units[-1]).drop("unit").to_dicts()


def _fused_away(rows: list[dict[str, Any]], alignment: Alignment) -> list[dict[str, Any]]:
    """A's round trips between two kernels that B runs as one fused kernel."""
    out = []
    for f in alignment.fusions:
        ops = {k.cpu_op for k in f.before if k.cpu_op}
        out += [dict(r, fused_into=f.after.name) for r in rows
                if r["producer_op"] in ops and r["consumer_op"] in ops]
    return out


def _hidden(p: Profile) -> dict[str, float]:
    frame = p.hidden.with_columns(key=pl.col("kind") + pl.lit(" from ") + pl.col("cpu_op"))
    return dict(sorted(_median_by(frame, p.units, "key", "count").items()))


def _op_changes(a: Profile, b: Profile) -> tuple[tuple[OpChange, ...], tuple[OpChange, ...]]:
    """CPU ops of B's typical unit that A's lacks (added) and the reverse (removed); an op is in a
    trace's typical unit when its median count over the units is above 0 (an op that runs in one
    unit of many, at an iteration's edge, neither appeared nor vanished)."""
    def table(p: Profile) -> dict[str, OpChange]:
        counts = _per_unit_by(p.cpu_ops, p.units, "name", "count")
        times = _per_unit_by(p.cpu_ops, p.units, "name", "cpu_ns")
        gpu = {r["name"]: r["launches_gpu"] for r in p.cpu_ops.iter_rows(named=True)}
        return {name: OpChange(name, plain_number(statistics.median(counts[name])),
                               plain_number(statistics.median(times[name])), bool(gpu.get(name)))
                for name in counts if statistics.median(counts[name]) > 0}
    ta, tb = table(a), table(b)
    order = lambda ops: tuple(sorted(ops, key=lambda o: (-o.cpu_ns, o.name)))  # noqa: E731
    return (order(ta[n] for n in ta if n not in tb), order(tb[n] for n in tb if n not in ta))
