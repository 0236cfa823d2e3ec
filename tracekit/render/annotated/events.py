"""A report as Chrome trace events on tracekit's own tracks: what :mod:`tracekit.render.annotated`
adds to the trace.

Contract: :func:`annotations` turns a whole-trace :class:`~tracekit.results.report.Report` (and its
:class:`~tracekit.trace.Trace`, for where each kernel sits and which pids and flow ids are taken)
into events, each one JSON object's text, with their counts by kind. It computes nothing: every
figure is the report's. The tracks and their events are listed in the package's docstring. Times
are written in the file's own unit and form (:func:`micros`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec
import polars as pl

from tracekit.render.base import AddedEvents
from tracekit.trace import ANNOTATION_CATEGORY, Trace

if TYPE_CHECKING:
    from tracekit.analyses.compilations import Compilations
    from tracekit.analyses.round_trips import RoundTripReport
    from tracekit.findings import Finding
    from tracekit.results.report import Report

#: The process tracekit's tracks live on (another free pid is taken if the trace uses this one).
PID = 0x7AC0
#: Kineto sorts CPU processes by pid and devices at 5,000,000 + device (libkineto's kExceedMaxPid):
#: one less puts tracekit's tracks just above the first GPU.
SORT_INDEX = 4_999_999
PROCESS_NAME = "tracekit"

_ENCODE = msgspec.json.Encoder().encode


def annotations(report: Report, trace: Trace) -> AddedEvents:
    """The events that carry ``report`` (a whole-trace report of ``trace``) on tracekit's tracks,
    the tracks' names and sort indexes first; ``counts`` by kind: ``verdicts``, ``findings``,
    ``compile_spans``, ``idle_gaps``, ``round_trips`` (flow arrows: two events each), ``metadata``."""
    tracks = _Tracks(_free_pid(trace), whole=trace.meta.time_format == "absolute-us-int")
    gaps = report.launch_gaps
    per_step = gaps.per_step.join(report.steps.select(pl.col("number").alias("step"), "name"), on="step",
                                  how="left", maintain_order="left")
    # In the order the tracks are numbered (and so sorted) in the viewer.
    kinds = {
        "verdicts": _verdicts(tracks, per_step),
        "findings": _findings(tracks, report.findings, per_step),
        "compile_spans": _compile_spans(tracks, report.compilation),
        "idle_gaps": _idle_gaps(tracks, gaps.gaps),
        "round_trips": _round_trips(tracks, report.round_trips, trace),
    }
    counts = {kind: len(events) // (2 if kind == "round_trips" else 1) for kind, events in kinds.items()}
    meta = tracks.metadata()
    counts["metadata"] = len(meta)
    body = [event for events in kinds.values() for event in events]
    return AddedEvents(events=tuple(meta + body), counts=counts)


# -- time and ids as the file writes them ------------------------------------------------------------

def micros(ns: int, *, whole: bool = False) -> msgspec.Raw:
    """``ns`` as the µs number a trace writes: three decimals (exact, never through a float), or an
    integer when ``whole`` (a trace written in integer µs, whose times are all whole µs: a decimal
    would make the loader take it for the 3-decimal form) and ``ns`` is one."""
    sign = "-" if ns < 0 else ""
    us, frac = divmod(abs(int(ns)), 1000)
    return msgspec.Raw(f"{sign}{us}".encode() if whole and not frac else f"{sign}{us}.{frac:03d}".encode())


def _file_id(text: str | None) -> int | str | None:
    """A pid/tid as the file wrote it: the loader keeps them as text, Kineto writes integers (and
    ``"Spans"``, ``"stream 7"``…), and a viewer tells ``0`` and ``"0"`` apart."""
    if text is not None and re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _free_pid(trace: Trace) -> int:
    used = set()
    for frame in (trace.ops, trace.launches, trace.gpu, trace.overhead, trace.flows, trace.memory, trace.threads):
        used.update(frame["pid"].unique().to_list())
    pid = PID
    while str(pid) in used:
        pid += 1
    return pid


def _category(track: str) -> str:
    return f"{ANNOTATION_CATEGORY}.{track.replace(' ', '_')}"


class _Tracks:
    """tracekit's process and threads: one thread per track and lane, named when first used."""

    def __init__(self, pid: int, *, whole: bool = False) -> None:
        self.pid = pid
        self.whole = whole  # the trace writes integer µs
        self.tids: dict[str, int] = {}

    def time(self, ns: int) -> msgspec.Raw:
        return micros(ns, whole=self.whole)

    def tid(self, name: str) -> int:
        if name not in self.tids:
            self.tids[name] = len(self.tids) + 1
        return self.tids[name]

    def lanes(self, track: str, starts: list[int], ends: list[int]) -> list[int]:
        """A tid per span: spans that overlap go to further lanes (``track (2)``, …), since a
        thread's complete events must nest; spans are given in start order."""
        free: list[int] = []  # per lane, the end of its last span
        out = []
        for ts, end in zip(starts, ends):
            lane = next((k for k, last in enumerate(free) if last <= ts), len(free))
            if lane == len(free):
                free.append(end)
            else:
                free[lane] = end
            out.append(self.tid(track if lane == 0 else f"{track} ({lane + 1})"))
        return out

    def metadata(self) -> list[bytes]:
        cat = ANNOTATION_CATEGORY
        out = [_ENCODE({"ph": "M", "cat": cat, "name": "process_name", "pid": self.pid, "tid": 0,
                        "args": {"name": PROCESS_NAME}}),
               _ENCODE({"ph": "M", "cat": cat, "name": "process_sort_index", "pid": self.pid, "tid": 0,
                        "args": {"sort_index": SORT_INDEX}})]
        for name, tid in self.tids.items():
            out.append(_ENCODE({"ph": "M", "cat": cat, "name": "thread_name", "pid": self.pid, "tid": tid,
                                "args": {"name": f"{PROCESS_NAME}: {name}"}}))
            out.append(_ENCODE({"ph": "M", "cat": cat, "name": "thread_sort_index", "pid": self.pid,
                                "tid": tid, "args": {"sort_index": tid}}))
        return out


