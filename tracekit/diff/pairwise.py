"""Diff two traces' profiles: pair their units, align their kernels, measure every per-step
quantity with its noise, and judge what changed.

Contract: :func:`diff` takes two :class:`~tracekit.analyses.profile.Profile` (A = before, B = after)
and returns a frozen :class:`~tracekit.results.diff.Diff` (its quantities follow the noise rule of
:mod:`tracekit.results.diff`); its ``findings`` are the verdict as data (which changes count,
:mod:`tracekit.diff.diff_verdict`). Pure: no printing, no I/O.

**Units.** A's and B's units (ProfilerSteps or ``--unit`` spans) are paired in order; every unit's
kernel sequence is aligned (:mod:`tracekit.diff.align`). When shapes vary within a trace (a
shape sweep: :attr:`Profile.shapes` has more than one value), units are paired by shape instead —
the k-th unit of a shape in A with the k-th of the same shape in B — and every figure is taken
within a shape (:mod:`tracekit.results.diff`, "Shapes"); shapes only one trace ran are left out,
and when A and B share no shape nothing structural is compared, only totals per sweep. The structural changes reported are those
of the most common sequence pair (ties: the later pair, the steadiest after warm-up);
``pairs_agreeing`` says in how many unit pairs the alignment found exactly the same changes.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from tracekit.diff import align as align_mod
from tracekit.diff.diff_verdict import judge
from tracekit.analyses.profile import Profile
from tracekit.results.alignment import Alignment
from tracekit.results.diff import (
    OPTIONAL_QUANTITIES,
    QUANTITIES,
    Diff,
    HostSync,
    KernelTime,
    OpChange,
    Quantity,
    ShapePair,
    plain_number,
    quantity,
    sweep_quantity,
)


def _values(profile: Profile, column: str) -> dict[int, int]:
    """``{unit: value}`` of a ``per_unit`` column, units without a value left out."""
    return {int(u): int(v) for u, v in zip(profile.per_unit["unit"].to_list(), profile.per_unit[column].to_list())
            if v is not None}


def _signature(al: Alignment) -> tuple:
    ids = lambda ks: tuple(k.identity for k in ks)  # noqa: E731
    return (tuple((ids(f.before), f.after.identity) for f in al.fusions),
            tuple((s.before.identity, ids(s.after)) for s in al.splits),
            tuple((c.before.identity, c.after.identity) for c in al.changed),
            tuple((x.identity, y.identity) for x, y in al.replaced),
            ids(al.removed), ids(al.added))


def _by_unit(frame: pl.DataFrame, key: str, value: str) -> dict[str, dict[int, int]]:
    """``{key: {unit: summed value}}`` of a per-unit frame."""
    out: dict[str, dict[int, int]] = {}
    for row in frame.iter_rows(named=True):
        per = out.setdefault(row[key], {})
        per[row["unit"]] = per.get(row["unit"], 0) + row[value]
    return out


def _grouped(values: dict[int, int], groups: list[list[int]]) -> list[list[int]]:
    """The values of each group's units, 0 where a unit has none."""
    return [[values.get(u, 0) for u in g] for g in groups]


def _sum_of_medians(groups: list[list[int]]) -> float:
    """The sum over the groups (shapes) of each one's median: one step of each shape."""
    return plain_number(sum(statistics.median(g) for g in groups if g))


def _median_by(frame: pl.DataFrame, groups: list[list[int]], key: str, value: str) -> dict[str, float]:
    return {k: _sum_of_medians(_grouped(v, groups)) for k, v in _by_unit(frame, key, value).items()}


@dataclass(frozen=True)
class _Plan:
    """How A's and B's units are compared: the unit pairs aligned, the groups of units each median is
    taken over (all units; or one group per shape), the common shapes, the shapes of one side only,
    whether anything structural is compared, and the notes that say so."""

    pairs: tuple[tuple[int, int], ...]
    groups_a: list[list[int]]
    groups_b: list[list[int]]
    common: tuple[str, ...] = ()
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    structural: bool = True
    notes: tuple[str, ...] = ()


def _shape_groups(p: Profile) -> dict[str | None, list[int]]:
    out: dict[str | None, list[int]] = {}
    for u in p.units:
        out.setdefault(p.shapes.get(u), []).append(u)
    return out


