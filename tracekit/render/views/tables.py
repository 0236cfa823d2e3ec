"""The report's facts, tables and notes as display strings (the parts of
:mod:`tracekit.render.views.report`).

Each table function returns ``(title, headers, rows)``; a cell is a plain string or a
:class:`~tracekit.render.text.Code`. Keeping the content here means every format shows the same
facts and differs only in markup. Nothing here computes a figure.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import polars as pl

from tracekit.classify.names import describe_decoded, short_kernel_name
from tracekit.render.text import Rows, pct, us
from tracekit.render.views import compilation, decomposition, graphs, memory, serving
from tracekit.render.views.labels import step_label

if TYPE_CHECKING:
    from tracekit.results.report import Report


def distributed_line(info: dict) -> str:
    """``distributedInfo`` in words: scalars as ``key=value``; the process-group config (a list of
    groups, hundreds on a big run) as a count and the first few groups' names and sizes."""
    parts = []
    for key, value in sorted(info.items()):
        if key == "pg_config" and isinstance(value, list):
            groups = [g for g in value if isinstance(g, dict)]
            named = [f"{g.get('pg_desc') or g.get('pg_name', '?')} ({g.get('pg_size', '?')} ranks)" for g in groups[:3]]
            more = f", +{len(groups) - 3} more" if len(groups) > 3 else ""
            parts.append(f"process groups: {', '.join(named)}{more}" if named else "process groups: none")
        elif isinstance(value, (dict, list)):
            parts.append(f"{key}: {len(value)} entries")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts)


def facts_lines(report: Report) -> list[tuple[str, str]]:
    """(label, value) pairs describing the trace."""
    f = report.facts
    described = [f"{d['name']} (cc {d['compute_capability']}, {d['num_sms']} SMs)"
                 if d.get("compute_capability") else d["name"] for d in f.devices]
    # Identical devices once, counted (a node's 8 GPUs are one line, not eight).
    counted = {name: described.count(name) for name in described}
    devices = "; ".join(f"{n} × {name}" if n > 1 else name for name, n in counted.items()) or (
        "none (CPU-only trace)" if f.vendor == "cpu" else "not recorded")
    steps = ", ".join(str(n) for n in f.step_numbers) or "none"
    lines = [
        ("trace", os.path.basename(f.path)),
        ("device", devices),
        ("vendor", f.vendor),
        ("events", f"{f.event_count:,}"),
        ("steps", steps),
    ]
    lines += input_lines(f)
    lines += [(k, v) for k, v in f.versions.items()]
    if f.distributed:
        lines.append(("distributed", distributed_line(f.distributed)))
    if f.graph_hashes:
        lines.append(("compiled graphs", ", ".join(f.graph_hashes)))
    units = report.units
    if units is not None and units.kind not in ("ProfilerStep", "none"):
        lines.append(("units", units.describe()))
    for label, line in (("compilation", compilation.summary_line(report)),
                        ("steady units", compilation.steady_line(report))):
        if line:
            lines.append((label, line))
    lines += [("not in any step", line) for line in orphan_lines(report)]
    skew = clock_line(report)
    if skew:
        lines.append(("clock skew", skew))
    if report.selected_step is not None:
        lines.append(("selected step", step_label(report, report.selected_step)))
    return lines


def input_lines(f) -> list[tuple[str, str]]:
    """What the load left out or could not analyse, one line each: the input read in part, events
    dropped, events tracekit annotate added, device activity tracekit does not analyse (by family)."""
    lines = []
    if f.partial:
        lines.append(("PARTIAL", f.partial))
    parts = []
    if n := f.dropped_events.get("unusable_time", 0):
        parts.append(f"{n:,} event{'s with unusable times' if n != 1 else ' with an unusable time'} dropped")
    if n := f.dropped_events.get("not_an_event", 0):
        parts.append(f"{n:,} {'entries' if n != 1 else 'entry'} of traceEvents that are not events skipped")
    if parts:
        lines.append(("dropped", "; ".join(parts)))
    if n := f.annotations:
        lines.append(("annotations", f"{n:,} event{'s' if n != 1 else ''} added by tracekit annotate: "
                                     "set aside, not analysed"))
    if f.unanalysed_families:
        lines.append(("device activity", "; ".join(
            f"{n:,} {family} device activit{'ies' if n != 1 else 'y'}: not analysed"
            for family, n in f.unanalysed_families.items())))
    return lines


