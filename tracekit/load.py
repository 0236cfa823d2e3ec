"""Load a Kineto / Chrome trace file (JSON or gzip) into a :class:`tracekit.trace.Trace`.

Contract: :func:`load` reads ``path`` once, detects gzip by its magic bytes (never by suffix),
decodes with msgspec into typed Structs that name only the fields tracekit uses, and builds each
Polars frame once. It normalises the eras and vendors described in the project's KINETO notes:
2021 capitalised categories (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``, flow
``async``, lower-case ``external id``), integer-µs absolute timestamps, 3-decimal µs relative to
``baseTimeNanoseconds`` and the 2024 absolute 3-decimal form (converted exactly, through decimal),
string pids/tids, ROCm launch names and string ``bytes``, CPU-only traces and traces with no steps.

Anything that is not a readable trace raises :class:`tracekit.errors.TraceError` with one line naming
the file and the problem. The input file is only ever opened for reading.

How it stays fast and small (measured in ``bench/load.py``):

- A plain file is memory-mapped copy-on-write; gzip is inflated once into one buffer.
- Events are decoded a chunk (~2000 events) at a time straight from that buffer: the separator
  bytes just outside the chunk are overwritten with ``[`` and ``]`` for the decode and restored
  after, so no chunk is ever copied or joined. Chunk boundaries come from Kineto's layout (every
  event starts a line with two spaces and ``{``), so the events are parsed once, not twice; each
  guess is verified (see :func:`_kineto_layout`). Files laid out otherwise take the exact path:
  a top-level decode with ``traceEvents`` as ``msgspec.Raw`` views (no copy) locates the chunks.
- Chunks are small so the pass over the structs msgspec has just made finds them in the CPU cache.
- Each chunk is routed by category in one pass, then each column its frame needs is read out of
  the routed structs by one list comprehension (still in cache; no per-event dicts or appends per
  field). Columns become Polars series every :data:`FLUSH_ROWS` rows; frames are concatenated
  once at the end.
- The cyclic GC is paused while Python objects are being made (structs are ``gc=False``; the lists
  would only make it rescan), and restored afterwards.
- ``Input Dims`` / ``Input type`` / ``grid`` / ``block`` stay raw JSON text (``Raw``), parsed only
  by the analyses that need them (:mod:`tracekit.shapes`).
- A chunk whose values have unexpected JSON types (a string where an id should be…) is decoded
  again with a lenient struct of ``Any`` fields and coerced column by column, so odd producers load
  instead of failing; only a non-object event or one without ``ph`` is an error.
"""

from __future__ import annotations

import ctypes
import decimal
import functools
import gc
import mmap
import os
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.trace import (
    LOADED_SCHEMAS,
    STEPS_SCHEMA,
    DeviceInfo,
    Trace,
    TraceMeta,
    empty_frame,
)

GZIP_MAGIC = b"\x1f\x8b"
#: Events decoded at a time: small, so the pass over them finds them still in the CPU cache.
CHUNK_EVENTS = 2_000
#: The same in bytes, when chunks are cut from Kineto's layout (about 2000 events of 300 bytes).
CHUNK_BYTES = 600_000
#: Timestamps above this many µs (3 years) are absolute, since the epoch; relative ones (to
#: ``baseTimeNanoseconds``) are seen up to months (5.4e12 µs in a torch 2.11 H200 trace).
_ABSOLUTE_US = 1e14
#: Below this many µs a float64 still resolves 1 ns (its ulp is under 0.001 µs), so the 3-decimal
#: text is recovered exactly from the float; above it the text itself must be read (decimal path).
_FLOAT_EXACT_US = float(2**43)

# --- the typed decode: only the fields tracekit reads -------------------------------------------


# msgspec cannot decode ``Raw | None``; an empty Raw stands for "absent".
_EMPTY_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, gc=False, frozen=True):
    external_id: int | None = msgspec.field(default=None, name="External id")
    # 2021 Runtime/Kernel/Memcpy events spell it in lower case (and then it names the op's id).
    external_id_lc: int | None = msgspec.field(default=None, name="external id")
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
    ph: str  # required: every Chrome trace event has one, and it tells events from other JSON
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | str | None = None
    args: _Args = _NO_ARGS


class _LenientArgs(msgspec.Struct, gc=False, frozen=True):
    """The same fields as :class:`_Args`, any JSON type accepted (coerced when columns are built)."""

    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_lc: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    record_function_id: Any = msgspec.field(default=None, name="Record function id")
    sequence_number: Any = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY_RAW, name="Input type")
    device: Any = None
    stream: Any = None
    grid: msgspec.Raw = _EMPTY_RAW
    block: msgspec.Raw = _EMPTY_RAW
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    bytes: Any = None
    cbid: Any = None
    cid: Any = None
    name: Any = None
    addr: Any = msgspec.field(default=None, name="Addr")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")


