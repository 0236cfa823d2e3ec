"""Where an input's bytes come from: the one place that opens a trace, execution trace or
expectations file for reading.

Contract: :func:`check_input` refuses, with one line and before reading a byte, every input that
is not a regular file — a directory, a named pipe (which would wait forever for a writer), a
device such as ``/dev/zero`` (endless), a socket, a path the OS cannot take — except the explicit
stream forms ``-`` (standard input), ``/dev/stdin`` and ``/dev/fd/N`` (a shell's ``<(…)``), which
are read to their end. :func:`read_input` returns the input's text as one writable buffer: a
regular file memory-mapped copy-on-write (nothing copied up front, the file never written), a
stream read into memory; compressed data found by its magic bytes (never by suffix) is inflated
once — gzip (every member of a concatenated file), bz2 and xz with the standard library; zstd
(only where the standard library has it), lz4, zip, 7z and tar are refused by name.

A big compressed trace is inflated (gzip with ISA-L where ``isal`` imports, else zlib) into a file
in shared memory (``/dev/shm`` while it has room, else this process's memory), then mapped
copy-on-write like a plain file: :attr:`Source.mapped` names that file, so the loader's worker
processes map it too, and :meth:`Source.release` removes it when the load ends. ISA-L reads only
clean members: a member it cannot read to its end is inflated again with zlib, which words the
problem and salvages what comes before damage.

Inflating and reading streams stop at a cap (:class:`ReadOptions`, ``--max-inflated-size``; by
default a quarter of the memory this process can still have, see :func:`default_max_inflated`), so
a gzip bomb is one line, not an exhausted machine or an allocator abort. A truncated or corrupt
compressed stream is an error, unless ``partial`` is set: then the bytes that inflated are kept
and :attr:`Source.partial` says why they end early.

The options travel to worker processes (diff's two profiles, ``report DIR``'s ranks) through the
environment (:data:`MAX_INFLATED_ENV`, :data:`PARTIAL_ENV`), set by :func:`configure`.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import re
import resource
import stat
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tracekit import parallel
from tracekit.errors import TraceError

try:  # ISA-L's inflater: the 1 GB benchmark trace's gzip in 0.64 s, zlib's 4.7 s (bench/readers.py)
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - isal is a dependency; zlib does the same work slower
    _fast_zlib = None

Buffer = bytearray | mmap.mmap

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
#: Bytes read from a stream per call.
_READ_STEP = 1 << 20

MAX_INFLATED_ENV = "TRACEKIT_MAX_INFLATED_SIZE"
PARTIAL_ENV = "TRACEKIT_PARTIAL"
#: The smallest default cap, whatever the memory says (small traces always load).
MIN_DEFAULT_CAP = 64 << 20


@dataclass(frozen=True)
class ReadOptions:
    """``max_inflated_size``: most bytes of JSON a compressed input or a stream may give (None: no
    cap); ``partial``: keep what a truncated or corrupt input gave instead of refusing it."""

    max_inflated_size: int | None
    partial: bool = False


@dataclass
class Source:
    """An input's JSON text: ``data``, the ``compression`` it was read through (None, ``"gzip"``,
    ``"bz2"``, ``"xz"``, ``"zstd"``), its size on disk or in the stream (``stored_size``), and
    ``partial``: None, or why the data ends before the input's own end."""

    data: Buffer
    compression: str | None
    stored_size: int
    partial: str | None = None
    #: The file ``data`` maps, for processes that map it too: None for a plain file (its own path
    #: then) and for bytes in memory; for an inflated trace, its copy in shared memory.
    mapped: str | None = None

    def release(self) -> None:
        """Remove the inflated copy in shared memory, if any (the mapping stays valid while used)."""
        if self.mapped is not None:
            _unlink(self.mapped)
            self.mapped = None

    def give_back_copy(self) -> None:
        """Free an inflated copy in shared memory now: remove it and unmap ``data`` (nothing may
        read ``data`` afterwards; a read raises ValueError). A load calls it once every event is
        decoded, before joining and sorting the frames: the gigabyte of pages it frees is then
        reused by that work instead of fresh pages, which cost this kind of machine more than
        freeing these (see ``bench/RESULTS.md``). No-op for a plain file or bytes in memory, and
        for a mapping something still exports (then freed with its last user, as before)."""
        if self.mapped is None:
            return
        self.release()
        if isinstance(self.data, mmap.mmap):
            _close_quietly(self.data)


