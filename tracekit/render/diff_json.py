"""JSON for ``tracekit diff`` (``tracekit.diff/1``) and ``tracekit check`` (``tracekit.check/1``).

``tracekit.diff/1`` top-level keys (sorted on output, always present):

* ``schema``; ``a``, ``b`` — ``{trace (basename), unit_kind, units: [labels]}``
* ``verdict`` — the one-sentence summary (plain text), worded from ``findings``
* ``findings`` — the verdict as data, in verdict order: ``[{kind, subjects: [{role, name, class,
  changes: [[field, before, after]]}], quantities: {name: number | text | bool | null}}]``; the
  kinds, their subjects and quantities are listed in :mod:`tracekit.diff.findings` (empty: no change)
* ``fusions`` — ``[{before: [kernel names in A], after: name in B, ops: [op names], evidence,
  after_class, after_cpu_op}]``; ``evidence`` is ``inductor fused_ops`` | ``launching CPU op`` |
  ``position`` | ``GEMM epilogue``; ``splits`` — the reverse, ``[{before: name, after: [names], …}]``
* ``kernels`` — ``{added: [{name, class}], removed: [{name, class}], changed: [{before, after,
  class, fields: {field: [a, b]}}], replaced: [{before, after, before_class, after_class}],
  unchanged: [{a, b, class, count}]}`` for one step (``count``: launches of it in the step) (kernels in a fusion
  or split appear only there); ``unit_pairs_agreeing`` — in how many step pairs it was the same
* per-step quantities, each ``{a, b, delta, delta_pct, within_noise, noise, spread_a, spread_b,
  values_a, values_b}`` (``a``/``b`` medians over steps; ``delta_pct`` null when ``a`` is 0) or null
  when not measured: ``gpu_ns_per_step``, ``cpu_ns_per_step``, ``idle_ns_per_step``,
  ``kernels_per_step``, ``launches_per_step``, ``round_trip_bytes_per_step``,
  ``round_trip_tensors_per_step``, ``memsets_per_step``, ``memcpys_per_step``,
  ``preop_tax_ns_per_step``
* ``class_ns_per_step`` — ``{class: quantity}``; ``kernel_ns_per_step`` — ``[{a_name, b_name,
  class, …quantity}]`` for unchanged kernels
* ``cpu_ops`` — ``{removed: [{name, count, cpu_ns, launches_gpu}], added: […]}`` (per step)
* ``compile_preops_ns_per_step``, ``hidden_per_step`` — ``{a: {key: value}, b: {…}}``
* ``round_trip_tensors`` — ``{a: [{producer_op, consumer_op, shape, dtype, bytes}], b: […],
  fused_away: [… + fused_into]}`` for each trace's last step (empty when not measured)
* ``unavailable`` — ``{metric: reason}``; ``noise_rule``; ``notes``
* ``gates`` — ``[{expr, metric, op, value, relative, observed, exceeded, within_noise, failed}]``

``tracekit.check/1``: ``{schema, trace, description, passed, items: [{key, expected, observed, met,
unit, op, expected_value, steps, steps_met, observed_min, observed_max, steps_present, example}],
notes}``. ``expected``/``observed`` are the words the other formats show; the rest are the numbers
behind them (:class:`tracekit.diff.expect.Item`): ``unit`` count | bytes | ns | percent | bool |
names, ``op`` == | >= | <= | present | absent, ``expected_value`` (time limits in ns; the pattern for
names), ``steps``/``steps_met`` (units measured / meeting it), ``observed_min``/``observed_max``
(bounds; null without steps), ``steps_present`` and ``example`` (bool and names; else null).
Additive keys may appear later; a breaking change bumps the version.
"""

from __future__ import annotations

import math
from typing import Any, TextIO

from tracekit import schemas
from tracekit.diff.compare import NOISE_RULE, fusion_record
from tracekit.render import diff_sections as S
from tracekit.render.json import encode

_PER_STEP_KEYS = {
    "gpu_time": "gpu_ns_per_step", "cpu_time": "cpu_ns_per_step", "idle_time": "idle_ns_per_step",
    "kernels": "kernels_per_step", "launches": "launches_per_step",
    "round_trip_bytes": "round_trip_bytes_per_step", "round_trip_tensors": "round_trip_tensors_per_step",
    "memsets": "memsets_per_step", "memcpys": "memcpys_per_step", "preop_tax": "preop_tax_ns_per_step",
}


def _q(q) -> dict[str, Any]:
    return {"a": q.a, "b": q.b, "delta": q.delta, "delta_pct": q.delta_pct, "within_noise": q.within_noise,
            "noise": q.noise, "spread_a": q.spread_a, "spread_b": q.spread_b,
            "values_a": list(q.values_a), "values_b": list(q.values_b)}


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _finding(f) -> dict[str, Any]:
    return {"kind": f.kind, "quantities": dict(f.quantities),
            "subjects": [{"role": s.role, "name": s.name, "class": s.kernel_class,
                          "changes": [list(c) for c in s.changes]} for s in f.subjects]}


def to_data(diff, gate_results=None) -> dict[str, Any]:
    al = diff.alignment
    side = lambda p: {"trace": p.label, "unit_kind": p.unit_kind,  # noqa: E731
                      "units": [p.unit_labels[u] for u in p.units]}
    data: dict[str, Any] = {
        "schema": schemas.DIFF, "a": side(diff.a), "b": side(diff.b),
        "verdict": S.plain(S.verdict_parts(diff)),
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
        "unavailable": diff.unavailable,
        "noise_rule": NOISE_RULE,
        "notes": list(diff.notes),
        "gates": [{"expr": r.gate.text, "metric": r.gate.metric, "op": r.gate.op, "value": r.gate.value,
                   "relative": r.gate.relative, "observed": _finite(r.observed), "exceeded": r.exceeded,
                   "within_noise": r.within_noise, "failed": r.failed} for r in (gate_results or [])],
    }
    for key, name in _PER_STEP_KEYS.items():
        q = diff.quantities.get(key)
        data[name] = _q(q) if q is not None else None
    return data


def render(diff, out: TextIO, gate_results=None) -> None:
    out.write(encode(to_data(diff, gate_results)).decode())


def check_data(result) -> dict[str, Any]:
    return {"schema": schemas.CHECK, "trace": result.trace, "description": result.description,
            "passed": all(r.met for r in result.items),
            "items": [{"key": r.key, "expected": S.expected_text(r), "observed": S.observed_text(r), "met": r.met,
                       "unit": r.unit, "op": r.op, "expected_value": r.expected_value, "steps": r.steps,
                       "steps_met": r.steps_met, "observed_min": r.observed_min, "observed_max": r.observed_max,
                       "steps_present": r.steps_present, "example": r.example}
                      for r in result.items],
            "notes": list(result.notes)}


def render_check(result, out: TextIO) -> None:
    out.write(encode(check_data(result)).decode())
