"""One rank trace reduced to a compact summary: the map step of ``tracekit report DIR``.

Contract: :func:`summarize` loads one trace and returns its row (a plain dict: the table's figures,
what :func:`tracekit.ranks.check_set` reads, and the small frames the cross-rank analysis needs);
:func:`encode` writes that row as one small Parquet file (bytes) and :func:`decode` gives it back
equal, key for key and frame for frame (dtypes included). :func:`summary_of` is the map function
that the process pool and Ray run: a path in, the Parquet bytes out — all that crosses a process
or a machine boundary, and all that the cross-rank reduce ever reads.

The file: the row's frames as columns of one row, each a ``list[struct]`` holding the frame
(``calls``: :data:`tracekit.analyses.collectives.CALLS_SCHEMA`; ``phases``:
:data:`~tracekit.analyses.collectives.PHASE_SPANS_SCHEMA`; ``starts``: :data:`STARTS_SCHEMA`),
and every scalar of the row — plus ``classes``, the rank's GPU kernel time per kernel class — as one
JSON object in the file's key-value metadata under :data:`META_KEY` (a column per scalar would
cost a footer entry each: ~3 KB of a ~9 KB summary). A row that failed to load has no frames and
keeps only ``file`` and ``error``. :data:`FORMAT` is the layout's version: a cached summary of
another format (or another tracekit version) is not read back (:mod:`tracekit.ranks.cache`).

Size: on the public 8-rank DLRM traces (one profiled step, 8 collectives, ~900 KB of JSON each,
~54 KB gzip) a summary is 8.6–8.7 KB, 0.88–0.97 % of the JSON's bytes; most of it is Parquet's
fixed footer, so a longer trace's summary grows only with its steps and collective calls.
"""

from __future__ import annotations

import io
import json
import os

import polars as pl

from tracekit.analyses.collectives import CALLS_SCHEMA, PHASE_SPANS_SCHEMA
from tracekit.analyses.steps import VERDICTS
from tracekit.errors import TracekitError, is_native_panic

#: The summary file's layout version; part of every cache key. Bump it when the file changes.
FORMAT = 3
#: The metadata key holding the row's scalars (JSON, sorted keys).
META_KEY = "tracekit.rank-summary"
STARTS_SCHEMA: dict[str, pl.DataType] = {"step": pl.Int64, "cpu_start_ns": pl.Int64}
#: The frames of a loaded row, in the file's column order, with their schemas.
FRAMES: dict[str, dict[str, pl.DataType]] = {"calls": CALLS_SCHEMA, "phases": PHASE_SPANS_SCHEMA,
                                              "starts": STARTS_SCHEMA}


def summary_of(path: str) -> bytes:
    """The map function: :func:`summarize` of ``path`` as :func:`encode` writes it."""
    return encode(summarize(path))


def encode(row: dict) -> bytes:
    """``row`` (:func:`summarize`'s) as the bytes of one Parquet file (module docstring)."""
    frames = [pl.Series(name, [row[name].select(list(schema)).to_struct()],
                        dtype=pl.List(pl.Struct(schema)))
              for name, schema in FRAMES.items() if name in row]
    scalars = {k: v for k, v in row.items() if k not in FRAMES}
    out = io.BytesIO()
    # One column at least: a Parquet file of no columns is not one every reader takes.
    table = pl.DataFrame(frames) if frames else pl.DataFrame({"file": [row["file"]]})
    table.write_parquet(out, compression="zstd", statistics=False,
                        metadata={META_KEY: json.dumps(scalars, sort_keys=True, separators=(",", ":"))})
    return out.getvalue()


def decode(data: bytes) -> dict:
    """The row :func:`encode` wrote into ``data``: the same keys, values and frames."""
    meta = pl.read_parquet_metadata(io.BytesIO(data))
    row = json.loads(meta[META_KEY])
    table = pl.read_parquet(io.BytesIO(data))
    for name, schema in FRAMES.items():
        if name in table.columns:
            cell = table[name][0]
            row[name] = (cell.struct.unnest() if cell.len() else pl.DataFrame(schema=schema)).cast(schema)  # type: ignore[arg-type]
    return row


