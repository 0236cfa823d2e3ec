"""Load a Kineto / Chrome trace file (JSON or gzip) into a :class:`tracekit.trace.Trace`.

Contract: :func:`load` reads ``path`` once, detects gzip by its magic bytes (never by suffix),
decodes with msgspec into typed Structs that name only the fields tracekit uses, and builds each
Polars frame once. It normalises the eras and vendors described in the project's KINETO notes:
2021 capitalised categories (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``, flow
``async``), integer-µs absolute timestamps, 3-decimal µs relative to ``baseTimeNanoseconds``, string
pids/tids, ROCm launch names and string ``bytes``, CPU-only traces and traces with no steps.

Anything that is not a readable trace raises :class:`tracekit.errors.TraceError` with one line naming
the file and the problem. The input file is only ever opened for reading.

Why chunks: the top level is decoded with ``traceEvents`` as a list of ``msgspec.Raw`` (cheap views
into the buffer); events are then decoded into Structs a chunk at a time and turned into columns, so
peak memory is the file's bytes plus one chunk of Python objects plus compact Polars columns, rather
than a Python object per event for the whole file.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.trace import (
    FLOWS_SCHEMA,
    GPU_SCHEMA,
    LAUNCHES_SCHEMA,
    MEMORY_SCHEMA,
    OPS_SCHEMA,
    OVERHEAD_SCHEMA,
    STEPS_SCHEMA,
    THREADS_SCHEMA,
    DeviceInfo,
    Trace,
    TraceMeta,
    empty_frame,
)

GZIP_MAGIC = b"\x1f\x8b"
#: Events decoded into Python objects at a time (bounds peak memory; large enough to amortise).
CHUNK_EVENTS = 200_000

# --- the typed decode: only the fields tracekit reads -------------------------------------------


# msgspec cannot decode ``Raw | None``; an empty Raw stands for "absent".
_EMPTY_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False, frozen=True):
    external_id: int | None = msgspec.field(default=None, name="External id")
    correlation: int | None = None
    record_function_id: int | None = msgspec.field(default=None, name="Record function id")
    sequence_number: int | None = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input type")
    device: int | None = None
    stream: int | str | None = None
    grid: msgspec.Raw = _EMPTY_RAW
    block: msgspec.Raw = _EMPTY_RAW
    registers: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory: int | None = msgspec.field(default=None, name="shared memory")
    bytes: int | str | None = None
    cbid: int | None = None
    cid: int | None = None  # ROCm's name for the callback id
    name: str | None = None  # metadata events: process/thread name
    addr: int | None = msgspec.field(default=None, name="Addr")
    mem_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | str | None = None
    s: str | None = None
    args: _Args = _NO_ARGS


class _DeviceProps(msgspec.Struct):
    id: int = 0
    name: str = ""
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None
    totalGlobalMem: int | None = None


_VERSION_KEYS = (
    "schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
    "roctracer_version", "rocprofiler_version", "hip_runtime_version", "hip_driver_version",
)


class _TopLevel(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None
    deviceProperties: list[_DeviceProps] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: int | None = None
    traceName: str | None = None
    schemaVersion: int | str | None = None
    cuda_runtime_version: int | str | None = None
    cuda_driver_version: int | str | None = None
    cupti_version: int | str | None = None
    roctracer_version: int | str | None = None
    rocprofiler_version: int | str | None = None
    hip_runtime_version: int | str | None = None
    hip_driver_version: int | str | None = None


_TOP_DECODER = msgspec.json.Decoder(_TopLevel)
_BARE_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS_DECODER = msgspec.json.Decoder(list[_Event])

# --- category normalisation ---------------------------------------------------------------------

#: 2021-era capitalised categories and their modern names.
_CATEGORY_ALIASES = {
    "Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset", "async": "ac2g", "Driver": "cuda_driver",
    "user_annotation": "user_annotation", "gpu_user_annotation": "gpu_user_annotation",
}
_OP_CATS = frozenset({"cpu_op", "user_annotation", "python_function"})
_GPU_KINDS = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
    "gpu_user_annotation": "annotation", "cuda_sync": "sync",
}


def _is_launch_category(cat: str) -> bool:
    return cat.endswith("_runtime") or cat.endswith("_driver")


# --- public API ---------------------------------------------------------------------------------


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """Return the JSON bytes of ``path``, decompressing gzip detected by its magic bytes."""
    p = Path(path)
    try:
        if p.is_dir():
            raise TraceError(p, "is a directory, not a trace file")
        raw = p.read_bytes()
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(p, "no such file") from None
    except PermissionError:
        raise TraceError(p, "permission denied") from None
    except OSError as err:
        raise TraceError(p, f"cannot read: {err.strerror or err}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            # wbits=31: gzip container only; decompressobj lets us notice a missing end.
            inflater = zlib.decompressobj(wbits=31)
            data = inflater.decompress(raw)
            del raw
            if not inflater.eof:
                raise TraceError(p, "truncated gzip stream")
            return data
        except zlib.error as err:
            raise TraceError(p, f"corrupt gzip stream ({err})") from None
    return raw


def load(path: str | os.PathLike[str], *, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Load the trace at ``path``.

    ``progress``, when given, is called as ``progress(events_done, events_total)`` after each chunk.
    Raises :class:`TraceError` for a missing, empty, non-JSON, truncated or non-Kineto file.
    """
    p = Path(path)
    data = read_bytes(p)
    size = len(data)
    if not data.strip():
        raise TraceError(p, "empty file")
    top = _decode_top(p, data)
    raws = top.traceEvents
    assert raws is not None
    builder = _FrameBuilder()
    total = len(raws)
    for start in range(0, total, CHUNK_EVENTS):
        chunk = raws[start:start + CHUNK_EVENTS]
        try:
            events = _EVENTS_DECODER.decode(b"[" + b",".join(chunk) + b"]")
        except msgspec.ValidationError as err:
            raise TraceError(p, f"not a Kineto trace: event {start} + {_event_path(err)}") from None
        except msgspec.DecodeError as err:
            raise TraceError(p, f"malformed event JSON ({err})") from None
        builder.add_chunk(events, start)
        del events
        if progress is not None:
            progress(min(start + CHUNK_EVENTS, total), total)
    del raws, data
    frames, time_format = builder.finish()
    meta = _meta(p, size, top, frames, time_format, total)
    return Trace(meta=meta, steps=_steps(frames["ops"]), **frames)


