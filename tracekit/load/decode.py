"""Chunks of events to frames, in this process: the loop every load runs.

Contract: :func:`decode_all` decodes each chunk (:func:`tracekit.load.events.decode_chunk`, with
exact decimal times for the 2024 absolute form) and routes its events into one
:class:`~tracekit.load.frames.FrameBuilder`, reporting progress as it goes; :func:`decode_spans` is
the same for the spans :func:`tracekit.load.layout.plan_spans` planned, ending in sorted frames.
Chunks are decoded one at a time and dropped once routed, so only one chunk's structs are alive.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from tracekit.load import events, layout
from tracekit.load.frames import FrameBuilder, LoadCounts, time_format

Progress = Callable[[int, int], None]


def decode_all(path: Path, chunks: layout.Chunks, progress: Progress | None, *, total: int | None,
               extent: tuple[int, int] | None = None,
               exact_times: bool | None = None) -> tuple[FrameBuilder, int]:
    """Decode every chunk and route its events; returns the builder (flushed) and the count.

    ``progress(done, total)`` is called after each chunk: with ``total`` events when known, else
    estimated from the chunk's last byte within ``extent`` (the event array's first and last byte).
    ``exact_times``: whether times need the decimal path; None decides from the first chunk.
    """
    builder = FrameBuilder()
    offset = 0
    for decode, hi in chunks:
        chunk, skipped = events.decode_chunk(path, decode, offset)
        builder.counts.not_an_event += skipped
        if offset == 0:
            builder.exact_times = events.needs_exact_times(chunk) if exact_times is None else exact_times
        if builder.exact_times:
            events.replace_with_exact_times(path, decode, chunk)
        builder.add_chunk(chunk, offset)
        offset += len(chunk) + skipped  # entries of traceEvents, so that idx stays an entry's place
        del chunk
        if progress is not None:
            if total is not None:
                progress(offset, total)
            elif extent is not None and hi is not None:
                # Byte-proportional estimate of the total until the last chunk makes it exact.
                lo, end = extent
                done = (hi - lo) / max(end - lo, 1)
                progress(offset, offset if hi >= end else max(offset, round(offset / max(done, 1e-9))))
    builder.flush()
    return builder, offset


Decoded = tuple[dict[str, pl.DataFrame], str, int, LoadCounts]


def decode_spans(path: Path, data: layout.Buffer, spans: layout.Spans, progress: Progress | None,
                 extent: tuple[int, int], exact_times: bool | None = None) -> Decoded:
    """(sorted frames, time format, event count, what was left out) of the events in ``spans``,
    in this process."""
    builder, count = decode_all(path, layout.span_chunks(data, spans), progress, total=None, extent=extent,
                                exact_times=exact_times)
    frames = builder.finish()
    return frames, time_format(frames, builder.times.fractional), count, builder.counts
