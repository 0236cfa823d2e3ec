"""A loaded :class:`Trace` saved as one Parquet file, and read back without re-parsing JSON.

Contract: :func:`save` writes every frame of the trace into a single Parquet file: the frames are
stacked with a ``table`` column naming the frame (``ops``, ``launches``, ``gpu``, ``overhead``,
``flows``, ``memory``, ``threads``, ``steps``), columns a frame lacks are null. The trace's
:class:`TraceMeta` travels as JSON in the file's key-value metadata under ``tracekit.meta``, with
the format version under ``tracekit.format``. :func:`load_parquet` restores an equal ``Trace``.

Why one file with a ``table`` column: it is what ``tracekit convert TRACE -o trace.parquet`` promises,
and bigger engines read it as is — e.g. DuckDB:
``SELECT name, sum(dur) FROM 'trace.parquet' WHERE "table" = 'gpu' GROUP BY name``.

The trace's report (the default analysis) can be stored in the same file, so re-reporting a converted
trace renders stored results instead of analysing again: its frames are rows with ``table`` =
``report_cache`` (``cache_part`` names the frame, ``cache_blob`` holds it as Parquet bytes), its
skeleton and validity key go in the key-value metadata (``tracekit.report``, ``tracekit.report_key``);
see :mod:`tracekit.report_cache`. Trace queries ignore those rows by filtering on ``table`` as usual.

The file is written to a temp file and renamed, so an interrupted convert leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.output import atomic_path
from tracekit.trace import FRAME_SCHEMAS, DeviceInfo, Trace, TraceMeta

if TYPE_CHECKING:  # the report module pulls in every analysis; loading a trace needs none
    from tracekit.report import Report

PARQUET_MAGIC = b"PAR1"
FORMAT = "tracekit.parquet/1"
FRAMES = FRAME_SCHEMAS


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` starts with Parquet's magic bytes."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False


#: ``table`` value of the stored report's rows, and that row's two columns.
REPORT_TABLE = "report_cache"
_CACHE_COLUMNS = {"cache_part": pl.String, "cache_blob": pl.Binary}


def save(trace: Trace, path: str | os.PathLike[str], *, report: Report | None = None,
         report_key: str = "") -> None:
    """Write ``trace`` to ``path`` as one Parquet file (atomically), with ``report`` stored beside it
    under ``report_key`` (:func:`tracekit.report_cache.cache_key`) when given."""
    parts = [getattr(trace, name).with_columns(table=pl.lit(name)) for name in FRAMES]
    metadata = {"tracekit.format": FORMAT,
                "tracekit.meta": msgspec.json.encode(dataclasses.asdict(trace.meta)).decode()}
    if report is not None:
        from tracekit import report_cache

        skeleton, blobs = report_cache.encode(report)
        parts.append(pl.DataFrame({"table": [REPORT_TABLE] * len(blobs), "cache_part": list(blobs),
                                   "cache_blob": list(blobs.values())},
                                  schema={"table": pl.String, **_CACHE_COLUMNS}))
        metadata["tracekit.report"] = skeleton
        metadata["tracekit.report_key"] = report_key
    stacked = pl.concat(parts, how="diagonal_relaxed")
    with atomic_path(path) as tmp:
        stacked.write_parquet(tmp, metadata=metadata, compression="zstd", statistics=True)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The footer's key-value metadata of a file written by :func:`save` (read it once and pass it
    as ``kv=`` to :func:`stored_meta` / :func:`load_report`); TraceError for any other file."""
    p = Path(path)
    try:
        kv = pl.read_parquet_metadata(p)
    except Exception as err:  # polars raises several types for unreadable files
        raise TraceError(p, f"unreadable Parquet file ({type(err).__name__})") from None
    if kv.get("tracekit.format") != FORMAT:
        raise TraceError(p, f"Parquet file was not written by 'tracekit convert' (expected {FORMAT})")
    return kv


def load_report(path: str | os.PathLike[str], report_key: str, *,
                kv: dict[str, str] | None = None) -> Report | None:
    """The report stored in ``path`` if it was stored under ``report_key``, else None (none stored,
    made by other code or from another execution trace, or unreadable: then analyse afresh)."""
    from tracekit import report_cache

    p = Path(path)
    kv = read_metadata(p) if kv is None else kv
    if "tracekit.report" not in kv or kv.get("tracekit.report_key") != report_key:
        return None
    try:
        rows = (pl.scan_parquet(p).filter(pl.col("table") == REPORT_TABLE)
                .select(*_CACHE_COLUMNS).collect())
        blobs = dict(zip(rows["cache_part"].to_list(), rows["cache_blob"].to_list()))
        return report_cache.decode(kv["tracekit.report"], blobs)
    except Exception:  # a damaged stored report costs a re-analysis, never the command
        return None


def stored_meta(path: str | os.PathLike[str], *, kv: dict[str, str] | None = None) -> TraceMeta:
    """The :class:`TraceMeta` of a file written by :func:`save`, read from its footer alone."""
    p = Path(path)
    kv = read_metadata(p) if kv is None else kv
    try:
        return _meta_from_json(kv["tracekit.meta"])
    except Exception as err:
        raise TraceError(p, f"corrupt tracekit Parquet file ({type(err).__name__})") from None


def _meta_from_json(text: str) -> TraceMeta:
    fields = msgspec.json.decode(text)
    devices = tuple(DeviceInfo(**d) for d in fields.pop("devices"))
    return TraceMeta(devices=devices, **fields)


def load_parquet(path: str | os.PathLike[str]) -> Trace:
    """Read a file written by :func:`save`; raises :class:`TraceError` for anything else."""
    p = Path(path)
    kv = read_metadata(p)
    try:
        meta = _meta_from_json(kv["tracekit.meta"])
        # One lazy query per frame: each reads only its own columns, and only the row groups
        # whose ``table`` statistics can hold its rows; a stored report is never read here.
        scan = pl.scan_parquet(p)
        queries = [scan.filter(pl.col("table") == name).select([pl.col(c).cast(t) for c, t in schema.items()])
                   for name, schema in FRAMES.items()]
        frames = dict(zip(FRAMES, pl.collect_all(queries)))
    except Exception as err:
        raise TraceError(p, f"corrupt tracekit Parquet file ({type(err).__name__})") from None
    return Trace(meta=meta, **frames)