class _LenientEvent(msgspec.Struct, gc=False):
    ph: str
    cat: Any = ""
    name: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _LenientArgs | None = None


class _ExactTimes(msgspec.Struct, gc=False):
    """Times only, as decimals: the 2024 absolute 3-decimal µs form does not fit a float64."""

    ts: Any = None
    dur: Any = None


class _DeviceProps(msgspec.Struct):
    id: Any = 0
    name: Any = ""
    computeMajor: Any = None
    computeMinor: Any = None
    numSms: Any = None
    totalGlobalMem: Any = None


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
_LENIENT_DECODER = msgspec.json.Decoder(list[_LenientEvent])
_EXACT_TIMES_DECODER = msgspec.json.Decoder(list[_ExactTimes], float_hook=decimal.Decimal)

# --- category routing ---------------------------------------------------------------------------

_OPS, _LAUNCHES, _GPU, _OVERHEAD, _FLOWS, _MEMORY, _OTHER = range(7)

#: Known categories (every era) -> (frame, normalised label).
_ROUTES: dict[str, tuple[int, str]] = {
    "cpu_op": (_OPS, "cpu_op"), "Operator": (_OPS, "cpu_op"),
    "user_annotation": (_OPS, "user_annotation"), "python_function": (_OPS, "python_function"),
    "cuda_runtime": (_LAUNCHES, "cuda_runtime"), "Runtime": (_LAUNCHES, "cuda_runtime"),
    "cuda_driver": (_LAUNCHES, "cuda_driver"), "Driver": (_LAUNCHES, "cuda_driver"),
    "kernel": (_GPU, "kernel"), "Kernel": (_GPU, "kernel"),
    "gpu_memcpy": (_GPU, "memcpy"), "Memcpy": (_GPU, "memcpy"),
    "gpu_memset": (_GPU, "memset"), "Memset": (_GPU, "memset"),
    "gpu_user_annotation": (_GPU, "annotation"), "cuda_sync": (_GPU, "sync"),
    "overhead": (_OVERHEAD, "overhead"),
    "ac2g": (_FLOWS, "ac2g"), "async": (_FLOWS, "ac2g"), "fwdbwd": (_FLOWS, "fwdbwd"),
    "cpu_instant_event": (_MEMORY, "memory"),
}


def _route(cat: object) -> tuple[int, str]:
    """Route a category not in :data:`_ROUTES` (computed once per distinct category)."""
    text = cat if isinstance(cat, str) else str(cat)
    if text.endswith("_runtime") or text.endswith("_driver"):
        return _LAUNCHES, text
    return _OTHER, text  # Trace spans, counters, ""...: only flows, memory and metadata are kept


# --- public API ---------------------------------------------------------------------------------


def read_bytes(path: str | os.PathLike[str]) -> bytearray | mmap.mmap:
    """The JSON bytes of ``path`` as a writable buffer, decompressing gzip found by its magic bytes.

    A plain file is mapped copy-on-write (``ACCESS_COPY``): nothing is copied up front, the page
    cache backs the pages, and the loader's few temporary writes stay private to this process.
    """
    p = Path(path)
    try:
        if p.is_dir():
            raise TraceError(p, "is a directory, not a trace file")
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return bytearray()
            try:
                buf: bytearray | mmap.mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):  # not mappable (a pipe, an odd filesystem): read it
                buf = bytearray(fh.read())
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(p, "no such file") from None
    except PermissionError:
        raise TraceError(p, "permission denied") from None
    except OSError as err:
        raise TraceError(p, f"cannot read: {err.strerror or err}") from None
    if buf[:2] == GZIP_MAGIC:
        try:
            return _gunzip(p, buf)
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
    return buf


#: Compressed bytes fed to zlib per call.
_INFLATE_STEP = 1 << 20


def _gunzip(path: Path, raw: bytearray | mmap.mmap) -> bytearray:
    """Inflate into one growing buffer, feeding the compressed bytes 1 MiB at a time, so the peak is
    the compressed file plus the JSON plus one piece, never two copies of the JSON. (Growing a large
    bytearray is a ``realloc`` that Linux serves with ``mremap``: no copying. Bounding the *output*
    with ``max_length`` instead would copy the unconsumed input on every call: 1.6x slower at 64 MiB
    pieces, 30x at 256 KiB. The trailer's size field is not trusted: a truncated file has garbage.)"""
    out = bytearray()
    try:
        # wbits=31: gzip container only; decompressobj lets us notice a missing end.
        inflater = zlib.decompressobj(wbits=31)
        with memoryview(raw) as view:
            for start in range(0, len(view), _INFLATE_STEP):
                out += inflater.decompress(view[start:start + _INFLATE_STEP])
                if inflater.eof:
                    break
        out += inflater.flush()
    except zlib.error as err:
        raise TraceError(path, f"corrupt gzip stream ({err})") from None
    if not inflater.eof:
        raise TraceError(path, "truncated gzip stream (the file ends before the data does)")
    return out


