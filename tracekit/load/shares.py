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

A big gzip trace is not inflated whole at all: :mod:`tracekit.load.streamed` decodes it in two
processes as it inflates, with this module's worker output and join.

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
        frames, count = join_shares(joined)
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
        share_progress = None if progress is None else scaled_progress(
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
    return result, read_share(result)


def read_share(result: ShareResult) -> Frames:
    """The frames a worker wrote (:func:`write_share`), read back from their IPC files."""
    return {name: pl.read_ipc(file) for name, file in result[0].items()}


def join_shares(shares: list[tuple[Frames, int]]) -> tuple[Frames, int]:
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
    return write_share(*decoded, out_dir)


def write_share(builder: FrameBuilder, count: int, out_dir: str) -> ShareResult:
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


def scaled_progress(progress: Progress, fraction: float) -> Progress:
    """Progress of this process's share reported as progress of the whole (shares run in step)."""
    def report(done: int, total: int) -> None:
        progress(round(done / fraction), round(total / fraction))
    return report
