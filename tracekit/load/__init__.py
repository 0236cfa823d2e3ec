"""Load a trace file into a :class:`tracekit.trace.Trace`: Kineto / Chrome JSON, gzip, or Parquet.

Contract: :func:`open_trace` opens any input tracekit accepts — the format found by magic bytes,
never by suffix — optionally with a progress bar. :func:`load` reads a JSON (or gzip) trace once,
decodes it with msgspec into typed structs that name only the fields tracekit uses, and builds each
Polars frame once. It normalises the eras and vendors described in the project's KINETO notes:
2021 capitalised categories (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``, flow
``async``, lower-case ``external id``), integer-µs absolute timestamps, 3-decimal µs relative to
``baseTimeNanoseconds`` and the 2024 absolute 3-decimal form (converted exactly, through decimal),
string pids/tids, ROCm launch names and string ``bytes``, CPU-only traces and traces with no steps.
The package knows no analysis: nothing under it imports the report, the analyses, diff or render.

Anything that is not a readable trace raises :class:`tracekit.errors.TraceError` with one line naming
the file and the problem. The input file is only ever opened for reading.

The modules, in the order a load runs them (how it stays fast is measured in ``bench/load.py``):

- :mod:`~tracekit.load.layout`: the bytes (mapped, or gzip inflated once) and the chunks of events
  in them, planned from Kineto's layout or from a top-level decode, and decoded in place.
- :mod:`~tracekit.load.events`: the msgspec structs and decoders, strict and lenient.
- :mod:`~tracekit.load.frames`: events routed into columns, columns into Polars frames; metadata.
- :mod:`~tracekit.load.decode`: the loop from chunks to frames in this process.
- :mod:`~tracekit.load.shares`: the same loop in shares, one spawned process per core.
- :mod:`~tracekit.load.parquet`: a trace's frames to and from one Parquet file.

The cyclic GC is paused while Python objects are being made (the structs are ``gc=False``; the lists
would only make it rescan), and restored afterwards.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tracekit.errors import TraceError
from tracekit.load import layout, shares
from tracekit.load.decode import decode_all, decode_spans
from tracekit.load.events import TopLevel
from tracekit.load.frames import steps, time_format, trace_meta
from tracekit.load.layout import read_bytes
from tracekit.load.parquet import is_parquet, load_parquet
from tracekit.trace import Trace

__all__ = ["TraceError", "is_parquet", "load", "load_parquet", "open_trace", "read_bytes"]

_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def load(path: str | os.PathLike[str], *, progress: Callable[[int, int], None] | None = None,
         workers: int | None = 1) -> Trace:
    """Load the JSON or gzip trace at ``path``.

    ``progress``, when given, is called as ``progress(events_done, events_total)`` after each chunk.
    ``workers``: processes that decode a big plain-JSON file in Kineto's layout (see
    :mod:`tracekit.load.shares`); None picks one per core, as many as the file's size warrants.
    The default, 1, keeps everything in this process: worker processes are *spawned*, which
    imports the caller's main module again, and only a program written for that (the ``tracekit``
    command, a script with an ``if __name__ == "__main__":`` guard) should ask for them.
    Raises :class:`TraceError` for a missing, empty, non-JSON, truncated or non-Kineto file.
    """
    p = Path(path)
    data = layout.read_bytes(p)
    size = len(data)
    match = _NON_SPACE.search(data)
    if match is None:
        raise TraceError(p, "empty file" if size == 0 else "empty file (only whitespace)")
    first = bytes(data[match.start():match.start() + 1])
    del match  # a match keeps the whole buffer alive
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        top: TopLevel | None = None
        plan = layout.kineto_layout(data) if first == b"{" else None
        if plan is not None:
            top, spans, events_lo, events_hi = plan
            try:
                count = shares.share_count(workers, data, spans)
                extent = (events_lo, events_hi)
                frames, fmt, total = (
                    shares.decode_in_shares(p, data, spans, count, progress, extent)
                    if count > 1 else decode_spans(p, data, spans, progress, extent))
            except TraceError:
                top = None  # the layout guess was wrong somewhere: take the exact path instead
            del spans
        if top is None:
            top = layout.decode_top(p, data, first)
            raws = top.traceEvents
            assert raws is not None
            top.traceEvents = None
            builder, total = decode_all(p, layout.raw_chunks(data, raws), progress, total=len(raws))
            del raws
            frames = builder.finish()
            fmt = time_format(frames, builder.times.fractional)
            del builder
        del data
    finally:
        if gc_was_enabled:
            gc.enable()
    meta = trace_meta(p, size, top, frames, fmt, total)
    return Trace(meta=meta, steps=steps(frames["ops"]), **frames)


#: A load that takes longer than this shows a progress bar (quick loads stay silent).
PROGRESS_AFTER_S = 1.0


def open_trace(path: str | os.PathLike[str], *, show_progress: bool = False,
               workers: int | None = 1) -> Trace:
    """Load ``path`` (Kineto JSON, gzip, or tracekit Parquet); ``workers`` as in :func:`load` (the
    commands pass None: one process per core for a big trace). With ``show_progress`` a rich
    progress bar goes to stderr, only when stderr is a terminal and only once the load has taken
    over :data:`PROGRESS_AFTER_S` seconds."""
    if is_parquet(path):
        return load_parquet(path)
    if not (show_progress and sys.stderr.isatty()):
        return load(path, workers=workers)
    callback, finish = _progress_bar(os.path.basename(os.fspath(path)))
    try:
        return load(path, progress=callback, workers=workers)
    finally:
        finish()


def _progress_bar(label: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A callback that starts a rich progress bar on stderr once loading passes one second."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    started = time.monotonic()
    state: dict[str, object] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if time.monotonic() - started < PROGRESS_AFTER_S:
                return
            bar = Progress(TextColumn(f"loading {label}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                           TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"] = bar
            state["task"] = bar.add_task("load", total=total)
        bar = state["bar"]
        bar.update(state["task"], completed=done, total=total)  # type: ignore[attr-defined]

    def finish() -> None:
        if "bar" in state:
            state["bar"].stop()  # type: ignore[attr-defined]

    return update, finish