# --- decoding helpers ---------------------------------------------------------------------------


def _decode_top(path: Path, data: bytes) -> _TopLevel:
    first = data.lstrip()[:1]
    if first not in (b"{", b"["):
        raise TraceError(path, "not JSON (does not start with '{' or '[')")
    try:
        if first == b"[":
            # A bare Chrome trace array: legal Chrome trace format, no Kineto metadata.
            return _TopLevel(traceEvents=_BARE_LIST_DECODER.decode(data))
        top = _TOP_DECODER.decode(data)
    except msgspec.ValidationError as err:
        raise TraceError(path, f"not a Kineto trace ({err})") from None
    except msgspec.DecodeError as err:
        text = str(err)
        if "truncated" in text.lower():
            raise TraceError(path, "truncated JSON (the file ends before the trace does)") from None
        raise TraceError(path, f"not valid JSON ({text})") from None
    if top.traceEvents is None:
        raise TraceError(path, "not a Kineto trace: no 'traceEvents' list")
    return top


def _event_path(err: msgspec.ValidationError) -> str:
    # msgspec reports "... - at `$[12].ts`"; keep it short and relative to the chunk.
    return str(err).replace("`$[", "`traceEvents[")


def _int_series(name: str, values: Sequence[object]) -> pl.Series:
    """An Int64 column from ints/None, tolerating numeric strings (ROCm writes ``bytes`` as text)."""
    try:
        return pl.Series(name, values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [_to_int(v) for v in values], dtype=pl.Int64)


