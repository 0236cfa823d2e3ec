"""Decode a big trace in shares, one process per core: the loader's answer to a 1 GB trace.

Contract: :func:`decode_in_shares` takes the memory-mapped file and the chunk spans that
:func:`tracekit.load.layout.plan_spans` planned, splits the spans into ``shares`` contiguous runs
of about equal bytes, decodes the first run in this process and each other run in a spawned process
(:func:`tracekit.parallel.spawn_pool`), and returns the same frames (in (ts, idx) order), time
format and event count as the one-process path (:func:`tracekit.load.decode.decode_spans`) — the
tests compare the two frame by frame.

Why processes: the per-event work (msgspec decode, routing fields into columns) holds the GIL, so
threads would take turns. Each worker maps the file itself (the kernel shares the pages; for a
compressed trace, the inflated copy :mod:`tracekit.load.source` wrote to shared memory), writes its
frames as Arrow IPC files into a private temporary directory (in ``/dev/shm`` where there is one
with room, so they never touch a disk) and a thread of this process reads them back as soon as they
are written, often while this process still decodes its own share; event indices are local to a
share and shifted when the shares are joined, then every frame is sorted once.

A big gzip trace need not wait for its inflating to end: :class:`EarlyShare` hands the inflated copy
to a worker as it grows, and the worker decodes its share's events as they inflate while this
process inflates the rest (see its docstring).

A worker that fails for a reason other than the trace (no space for its files, killed) makes the
load fall back to one process; a :class:`~tracekit.errors.TraceError` in a share is raised as the
one-process path would (the caller then takes the exact path, which also words the error).
"""

from __future__ import annotations

import functools
import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import polars as pl

from tracekit import parallel
from tracekit.errors import TraceError
from tracekit.load import events, layout
from tracekit.load.decode import Decoded, Progress, decode_all, decode_spans
from tracekit.load.frames import FrameBuilder, LoadCounts, sort_frames, time_format
from tracekit.load.layout import Spans

#: Each process gets at least this many bytes of events: below it, starting a process (an
#: interpreter and Polars, about half a second) costs more than its share saves.
SHARE_MIN_BYTES = 128 * 1024 * 1024
#: Never more processes than this, whatever the core count.
MAX_SHARES = 8


