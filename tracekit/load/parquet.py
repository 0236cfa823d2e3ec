"""A loaded :class:`Trace` saved as one Parquet file, and read back without re-parsing JSON.

Contract: :func:`write` writes every frame of the trace into a single Parquet file: the frames are
stacked with a ``table`` column naming the frame (``ops``, ``launches``, ``gpu``, ``overhead``,
``flows``, ``memory``, ``threads``, ``comms``, ``steps``), columns a frame lacks are null. The trace's
:class:`TraceMeta` travels as JSON in the file's key-value metadata under ``tracekit.meta``, with
the format version under ``tracekit.format``. :func:`load_parquet` restores an equal ``Trace``.

Why one file with a ``table`` column: it is what ``tracekit convert TRACE -o trace.parquet`` promises,
and bigger engines read it as is — e.g. DuckDB:
``SELECT name, sum(dur) FROM 'trace.parquet' WHERE "table" = 'gpu' GROUP BY name``.

A caller may store more in the same file — rows of its own (with their own ``table`` value, which
trace queries filter out as usual) and key-value metadata of its own; :mod:`tracekit.results.store`
keeps the trace's report there. This module knows nothing of what they hold: it reads only the
trace's frames and metadata back.

The file is written to a temp file and renamed, so an interrupted convert leaves nothing behind.

A file read here may come from anyone, so it is held to ``--max-inflated-size`` like a compressed
JSON trace (:func:`check_inflated`): before any data is read, the bytes the frames' columns may
become, told from the footer and page headers (:mod:`tracekit.load.parquet_size`), must fit under the
cap; once read, so must the frames with every string counted at its own length (strings read as views
of one dictionary entry cost nothing until copied). Either past the cap is one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec
import polars as pl

from tracekit.errors import TraceError
from tracekit.load import read_options
from tracekit.load.parquet_size import ParquetLayoutError, column_bounds, logical_bytes
from tracekit.output import atomic_path
from tracekit.trace import COMMS_SCHEMA, FRAME_SCHEMAS, Trace, TraceMeta

PARQUET_MAGIC = b"PAR1"
FORMAT = "tracekit.parquet/1"
FRAMES = FRAME_SCHEMAS


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a regular file that starts with Parquet's magic bytes (a pipe or a
    device is never opened here: the loader refuses or streams it)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except (OSError, ValueError):
        return False


def write(trace: Trace, path: str | os.PathLike[str], *, extra_rows: pl.DataFrame | None = None,
          extra_metadata: Mapping[str, str] | None = None) -> None:
    """Write ``trace`` to ``path`` as one Parquet file (atomically).

    ``extra_rows`` (with a ``table`` column of their own) are stacked after the frames;
    ``extra_metadata`` joins the file's key-value metadata.
    """
    parts = [getattr(trace, name).with_columns(table=pl.lit(name)) for name in FRAMES]
    if extra_rows is not None:
        parts.append(extra_rows)
    metadata = {"tracekit.format": FORMAT,
                "tracekit.meta": msgspec.json.encode(dataclasses.asdict(trace.meta)).decode(),
                **(extra_metadata or {})}
    stacked = pl.concat(parts, how="diagonal_relaxed")
    with atomic_path(path) as tmp:
        try:
            stacked.write_parquet(tmp, metadata=metadata, compression="zstd", statistics=True)
        except pl.exceptions.PolarsError as err:
            refused = _os_error(err) or _probe(tmp)
            if refused is None:
                raise
            raise refused from None  # worded by atomic_path like any refused write


def _os_error(err: Exception) -> OSError | None:
    """The ``OSError`` behind a Polars error that wraps one (Polars' writer reports a full file
    system or a file-size limit as ``ComputeError: ... underlying IO error: File too large (os error
    27)``); None for any other error."""
    found = re.search(r"\(os error (\d+)\)", str(err))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number))


#: What :func:`_probe` appends: more than a file-system block, so a full disk refuses it.
_PROBE_BYTES = 1 << 16


def _probe(path: str | os.PathLike[str]) -> OSError | None:
    """The ``OSError`` the output refuses a write with, found by writing to it again: Polars' writer
    does not always carry the system error (a refused footer reads "Invalid thrift: transport
    error"). None when the output takes the write: then the writer's error was not the output's."""
    try:
        with open(path, "ab") as out:
            out.write(b"\0" * _PROBE_BYTES)
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        return OSError(err.errno, err.strerror) if err.errno else err
    return None


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The footer's key-value metadata of a file written by :func:`write` (read it once and pass it
    as ``kv=`` to the readers); TraceError for any other file."""
    p = Path(path)
    try:
        kv = pl.read_parquet_metadata(p)
    except Exception as err:  # polars raises several types for unreadable files
        raise TraceError(p, f"unreadable Parquet file ({type(err).__name__})") from None
    if kv.get("tracekit.format") != FORMAT:
        raise TraceError(p, f"Parquet file was not written by 'tracekit convert' (expected {FORMAT})")
    return kv


def stored_meta(path: str | os.PathLike[str], *, kv: Mapping[str, str] | None = None) -> TraceMeta:
    """The :class:`TraceMeta` of a file written by :func:`write`, read from its footer alone."""
    p = Path(path)
    kv = read_metadata(p) if kv is None else kv
    try:
        return msgspec.json.decode(kv["tracekit.meta"], type=TraceMeta)  # every field's type checked
    except (KeyError, msgspec.MsgspecError, RecursionError) as err:
        problem = str(err).splitlines()[0] if isinstance(err, msgspec.ValidationError) else type(err).__name__
        raise TraceError(p, f"corrupt tracekit Parquet file (metadata: {problem})") from None


def load_parquet(path: str | os.PathLike[str], *, kv: Mapping[str, str] | None = None) -> Trace:
    """Read a file written by :func:`write`; raises :class:`TraceError` for anything else."""
    p = Path(path)
    meta = stored_meta(p, kv=kv)
    cap = read_options.options().max_inflated_size
    trace_columns = {"table"}.union(*(schema.keys() for schema in FRAMES.values()))
    check_inflated(p, trace_columns, cap, what="its trace")
    try:
        # One lazy query per frame: each reads only its own columns, and only the row groups
        # whose ``table`` statistics can hold its rows; rows stored beside the trace are never read.
        scan = pl.scan_parquet(p)
        stored = dict(scan.collect_schema())
        _check_dtypes(p, stored)
        queries = [scan.filter(pl.col("table") == name).select([_column(c, t, stored) for c, t in schema.items()])
                   for name, schema in FRAMES.items()]
        frames = dict(zip(FRAMES, pl.collect_all(queries)))
    except TraceError:
        raise
    except Exception as err:
        raise TraceError(p, f"corrupt tracekit Parquet file ({type(err).__name__})") from None
    for name, frame in frames.items():
        # Every analysis keys events by idx (one event, one index, as the loader numbers them): a
        # file with repeated indices was not written by convert, and trusting it loops or crashes.
        if "idx" in frame.columns and frame["idx"].n_unique() != frame.height:
            raise TraceError(p, f"corrupt tracekit Parquet file (repeated event indices in its {name} rows)")
    if cap is not None:
        check_read(p, sum(logical_bytes(frame) for frame in frames.values()), cap, what="its trace")
    return Trace(meta=meta, **frames)


def _check_dtypes(path: Path, stored: Mapping[str, pl.DataType]) -> None:
    """TraceError unless every frame column stored has the dtype the frames give it (or Null): a
    column stored otherwise — a Categorical or Enum above all, whose one long category the cast to
    String would copy onto every row before any size is checked — was not written by convert."""
    for schema in FRAMES.values():
        for name, dtype in schema.items():
            got = stored.get(name)
            if got is not None and got != dtype and got != pl.Null:
                raise TraceError(path, f"corrupt tracekit Parquet file (column {name!r} is stored as "
                                       f"{str(got)[:40]}, not {dtype})")
    if stored.get("table", pl.String) != pl.String:
        raise TraceError(path, "corrupt tracekit Parquet file (column 'table' is not a String)")


def check_inflated(path: str | os.PathLike[str] | bytes, columns: set[str], cap: int | None, *,
                   what: str, shown: str | os.PathLike[str] | None = None) -> int:
    """The most bytes reading ``columns`` of the Parquet file ``path`` (or bytes) may produce
    (:func:`tracekit.load.parquet_size.column_bounds`); TraceError naming ``--max-inflated-size``
    if past ``cap`` (None: no cap), or if the footer or a page header is unreadable. ``what`` names
    the data in the message, ``shown`` the file (default: ``path``)."""
    where = Path(path) if shown is None and not isinstance(path, bytes) else shown
    try:
        bounds = column_bounds(path)
    except (ParquetLayoutError, OSError, ValueError) as err:
        raise TraceError(where, f"corrupt tracekit Parquet file ({what}: {err})") from None
    total = sum(size for name, size in bounds.items() if name in columns)
    if cap is not None and total > cap:
        raise TraceError(where, f"{what} would inflate to {total:,} bytes once read, past {cap:,} "
                                f"({read_options.cap_hint()})")
    return total


def check_read(path: str | os.PathLike[str], size: int, cap: int, *, what: str) -> None:
    """TraceError naming ``--max-inflated-size`` if ``size`` (what was read, strings counted at their
    own length: :func:`tracekit.load.parquet_size.logical_bytes`) is past ``cap``."""
    if size > cap:
        raise TraceError(path, f"{what} holds {size:,} bytes once its strings are counted, past {cap:,} "
                               f"({read_options.cap_hint()})")


#: Columns added to a frame after files of this format were first written, with how to derive them
#: from what such a file holds.
_ADDED_COLUMNS = {
    # Before it, an [OutOfMemory] event was the memory row without an address.
    "oom": pl.col("addr").is_null(),
    # The comms frame (collective metadata) came later: a file written before it read none, so its
    # comms rows are none (no row has ``table == "comms"``) and these columns are only named.
    **{name: pl.lit(None) for name in COMMS_SCHEMA if name != "idx"},
    # Before them, no file held CUDA-graph ids or annotations: unknown, which is what null means.
    "graph_id": pl.lit(None, pl.Int64),
    "graph_node_id": pl.lit(None, pl.Int64),
    "graph_annotation": pl.lit(None, pl.String),
}


def _column(name: str, dtype: pl.DataType, stored: Mapping[str, pl.DataType]) -> pl.Expr:
    if name in stored or name not in _ADDED_COLUMNS:  # a stored column has this dtype already
        return pl.col(name).cast(dtype)
    return _ADDED_COLUMNS[name].cast(dtype).alias(name)
