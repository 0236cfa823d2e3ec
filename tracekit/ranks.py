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

A directory is reported only when it is **a set of ranks** (:func:`check_set`): every trace that
loads names its rank in ``distributedInfo.rank``, no two name the same rank, and those that state
``distributedInfo.world_size`` state one world size, larger than every rank. Gaps are allowed —
profiling a few ranks of a large job is common — and named (:attr:`RankReport.missing`). Anything
else (traces without a rank, two traces of one rank, traces of runs of different sizes) is refused
with one line saying why (:class:`~tracekit.errors.UsageError`, exit 2): a table of such files would
compare traces that are not ranks of one run.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from tracekit import parallel, progress
from tracekit.analyses import skew
from tracekit.analyses.steps import VERDICTS
from tracekit.errors import TracekitError, UsageError, is_native_panic
from tracekit.results.ranks import RANK_SCHEMA, STEPS_SCHEMA, RankReport


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
        "per_step": _per_step(steps, exposed),
        "steps": steps.height,
        "mean_step_ns": int(steps["cpu_span_ns"].mean()) if steps.height else None,
        "max_step_ns": int(steps["cpu_span_ns"].max()) if steps.height else None,
        "gpu_busy_ns": int(steps["gpu_busy_ns"].sum()) if steps.height else 0,
        "kernel_count": int(steps["kernel_count"].sum()) if steps.height else 0,
        "error": error,
        # Not columns of the table: what check_set reads to tell a set of ranks.
        "named_rank": "rank" in distributed, "world_size": world if _is_rank_number(world) else None,
    }


def _per_step(steps: pl.DataFrame, exposed: pl.DataFrame) -> pl.DataFrame:
    """``step, step_ns, gpu_busy_ns, exposed_comm_ns`` of each step (exposed 0 where it has no
    communication); ``wait_ns`` is added across ranks (:func:`_steps_of`)."""
    figures = steps.select("step", step_ns="cpu_span_ns", gpu_busy_ns="gpu_busy_ns")
    if exposed.height:
        figures = figures.join(exposed.select("step", "exposed_comm_ns"), on="step", how="left")
    else:
        figures = figures.with_columns(exposed_comm_ns=pl.lit(None, pl.Int64))
    return figures.with_columns(pl.col("exposed_comm_ns").fill_null(0))


def _is_rank_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


#: What every refusal of :func:`check_set` ends with: the rule it applies.
SET_RULE = "a set of ranks is one trace per distinct distributedInfo.rank, all of one world_size"