def close_in_background(data: Buffer) -> None:
    """Unmap ``data`` (when it is a mapping) in a daemon thread: once a load holds its frames,
    nothing reads the text again, and giving back the pages of a 1 GB inflated copy (removed by
    :meth:`Source.release`) takes a quarter of a second the caller need not wait for (``munmap``
    runs without the GIL). A mapping something still exports is left to the garbage collector."""
    if isinstance(data, mmap.mmap):
        threading.Thread(target=_close_quietly, args=(data,), name="tracekit-unmap", daemon=True).start()


def _close_quietly(data: mmap.mmap) -> None:
    try:
        data.close()
    except (BufferError, ValueError):  # still exported: it goes with its last user
        pass


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """``"8G"``, ``"500MiB"``, ``"1048576"`` -> bytes (binary units); ``"0"`` or ``"none"`` -> None
    (no cap). ValueError for anything else."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (e.g. 8G, 500M, 1048576)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    return value or None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the least of the machine's available memory, the
    cgroup's remaining limit and the address-space limit less what is mapped (None: unknown)."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError):
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, AttributeError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            found.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        found.append(max(soft - _mapped_bytes(), 0))
    return min(found) if found else None


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def default_max_inflated() -> int:
    """A quarter of :func:`available_memory` (the load holds the JSON and about twice as much in
    structs and frames), at least :data:`MIN_DEFAULT_CAP`; 16 GiB when memory is unknown."""
    available = available_memory()
    if available is None:
        return 16 << 30
    return max(available // 4, MIN_DEFAULT_CAP)


def configure(*, max_inflated_size: str | None = None, partial: bool = False) -> None:
    """Set the read options of this process and of the workers it starts (through the
    environment). ``max_inflated_size`` as :func:`parse_size` reads it; ValueError if malformed."""
    if max_inflated_size is not None:
        parse_size(max_inflated_size)
        os.environ[MAX_INFLATED_ENV] = max_inflated_size
    if partial:
        os.environ[PARTIAL_ENV] = "1"


def options() -> ReadOptions:
    """The read options in force: from :func:`configure` (the environment), else the defaults."""
    text = os.environ.get(MAX_INFLATED_ENV)
    try:
        cap = parse_size(text) if text else default_max_inflated()
    except ValueError:
        cap = default_max_inflated()
    return ReadOptions(max_inflated_size=cap, partial=os.environ.get(PARTIAL_ENV, "") not in ("", "0"))


# --- what an input is ---------------------------------------------------------------------------


def is_stream_path(path: str | os.PathLike[str]) -> bool:
    """``-``, ``/dev/stdin`` or a ``/dev/fd/N`` / ``/proc/self/fd/N`` path: read as a stream."""
    text = os.fspath(path)
    return (text in ("-", "/dev/stdin") or text.startswith(("/dev/fd/", "/proc/self/fd/")))


def check_input(path: str | os.PathLike[str], what: str = "trace") -> str:
    """``"file"`` for a regular file, ``"stream"`` for an explicit stream (see the module
    docstring); anything else raises :class:`TraceError` with one line, before any read."""
    text = os.fspath(path)
    if text == "-":
        st = _fstat(0, text)
    else:
        try:
            st = os.stat(text)
        except FileNotFoundError:
            raise TraceError(text, "no such file") from None
        except OSError as err:
            raise TraceError(text, _os_problem(err)) from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "stream" if text == "-" else "file"  # standard input is read, whatever it holds
    if stat.S_ISDIR(mode):
        raise TraceError(text, f"is a directory, not a {what} file")
    stream = is_stream_path(text)
    if stream and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return "stream"
    if stream and stat.S_ISCHR(mode) and os.isatty(0) and text in ("-", "/dev/stdin"):
        raise TraceError(text, f"standard input is a terminal: pipe a {what} into it or name a file")
    kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    if text == "-":
        raise TraceError(text, f"standard input is {kind}: pipe a {what} into it or name a file")
    hint = " (to read a stream, pipe it into '-')" if stat.S_ISFIFO(mode) else ""
    raise TraceError(text, f"is {kind}, not a regular {what} file{hint}")


def _fstat(fd: int, text: str) -> os.stat_result:
    try:
        return os.fstat(fd)
    except OSError as err:
        raise TraceError(text, f"cannot read standard input ({err.strerror or err})") from None


def _os_problem(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "path too long for the operating system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if err.errno == errno.ENOTDIR:
        return "a part of the path is not a directory"
    return f"cannot read ({err.strerror or err})"


# --- reading --------------------------------------------------------------------------------------


def read_input(path: str | os.PathLike[str], *, what: str = "trace",
               opts: ReadOptions | None = None, spill: bool = False) -> Source:
    """The text of ``path`` (see the module docstring); TraceError with one line otherwise.
    ``spill``: a big inflated input goes to a file in shared memory (:attr:`Source.mapped`; the
    caller then calls :meth:`Source.release`), else it stays in this process's memory."""
    opts = options() if opts is None else opts
    text = os.fspath(path)
    kind = check_input(text, what)
    raw = _read_stream(text, opts.max_inflated_size) if kind == "stream" else _map_file(text)
    stored = len(raw)
    compression = compression_of(raw)
    if compression is None:
        return Source(raw, None, stored)
    if compression in ("gzip", "bz2", "xz") or (compression == "zstd" and _zstd() is not None):
        out = _Output(SPILL_MIN_BYTES if spill else None)
        try:
            partial = _inflate(text, raw, compression, opts, out)
            data, mapped = out.finish()
        except BaseException:
            out.discard()
            raise
        finally:
            if isinstance(raw, mmap.mmap):
                raw.close()
        return Source(data, compression, stored, partial, mapped)
    raise TraceError(text, _REFUSED[compression])