_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def load(path: str | os.PathLike[str], *, progress: Callable[[int, int], None] | None = None,
         workers: int | None = 1) -> Trace:
    """Load the trace at ``path``.

    ``progress``, when given, is called as ``progress(events_done, events_total)`` after each chunk.
    ``workers``: processes that decode a big plain-JSON file in Kineto's layout (see
    :mod:`tracekit.load_parallel`); None picks one per core, as many as the file's size warrants.
    The default, 1, keeps everything in this process: worker processes are *spawned*, which
    imports the caller's main module again, and only a program written for that (the ``tracekit``
    command, a script with an ``if __name__ == "__main__":`` guard) should ask for them.
    Raises :class:`TraceError` for a missing, empty, non-JSON, truncated or non-Kineto file.
    """
    p = Path(path)
    data = read_bytes(p)
    size = len(data)
    match = _NON_SPACE.search(data)
    if match is None:
        raise TraceError(p, "empty file" if size == 0 else "empty file (only whitespace)")
    first = bytes(data[match.start():match.start() + 1])
    del match  # a match keeps the whole buffer alive
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        top: _TopLevel | None = None
        plan = _kineto_layout(data) if first == b"{" else None
        if plan is not None:
            top, spans, events_lo, events_hi = plan
            try:
                from tracekit import load_parallel

                shares = load_parallel.share_count(workers, data, spans)
                extent = (events_lo, events_hi)
                frames, fmt, total = (
                    load_parallel.decode_in_shares(p, data, spans, shares, progress, extent)
                    if shares > 1 else decode_spans(p, data, spans, progress, extent))
            except TraceError:
                top = None  # the layout guess was wrong somewhere: take the exact path instead
            del spans
        if top is None:
            top = _decode_top(p, data, first)
            raws = top.traceEvents
            assert raws is not None
            top.traceEvents = None
            builder, total = _decode_all(p, _raw_chunks(data, raws), progress, total=len(raws))
            del raws
            frames = builder.finish()
            fmt = time_format(frames, builder.times.fractional)
            del builder
        del data
    finally:
        if gc_was_enabled:
            gc.enable()
    meta = _meta(p, size, top, frames, fmt, total)
    return Trace(meta=meta, steps=_steps(frames["ops"]), **frames)


# --- decoding helpers ---------------------------------------------------------------------------


def _decode_top(path: Path, data: bytearray | mmap.mmap, first: bytes) -> _TopLevel:
    if first not in (b"{", b"["):
        raise TraceError(path, "not JSON (does not start with '{' or '[')")
    try:
        if first == b"[":
            # A bare Chrome trace array: legal Chrome trace format, no Kineto metadata.
            return _TopLevel(traceEvents=_BARE_LIST_DECODER.decode(data))
        top = _TOP_DECODER.decode(data)
    except msgspec.ValidationError as err:
        raise TraceError(path, f"not a Kineto trace ({_short(err)})") from None
    except msgspec.DecodeError as err:
        text = str(err)
        if "truncated" in text.lower():
            raise TraceError(path, "truncated JSON (the file ends before the trace does)") from None
        raise TraceError(path, f"not valid JSON ({text})") from None
    if top.traceEvents is None:
        raise TraceError(path, "not a Kineto trace: no 'traceEvents' list")
    return top


def _short(err: Exception) -> str:
    # msgspec reports "... - at `$[12].ts`"; keep it one line and name the list it is about.
    return str(err).splitlines()[0].replace("`$.traceEvents[", "`traceEvents[")


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _address(obj: object) -> tuple[int, int]:
    """(address, length) of a buffer-protocol object's memory."""
    view = _PyBuffer()
    if _get_buffer(obj, ctypes.byref(view), 0) != 0:  # pragma: no cover - raises instead
        raise BufferError("no buffer")
    try:
        return view.buf or 0, view.len
    finally:
        _release_buffer(ctypes.byref(view))


Decode = Callable[[msgspec.json.Decoder], list[Any]]


def _decode_span(data: bytearray | mmap.mmap, lo: int, hi: int, decoder: msgspec.json.Decoder) -> list[Any]:
    """Decode ``data[lo:hi + 1]`` as a JSON array after turning its first and last byte (separators
    or the array's own brackets) into ``[`` and ``]``; the bytes are put back afterwards."""
    before, after = data[lo], data[hi]
    data[lo] = 0x5B  # [
    data[hi] = 0x5D  # ]
    try:
        with memoryview(data) as view:
            return decoder.decode(view[lo:hi + 1])
    finally:
        data[lo] = before
        data[hi] = after