def share_count(workers: int | None, data: object, spans: Spans) -> int:
    """How many shares to decode ``spans`` in: 1 unless the trace is a mapped file (a plain file, or
    a compressed trace inflated into a file in shared memory; not bytes in this process's memory,
    which a worker cannot see) with enough bytes per share;
    ``workers`` (when given) replaces the core count and the size rule."""
    if not isinstance(data, mmap.mmap) or len(spans) < 2:
        return 1
    if workers is not None:
        return max(1, min(workers, len(spans)))
    extent = spans[-1][1] - spans[0][0]
    return max(1, min(parallel.cores(), MAX_SHARES, extent // SHARE_MIN_BYTES, len(spans)))


#: The first share (decoded in this process) is this much larger than each worker's: a worker
#: first starts an interpreter and imports Polars, and last writes its frames out (measured on a
#: 1 GB trace: with equal shares this process waited 0.6 s of its 5 s for the worker).
FIRST_SHARE_WEIGHT = 1.15


def split(spans: Spans, shares: int) -> list[Spans]:
    """``spans`` cut into ``shares`` contiguous runs of about equal bytes, the first
    :data:`FIRST_SHARE_WEIGHT` times the others (runs that would be empty are left out)."""
    total = max(spans[-1][1] - spans[0][0], 1)
    start = spans[0][0]
    # Where run k ends, as a fraction of the bytes.
    ends = [(FIRST_SHARE_WEIGHT + k) / (FIRST_SHARE_WEIGHT + shares - 1) for k in range(shares)]
    runs: list[Spans] = [[] for _ in range(shares)]
    k = 0
    for lo, hi in spans:
        while k < shares - 1 and (lo - start) / total >= ends[k]:
            k += 1
        runs[k].append((lo, hi))
    return [run for run in runs if run]


Frames = dict[str, pl.DataFrame]
#: What a worker returns: (frame name -> IPC file, event count, times had decimals, left out).
ShareResult = tuple[dict[str, str], int, bool, LoadCounts]


def decode_in_shares(path: Path, data: mmap.mmap, spans: Spans, shares: int, progress: Progress | None,
                     extent: tuple[int, int], mapped: str | None = None,
                     decoded_all: Callable[[], None] | None = None) -> Decoded:
    """(frames, time format, event count, what was left out) of the events in ``spans`` (see the
    module docstring). ``path`` names the trace in errors; ``mapped`` is the file the workers map
    (``data``'s file: an inflated gzip trace's copy in shared memory), ``path`` itself when None.
    ``decoded_all`` is called once every share is decoded, before they are joined: nothing reads
    ``data`` after it (the caller may free an inflated copy then)."""
    runs = split(spans, shares)
    if len(runs) < 2:
        return decode_spans(path, data, spans, progress, extent)
    # The one-process path decides the time form from the first chunk; every share must agree.
    first, _ = events.decode_chunk(path, functools.partial(layout.decode_span, data, *runs[0][0]), 0)
    exact = events.needs_exact_times(first)
    del first
    worker_bytes = sum(run[-1][1] - run[0][0] for run in runs[1:])
    # The frames of the workers' events take less room than their JSON: the check is generous.
    scratch = tempfile.mkdtemp(prefix="tracekit-load-", dir=parallel.shared_memory_dir(worker_bytes))
    try:
        try:
            frames, count, fractional, counts, others = _run_shares(path, data, runs, exact, scratch,
                                                                    progress, extent, mapped or str(path))
        except TraceError:
            raise
        except Exception:  # a worker could not run or write its share: do it all here
            return decode_spans(path, data, spans, progress, extent, exact_times=exact)
        if decoded_all is not None:
            decoded_all()
        joined = [(frames, count)]
        for (_, n, share_fractional, share_counts), share in others:
            counts.add(share_counts)
            fractional = fractional or share_fractional
            joined.append((share, n))
        frames, count = _join(joined)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if progress is not None:
        progress(count, count)
    return frames, time_format(frames, fractional), count, counts


def _run_shares(path: Path, data: mmap.mmap, runs: list[Spans], exact: bool, scratch: str,
                progress: Progress | None, extent: tuple[int, int],
                mapped: str) -> tuple[Frames, int, bool, LoadCounts, list[tuple[ShareResult, Frames]]]:
    """Decode ``runs[0]`` here while spawned workers decode the others; returns this share's frames
    (event order), its event count, decimals flag and left-out counts, and the workers' results with
    their frames (read as each is written: :func:`_read_as_written`), in run order."""
    with parallel.spawn_pool_unwaited(len(runs) - 1) as pool, parallel.threads_unwaited(1) as reader:
        futures = [pool.submit(_decode_share, str(path), mapped, run, exact, os.path.join(scratch, str(k)))
                   for k, run in enumerate(runs[1:], start=1)]
        read = [reader.submit(_read_as_written, future) for future in futures]
        mine = (extent[0], runs[0][-1][1])
        share_progress = None if progress is None else _scaled(
            progress, (mine[1] - mine[0]) / max(extent[1] - extent[0], 1))
        builder, count = decode_all(path, layout.span_chunks(data, runs[0]), share_progress,
                                    total=None, extent=mine, exact_times=exact)
        frames = builder.finish(sort=False)
        fractional, counts = builder.times.fractional, builder.counts
        del builder
        return frames, count, fractional, counts, [r.result() for r in read]


def _read_as_written(future: Future[ShareResult]) -> tuple[ShareResult, Frames]:
    """In a thread of this process: a worker's result once it has written its share, and the frames
    of it read back from their IPC files. A worker often ends before this process has decoded its
    own share: the read (a fifth of a second for half of the 1 GB benchmark trace) then runs on the
    core the worker gave up, off the load's path (Polars reads without holding the GIL)."""
    result = future.result()
    return result, {name: pl.read_ipc(file) for name, file in result[0].items()}


def _join(shares: list[tuple[Frames, int]]) -> tuple[Frames, int]:
    """The shares' frames (each in event order, indices from 0; given in file order) joined, indices
    shifted past the shares before, in (ts, idx) order; returns (frames, total event count)."""
    parts: dict[str, list[pl.DataFrame]] = {}
    count = 0
    for frames, n in shares:
        for name, part in frames.items():
            if count and "idx" in part.columns:
                part = part.with_columns(pl.col("idx") + pl.lit(count, pl.UInt32))
            parts.setdefault(name, []).append(part)
        count += n
    joined = {name: pl.concat(p, rechunk=False) if len(p) > 1 else p[0] for name, p in parts.items()}
    del parts
    return sort_frames(joined), count  # the sort copies out of the mapped files


def _decode_share(path: str, mapped: str, spans: Spans, exact: bool, out_dir: str) -> ShareResult:
    """In a worker: decode ``spans`` of the file ``mapped`` (the trace named ``path``) and write each
    frame (event order, indices from 0) to ``out_dir``; returns (frame files, event count, times had
    decimals, left out)."""
    import gc

    gc.disable()  # as in the one-process path: the structs and lists would only make it rescan
    with open(mapped, "rb") as fh:
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        decoded = decode_all(Path(path), layout.span_chunks(data, spans), None, total=None, exact_times=exact)
    finally:
        data.close()
    return _write_share(*decoded, out_dir)


def _write_share(builder: FrameBuilder, count: int, out_dir: str) -> ShareResult:
    """A worker's decoded share written as one Arrow IPC file per frame into ``out_dir`` (made here:
    ``mkdir``, not ``makedirs``, so a share whose load was given up — its scratch directory already
    removed — writes nothing)."""
    frames = builder.finish(sort=False)
    fractional, counts = builder.times.fractional, builder.counts
    del builder
    os.mkdir(out_dir)
    files = {}
    for name, frame in frames.items():
        files[name] = os.path.join(out_dir, f"{name}.arrow")
        frame.write_ipc(files[name], compression="uncompressed")
    return files, count, fractional, counts


def _scaled(progress: Progress, fraction: float) -> Progress:
    """Progress of this process's share reported as progress of the whole (shares run in step)."""
    def report(done: int, total: int) -> None:
        progress(round(done / fraction), round(total / fraction))
    return report


# --- a compressed trace: its first share decoded while the rest inflates ---------------------------

#: A gzip trace is decoded while it inflates when it says it inflates to at least this much: the
#: worker's share is then worth more than the worker's start.
EARLY_MIN_BYTES = 2 * SHARE_MIN_BYTES
#: The worker's share of such a trace, as a fraction of its JSON. The worker decodes the first
#: ``f`` of the events as they inflate, from when it has started (``S`` s: an interpreter and
#: Polars), while this process inflates the whole file (``I`` s) and then decodes the rest (``D`` s
#: for the whole file in one process): both end together when ``S + f * D = I + (1 - f) * D``, i.e.
#: ``f = (I + D - S) / (2 * D)``. Measured on the 1 GB benchmark trace (I ≈ 1.0 s with ISA-L while
#: the worker runs, D ≈ 7 s, S ≈ 0.5 s) that is about 0.54; 0.50 measured best (this process still
#: waits about 0.2 s: the worker also writes its frames out, which this process reads back).
EARLY_FRACTION = 0.50
#: The copy in shared memory is handed to the worker once it holds this much: enough to find the
#: event array and decide the time form from its first chunk.
EARLY_HAND_OVER_BYTES = 4 * 1024 * 1024
#: How long a worker waits before it looks again at a copy that has no new events for it yet.
_POLL_S = 0.002
#: What the signal file says when the load gave the early share up.
_ABANDON = b"abandon"


class _Abandoned(Exception):
    """In a worker: the load that handed it the growing copy gave the early share up (or ended)."""


class EarlyShare:
    """The first share of a gzip trace, decoded by a worker while this process inflates the rest.

    Made before the input is read (:func:`early_share`): the worker process starts at once, so its
    start overlaps the inflating. :meth:`spilled` is :func:`tracekit.load.source.read_input`'s
    ``on_spilled`` callback. Once the inflated copy in shared memory holds
    :data:`EARLY_HAND_OVER_BYTES`, the worker is handed the copy, where the event array starts (as
    :func:`tracekit.load.layout.plan_spans` guesses it) and the target (:data:`EARLY_FRACTION` of the
    JSON the gzip trailer announces): it decodes the events as they inflate, in chunks ending at
    separators before the target (:func:`_growing_chunks`). Once the copy holds the first separator
    after the target, this process writes that cut to a signal file in the share's scratch directory;
    the worker decodes up to it and ends. :meth:`finish` decodes the rest here and joins both, or
    returns None when the early share cannot be used — none was started, the input was damaged or
    left shared memory, the array is not where the guess put it, no separator follows the target
    inside it, or a share failed: the caller then loads the inflated trace as usual (which words any
    error). :meth:`close` tells a worker still waiting that the share is given up, lets it end, and
    removes its files.
    """

    def __init__(self, path: Path, expected_bytes: int) -> None:
        self.path = path
        self.target = int(expected_bytes * EARLY_FRACTION)
        self.pool = parallel.spawn_pool(1)
        self.pool.submit(_warm_up)  # the worker starts now, not when its share is ready
        self.future: Future[ShareResult] | None = None
        self.scratch: str | None = None
        self.file: str | None = None
        self.start = self.cut = 0
        self.exact = False
        self.given_up = False

    def spilled(self, file: str, size: int) -> None:
        """The inflated copy ``file`` now holds ``size`` bytes (never raises)."""
        if self.given_up or (self.future is None and size < EARLY_HAND_OVER_BYTES) or self.cut:
            return
        try:
            if self.future is None:
                self.given_up = not self._hand_over(file, size)  # one try
            elif size > self.target and file == self.file:
                with open(file, "rb") as fh, mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) as data:
                    cut = layout.separator_after(data, max(self.target, self.start + 1), size)
                if cut is not None:
                    self._signal(str(cut).encode())
                    self.cut = cut
        except Exception:  # planning must never break the read: the load then goes the usual way
            self.given_up = True

    def _hand_over(self, file: str, size: int) -> bool:
        """Find the event array in ``file``'s first ``size`` bytes and hand the growing copy to the
        worker; False when the prefix shows no event array or not even one chunk of events."""
        with open(file, "rb") as fh:
            data = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY)
        try:
            first = layout.first_byte(data)
            start = layout.array_start_guess(data, first) if first is not None else None
            if start is None or start < 0:
                return False
            spans = layout.chunk_spans(data, start, size, closed=False)
            if not spans:
                return False
            chunk, _ = events.decode_chunk(self.path, functools.partial(layout.decode_span, data, *spans[0]), 0)
            exact = events.needs_exact_times(chunk)
            del chunk
        finally:
            data.close()
        self.scratch = tempfile.mkdtemp(prefix="tracekit-load-", dir=parallel.shared_memory_dir(self.target))
        self.future = self.pool.submit(_decode_growing, str(self.path), file, start, self.target, exact,
                                       os.path.join(self.scratch, "cut"), os.path.join(self.scratch, "0"))
        self.file, self.start, self.exact = file, start, exact
        return True

    def _signal(self, text: bytes) -> None:
        """Tell the worker the cut (or :data:`_ABANDON`): a file replaced whole, never read half-written."""
        assert self.scratch is not None
        signal = os.path.join(self.scratch, "cut")
        with open(signal + ".tmp", "wb") as fh:
            fh.write(text)
        os.replace(signal + ".tmp", signal)

    def finish(self, data: layout.Buffer, mapped: str | None, first: bytes, progress: Progress | None,
               decoded_all: Callable[[], None] | None = None) -> tuple[events.TopLevel, Decoded] | None:
        """(the trace's metadata, (frames, time format, event count, left out)) of the whole
        inflated ``data`` (mapped from ``mapped``), or None (see the class docstring). Once only.
        ``decoded_all`` as in :func:`decode_in_shares` (not called when this returns None)."""
        future, self.future = self.future, None
        if future is None or self.given_up or mapped != self.file or not isinstance(data, mmap.mmap):
            return None
        bounds = layout.array_bounds(data, first)
        if bounds is None or bounds[1] != self.start:
            return None
        top, _, end = bounds
        if not self.cut:  # the copy ended before it showed a separator after the target
            cut = layout.separator_after(data, max(self.target, self.start + 1), end)
            if cut is None:
                return None
            self._signal(str(cut).encode())
            self.cut = cut
        if not self.cut < end:
            return None
        rest = layout.chunk_spans(data, self.cut, end)
        share_progress = None if progress is None else _scaled(
            progress, (end - self.cut) / max(end - self.start, 1))
        with parallel.threads_unwaited(1) as reader:
            read = reader.submit(_read_as_written, future)
            try:
                builder, count = decode_all(self.path, layout.span_chunks(data, rest), share_progress,
                                            total=None, extent=(self.cut, end), exact_times=self.exact)
                result, share = read.result()
            except Exception:  # a TraceError, or a worker that could not run: the usual path words it
                return None
        mine = builder.finish(sort=False)
        counts, fractional = builder.counts, builder.times.fractional or result[2]
        del builder
        if decoded_all is not None:
            decoded_all()
        counts.add(result[3])
        frames, total = _join([(share, result[1]), (mine, count)])
        if progress is not None:
            progress(total, total)
        return top, (frames, time_format(frames, fractional), total, counts)

    def close(self) -> None:
        """Tell a worker still decoding that its share is given up, let it end (not waited for) and
        remove its files."""
        if self.scratch is not None:
            try:
                self._signal(_ABANDON)
            except OSError:
                pass
        self.pool.shutdown(wait=False, cancel_futures=True)  # its ending is off the load's path
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _decode_growing(path: str, mapped: str, start: int, target: int, exact: bool, signal: str,
                    out_dir: str) -> ShareResult:
    """In a worker: decode the events of the inflated copy ``mapped`` (still being written) from the
    array's ``[`` at ``start`` up to the cut the load writes to ``signal`` (see :class:`EarlyShare`)
    and write the frames as :func:`_decode_share` does. Raises :class:`_Abandoned` when told to stop
    or when the process that started it is gone."""
    import gc

    gc.disable()
    with open(mapped, "rb") as fh:
        decoded = decode_all(Path(path), _growing_chunks(fh.fileno(), start, target, signal), None,
                             total=None, exact_times=exact)
    if _read_signal(signal) is None:  # given up while the last chunk decoded: write nothing
        raise _Abandoned
    return _write_share(*decoded, out_dir)


