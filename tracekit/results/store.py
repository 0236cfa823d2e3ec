"""The trace's report stored beside it in the Parquet file of ``tracekit convert``, and read back.

Contract: :func:`save` writes the trace (:func:`tracekit.load.parquet.write`) with its
:class:`~tracekit.results.report.Report` stored in the same file, and :func:`load_report` returns that report
when it was stored under the given key (:func:`cache_key`), else None — so re-reporting a converted
trace renders stored results instead of analysing again. The report's frames are rows with
``table`` = ``report_cache`` (``cache_part`` names the frame, ``cache_blob`` holds it as Parquet
bytes); its skeleton and key go in the key-value metadata (``tracekit.report``,
``tracekit.report_key``). Trace queries ignore those rows by filtering on ``table`` as usual.

A report as plain data: :func:`encode` turns it into ``(skeleton, {part: parquet_bytes})`` — one JSON
skeleton plus one Parquet-encoded blob per frame — and :func:`decode` rebuilds an equal report from
them. Only the classes in :data:`_CLASSES` are ever built from the skeleton (a Parquet file from
someone else can name no other code), and frames come back with their exact dtypes (Polars stores
its schema in the Parquet bytes). Parquet rather than Arrow IPC because report frames repeat kernel
names row after row: dictionary encoding stores each once, and the stored report of a 1 GB trace
reads in a fraction of the time (bench/RESULTS.md). The whole-trace attribution a report carries is
not stored: it is as large as the trace itself, and a stored report comes back with
``attribution=None`` (``diff`` and ``check`` read the session's analyses, never a report); two per-kernel working frames come
back empty (:data:`_EMPTIED`). What a renderer shows is therefore identical, which the tests check
for every format on every sample trace.

A stored report is only as good as the code that made it, so it is saved with a
:func:`code_fingerprint` of the tracekit sources and Polars version that computed it and of the
inputs the analysis read besides the trace (the execution trace file); a report whose key differs is
ignored and the trace analysed afresh.

A stored report is also only as good as the file that carries it, which may come from anyone. It is
read under ``--max-inflated-size`` (:func:`tracekit.load.parquet.check_inflated`): its rows' and
each frame's footers are weighed before any of them is read, and the frames once read; past the cap
is one line and exit 2, as for the trace. One that reads but is not what this code writes — other
classes, columns or dtypes, a field of the wrong type, a null where a figure must be a number
(:data:`_NULLABLE` names the columns where analyses leave nulls), NaN or infinity — is ignored and
the trace analysed again (the caller is told why, to say so on stderr): no renderer meets it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.analyses.breakdown import Breakdown
from tracekit.analyses.compilations import Compilations
from tracekit.analyses.decomposition import Decomposition
from tracekit.analyses.launch_gaps import LaunchGapsReport
from tracekit.analyses.memory import MemoryReport
from tracekit.analyses.round_trips import RoundTripReport
from tracekit.analyses.graph_replays import GraphReplays
from tracekit.analyses.serving import Serving
from tracekit.analyses.throughput import ThroughputReport
from tracekit.analyses.units import Units
from tracekit.errors import TraceError, is_native_panic
from tracekit.load import parquet, read_options
from tracekit.load.parquet_size import ParquetLayoutError, column_bounds, logical_bytes
from tracekit.results.report import Facts, Report
from tracekit.findings import Evidence, Finding
from tracekit.trace import Trace

#: The classes a skeleton may name, by name.
_CLASSES = {cls.__name__: cls for cls in (Report, Facts, LaunchGapsReport, RoundTripReport, ThroughputReport,
                                          Units, Breakdown, Compilations, Finding, Evidence, MemoryReport,
                                          Decomposition, Serving, GraphReplays)}
#: Report fields not stored (see the module docstring).
_SKIPPED = {"attribution", "timelines"}
#: Frames stored with their columns but no rows: per-kernel working tables that the analyses
#: summarise (into ``distributions``/``per_step`` and ``throughput``) and no renderer shows. They
#: are a kernel-name string per kernel each, most of a big trace's stored report and of its load.
_EMPTIED = {"report.launch_gaps.per_activity", "report.round_trips.traffic",
            # one row per [memory] event (the Python API's); the report shows ``timeline``
            "report.memory.curve", "report.memory.events_frame"}
SKELETON_FORMAT = "tracekit.report-cache/1"


class CacheFormatError(ValueError):
    """The stored skeleton names something this version cannot rebuild."""


class ReportTooLarge(CacheFormatError):
    """The stored report's frames would inflate past the cap on inflated bytes."""

    def __init__(self, size: int, cap: int, read: bool) -> None:
        super().__init__(f"its stored report {'holds' if read else 'would inflate to'} {size:,} bytes"
                         f"{' once its strings are counted' if read else ' once read'}, past {cap:,} "
                         f"({read_options.cap_hint()})")