def check_set(directory: str | os.PathLike[str],
              rows: list[dict]) -> tuple[int | None, tuple[tuple[int, int], ...]]:
    """Refuse ``rows`` (:func:`summarize`'s, one per file) unless they are a set of ranks (module
    docstring); return ``(world size or None, the ranks below it that no file holds)``, the latter as
    ``(first, last)`` runs, lowest first.

    A file that failed to load, or whose rank is not a rank number, cannot say which rank it is: it
    is kept as a row with its error and takes no part in the rule. A world size is stated when a
    file's ``distributedInfo.world_size`` is a rank number; without one, the missing ranks are the
    gaps below the highest rank.

    Raises
    ------
    tracekit.errors.UsageError
        One line: the directory, what breaks the rule (naming up to three files), and the rule.
    """
    def refuse(problem: str) -> UsageError:
        return UsageError(f"{directory}: not a set of ranks: {problem} ({SET_RULE})")

    def some(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")

    loaded = [r for r in rows if "steps" in r]  # a file that failed to load has no figures
    unnamed = [r["file"] for r in loaded if not r["named_rank"]]
    if unnamed:
        raise refuse(f"{some(unnamed)} {'names' if len(unnamed) == 1 else 'name'} no distributedInfo.rank "
                     f"({len(unnamed)} of {len(loaded)} traces); report a single trace with `tracekit report FILE`")
    ranked = sorted((r["rank"], r["file"]) for r in loaded if r["rank"] is not None)
    for (rank, first), (again, second) in zip(ranked, ranked[1:]):
        if rank == again:
            raise refuse(f"{first} and {second} are both rank {rank}")
    worlds = sorted({(r["world_size"], r["file"]) for r in loaded if r["world_size"] is not None})
    sizes = sorted({size for size, _ in worlds})
    if len(sizes) > 1:
        shown = [f"{size} in {next(f for s, f in worlds if s == size)}" for size in sizes[:3]]
        raise refuse(f"world_size differs ({', '.join(shown)}): traces of different runs")
    world = sizes[0] if sizes else None
    if world is not None and ranked and ranked[-1][0] >= world:
        rank, name = ranked[-1]
        raise refuse(f"{name} is rank {rank} of a world of {world}")
    held = [rank for rank, _ in ranked]
    # Runs of absent ranks, not each rank: a world of 2^20 with two ranks here is two numbers.
    edges = [-1, *held, world if world is not None else (held[-1] + 1 if held else 0)]
    return world, tuple((a + 1, b - 1) for a, b in zip(edges, edges[1:]) if b - a > 1)


def _problem(err: TracekitError, path: str) -> str:
    """The error line without the path (the table's file column names it)."""
    text = str(err)
    return text[len(path) + 2:] if text.startswith(f"{path}: ") else text


def _summarize_all(paths: list[str], workers: int, bar: progress.Phase) -> list[dict]:
    """:func:`summarize` of each path in up to ``workers`` processes, ``bar`` told of each one done.
    A process that dies (a native crash, the kernel's OOM killer) breaks the pool: the files it
    left unfinished are then summarised one process each, so the file that kills its process is
    the only one named."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    rows: dict[str, dict] = {}
    with parallel.spawn_pool(workers) as pool:
        futures = {pool.submit(summarize, p): p for p in paths}
        for future in as_completed(futures):
            try:
                rows[futures[future]] = future.result()
            except BrokenProcessPool:
                pass
            bar.update(len(rows), len(paths))
    for p in paths:
        if p in rows:
            continue
        try:
            with parallel.spawn_pool(1) as pool:
                rows[p] = pool.submit(summarize, p).result()
        except BrokenProcessPool:
            rows[p] = {"file": os.path.basename(p),
                       "error": "the process reading it died (out of memory, or a crash in a native library)"}
        bar.update(len(rows), len(paths))
    return [rows[p] for p in paths]


def analyze(directory: str | os.PathLike[str], *, workers: int | None = None,
            show_progress: bool = False) -> RankReport:
    """Summarise every trace in ``directory`` in up to ``workers`` processes (default: one per core);
    ``show_progress``: a bar of the files done on stderr (:mod:`tracekit.progress`).

    Raises :class:`~tracekit.errors.UsageError` for a directory without trace files, or one that
    is not a set of ranks (:func:`check_set`; known only once each file is read)."""
    paths = find_traces(directory)
    if not paths:
        raise UsageError(f"{directory}: no trace files (*.json, *.json.gz, *.parquet) in this directory")
    workers = max(1, min(len(paths), workers or parallel.cores()))
    with progress.phase(f"summarising {len(paths)} rank trace{'s' if len(paths) != 1 else ''}",
                        enabled=show_progress) as bar:
        bar.update(0, len(paths))
        if workers == 1:
            rows = []
            for p in paths:
                rows.append(summarize(str(p)))
                bar.update(len(rows), len(paths))
        else:
            rows = _summarize_all([str(p) for p in paths], workers, bar)
    world, missing = check_set(directory, rows)
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
    return RankReport(directory=str(directory), ranks=ranks, slowest=slowest, skew=cross, world_size=world,
                      missing=missing, steps=_steps_of(rows, cross))


def _steps_of(rows: list[dict], cross: skew.Skew | None) -> pl.DataFrame:
    """Every rank's steps (:data:`~tracekit.results.ranks.STEPS_SCHEMA`): its figures per step and
    what it waited at the matched collectives of that step (an instance's step is the reference
    rank's, :mod:`tracekit.analyses.skew`); ``wait_ns`` null when no collective matched."""
    frames, seen = [], set()
    for r in rows:
        rank = r.get("rank")
        if rank is None or rank in seen or r.get("per_step") is None:
            continue
        seen.add(rank)
        frames.append(r["per_step"].with_columns(rank=pl.lit(rank, pl.Int64)))
    if not frames:
        return pl.DataFrame(schema=STEPS_SCHEMA)
    found = pl.concat(frames, how="diagonal_relaxed")
    if cross is not None and cross.instances.height:
        waited = (cross.waits.join(cross.instances.select("instance", "step"), on="instance")
                  .filter(pl.col("step").is_not_null())
                  .group_by("rank", "step").agg(wait_ns=pl.col("wait_ns").sum()))
        found = (found.join(waited, on=["rank", "step"], how="left")
                 .with_columns(pl.col("wait_ns").fill_null(0)))
    else:
        found = found.with_columns(wait_ns=pl.lit(None, pl.Int64))
    return found.select(list(STEPS_SCHEMA)).cast(STEPS_SCHEMA).sort("rank", "step")  # type: ignore[arg-type]


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