def _raw_chunks(data: bytearray | mmap.mmap, raws: list[msgspec.Raw]) -> Iterator[tuple[Decode, int | None]]:
    """Chunks of :data:`CHUNK_EVENTS` events located by the top-level decode's ``Raw`` views.

    The views point into ``data``; consecutive events are separated by at least a comma, so the
    byte before a chunk's first event and the byte after its last become ``[``/``]``. Should the
    views not lie inside ``data`` (never seen, but cheap to check) the chunk is joined instead.
    """
    base, size = _address(data) if raws else (0, 0)
    for start in range(0, len(raws), CHUNK_EVENTS):
        chunk = raws[start:start + CHUNK_EVENTS]
        first, first_len = _address(chunk[0])
        last, last_len = _address(chunk[-1])
        lo, hi = first - base - 1, last - base + last_len
        if 0 <= lo and hi < size and first_len:
            yield functools.partial(_decode_span, data, lo, hi), None
        else:
            joined = b"[" + b",".join(chunk) + b"]"
            yield (lambda decoder, joined=joined: decoder.decode(joined)), None


# Kineto writes one event per line group, each starting with a newline, two spaces and "{"; JSON
# text cannot hold a raw newline inside a string, so this only ever matches between tokens.
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_START = re.compile(rb"\n  \{")
_WHITESPACE = frozenset(b" \t\r\n")


def _kineto_layout(data: bytearray | mmap.mmap) -> tuple[_TopLevel, list[tuple[int, int]], int, int] | None:
    """Plan chunks straight from Kineto's layout, skipping the top-level pass over every event.

    Returns (top-level metadata, chunk spans, array start, array end), or None when the file does
    not look like Kineto wrote it. Every guess is checked: the metadata must decode from the file
    with the event array cut out, and each span must decode as an array of events (a span cut
    inside an event cannot: its brackets would not balance); any failure falls back to the exact
    path, which also produces the error messages.
    """
    key = _EVENTS_KEY.search(data)
    end = data.rfind(b"]")
    if key is None or end < key.end():
        return None
    start = key.end() - 1
    try:
        top = _TOP_DECODER.decode(bytes(data[:start]) + b"[]" + bytes(data[end + 1:]))
    except msgspec.MsgspecError:
        return None
    if top.traceEvents != []:
        return None
    top.traceEvents = None
    target = CHUNK_BYTES
    spans: list[tuple[int, int]] = []
    lo = start
    while True:
        m = _EVENT_START.search(data, lo + target, end)
        if m is None:
            if end - lo > 8 * target:
                return None  # events not laid out one per line: use the exact path
            spans.append((lo, end))
            return top, spans, start, end
        if m.start() - (lo + target) > 8 * target:
            return None
        comma = m.start() - 1
        while comma > lo and data[comma] in _WHITESPACE:
            comma -= 1
        if data[comma] != 0x2C:  # ,
            return None
        spans.append((lo, comma))
        lo = m.start() + 2  # the space just before "{"


def _span_chunks(data: bytearray | mmap.mmap, spans: list[tuple[int, int]]) -> Iterator[tuple[Decode, int | None]]:
    for lo, hi in spans:
        yield functools.partial(_decode_span, data, lo, hi), hi


def _decode_all(path: Path, chunks: Iterator[tuple[Decode, int | None]],
                progress: Callable[[int, int], None] | None, *, total: int | None,
                extent: tuple[int, int] | None = None,
                exact_times: bool | None = None) -> tuple[_FrameBuilder, int]:
    """Decode every chunk and route its events; returns the builder (flushed) and the count.

    ``exact_times``: whether times need the decimal path; None decides from the first chunk.
    """
    builder = _FrameBuilder()
    offset = 0
    for decode, hi in chunks:
        events = _decode_chunk(path, decode, offset)
        if offset == 0:
            builder.exact_times = _needs_exact_times(events) if exact_times is None else exact_times
        if builder.exact_times:
            _replace_with_exact_times(path, decode, events)
        builder.add_chunk(events, offset)
        offset += len(events)
        del events
        if progress is not None:
            if total is not None:
                progress(offset, total)
            elif extent is not None and hi is not None:
                # Byte-proportional estimate of the total until the last chunk makes it exact.
                lo, end = extent
                done = (hi - lo) / max(end - lo, 1)
                progress(offset, offset if hi >= end else max(offset, round(offset / max(done, 1e-9))))
    builder.flush()
    return builder, offset


