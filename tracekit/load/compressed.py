"""Compressed inputs: which form an input's bytes are in (by their magic bytes, never by suffix), and
their JSON inflated under a cap.

Contract: :func:`compression_of` names the form an input starts with. :func:`inflate` inflates a
whole input once — gzip (every member of a concatenated file), bz2 and xz with the standard library;
zstd only where the standard library has it — onto an
:class:`~tracekit.load.inflated.InflatedOutput` (memory, or a file in shared memory for a big
input), and refuses lz4, zip, 7z and tar by name; :func:`gzip_members` inflates gzip piece by piece
for a caller that never holds the text whole (:func:`tracekit.load.source.gzip_pieces`).

gzip is inflated with ISA-L where ``isal`` imports, else zlib. ISA-L reads only clean members: a
member it cannot read to its end is inflated again with zlib, which words the problem and salvages
what comes before damage.

Inflating stops at the cap (:class:`~tracekit.load.read_options.ReadOptions`), so a gzip bomb is one
line, not an exhausted machine or an allocator abort. A truncated or corrupt compressed stream is an
error, unless ``partial`` is set: then the bytes that inflated are kept, with why they end early.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from tracekit.errors import TraceError
from tracekit.load.inflated import InflatedOutput
from tracekit.load.layout import Buffer
from tracekit.load.read_options import ReadOptions, cap_hint

try:  # ISA-L's inflater: the 1 GB benchmark trace's gzip in 0.64 s, zlib's 4.7 s (bench/readers.py)
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - isal is a dependency; zlib does the same work slower
    _fast_zlib = None

GZIP_MAGIC = b"\x1f\x8b"
#: Compressed forms recognised by their first bytes: magic -> name.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (GZIP_MAGIC, "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"), (b"PK\x03\x04", "zip"), (b"7z\xbc\xaf\x27\x1c", "7z"),
)
#: Forms recognised and refused, with what to do instead.
_REFUSED = {
    "zstd": "zstd-compressed: decompress it first (zstd -d FILE); this Python has no zstd module",
    "lz4": "lz4-compressed: decompress it first (lz4 -d FILE)",
    "zip": "a zip archive: extract the trace from it first",
    "7z": "a 7z archive: extract the trace from it first",
    "tar": "a tar archive: extract the trace from it first",
}


#: Compressed bytes fed to the inflater per call (its output: about 2 MB at a trace's usual 14:1).
_INFLATE_STEP = 1 << 20
#: Deflate never inflates one byte into more than 1032 (RFC 1951's longest match per bit pair):
#: near the cap, pieces shrink so that one call cannot overshoot it by much.
_DEFLATE_MAX_RATIO = 1032
_MIN_STEP = 4096


def compression_of(head: Buffer | bytes) -> str | None:
    """The compressed form ``head`` starts with (:data:`_MAGIC`, or a tar header), or None."""
    first = bytes(head[:8])
    for magic, name in _MAGIC:
        if first.startswith(magic):
            return name
    if len(head) > 262 and bytes(head[257:262]) == b"ustar":
        return "tar"
    return None


def can_inflate(compression: str) -> bool:
    """Whether :func:`inflate` inflates ``compression`` here (the rest is refused by name)."""
    return compression in ("gzip", "bz2", "xz") or (compression == "zstd" and _zstd() is not None)


def inflate(text: str, raw: Buffer, compression: str, opts: ReadOptions,
            spill_at: int | None) -> tuple[Buffer, str | None, str | None]:
    """Every member (stream) of ``raw``, compressed as ``compression``, inflated under the cap:
    (the JSON, None or — with ``opts.partial`` — why it ends early, the file in shared memory it
    maps or None; ``spill_at`` as :class:`~tracekit.load.inflated.InflatedOutput` takes it).
    :class:`TraceError` with one line, naming ``text``, for a form refused here, past the cap, or
    damaged (unless ``opts.partial``); nothing is left in shared memory then.

    In memory, growing a large bytearray is a ``realloc`` that Linux serves with ``mremap``: no copying, and
    the peak is the compressed input plus the JSON plus one piece. For gzip the input is fed 1 MiB
    at a time (bounding the *output* with ``max_length`` would copy the unconsumed input on every
    call: 1.6x slower at 64 MiB pieces, 30x at 256 KiB), in smaller pieces near the cap; bz2 and
    xz can inflate far more per byte, so their output is bounded with ``max_length``. Trailing
    zero bytes after the last member (padding) are ignored; other trailing bytes are an error.
    """
    if not can_inflate(compression):
        raise TraceError(text, _REFUSED[compression])
    out = InflatedOutput(spill_at)
    try:
        _reuse_inflate_buffers()
        with memoryview(raw) as view:
            problem, fatal = _inflate_members(view, compression, opts.max_inflated_size, out)
        if fatal:
            raise TraceError(text, problem)
        if problem is not None and not opts.partial:
            raise TraceError(text, f"{problem} (--partial reports the events read)")
        data, mapped = out.finish()
    except BaseException:
        out.discard()
        raise
    return data, problem, mapped


def _inflate_members(view: memoryview, compression: str, cap: int | None,
                     out: InflatedOutput) -> tuple[str | None, bool]:
    """(problem or None, whether the problem is fatal even with --partial), the JSON onto ``out``;
    see :func:`inflate`. Raises nothing, so no traceback keeps a view of the mapped file alive."""
    total = len(view)
    pos = 0
    fast = compression == "gzip" and _fast_zlib is not None
    while True:
        start, mark = pos, len(out)
        pos, inflater, error = _member(view, pos, compression, cap, out, fast)
        if fast and ((error is not None and error is not _BOMB) or not inflater.eof):
            # The fast inflater stopped short: zlib inflates the member again and words why.
            del out[mark:]
            pos, inflater, error = _member(view, start, compression, cap, out)
        if error is _BOMB:
            return (f"{compression} data inflates past {cap:,} bytes; refused as a possible "
                    f"decompression bomb ({cap_hint()})"), True
        if error is not None:
            # The call that met the damage returned nothing: inflate the member again in small
            # pieces to keep what comes before it (only a damaged input pays for this).
            del out[mark:]
            _salvage(view, start, compression, cap, out)
            return (f"corrupt {compression} data ({_one_line(error)}); {len(out):,} bytes of JSON "
                    f"inflate before the damage"), False
        if not inflater.eof:
            return (f"truncated {compression}: the stream ends early; its {total:,} bytes inflate "
                    f"to {len(out):,} bytes of incomplete JSON"), False
        if compression == "gzip":
            out += inflater.flush()
        pos -= len(inflater.unused_data)
        following = _after_member(view, pos, compression)
        if following is False:
            return None, False
        if following is None:
            return f"{total - pos:,} bytes of trailing data after the {compression} data", True


def _after_member(view: memoryview, pos: int, compression: str) -> bool | None:
    """What follows the member (stream) that ends at ``pos``: True another member of
    ``compression``, False the input's end (nothing, or zero padding), None other bytes (trailing
    data). The one rule of both the whole read and :func:`gzip_members`."""
    with view[pos:] as rest:
        if not rest or not any(rest):
            return False
        return True if compression_of(rest) == compression else None


#: :func:`_member`'s error when the cap is passed.
_BOMB = MemoryError("past the cap")
#: Bytes in and out per call when salvaging a damaged member.
_SALVAGE_STEP = 1 << 12


def _errors(compression: str) -> tuple[type[BaseException], ...]:
    """What an inflater of ``compression`` raises for damaged data."""
    if compression == "xz":
        import lzma

        return (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError)
    if compression == "gzip" and _fast_zlib is not None:
        return (zlib.error, _fast_zlib.error, OSError, EOFError, ValueError)
    return (zlib.error, OSError, EOFError, ValueError)


def _member(view: memoryview, pos: int, compression: str, cap: int | None, out: InflatedOutput,
            fast: bool = False) -> tuple[int, Any, BaseException | None]:
    """Inflate the member (stream) that starts at ``pos`` onto ``out``; returns (position after the
    bytes fed, the inflater, the error that stopped it or None)."""
    bounded = compression != "gzip"
    inflater: Any = _decompressor(compression, fast)()
    try:
        while not inflater.eof:
            room = None if cap is None else cap - len(out)
            step = _INFLATE_STEP
            if room is not None and not bounded:
                step = max(_MIN_STEP, min(step, room // _DEFLATE_MAX_RATIO))
            piece = view[pos:pos + step]
            if not piece and (not bounded or inflater.needs_input):
                break
            pos += len(piece)
            if bounded:
                out += inflater.decompress(piece, max_length=-1 if room is None else room + 1)
            else:
                out += inflater.decompress(piece)
            del piece
            if cap is not None and len(out) > cap:
                return pos, inflater, _BOMB
    except _errors(compression) as err:
        return pos, inflater, err.with_traceback(None)  # its frames would keep a view of the file
    return pos, inflater, None


def _salvage(view: memoryview, pos: int, compression: str, cap: int | None, out: InflatedOutput) -> None:
    """Inflate the damaged member at ``pos`` onto ``out`` again, at most :data:`_SALVAGE_STEP` bytes
    out per call, so that the call that meets the damage loses little (only a damaged input pays)."""
    inflater: Any = _decompressor(compression)()
    try:
        while not inflater.eof and pos < len(view) and (cap is None or len(out) <= cap):
            piece = bytes(view[pos:pos + _SALVAGE_STEP])
            pos += len(piece)
            if compression == "gzip":
                while piece:
                    out += inflater.decompress(piece, _SALVAGE_STEP)
                    piece = inflater.unconsumed_tail
            else:
                out += inflater.decompress(piece, max_length=_SALVAGE_STEP)
                while not inflater.needs_input and not inflater.eof:
                    out += inflater.decompress(b"", max_length=_SALVAGE_STEP)
    except _errors(compression):
        pass


# --- a gzip trace piece by piece ------------------------------------------------------------------

#: Compressed bytes fed to the inflater per call by :func:`gzip_members`: about 3.5 MB out at a
#: trace's usual 14:1, still in the CPU cache when the caller copies it on (the 1 GB benchmark
#: trace inflated into discarded pieces: 0.39 s at 256 KiB, 0.55 s at 64 KiB, 0.42 s at 1 MiB).
_PIECE_STEP = 1 << 18


class NotStreamable(Exception):
    """:func:`gzip_members` met what the whole read words (damage, a stream cut short, data after
    the last member, more than the cap): the caller reads the input the usual way instead."""


def gzip_members(view: memoryview, cap: int | None) -> Iterator[bytes]:
    """The JSON of the gzip bytes ``view``, inflated piece by piece (every member, zero padding after
    the last ignored, ISA-L where it imports); :class:`NotStreamable` where :func:`inflate` would
    raise or keep a partial text."""
    _reuse_inflate_buffers()
    errors = _errors("gzip")
    pos = total = 0
    while True:
        inflater: Any = _decompressor("gzip", fast=True)()
        while not inflater.eof:
            piece = view[pos:pos + _PIECE_STEP]
            if not piece:
                piece.release()
                raise NotStreamable("the gzip stream ends early")
            pos += len(piece)
            try:
                out = inflater.decompress(piece)
            except errors:
                raise NotStreamable("corrupt gzip data") from None
            finally:
                piece.release()  # no view of the file outlives the call
            total += len(out)
            if cap is not None and total > cap:
                raise NotStreamable("past the cap on inflated bytes")
            if out:
                yield out
        out = inflater.flush()
        if out:
            yield out
        pos -= len(inflater.unused_data)
        following = _after_member(view, pos, "gzip")
        if following is False:
            return
        if following is None:
            raise NotStreamable("data after the gzip stream")


# --- the inflaters -------------------------------------------------------------------------------


def _zstd():  # pragma: no cover - Python >= 3.14 only
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        return None
    return zstd


def _decompressor(compression: str, fast: bool = False) -> Callable[[], object]:
    if compression == "gzip" and fast and _fast_zlib is not None:
        return lambda: _fast_zlib.decompressobj(wbits=31)
    if compression == "gzip":
        return lambda: zlib.decompressobj(wbits=31)  # the gzip container; one member per object
    if compression == "bz2":
        import bz2

        return bz2.BZ2Decompressor
    if compression == "xz":
        import lzma

        return lzma.LZMADecompressor
    return _zstd().ZstdDecompressor  # type: ignore[union-attr]  # pragma: no cover


#: glibc ``mallopt`` parameters (malloc.h): M_TRIM_THRESHOLD and M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache  # once per process
def _reuse_inflate_buffers() -> None:
    """Make glibc's malloc reuse the buffer each inflate call returns (once per process).

    Each call returns its output as a new bytes object of a few MB that is freed once written out.
    glibc's default, dynamic thresholds serve such sizes with ``mmap`` or give the top of the heap
    back after the free, so every call's output landed on fresh pages: inflating the 1 GB
    benchmark trace took 263,000 page faults and 1.47 s (1.0 s of it system time). With fixed
    thresholds (blocks under 32 MB from the heap; up to 128 MB of free heap kept) the same memory
    serves every call: 20,000 faults, 0.87 s. Only this process's C heap is affected (Polars
    allocates with its own allocator); elsewhere than glibc nothing is done.
    """
    try:
        import ctypes
        import platform

        if platform.libc_ver()[0] != "glibc":
            return
        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError, ValueError):  # pragma: no cover - not glibc
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 128 << 20)


def _one_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0]


__all__ = ["GZIP_MAGIC", "NotStreamable", "can_inflate", "compression_of", "gzip_members", "inflate"]