def _span(tracks: _Tracks, tid: int, track: str, name: str, ts: int, dur: int, args: dict[str, Any]) -> bytes:
    return _ENCODE({"ph": "X", "cat": _category(track), "name": name, "pid": tracks.pid, "tid": tid,
                    "ts": tracks.time(ts), "dur": tracks.time(max(int(dur), 0)), "args": args})


# -- the tracks -------------------------------------------------------------------------------------

def _verdicts(tracks: _Tracks, per_step: pl.DataFrame) -> list[bytes]:
    rows = (per_step.with_columns(
        _ts=pl.coalesce("cpu_start_ns", "gpu_start_ns"),
        _dur=pl.when(pl.col("cpu_start_ns").is_not_null()).then("cpu_span_ns").otherwise("gpu_window_ns"))
        .filter(pl.col("_ts").is_not_null()).sort(["_ts", "step"]))
    tids = tracks.lanes("verdict", rows["_ts"].to_list(), (rows["_ts"] + rows["_dur"].fill_null(0)).to_list())
    out = []
    for tid, row in zip(tids, rows.iter_rows(named=True)):
        ts, dur = row.pop("_ts"), row.pop("_dur") or 0
        out.append(_span(tracks, tid, "verdict", row["verdict"], ts, dur, {"unit": row.pop("name"), **row}))
    return out


def _idle_gaps(tracks: _Tracks, gaps: pl.DataFrame) -> list[bytes]:
    out = []
    short = _Short()
    for row in gaps.sort(["device", "start_ns"], nulls_last=True).iter_rows(named=True):
        device, start = row.pop("device"), row.pop("start_ns")
        del row["end_ns"]  # the span's own ts and dur; the track names the device
        row["next_kernel"] = short(row["next_kernel"])
        tid = tracks.tid(f"idle gaps (GPU {device})" if device is not None else "idle gaps")
        out.append(_span(tracks, tid, "idle gaps", row["cause"], start, row["dur_ns"], row))
    return out


class _Short(dict):
    """Kernel names as the tables show them (template kernels folded, at most 80 characters), each
    shortened once: an annotated 1 GB trace names kernels in hundreds of thousands of events."""

    def __call__(self, name: str | None) -> str | None:
        if name is None:
            return None
        if name not in self:
            from tracekit.classify.names import short_kernel_name

            self[name] = short_kernel_name(name)
        return self[name]


