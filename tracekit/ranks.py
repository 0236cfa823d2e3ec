"""Multi-rank directories: one summary per trace file, computed in parallel processes.

Contract: :func:`find_traces` lists the trace files of a directory (Kineto ``.json``/``.json.gz``
and tracekit ``.parquet``; execution traces ``*.et.json*`` and ``manifest.json`` are skipped),
sorted by name. :func:`analyze` loads and reports each in its own process (a 1 GB rank trace must
not share a heap with the next) and returns a :class:`RankReport` whose ``ranks`` frame has one row
per file: ``file str, rank i64?, steps u32, mean_step_ns i64?, max_step_ns i64?, gpu_busy_ns i64,
kernel_count u32, error str?, verdict, comm_ns, exposed_comm_ns, wait_ns, caused_ns`` sorted by rank
then file (:class:`~tracekit.results.ranks.RankReport`), ``slowest`` — the file whose mean step is
longest (ties: lowest rank) — and ``skew``: every rank's collective calls
(:mod:`tracekit.analyses.collectives`, computed in the rank's own process and sent back as small
frames) matched across the ranks (:mod:`tracekit.analyses.skew`), which names the rank the others
waited for. A file that fails to load — unreadable, not a trace, crashing the
analysis or the process reading it, or naming an absurd rank (2^70) — gets its one-line error and no
figures; the others are still reported.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from tracekit import parallel
from tracekit.analyses import skew
from tracekit.analyses.steps import VERDICTS
from tracekit.errors import TracekitError, UsageError
from tracekit.results.ranks import RANK_SCHEMA, RankReport


def find_traces(directory: str | os.PathLike[str]) -> list[Path]:
    """Trace files directly inside ``directory``, sorted by name."""
    found = []
    for path in sorted(Path(directory).iterdir()):
        name = path.name
        if not path.is_file() or name.startswith(".") or name == "manifest.json" or ".et." in name:
            continue
        if name.endswith((".json", ".json.gz", ".parquet")):
            found.append(path)
    return found


def summarize(path: str) -> dict:
    """Load one trace and summarise its steps; returns a plain dict (it crosses a process boundary).

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
    except TracekitError as err:
        return {"file": name, "error": _problem(err, path)}
    except RecursionError as err:
        return {"file": name, "error": f"internal error: {type(err).__name__}"}
    except Exception as err:  # noqa: BLE001 - one file's crash must not take the directory's report
        return {"file": name, "error": f"internal error: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
                if str(err) else f"internal error: {type(err).__name__}"}
    distributed = trace.meta.distributed or {}
    rank = distributed.get("rank")
    usable = isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31
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
        "steps": steps.height,
        "mean_step_ns": int(steps["cpu_span_ns"].mean()) if steps.height else None,
        "max_step_ns": int(steps["cpu_span_ns"].max()) if steps.height else None,
        "gpu_busy_ns": int(steps["gpu_busy_ns"].sum()) if steps.height else 0,
        "kernel_count": int(steps["kernel_count"].sum()) if steps.height else 0,
        "error": error,
    }


def _problem(err: TracekitError, path: str) -> str:
    """The error line without the path (the table's file column names it)."""
    text = str(err)
    return text[len(path) + 2:] if text.startswith(f"{path}: ") else text


def _summarize_all(paths: list[str], workers: int) -> list[dict]:
    """:func:`summarize` of each path in up to ``workers`` processes. A process that dies (a
    native crash, the kernel's OOM killer) breaks the pool: the files it left unfinished are then
    summarised one process each, so the file that kills its process is the only one named."""
    from concurrent.futures.process import BrokenProcessPool

    rows: dict[str, dict] = {}
    with parallel.spawn_pool(workers) as pool:
        futures = {p: pool.submit(summarize, p) for p in paths}
        for p, future in futures.items():
            try:
                rows[p] = future.result()
            except BrokenProcessPool:
                pass
    for p in paths:
        if p in rows:
            continue
        try:
            with parallel.spawn_pool(1) as pool:
                rows[p] = pool.submit(summarize, p).result()
        except BrokenProcessPool:
            rows[p] = {"file": os.path.basename(p),
                       "error": "the process reading it died (out of memory, or a crash in a native library)"}
    return [rows[p] for p in paths]


def analyze(directory: str | os.PathLike[str], *, workers: int | None = None) -> RankReport:
    """Summarise every trace in ``directory`` in up to ``workers`` processes (default: one per core)."""
    paths = find_traces(directory)
    if not paths:
        raise UsageError(f"{directory}: no trace files (*.json, *.json.gz, *.parquet) in this directory")
    workers = max(1, min(len(paths), workers or parallel.cores()))
    if workers == 1:
        rows = [summarize(str(p)) for p in paths]
    else:
        rows = _summarize_all([str(p) for p in paths], workers)
    cross = _skew(rows)
    table = [{k: r.get(k) for k in RANK_SCHEMA} for r in rows]
    ranks = pl.DataFrame(table, schema=RANK_SCHEMA).sort(["rank", "file"], nulls_last=True)
    if cross is not None:
        ranks = (ranks.drop("wait_ns", "caused_ns")
                 .join(cross.ranks.select("rank", "wait_ns", "caused_ns"), on="rank", how="left")
                 .select(list(RANK_SCHEMA)).sort(["rank", "file"], nulls_last=True))
    timed = ranks.filter(pl.col("mean_step_ns").is_not_null())
    slowest = None
    if timed.height:
        slowest = timed.sort(["mean_step_ns", "rank", "file"], descending=[True, False, False],
                             nulls_last=True)["file"][0]
    return RankReport(directory=str(directory), ranks=ranks, slowest=slowest, skew=cross)


def _skew(rows: list[dict]) -> skew.Skew | None:
    """The collectives of the ranks with a rank number matched across them; None when fewer than
    two such ranks have collective calls (one rank number twice: the first file's)."""
    calls, phases, starts, seen = [], [], [], set()
    for r in rows:
        rank = r.get("rank")
        if rank is None or rank in seen or r.get("calls") is None or r["calls"].height == 0:
            continue
        seen.add(rank)
        tag = pl.lit(rank, pl.Int64).alias("rank")
        calls.append(r["calls"].with_columns(tag))
        phases.append(r["phases"].with_columns(tag))
        starts.append(r["starts"].with_columns(tag))
    if len(calls) < 2:
        return None
    return skew.analyze(pl.concat(calls), pl.concat(phases), pl.concat(starts))