def decode_spans(path: Path, data: bytearray | mmap.mmap, spans: list[tuple[int, int]],
                 progress: Callable[[int, int], None] | None, extent: tuple[int, int],
                 exact_times: bool | None = None) -> tuple[dict[str, pl.DataFrame], str, int]:
    """(sorted frames, time format, event count) of the events in ``spans``, in this process."""
    builder, count = _decode_all(path, _span_chunks(data, spans), progress, total=None, extent=extent,
                                 exact_times=exact_times)
    frames = builder.finish()
    return frames, time_format(frames, builder.times.fractional), count


def _decode_chunk(path: Path, decode: Decode, start: int) -> list[Any]:
    try:
        return decode(_EVENTS_DECODER)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as err:
        raise TraceError(path, f"malformed event JSON ({_short(err)})") from None
    try:
        events = decode(_LENIENT_DECODER)
    except msgspec.ValidationError as err:
        raise TraceError(path, f"not a Kineto trace: {_event_problem(err, start)}") from None
    except msgspec.DecodeError as err:
        # The typed decode can stop at a wrong type before reaching the text that is not JSON.
        raise TraceError(path, f"malformed event JSON ({_short(err)})") from None
    for e in events:  # categories and names are routed and compared as text
        if not isinstance(e.cat, str):
            e.cat = "" if e.cat is None else msgspec.json.encode(e.cat).decode()
        if not isinstance(e.name, str):
            e.name = "" if e.name is None else msgspec.json.encode(e.name).decode()
    return events


def _event_problem(err: msgspec.ValidationError, start: int) -> str:
    text = str(err).splitlines()[0]
    m = re.search(r"`\$\[(\d+)\]", text)
    where = f"event {start + int(m.group(1))} of traceEvents" if m else "traceEvents"
    if text.startswith("Expected `object`"):
        return f"{where} is not an object"
    if "missing required field `ph`" in text:
        return f"{where} has no 'ph' (not a trace event)"
    return f"{where}: {text}"


def _needs_exact_times(events: list[Any]) -> bool:
    """True for the 2024 form: absolute µs written with 3 decimals (beyond float64's precision)."""
    for e in events[:5000]:
        ts = e.ts
        if isinstance(ts, float) and abs(ts) >= _FLOAT_EXACT_US:
            return True
    return False


def _replace_with_exact_times(path: Path, decode: Decode, events: list[Any]) -> None:
    """Set each event's ts/dur to exact integer ns, read again from the text as decimals."""
    try:
        exact = decode(_EXACT_TIMES_DECODER)
    except msgspec.MsgspecError as err:  # pragma: no cover - the first decode already passed
        raise TraceError(path, f"malformed event JSON ({_short(err)})") from None
    thousand = decimal.Decimal(1000)
    for e, x in zip(events, exact):
        e.ts = _decimal_ns(x.ts, thousand)
        e.dur = _decimal_ns(x.dur, thousand)


def _decimal_ns(value: object, thousand: decimal.Decimal) -> int | None:
    if isinstance(value, decimal.Decimal):
        return int((value * thousand).to_integral_value(decimal.ROUND_HALF_EVEN))
    if isinstance(value, int):
        return value * 1000
    return None


# --- columns ------------------------------------------------------------------------------------


def _int_series(name: str, values: Sequence[object]) -> pl.Series:
    """An Int64 column from ints/None, tolerating numeric strings (ROCm writes ``bytes`` as text)."""
    try:
        return pl.Series(name, values, dtype=pl.Int64)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [_to_int(v) for v in values], dtype=pl.Int64)


def _to_int(value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value if value is None or -(2**63) <= value < 2**63 else None  # type: ignore[operator]
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 0) if text[:2].lower() in ("0x", "0o", "0b") else int(text)
        except ValueError:
            try:
                return _to_int(float(text))
            except ValueError:
                return None
    return None


def _id_series(name: str, values: Sequence[object]) -> pl.Series:
    """pids/tids as strings: Kineto writes ints, but also "Spans", "Traces", "stream 7"."""
    try:
        return pl.Series(name, values, dtype=pl.Int64).cast(pl.String)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [v if isinstance(v, str) else _id_text(v) for v in values],
                         dtype=pl.String)


def _id_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _str_series(name: str, values: Sequence[object]) -> pl.Series:
    try:
        return pl.Series(name, values, dtype=pl.String)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        return pl.Series(name, [v if isinstance(v, str) or v is None else str(v) for v in values],
                         dtype=pl.String)


