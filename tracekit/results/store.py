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
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
from collections.abc import Mapping
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
from tracekit.analyses.serving import Serving
from tracekit.analyses.throughput import ThroughputReport
from tracekit.analyses.units import Units
from tracekit.load import parquet
from tracekit.results.report import Facts, Report
from tracekit.findings import Evidence, Finding
from tracekit.trace import Trace

#: The classes a skeleton may name, by name.
_CLASSES = {cls.__name__: cls for cls in (Report, Facts, LaunchGapsReport, RoundTripReport, ThroughputReport,
                                          Units, Breakdown, Compilations, Finding, Evidence, MemoryReport,
                                          Decomposition, Serving)}
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


def load_report(path: str | os.PathLike[str], key: str, *,
                kv: Mapping[str, str] | None = None) -> Report | None:
    """The report stored in ``path`` if it was stored under ``key``, else None (none stored, made by
    other code or from another execution trace, or unreadable: then analyse afresh). ``kv``: the
    file's metadata when already read (:func:`tracekit.load.parquet.read_metadata`)."""
    p = Path(path)
    kv = parquet.read_metadata(p) if kv is None else kv
    if "tracekit.report" not in kv or kv.get("tracekit.report_key") != key:
        return None
    try:
        rows = (pl.scan_parquet(p).filter(pl.col("table") == REPORT_TABLE)
                .select(*_CACHE_COLUMNS).collect())
        blobs = dict(zip(rows["cache_part"].to_list(), rows["cache_blob"].to_list()))
        return decode(kv["tracekit.report"], blobs)
    except Exception:  # a damaged stored report costs a re-analysis, never the command
        return None


def encode(report: Report) -> tuple[str, dict[str, bytes]]:
    """``(skeleton JSON, {part name: Parquet bytes})`` for ``report``."""
    frames: dict[str, bytes] = {}
    skeleton = {"format": SKELETON_FORMAT, "report": _to_plain(report, "report", frames)}
    return msgspec.json.encode(skeleton).decode(), frames


def decode(skeleton: str, frames: dict[str, bytes]) -> Report:
    """The report :func:`encode` described; raises :class:`CacheFormatError` for anything else."""
    try:
        top = msgspec.json.decode(skeleton)
    except msgspec.DecodeError as err:
        raise CacheFormatError(f"skeleton is not JSON ({err})") from None
    if not isinstance(top, dict) or top.get("format") != SKELETON_FORMAT:
        raise CacheFormatError("unknown skeleton format")
    report = _from_plain(top.get("report"), frames)
    if not isinstance(report, Report):
        raise CacheFormatError("skeleton does not describe a report")
    _check_shape(_reference(), report, "report")
    return report


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


def _from_plain(value: Any, frames: dict[str, bytes]) -> Any:
    if isinstance(value, list):
        return [_from_plain(v, frames) for v in value]
    if not isinstance(value, dict):
        return value
    if "$frame" in value:
        blob = frames.get(value["$frame"])
        if blob is None:
            raise CacheFormatError(f"frame {value['$frame']!r} is missing")
        return pl.read_parquet(io.BytesIO(blob))
    if "$tuple" in value:
        return tuple(_from_plain(v, frames) for v in value["$tuple"])
    if "$class" in value:
        cls = _CLASSES.get(value["$class"])
        if cls is None:
            raise CacheFormatError(f"unknown class {value['$class']!r}")
        fields = {k: _from_plain(v, frames) for k, v in value.get("fields", {}).items()}
        try:
            return cls(**fields)
        except TypeError as err:  # a field added or renamed since the file was written
            raise CacheFormatError(f"{cls.__name__}: {err}") from None
    return {k: _from_plain(v, frames) for k, v in value.items()}


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