def orphan_lines(report: Report) -> list[str]:
    """One sentence per reason for GPU work whose launch call is not in the trace."""
    from tracekit.analyses.attribution import ORPHAN_REASONS

    out = []
    orphans = report.orphans
    for reason in orphans["reason"].unique(maintain_order=True).to_list():
        part = orphans.filter(pl.col("reason") == reason)
        counts = ", ".join(f"{n:,} {kind}{'s' if n != 1 else ''}"
                           for kind, n in zip(part["kind"].to_list(), part["count"].to_list()))
        out.append(f"{counts}, {us(int(part['dur_ns'].sum()))} GPU time, {ORPHAN_REASONS.get(reason, reason)}")
    return out


def clock_line(report: Report) -> str | None:
    """The clock-skew finding in one sentence, or None when the clocks agree."""
    clock = report.launch_gaps.clock if report.launch_gaps is not None else {}
    if not clock.get("skewed"):
        return None
    evidence = []
    if clock["early"]:
        evidence.append(f"{clock['early']:,} of {clock['linked']:,} launched GPU activities start before their "
                        "launch call")
    if clock["idle_starts"]:
        evidence.append(f"work starting on an idle GPU is {us(clock['idle_start_delay_p50_ns'])} after its launch "
                        f"returned (p10 {us(clock['idle_start_delay_p10_ns'])}, "
                        f"p90 {us(clock['idle_start_delay_p90_ns'])})")
    return (f"GPU timestamps are offset from the CPU's by about {us(clock['offset_ns'])}: "
            f"{'; '.join(evidence)}. Queue delays and idle-gap causes are corrected for it")


def steps_table(report: Report) -> Rows:
    """One row per unit: its span, GPU busy, counts, and its decomposition (host state, idle, limit)."""
    # One "wall" everywhere (tracekit.analyses.steps: max of CPU span and GPU window), the CPU span
    # beside it; a stored report without the per-step summary falls back to the CPU span.
    walls = ({r["step"]: r["wall_ns"] for r in report.launch_gaps.per_step.iter_rows(named=True)}
             if report.launch_gaps is not None and "wall_ns" in report.launch_gaps.per_step.columns else {})
    rows = []
    for r in report.steps.iter_rows(named=True):
        wall = walls.get(r["number"]) or r["dur_ns"]
        rows.append([r["name"], us(wall), us(r["dur_ns"]), us(r["gpu_busy_ns"]), pct(r["gpu_busy_ns"], wall),
                     str(r["kernel_count"]), str(r["gpu_activity_count"]),
                     *decomposition.step_cells(report, r["number"])])
    title = "Steps"
    if report.units is not None and report.units.kind not in ("ProfilerStep", "none"):
        title += f" (units: {report.units.describe().split(' (')[0]})"
    if report.decomposition is not None and report.decomposition.units.height:
        title += decomposition.TABLE_NOTE
    return (title, ["step", "wall", "CPU span", "GPU busy", "busy/wall", "kernels",
                    "GPU activities", *decomposition.headers()], rows)


def paths_table(report: Report) -> Rows:
    title = "Launch paths"
    if report.path_step is not None:
        title += f" ({step_label(report, report.path_step)})"
    if report.paths_truncated:
        title += f" — first {report.paths.height} kernels"
    decoded = _decoded_by_name(report)
    rows = [
        [r["scope"] or "", r["top_op"] or "", r["cpu_op"] or "",
         short_kernel_name(r["kernel"], decoded.get(r["kernel"])), r["kernel_class"], r["launch"],
         us(r["dur_ns"])]
        for r in report.paths.iter_rows(named=True)
    ]
    return (title, ["scope", "op", "CPU op", "kernel", "class", "launch", "GPU time"], rows)


def _decoded_by_name(report: Report) -> dict[str, str]:
    """Kernel name -> its decoded fields (JSON text), so short names can show the functor."""
    return dict(zip(report.kernels["name"].to_list(), report.kernels["decoded"].to_list()))