def _raw_text(name: str, values: Sequence[msgspec.Raw]) -> pl.Series:
    """Raw JSON fragments kept as text, parsed only where an analysis needs them.

    The fragments are joined in C with NUL (a byte JSON text cannot hold outside an escape) and
    split in Polars: 2-3x cheaper than a Python ``bytes()`` per value. Absent = empty = null.
    """
    try:
        blob = b"\x00".join(values)
        out = pl.Series(name, [blob], dtype=pl.Binary).cast(pl.String).str.split("\x00").explode()
        if out.len() == len(values):
            return out.replace("", None)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        pass  # not UTF-8: keep what can be kept
    return pl.Series(
        name, [bytes(v).decode("utf-8", "replace") if v else None for v in values], dtype=pl.String
    )


class _Times:
    """Turns µs values into Int64 ns and remembers what it saw (for ``time_format``)."""

    def __init__(self) -> None:
        self.fractional = False
        self.exact = False  # values are already integer ns (see _replace_with_exact_times)

    def ns(self, name: str, values: Sequence[object]) -> pl.Series:
        if self.exact:
            self.fractional = True
            return _int_series(name, values)
        first = next((v for v in values if v is not None), None)
        if not isinstance(first, float):
            try:  # integer µs (≤ 2.2, and relative traces that happen to be whole): exact
                return pl.Series(name, values, dtype=pl.Int64) * 1000
            except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
                pass
        # 3-decimal µs. Whole µs and the fraction are converted apart: the fraction of a float
        # below 2^43 µs is within 0.5 ns of the written one, so rounding it gives the exact ns
        # (round(ts × 1000) alone can be 1 ns off past 2^42 µs, where real relative traces reach).
        self.fractional = True
        floats = pl.Series(name, values, dtype=pl.Float64, strict=False)
        whole = floats.floor()
        return (whole.cast(pl.Int64) * 1000 + ((floats - whole) * 1000.0).round(0).cast(pl.Int64)).alias(name)


# Column order of each frame as the one pass fills it (``end`` is derived in finish).
_OPS_COLS = ("idx", "cat", "name", "pid", "tid", "ts", "dur", "external_id", "record_function_id",
             "sequence_number", "input_dims", "input_types")
_LAUNCH_COLS = ("idx", "cat", "name", "pid", "tid", "ts", "dur", "correlation", "external_id", "cbid")
_GPU_COLS = ("idx", "kind", "name", "pid", "tid", "ts", "dur", "device", "stream", "correlation",
             "external_id", "grid", "block", "registers", "shared_memory", "bytes")
_FLOW_COLS = ("idx", "cat", "ph", "id", "pid", "tid", "ts")
_MEMORY_COLS = ("idx", "pid", "tid", "ts", "addr", "bytes", "total_allocated", "total_reserved",
                "device_type", "device_id")
_OVERHEAD_COLS = ("idx", "name", "pid", "tid", "ts", "dur")
_THREAD_COLS = ("kind", "pid", "tid", "name")

#: How each column's Python values become a series.
_KIND = {
    "idx": "idx", "cat": "str", "kind": "str", "name": "str", "ph": "str", "pid": "id", "tid": "id",
    "ts": "time", "dur": "time", "input_dims": "raw", "input_types": "raw", "grid": "raw",
    "block": "raw",
}
#: Rows gathered before they are turned into series (bounds the Python objects held).
FLUSH_ROWS = 50_000