def _growing_chunks(fd: int, start: int, target: int, signal: str) -> layout.Chunks:
    """Chunks of the events in the file ``fd`` as it grows: spans ending at separators before
    ``target`` while no cut is known, then the last span up to the cut; waits (polling every
    :data:`_POLL_S`) while the file holds no further span. The file is mapped again as it grows;
    spans already handed out keep their own mapping alive."""
    parent = os.getppid()
    data: mmap.mmap | None = None
    pos = start
    while True:
        cut = _read_signal(signal)
        if cut is None:
            raise _Abandoned
        size = os.fstat(fd).st_size
        limit = min(size, target) if cut < 0 else cut
        spans: Spans = []
        if limit > pos:
            if data is None or len(data) <= limit:
                data = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)
            spans = layout.chunk_spans(data, pos, limit, closed=cut >= 0)
        for lo, hi in spans:
            yield functools.partial(layout.decode_span, data, lo, hi), hi
        if spans:
            pos = spans[-1][1]
        if cut >= 0 and pos >= cut:
            return
        if not spans:
            if os.getppid() != parent:
                raise _Abandoned
            time.sleep(_POLL_S)


def _read_signal(signal: str) -> int | None:
    """The cut the load wrote to ``signal``: -1 while there is none yet, None once it gave up (or
    removed the scratch directory the signal lives in)."""
    try:
        with open(signal, "rb") as fh:
            text = fh.read()
    except FileNotFoundError:
        return -1 if os.path.isdir(os.path.dirname(signal)) else None
    return None if text == _ABANDON else int(text)


def early_share(path: str | os.PathLike[str], workers: int | None,
                max_inflated: int | None) -> EarlyShare | None:
    """An :class:`EarlyShare` for the input ``path`` when it pays: a gzip file that says it inflates
    to at least :data:`EARLY_MIN_BYTES` (and no more than the cap ``max_inflated``), ``workers``
    allowing two processes (None: two cores), and shared memory with room for it; else None."""
    from tracekit.load import source

    if source.is_stream_path(path) or (workers is not None and workers < 2) or \
            (workers is None and parallel.cores() < 2):
        return None
    expected = source.inflated_size_hint(path)
    if expected is None or expected < EARLY_MIN_BYTES or (max_inflated is not None and expected > max_inflated):
        return None
    if parallel.shared_memory_dir(2 * expected) is None:
        return None
    return EarlyShare(Path(os.fspath(path)), expected)


def _warm_up() -> None:
    """In a worker: nothing (importing this module, which the task needs anyway, is the point)."""