def _findings(tracks: _Tracks, findings: tuple[Finding, ...], per_step: pl.DataFrame) -> list[bytes]:
    from tracekit.render.findings_data import findings_data

    starts = dict(zip(per_step["step"].to_list(),
                      per_step.select(pl.coalesce("cpu_start_ns", "gpu_start_ns"))[:, 0].to_list()))
    first_start = min((v for v in starts.values() if v is not None), default=0)
    out = []
    for finding, data in zip(findings, findings_data(findings)):
        seen = [e.ts_ns for e in finding.evidence if e.ts_ns is not None]
        unit_starts = [starts[s] for s in finding.steps if starts.get(s) is not None]
        ts = min(seen) if seen else (unit_starts[0] if unit_starts else first_start)
        out.append(_ENCODE({"ph": "i", "s": "t", "cat": _category("findings"), "name": finding.rule,
                            "pid": tracks.pid, "tid": tracks.tid("findings"), "ts": tracks.time(ts), "args": data}))
    return out


def _compile_spans(tracks: _Tracks, compilation: Compilations | None) -> list[bytes]:
    if compilation is None or compilation.work.height == 0:
        return []
    facts = compilation.compilations.drop("ts").rename({"step": "compile_step"})
    rows = compilation.work.join(facts, on="compile_id", how="left", nulls_equal=False,
                                 maintain_order="left").sort(["ts", "end"], descending=[False, True])
    tids = tracks.lanes("compilation", rows["ts"].to_list(), rows["end"].to_list())
    out = []
    for tid, row in zip(tids, rows.iter_rows(named=True)):
        kind = row["kind"]
        if kind == "compile":
            kind = "compile" if row["trigger"] in (None, "first") else "recompile"
        label = f"{kind} {row['compile_id']}" if row["compile_id"] else kind
        args = {k: v for k, v in row.items() if v is not None and k not in ("pid", "tid", "end")}
        args["thread"] = f"{row['pid']}/{row['tid']}"
        out.append(_span(tracks, tid, "compilation", label, row["ts"], row["dur"], args))
    return out


def _round_trips(tracks: _Tracks, trips: RoundTripReport | None, trace: Trace) -> list[bytes]:
    from tracekit.render.text import size

    if trips is None or trips.tensors.height == 0:
        return []
    where = trace.gpu.select("idx", "pid", "tid", "ts")
    links = pl.concat([trips.tensors, trips.tensor_kernels.drop("step")], how="horizontal").with_row_index("row")
    links = (links.join(where.rename({"idx": "producer_idx", "pid": "p_pid", "tid": "p_tid", "ts": "p_ts"}),
                        on="producer_idx", how="left", maintain_order="left")
             .join(where.rename({"idx": "consumer_idx", "pid": "c_pid", "tid": "c_tid", "ts": "c_ts"}),
                   on="consumer_idx", how="left", maintain_order="left").sort("row")
             .filter(pl.col("p_ts").is_not_null() & pl.col("c_ts").is_not_null()))
    base = int(trace.flows["id"].max() or 0) + 1 if trace.flows.height else 1
    cat = _category("round trips")
    out = []
    short = _Short()
    for k, row in enumerate(links.iter_rows(named=True)):
        args = {key: row[key] for key in ("step", "bytes", "shape", "dtype", "producer_op", "consumer_op",
                                          "producer_idx", "consumer_idx")}
        args["producer"], args["consumer"] = short(row["producer"]), short(row["consumer"])
        name = f"round trip {size(row['bytes'])}"  # one name for both ends: viewers pair by id, category, name
        out.append(_ENCODE({"ph": "s", "id": base + k, "cat": cat, "name": name, "pid": _file_id(row["p_pid"]),
                            "tid": _file_id(row["p_tid"]), "ts": tracks.time(row["p_ts"]), "args": args}))
        out.append(_ENCODE({"ph": "f", "bp": "e", "id": base + k, "cat": cat, "name": name,
                            "pid": _file_id(row["c_pid"]), "tid": _file_id(row["c_tid"]),
                            "ts": tracks.time(row["c_ts"]), "args": {"bytes": row["bytes"]}}))
    return out