class _FrameBuilder:
    """Routes events to per-frame column lists in one pass; series are built every
    :data:`FLUSH_ROWS` rows and frames concatenated once in :meth:`finish`.

    Events arrive in small chunks (:data:`CHUNK_EVENTS`) so that the structs msgspec has just made
    are still in the CPU cache when the pass reads them; that alone halves the pass's cost.
    """

    def __init__(self) -> None:
        self.layout = {
            "ops": _OPS_COLS, "launches": _LAUNCH_COLS, "gpu": _GPU_COLS, "flows": _FLOW_COLS,
            "memory": _MEMORY_COLS, "overhead": _OVERHEAD_COLS, "threads": _THREAD_COLS,
        }
        self.cols: dict[str, tuple[list[Any], ...]] = {
            name: tuple([] for _ in cols) for name, cols in self.layout.items()
        }
        self.parts: dict[str, list[pl.DataFrame]] = {name: [] for name in self.layout}
        self.times = _Times()
        self.exact_times = False
        self.routes = dict(_ROUTES)
        self.pending = 0

    def add_chunk(self, events: list[Any], offset: int) -> None:
        # Two passes over the chunk while its structs are still in cache: one routes each event
        # (by category, and ph "X" for spans), one list comprehension per column then reads the
        # routed events' field. Comprehensions and ``extend`` run in C-speed loops; a bound
        # ``append`` per field per event cost a third more.
        routes = self.routes
        get = routes.get
        ops: list[int] = []
        launches: list[int] = []
        gpu: list[int] = []
        flows: list[int] = []
        other: list[tuple[int, int, Any]] = []  # memory, overhead, metadata: few; done after
        to_ops, to_launches, to_gpu, to_flows = ops.append, launches.append, gpu.append, flows.append
        k = 0
        for e in events:
            route = get(e.cat)
            if route is None:
                route = routes[e.cat] = _route(e.cat)
            frame = route[0]
            if frame == _OPS:
                if e.ph == "X":
                    to_ops(k)
            elif frame == _FLOWS:
                to_flows(k)
            elif frame == _GPU:
                if e.ph == "X":
                    to_gpu(k)
            elif frame == _LAUNCHES:
                if e.ph == "X":
                    to_launches(k)
            else:
                other.append((offset + k, frame, e))
            k += 1
        no_args = _NO_ARGS
        if ops:
            ev = [events[k] for k in ops]
            args = [e.args or no_args for e in ev]
            self._extend("ops", self._common(ev, ops, offset) + (
                [a.external_id for a in args], [a.record_function_id for a in args],
                [a.sequence_number for a in args], [a.input_dims for a in args],
                [a.input_types for a in args]))
        if flows:
            ev = [events[k] for k in flows]
            self._extend("flows", (
                [offset + k for k in flows], [routes[e.cat][1] for e in ev], [e.ph for e in ev],
                [e.id for e in ev], [e.pid for e in ev], [e.tid for e in ev], [e.ts for e in ev]))
        if gpu:
            ev = [events[k] for k in gpu]
            args = [e.args or no_args for e in ev]
            self._extend("gpu", self._common(ev, gpu, offset) + (
                [a.device for a in args], [a.stream for a in args], [a.correlation for a in args],
                [a.external_id if a.external_id is not None else a.external_id_lc for a in args],
                [a.grid for a in args], [a.block for a in args], [a.registers for a in args],
                [a.shared_memory for a in args], [a.bytes for a in args]))
        if launches:
            ev = [events[k] for k in launches]
            args = [e.args or no_args for e in ev]
            self._extend("launches", self._common(ev, launches, offset) + (
                [a.correlation for a in args],
                [a.external_id if a.external_id is not None else a.external_id_lc for a in args],
                [a.cbid if a.cbid is not None else a.cid for a in args]))
        if other:
            self._add_other(other)
        self.pending += len(events)
        if self.pending >= FLUSH_ROWS:
            self.flush()

    def _common(self, ev: list[Any], positions: list[int], offset: int) -> tuple[list[Any], ...]:
        """The columns every span frame starts with: idx, category label, name, pid, tid, ts, dur."""
        routes = self.routes
        return ([offset + k for k in positions], [routes[e.cat][1] for e in ev], [e.name for e in ev],
                [e.pid for e in ev], [e.tid for e in ev], [e.ts for e in ev], [e.dur for e in ev])

    def _extend(self, frame: str, columns: tuple[list[Any], ...]) -> None:
        for target, values in zip(self.cols[frame], columns, strict=True):
            target.extend(values)

    def _add_other(self, other: list[tuple[int, int, Any]]) -> None:
        """``[memory]`` instants, overhead spans, flows of other categories, metadata names."""
        mi, mp, mt, mts, ma, mb, mta, mtr, mdt, mdi = (c.append for c in self.cols["memory"])
        vi, vn, vp, vt, vts, vd = (c.append for c in self.cols["overhead"])
        fi, fc, fph, fid, fp, ft, fts = (c.append for c in self.cols["flows"])
        hk, hp, ht, hn = (c.append for c in self.cols["threads"])
        for i, frame, e in other:
            ph = e.ph
            if frame == _MEMORY or (ph == "i" and e.name == "[memory]"):  # 2021: no category
                if e.name == "[memory]":
                    a = e.args or _NO_ARGS
                    mi(i); mp(e.pid); mt(e.tid); mts(e.ts); ma(a.addr); mb(a.mem_bytes)
                    mta(a.total_allocated); mtr(a.total_reserved); mdt(a.device_type)
                    mdi(a.device_id)
            elif frame == _OVERHEAD:
                if ph == "X":
                    vi(i); vn(e.name); vp(e.pid); vt(e.tid); vts(e.ts); vd(e.dur)
            elif ph in ("s", "f", "t"):  # a flow of a category tracekit does not know
                fi(i); fc(e.cat); fph(ph); fid(e.id); fp(e.pid); ft(e.tid); fts(e.ts)
            elif ph == "M" and e.name in ("process_name", "thread_name"):
                name = (e.args or _NO_ARGS).name
                if name is not None:
                    hk("process" if e.name == "process_name" else "thread")
                    hp(e.pid); ht(e.tid); hn(name)

    def flush(self) -> None:
        """Turn the gathered column lists into one frame part per frame and empty them."""
        times = self.times
        times.exact = self.exact_times
        for frame, names in self.layout.items():
            lists = self.cols[frame]
            if not lists[0]:
                continue
            series = []
            for name, values in zip(names, lists):
                kind = _KIND.get(name, "int")
                if kind == "idx":
                    s = pl.Series(name, values, dtype=pl.UInt32)
                elif kind == "str":
                    s = _str_series(name, values)
                elif kind == "id":
                    s = _id_series(name, values)
                elif kind == "time":
                    s = times.ns(name, values)
                elif kind == "raw":
                    s = _raw_text(name, values)
                else:
                    s = _int_series(name, values)
                series.append(s)
                values.clear()
            self.parts[frame].append(pl.DataFrame(series))
        self.pending = 0

    def finish(self, *, sort: bool = True) -> dict[str, pl.DataFrame]:
        """The frames, in (ts, idx) order unless ``sort`` is False: then in event order, for a
        caller that joins several shares and sorts once."""
        self.flush()
        frames: dict[str, pl.DataFrame] = {}
        for name, schema in LOADED_SCHEMAS.items():
            parts = self.parts[name]
            self.parts[name] = []
            if not parts:
                frames[name] = empty_frame(schema)
                continue
            # No rechunk here: the sort below writes every column out contiguously anyway.
            df = pl.concat(parts, how="vertical_relaxed", rechunk=False) if len(parts) > 1 else parts[0]
            del parts
            exprs = []
            for col, dtype in schema.items():
                if col == "end":
                    exprs.append((pl.col("ts") + pl.col("dur").fill_null(0)).alias("end"))
                elif col == "dur":
                    exprs.append(pl.col("dur").fill_null(0).cast(dtype))
                elif col in df.columns:
                    exprs.append(pl.col(col).cast(dtype))
                else:  # pragma: no cover - every builder writes all its columns
                    exprs.append(pl.lit(None, dtype=dtype).alias(col))
            frames[name] = df.select(exprs)
        return sort_frames(frames) if sort else frames


