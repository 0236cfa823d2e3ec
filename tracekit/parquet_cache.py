"""A loaded :class:`Trace` saved as one Parquet file, and read back without re-parsing JSON.

Contract: :func:`save` writes every frame of the trace into a single Parquet file: the frames are
stacked with a ``table`` column naming the frame (``ops``, ``launches``, ``gpu``, ``overhead``,
``flows``, ``memory``, ``threads``, ``steps``), columns a frame lacks are null. The trace's
:class:`TraceMeta` travels as JSON in the file's key-value metadata under ``tracekit.meta``, with
the format version under ``tracekit.format``. :func:`load_parquet` restores an equal ``Trace``.

Why one file with a ``table`` column: it is what ``tracekit convert TRACE -o trace.parquet`` promises,
and bigger engines read it as is — e.g. DuckDB:
``SELECT name, sum(dur) FROM 'trace.parquet' WHERE "table" = 'gpu' GROUP BY name``.

The file is written to a temp file and renamed, so an interrupted convert leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.output import atomic_path
from tracekit.trace import (FLOWS_SCHEMA, GPU_SCHEMA, LAUNCHES_SCHEMA, MEMORY_SCHEMA, OPS_SCHEMA,
                            OVERHEAD_SCHEMA, STEPS_SCHEMA, THREADS_SCHEMA, DeviceInfo, Trace,
                            TraceMeta)

PARQUET_MAGIC = b"PAR1"
FORMAT = "tracekit.parquet/1"
FRAMES = {
    "ops": OPS_SCHEMA, "launches": LAUNCHES_SCHEMA, "gpu": GPU_SCHEMA, "overhead": OVERHEAD_SCHEMA,
    "flows": FLOWS_SCHEMA, "memory": MEMORY_SCHEMA, "threads": THREADS_SCHEMA, "steps": STEPS_SCHEMA,
}


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with Parquet's magic bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def save(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` as one Parquet file (atomically)."""
    parts = [getattr(trace, name).with_columns(table=pl.lit(name)) for name in FRAMES]
    stacked = pl.concat(parts, how="diagonal_relaxed")
    meta = msgspec.json.encode(dataclasses.asdict(trace.meta)).decode()
    with atomic_path(path) as tmp:
        stacked.write_parquet(tmp, metadata={"tracekit.format": FORMAT, "tracekit.meta": meta},
                              compression="zstd", statistics=True)


def load_parquet(path: str | os.PathLike[str]) -> Trace:
    """Read a file written by :func:`save`; raises :class:`TraceError` for anything else."""
    p = Path(path)
    try:
        kv = pl.read_parquet_metadata(p)
    except Exception as err:  # polars raises several types for unreadable files
        raise TraceError(p, f"unreadable Parquet file ({type(err).__name__})") from None
    if kv.get("tracekit.format") != FORMAT:
        raise TraceError(p, f"Parquet file was not written by 'tracekit convert' (expected {FORMAT})")
    try:
        stacked = pl.read_parquet(p)
        meta_fields = msgspec.json.decode(kv["tracekit.meta"])
    except Exception as err:
        raise TraceError(p, f"corrupt tracekit Parquet file ({type(err).__name__})") from None
    frames = {}
    for name, schema in FRAMES.items():
        frames[name] = (stacked.filter(pl.col("table") == name)
                        .select([pl.col(c).cast(t) for c, t in schema.items()]))
    devices = tuple(DeviceInfo(**d) for d in meta_fields.pop("devices"))
    meta = TraceMeta(devices=devices, **meta_fields)
    return Trace(meta=meta, **frames)
