"""JSON: the versioned contracts, sorted keys, byte-for-byte stable for the same input.

Five documents, each named by its ``schema`` (:mod:`tracekit.schemas`). Additive keys may appear
within a version; a breaking change bumps it (``tracekit.report/2``…). Times are integer
nanoseconds.

``tracekit.report/1`` (``tracekit report TRACE``). Top-level keys (all always present):

* ``schema`` — ``"tracekit.report/1"``
* ``findings`` (added in /1) — what is wrong, warnings first (:mod:`tracekit.findings`):
  ``[{rule, title, severity ("warning" | "info"), steps: [unit numbers], evidence: [{role (op | kernel |
  launch | memcpy | step | tensor), name, step, ts_ns (first occurrence), count_per_step,
  dur_ns_per_step, bytes_per_step, detail}], cost_ns_per_step (measured; a one-time cost when
  ``quantities.once`` is true: a cold step, a recompile), saving_ns_per_step
  (projected from the trace; null when it cannot be priced), saving_basis (how), fix (one line, the
  PyTorch knob), thresholds: {NAME: value}, quantities: {name: number | text}}]``
* ``trace`` — ``{path, size_bytes, event_count, vendor, time_format, devices: [{id, name,
  compute_capability, num_sms, total_global_mem}], versions: {key: text}, distributed, step_numbers,
  graph_hashes, unanalysed_activity: {category: events} (device activity tracekit does not analyse),
  dropped_events: {reason: events} (reasons ``unusable_time``, ``not_an_event``; empty when none),
  partial: null | why only the events before a cut were read (``--partial``), annotations (added in
  /1): events ``tracekit annotate`` added to the file, set aside unread (0 for a profiler's trace)}``
* ``selected_step`` — the ``--step`` number or null
* ``units`` — what the steps are (:mod:`tracekit.analyses.units`): ``{kind ("ProfilerStep" | "span"
  | "period" | "trace" | "none"), name, source ("profiler" | "auto" | "user"), rule (why, in words),
  count, partial: [numbers], candidates: [{name, cat, occurrences, top_level, coverage, first_ns}]}``
* ``orphans`` — GPU work whose launch call is not in the trace (in no step): ``[{reason
  ("before_trace" | "launch_missing"), kind, count, dur_ns, busy_ns, first_ns, last_end_ns}]``
* ``breakdown`` — ``{shares: [{scope ("trace" | "unit"), unit, group ("class" | "library"), key, count,
  gpu_ns, busy_share, median_unit_share}], streams: [{scope, unit, device, stream, count, gpu_ns, busy_ns,
  busy_share}], overlap: [{scope, unit, comm_count, comm_ns, compute_ns, overlapped_ns, overlap_frac}]}``
  (:mod:`tracekit.analyses.breakdown`; ``busy_share`` is of the scope's union busy time)
* ``steps`` — ``[{name, number, start_ns, dur_ns, gpu_busy_ns, kernel_count, gpu_activity_count}]``
  — one per unit (``name`` is the unit's label: ``ProfilerStep#4``, ``mlp_fwd#2``, ``whole trace``)
* ``kernels`` — ``[{name, class, library, kind, count, total_ns, mean_ns, launch_api, cpu_op,
  decoded: {…}, class_total_ns}]``; ``kind`` is kernel | memcpy | memset; ``class_total_ns`` (added in
  /1) the total of the kernel's class; ``kernel_count`` in steps counts kernels only
* ``paths`` — ``{step, truncated, rows: [{scope, top_op, cpu_op, kernel, class, launch, dur_ns}]}``
* ``zero_kernel_ops`` — ``[{name, count, cpu_ns}]``
* ``compile_preops`` — ``[{step, name, kind, count, cpu_ns, graph_hash}]``
* ``launch_gaps`` — ``{steps: [{step, gpu_busy_ns, gpu_idle_ns, verdict, wall_ns, cpu_dispatch_ns,
  cold, warmup, compile, partial, steady}], queue_delay_ns: {p50, p90, p99, max}, idle_by_cause_ns:
  {cause: ns} (every cause, 0 when it caused no gap), idle_by_cause: [{cause, gaps, dur_ns}] (every cause, longest idle first),
  thresholds: {…}, distributions: [{group, key, count, launch_dur_p50_ns … queue_delay_max_ns}],
  clock: {skewed, offset_ns, linked, early, idle_starts, idle_start_delay_p10_ns … p90_ns, rule}}`` —
  ``clock`` is the GPU-vs-CPU clock check (:mod:`tracekit.analyses.clock`); when ``skewed``, queue
  delays and gap causes are corrected by ``offset_ns``
* ``round_trips`` — ``{method ("execution_trace" | "shape_inference"), notes, tensors: [{step,
  producer, producer_op, consumer, consumer_op, shape, dtype, bytes}], bytes_per_step: [{step,
  round_trip_bytes, tensor_count, unknown_kernels}], unknown_ops: [{op, count}]}``
* ``throughput`` — ``{device, ceilings: {device, hbm_bytes_per_s, flops: {dtype: FLOP/s}, source…}
  | null, kernels: [{name, class, dtype, math (added in /1: the type rated against, e.g. tf32 for an
  fp32 GEMM on tensor cores), count, mean_ns, bytes, flops, achieved_gbps, achieved_tflops,
  frac_bw, frac_flops, intensity, ridge, bound, headline, …}]}``
* ``compilation`` — (added in /1) compilation found in the trace (:mod:`tracekit.analyses.compilations`):
  ``{found, key_op, totals: {compilations, recompiles, compile_ns, frame_compile_ns, autotune_ns,
  runtime_ns, recompile_ns, dynamic_promotions, graph_records, graph_replays, record_ns, jit_ns, jits,
  set_aside_count, set_aside_gpu_ns, shapes, triggers: {first, dynamic_promotion, shape_change,
  recompile}}, steady: {units, steady_units, shapes, gpu_ns, cpu_dispatch_ns, wall_ns, set_aside:
  {state: units}}, compilations: [{compile_id, frame, index, step, ts, cpu_ns, autotune_ns,
  runtime_ns, total_ns, trigger, dynamic, key_op, shape_before, shape_after, changed, set_aside_count,
  set_aside_gpu_ns, steps_run, shapes_run}], phases: [{compile_id, phase, cpu_ns}], work: [{kind,
  name, compile_id, step, pid, tid, ts, end, dur}], set_aside: [{compile_id, work, kind, name, count,
  gpu_ns}], jit: [{kernel, op, step, first_ns, later_ns, later_count, jit_ns}], units: [{step, shape,
  compile, recompile, graph_record, jit, runtime, compile_ids, compile_ns, record_ns, jit_ns,
  graph_records, graph_replays, set_aside_count, set_aside_gpu_ns}]}``; ``set_aside_units`` — (added
  in /1) ``{unit number: state}`` of the units left out of ``kernels`` and ``throughput`` (empty when
  all units are steady, none is, or with ``--step``). GPU work a compilation launched (autotuning) is
  in no other key. ``launch_gaps.steps`` also carry (added in /1) ``recompile, graph_record, jit``
  and ``state`` (``recompile`` | ``compile`` | ``graph_record`` | ``jit_warmup`` | ``cold`` |
  ``warmup`` | ``partial`` | ``steady``)
* ``memory`` — (added in /1) memory from the ``[memory]`` events (:mod:`tracekit.analyses.memory`;
  bytes and ns): ``{events, note (the one line when there are none, else null), devices: [{device
  ("cuda:0", "cpu": CPU allocations apart), device_type, device_id, totals ("allocator" | "summed"),
  events, allocations, frees, bytes_allocated, bytes_freed, frees_before_trace,
  bytes_freed_before_trace, allocated_at_start, allocated_at_end, peak_allocated, peak_ts, peak_step,
  peak_offset_ns, peak_reserved, reserved_at_peak, fragmentation, total_memory, headroom, live_bytes,
  live_blocks, before_trace_at_peak, op, cpu_op, top_op, annotation, phase, out_of_memory}], steps:
  [{step, device, peak_allocated, peak_ts, peak_reserved, allocated_at_start, allocated_at_end, op,
  top_op, annotation, phase}], live: [{device, op, top_op, phase, blocks, bytes, largest}] (blocks
  alive at the device's peak by allocating op), ops: [{device, op, allocations, bytes_allocated,
  bytes_freed, net, largest, incl_allocations, incl_bytes_allocated, incl_bytes_freed, incl_net,
  incl_largest}], growth: [{step, device, op, net, allocations}], out_of_memory: [{device, ts, bytes,
  allocated, reserved, op}], timeline: [{device, ts, allocated, reserved}] (at most 256 points per
  device, each the highest of its span of time)}``; null in a report made without it
* ``hta`` — only with ``--hta``: per rank/step/stream busy and idle from tracekit and HTA, the report's
  Steps table against HTA's steps (``scope "steps_table"``) and the communication overlap
  (``scope "comm_overlap"``: ``ours_overlap_frac``, ``hta_overlap_frac``)

``tracekit.diff/1`` top-level keys (sorted on output, always present):

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
  unchanged: [{a, b, class, count}]}`` for one step (``count``: launches of it in the step) (kernels in a fusion
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
* ``gates`` — ``[{expr, metric, op, value, relative, observed, exceeded, within_noise, failed}]``

``tracekit.check/1``: ``{schema, trace, description, passed, items: [{key, expected, observed, met,
unit, op, expected_value, steps, steps_met, observed_min, observed_max, steps_present, example}],
notes}``. ``expected``/``observed`` are the words the other formats show; the rest are the numbers
behind them (:class:`tracekit.diff.expect.Item`): ``unit`` count | bytes | ns | percent | bool |
names, ``op`` == | >= | <= | present | absent, ``expected_value`` (time limits in ns; the pattern for
names), ``steps``/``steps_met`` (units measured / meeting it), ``observed_min``/``observed_max``
(bounds; null without steps), ``steps_present`` and ``example`` (bool and names; else null).

``tracekit.compare/1`` (``tracekit compare TRACE…``, :mod:`tracekit.diff.side_by_side`): ``{schema, baseline
(label), rows: [{label, path, is_baseline, shapes, units, steady_units, set_aside: {state: units},
compilations, recompiles, dynamic_promotions, shape_changes, compile_ns, recompile_ns, graph_records,
graph_replays, record_ns, jit_ns, one_off_ns, set_aside_count, set_aside_gpu_ns, gpu_ns,
cpu_dispatch_ns, wall_ns, break_even: null | {reason ("pays_off" | "immediately" | "slower" |
"overtaken" | "unmeasured"), calls, extra_ns, saving_ns}}], verdict: [sentences], findings: [{kind
("compiled" | "jit" | "none" | "fastest" | "cpu_bound"), subject, quantities: {…}}], rules: {steady,
break_even}, gates: [{expr, metric, op, value, relative, observed, traces, failed}]}``; ``gpu_ns``,
``cpu_dispatch_ns`` and ``wall_ns`` are the steady state per call (null without units).

``tracekit.ranks/1`` (``tracekit report DIR``): ``{schema, directory, slowest, ranks: [{file, rank,
steps, mean_step_ns, max_step_ns, gpu_busy_ns, kernel_count, error}]}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit import schemas
from tracekit.render.base import Renderer

if TYPE_CHECKING:
    import polars as pl

    from tracekit.analyses.breakdown import Breakdown
    from tracekit.analyses.launch_gaps import LaunchGapsReport
    from tracekit.analyses.round_trips import RoundTripReport
    from tracekit.analyses.throughput import ThroughputReport
    from tracekit.analyses.units import Units
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff, Quantity
    from tracekit.diff.side_by_side import Comparison
    from tracekit.diff.verdict import Verdict
    from tracekit.ranks import RankReport
    from tracekit.report import Report


def encode(data: Any) -> bytes:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline.

    Strings are written whole and exact (msgspec escapes control characters, quotes and
    backslashes), so every name keeps its identity. The one string JSON cannot hold is one with a
    lone surrogate (a file name that is not UTF-8, decoded by Python's ``surrogateescape``): each
    such code point is written as U+FFFD instead of failing.
    """
    import msgspec

    try:
        raw = msgspec.json.encode(data, order="sorted")
    except UnicodeEncodeError:
        raw = msgspec.json.encode(_without_surrogates(data), order="sorted")
    return msgspec.json.format(raw, indent=2) + b"\n"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return _SURROGATE.sub("\ufffd", data)
    if isinstance(data, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_without_surrogates(v) for v in data]
    return data