def _plan(a: Profile, b: Profile) -> _Plan:
    """Pair units by shape when shapes vary within a trace (module docstring), else in order."""
    by_a, by_b = _shape_groups(a), _shape_groups(b)
    if len(by_a) <= 1 and len(by_b) <= 1:
        n = min(len(a.units), len(b.units))
        notes = ((f"A has {len(a.units)} units and B {len(b.units)}; the first {n} are paired for kernel "
                  "alignment, every steady unit counts in the medians"),) if len(a.units) != len(b.units) else ()
        return _Plan(tuple(zip(a.units[:n], b.units[:n])), [list(a.units)], [list(b.units)], notes=notes)
    common = tuple(k for k in by_a if k is not None and k in by_b)
    only_a = tuple(k or "(no shape)" for k in by_a if k not in common)
    only_b = tuple(k or "(no shape)" for k in by_b if k not in common)
    if not common:
        return _Plan((), list(by_a.values()), list(by_b.values()), (), only_a, only_b, structural=False)
    pairs = tuple(pair for k in common for pair in zip(by_a[k], by_b[k]))
    notes = []
    if only_a or only_b:
        notes.append("shapes one trace ran and the other did not are left out of every figure: "
                     + "; ".join(f"only {side} ran {', '.join(keys)}" for side, keys in (("A", only_a), ("B", only_b))
                                 if keys))
    uneven = [k for k in common if len(by_a[k]) != len(by_b[k])]
    if uneven:
        notes.append(f"{len(uneven)} shape{'s' if len(uneven) > 1 else ''} ran a different number of steady units in "
                     "A and B; their first units are paired for kernel alignment, every steady unit of the shape "
                     "counts in its medians")
    return _Plan(pairs, [by_a[k] for k in common], [by_b[k] for k in common], common, only_a, only_b,
                 notes=tuple(notes))


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
    plan = _plan(a, b)
    notes += plan.notes
    for side, p in (("A", a), ("B", b)):
        if p.excluded:
            left = ", ".join(f"{p.unit_labels[u]} ({why})" for u, why in sorted(p.excluded.items()))
            notes.append(f"{side}: {left} left out as not steady state")
    pairs = plan.pairs
    alignments = _align_pairs(a, b, pairs)
    aligned_pair: tuple[int, int] | None = None
    if alignments:
        signatures = [_signature(al) for al in alignments]
        counts = Counter(signatures)
        best = max(range(len(signatures)), key=lambda i: (counts[signatures[i]], i))
        alignment, agreeing, aligned_pair = alignments[best], counts[signatures[best]], pairs[best]
    else:
        alignment, agreeing = align_mod.align((), ()), 0
    if a.setup.devices and b.setup.devices and a.setup.devices != b.setup.devices:
        # Another device's library picks other kernels for the same op: not a replacement.
        # Another device's library picks other kernels (and variants) for the same op: not a
        # replacement, nor a variant change of the program.
        pairs_changed = [(c.before, c.after) for c in alignment.changed]
        chosen = tuple((x, y) for x, y in [*pairs_changed, *alignment.replaced] if align_mod.launched_alike(x, y))
        alignment = replace(alignment, device_choices=chosen,
                            changed=tuple(c for c in alignment.changed if (c.before, c.after) not in chosen),
                            replaced=tuple(p for p in alignment.replaced if p not in chosen))
    # The shape the alignment was found in: its unchanged kernels' times and its round trips are
    # medians over that shape's units (all units when shapes do not vary).
    group_a = next((g for g in plan.groups_a if aligned_pair and aligned_pair[0] in g), list(a.units))
    group_b = next((g for g in plan.groups_b if aligned_pair and aligned_pair[1] in g), list(b.units))

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
    shape_quantities: dict[str, dict[str, Quantity]] = {k: {} for k in plan.common}
    for key, label, unit, column in QUANTITIES:
        va, vb = _values(a, column), _values(b, column)
        if key in unavailable or (key in OPTIONAL_QUANTITIES and not (va and vb)):
            continue  # peak memory needs [memory] events in both traces, per-token cost a serving loop
        quantities[key] = sweep_quantity(key, label, unit, [[va[u] for u in g if u in va] for g in plan.groups_a],
                                         [[vb[u] for u in g if u in vb] for g in plan.groups_b])
        for shape, ga, gb in zip(plan.common, plan.groups_a, plan.groups_b):
            shape_quantities[shape][key] = quantity(key, label, unit, [va[u] for u in ga if u in va],
                                                    [vb[u] for u in gb if u in vb])
    shapes = tuple(ShapePair(k, tuple(ga), tuple(gb), shape_quantities[k])
                   for k, ga, gb in zip(plan.common, plan.groups_a, plan.groups_b))

    class_a = _by_unit(a.class_ns, "kernel_class", "ns")
    class_b = _by_unit(b.class_ns, "kernel_class", "ns")
    classes = tuple(
        sweep_quantity(f"class:{c}", c, "ns", _grouped(class_a.get(c, {}), plan.groups_a),
                       _grouped(class_b.get(c, {}), plan.groups_b))
        for c in sorted(set(class_a) | set(class_b)))

    kern_a = _by_unit(a.kernel_ns, "identity", "ns")
    kern_b = _by_unit(b.kernel_ns, "identity", "ns")
    seen: set[str] = set()
    kernel_times = []
    for ka, kb in alignment.unchanged:
        if ka.identity in seen:
            continue
        seen.add(ka.identity)
        kernel_times.append(KernelTime(ka.name, kb.name, ka.kernel_class, quantity(
            f"kernel:{ka.identity}", ka.name, "ns", _grouped(kern_a.get(ka.identity, {}), [group_a])[0],
            _grouped(kern_b.get(kb.identity, {}), [group_b])[0])))
    kernel_times.sort(key=lambda k: (-k.quantity.a, k.name_a))

    removed, added = _op_changes(a, b, plan) if plan.structural else ((), ())
    tensor_units = (group_a[-1] if group_a else None, group_b[-1] if group_b else None)
    tensors_a = _tensor_rows(a, tensor_units[0]) if plan.structural else []
    tensors_b = _tensor_rows(b, tensor_units[1]) if plan.structural else []
    measured = Diff(
        a=a, b=b, unit_pairs=pairs, alignment=alignment, pairs_agreeing=agreeing,
        quantities=quantities, unavailable=dict(sorted(unavailable.items())), classes=classes,
        kernel_times=tuple(kernel_times), cpu_ops_removed=removed, cpu_ops_added=added,
        preops_a=_median_by(a.preops, plan.groups_a, "kind", "cpu_ns"),
        preops_b=_median_by(b.preops, plan.groups_b, "kind", "cpu_ns"),
        hidden_a=_hidden(a, plan.groups_a), hidden_b=_hidden(b, plan.groups_b),
        tensors_a=tuple(tensors_a), tensors_b=tuple(tensors_b),
        tensors_fused_away=tuple(_fused_away(tensors_a, alignment)),
        notes=tuple(notes) + alignment.notes, host_syncs=_host_syncs(a, b, plan),
        findings_new=tuple(f for f in b.findings if f.rule not in {g.rule for g in a.findings}),
        findings_resolved=tuple(f for f in a.findings if f.rule not in {g.rule for g in b.findings}),
        shapes=shapes, shapes_only_a=plan.only_a, shapes_only_b=plan.only_b, aligned_pair=aligned_pair,
        structural=plan.structural, tensor_units=tensor_units,
    )
    return replace(measured, findings=judge(measured))


