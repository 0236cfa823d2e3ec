"""A trace file's bytes, and the chunks of events in them, planned without copying.

Contract: the buffer comes from :mod:`tracekit.load.source` (a file mapped copy-on-write, or
inflated or streamed bytes). The chunk planners return :data:`~tracekit.load.events.Decode` callables, each decoding
about a cache-sized chunk of events straight from that buffer: :func:`plan_spans` cuts chunks at the
separators between events (Kineto's one event per line or minified JSON alike), checking every
guess, so the events are parsed once, not twice; files it cannot plan are located by
:func:`decode_top`, a top-level decode with ``traceEvents`` as ``msgspec.Raw`` views (no copy), and
:func:`raw_chunks`.

A chunk is decoded in place (:func:`decode_span`): the separator bytes just outside it are
overwritten with ``[`` and ``]`` for the decode and restored after, so no chunk is copied or joined.
Text that is not a trace raises :class:`~tracekit.errors.TraceError` with one line naming the file
and the problem (:func:`decode_top`). Two repairs run only when asked for by the loader: NaN and
Infinity literals (not JSON, but written by Python's json module) are blanked in place
(:func:`blank_non_finite_literals`), and JSON that ends early is cut after its last complete event
(:func:`cut_to_complete_events`, for ``--partial``).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import TraceError
from tracekit.load.events import (BARE_LIST_DECODER, EMPTY_RAW, NESTING_PROBLEM, TOP_DECODER, Decode, TopLevel,
                                   short)

#: Events decoded at a time: small, so the pass over them finds them still in the CPU cache.
CHUNK_EVENTS = 2_000
#: The same in bytes, when chunks are cut from Kineto's layout (about 2000 events of 300 bytes).
CHUNK_BYTES = 600_000

Buffer = bytearray | mmap.mmap
#: (first byte, last byte) of a run of events in the buffer: separators or the array's brackets.
Spans = list[tuple[int, int]]
#: A chunk to decode, with the offset of its last byte when known (for byte-based progress).
Chunks = Iterator[tuple[Decode, int | None]]


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
        if "$.traceEvents" in str(err):
            raise TraceError(path, "not a trace: 'traceEvents' is not a list") from None
        raise TraceError(path, f"not a trace ({short(err)})") from None
    except msgspec.DecodeError as err:
        error = TraceError(path, json_problem(err))
        error.json_error = err  # type: ignore[attr-defined]  # the loader may repair and retry
        raise error from None
    except RecursionError:
        raise TraceError(path, NESTING_PROBLEM) from None
    if top.traceEvents is None:
        if top.nodes:
            raise TraceError(path, "a PyTorch execution trace, not a Kineto trace: "
                                   "pass it with --execution-trace beside the Kineto trace")
        raise TraceError(path, "not a trace: no 'traceEvents' list")
    return top


def json_problem(err: msgspec.DecodeError) -> str:
    """msgspec's complaint about text that is not JSON, as the one line a user reads."""
    text = str(err)
    if "truncated" in text.lower():
        return "truncated JSON (the file ends before the trace does; --partial reports the events read)"
    m = re.search(r"trailing characters \(byte (\d+)\)", text)
    if m:
        return f"trailing data after the JSON (from byte {int(m.group(1)):,})"
    return f"not valid JSON ({text})"


# --- NaN and Infinity -----------------------------------------------------------------------------

# Python's json module writes NaN, Infinity and -Infinity; C++ formatting writes nan and inf. None is
# JSON, so msgspec stops at them. In a value position (after ':', ',' or '[', before ',', ']' or
# '}') they are overwritten with "[]" and spaces, the same length: the value is then of the wrong
# type — a time that is no time (its event is dropped and counted), any other field missing.
_NON_FINITE = re.compile(
    rb"(?<=[:,\[])(\s*)(-?(?:NaN|nan|Infinity|infinity|inf|Inf))(?=\s*[,\]}])")
_NON_FINITE_AT = re.compile(rb"-?(?:NaN|nan|Infinity|infinity|inf|Inf)")


def is_non_finite_literal(data: Buffer, err: msgspec.DecodeError, offset: int = 0) -> bool:
    """Whether msgspec stopped at a NaN/Infinity literal (its message names the byte)."""
    m = re.search(r"invalid character \(byte (\d+)\)", str(err))
    if m is None:
        return False
    at = offset + int(m.group(1))
    for start in (at, at - 1):  # the byte named may be the sign
        if 0 <= start and _NON_FINITE_AT.match(data, start):
            return True
    return False