def _rows(frame: pl.DataFrame, rename: dict[str, str] | None = None,
          drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rename = rename or {}
    return [
        {rename.get(k, k): v for k, v in row.items() if k not in drop}
        for row in frame.iter_rows(named=True)
    ]


# -- tracekit.report/1 ----------------------------------------------------------------------------

def report_data(report: Report) -> dict[str, Any]:
    """The report as plain data following the ``tracekit.report/1`` contract."""
    from tracekit.classify.names import decoded_fields

    facts = report.facts
    kernels = _rows(report.kernels, rename={"kernel_class": "class"})
    for row in kernels:
        row["decoded"] = decoded_fields(row["decoded"])
    from tracekit.render.finding_sections import findings_data

    return {
        "schema": schemas.REPORT,
        "findings": findings_data(report.findings),
        "trace": {
            "path": facts.path, "size_bytes": facts.size_bytes, "event_count": facts.event_count,
            "vendor": facts.vendor, "time_format": facts.time_format, "devices": facts.devices,
            "versions": facts.versions, "distributed": facts.distributed,
            "step_numbers": facts.step_numbers, "graph_hashes": facts.graph_hashes,
            "unanalysed_activity": facts.unanalysed_activity, "dropped_events": facts.dropped_events,
            "partial": facts.partial, "annotations": facts.annotations,
        },
        "selected_step": report.selected_step,
        "units": _units(report.units),
        "orphans": _rows(report.orphans),
        "breakdown": _breakdown(report.breakdown),
        "steps": _rows(report.steps),
        "kernels": kernels,
        "paths": {
            "step": report.path_step,
            "truncated": report.paths_truncated,
            "rows": _rows(report.paths, rename={"kernel_class": "class"}, drop=("step",)),
        },
        "zero_kernel_ops": _rows(report.zero_kernel_ops),
        "compile_preops": _rows(report.compile_preops),
        "memory": memory_data(getattr(report, "memory", None)),
        "launch_gaps": _launch_gaps(report.launch_gaps),
        "round_trips": _round_trips(report.round_trips),
        "throughput": _throughput(report.throughput),
        **({"hta": _rows(report.extra["hta"])} if "hta" in report.extra else {}),
        "compilation": compilation_data(report.compilation),
        "set_aside_units": dict(report.set_aside_units),
    }


def compilation_data(comp: Any) -> dict[str, Any] | None:
    """The ``compilation`` object of ``tracekit.report/1`` (None in a report made without it)."""
    if comp is None:
        return None
    return {"found": comp.found, "key_op": comp.key_op, "totals": comp.totals(), "steady": dict(comp.steady),
            "compilations": _rows(comp.compilations), "phases": _rows(comp.phases), "work": _rows(comp.work),
            "set_aside": _rows(comp.set_aside), "jit": _rows(comp.jit), "units": _rows(comp.units)}


def memory_data(memory: Any) -> dict[str, Any] | None:
    """``tracekit.report/1``'s ``memory`` (see the module docstring)."""
    if memory is None:
        return None
    from tracekit.render.memory_sections import HINT

    return {"events": memory.events, "note": HINT if memory.events == 0 else None,
            "devices": _rows(memory.devices), "steps": _rows(memory.steps), "live": _rows(memory.live),
            "ops": _rows(memory.ops), "growth": _rows(memory.growth),
            "out_of_memory": _rows(memory.out_of_memory), "timeline": _rows(memory.timeline)}


def launch_gaps_data(gaps: LaunchGapsReport) -> dict[str, Any]:
    """The launch-gap summary: per-step verdicts, queue delay, idle time by cause, thresholds."""
    return {
        "steps": [
            {"step": r["step"], "gpu_busy_ns": r["gpu_busy_ns"], "gpu_idle_ns": r["gpu_idle_ns"],
             "verdict": r["verdict"], "wall_ns": r["wall_ns"],
             "cpu_dispatch_ns": r["cpu_dispatch_ns"],
             **{flag: r.get(flag) for flag in ("cold", "warmup", "compile", "recompile", "graph_record", "jit",
                                               "partial", "steady", "state")}}
            for r in gaps.per_step.iter_rows(named=True)
        ],
        "queue_delay_ns": dict(gaps.queue_delay_ns),
        "idle_by_cause_ns": dict(zip(gaps.idle_by_cause["cause"].to_list(), gaps.idle_by_cause["dur_ns"].to_list())),
        "thresholds": dict(gaps.thresholds),
        "clock": dict(gaps.clock),
    }


def _launch_gaps(gaps: LaunchGapsReport | None) -> dict[str, Any] | None:
    """The ``launch_gaps`` object of ``tracekit.report/1``: the summary and two of the frames."""
    if gaps is None:
        return None
    return {**launch_gaps_data(gaps), "idle_by_cause": _rows(gaps.idle_by_cause),
            "distributions": _rows(gaps.distributions)}


def _breakdown(found: Breakdown | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"shares": _rows(found.shares), "streams": _rows(found.streams), "overlap": _rows(found.overlap)}


def _units(units: Units | None) -> dict[str, Any] | None:
    if units is None:
        return None
    return {"kind": units.kind, "name": units.name, "source": units.source, "rule": units.rule,
            "count": units.windows.height, "partial": list(units.partial),
            "candidates": _rows(units.candidates)}


def _round_trips(trips: RoundTripReport | None) -> dict[str, Any] | None:
    if trips is None:
        return None
    return {
        "method": trips.method,
        "notes": list(trips.notes),
        "tensors": _rows(trips.tensors),
        "bytes_per_step": _rows(trips.bytes_per_step),
        "unknown_ops": _rows(trips.unknown_ops),
    }


def _throughput(rates: ThroughputReport | None) -> dict[str, Any] | None:
    if rates is None:
        return None
    ceilings = dict(rates.ceilings) if rates.ceilings else None
    return {"device": rates.device, "ceilings": ceilings,
            "kernels": _rows(rates.kernels, rename={"kernel_class": "class"})}


# -- tracekit.diff/1 ------------------------------------------------------------------------------

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


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _finding(f: Verdict) -> dict[str, Any]:
    return {"kind": f.kind, "quantities": dict(f.quantities),
            "subjects": [{"role": s.role, "name": s.name, "class": s.kernel_class,
                          "changes": [list(c) for c in s.changes]} for s in f.subjects]}


def diff_data(diff: Diff, gate_results: Sequence[GateResult] = ()) -> dict[str, Any]:
    """The diff (and its gates) as plain data following the ``tracekit.diff/1`` contract."""
    from tracekit.diff.result import NOISE_RULE, fusion_record
    from tracekit.render import diff_sections as S
    from tracekit.render.finding_sections import findings_data

    al = diff.alignment
    side = lambda p: {"trace": p.label, "unit_kind": p.unit_kind,  # noqa: E731
                      "units": [p.unit_labels[u] for u in p.units],
                      "setup": {"devices": list(p.setup.devices), "versions": p.setup.versions,
                                "world_size": p.setup.world_size, "rank": p.setup.rank}}
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
        "trace_findings": {"new_in_b": findings_data(diff.findings_new),
                           "resolved_in_b": findings_data(diff.findings_resolved)},
        "host_syncs": [{"name": h.name, "count_a": h.count_a, "count_b": h.count_b, **_q(h.quantity)}
                       for h in diff.host_syncs],
        "alignment": {"anchors": al.anchors, "moved": al.moved, "notes": list(al.notes)},
        "unavailable": diff.unavailable,
        "noise_rule": NOISE_RULE,
        "notes": list(diff.notes),
        "gates": [{"expr": r.gate.text, "metric": r.gate.metric, "op": r.gate.op, "value": r.gate.value,
                   "relative": r.gate.relative, "observed": _finite(r.observed), "exceeded": r.exceeded,
                   "within_noise": r.within_noise, "failed": r.failed} for r in gate_results],
    }
    for key, name in _PER_STEP_KEYS.items():
        q = diff.quantities.get(key)
        data[name] = _q(q) if q is not None else None
    return data