def kernels_table(report: Report) -> Rows:
    """Kernels grouped by class; classes ordered by their total time (``class_total_ns``)."""
    k = report.kernels
    ordered = k.sort(["class_total_ns", "kernel_class"], descending=[True, False], maintain_order=True)
    rows = [[r["kernel_class"], short_kernel_name(r["name"], r["decoded"]), r["library"], str(r["count"]),
             us(r["total_ns"]), us(r["mean_ns"]), describe_decoded(r["decoded"])]
            for r in ordered.iter_rows(named=True)]
    title = "Kernels by class" + (" (steady units)" if report.set_aside_units else "")
    return (title, ["class", "kernel", "library", "count", "total", "mean", "decoded"], rows)


def _breakdown_scope(report: Report, frame: pl.DataFrame) -> pl.DataFrame:
    """The rows a table shows: the selected unit's with ``--step``, else the whole trace's."""
    if report.selected_step is not None:
        return frame.filter((pl.col("scope") == "unit") & (pl.col("unit") == report.selected_step))
    return frame.filter(pl.col("scope") == "trace")


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def shares_table(report: Report, group: str) -> Rows:
    """GPU time per kernel class (``group="class"``) or library, as a share of busy time."""
    found = report.breakdown
    rows = []
    per_unit = report.selected_step is None and found is not None and bool(
        found.shares.filter(pl.col("scope") == "unit").height)
    if found is not None:
        frame = _breakdown_scope(report, found.shares.filter(pl.col("group") == group))
        for r in frame.iter_rows(named=True):
            row = [r["key"], f"{r['count']:,}", us(r["gpu_ns"]), _share(r["busy_share"])]
            rows.append(row + ([_share(r["median_unit_share"])] if per_unit else []))
    scope = step_label(report, report.selected_step) if report.selected_step is not None else "whole trace"
    headers = [group, "activities", "GPU time", "share of busy"] + (["median per step (steady)"] if per_unit else [])
    return (f"GPU time by {group} ({scope})", headers, rows)


def streams_table(report: Report) -> Rows:
    """Per-stream busy time."""
    found = report.breakdown
    rows = []
    if found is not None:
        for r in _breakdown_scope(report, found.streams).iter_rows(named=True):
            rows.append(["" if r["device"] is None else str(r["device"]), "" if r["stream"] is None else str(r["stream"]),
                         f"{r['count']:,}", us(r["gpu_ns"]), us(r["busy_ns"]), _share(r["busy_share"])])
    return ("GPU streams", ["device", "stream", "activities", "GPU time", "busy", "share of busy"], rows)


def overlap_table(report: Report) -> Rows | None:
    """How much of the communication kernels' time compute overlapped (only when there is any)."""
    found = report.breakdown
    if found is None:
        return None
    frame = found.overlap.filter(pl.col("comm_count") > 0)
    if report.selected_step is not None:
        frame = frame.filter(pl.col("unit") == report.selected_step)
    if frame.height == 0:
        return None
    rows = [["whole trace" if r["scope"] == "trace" else step_label(report, r["unit"]), f"{r['comm_count']:,}",
             us(r["comm_ns"]), us(r["overlapped_ns"]), _share(r["overlap_frac"])]
            for r in frame.iter_rows(named=True)]
    return ("Communication overlapped by compute",
            ["scope", "communication kernels", "communication time", "overlapped by compute", "overlap"], rows)


def zero_kernel_table(report: Report) -> Rows:
    rows = [[r["name"], str(r["count"]), us(r["cpu_ns"])]
            for r in report.zero_kernel_ops.iter_rows(named=True)]
    return ("Ops that launch no GPU work", ["op", "count", "CPU time (inclusive)"], rows)


def preops_table(report: Report) -> Rows:
    rows = [[str(r["step"]) if r["step"] is not None else "", r["name"], r["kind"], str(r["count"]),
             us(r["cpu_ns"])]
            for r in report.compile_preops.iter_rows(named=True)]
    return ("torch.compile pre-ops", ["step", "op", "kind", "count", "CPU time"], rows)