def inflated_size_hint(path: str | os.PathLike[str]) -> int | None:
    """The JSON size a gzip file says it inflates to (its last member's ISIZE: the size modulo
    2**32, RFC 1952), when that is at least the file's own size; None otherwise. Only a hint for
    planning work: a multi-member or > 4 GiB file says less than it holds."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device: never opened here
            return None
        with open(path, "rb") as fh:
            if compression_of(fh.read(8)) != "gzip":
                return None
            stored = fh.seek(0, os.SEEK_END)
            if stored < 18:  # a gzip header and trailer
                return None
            fh.seek(stored - 4)
            size = int.from_bytes(fh.read(4), "little")
    except OSError:
        return None
    return size if size >= stored else None


def compression_of(head: Buffer | bytes) -> str | None:
    """The compressed form ``head`` starts with (:data:`_MAGIC`, or a tar header), or None."""
    first = bytes(head[:8])
    for magic, name in _MAGIC:
        if first.startswith(magic):
            return name
    if len(head) > 262 and bytes(head[257:262]) == b"ustar":
        return "tar"
    return None


def _map_file(text: str) -> Buffer:
    try:
        with open(text, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced since the check
                raise TraceError(text, "is not a regular file")
            if os.fstat(fh.fileno()).st_size == 0:
                return bytearray()
            try:
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):  # an odd filesystem: read it
                return bytearray(fh.read())
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(text, "no such file") from None
    except OSError as err:
        raise TraceError(text, _os_problem(err)) from None


def _read_stream(text: str, cap: int | None) -> bytearray:
    """A pipe read to its end, refused once it passes ``cap`` bytes."""
    out = bytearray()
    try:
        fd = 0 if text == "-" else os.open(text, os.O_RDONLY)
    except OSError as err:
        raise TraceError(text, _os_problem(err)) from None
    try:
        while True:
            piece = os.read(fd, _READ_STEP)
            if not piece:
                return out
            out += piece
            if cap is not None and len(out) > cap:
                raise TraceError(text, f"the stream passes {cap:,} bytes ({_cap_hint()})")
    except OSError as err:
        raise TraceError(text, f"cannot read the stream ({err.strerror or err})") from None
    finally:
        if fd != 0:
            os.close(fd)


def _cap_hint() -> str:
    return "the limit --max-inflated-size sets; the default is a quarter of the free memory"


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


def _inflate(text: str, raw: Buffer, compression: str, opts: ReadOptions, out: _Output) -> str | None:
    """Every member (stream) of ``raw`` inflated onto ``out``, under the cap; returns None or, with
    ``opts.partial``, why what inflated ends early.

    In memory, growing a large bytearray is a ``realloc`` that Linux serves with ``mremap``: no copying, and
    the peak is the compressed input plus the JSON plus one piece. For gzip the input is fed 1 MiB
    at a time (bounding the *output* with ``max_length`` would copy the unconsumed input on every
    call: 1.6x slower at 64 MiB pieces, 30x at 256 KiB), in smaller pieces near the cap; bz2 and
    xz can inflate far more per byte, so their output is bounded with ``max_length``. Trailing
    zero bytes after the last member (padding) are ignored; other trailing bytes are an error.
    """
    _reuse_inflate_buffers()
    with memoryview(raw) as view:
        problem, fatal = _inflate_members(view, compression, opts.max_inflated_size, out)
    if fatal:
        raise TraceError(text, problem)
    if problem is None or opts.partial:
        return problem
    raise TraceError(text, f"{problem} (--partial reports the events read)")


def _inflate_members(view: memoryview, compression: str, cap: int | None,
                     out: _Output) -> tuple[str | None, bool]:
    """(problem or None, whether the problem is fatal even with --partial), the JSON onto ``out``;
    see :func:`_inflate`. Raises nothing, so no traceback keeps a view of the mapped file alive."""
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
                    f"decompression bomb ({_cap_hint()})"), True
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
    data). The one rule of both the whole read and :func:`gzip_pieces`."""
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