# -- tracekit.check/1 and tracekit.ranks/1 --------------------------------------------------------

def check_data(result: CheckResult) -> dict[str, Any]:
    """A check result as plain data following the ``tracekit.check/1`` contract."""
    from tracekit.render.diff_sections import expected_text, observed_text

    return {"schema": schemas.CHECK, "trace": result.trace, "description": result.description,
            "passed": result.passed,
            "items": [{"key": r.key, "expected": expected_text(r), "observed": observed_text(r), "met": r.met,
                       "unit": r.unit, "op": r.op, "expected_value": r.expected_value, "steps": r.steps,
                       "steps_met": r.steps_met, "observed_min": r.observed_min, "observed_max": r.observed_max,
                       "steps_present": r.steps_present, "example": r.example}
                      for r in result.items],
            "notes": list(result.notes)}


def compare_data(comparison: Comparison, gate_results: Sequence[GateResult] = ()) -> dict[str, Any]:
    """A comparison (and its gates) as plain data following the ``tracekit.compare/1`` contract."""
    import dataclasses

    from tracekit.diff.side_by_side import BREAK_EVEN_RULE, STEADY_RULE
    from tracekit.render.compile_sections import verdict_lines

    def row(r: Any) -> dict[str, Any]:
        data = dataclasses.asdict(r)
        data["one_off_ns"] = r.one_off_ns
        return data

    return {
        "schema": schemas.COMPARE, "baseline": comparison.baseline_label,
        "rows": [row(r) for r in comparison.rows],
        "verdict": verdict_lines(comparison),
        "findings": [{"kind": f.kind, "subject": f.subject, "quantities": dict(f.quantities)}
                     for f in comparison.findings],
        "rules": {"steady": STEADY_RULE, "break_even": BREAK_EVEN_RULE},
        "gates": [{"expr": g.gate.text, "metric": g.gate.metric, "op": g.gate.op, "value": g.gate.value,
                   "relative": g.gate.relative, "observed": _finite(g.observed), "traces": list(g.traces),
                   "failed": g.failed} for g in gate_results],
    }


def ranks_data(rank_report: RankReport) -> dict[str, Any]:
    """A directory's per-rank summary following the ``tracekit.ranks/1`` contract."""
    return {"schema": schemas.RANKS, "directory": rank_report.directory, "slowest": rank_report.slowest,
            "ranks": rank_report.ranks.to_dicts()}


class JsonRenderer(Renderer):
    """The JSON contracts above (``color`` and ``width`` do not apply)."""

    name = "json"
    extensions = (".json",)

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        out.write(encode(report_data(report)).decode())

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        out.write(encode(diff_data(diff, gate_results)).decode())

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        out.write(encode(check_data(result)).decode())

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        out.write(encode(ranks_data(rank_report)).decode())

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        out.write(encode(compare_data(comparison, gate_results)).decode())