def summarize(path: str) -> dict:
    """Load one trace and summarise its steps; returns a plain dict (:func:`encode` writes it).

    Only the per-unit summary is needed here: the pipeline's first stages
    (:func:`tracekit.analyses.pipeline.basis`: attribution, units, compilations, summary), no
    execution trace and no other analysis; a trace without ProfilerStep spans is summarised per the
    units ``tracekit report`` finds (:mod:`tracekit.analyses.units`).
    """
    from tracekit.analyses import breakdown, collectives, pipeline
    from tracekit.session import Session

    name = os.path.basename(path)
    try:
        trace = Session(path, execution_trace=None, workers=1).trace  # one rank per core already
        found = pipeline.basis(trace)
        steps = found.steps
        calls = collectives.analyze(found.trace, found.attribution.gpu, found.attribution.tree.ops)
        exposed = breakdown.exposed_per_unit(found.attribution.gpu)
        # Class shares: each kernel class's summed kernel time (the reduce makes the shares).
        classes = (found.attribution.gpu.filter(pl.col("kind") == "kernel")
                   .group_by("kernel_class").agg(ns=(pl.col("end") - pl.col("ts")).sum())
                   .sort(["ns", "kernel_class"], descending=[True, False]))
    except TracekitError as err:
        return {"file": name, "error": _problem(err, path)}
    except RecursionError as err:
        return {"file": name, "error": f"internal error: {type(err).__name__}"}
    except Exception as err:  # noqa: BLE001 - one file's crash must not take the directory's report
        return {"file": name, "error": f"internal error: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
                if str(err) else f"internal error: {type(err).__name__}"}
    except BaseException as err:  # a native panic (Polars) on a crafted file: that file's error alone
        if not is_native_panic(err):
            raise
        return {"file": name, "error": "a native library gave up on this file (panic); it is likely damaged"}
    distributed = trace.meta.distributed or {}
    rank = distributed.get("rank")
    usable = _is_rank_number(rank)
    world = distributed.get("world_size")
    error = None
    if rank is not None and not usable:
        shown = str(rank) if len(str(rank)) <= 40 else str(rank)[:37] + "..."
        error = f"distributedInfo rank {shown} is not a rank number"
    verdicts = steps["verdict"].value_counts() if steps.height else None
    verdict = None
    if verdicts is not None:
        order = {v: i for i, v in enumerate(VERDICTS)}
        verdict = min(verdicts.iter_rows(), key=lambda vc: (-vc[1], order.get(vc[0], len(order)), vc[0]))[0]
    return {
        "file": name,
        "rank": rank if usable else None,
        "verdict": verdict,
        "comm_ns": int(exposed["comm_ns"].sum()) if exposed.height else 0,
        "exposed_comm_ns": int(exposed["exposed_comm_ns"].sum()) if exposed.height else 0,
        "calls": calls.calls, "phases": calls.phases,
        "starts": steps.select("step", "cpu_start_ns"),
        # Each step's figures as lists in the metadata, not a frame: a frame costs the file a footer
        # entry per column, more than a few steps' numbers.
        "per_step": _per_step(steps, exposed).to_dict(as_series=False),
        "steps": steps.height,
        "mean_step_ns": int(steps["cpu_span_ns"].mean()) if steps.height else None,
        "max_step_ns": int(steps["cpu_span_ns"].max()) if steps.height else None,
        "gpu_busy_ns": int(steps["gpu_busy_ns"].sum()) if steps.height else 0,
        "kernel_count": int(steps["kernel_count"].sum()) if steps.height else 0,
        "error": error,
        "classes": [[kernel_class, int(ns)] for kernel_class, ns in classes.iter_rows()],
        # Not columns of the table: what check_set reads to tell a set of ranks.
        "named_rank": "rank" in distributed, "world_size": world if _is_rank_number(world) else None,
    }


def _is_rank_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _problem(err: TracekitError, path: str) -> str:
    """The error line without the path (the table's file column names it)."""
    text = str(err)
    return text[len(path) + 2:] if text.startswith(f"{path}: ") else text


def _per_step(steps: pl.DataFrame, exposed: pl.DataFrame) -> pl.DataFrame:
    """``step, step_ns, gpu_busy_ns, exposed_comm_ns`` of each step (exposed 0 where it has no
    communication); ``wait_ns`` is added across ranks (:func:`_steps_of`)."""
    figures = steps.select("step", step_ns="cpu_span_ns", gpu_busy_ns="gpu_busy_ns")
    if exposed.height:
        figures = figures.join(exposed.select("step", "exposed_comm_ns"), on="step", how="left")
    else:
        figures = figures.with_columns(exposed_comm_ns=pl.lit(None, pl.Int64))
    return figures.with_columns(pl.col("exposed_comm_ns").fill_null(0))