def _to_int(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value  # type: ignore[return-value]
    try:
        return int(float(str(value)))
    except ValueError:
        return None


def _id_series(name: str, values: Sequence[int | str]) -> pl.Series:
    """pids/tids as strings: Kineto writes ints, but also "Spans", "Traces", "stream 7"."""
    try:
        return pl.Series(name, values, dtype=pl.Int64).cast(pl.String)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [str(v) for v in values], dtype=pl.String)


def _time_ns(name: str, values: Sequence[int | float | None]) -> tuple[pl.Series, bool]:
    """µs values -> Int64 ns. Returns (series, had_fraction).

    Integer µs stay exact through Int64; fractional µs are rounded after scaling (exact for the
    3-decimal relative timestamps PyTorch ≥ 2.4 writes).
    """
    try:
        return pl.Series(name, values, dtype=pl.Int64) * 1000, False
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        floats = pl.Series(name, values, dtype=pl.Float64, strict=False)
        return (floats * 1000.0).round(0).cast(pl.Int64), True


def _raw_text(name: str, values: Sequence[msgspec.Raw]) -> pl.Series:
    """Raw JSON fragments kept as text, parsed only where an analysis needs them."""
    return pl.Series(
        name, [bytes(v) if v else None for v in values], dtype=pl.Binary
    ).cast(pl.String)


