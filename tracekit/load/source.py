"""Where an input's bytes come from: the one place that opens a trace, execution trace or
expectations file for reading.

Contract: :func:`check_input` refuses, with one line and before reading a byte, every input that
is not a regular file — a directory, a named pipe (which would wait forever for a writer), a
device such as ``/dev/zero`` (endless), a socket, a path the OS cannot take — except the explicit
stream forms ``-`` (standard input), ``/dev/stdin`` and ``/dev/fd/N`` (a shell's ``<(…)``), which
are read to their end. :func:`read_input` returns the input's text as one writable buffer: a
regular file memory-mapped copy-on-write (nothing copied up front, the file never written), a
stream read into memory; compressed data found by its magic bytes (never by suffix) is inflated
once (:mod:`tracekit.load.compressed`: gzip, bz2, xz; zstd where the standard library has it; the
rest refused by name). :func:`gzip_pieces` inflates a gzip file piece by piece instead, never
holding its text whole.

A big compressed trace is inflated into a file in shared memory (:mod:`tracekit.load.inflated`),
then mapped copy-on-write like a plain file: :attr:`Source.mapped` names that file, so the loader's
worker processes map it too, and :meth:`Source.release` removes it when the load ends.

Inflating and reading streams stop at a cap (:class:`~tracekit.load.read_options.ReadOptions`,
``--max-inflated-size``; by default a quarter of the memory this process can still have), so a
gzip bomb or an endless stream is one line, not an exhausted machine or an allocator abort. A
truncated or corrupt compressed stream is an error, unless ``partial`` is set: then the bytes that
inflated are kept and :attr:`Source.partial` says why they end early.

:class:`TraceSource` is a trace file to read again after its load: a writer that copies the text
through with events of its own added (``tracekit annotate``) opens it once more
(:meth:`TraceSource.open`) and gets the text split after its last event
(:class:`EventArrayText`), copied in pieces whose pages are given back as they go.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from tracekit.errors import TraceError
from tracekit.load import compressed, inflated, layout, read_options
from tracekit.load.layout import Buffer
from tracekit.load.read_options import ReadOptions

#: Bytes read from a stream per call.
_READ_STEP = 1 << 20
#: Bytes of a trace's text copied (and, for a mapped input, pages given back) at a time.
COPY_BYTES = 64 << 20


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
            inflated.remove_quietly(self.mapped)
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
    opts = read_options.options() if opts is None else opts
    text = os.fspath(path)
    kind = check_input(text, what)
    raw = _read_stream(text, opts.max_inflated_size) if kind == "stream" else _map_file(text)
    stored = len(raw)
    compression = compressed.compression_of(raw)
    if compression is None:
        return Source(raw, None, stored)
    try:
        data, partial, mapped = compressed.inflate(text, raw, compression, opts,
                                                   inflated.SPILL_MIN_BYTES if spill else None)
    finally:
        if isinstance(raw, mmap.mmap):
            raw.close()
    return Source(data, compression, stored, partial, mapped)


def inflated_size_hint(path: str | os.PathLike[str]) -> int | None:
    """The JSON size a gzip file says it inflates to (its last member's ISIZE: the size modulo
    2**32, RFC 1952), when that is at least the file's own size; None otherwise. Only a hint for
    planning work: a multi-member or > 4 GiB file says less than it holds."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device: never opened here
            return None
        with open(path, "rb") as fh:
            if compressed.compression_of(fh.read(8)) != "gzip":
                return None
            stored = fh.seek(0, os.SEEK_END)
            if stored < 18:  # a gzip header and trailer
                return None
            fh.seek(stored - 4)
            size = int.from_bytes(fh.read(4), "little")
    except OSError:
        return None
    return size if size >= stored else None


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
                raise TraceError(text, f"the stream passes {cap:,} bytes ({read_options.cap_hint()})")
    except OSError as err:
        raise TraceError(text, f"cannot read the stream ({err.strerror or err})") from None
    finally:
        if fd != 0:
            os.close(fd)