#: How the per-step flags of :mod:`tracekit.analyses.steps` are worded beside a verdict.
STEP_FLAG_WORDS = {"cold": "cold first step", "warmup": "warm-up", "compile": "compiling",
                   "partial": "cut short by the trace"}
#: A unit's state (:data:`tracekit.analyses.steps.STATES`) beside its verdict.
STATE_WORDS = {"recompile": "recompiling", "compile": "compiling", "graph_record": "CUDA-graph record",
               "jit_warmup": "JIT warm-up", "cold": "cold", "warmup": "warm-up", "partial": "cut short by the trace"}


def launch_gaps_table(report: Report) -> Rows:
    """Per-step wall, dispatch, busy, idle and verdict; the rule is stated in :func:`notes`."""
    gaps = report.launch_gaps
    rows = []
    if gaps is not None:
        for r in gaps.per_step.iter_rows(named=True):
            state = r.get("state")
            verdict = r["verdict"] + (f" ({STATE_WORDS.get(state, state)})" if state and state != "steady" else "")
            if state is None:  # a stored report from before units had a state
                verdict += "".join(f" ({words})" for flag, words in STEP_FLAG_WORDS.items() if r.get(flag))
            rows.append([str(r["step"]), us(r["wall_ns"]), us(r["cpu_dispatch_ns"]), us(r["gpu_busy_ns"]),
                         pct(r["gpu_busy_ns"], r["wall_ns"]), us(r["gpu_idle_ns"]), verdict])
    return ("Launch gaps and verdict per step",
            ["step", "wall", "CPU dispatch", "GPU busy", "busy/wall", "GPU idle", "verdict"], rows)


def idle_causes_table(report: Report) -> Rows:
    """Idle time between GPU activities by cause, and queue-delay percentiles."""
    gaps = report.launch_gaps
    rows = []
    if gaps is not None:  # the causes that occurred, in the frame's order (longest idle first)
        for r in gaps.idle_by_cause.filter(pl.col("gaps") > 0).iter_rows(named=True):
            rows.append([r["cause"], str(r["gaps"]), us(r["dur_ns"])])
    return (IDLE_CAUSES_TITLE, ["cause", "gaps", "idle time"], rows)


#: The idle table's title carries its definition: its scope and what "waited for the CPU" tests
#: differ from HTA's idle breakdown (up to 62 % apart on real traces), so the table says which it is.
IDLE_CAUSES_TITLE = "GPU idle gaps by cause (whole trace, streams merged: see the notes)"
#: Its definition, stated in the notes.
IDLE_CAUSES_RULE = ("Idle gaps by cause cover the whole trace with the device's streams merged; a gap waited for "
                    "the CPU when the next launch call ended after the gap began − 2 µs. HTA's host_wait differs: it "
                    "tests the call's start, per stream, without the last step (--hta shows HTA's split beside ours)")


def hta_idle_table(report: Report) -> Rows | None:
    """HTA's idle split per stream (host_wait / kernel_wait / other) beside ours under HTA's rule
    (only with ``--hta``)."""
    hta = report.extra.get("hta")
    if hta is None:
        return None
    streams = hta.filter(pl.col("scope") == "stream")
    if streams.height == 0:
        return None
    rows = [[str(r["key"]), us(r["hta_idle_ns"]), us(r["hta_host_wait_ns"]), us(r["ours_host_wait_ns"]),
             us(r["hta_kernel_wait_ns"]), us(r["ours_kernel_wait_ns"]), us(r["hta_other_wait_ns"]),
             us(r["ours_other_wait_ns"])] for r in streams.iter_rows(named=True)]
    return ("HTA's idle breakdown per stream (host_wait: the next kernel's launch call started after the previous "
            "kernel ended; kernel_wait: a gap shorter than the back-to-back threshold; ours: the same rule over our rows)",
            ["stream", "idle (HTA)", "host_wait (HTA)", "host_wait (ours)", "kernel_wait (HTA)", "kernel_wait (ours)",
             "other (HTA)", "other (ours)"], rows)