def _host_syncs(a: Profile, b: Profile, plan: _Plan) -> tuple[HostSync, ...]:
    times_a, times_b = _by_unit(a.syncs, "name", "ns"), _by_unit(b.syncs, "name", "ns")
    counts_a = _median_by(a.syncs, plan.groups_a, "name", "count")
    counts_b = _median_by(b.syncs, plan.groups_b, "name", "count")
    out = [HostSync(name, sweep_quantity(f"host_sync:{name}", name, "ns", _grouped(times_a.get(name, {}), plan.groups_a),
                                         _grouped(times_b.get(name, {}), plan.groups_b)),
                    counts_a.get(name, 0), counts_b.get(name, 0))
           for name in set(times_a) | set(times_b)]
    return tuple(sorted(out, key=lambda s: (-max(s.quantity.a, s.quantity.b), s.name)))


def _tensor_rows(p: Profile, unit: int | None) -> list[dict[str, Any]]:
    """The round trips of ``unit`` (the last of the aligned shape's units: the steadiest after
    warm-up), in the analysis' order."""
    if unit is None or p.tensors.height == 0:
        return []
    return p.tensors.filter(pl.col("unit") == unit).drop("unit").to_dicts()


def _fused_away(rows: list[dict[str, Any]], alignment: Alignment) -> list[dict[str, Any]]:
    """A's round trips between two kernels that B runs as one fused kernel."""
    out = []
    for f in alignment.fusions:
        ops = {k.cpu_op for k in f.before if k.cpu_op}
        out += [dict(r, fused_into=f.after.name) for r in rows
                if r["producer_op"] in ops and r["consumer_op"] in ops]
    return out


def _hidden(p: Profile, groups: list[list[int]]) -> dict[str, float]:
    frame = p.hidden.with_columns(key=pl.col("kind") + pl.lit(" from ") + pl.col("cpu_op"))
    return dict(sorted(_median_by(frame, groups, "key", "count").items()))


def _op_changes(a: Profile, b: Profile, plan: _Plan) -> tuple[tuple[OpChange, ...], tuple[OpChange, ...]]:
    """CPU ops of B's typical unit that A's lacks (added) and the reverse (removed); an op is in a
    trace's typical unit when its median count over the units (of some compared shape) is above 0
    (an op that runs in one unit of many, at an iteration's edge, neither appeared nor vanished)."""
    def table(p: Profile, groups: list[list[int]]) -> dict[str, OpChange]:
        counts = _median_by(p.cpu_ops, groups, "name", "count")
        times = _median_by(p.cpu_ops, groups, "name", "cpu_ns")
        gpu = {r["name"]: r["launches_gpu"] for r in p.cpu_ops.iter_rows(named=True)}
        return {name: OpChange(name, counts[name], times[name], bool(gpu.get(name)))
                for name in counts if counts[name] > 0}
    ta, tb = table(a, plan.groups_a), table(b, plan.groups_b)
    order = lambda ops: tuple(sorted(ops, key=lambda o: (-o.cpu_ns, o.name)))  # noqa: E731
    return (order(ta[n] for n in ta if n not in tb), order(tb[n] for n in tb if n not in ta))