def gzip_pieces(path: str | os.PathLike[str], cap: int | None) -> Iterator[bytes]:
    """The JSON of the gzip file ``path``, inflated piece by piece and never held whole: every
    member of a concatenated file, zero padding after the last ignored, ISA-L where it imports.
    Raises :class:`~tracekit.load.compressed.NotStreamable` where :func:`read_input` would raise or keep a partial text
    (that read then words it), :class:`TraceError` for a path it cannot open. A caller that stops
    early closes the generator (its mapping of the file goes with it)."""
    raw = _map_file(os.fspath(path))
    try:
        with memoryview(raw) as view:
            yield from compressed.gzip_members(view, cap)
    finally:
        if isinstance(raw, mmap.mmap):
            _close_quietly(raw)


# --- reading a trace again, to copy it through -----------------------------------------------------


class TraceSource:
    """A trace file to read again once analysed (see the module docstring); ``path`` as given."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def __repr__(self) -> str:
        return f"TraceSource({self.path!r})"

    @property
    def is_stream(self) -> bool:
        """Whether the input is a stream (:func:`is_stream_path`): read once, it cannot be read again."""
        return is_stream_path(self.path)

    @contextmanager
    def open(self) -> Iterator[EventArrayText]:
        """The text, read as :func:`read_input` reads it (mapped; a compressed file inflated, a big one
        into shared memory) and split after its last event; :class:`TraceError` when its event array
        cannot be found. The mapping and any inflated copy go when the block ends."""
        src = read_input(self.path, spill=True)
        try:
            yield EventArrayText(self.path, src.data)
        finally:
            src.release()
            if isinstance(src.data, mmap.mmap):
                src.data.close()


class EventArrayText:
    """A trace's text in two parts, for a writer that adds events at the end of its event array:
    :meth:`copy_head` (up to and including its last event) and :meth:`copy_tail` (the white space
    and ``]`` that close the array, and every top-level key after it). Every byte is kept, and the
    original events keep their positions."""

    def __init__(self, path: str, data: Buffer) -> None:
        bounds = layout.event_array_bounds(data)
        if bounds is None:
            raise TraceError(path, "its traceEvents array cannot be found to add events to")
        start, end = bounds
        _give_back(data, 0, len(data))  # the validating pass read every page
        last = end - 1  # the cut goes after the last event, before the white space that closes the array
        while last > start and data[last] in b" \t\r\n":
            last -= 1
        self._data = data
        self._cut = last + 1
        #: Whether the array holds any event (an added event then needs a comma before it).
        self.has_events = last != start

    def copy_head(self, sink: IO[bytes]) -> None:
        """The text up to and including the last event (or the array's ``[``) to ``sink``."""
        _copy(self._data, 0, self._cut, sink)

    def copy_tail(self, sink: IO[bytes]) -> None:
        """The rest of the text, from the end of :meth:`copy_head`'s part, to ``sink``."""
        _copy(self._data, self._cut, len(self._data), sink)


def _copy(data: Buffer, lo: int, hi: int, sink: IO[bytes]) -> None:
    """``data[lo:hi]`` to ``sink`` in pieces, each given back once copied (:func:`_give_back`)."""
    with memoryview(data) as view:
        for pos in range(lo, hi, COPY_BYTES):
            stop = min(hi, pos + COPY_BYTES)
            sink.write(view[pos:stop])
            _give_back(data, pos, stop)


def _give_back(data: Buffer, lo: int, hi: int) -> None:
    """Drop the pages of ``data[lo:hi]`` from this process when ``data`` maps a file: they are only
    read, so the file (or its inflated copy) still holds them, and a 1 GB trace is never resident
    as a whole."""
    if not (isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED")) or hi <= lo:
        return
    page = lo - lo % mmap.PAGESIZE
    try:
        data.madvise(mmap.MADV_DONTNEED, page, hi - page)
    except (OSError, ValueError):  # pragma: no cover - an odd mapping: it stays resident
        pass


__all__ = ["EventArrayText", "Source", "TraceSource", "check_input", "close_in_background", "gzip_pieces",
           "inflated_size_hint", "is_stream_path", "read_input"]