#: Frame columns (``frame path:column``, list positions as ``[]``) where the analyses leave nulls, each
#: for a reason of its own (no unit, no CPU op, no shape, no device figure, ...): found by analysing
#: every sample and real trace. A null in any other column of a stored report is damage — a figure a
#: renderer must print — and the trace is analysed again. A column missing here costs a re-analysis,
#: never a wrong report.
_NULLABLE = frozenset({
    "report.breakdown.overlap:overlap_frac", "report.breakdown.overlap:unit",
    "report.breakdown.shares:median_unit_share", "report.breakdown.shares:unit", "report.breakdown.streams:unit",
    "report.compilation.units:compile_ids", "report.compilation.units:shape", "report.compile_preops:graph_hash",
    "report.kernels:cpu_op",
    *(f"report.launch_gaps.distributions:{kind}_{stat}_ns" for kind in ("launch_dur", "queue_delay")
      for stat in ("max", "p50", "p90", "p99")),
    "report.launch_gaps.gaps:next_launch_api", "report.launch_gaps.gaps:step",
    *(f"report.launch_gaps.per_activity:{c}" for c in ("launch_api", "launch_dur_ns", "launch_end", "launch_ts",
                                                       "queue_delay_ns", "step")),
    "report.launch_gaps.per_step:gpu_start_ns",
    *(f"report.memory.devices:{c}" for c in ("annotation", "cpu_op", "fragmentation", "headroom", "top_op",
                                             "total_memory")),
    "report.memory.events_frame:annotation", "report.memory.events_frame:cpu_op", "report.memory.events_frame:top_op",
    "report.memory.live:top_op", "report.memory.ops:incl_largest", "report.memory.ops:largest",
    "report.memory.steps:annotation", "report.memory.steps:top_op",
    "report.paths:cpu_op", "report.paths:scope", "report.paths:top_op",
    "report.round_trips.bytes_per_step:step",
    # CUDA graphs: no CUPTI graph id, no source found, no eager companion; a companion op's shapes.
    *(f"report.graphs.graphs:{c}" for c in ("graph_id", "source", "match", "score", "launch_ns_median",
                                            "eager_launch_ns")),
    *(f"report.graphs.foreign_ops:{c}" for c in ("record_function_id", "input_dims", "input_types")),
    *(f"report.round_trips.traffic:{c}" for c in ("bytes_read", "bytes_written", "dtype", "flops", "op", "step")),
    *(f"report.throughput.kernels:{c}" for c in (
        "achieved_bytes_per_s", "achieved_flops_per_s", "achieved_gbps", "achieved_tflops", "bound", "bytes",
        "dtype", "flops", "frac_bw", "frac_flops", "headline_frac", "intensity", "math", "op",
        "peak_bytes_per_s", "peak_flops_per_s", "ridge")),
})


#: ``table`` value of the stored report's rows, and that row's two columns.
REPORT_TABLE = "report_cache"
_CACHE_COLUMNS = {"cache_part": pl.String, "cache_blob": pl.Binary}


def save(trace: Trace, report: Report, path: str | os.PathLike[str], *, key: str) -> None:
    """Write ``trace`` to ``path`` as one Parquet file (atomically) with ``report`` stored beside it
    under ``key`` (:func:`cache_key`)."""
    skeleton, blobs = encode(report)
    rows = pl.DataFrame({"table": [REPORT_TABLE] * len(blobs), "cache_part": list(blobs),
                         "cache_blob": list(blobs.values())},
                        schema={"table": pl.String, **_CACHE_COLUMNS})
    parquet.write(trace, path, extra_rows=rows,
                  extra_metadata={"tracekit.report": skeleton, "tracekit.report_key": key})