def blank_non_finite_literals(data: Buffer) -> int:
    """Overwrite every NaN/Infinity literal in a value position (see above); returns how many."""
    count = 0
    for m in _NON_FINITE.finditer(data):
        lo, hi = m.span(2)
        data[lo:hi] = b"[]" + b" " * (hi - lo - 2)
        count += 1
    return count


# --- a cut short input ------------------------------------------------------------------------------

#: How far back from the end a complete event is looked for, and how many candidate ends tried.
_CUT_SEARCH_BYTES = 16 << 20
_CUT_ATTEMPTS = 64


def cut_to_complete_events(path: Path, data: bytearray) -> int:
    """Cut ``data`` (JSON that ends early) after its last complete event and close the event array
    and the object around it, in place; returns how many bytes were cut. Each candidate end (a
    ``}`` from the end backwards) is tried by decoding the top level with the array closed there.
    TraceError when no complete event is found near the end."""
    start = _NON_SPACE.search(data)
    if start is None:
        raise TraceError(path, "empty file")
    bare = data[start.start()] == 0x5B
    closing, decoder = (b"]", BARE_LIST_DECODER) if bare else (b"]}", TOP_DECODER)
    size = len(data)
    floor = max(0, size - _CUT_SEARCH_BYTES)
    tail = bytes(data[floor:])
    hi = size
    for _ in range(_CUT_ATTEMPTS):
        end = data.rfind(b"}", floor, hi)
        if end < 0:
            break
        del data[end + 1:]
        data += closing
        try:
            decoded = decoder.decode(data)
            if decoded if bare else decoded.traceEvents:
                return size - (end + 1)
        except (msgspec.MsgspecError, RecursionError):
            pass
        del data[end + 1:]
        data += tail[end + 1 - floor:]
        hi = end
    raise TraceError(path, "truncated JSON, and no complete event found before the cut")


_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def first_byte(data: Buffer) -> bytes | None:
    """The first byte of ``data`` that is not white space, or None when there is none."""
    match = _NON_SPACE.search(data)
    return None if match is None else bytes(data[match.start():match.start() + 1])


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


# Events in the array are separated by "}" "," "{" with optional white space: Kineto writes one event
# per line ("},\n  {"), tools that re-save traces write them minified ("},{"). A match may also lie
# inside a string or between objects nested in an event: each guess is checked by decoding (below).
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SEPARATOR = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
#: Files at least this big whose array cannot be found by a guess are decoded once with the array as
#: one ``Raw`` value (a validating pass: ~0.8 s per GB) to find its bounds, so that they too decode
#: in chunks (and in shares); smaller ones take the exact path at once.
EXACT_BOUNDS_MIN_BYTES = 64 << 20

_ArrayOnly = msgspec.defstruct("ArrayOnly", [("traceEvents", msgspec.Raw, EMPTY_RAW)])
_ARRAY_DECODER = msgspec.json.Decoder(_ArrayOnly)

#: (top-level metadata, chunk spans, first byte of the event array, its last byte).
Plan = tuple[TopLevel, Spans, int, int]


def plan_spans(data: Buffer, first: bytes) -> Plan | None:
    """Plan chunks of the event array without a pass over every event, whatever the layout
    (Kineto's one event per line, minified, a bare ``[…]`` array), or None: then the exact path
    (:func:`decode_top` + :func:`raw_chunks`) decodes the file and words any error.

    The array is found by a guess (the ``"traceEvents": [`` key and the last ``]``, checked by
    decoding the metadata with the array cut out) or, for a big file where the guess fails, by one
    validating decode with the array as a ``Raw`` value. Chunks of about :data:`CHUNK_BYTES` end at
    a separator found by searching forward from each target offset (never a Python loop over the
    bytes). A separator inside a string or inside an event is caught by the decode: the span
    before it cannot decode (its string or its object would not close), and the first span starts
    at the array's own bracket, so when every span decodes every cut was between two events.
    """
    bounds = array_bounds(data, first)
    if bounds is None:
        return None
    top, start, end = bounds
    return top, chunk_spans(data, start, end), start, end


def chunk_spans(data: Buffer, lo: int, end: int, *, closed: bool = True) -> Spans:
    """Spans of about :data:`CHUNK_BYTES` from ``lo`` (the array's ``[`` or a separator's comma),
    each ending at a separator's comma. ``closed``: ``end`` is the array's ``]`` and ends the last
    span; otherwise ``data[:end]`` is a prefix of the array still being written, and the last span
    ends at the last separator found before ``end`` (no span when none is)."""
    spans: Spans = []
    while True:
        comma = separator_after(data, lo + CHUNK_BYTES, end)
        if comma is None:
            if closed:
                spans.append((lo, end))
            return spans
        spans.append((lo, comma))
        lo = comma  # the comma ends one span (as "]") and starts the next (as "[")