class _FrameBuilder:
    """Accumulates per-chunk column frames per category, concatenated once in :meth:`finish`."""

    def __init__(self) -> None:
        self.parts: dict[str, list[pl.DataFrame]] = {
            "ops": [], "launches": [], "gpu": [], "overhead": [], "flows": [], "memory": [],
            "threads": [],
        }
        self.fractional_times = False
        self.max_ts_us = 0.0

    # Each add_* builds the columns of one frame from the events of one category.

    def add_chunk(self, events: list[_Event], offset: int) -> None:
        groups: dict[str, list[int]] = {}
        for i, ev in enumerate(events):
            key = ev.cat or ev.ph
            bucket = groups.get(key)
            if bucket is None:
                groups[key] = [i]
            else:
                bucket.append(i)
        for key, positions in groups.items():
            picked = [events[i] for i in positions]
            idx = pl.Series("idx", [offset + i for i in positions], dtype=pl.UInt32)
            cat = _CATEGORY_ALIASES.get(key, key)
            if key in ("M",) or (picked[0].ph == "M"):
                self._add_threads([e for e in picked if e.ph == "M"])
                continue
            spans = [j for j, e in enumerate(picked) if e.ph == "X"]
            if cat in _OP_CATS:
                self._add_spans("ops", cat, picked, idx, spans, self._op_columns)
            elif _is_launch_category(cat):
                self._add_spans("launches", cat, picked, idx, spans, self._launch_columns)
            elif cat in _GPU_KINDS:
                self._add_spans("gpu", _GPU_KINDS[cat], picked, idx, spans, self._gpu_columns)
            elif cat == "overhead":
                self._add_spans("overhead", cat, picked, idx, spans, lambda evs: {})
            elif cat in ("ac2g", "fwdbwd") or (picked[0].ph in ("s", "f", "t")):
                self._add_flows(cat, picked, idx)
            elif cat == "cpu_instant_event":
                self._add_memory(picked, idx)
            # Other categories (Trace spans, counters...) are not used by any analysis.

    def _add_spans(self, frame: str, label: str, picked: list[_Event], idx: pl.Series,
                   spans: list[int], extra: Callable[[list[_Event]], dict[str, pl.Series]]) -> None:
        if len(spans) != len(picked):
            picked = [picked[j] for j in spans]
            idx = idx.gather(spans)
        if not picked:
            return
        ts, frac_ts = _time_ns("ts", [e.ts for e in picked])
        dur, frac_dur = _time_ns("dur", [e.dur if e.dur is not None else 0 for e in picked])
        self.fractional_times |= frac_ts or frac_dur
        self.max_ts_us = max(self.max_ts_us, float(ts.max() or 0) / 1000.0)
        columns = {
            "idx": idx,
            ("kind" if frame == "gpu" else "cat"): pl.Series([label] * len(picked), dtype=pl.String),
            "name": pl.Series([e.name for e in picked], dtype=pl.String),
            "pid": _id_series("pid", [e.pid for e in picked]),
            "tid": _id_series("tid", [e.tid for e in picked]),
            "ts": ts,
            "dur": dur,
        }
        columns.update(extra(picked))
        df = pl.DataFrame(columns).with_columns(end=pl.col("ts") + pl.col("dur"))
        if frame == "overhead":
            df = df.drop("cat")
        self.parts[frame].append(df)

    @staticmethod
    def _op_columns(evs: list[_Event]) -> dict[str, pl.Series]:
        args = [e.args for e in evs]
        return {
            "external_id": _int_series("external_id", [a.external_id for a in args]),
            "record_function_id": _int_series("record_function_id", [a.record_function_id for a in args]),
            "sequence_number": _int_series("sequence_number", [a.sequence_number for a in args]),
            "input_dims": _raw_text("input_dims", [a.input_dims for a in args]),
            "input_types": _raw_text("input_types", [a.input_types for a in args]),
        }

    @staticmethod
    def _launch_columns(evs: list[_Event]) -> dict[str, pl.Series]:
        args = [e.args for e in evs]
        return {
            "correlation": _int_series("correlation", [a.correlation for a in args]),
            "external_id": _int_series("external_id", [a.external_id for a in args]),
            "cbid": _int_series("cbid", [a.cbid if a.cbid is not None else a.cid for a in args]),
        }

    @staticmethod
    def _gpu_columns(evs: list[_Event]) -> dict[str, pl.Series]:
        args = [e.args for e in evs]
        return {
            "device": _int_series("device", [a.device for a in args]),
            "stream": _int_series("stream", [a.stream for a in args]),
            "correlation": _int_series("correlation", [a.correlation for a in args]),
            "external_id": _int_series("external_id", [a.external_id for a in args]),
            "grid": _raw_text("grid", [a.grid for a in args]),
            "block": _raw_text("block", [a.block for a in args]),
            "registers": _int_series("registers", [a.registers for a in args]),
            "shared_memory": _int_series("shared_memory", [a.shared_memory for a in args]),
            "bytes": _int_series("bytes", [a.bytes for a in args]),
        }

    def _add_flows(self, cat: str, picked: list[_Event], idx: pl.Series) -> None:
        ts, _ = _time_ns("ts", [e.ts if e.ts is not None else 0 for e in picked])
        self.parts["flows"].append(pl.DataFrame({
            "idx": idx,
            "cat": pl.Series([cat] * len(picked), dtype=pl.String),
            "ph": pl.Series([e.ph for e in picked], dtype=pl.String),
            "id": _int_series("id", [e.id for e in picked]),
            "pid": _id_series("pid", [e.pid for e in picked]),
            "tid": _id_series("tid", [e.tid for e in picked]),
            "ts": ts,
        }))

    def _add_memory(self, picked: list[_Event], idx: pl.Series) -> None:
        keep = [j for j, e in enumerate(picked) if e.name == "[memory]"]
        if not keep:
            return
        evs = [picked[j] for j in keep]
        args = [e.args for e in evs]
        ts, _ = _time_ns("ts", [e.ts for e in evs])
        self.parts["memory"].append(pl.DataFrame({
            "idx": idx.gather(keep),
            "pid": _id_series("pid", [e.pid for e in evs]),
            "tid": _id_series("tid", [e.tid for e in evs]),
            "ts": ts,
            "addr": _int_series("addr", [a.addr for a in args]),
            "bytes": _int_series("bytes", [a.mem_bytes for a in args]),
            "total_allocated": _int_series("total_allocated", [a.total_allocated for a in args]),
            "total_reserved": _int_series("total_reserved", [a.total_reserved for a in args]),
            "device_type": _int_series("device_type", [a.device_type for a in args]),
            "device_id": _int_series("device_id", [a.device_id for a in args]),
        }))

    def _add_threads(self, evs: list[_Event]) -> None:
        rows = [e for e in evs if e.name in ("process_name", "thread_name") and e.args.name is not None]
        if not rows:
            return
        self.parts["threads"].append(pl.DataFrame({
            "kind": pl.Series(["process" if e.name == "process_name" else "thread" for e in rows],
                              dtype=pl.String),
            "pid": _id_series("pid", [e.pid for e in rows]),
            "tid": _id_series("tid", [e.tid for e in rows]),
            "name": pl.Series([e.args.name for e in rows], dtype=pl.String),
        }))

    def finish(self) -> tuple[dict[str, pl.DataFrame], str]:
        schemas = {
            "ops": OPS_SCHEMA, "launches": LAUNCHES_SCHEMA, "gpu": GPU_SCHEMA,
            "overhead": OVERHEAD_SCHEMA, "flows": FLOWS_SCHEMA, "memory": MEMORY_SCHEMA,
            "threads": THREADS_SCHEMA,
        }
        frames: dict[str, pl.DataFrame] = {}
        for name, schema in schemas.items():
            parts = self.parts[name]
            if not parts:
                frames[name] = empty_frame(schema)
                continue
            df = pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0]
            df = df.select([
                (df[col].cast(dtype) if col in df.columns else pl.Series(col, [None] * df.height, dtype=dtype))
                .alias(col) for col, dtype in schema.items()
            ])
            sort_keys = ["idx"] if name in ("threads",) or "idx" not in df.columns else ["ts", "idx"]
            if name == "threads":
                frames[name] = df.unique(maintain_order=True)
            else:
                frames[name] = df.sort(sort_keys)
        if self.max_ts_us == 0:
            fmt = "empty"
        elif self.max_ts_us > 1e12:  # absolute µs since the epoch (≥ 2001)
            fmt = "absolute-us3" if self.fractional_times else "absolute-us-int"
        else:
            fmt = "relative-ns3"
        return frames, fmt