def round_trips_table(report: Report) -> Rows:
    trips = report.round_trips
    rows = []
    title = "Memory round trips (tensors written to HBM and read back in the same step)"
    if trips is not None:
        title += f" — method: {trips.method}"
        tensors = trips.tensors
        if report.path_step is not None and report.selected_step is None:
            # One step is representative; every step's tensors are in the JSON output.
            tensors = tensors.filter(pl.col("step") == report.path_step)
            title += f" — {step_label(report, report.path_step)} (all steps: --format json)"
        decoded = _decoded_by_name(report)
        for r in tensors.iter_rows(named=True):
            rows.append([str(r["step"]), _kernel_and_op(r["producer"], r["producer_op"], decoded),
                         _kernel_and_op(r["consumer"], r["consumer_op"], decoded), r["shape"],
                         r["dtype"], f"{r['bytes']:,}"])
    return (title, ["step", "producer (op)", "consumer (op)", "shape", "dtype", "bytes"], rows)


def _kernel_and_op(kernel: str, op: str | None, decoded: dict[str, str]) -> str:
    # Inductor's cpu_op carries the kernel's own name; say it once.
    name = short_kernel_name(kernel, decoded.get(kernel))
    return name if not op or op == kernel else f"{name} ({op})"


def round_trip_steps_table(report: Report) -> Rows:
    trips = report.round_trips
    rows = []
    if trips is not None:
        for r in trips.bytes_per_step.iter_rows(named=True):
            rows.append(["" if r["step"] is None else str(r["step"]), str(r["tensor_count"]),
                         _trip_bytes(r), str(r["unknown_kernels"])])
    return ("Round-trip bytes per step", ["step", "tensors", "bytes", "kernels without a traffic model"], rows)


def _trip_bytes(row: dict) -> str:
    """A step's round-trip bytes: unknown, never 0, while kernels without a model may hide some;
    a floor ("≥ N") when some were found besides them."""
    if not row["unknown_kernels"]:
        return f"{row['round_trip_bytes']:,}"
    if not row["round_trip_bytes"]:
        return "unknown"
    return f"≥ {row['round_trip_bytes']:,}"


def throughput_table(report: Report) -> Rows:
    rates = report.throughput
    rows = []
    title = "Achieved throughput"
    if rates is not None:
        ceil = rates.ceilings
        if ceil:
            flops = ceil.get("flops_per_s")
            title += (f" vs {ceil.get('device') or rates.device} ceilings ({ceil.get('source')}: "
                      f"{(ceil.get('hbm_bytes_per_s') or 0) / 1e9:,.0f} GB/s, "
                      f"{(flops or 0) / 1e12:,.0f} {ceil.get('dtype', '')} TFLOP/s)")
        else:
            title += f" (no ceilings known for {rates.device or 'this device'}; pass --ceiling)"
        decoded = _decoded_by_name(report)
        for r in rates.kernels.iter_rows(named=True):
            if r["model"] == "unknown":
                figure, frac = "no traffic model", ""
            elif r["headline"] == "flops":
                figure = f"{r['achieved_tflops']:,.1f} TFLOP/s" if r["achieved_tflops"] is not None else "–"
                frac = _frac(r["frac_flops"])
            else:
                figure = f"{r['achieved_gbps']:,.0f} GB/s" if r["achieved_gbps"] is not None else "–"
                frac = _frac(r["frac_bw"])
            rows.append([short_kernel_name(r["name"], decoded.get(r["name"])), r["kernel_class"], str(r["count"]),
                         us(int(r["mean_ns"])), figure, frac, r["bound"] or ""])
    return (title, ["kernel", "class", "count", "mean", "achieved", "of ceiling", "bound by intensity"], rows)