def separator_after(data: Buffer, at: int, end: int) -> int | None:
    """The comma of the first event separator lying wholly in ``data[at:end]``, or None."""
    m = _SEPARATOR.search(data, at, end)
    return None if m is None else data.find(b",", m.start() + 1, m.end())


def array_start_guess(data: Buffer, first: bytes) -> int | None:
    """Where the event array starts (its ``[``) by the same guess :func:`plan_spans` checks, for a
    prefix of the file whose end is not there yet; None when the prefix does not show it."""
    if first == b"[":
        return data.find(b"[")
    key = _EVENTS_KEY.search(data) if first == b"{" else None
    return None if key is None else key.end() - 1


def array_bounds(data: Buffer, first: bytes) -> tuple[TopLevel, int, int] | None:
    """(metadata, first byte, last byte) of the event array, or None (see :func:`plan_spans`)."""
    if first not in (b"[", b"{"):
        return None
    start = array_start_guess(data, first)
    end = data.rfind(b"]")
    if first == b"[":
        return (TopLevel(), start, end) if start < end else None  # type: ignore[operator]
    if start is not None and end > start + 1 and closes_objects(data, end):
        top = _metadata(data, start, end)
        if top is not None:
            return top, start, end
    if len(data) < EXACT_BOUNDS_MIN_BYTES:
        return None
    bounds = _exact_bounds(data)
    if bounds is None:
        return None
    top = _metadata(data, *bounds)
    return None if top is None else (top, *bounds)


def _exact_bounds(data: Buffer) -> tuple[int, int] | None:
    """(first byte, last byte) of the event array found by one validating decode, or None."""
    try:
        raw = _ARRAY_DECODER.decode(data).traceEvents
    except (msgspec.MsgspecError, RecursionError):
        return None
    if not raw:
        return None
    address, length = _address(raw)
    base, size = _address(data)
    start = address - base
    end = start + length - 1
    if not (0 <= start < end < size) or data[start] != 0x5B or data[end] != 0x5D:  # [ ]
        return None
    return start, end


def event_array_bounds(data: Buffer) -> tuple[int, int] | None:
    """(first byte, last byte) — its ``[`` and ``]`` — of the event array in a trace's text (a
    ``traceEvents`` object or a bare array), or None when the text is not that. Found by one
    validating decode, never by :func:`plan_spans`' guess: a guess is only checked there by
    decoding the events, and another array of objects after ``traceEvents`` (a ``deviceProperties``
    written last) would pass it. For writers that copy a trace's text and add events to it
    (``tracekit annotate``)."""
    found = _NON_SPACE.search(data)
    if found is None:
        return None
    if data[found.start()] == 0x5B:  # [: a bare array is the whole text
        try:
            msgspec.json.decode(data, type=msgspec.Raw)
        except (msgspec.MsgspecError, RecursionError):
            return None
        return found.start(), data.rfind(b"]")
    bounds = _exact_bounds(data)
    return bounds if bounds is not None and _metadata(data, *bounds) is not None else None


def closes_objects(data: Buffer, end: int) -> bool:
    """Whether the ``]`` at ``end`` can close an array of events: the last byte before it that is not
    white space is an event's ``}`` (or the ``[`` of an empty array). A later array of numbers or
    strings (old traces' trailing logs) fails here, before any event is decoded."""
    before = end - 1
    while before > 0 and data[before] in _WHITESPACE:
        before -= 1
    return data[before] in (0x7D, 0x5B)  # } [


_WHITESPACE = frozenset(b" \t\r\n")


def _metadata(data: Buffer, start: int, end: int) -> TopLevel | None:
    """The file's metadata decoded with ``data[start:end + 1]`` replaced by an empty array, or
    None when that is not a trace object whose ``traceEvents`` is that array."""
    return metadata_around(bytes(data[:start]), bytes(data[end + 1:]))


def metadata_around(before: bytes, after: bytes) -> TopLevel | None:
    """The metadata of a trace object whose text is ``before``, its event array, then ``after``
    (decoded with an empty array in between), or None when that is not a trace object whose
    ``traceEvents`` is that array."""
    try:
        top = TOP_DECODER.decode(before + b"[]" + after)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if top.traceEvents != []:
        return None
    top.traceEvents = None
    return top


def span_chunks(data: Buffer, spans: Spans) -> Chunks:
    """The chunks of ``spans`` (planned by :func:`plan_spans`), each with its last byte."""
    for lo, hi in spans:
        yield functools.partial(decode_span, data, lo, hi), hi