# --- metadata and steps -------------------------------------------------------------------------


def _meta(path: Path, size: int, top: _TopLevel, frames: dict[str, pl.DataFrame],
          time_format: str, event_count: int) -> TraceMeta:
    devices = tuple(
        DeviceInfo(
            id=d.id, name=d.name,
            compute_capability=(f"{d.computeMajor}.{d.computeMinor}"
                                if d.computeMajor is not None else None),
            num_sms=d.numSms, total_global_mem=d.totalGlobalMem,
        )
        for d in (top.deviceProperties or [])
    )
    versions = {k: str(getattr(top, k)) for k in _VERSION_KEYS if getattr(top, k) is not None}
    launch_names = frames["launches"]["name"]
    if frames["gpu"].height == 0 and frames["launches"].height == 0:
        vendor = "cpu"
    elif (top.roctracer_version is not None or top.rocprofiler_version is not None
          or launch_names.str.starts_with("hip").any()):
        vendor = "amd"
    else:
        vendor = "nvidia"
    return TraceMeta(
        path=str(path), size_bytes=size, base_time_ns=top.baseTimeNanoseconds, devices=devices,
        versions=versions, distributed=top.distributedInfo, vendor=vendor,
        time_format=time_format, event_count=event_count, trace_name=top.traceName,
    )


def _steps(ops: pl.DataFrame) -> pl.DataFrame:
    """ProfilerStep#N spans, one per step number (the earliest if a step appears twice)."""
    steps = (
        ops.filter(pl.col("name").str.starts_with("ProfilerStep#"))
        .with_columns(number=pl.col("name").str.strip_prefix("ProfilerStep#").cast(pl.Int64, strict=False))
        .filter(pl.col("number").is_not_null())
        .sort(["ts", "idx"])
        .unique(subset=["number"], keep="first", maintain_order=True)
    )
    if steps.height == 0:
        return empty_frame(STEPS_SCHEMA)
    return steps.select(list(STEPS_SCHEMA)).cast(STEPS_SCHEMA)  # type: ignore[arg-type]
