"""A big gzip trace decoded as it inflates, in two processes, its JSON never held whole.

Contract: :func:`start` returns a :class:`StreamedLoad` for a gzip input where it pays (see there),
else None. :meth:`StreamedLoad.decode` returns (metadata, (frames, time format, event count, left
out), JSON size) — the same as the usual load of the same file gives (the tests compare them frame by
frame) — or None when this way cannot take the input: anything odd, from a damaged stream to a guess
that does not hold. The caller then loads the input the usual way (:mod:`tracekit.load.source`, then
:mod:`tracekit.load.shares`), which words any problem; nothing here raises for a bad input.

How. Gzip cannot be inflated from its middle, so both processes inflate it from its start. A worker
(spawned at once, so its start overlaps this process's first steps) inflates the file and decodes
the events from the array's ``[`` up to the *cut*: the comma of the first event separator at or
after :data:`EARLY_FRACTION` of the JSON size the gzip trailer announces. Meanwhile this process
inflates up to the cut without decoding (ISA-L: about a quarter of a second for half of the 1 GB
benchmark trace) and decodes from the cut to the array's ``]``. Each reads the JSON through a window
of a few MB that moves forward (:class:`InflatedText`): no copy of the whole text is written,
mapped, faulted in or freed (for the 1 GB benchmark trace, a copy in shared memory took 262,000
fresh pages at 3-4 us each on the benchmark machine, written, read by both processes and freed:
alternating runs of the report, 3.8-6.5 s of system CPU with the copy, 2.9-3.1 s without).

Where only one process may decode (``workers=1``, the Python API's default, or one core), this
process decodes every event the same way as the text inflates, with no worker and no cut.

The cut is a function of the text alone (the leftmost separator that starts at or after the
target), so both processes find the same one without talking; the worker returns the one it found
and this process checks it. The checks are those of :func:`tracekit.load.layout.plan_spans`: the
array's start by the same guess, its end at the text's last ``]``, the metadata decoded with the
array cut out, every chunk decoded.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from tracekit import parallel
from tracekit.load import events, layout, source
from tracekit.load.decode import Decoded, Progress, decode_all
from tracekit.load.events import TopLevel
from tracekit.load.frames import time_format
from tracekit.load.shares import (SHARE_MIN_BYTES, Frames, ShareResult, join_shares, read_share,
                                  scaled_progress, write_share)

#: A gzip trace is decoded this way when its trailer says it inflates to at least this much: the
#: worker's share is then worth more than the worker's start.
STREAM_MIN_BYTES = 2 * SHARE_MIN_BYTES
#: The worker's share, as a fraction of the JSON. The worker starts (``S`` s: an interpreter and
#: Polars), then inflates and decodes the first ``f`` of the text; this process inflates up to the
#: cut and decodes the rest, then reads the worker's frames back. With ``D`` s to decode the whole
#: text in one process and ``I`` s to inflate it, both end together when
#: ``S + f * (I + D) = f * I + (1 - f) * (D + I)``; the worker also writes its frames out, which
#: this process reads back. Report of the 1 GB benchmark trace, 4 alternating runs each: medians
#: 7.9 s at 0.44 and 0.46, 7.8 s at 0.47, 7.85-7.95 s at 0.50, 8.2 s at 0.54.
EARLY_FRACTION = 0.47
#: Bytes of JSON a window holds beyond what it carries over (the bytes after the last whole chunk).
WINDOW_BYTES = 8 << 20
#: The array's ``[`` is looked for in at most this many bytes of the text's start.
HEAD_MAX_BYTES = 64 << 20
#: The worker looks whether its load still wants it every this many pieces (about 50 MB of JSON).
_CHECK_EVERY = 16


class _Unusable(Exception):
    """This way cannot take the input (see the module docstring)."""


class _Abandoned(Exception):
    """In a worker: the load that started it gave its share up, or ended."""


class InflatedText:
    """A gzip trace's JSON seen through a window that moves forward.

    ``window`` holds the text from offset ``base`` to ``end``. :meth:`more` makes a new window that
    keeps the text from an offset on and adds at least :data:`WINDOW_BYTES`, or twice what it kept
    (an event bigger than a window still fits, at linear cost), or all that is left. A window is
    never resized once made: decoded events keep views of it (msgspec ``Raw``) until the frame
    builder copies them.
    """

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces
        self.window = bytearray()
        self.base = 0
        self.ended = False

    @property
    def end(self) -> int:
        return self.base + len(self.window)

    def more(self, keep_from: int) -> bool:
        """Move the window to start at ``keep_from`` (``base <= keep_from <= end``) and add text;
        False when the stream had ended and nothing was added."""
        if self.ended:
            return False
        with memoryview(self.window) as view:
            window = bytearray(view[keep_from - self.base:])
        want = len(window) + max(WINDOW_BYTES, len(window))
        added = False
        while len(window) < want:
            piece = next(self.pieces, None)
            if piece is None:
                self.ended = True
                break
            window += piece
            added = True
        self.window, self.base = window, keep_from
        return added

    def close(self) -> None:
        self.pieces.close()  # type: ignore[attr-defined]


def _spans(text: InflatedText, lo: int, at: int | None) -> Iterator[tuple[bytearray, int, int]]:
    """Chunks (window, first byte, last byte: window positions) of the events from ``lo`` (the
    array's ``[`` or a separator's comma, an offset in the text) as the text inflates, each ending
    at a separator's comma. With ``at`` (``lo < at``), the chunks end at the first separator that
    starts at or after ``at``; its comma ends the last one. Without, they go on while the text
    does; the bytes after the last chunk stay in ``text.window`` (from ``text.base`` on)."""
    while True:
        window, base = text.window, text.base
        if lo < text.end:
            limit = len(window)
            if at is not None and at < text.end:
                cut = layout.separator_after(window, at - base, len(window))
                if cut is not None:
                    for first, last in layout.chunk_spans(window, lo - base, cut):
                        yield window, first, last
                    return
                limit = at - base  # chunks of what lies wholly before ``at``
            spans = layout.chunk_spans(window, lo - base, limit, closed=False)
            for first, last in spans:
                yield window, first, last
            if spans:
                lo = base + spans[-1][1]
        if not text.more(min(lo, text.end)):
            if at is not None:
                raise _Unusable("the text ends before the cut")
            return


def find_cut(text: InflatedText, at: int) -> int:
    """The comma of the first event separator that starts at or after ``at`` (the text from
    ``text.base`` on; windows before ``at`` are dropped unread)."""
    while True:
        if at < text.end:
            cut = layout.separator_after(text.window, max(at - text.base, 0), len(text.window))
            if cut is not None:
                return text.base + cut
        if not text.more(min(max(at, text.base), text.end)):
            raise _Unusable("the text ends before the cut")


def _chunks(spans: Iterator[tuple[bytearray, int, int]], text: InflatedText) -> layout.Chunks:
    """:data:`~tracekit.load.layout.Chunks` of ``spans`` (read through ``text``), each with its last
    byte's offset in the text (the window's offset is ``text.base`` while the chunk is handed out)."""
    for window, first, last in spans:
        yield functools.partial(layout.decode_span, window, first, last), text.base + last


class StreamedLoad:
    """A gzip trace being decoded in two processes as it inflates (see the module docstring).

    Made before anything is read (:func:`start`), so the worker process starts at once. Use it as a
    context manager: leaving tells a worker still running that its share is given up and removes
    its files (its ending is not waited for).
    """

    def __init__(self, path: Path, expected_bytes: int, cap: int | None, *, shared: bool = True) -> None:
        self.path, self.expected, self.cap = path, expected_bytes, cap
        self.target = int(expected_bytes * EARLY_FRACTION)
        self.pool: ProcessPoolExecutor | None = None
        self.scratch: str | None = None
        if not shared:  # one process: this one decodes every event as the text inflates
            return
        self.scratch = tempfile.mkdtemp(prefix="tracekit-load-", dir=parallel.shared_memory_dir(self.target))
        try:
            self.pool = parallel.spawn_pool(1)
            self.pool.submit(_warm_up)  # the worker starts now, not when its share is known
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    def __enter__(self) -> StreamedLoad:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def decode(self, progress: Progress | None) -> tuple[TopLevel, Decoded, int] | None:
        """(metadata, decoded, JSON size) of the trace, or None (see the module docstring)."""
        text = InflatedText(source.gzip_pieces(self.path, self.cap))
        try:
            return self._decode(text, progress)
        except Exception:  # _Unusable, NotStreamable, a TraceError of an event, a failed worker
            return None
        finally:
            text.close()

    def _decode(self, text: InflatedText, progress: Progress | None) -> tuple[TopLevel, Decoded, int]:
        first, start, exact = _head(self.path, text)
        head = bytes(text.window[:start - text.base])
        if self.pool is None or self.scratch is None:
            return self._decode_alone(text, progress, first, start, exact, head)
        at = max(self.target, start + 1)
        future = self.pool.submit(_decode_worker_share, str(self.path), self.cap, start, at, exact,
                                  os.path.join(self.scratch, "0"))
        with parallel.threads_unwaited(1) as reader:
            read = reader.submit(_read_as_written, future)
            cut = find_cut(text, at)
            closing: list[TopLevel] = []
            share_progress = None if progress is None else scaled_progress(
                progress, (self.expected - cut) / max(self.expected - start, 1))
            builder, count = decode_all(self.path, _chunks(_to_the_end(text, cut, first, head, closing), text),
                                        share_progress, total=None, extent=(cut, self.expected),
                                        exact_times=exact)
            (result, worker_cut), share = read.result()
        if worker_cut != cut:
            raise _Unusable("the worker cut elsewhere")
        mine = builder.finish(sort=False)
        counts, fractional = builder.counts, builder.times.fractional or result[2]
        del builder
        counts.add(result[3])
        frames, total = join_shares([(share, result[1]), (mine, count)])
        if progress is not None:
            progress(total, total)
        return closing[0], (frames, time_format(frames, fractional), total, counts), text.end


    def _decode_alone(self, text: InflatedText, progress: Progress | None, first: bytes, start: int,
                      exact: bool, head: bytes) -> tuple[TopLevel, Decoded, int]:
        """Every event decoded in this process as the text inflates (no worker)."""
        closing: list[TopLevel] = []
        builder, count = decode_all(self.path, _chunks(_to_the_end(text, start, first, head, closing), text),
                                    progress, total=None, extent=(start, self.expected), exact_times=exact)
        frames = builder.finish()
        if progress is not None:
            progress(count, count)
        return closing[0], (frames, time_format(frames, builder.times.fractional), count, builder.counts), text.end


def _head(path: Path, text: InflatedText) -> tuple[bytes, int, bool]:
    """(the text's first byte, where the event array starts, whether times need the exact path),
    from the text's start, as :func:`tracekit.load.layout.plan_spans` and the shares decide them."""
    while True:  # the window grows from the text's start until it shows the array's start
        if text.end > HEAD_MAX_BYTES or not text.more(0):
            raise _Unusable("no event array at the start")
        first = layout.first_byte(text.window)
        start = None if first is None else layout.array_start_guess(text.window, first)
        if first is not None and start is not None and start >= 0:
            break
    while not (spans := layout.chunk_spans(text.window, start, len(text.window), closed=False)):
        if not text.more(0):
            raise _Unusable("not one chunk of events")
    chunk, _ = events.decode_chunk(path, functools.partial(layout.decode_span, text.window, *spans[0]), 0)
    return first, start, events.needs_exact_times(chunk)


def _to_the_end(text: InflatedText, lo: int, first: bytes, head: bytes,
                closing: list[TopLevel]) -> Iterator[tuple[bytearray, int, int]]:
    """The spans from ``lo`` to the event array's end, which is the text's last ``]``, checked as
    :func:`tracekit.load.layout.array_bounds` checks it; the metadata goes to ``closing``."""
    for span in _spans(text, lo, None):
        yield span
        lo = text.base + span[2]
    window, base = text.window, text.base
    end = window.rfind(b"]", lo - base)
    if end <= lo - base:
        raise _Unusable("no end of the event array")
    if first == b"{":
        if not layout.closes_objects(window, end):
            raise _Unusable("the last ] closes no events")
        top = layout.metadata_around(head, bytes(window[end + 1:]))
        if top is None:
            raise _Unusable("the metadata around the array is not a trace's")
    else:
        top = TopLevel()
    closing.append(top)
    for first_byte, last_byte in layout.chunk_spans(window, lo - base, end):
        yield window, first_byte, last_byte


def _read_as_written(future: Future[tuple[ShareResult, int]]) -> tuple[tuple[ShareResult, int], Frames]:
    """In a thread: the worker's result (its share and its cut) and its frames, read once written."""
    result = future.result()
    return result, read_share(result[0])


def _decode_worker_share(path: str, cap: int | None, start: int, at: int, exact: bool,
                         out_dir: str) -> tuple[ShareResult, int]:
    """In the worker: inflate the gzip file ``path``, decode its events from ``start`` to the cut
    (the first separator at or after ``at``) and write the frames into ``out_dir`` as the shares'
    workers do; returns that result and the cut's offset. Raises :class:`_Abandoned` once the
    scratch directory is gone or the process that started it has ended."""
    import gc

    gc.disable()  # as in the one-process path: the structs and lists would only make it rescan
    text = InflatedText(_while_wanted(source.gzip_pieces(path, cap), os.path.dirname(out_dir)))
    last: list[int] = []  # the last chunk's end: the cut, once every chunk is decoded

    def chunks() -> layout.Chunks:
        for decode, end in _chunks(_spans(text, start, at), text):
            last[:] = [end]
            yield decode, end
    try:
        decoded = decode_all(Path(path), chunks(), None, total=None, exact_times=exact)
    finally:
        text.close()
    return write_share(*decoded, out_dir), last[0]


def _while_wanted(pieces: Iterator[bytes], scratch: str) -> Iterator[bytes]:
    """``pieces``, stopped with :class:`_Abandoned` once ``scratch`` is gone or this process's
    parent has ended (looked at every :data:`_CHECK_EVERY` pieces)."""
    parent = os.getppid()
    try:
        for n, piece in enumerate(pieces):
            if n % _CHECK_EVERY == 0 and (os.getppid() != parent or not os.path.isdir(scratch)):
                raise _Abandoned
            yield piece
    finally:
        pieces.close()  # type: ignore[attr-defined]


def start(path: str | os.PathLike[str], workers: int | None, cap: int | None) -> StreamedLoad | None:
    """A :class:`StreamedLoad` of ``path`` when it pays: a gzip file (not a stream) that says it
    inflates to at least :data:`STREAM_MIN_BYTES` and no more than the cap; else None. It decodes in
    two processes when ``workers`` allows two (None: two cores), else in this one alone (then what
    it saves is the inflated copy in shared memory: a gigabyte for the 1 GB benchmark trace)."""
    if source.is_stream_path(path):
        return None
    expected = source.inflated_size_hint(path)
    if expected is None or expected < STREAM_MIN_BYTES or (cap is not None and expected > cap):
        return None
    shared = workers >= 2 if workers is not None else parallel.cores() >= 2
    try:
        return StreamedLoad(Path(os.fspath(path)), expected, cap, shared=shared)
    except Exception:  # no room for a scratch directory, no process pool here: the usual way
        return None


def _warm_up() -> None:
    """In a worker: nothing (importing this module, which the task needs anyway, is the point)."""
