"""JSON renderer: the versioned ``tracekit.report/1`` contract, sorted keys, byte-for-byte stable.

Top-level keys (all always present):

* ``schema`` — ``"tracekit.report/1"``
* ``trace`` — ``{path, size_bytes, event_count, vendor, time_format, devices: [{id, name,
  compute_capability, num_sms, total_global_mem}], versions: {key: text}, distributed, step_numbers,
  graph_hashes}``
* ``selected_step`` — the ``--step`` number or null
* ``steps`` — ``[{name, number, start_ns, dur_ns, gpu_busy_ns, kernel_count, gpu_activity_count}]``
* ``kernels`` — ``[{name, class, library, kind, count, total_ns, mean_ns, launch_api, cpu_op,
  decoded: {…}}]``; ``kind`` is kernel | memcpy | memset; ``kernel_count`` in steps counts kernels only
* ``paths`` — ``{step, truncated, rows: [{scope, top_op, cpu_op, kernel, class, launch, dur_ns}]}``
* ``zero_kernel_ops`` — ``[{name, count, cpu_ns}]``
* ``compile_preops`` — ``[{step, name, kind, count, cpu_ns, graph_hash}]``
* ``launch_gaps`` — ``{steps: [{step, gpu_busy_ns, gpu_idle_ns, verdict, wall_ns, cpu_dispatch_ns,
  cold}], queue_delay_ns: {p50, p90, p99, max}, idle_by_cause_ns: {cause: ns}, thresholds: {…},
  distributions: [{group, key, count, launch_dur_p50_ns … queue_delay_max_ns}]}``
* ``round_trips`` — ``{method ("execution_trace" | "shape_inference"), notes, tensors: [{step,
  producer, producer_op, consumer, consumer_op, shape, dtype, bytes}], bytes_per_step: [{step,
  round_trip_bytes, tensor_count, unknown_kernels}], unknown_ops: [{op, count}]}``
* ``throughput`` — ``{device, ceilings: {device, hbm_bytes_per_s, flops: {dtype: FLOP/s}, source…}
  | null, kernels: [{name, class, count, mean_ns, bytes, flops, achieved_gbps, achieved_tflops,
  frac_bw, frac_flops, intensity, ridge, bound, headline, …}]}``
* ``hta`` — only with ``--hta``: per rank/step/stream busy and idle from tracekit and HTA

Times are integer nanoseconds. Additive keys may appear in later minor revisions; a breaking
change bumps the schema to ``tracekit.report/2``.
"""

from __future__ import annotations

from typing import Any, TextIO

import msgspec

from tracekit.classify.names import decoded_fields


def _rows(frame, rename: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rename = rename or {}
    return [
        {rename.get(k, k): v for k, v in row.items() if k not in drop}
        for row in frame.iter_rows(named=True)
    ]


def to_data(report) -> dict[str, Any]:
    """The report as plain data following the ``tracekit.report/1`` contract."""
    facts = report.facts
    kernels = _rows(report.kernels, rename={"kernel_class": "class"})
    for row in kernels:
        row["decoded"] = decoded_fields(row["decoded"])
    return {
        "schema": "tracekit.report/1",
        "trace": {
            "path": facts.path, "size_bytes": facts.size_bytes, "event_count": facts.event_count,
            "vendor": facts.vendor, "time_format": facts.time_format, "devices": facts.devices,
            "versions": facts.versions, "distributed": facts.distributed,
            "step_numbers": facts.step_numbers, "graph_hashes": facts.graph_hashes,
        },
        "selected_step": report.selected_step,
        "steps": _rows(report.steps),
        "kernels": kernels,
        "paths": {
            "step": report.path_step,
            "truncated": report.paths_truncated,
            "rows": _rows(report.paths, rename={"kernel_class": "class"}, drop=("step",)),
        },
        "zero_kernel_ops": _rows(report.zero_kernel_ops),
        "compile_preops": _rows(report.compile_preops),
        "launch_gaps": _launch_gaps(report.launch_gaps),
        "round_trips": _round_trips(report.round_trips),
        "throughput": _throughput(report.throughput),
        **({"hta": _rows(report.extra["hta"])} if "hta" in report.extra else {}),
    }


def _launch_gaps(gaps) -> dict[str, Any] | None:
    if gaps is None:
        return None
    data = gaps.to_json()
    data["distributions"] = _rows(gaps.distributions)
    return data


def _round_trips(trips) -> dict[str, Any] | None:
    if trips is None:
        return None
    return {
        "method": trips.method,
        "notes": list(trips.notes),
        "tensors": _rows(trips.tensors),
        "bytes_per_step": _rows(trips.bytes_per_step),
        "unknown_ops": _rows(trips.unknown_ops),
    }


def _throughput(rates) -> dict[str, Any] | None:
    if rates is None:
        return None
    ceilings = dict(rates.ceilings) if rates.ceilings else None
    return {"device": rates.device, "ceilings": ceilings,
            "kernels": _rows(rates.kernels, rename={"kernel_class": "class"})}


def encode(data: Any) -> bytes:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline."""
    return msgspec.json.format(msgspec.json.encode(data, order="sorted"), indent=2) + b"\n"


def render(report, out: TextIO) -> None:
    """Write the report's JSON to ``out``."""
    out.write(encode(to_data(report)).decode())
