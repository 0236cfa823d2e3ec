"""Multi-rank directories: each rank trace mapped to a compact summary, the summaries reduced
across ranks.

Contract: :func:`find_traces` lists the trace files of a directory (Kineto ``.json``/``.json.gz``
and tracekit ``.parquet``; execution traces ``*.et.json*``, ``manifest.json`` and hidden files
are skipped), sorted by name. :func:`analyze` is a map and a reduce. The map
(:func:`tracekit.ranks.summary.summary_of`) loads one trace in its own process (a 1 GB rank trace
must not share a heap with the next) and reduces it to a summary of a few KB (Parquet: its
figures, collective calls, phase spans, step starts and kernel-class times); it runs on a process
pool or on Ray (:mod:`tracekit.ranks.engines`), and summaries are kept in a cache folder so that
a grown directory re-reads only new or changed traces (:mod:`tracekit.ranks.cache`). The reduce
reads only the summaries, so memory is bounded by the workers (one trace each) and the summaries,
not by the traces. It returns a :class:`RankReport` whose ``ranks`` frame has one row
per file: ``file str, rank i64?, steps u32, mean_step_ns i64?, max_step_ns i64?, gpu_busy_ns i64,
kernel_count u32, error str?, verdict, comm_ns, exposed_comm_ns, wait_ns, caused_ns`` sorted by rank
then file (:class:`~tracekit.results.ranks.RankReport`), ``slowest`` — the file whose mean step is
longest (ties: lowest rank) —, ``classes`` (each rank's kernel-class shares) and ``skew``: every
rank's collective calls (:mod:`tracekit.analyses.collectives`) matched across the ranks
(:mod:`tracekit.analyses.skew`), which names the rank the others waited for. A file that fails to
load — unreadable, not a trace, crashing the analysis or the process reading it, or naming an
absurd rank (2^70) — gets its one-line error and no figures; the others are still reported.

A directory is reported only when it is **a set of ranks** (:func:`check_set`): every trace that
loads names its rank in ``distributedInfo.rank``, no two name the same rank, and those that state
``distributedInfo.world_size`` state one world size, larger than every rank. Gaps are allowed —
profiling a few ranks of a large job is common — and named (:attr:`RankReport.missing`). Anything
else (traces without a rank, two traces of one rank, traces of runs of different sizes) is refused
with one line saying why (:class:`~tracekit.errors.UsageError`, exit 2): a table of such files would
compare traces that are not ranks of one run. A directory none of whose trace files can be read as a
rank is refused too (:func:`refuse_unreadable`, :class:`~tracekit.errors.TraceError`): the line
names the files and why each failed.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from tracekit import parallel, progress
from tracekit.analyses import skew
from tracekit.errors import TraceError, UsageError
from tracekit.ranks import cache as ranks_cache
from tracekit.ranks import engines, summary
from tracekit.ranks.summary import summarize
from tracekit.results.ranks import CLASSES_SCHEMA, RANK_SCHEMA, STEPS_SCHEMA, RankReport


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



#: The error of a trace whose process died (its summary never came back; nothing is cached for it).
DIED = "the process reading it died (out of memory, or a crash in a native library)"


#: How many files' errors the one line of an unreadable directory names, and how much of each.
SHOWN_ERRORS, ERROR_CHARS = 3, 120


def refuse_unreadable(directory: str | os.PathLike[str], rows: list[dict]) -> None:
    """Raise :class:`~tracekit.errors.TraceError` (one line, exit 2) when no row of ``rows``
    (:func:`summarize`'s) is a rank that could be read: a table of nothing but errors is no report.
    The line names the first :data:`SHOWN_ERRORS` files with their errors and counts the rest."""
    if any(not row.get("error") for row in rows):
        return
    shown = []
    for row in rows[:SHOWN_ERRORS]:
        error = " ".join(str(row["error"]).split())
        if len(error) > ERROR_CHARS:
            error = error[:ERROR_CHARS - 1] + "…"
        shown.append(f"{row['file']}: {error}")
    more = f"; and {len(rows) - SHOWN_ERRORS} more" if len(rows) > SHOWN_ERRORS else ""
    count = f"none of its {len(rows)} trace files" if len(rows) != 1 else "its one trace file"
    raise TraceError(directory, f"{count} could be read as a rank ({'; '.join(shown)}{more})")


def _store(directory: str | os.PathLike[str], cache: bool | str | os.PathLike[str]) -> ranks_cache.Cache | None:
    if cache is False:
        return None
    if cache is True:
        return ranks_cache.default_for(directory)
    return ranks_cache.chosen(cache)


def _cached(store: ranks_cache.Cache | None, path: str) -> dict | None:
    """The cached row of ``path``, or None; an entry that does not decode (damaged, cut short) is
    a miss: the trace is read again and the entry replaced."""
    data = store.get(path) if store is not None else None
    if data is None:
        return None
    try:
        return summary.decode(data)
    except Exception:  # noqa: BLE001 - any damage to a cache file means only "read the trace again"
        return None


def analyze(directory: str | os.PathLike[str], *, workers: int | None = None, show_progress: bool = False,
            engine: str = "pool", cache: bool | str | os.PathLike[str] = True) -> RankReport:
    """Summarise every trace in ``directory`` (the map) and analyse the summaries across ranks (the
    reduce).

    Parameters
    ----------
    workers
        The pool engine's processes (default: one per core; 1: this process); with Ray, the CPUs of
        a local instance started for the run (default: every core).
    show_progress
        A bar of the traces summarised, on stderr (:mod:`tracekit.progress`).
    engine
        Where the map runs: ``"pool"`` or ``"ray"`` (:mod:`tracekit.ranks.engines`); the result is
        the same.
    cache
        Where summaries are kept between runs (:mod:`tracekit.ranks.cache`): True, the user's cache
        folder (:func:`tracekit.ranks.cache.default_folder`; none when it cannot be made); False,
        none; a path, that folder. The directory of traces is never written into. Only traces without a current summary there are read.

    Raises
    ------
    tracekit.errors.UsageError
        For a directory without trace files, an unknown engine, ``--engine ray`` without Ray, a
        cache folder that cannot be written, or a directory that is not a set of ranks
        (:func:`check_set`; known only once each file is summarised).
    """
    if engine not in engines.ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose one of {', '.join(engines.ENGINES)}")
    if engine == "ray":
        engines.ray_module()  # missing Ray is one line before anything is read
    paths = [str(p) for p in find_traces(directory)]
    if not paths:
        raise UsageError(f"{directory}: no trace files (*.json, *.json.gz, *.parquet) in this directory")
    store = _store(directory, cache)
    rows: dict[str, dict] = {}
    for p in paths:
        row = _cached(store, p)
        if row is not None:
            rows[p] = row
    todo = [p for p in paths if p not in rows]
    label = f"summarising {len(todo)} rank trace{'s' if len(todo) != 1 else ''}"
    if len(todo) < len(paths):
        label += f" ({len(paths) - len(todo)} unchanged, from the cache)"
    if todo:
        with progress.phase(label, enabled=show_progress) as bar:
            bar.update(0, len(todo))
            if engine == "ray":
                fresh = engines.run_ray(todo, bar, cpus=workers)
            else:
                fresh = engines.run_pool(todo, max(1, min(len(todo), workers or parallel.cores())), bar)
        for p in todo:
            data = fresh[p]
            if data is None:
                rows[p] = {"file": os.path.basename(p), "error": DIED}
                continue
            rows[p] = summary.decode(data)
            if store is not None:
                try:
                    store.put(p, data)
                except OSError:  # a full or read-only disk: the cache only saves time, the report stands
                    pass
    return _reduce(directory, [rows[p] for p in paths])


def _reduce(directory: str | os.PathLike[str], rows: list[dict]) -> RankReport:
    """The cross-rank analysis of the summaries ``rows`` (in file order): it reads nothing else."""
    refuse_unreadable(directory, rows)
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
                      missing=missing, classes=_classes(rows), steps=_steps_of(rows, cross))


def _classes(rows: list[dict]) -> pl.DataFrame:
    """Each loaded rank's GPU kernel time per kernel class and its share of the rank's kernel time
    (:data:`~tracekit.results.ranks.CLASSES_SCHEMA`)."""
    found = [{"file": r["file"], "rank": r.get("rank"), "kernel_class": name, "gpu_ns": ns}
             for r in rows for name, ns in r.get("classes") or ()]
    if not found:
        return pl.DataFrame(schema=CLASSES_SCHEMA)
    total = pl.col("gpu_ns").sum().over("file")
    return (pl.DataFrame(found, schema={k: CLASSES_SCHEMA[k] for k in ("file", "rank", "kernel_class", "gpu_ns")})
            .with_columns(share=pl.when(total > 0).then(pl.col("gpu_ns") / total))
            .select(list(CLASSES_SCHEMA)).cast(CLASSES_SCHEMA)  # type: ignore[arg-type]
            .sort(["rank", "file", "gpu_ns", "kernel_class"], descending=[False, False, True, False], nulls_last=True))


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
        frames.append(pl.DataFrame(r["per_step"], schema={c: STEPS_SCHEMA[c] for c in r["per_step"]})
                      .with_columns(rank=pl.lit(rank, pl.Int64)))
    if not frames:
        return pl.DataFrame(schema=STEPS_SCHEMA)
    found = pl.concat(frames, how="diagonal_relaxed")
    if cross is not None and cross.instances.height:
        found = (found.join(skew.waited_per_step(cross), on=["rank", "step"], how="left")
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
        starts.append(r["starts"].select("step", "cpu_start_ns").with_columns(tag))
    if len(calls) < 2:
        return None
    return skew.analyze(pl.concat(calls), pl.concat(phases), pl.concat(starts))