def _member(view: memoryview, pos: int, compression: str, cap: int | None, out: _Output,
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


def _salvage(view: memoryview, pos: int, compression: str, cap: int | None, out: _Output) -> None:
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

#: Compressed bytes fed to the inflater per call by :func:`gzip_pieces`: about 3.5 MB out at a
#: trace's usual 14:1, still in the CPU cache when the caller copies it on (the 1 GB benchmark
#: trace inflated into discarded pieces: 0.39 s at 256 KiB, 0.55 s at 64 KiB, 0.42 s at 1 MiB).
_PIECE_STEP = 1 << 18


class NotStreamable(Exception):
    """:func:`gzip_pieces` met what the whole read words (damage, a stream cut short, data after
    the last member, more than the cap): the caller reads the input the usual way instead."""


def gzip_pieces(path: str | os.PathLike[str], cap: int | None) -> Iterator[bytes]:
    """The JSON of the gzip file ``path``, inflated piece by piece and never held whole: every
    member of a concatenated file, zero padding after the last ignored, ISA-L where it imports.
    Raises :class:`NotStreamable` where :func:`read_input` would raise or keep a partial text
    (that read then words it), :class:`TraceError` for a path it cannot open. A caller that stops
    early closes the generator (its mapping of the file goes with it)."""
    _reuse_inflate_buffers()
    raw = _map_file(os.fspath(path))
    try:
        with memoryview(raw) as view:
            yield from _gzip_members(view, cap)
    finally:
        if isinstance(raw, mmap.mmap):
            _close_quietly(raw)


def _gzip_members(view: memoryview, cap: int | None) -> Iterator[bytes]:
    """:func:`gzip_pieces` of the compressed bytes ``view``."""
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


#: An inflated input passing this many bytes moves to a file in shared memory (when asked for):
#: below it no worker process would decode a share of it anyway.
SPILL_MIN_BYTES = 64 << 20
#: What a file write fails with when the file system is full (or the file too big for it).
_NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class _Output:
    """Where inflated bytes go: this process's memory, moved to a file in shared memory once past
    ``spill_at`` bytes when that is not None (and ``/dev/shm`` has room for twice as much), then
    written there piece by piece. A write that finds shared memory full brings the bytes back into
    memory and goes on there. :meth:`finish` returns (the buffer, the file it maps or None)."""

    def __init__(self, spill_at: int | None) -> None:
        self.memory: bytearray | None = bytearray()
        self.spill_at = spill_at
        self.fd: int | None = None
        self.path: str | None = None
        self.size = 0

    def __len__(self) -> int:
        return self.size if self.memory is None else len(self.memory)

    def __iadd__(self, piece: bytes) -> _Output:
        if self.memory is not None:
            self.memory += piece
            if self.spill_at is not None and len(self.memory) >= self.spill_at:
                self._spill()
        elif not self._write(piece):
            self._back_to_memory()
            self.memory += piece  # type: ignore[operator]
        return self

    def __delitem__(self, key: slice) -> None:
        """``del out[mark:]``: cut back to ``mark`` bytes (the only deletion the inflater makes)."""
        if self.memory is not None:
            del self.memory[key]
        elif key.start < self.size:
            os.ftruncate(self.fd, key.start)  # type: ignore[arg-type]
            os.lseek(self.fd, key.start, os.SEEK_SET)  # type: ignore[arg-type]
            self.size = key.start

    def _spill(self) -> None:
        self.spill_at = None  # one try
        where = parallel.shared_memory_dir(2 * len(self.memory))  # type: ignore[arg-type]
        if where is None:
            return
        try:
            self.fd, self.path = tempfile.mkstemp(prefix="tracekit-inflated-", suffix=".json", dir=where)
        except OSError:
            return
        memory, self.memory = self.memory, None
        if not self._write(memory):  # type: ignore[arg-type]
            self.memory = memory
            self.discard()

    def _write(self, piece: bytes | bytearray) -> bool:
        """Append ``piece`` to the file; False when the file system has no room (the file then
        holds the bytes before it)."""
        with memoryview(piece) as view:
            done = 0
            try:
                while done < len(view):
                    done += os.write(self.fd, view[done:])  # type: ignore[arg-type]
            except OSError as err:
                if err.errno not in _NO_ROOM:
                    raise
                return False
        self.size += done
        return True

    def _back_to_memory(self) -> None:
        memory = bytearray(self.size)
        with open(self.path, "rb") as fh:  # type: ignore[arg-type]
            fh.readinto(memory)
        self.discard()
        self.memory = memory

    def finish(self) -> tuple[Buffer, str | None]:
        """The inflated bytes, and the shared-memory file they map (None: in memory)."""
        if self.memory is not None:
            return self.memory, None
        if self.size == 0:
            self.discard()
            return bytearray(), None
        try:
            data = mmap.mmap(self.fd, 0, access=mmap.ACCESS_COPY)  # type: ignore[arg-type]
        finally:
            os.close(self.fd)  # type: ignore[arg-type]
            self.fd = None
        return data, self.path

    def discard(self) -> None:
        """Close and remove the shared-memory file, if any."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.path is not None:
            _unlink(self.path)
            self.path = None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _one_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0]


__all__ = ["Buffer", "NotStreamable", "ReadOptions", "Source", "check_input", "compression_of", "configure",
           "default_max_inflated", "gzip_pieces", "is_stream_path", "options", "parse_size", "read_input"]
