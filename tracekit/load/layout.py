"""A trace file's bytes, and the chunks of events in them, planned without copying.

Contract: :func:`read_bytes` returns the JSON text of a file as one writable buffer — a plain file
memory-mapped copy-on-write, gzip (found by its magic bytes, never by suffix) inflated once into one
buffer. The chunk planners return :data:`~tracekit.load.events.Decode` callables, each decoding
about a cache-sized chunk of events straight from that buffer: :func:`kineto_layout` cuts chunks by
Kineto's layout (every event starts a line with two spaces and ``{``), checking every guess, so the
events are parsed once, not twice; files laid out otherwise are located by :func:`decode_top`, a
top-level decode with ``traceEvents`` as ``msgspec.Raw`` views (no copy), and :func:`raw_chunks`.

A chunk is decoded in place (:func:`decode_span`): the separator bytes just outside it are
overwritten with ``[`` and ``]`` for the decode and restored after, so no chunk is copied or joined.
The input file itself is only ever opened for reading. Unreadable input raises
:class:`~tracekit.errors.TraceError` with one line naming the file and the problem.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import TraceError
from tracekit.load.events import BARE_LIST_DECODER, TOP_DECODER, Decode, TopLevel, short

GZIP_MAGIC = b"\x1f\x8b"
#: Events decoded at a time: small, so the pass over them finds them still in the CPU cache.
CHUNK_EVENTS = 2_000
#: The same in bytes, when chunks are cut from Kineto's layout (about 2000 events of 300 bytes).
CHUNK_BYTES = 600_000

Buffer = bytearray | mmap.mmap
#: (first byte, last byte) of a run of events in the buffer: separators or the array's brackets.
Spans = list[tuple[int, int]]
#: A chunk to decode, with the offset of its last byte when known (for byte-based progress).
Chunks = Iterator[tuple[Decode, int | None]]


def read_bytes(path: str | os.PathLike[str]) -> Buffer:
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
                buf: Buffer = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
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


def _gunzip(path: Path, raw: Buffer) -> bytearray:
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


def decode_top(path: Path, data: Buffer, first: bytes) -> TopLevel:
    """The whole file decoded once, its events left as ``Raw`` views (``first``: its first byte that
    is not white space); a bare ``[…]`` array is a trace without metadata. TraceError otherwise."""
    if first not in (b"{", b"["):
        raise TraceError(path, "not JSON (does not start with '{' or '[')")
    try:
        if first == b"[":
            # A bare Chrome trace array: legal Chrome trace format, no Kineto metadata.
            return TopLevel(traceEvents=BARE_LIST_DECODER.decode(data))
        top = TOP_DECODER.decode(data)
    except msgspec.ValidationError as err:
        raise TraceError(path, f"not a Kineto trace ({short(err)})") from None
    except msgspec.DecodeError as err:
        text = str(err)
        if "truncated" in text.lower():
            raise TraceError(path, "truncated JSON (the file ends before the trace does)") from None
        raise TraceError(path, f"not valid JSON ({text})") from None
    if top.traceEvents is None:
        raise TraceError(path, "not a Kineto trace: no 'traceEvents' list")
    return top


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


def decode_span(data: Buffer, lo: int, hi: int, decoder: msgspec.json.Decoder) -> list[Any]:
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


def raw_chunks(data: Buffer, raws: list[msgspec.Raw]) -> Chunks:
    """Chunks of :data:`CHUNK_EVENTS` events located by :func:`decode_top`'s ``Raw`` views.

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
            yield functools.partial(decode_span, data, lo, hi), None
        else:
            joined = b"[" + b",".join(chunk) + b"]"
            yield (lambda decoder, joined=joined: decoder.decode(joined)), None


# Kineto writes one event per line group, each starting with a newline, two spaces and "{"; JSON
# text cannot hold a raw newline inside a string, so this only ever matches between tokens.
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_START = re.compile(rb"\n  \{")
_WHITESPACE = frozenset(b" \t\r\n")


def kineto_layout(data: Buffer) -> tuple[TopLevel, Spans, int, int] | None:
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
        top = TOP_DECODER.decode(bytes(data[:start]) + b"[]" + bytes(data[end + 1:]))
    except msgspec.MsgspecError:
        return None
    if top.traceEvents != []:
        return None
    top.traceEvents = None
    target = CHUNK_BYTES
    spans: Spans = []
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


def span_chunks(data: Buffer, spans: Spans) -> Chunks:
    """The chunks of ``spans`` (planned by :func:`kineto_layout`), each with its last byte."""
    for lo, hi in spans:
        yield functools.partial(decode_span, data, lo, hi), hi