def load_report(path: str | os.PathLike[str], key: str, *, kv: Mapping[str, str] | None = None,
                on_ignored: Callable[[str], None] | None = None) -> Report | None:
    """The report stored in ``path`` if it was stored under ``key``, else None (none stored, made by
    other code or from another execution trace, or unreadable: then analyse afresh). ``kv``: the
    file's metadata when already read (:func:`tracekit.load.parquet.read_metadata`). A report stored
    under ``key`` but damaged is passed over too, and ``on_ignored`` is called with why (one line).
    Raises :class:`TraceError` when the stored report would inflate past ``--max-inflated-size``."""
    p = Path(path)
    kv = parquet.read_metadata(p) if kv is None else kv
    if "tracekit.report" not in kv or kv.get("tracekit.report_key") != key:
        return None
    cap = read_options.options().max_inflated_size
    parquet.check_inflated(p, {"table", *_CACHE_COLUMNS}, cap, what="its stored report")
    try:
        rows = (pl.scan_parquet(p).filter(pl.col("table") == REPORT_TABLE)
                .select(*_CACHE_COLUMNS).collect())
        if cap is not None and logical_bytes(rows) > cap:
            raise ReportTooLarge(logical_bytes(rows), cap, read=True)
        blobs = dict(zip(rows["cache_part"].to_list(), rows["cache_blob"].to_list()))
        return decode(kv["tracekit.report"], blobs, cap=cap)
    except ReportTooLarge as err:
        raise TraceError(p, str(err)) from None
    except BaseException as err:  # a damaged stored report costs a re-analysis, never the command
        if not isinstance(err, Exception) and not is_native_panic(err):
            raise
        if on_ignored is not None:
            on_ignored(_reason(err))
        return None


def _reason(err: BaseException) -> str:
    """One printable line of why a stored report was passed over (it may quote the file's text)."""
    text = str(err).splitlines()[0] if str(err) else ""
    if not isinstance(err, CacheFormatError):
        text = f"{type(err).__name__}{': ' + text if text else ''}"
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 160 else text[:157] + "..."


def encode(report: Report) -> tuple[str, dict[str, bytes]]:
    """``(skeleton JSON, {part name: Parquet bytes})`` for ``report``."""
    frames: dict[str, bytes] = {}
    skeleton = {"format": SKELETON_FORMAT, "report": _to_plain(report, "report", frames)}
    return msgspec.json.encode(skeleton).decode(), frames


def decode(skeleton: str, frames: dict[str, bytes], *, cap: int | None = None) -> Report:
    """The report :func:`encode` described; raises :class:`CacheFormatError` for anything else, and
    :class:`ReportTooLarge` when its frames (every reference to one counted) would inflate past
    ``cap`` bytes (None: no cap) — told from their footers before any is read, then from what was read."""
    try:
        top = msgspec.json.decode(skeleton)
    except (msgspec.DecodeError, RecursionError) as err:
        raise CacheFormatError(f"skeleton is not JSON ({type(err).__name__})") from None
    if not isinstance(top, dict) or top.get("format") != SKELETON_FORMAT:
        raise CacheFormatError("unknown skeleton format")
    budget = _Budget(cap)
    _from_plain(top.get("report"), frames, budget, depth=0)  # weighs every frame, reads none
    budget.weighing = False
    report = _from_plain(top.get("report"), frames, budget, depth=0)
    if not isinstance(report, Report):
        raise CacheFormatError("skeleton does not describe a report")
    _check_shape(_reference(), report, "report")
    _check_values(report, "report")
    return report


class _Budget:
    """What a report's frames may inflate to: weighed from their footers first (``weighing``), then
    counted as read."""

    def __init__(self, cap: int | None) -> None:
        self.cap, self.weighing, self.weighed, self.read = cap, True, 0, 0
        self.bounds: dict[str, int] = {}

    def weigh(self, part: str, blob: bytes) -> None:
        if part not in self.bounds:
            try:
                self.bounds[part] = sum(column_bounds(blob).values())
            except ParquetLayoutError as err:
                raise CacheFormatError(f"frame {part[:80]!r}: {err}") from None
        self.weighed += self.bounds[part]
        if self.cap is not None and self.weighed > self.cap:
            raise ReportTooLarge(self.weighed, self.cap, read=False)

    def count(self, frame: pl.DataFrame) -> None:
        self.read += logical_bytes(frame)
        if self.cap is not None and self.read > self.cap:
            raise ReportTooLarge(self.read, self.cap, read=True)


