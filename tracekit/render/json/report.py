"""``tracekit.report/1``: the JSON of ``tracekit report TRACE``. Top-level keys (all always present):

* ``schema`` — ``"tracekit.report/1"``
* ``findings`` (added in /1) — what is wrong, warnings first (:mod:`tracekit.findings`):
  ``[{rule, title, severity ("warning" | "info"), steps: [unit numbers], evidence: [{role (op | kernel |
  launch | memcpy | step | tensor), name, step, ts_ns (first occurrence), count_per_step,
  dur_ns_per_step, bytes_per_step, detail}], cost_ns_per_step (measured; a one-time cost when
  ``quantities.once`` is true: a cold step, a recompile), saving_ns_per_step
  (projected from the trace, in ``resource``; null when it cannot be priced), saving_basis (how),
  resource (added in /1: what the fix shrinks, "gpu" | "host" | "wall" | "once"), saving_wall_ns (added
  in /1: what the step's wall time would lose, projected through the step decomposition; null when not
  priced; severity follows it), wall_basis (how), fix (one line, the PyTorch knob), thresholds: {NAME:
  value}, quantities: {name: number | text}}]``, sorted warnings first, then by saving_wall_ns
* ``trace`` — ``{path, size_bytes, event_count, vendor, time_format, devices: [{id, name,
  compute_capability, num_sms, total_global_mem}], versions: {key: text}, distributed, step_numbers,
  graph_hashes, unanalysed_activity: {category: events} (device activity tracekit does not analyse),
  dropped_events: {reason: events} (reasons ``unusable_time``, ``not_an_event``; empty when none),
  partial: null | why only the events before a cut were read (``--partial``), annotations (added in
  /1): events ``tracekit annotate`` added to the file, set aside unread (0 for a profiler's trace)}``
* ``selected_step`` — the ``--step`` number or null
* ``units`` — what the steps are (:mod:`tracekit.analyses.units`): ``{kind ("ProfilerStep" | "span"
  | "period" | "trace" | "none"), name, source ("profiler" | "auto" | "user"), rule (why, in words),
  count, partial: [numbers], candidates: [{name, cat, occurrences, top_level, coverage, first_ns, alike}]}``
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
  addressed (false: events without block addresses, before PyTorch 1.9; the block figures are null), events, allocations, frees, bytes_allocated, bytes_freed, frees_before_trace,
  bytes_freed_before_trace, allocated_at_start, allocated_at_end, peak_allocated, peak_ts, peak_step,
  peak_offset_ns, peak_reserved, reserved_at_peak, fragmentation, total_memory, headroom, live_bytes,
  live_blocks, before_trace_at_peak, op, cpu_op, top_op, annotation, phase, out_of_memory}], steps:
  [{step, device, peak_allocated, peak_ts, peak_reserved, allocated_at_start, allocated_at_end, op,
  top_op, annotation, phase}], live: [{device, op, top_op, phase, blocks, bytes, largest}] (blocks
  alive at the device's peak by allocating op), ops: [{device, op, allocations, bytes_allocated,
  bytes_freed, net, largest, incl_allocations, incl_bytes_allocated, incl_bytes_freed, incl_net,
  incl_largest}], growth: [{step, device, op, net, allocations}], out_of_memory: [{device, ts, bytes,
  allocated, reserved, op}], timeline: [{device, ts, allocated, reserved}] (at most 256 points per
  device, each the highest of its span of time), set_aside: {reason: events} (events left out of some
  figures: "implausible_size", "sums_overflow", "no_address")}``; null in a report made without it
* ``decomposition`` — (added in /1) each unit's CPU span by host state and its GPU idle time by what the
  host did meanwhile (:mod:`tracekit.analyses.decomposition`; ns): ``{limit ("gpu" | "blocked" | "data" |
  "dispatch" | "op_free"; null without units), limit_share (of the wall for "gpu", else of the CPU span),
  limit_rule, units: [{step, pid, tid, cpu_span_ns, blocked_ns, data_ns, dispatch_ns, op_free_ns,
  wall_ns, gpu_busy_ns, gpu_idle_ns, idle_while_blocked_ns, idle_while_data_ns, idle_while_dispatch_ns,
  idle_while_op_free_ns, limit, steady}], totals: [{part, of, total_ns, median_ns, share}] (over the
  steady units; over the ``--step`` unit with ``--step``)}``; null in a report made without it
* ``serving`` — (added in /1) a serving or generation loop (:mod:`tracekit.analyses.serving`; ns; null
  for any other trace): ``{source ("vllm" | "sglang" | "tensorrt-llm" | "shapes": where phases and tokens
  came from), window: {first, last, iterations, after} (the steady-state window: the units after
  ``after``, the last to warm up — cold, warm-up, compile, CUDA-graph capture —, less a cut last one),
  iterations: [{step, label, source, phase ("prefill" | "decode" | "mixed" | "other" | "unknown"),
  prefill_requests, prefill_tokens, decode_requests, decode_tokens, requests, tokens (null: not known),
  wall_ns, cpu_span_ns, gpu_busy_ns, gpu_idle_ns, state, in_window}], phases: [{phase, iterations,
  requests, tokens, wall_ns, cpu_span_ns, gpu_busy_ns, gpu_idle_ns, ns_per_token (wall / tokens),
  gpu_ns_per_token (GPU busy / tokens); null when some token count is unknown}] (all iterations),
  window_phases: [same] (the steady window's), classes: [{phase, kernel_class, gpu_ns, share}]}``.
* ``graphs`` — (added in /1) CUDA-graph replays (:mod:`tracekit.analyses.graph_replays`; ns; null in a
  report made before it existed): ``{gpu_ns (every activity), replayed_ns, attributed_ns, attributed_share (null: nothing
  replayed), annotated_ns, captures, companion (the --graph-companion path or null), rewritten (by
  PyTorch's annotation script), lanes (the lanes that script put replayed activities on), graphs:
  [{graph, graph_id, source ("capture" | "companion capture" | "companion" | null), match ("graph node
  id" | "replay order" | "kernel names"), score, replays, activities_per_replay, gpu_ns, attributed_ns,
  replay_ns_median, replay_ns_min, replay_ns_max, launch_ns_median, eager_launch_ns}], notes}``.
  ``units.candidates`` rows also carry (added in /1) ``alike``: for a period candidate (``name``
  ``from:OP``, the ``--unit`` argument), how many of its periods hold the same top-level op sequence
* ``hta`` — only with ``--hta``: per rank/step/stream busy and idle from tracekit and HTA, the report's
  Steps table against HTA's steps (``scope "steps_table"``) and the communication overlap
  (``scope "comm_overlap"``: ``ours_overlap_frac``, ``hta_overlap_frac``)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.render.findings_data import findings_data
from tracekit.render.json.encode import rows
from tracekit.render.views.memory import HINT

if TYPE_CHECKING:
    from tracekit.analyses.breakdown import Breakdown
    from tracekit.analyses.launch_gaps import LaunchGapsReport
    from tracekit.analyses.round_trips import RoundTripReport
    from tracekit.analyses.throughput import ThroughputReport
    from tracekit.analyses.units import Units
    from tracekit.results.report import Report


#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.report/1"


def data(report: Report) -> dict[str, Any]:
    """The report as plain data following the ``tracekit.report/1`` contract."""
    from tracekit.classify.names import decoded_fields

    facts = report.facts
    kernels = rows(report.kernels, rename={"kernel_class": "class"})
    for row in kernels:
        row["decoded"] = decoded_fields(row["decoded"])
    return {
        "schema": SCHEMA,
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
        "orphans": rows(report.orphans),
        "breakdown": _breakdown(report.breakdown),
        "steps": rows(report.steps),
        "kernels": kernels,
        "paths": {
            "step": report.path_step,
            "truncated": report.paths_truncated,
            "rows": rows(report.paths, rename={"kernel_class": "class"}, drop=("step",)),
        },
        "zero_kernel_ops": rows(report.zero_kernel_ops),
        "compile_preops": rows(report.compile_preops),
        "memory": memory_data(getattr(report, "memory", None)),
        "launch_gaps": _launch_gaps(report.launch_gaps),
        "round_trips": _round_trips(report.round_trips),
        "throughput": _throughput(report.throughput),
        **({"hta": rows(report.extra["hta"])} if "hta" in report.extra else {}),
        "compilation": compilation_data(report.compilation),
        "set_aside_units": dict(report.set_aside_units),
        "decomposition": decomposition_data(report.decomposition),
        "serving": serving_data(getattr(report, "serving", None)),
        "graphs": graphs_data(getattr(report, "graphs", None)),
    }


def graphs_data(found: Any) -> dict[str, Any] | None:
    """The ``graphs`` object of ``tracekit.report/1`` (None in a report made before it existed)."""
    if found is None:
        return None
    return {"gpu_ns": found.gpu_ns, "replayed_ns": found.replayed_ns, "attributed_ns": found.attributed_ns,
            "attributed_share": found.attributed_share, "annotated_ns": found.annotated_ns,
            "captures": found.captures, "companion": found.companion, "rewritten": found.rewritten,
            "lanes": list(found.lanes), "graphs": rows(found.graphs), "notes": list(found.notes)}


def serving_data(found: Any) -> dict[str, Any] | None:
    """The ``serving`` object of ``tracekit.report/1`` (None: no serving loop, or a report made without it)."""
    if found is None:
        return None
    return {"source": found.source, "window": dict(found.window), "iterations": rows(found.iterations),
            "phases": rows(found.phases), "window_phases": rows(found.window_phases),
            "classes": rows(found.classes)}


def decomposition_data(found: Any) -> dict[str, Any] | None:
    """The ``decomposition`` object of ``tracekit.report/1`` (None in a report made without it)."""
    if found is None:
        return None
    from tracekit.analyses.decomposition import LIMIT_RULE

    return {"limit": found.limit, "limit_share": found.limit_share, "limit_rule": LIMIT_RULE,
            "units": rows(found.units), "totals": rows(found.totals)}


def compilation_data(comp: Any) -> dict[str, Any] | None:
    """The ``compilation`` object of ``tracekit.report/1`` (None in a report made without it)."""
    if comp is None:
        return None
    return {"found": comp.found, "key_op": comp.key_op, "totals": comp.totals(), "steady": dict(comp.steady),
            "compilations": rows(comp.compilations), "phases": rows(comp.phases), "work": rows(comp.work),
            "set_aside": rows(comp.set_aside), "jit": rows(comp.jit), "units": rows(comp.units)}


def memory_data(memory: Any) -> dict[str, Any] | None:
    """``tracekit.report/1``'s ``memory`` (see the module docstring)."""
    if memory is None:
        return None
    return {"events": memory.events, "note": HINT if memory.events == 0 else None,
            "devices": rows(memory.devices), "steps": rows(memory.steps), "live": rows(memory.live),
            "ops": rows(memory.ops), "growth": rows(memory.growth),
            "out_of_memory": rows(memory.out_of_memory), "timeline": rows(memory.timeline),
            "set_aside": dict(getattr(memory, "set_aside", {}) or {})}


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
    return {**launch_gaps_data(gaps), "idle_by_cause": rows(gaps.idle_by_cause),
            "distributions": rows(gaps.distributions)}


def _breakdown(found: Breakdown | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"shares": rows(found.shares), "streams": rows(found.streams), "overlap": rows(found.overlap)}


def _units(units: Units | None) -> dict[str, Any] | None:
    if units is None:
        return None
    return {"kind": units.kind, "name": units.name, "source": units.source, "rule": units.rule,
            "count": units.windows.height, "partial": list(units.partial),
            "candidates": rows(units.candidates)}


def _round_trips(trips: RoundTripReport | None) -> dict[str, Any] | None:
    if trips is None:
        return None
    return {
        "method": trips.method,
        "notes": list(trips.notes),
        "tensors": rows(trips.tensors),
        "bytes_per_step": rows(trips.bytes_per_step),
        "unknown_ops": rows(trips.unknown_ops),
    }


def _throughput(rates: ThroughputReport | None) -> dict[str, Any] | None:
    if rates is None:
        return None
    ceilings = dict(rates.ceilings) if rates.ceilings else None
    return {"device": rates.device, "ceilings": ceilings,
            "kernels": rows(rates.kernels, rename={"kernel_class": "class"})}