def sort_frames(frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Each frame in (ts, idx) order; threads without repeats."""
    out = {}
    for name, df in frames.items():
        if name == "threads":
            out[name] = df.unique(maintain_order=True)
        elif df["idx"].is_sorted():
            # Rows are in event order, so a stable sort on ts alone is the (ts, idx) order,
            # and far cheaper than a two-key sort (which row-encodes both keys).
            out[name] = (df.rechunk() if df["ts"].is_sorted()
                         else df.sort("ts", maintain_order=True, nulls_last=True))
        else:
            out[name] = df.sort(["ts", "idx"], nulls_last=True)
    return out


def time_format(frames: dict[str, pl.DataFrame], fractional: bool) -> str:
    """``TraceMeta.time_format`` of loaded frames (``fractional``: some time had a decimal part)."""
    max_us = max((frames[f]["ts"].max() or 0) for f in ("ops", "launches", "gpu", "overhead",
                                                         "flows", "memory")) / 1000.0
    if max_us == 0:
        return "empty"
    if max_us > _ABSOLUTE_US:
        return "absolute-us3" if fractional else "absolute-us-int"
    return "relative-ns3"


# --- metadata and steps -------------------------------------------------------------------------


def _opt_int(value: object) -> int | None:
    return _to_int(value) if value is not None else None


def _meta(path: Path, size: int, top: _TopLevel, frames: dict[str, pl.DataFrame],
          time_format: str, event_count: int) -> TraceMeta:
    devices = []
    for d in top.deviceProperties or []:
        major, minor = _opt_int(d.computeMajor), _opt_int(d.computeMinor)
        devices.append(DeviceInfo(
            id=_opt_int(d.id) or 0, name=str(d.name or ""),
            compute_capability=f"{major}.{minor if minor is not None else 0}" if major is not None else None,
            num_sms=_opt_int(d.numSms), total_global_mem=_opt_int(d.totalGlobalMem),
        ))
    versions = {k: str(getattr(top, k)) for k in _VERSION_KEYS if getattr(top, k) is not None}
    launch_names = frames["launches"]["name"]
    if frames["gpu"].height == 0 and frames["launches"].height == 0:
        vendor = "cpu"
    elif (top.roctracer_version is not None or top.rocprofiler_version is not None
          or top.hip_runtime_version is not None
          or launch_names.str.starts_with("hip").any()):
        vendor = "amd"
    else:
        vendor = "nvidia"
    return TraceMeta(
        path=str(path), size_bytes=size, base_time_ns=top.baseTimeNanoseconds, devices=tuple(devices),
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