def _frac(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def hta_table(report: Report) -> Rows | None:
    """Our busy/idle beside HolisticTraceAnalysis' (only with ``--hta``)."""
    hta = report.extra.get("hta")
    if hta is None:
        return None
    rows = []
    for r in hta.filter(pl.col("scope") != "stream").iter_rows(named=True):
        if r["scope"] == "comm_overlap":
            figures = [_share(r["ours_overlap_frac"]), _share(r["hta_overlap_frac"]), "", ""]
        else:
            figures = [us(r["ours_busy_ns"]), us(r["hta_busy_ns"]), us(r["ours_idle_ns"]), us(r["hta_idle_ns"])]
        rows.append([r["scope"], str(r["key"]), *figures, "yes" if r["agree"] else "NO"])
    return ("HolisticTraceAnalysis beside tracekit (HTA drops the last step; steps_table: the Steps table above; "
            "comm_overlap: communication overlapped by compute)",
            ["scope", "rank/step", "busy (ours)", "busy (HTA)", "idle (ours)", "idle (HTA)", "agree within 1%"],
            rows)


#: The one definition of a step's wall, stated once in the notes (tracekit.analyses.steps).
WALL_RULE = ("a step's wall is the longer of its CPU span (the ProfilerStep span) and its GPU window (its first "
             "kernel's start to its last one's end), in every table; busy/wall is GPU busy over that wall")


def notes(report: Report) -> list[str]:
    """Sentences stating the rules behind the figures (shown under the tables)."""
    out = []
    if report.units is not None and report.units.source == "auto":
        from tracekit.analyses.units import DETECTION_RULE

        out.append(f"Units: {DETECTION_RULE}.")
        offered = serving.candidates_note(report)
        if offered:
            out.append(offered)
    out += serving.notes(report)
    out += graphs.notes(report)
    if report.launch_gaps is not None:
        t = report.launch_gaps.thresholds
        out.append(f"Wall: {WALL_RULE}.")
        out.append(f"Verdict rule: {t['verdict_rule']}. Cold: {t['cold_rule']}."
                   + (f" {t['steady_rule']}." if "steady_rule" in t else ""))
        out.append(f"Gap causes: {t['gap_cause_rule']}. {IDLE_CAUSES_RULE}.")
        q = report.launch_gaps.queue_delay_ns
        if q.get("p50") is not None:
            corrected = (f", after taking off the GPU clock's offset of {us(report.launch_gaps.clock['offset_ns'])}"
                         if report.launch_gaps.clock.get("skewed") else "")
            out.append(f"Queue delay (GPU start − launch call end{corrected}): p50 {us(q['p50'])}, p90 {us(q['p90'])}, "
                       f"p99 {us(q['p99'])}, max {us(q['max'])}.")
    split = decomposition.note(report)
    if split:
        out.append(split)
    out += compilation.notes(report)
    if report.round_trips is not None:
        for note in report.round_trips.notes:
            out.append(note)
        if report.round_trips.unknown_ops.height:
            ops = ", ".join(f"{r['op']} ×{r['count']}" for r in report.round_trips.unknown_ops.iter_rows(named=True))
            out.append(f"Kernels without a traffic model (their bytes are unknown, not zero): {ops}.")
    return out


#: Rows shown per table in term, Markdown and HTML; long traces have hundreds of steps. JSON is never cut.
MAX_TABLE_ROWS = 60


def _capped(table: Rows) -> Rows:
    title, headers, rows = table
    if len(rows) <= MAX_TABLE_ROWS:
        return table
    note = f" — first {MAX_TABLE_ROWS} of {len(rows)} rows (--format json has all)"
    return (title + note, headers, rows[:MAX_TABLE_ROWS])


def all_tables(report: Report) -> list[Rows]:
    """Every table in display order, each cut to :data:`MAX_TABLE_ROWS` rows."""
    tables = [shares_table(report, "class"), shares_table(report, "library"),
              steps_table(report), *([loop] if (loop := serving.table(report)) is not None else []),
              launch_gaps_table(report), *([graphed] if (graphed := graphs.table(report)) is not None else []),
              *compilation.report_tables(report),
              idle_causes_table(report), streams_table(report)]
    overlap = overlap_table(report)
    if overlap is not None:
        tables.append(overlap)
    tables += [paths_table(report), kernels_table(report), throughput_table(report),
              round_trip_steps_table(report), round_trips_table(report),
              zero_kernel_table(report), preops_table(report), *memory.tables(report)]
    hta = hta_table(report)
    if hta is not None:
        tables.append(hta)
    hta_idle = hta_idle_table(report)
    if hta_idle is not None:
        tables.append(hta_idle)
    return [_capped(t) for t in tables]