@functools.cache
def _reference() -> Report:
    """The report of an empty trace: the classes, frame columns and dtypes this code produces."""
    from tracekit.analyses import pipeline
    from tracekit.results.report import build
    from tracekit.trace import LOADED_SCHEMAS, STEPS_SCHEMA, TraceMeta, empty_frame

    meta = TraceMeta(path="", size_bytes=0, base_time_ns=None, devices=(), versions={}, distributed=None,
                     vendor="cpu", time_format="empty", event_count=0)
    return build(pipeline.run(Trace(meta=meta, steps=empty_frame(STEPS_SCHEMA),
                                    **{name: empty_frame(schema) for name, schema in LOADED_SCHEMAS.items()})))


def _check_shape(ref: Any, got: Any, where: str) -> None:
    """CacheFormatError unless ``got`` has ``ref``'s shape: the same classes, frames with the same
    columns and dtypes (a Null column in ``ref`` matches any), scalars of the same type — so that a
    stored report damaged or tampered with is analysed afresh instead of crashing a renderer."""
    if isinstance(ref, pl.DataFrame):
        if not isinstance(got, pl.DataFrame) or got.columns != ref.columns or any(
                a != b and a != pl.Null for a, b in zip(ref.dtypes, got.dtypes)):
            raise CacheFormatError(f"{where}: not the frame this code writes")
    elif dataclasses.is_dataclass(ref):
        if type(got) is not type(ref):
            raise CacheFormatError(f"{where}: not a {type(ref).__name__}")
        for f in dataclasses.fields(ref):
            if f.name not in _SKIPPED:
                _check_shape(getattr(ref, f.name), getattr(got, f.name), f"{where}.{f.name}")
    elif isinstance(ref, (bool, int, float, str)) and got is not None:
        if type(got) is not type(ref) and not (type(ref) is float and type(got) is int):
            raise CacheFormatError(f"{where}: a {type(got).__name__}, not a {type(ref).__name__}")


