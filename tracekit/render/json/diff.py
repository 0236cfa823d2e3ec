"""``tracekit.diff/1``: the JSON of ``tracekit diff A B``. Top-level keys (sorted on output, always
present):

* ``schema``; ``a``, ``b`` — ``{trace (basename), unit_kind, units: [labels], setup: {devices: [names],
  versions: {key: text}, world_size, rank}}`` (``setup``: what the trace ran on; the verdict's
  ``different_*`` findings come from it)
* ``verdict`` — the one-sentence summary (plain text), worded from ``findings``
* ``findings`` — the verdict as data, in verdict order: ``[{kind, subjects: [{role, name, class,
  changes: [[field, before, after]]}], quantities: {name: number | text | bool | null}}]``; the
  kinds, their subjects and quantities are listed in :mod:`tracekit.diff.diff_verdict` (empty: no change)
* ``fusions`` — ``[{before: [kernel names in A], after: name in B, ops: [op names], evidence,
  after_class, after_cpu_op}]``; ``evidence`` is ``inductor fused_ops`` | ``launching CPU op`` |
  ``position`` | ``GEMM epilogue``; ``splits`` — the reverse, ``[{before: name, after: [names], …}]``
* ``kernels`` — ``{added: [{name, class}], removed: [{name, class}], changed: [{before, after,
  class, fields: {field: [a, b]}}], replaced: [{before, after, before_class, after_class}],
  unchanged: [{a, b, class, count}], count_changes: [{cpu_op, a, b, names_a, names_b}] (added in
  /1: an op launching another number of kernels, no fusion or split shown), device_choices:
  [{before, after, cpu_op}] (added in /1: on devices of other names, another kernel for the same
  op)}`` for one step (``count``: launches of it in the step) (kernels in a fusion
  or split appear only there); ``unit_pairs_agreeing`` — in how many step pairs it was the same
* per-step quantities, each ``{a, b, delta, delta_pct, within_noise, noise, spread_a, spread_b,
  values_a, values_b}`` (``a``/``b`` medians over steps; ``delta_pct`` null when ``a`` is 0) or null
  when not measured: ``gpu_ns_per_step``, ``cpu_ns_per_step``, ``idle_ns_per_step``,
  ``kernels_per_step``, ``launches_per_step``, ``round_trip_bytes_per_step``,
  ``round_trip_tensors_per_step``, ``memsets_per_step``, ``memcpys_per_step``,
  ``preop_tax_ns_per_step``, ``host_sync_ns_per_step`` (time the CPU was blocked in host syncs),
  ``graph_launches_per_step`` (``cudaGraphLaunch``/``hipGraphLaunch`` calls), ``peak_memory_per_step``
  (added in /1: the highest allocated GPU bytes in the step, from ``[memory]`` events; null unless
  both traces have them)
* ``trace_findings`` (added in /1) — ``{new_in_b: [finding], resolved_in_b: [finding]}``: the
  trace findings (``findings`` of ``tracekit.report/1``, same fields) whose rule B has and A has not,
  and the reverse
* ``host_syncs`` — ``[{name, count_a, count_b, …quantity}]``: each host sync (``aten::item``,
  ``cudaStreamSynchronize``, ``cudaMemcpyAsync (DtoH)``…, the outermost of each nest), its time per
  step, largest first
* ``alignment`` — ``{anchors, moved, notes}``: unchanged main GEMMs that anchored the kernel
  alignment, kernels matched out of order, and where the alignment is approximate (also in ``notes``)
* ``class_ns_per_step`` — ``{class: quantity}``; ``kernel_ns_per_step`` — ``[{a_name, b_name,
  class, …quantity}]`` for unchanged kernels
* ``cpu_ops`` — ``{removed: [{name, count, cpu_ns, launches_gpu}], added: […]}`` (per step)
* ``compile_preops_ns_per_step``, ``hidden_per_step`` — ``{a: {key: value}, b: {…}}``
* ``round_trip_tensors`` — ``{a: [{producer_op, consumer_op, shape, dtype, bytes}], b: […],
  fused_away: [… + fused_into]}`` for each trace's last step (empty when not measured)
* ``unavailable`` — ``{metric: reason}``; ``noise_rule``; ``notes``
* (added in /1) ``per`` — ``step``, or ``sweep`` when shapes vary within a trace: every per-step
  quantity is then the sum over the common shapes of each shape's median (its ``spread_*`` the sum
  of the per-shape spreads), see :mod:`tracekit.results.diff`; ``shapes`` — ``[{shape, units_a:
  [labels], units_b: [labels], <per-step keys above>: quantity | null}]``, each shape both traces
  ran, with its medians (empty when shapes do not vary); ``shapes_only_a``, ``shapes_only_b`` —
  shapes one trace alone ran (left out); ``structural`` — false when A and B share no shape (no
  kernel, op or tensor compared); ``aligned_pair`` — ``[a_label, b_label]`` of the step pair whose
  kernel changes are listed, or null
* ``gates`` — ``[{expr, metric, op, value, relative, observed, exceeded, within_noise, failed}]``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracekit.render.findings_data import findings_data
from tracekit.render.json.encode import finite
from tracekit.render.views.verdict import plain, verdict_parts

if TYPE_CHECKING:
    from tracekit.results.diff import Diff, Quantity
    from tracekit.results.verdict import Verdict
    from tracekit.results.gates import GateResult


#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.diff/1"


_PER_STEP_KEYS = {
    "gpu_time": "gpu_ns_per_step", "cpu_time": "cpu_ns_per_step", "idle_time": "idle_ns_per_step",
    "kernels": "kernels_per_step", "launches": "launches_per_step",
    "round_trip_bytes": "round_trip_bytes_per_step", "round_trip_tensors": "round_trip_tensors_per_step",
    "memsets": "memsets_per_step", "memcpys": "memcpys_per_step", "preop_tax": "preop_tax_ns_per_step",
    "host_sync": "host_sync_ns_per_step", "graph_launches": "graph_launches_per_step",
    "peak_memory": "peak_memory_per_step",
}


def _q(q: Quantity) -> dict[str, Any]:
    return {"a": q.a, "b": q.b, "delta": q.delta, "delta_pct": q.delta_pct, "within_noise": q.within_noise,
            "noise": q.noise, "spread_a": q.spread_a, "spread_b": q.spread_b,
            "values_a": list(q.values_a), "values_b": list(q.values_b)}


def _finding(f: Verdict) -> dict[str, Any]:
    return {"kind": f.kind, "quantities": dict(f.quantities),
            "subjects": [{"role": s.role, "name": s.name, "class": s.kernel_class,
                          "changes": [list(c) for c in s.changes]} for s in f.subjects]}


def data(diff: Diff, gate_results: Sequence[GateResult] = ()) -> dict[str, Any]:
    """The diff (and its gates) as plain data following the ``tracekit.diff/1`` contract."""
    from tracekit.results.diff import NOISE_RULE, fusion_record
    al = diff.alignment
    side = lambda p: {"trace": p.label, "unit_kind": p.unit_kind,  # noqa: E731
                      "units": [p.unit_labels[u] for u in p.units],
                      "setup": {"devices": list(p.setup.devices), "versions": p.setup.versions,
                                "world_size": p.setup.world_size, "rank": p.setup.rank}}
    data: dict[str, Any] = {
        "schema": SCHEMA, "a": side(diff.a), "b": side(diff.b),
        "verdict": plain(verdict_parts(diff)),
        "findings": [_finding(f) for f in diff.findings],
        "fusions": [fusion_record(f) for f in al.fusions],
        "splits": [{"before": s.before.name, "after": [k.name for k in s.after], "ops": list(s.ops),
                    "evidence": s.evidence} for s in al.splits],
        "kernels": {
            "added": [{"name": k.name, "class": k.kernel_class} for k in al.added],
            "removed": [{"name": k.name, "class": k.kernel_class} for k in al.removed],
            "changed": [{"before": c.before.name, "after": c.after.name, "class": c.after.kernel_class,
                         "fields": {k: [va, vb] for k, va, vb in c.fields}} for c in al.changed],
            "replaced": [{"before": x.name, "after": y.name, "before_class": x.kernel_class,
                          "after_class": y.kernel_class} for x, y in al.replaced],
            "unchanged": [{"a": ka.name, "b": kb.name, "class": ka.kernel_class, "count": n}
                          for ka, kb, n in al.unchanged_once()],
            "count_changes": [{"cpu_op": c.cpu_op, "a": c.a, "b": c.b,
                               "names_a": list(dict.fromkeys(k.name for k in c.before)),
                               "names_b": list(dict.fromkeys(k.name for k in c.after))} for c in al.count_changes],
            "device_choices": [{"before": x.name, "after": y.name, "cpu_op": x.cpu_op} for x, y in al.device_choices],
        },
        "unit_pairs_agreeing": diff.pairs_agreeing,
        "unit_pairs": [list(p) for p in diff.unit_pairs],
        "class_ns_per_step": {q.label: _q(q) for q in diff.classes},
        "kernel_ns_per_step": [{"a_name": k.name_a, "b_name": k.name_b, "class": k.kernel_class,
                                **_q(k.quantity)} for k in diff.kernel_times],
        "cpu_ops": {
            "removed": [vars(o) for o in diff.cpu_ops_removed],
            "added": [vars(o) for o in diff.cpu_ops_added],
        },
        "compile_preops_ns_per_step": {"a": diff.preops_a, "b": diff.preops_b},
        "hidden_per_step": {"a": diff.hidden_a, "b": diff.hidden_b},
        "round_trip_tensors": {"a": list(diff.tensors_a), "b": list(diff.tensors_b),
                               "fused_away": list(diff.tensors_fused_away)},
        "trace_findings": {"new_in_b": findings_data(diff.findings_new),
                           "resolved_in_b": findings_data(diff.findings_resolved)},
        "host_syncs": [{"name": h.name, "count_a": h.count_a, "count_b": h.count_b, **_q(h.quantity)}
                       for h in diff.host_syncs],
        "alignment": {"anchors": al.anchors, "moved": al.moved, "notes": list(al.notes)},
        "unavailable": diff.unavailable,
        "per": diff.per,
        "shapes": [{"shape": s.key, "units_a": [diff.a.unit_labels[u] for u in s.units_a],
                    "units_b": [diff.b.unit_labels[u] for u in s.units_b],
                    **{name: (_q(s.quantities[key]) if key in s.quantities else None)
                       for key, name in _PER_STEP_KEYS.items()}} for s in diff.shapes],
        "shapes_only_a": list(diff.shapes_only_a), "shapes_only_b": list(diff.shapes_only_b),
        "structural": diff.structural,
        "aligned_pair": ([diff.a.unit_labels[diff.aligned_pair[0]], diff.b.unit_labels[diff.aligned_pair[1]]]
                         if diff.aligned_pair else None),
        "noise_rule": NOISE_RULE,
        "notes": list(diff.notes),
        "gates": [{"expr": r.gate.text, "metric": r.gate.metric, "op": r.gate.op, "value": r.gate.value,
                   "relative": r.gate.relative, "observed": finite(r.observed), "exceeded": r.exceeded,
                   "within_noise": r.within_noise, "failed": r.failed} for r in gate_results],
    }
    for key, name in _PER_STEP_KEYS.items():
        q = diff.quantities.get(key)
        data[name] = _q(q) if q is not None else None
    return data
