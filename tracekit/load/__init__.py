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
the file and the problem. The input file is only ever opened for reading. What a load leaves out is
counted in the trace's metadata, never dropped in silence (``TraceMeta.dropped_events``,
``unanalysed_activity``, ``partial``): events whose times are no times, entries that are not
events, device activity of kinds tracekit does not analyse, the tail of a truncated input read with
``--partial``. NaN and Infinity literals (not JSON, written by Python's json module) are read as
values of no use: a time that is NaN drops its event, any other field is missing.

The modules, in the order a load runs them (how it stays fast is measured in ``bench/load.py``):

- :mod:`~tracekit.load.source`: the input checked (a regular file or an explicit stream) and its
  bytes mapped, read or inflated under a cap (:mod:`~tracekit.load.read_options`): the form found
  by magic bytes and inflated by :mod:`~tracekit.load.compressed` (gzip, bz2, xz), a big input
  into shared memory (:mod:`~tracekit.load.inflated`).
- :mod:`~tracekit.load.layout`: the chunks of events in those bytes, planned from Kineto's layout
  or from a top-level decode, and decoded in place.
- :mod:`~tracekit.load.events`: the msgspec structs and decoders, strict and lenient.
- :mod:`~tracekit.load.frames`: events routed into columns, columns into Polars frames; metadata.
- :mod:`~tracekit.load.decode`: the loop from chunks to frames in this process.
- :mod:`~tracekit.load.shares`: the same loop in shares, one spawned process per core.
- :mod:`~tracekit.load.streamed`: a big gzip trace decoded in two processes as it inflates, its
  text never held whole (anything it cannot take goes the usual way: source, then shares).
- :mod:`~tracekit.load.parquet`: a trace's frames to and from one Parquet file.

The cyclic GC is paused while Python objects are being made (the structs are ``gc=False``; the lists
would only make it rescan), and restored afterwards.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from tracekit import progress as bars
from tracekit.errors import TraceError
from tracekit.load import layout, parquet, read_options, shares, source, streamed
from tracekit.load.decode import Decoded, decode_all, decode_spans
from tracekit.load.events import TopLevel
from tracekit.load.frames import steps, time_format, trace_meta
from tracekit.load.parquet import is_parquet, load_parquet
from tracekit.load.read_options import ReadOptions
from tracekit.trace import Trace

__all__ = ["ReadOptions", "TraceError", "is_parquet", "load", "load_parquet", "open_trace", "read_bytes", "read_document"]


def load(path: str | os.PathLike[str], *, progress: Callable[[int, int], None] | None = None,
         workers: int | None = 1, options: ReadOptions | None = None) -> Trace:
    """Load the JSON or compressed trace at ``path`` (``-``: standard input).

    ``progress``, when given, is called as ``progress(events_done, events_total)`` after each chunk.
    ``workers``: processes that decode a big trace (a plain file, or a compressed one inflated into
    shared memory; see :mod:`tracekit.load.shares`; a big gzip trace is decoded as it inflates, see
    :mod:`tracekit.load.streamed`); None picks one per core, as many as the trace's size warrants.
    The default, 1, keeps everything in this process: worker processes are *spawned*, which
    imports the caller's main module again, and only a program written for that (the ``tracekit``
    command, a script with an ``if __name__ == "__main__":`` guard) should ask for them.
    ``options``: the cap on inflated bytes and whether a truncated input is reported in part
    (:class:`tracekit.load.read_options.ReadOptions`; default :func:`tracekit.load.read_options.options`).
    Raises :class:`TraceError` for an input that is not a regular file or a stream, missing,
    empty, not JSON, truncated (unless ``options.partial``), or not a trace.
    """
    opts = read_options.options() if options is None else options
    p = Path("<stdin>") if os.fspath(path) == "-" else Path(path)
    # A big gzip trace: decoded in two processes as it inflates, its text never held whole.
    streaming = streamed.start(path, workers, opts.max_inflated_size)
    if streaming is not None:
        with streaming, _gc_paused():
            done = streaming.decode(progress)
        if done is not None:
            top, decoded, size = done
            return _trace(p, size, top, decoded, None)
    src = source.read_input(path, opts=opts, spill=True)
    try:
        return _load(p, src, opts, progress, workers, source.is_stream_path(path))
    finally:
        src.release()  # an inflated copy in shared memory goes when the load ends
        source.close_in_background(src.data)


def _load(p: Path, src: source.Source, opts: ReadOptions, progress: Callable[[int, int], None] | None,
          workers: int | None, stream: bool) -> Trace:
    data, partial = src.data, src.partial
    size = len(data)  # the JSON's size, whatever it was stored as
    first = layout.first_byte(data)
    if first is None:
        raise TraceError(p, "empty file" if len(data) == 0 else "empty file (only whitespace)")
    if src.compression is None and stream and bytes(data[:4]) == parquet.PARQUET_MAGIC:
        raise TraceError(p, "a Parquet file cannot be read from a stream: pass its path")
    if partial is not None:  # the inflated JSON ends early: keep its complete events
        data = _cut(p, data)
    with _gc_paused():
        decoded = None
        for attempt in range(3):
            try:
                decoded = _decode(p, data, first, progress, workers, src.mapped, src.give_back_copy)
                break
            except TraceError as err:
                json_error = getattr(err, "json_error", None)
                if attempt < 2 and json_error is not None and layout.is_non_finite_literal(data, json_error):
                    layout.blank_non_finite_literals(data)  # the buffer is private: the file is not touched
                elif attempt < 2 and opts.partial and partial is None and err.problem.startswith("truncated JSON"):
                    data = _cut(p, data)
                    partial = "truncated JSON: the file ends before the trace does"
                else:
                    raise
        assert decoded is not None
        top, found = decoded
        del data, decoded
    return _trace(p, size, top, found, partial)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic GC off while events become structs and lists (see the module docstring)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _trace(p: Path, size: int, top: TopLevel, decoded: Decoded, partial: str | None) -> Trace:
    """The :class:`Trace` of a decoded JSON text of ``size`` bytes (``partial``: why it ends early)."""
    frames, fmt, total, counts = decoded
    if total and counts.not_an_event == total:
        raise TraceError(p, f"not a trace: none of the {total:,} entries of traceEvents is an event "
                            "(an object with a 'ph')")
    if partial is not None:
        partial += "; only the events before the cut are reported"
    meta = trace_meta(p, size, top, frames, fmt, total, counts, partial)
    return Trace(meta=meta, steps=steps(frames["ops"]), **frames)


def _decode(p: Path, data: layout.Buffer, first: bytes, progress: Callable[[int, int], None] | None,
            workers: int | None, mapped: str | None,
            decoded_all: Callable[[], None] | None = None) -> tuple[TopLevel, Decoded]:
    """The frames of ``data``: planned from Kineto's layout when it has it (in shares for a big
    mapped file; ``mapped``: the file the workers map when it is not ``p`` itself), else by the
    exact top-level decode. ``decoded_all`` is called, in shares, once no process reads ``data``
    again (see :meth:`tracekit.load.source.Source.give_back_copy`)."""
    plan = layout.plan_spans(data, first)
    if plan is not None:
        top, spans, events_lo, events_hi = plan
        try:
            count = shares.share_count(workers, data, spans)
            extent = (events_lo, events_hi)
            return top, (shares.decode_in_shares(p, data, spans, count, progress, extent, mapped, decoded_all)
                         if count > 1 else decode_spans(p, data, spans, progress, extent))
        except TraceError:
            pass  # the layout guess was wrong somewhere: take the exact path instead
        del spans
    top = layout.decode_top(p, data, first)
    raws = top.traceEvents
    assert raws is not None
    top.traceEvents = None
    builder, total = decode_all(p, layout.raw_chunks(data, raws), progress, total=len(raws))
    del raws
    frames = builder.finish()
    return top, (frames, time_format(frames, builder.times.fractional), total, builder.counts)


def _cut(p: Path, data: layout.Buffer) -> bytearray:
    """``data`` as a bytearray cut after its last complete event (``--partial``)."""
    buf = data if isinstance(data, bytearray) else bytearray(data)
    layout.cut_to_complete_events(p, buf)
    return buf


def read_bytes(path: str | os.PathLike[str]) -> layout.Buffer:
    """The JSON text of ``path`` as one writable buffer (see :mod:`tracekit.load.source`)."""
    return source.read_input(path).data


def read_document(path: str | os.PathLike[str], options: ReadOptions | None = None) -> tuple[Any, str | None]:
    """The JSON document of ``path`` decoded whole, for a tool that reads the file itself (HTA),
    forgiving what :func:`load` forgives: NaN and Infinity literals are blanked, and with
    ``options.partial`` a truncated or damaged input is cut after its last complete event — so the
    tool sees the events the report is made of. Returns ``(document, why it ends early or None)``;
    :class:`TraceError` for what :func:`load` would refuse as not JSON or truncated."""
    opts = read_options.options() if options is None else options
    p = Path(path)
    src = source.read_input(path, opts=opts)
    data, partial = src.data, src.partial
    if partial is not None:
        data = _cut(p, data)
    for attempt in range(3):
        try:
            return msgspec.json.decode(data), partial
        except msgspec.DecodeError as err:
            problem = (str(err).splitlines() or [""])[0]
            if attempt < 2 and layout.is_non_finite_literal(data, err):
                layout.blank_non_finite_literals(data)
            elif attempt < 2 and opts.partial and partial is None and "truncated" in problem:
                data = _cut(p, data)
                partial = "truncated JSON: the file ends before the trace does"
            else:
                hint = " (--partial reads the events before the cut)" if "truncated" in problem else ""
                raise TraceError(p, f"not JSON: {problem}{hint}") from None
        except RecursionError:
            raise TraceError(p, "JSON nested deeper than the decoder's limit (about 1,000 levels)") from None
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def open_trace(path: str | os.PathLike[str], *, show_progress: bool = False,
               workers: int | None = 1) -> Trace:
    """Load ``path`` (Kineto JSON, gzip, or tracekit Parquet); ``workers`` as in :func:`load` (the
    commands pass None: one process per core for a big trace). With ``show_progress`` a progress
    bar goes to stderr (:func:`tracekit.progress.phase`: only when stderr is a terminal and only once
    the load has taken over :data:`tracekit.progress.SHOW_AFTER_S`)."""
    if is_parquet(path):
        return load_parquet(path)
    if not (show_progress and bars.shown()):
        return load(path, workers=workers)
    with bars.phase(f"loading {os.path.basename(os.fspath(path))}") as bar:
        return load(path, progress=bar.update, workers=workers)