def _to_plain(value: Any, where: str, frames: dict[str, bytes]) -> Any:
    if isinstance(value, pl.DataFrame):
        if where in _EMPTIED:
            value = value.clear()
        buf = io.BytesIO()
        value.write_parquet(buf, compression="lz4", statistics=False)
        frames[where] = buf.getvalue()
        return {"$frame": where}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _CLASSES.get(name) is not type(value):
            raise TypeError(f"{where}: {name} is not a storable report class")
        fields = {f.name: _to_plain(getattr(value, f.name), f"{where}.{f.name}", frames)
                  for f in dataclasses.fields(value) if f.name not in _SKIPPED}
        return {"$class": name, "fields": fields}
    if isinstance(value, tuple):
        return {"$tuple": [_to_plain(v, f"{where}[{i}]", frames) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_to_plain(v, f"{where}[{i}]", frames) for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value) or any(k.startswith("$") for k in value):
            raise TypeError(f"{where}: only dicts with plain string keys can be stored")
        return {k: _to_plain(v, f"{where}.{k}", frames) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{where}: cannot store a {type(value).__name__}")


#: A skeleton nests no deeper than this (a report's dataclasses, their tuples and dicts).
_MAX_DEPTH = 32


def _from_plain(value: Any, frames: dict[str, bytes], budget: _Budget, depth: int) -> Any:
    """The value ``value`` describes; while ``budget.weighing``, only weighs the frames it names."""
    if depth > _MAX_DEPTH:
        raise CacheFormatError("skeleton nested too deep")
    if isinstance(value, list):
        return [_from_plain(v, frames, budget, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    if "$frame" in value:
        part = value["$frame"]
        blob = frames.get(part) if isinstance(part, str) else None
        if not isinstance(blob, bytes):
            raise CacheFormatError(f"frame {str(part)[:80]!r} is missing")
        if budget.weighing:
            budget.weigh(part, blob)
            return None
        frame = pl.read_parquet(io.BytesIO(blob))
        budget.count(frame)
        return frame
    if "$tuple" in value:
        if not isinstance(value["$tuple"], list):
            raise CacheFormatError("a tuple that is not a list")
        return tuple(_from_plain(v, frames, budget, depth + 1) for v in value["$tuple"])
    if "$class" in value:
        cls = _CLASSES.get(value["$class"]) if isinstance(value["$class"], str) else None
        if cls is None:
            raise CacheFormatError(f"unknown class {str(value['$class'])[:80]!r}")
        given = value.get("fields", {})
        if not isinstance(given, dict):
            raise CacheFormatError(f"{cls.__name__}: fields are not a mapping")
        fields = {k: _from_plain(v, frames, budget, depth + 1) for k, v in given.items()}
        if budget.weighing:
            return None
        try:
            return cls(**fields)
        except TypeError as err:  # a field added or renamed since the file was written
            raise CacheFormatError(f"{cls.__name__}: {err}") from None
    return {k: _from_plain(v, frames, budget, depth + 1) for k, v in value.items()}


def _check_values(value: Any, where: str, annotation: Any = Any) -> None:
    """CacheFormatError unless every field of ``value`` holds what its annotation says (a None only
    where it says ``| None``, a number where it says int or float), no float is NaN or infinite, and
    no frame holds a null outside :data:`_NULLABLE` or a NaN: what a renderer must print as a figure."""
    if value is None:
        if not _admits_none(annotation):
            raise CacheFormatError(f"{where}: null where a value must be")
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise CacheFormatError(f"{where}: {value} where a number must be")
    _check_type(value, annotation, where)
    if isinstance(value, pl.DataFrame):
        _check_frame(value, where)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        hints = _hints(type(value))
        for f in dataclasses.fields(value):
            if f.name not in _SKIPPED:
                _check_values(getattr(value, f.name), f"{where}.{f.name}", hints.get(f.name, Any))
    elif isinstance(value, (tuple, list)):
        inner = _element_type(annotation)
        for i, item in enumerate(value):
            _check_values(item, f"{where}[{i}]", inner)
    elif isinstance(value, dict):
        args = typing.get_args(annotation)
        inner = args[1] if len(args) == 2 else Any
        for k, item in value.items():
            _check_values(item, f"{where}.{k}", inner)


def _check_frame(frame: pl.DataFrame, where: str) -> None:
    shape = re.sub(r"\[\d+\]", "[]", where)
    for name, nulls in zip(frame.columns, frame.null_count().row(0) if frame.width else ()):
        if nulls and f"{shape}:{name}" not in _NULLABLE:
            raise CacheFormatError(f"{where}: nulls in column {name!r}, where figures must be")
        series = frame[name]
        if series.dtype.is_float() and not bool(series.is_finite().fill_null(True).all()):
            raise CacheFormatError(f"{where}: NaN or infinity in column {name!r}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved is checked as Any
        return {}


def _admits_none(annotation: Any) -> bool:
    if annotation is Any or annotation is object or annotation is type(None):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(_admits_none(a) for a in typing.get_args(annotation))
    return False


def _element_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    return args[0] if len(args) == 1 else Any


def _check_type(value: Any, annotation: Any, where: str) -> None:
    """The plain types a field may name: int, float, str, bool, a frame, a report class."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if options and all(a in (int, float, str, bool) for a in options) and not any(
                _plain_match(value, a) for a in options):
            raise CacheFormatError(f"{where}: a {type(value).__name__} where a value of {annotation} must be")
        return
    if annotation in (int, float, str, bool, pl.DataFrame) and not _plain_match(value, annotation):
        raise CacheFormatError(f"{where}: a {type(value).__name__}, not a {annotation.__name__}")
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and type(value) is not annotation:
        raise CacheFormatError(f"{where}: not a {annotation.__name__}")


def _plain_match(value: Any, kind: Any) -> bool:
    if kind is bool:
        return type(value) is bool
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


@functools.cache
def code_fingerprint() -> str:
    """sha256 of every tracekit source file and the Polars version: what made the analysis."""
    digest = hashlib.sha256(f"polars {pl.__version__}\n".encode())
    root = Path(__file__).resolve().parent.parent  # the tracekit package, not only this wing
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(execution_trace_path: str | os.PathLike[str] | None) -> str:
    """The key a stored report must carry to be reused: code fingerprint plus the execution
    trace's identity (resolved path, size, modification time), or none."""
    et: list[Any] | None = None
    if execution_trace_path is not None:
        p = Path(execution_trace_path).resolve()
        st = p.stat()
        et = [str(p), st.st_size, st.st_mtime_ns]
    return msgspec.json.encode({"code": code_fingerprint(), "execution_trace": et}).decode()

