"""``tracekit report DIR`` on many large ranks: wall time and peak memory with the process pool and
with Ray on this machine, the cost of one rank, whether memory stays within two workers' worth, an
estimate for a cluster, and ``tracekit merge`` of the ranks.

    python bench/ranks.py [--ranks 8,32] [--size-mb 100] [--workers 2] [--engines pool,ray]
                          [--source TRACE] [--dir DIR] [--keep] [--no-merge]
                          [--results bench/RESULTS.md | --no-results]

Traces: ``bench/synth.py`` replicates the step window of ``--source`` (default: rank 0 of the public
8-rank DLRM run, ``tests/data/real/facebookresearch__param__dlrm-8rank-v100-nccl-rank0.json.gz``: one
training step with 8 NCCL collectives, so every rank has collective calls for the cross-rank
analysis to match, as real ranks do; the shipped single-GPU ``sample_traces/train_eager.json.gz``
has none) until one trace holds ``--size-mb`` MB of JSON; each rank is that trace
with ``distributedInfo`` (``rank``, ``world_size``) put in front, as ``tests/factory.py``'s
``copy_as_rank`` sets it. The largest count's ranks are written once (plain JSON, ``--dir`` or a
temporary folder; ``32 × 100 MB`` is 3.2 GB of disk) and the smaller counts use a folder of links
to the first of them (naming the larger world: the report lists the other ranks as missing).

Runs: for each count and engine, a fresh Python process runs :func:`tracekit.ranks.analyze` with
``--workers`` workers (the pool's processes; for Ray, a local instance of that many CPUs, started
in the run and counted in it) and no summary cache, so every rank is read. Measured
(:func:`measure`): wall time; CPU time of the process and every descendant it waited for; peak
resident memory (RSS sampled every 50 ms with psutil) summed over the process and all its
descendants, over the engine's workers alone (:func:`is_worker`), over the rest (the parent, and
Ray's daemons), and of the largest single process. The JSON reports of the engines are compared
byte for byte.

Two workers' worth: before the runs, **W** is measured per engine — one worker analysing one rank
(:func:`one_worker`); each run is then checked against ``B + workers × W``, B being the peak of its
processes that read no trace. The rows of the two counts show whether B or the workers grow with
the rank count.

Merge (unless ``--no-merge``): ``tracekit merge`` of the smallest count's ranks to a ``.json.gz``,
with no summary cached and then with them cached (the writing alone), beside one process decoding
and rewriting one rank as merge does (:func:`merge_rows`).

Printed, and written between ``<!-- ranks: bench/ranks.py -->`` and ``<!-- /ranks -->`` of
``bench/RESULTS.md`` (the rest of the file is left as it is; ``bench/compare.py`` carries the
section over): the tables, the per-rank cost (wall × workers ÷ ranks: the seconds of one core that
one rank takes, start included) and the size of one summary; then, **as an estimate** from the Ray
runs (the marginal per-rank cost: the slope between the smallest and largest count, and the start:
what the smallest run's wall leaves), the wall time on N machines of ``--workers`` cores each,
``start + ceil(ranks ÷ (N × workers)) × marginal cost``, which assumes what this machine cannot
show: traces on storage every node reads at this machine's speed, and no straggling node.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import synth  # noqa: E402  (bench/synth.py, beside this file)
from sections import write_section  # noqa: E402  (bench/sections.py, beside this file)

MB = 1_000_000
DLRM_RANK0 = "facebookresearch__param__dlrm-8rank-v100-nccl-rank0.json.gz"
RUN = """
import json, sys, time
from tracekit import ranks
directory, engine, workers, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
result = ranks.analyze(directory, workers=workers, engine=engine, cache=False)
from tracekit.render import renderer_for
with open(out, "w") as f:
    renderer_for("json").render(result, f)
"""


def make_ranks(source: Path, where: Path, count: int, size_mb: float) -> list[Path]:
    """``count`` rank traces of about ``size_mb`` MB of JSON in ``where`` (module docstring); the
    source's own ``distributedInfo``, if any, is replaced."""
    where.mkdir(parents=True, exist_ok=True)
    base = where / ".base.json"
    if not base.exists():
        synth.synthesize(source, base, size_mb)
    body = base.read_bytes()
    # The source's own distributedInfo (a real rank's) goes: one line of synth's header, before the events.
    head_end = body.index(b'"traceEvents"')
    head = b"".join(line for line in body[:head_end].splitlines(keepends=True)
                    if not line.lstrip().startswith(b'"distributedInfo":'))
    body = head + body[head_end:]
    start = body.index(b"{") + 1
    made = []
    for rank in range(count):
        path = where / f"rank{rank}.json"
        if not path.exists():
            info = json.dumps({"backend": "nccl", "rank": rank, "world_size": count}).encode()
            path.write_bytes(b'{"distributedInfo": ' + info + b", " + body[start:])
        made.append(path)
    return made


def linked(ranks: list[Path], where: Path) -> Path:
    """A folder of links to ``ranks`` (the first of the largest count's: they still name its world
    size, so the report names the others missing; the work per rank is the same)."""
    where.mkdir(parents=True, exist_ok=True)
    for path in ranks:
        if not (where / path.name).exists():
            (where / path.name).symlink_to(path)
    return where


def is_worker(cmdline: list[str]) -> bool:
    """Whether a process of a run is one of the engine's workers (those that read traces): the
    pool's spawned processes (not its resource tracker), or Ray's worker processes (``ray::IDLE``
    or ``ray::summary_of…`` once started, ``default_worker.py`` before; not its agents, which are
    named ``ray::…Agent`` too)."""
    line = " ".join(cmdline)
    title = cmdline[0] if cmdline else ""
    return ("spawn_main" in line or "default_worker.py" in line or title == "ray::IDLE"
            or title.startswith("ray::summary_of"))


def measure(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall time and peak memory of one command in a fresh process (module docstring): peak RSS
    summed over the process and its descendants (``peak_tree_mb``), of the largest single process
    (``peak_process_mb``), summed over the workers (:func:`is_worker`, ``peak_workers_mb``) and over
    the rest (``peak_others_mb``: the parent and, for Ray, its daemons), and of the largest worker
    (``peak_worker_mb``)."""
    import psutil

    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    peaks = {"tree": 0, "process": 0, "workers": 0, "others": 0, "worker": 0}
    watched = psutil.Process(proc.pid)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                tree = [watched, *watched.children(recursive=True)]
            except psutil.Error:
                break
            workers = others = largest = largest_worker = 0
            for p in tree:
                try:
                    rss = p.memory_info().rss
                    # Read each time: a process just forked still shows its parent's command line.
                    worker = p.pid != watched.pid and is_worker(p.cmdline())
                except psutil.Error:
                    continue
                largest = max(largest, rss)
                if worker:
                    workers += rss
                    largest_worker = max(largest_worker, rss)
                else:
                    others += rss
            for key, value in (("tree", workers + others), ("process", largest), ("workers", workers),
                               ("others", others), ("worker", largest_worker)):
                peaks[key] = max(peaks[key], value)
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-4:])} failed ({proc.returncode}): {err.strip()[-2000:]}")
    # CPU of the process and every descendant it waited for (a pool's workers, Ray's processes
    # once they end): what the run cost whatever the machine's load.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, **{f"peak_{k}_mb": v / MB for k, v in peaks.items()}}


#: Tries of a run before the benchmark gives up: a local Ray node that does not start within Ray's
#: own 30 s (a loaded machine) fails the run, and the next try may find the machine quieter.
TRIES = 3


def run_report(directory: Path, engine: str, workers: int, out: Path) -> dict:
    """:func:`measure` of ``report DIR``'s analysis (:data:`RUN`) on ``directory``; a run that
    fails is run again, up to :data:`TRIES` in all, a minute apart; ``retried`` says so."""
    argv = [sys.executable, "-c", RUN, str(directory), engine, str(workers), str(out)]
    for attempt in range(1, TRIES + 1):
        try:
            return {**measure(argv), "retried": attempt > 1}
        except SystemExit as failed:
            if attempt == TRIES:
                raise
            print(f"(try {attempt} failed, again in 60 s: {str(failed)[-300:]})", file=sys.stderr, flush=True)
            time.sleep(60)
    raise AssertionError("unreachable")


#: W of the pool: a small trace first, so that every module a worker uses is loaded (as in a worker
#: that has read a rank before: a fresh process loads some of them after its peak), then the rank.
ONE = """
import sys
from tracekit.ranks import summary
summary.summary_of(sys.argv[2])
summary.summary_of(sys.argv[1])
"""
#: W of Ray: the same two traces as two tasks of a local instance of one CPU (one worker, both in turn).
ONE_RAY = """
import sys
from tracekit.ranks import engines
class Bar:
    def update(self, done, total):
        pass
engines.run_ray([sys.argv[2], sys.argv[1]], Bar(), cpus=1)
"""
#: How :func:`one_worker` measures W, per engine.
ONE_WORKER = {"pool": "a fresh process in a pool worker's environment (`tracekit.parallel.releasing_env`) "
                      "summarising the small source trace, then the rank: its peak",
              "ray": "a local Ray instance of one CPU given the same two traces as two tasks: the peak of its "
                     "largest worker process"}


def one_worker(engine: str, rank: Path, source: Path) -> dict:
    """W of ``engine`` (:data:`ONE_WORKER`): :func:`measure`'s figures plus ``w_mb``. The small
    ``source`` is read first: a worker that has read a rank holds every module it uses, which a
    fresh process loads partly after its peak (on the 100 MB DLRM ranks, a first rank peaked at
    348 MB in a fresh process, 374 MB after a small trace, 381-387 MB as a later rank)."""
    if engine == "ray":
        got = measure([sys.executable, "-c", ONE_RAY, str(rank), str(source)])
        return {**got, "w_mb": got["peak_worker_mb"]}
    from tracekit import parallel

    got = measure([sys.executable, "-c", ONE, str(rank), str(source)], parallel.releasing_env())
    return {**got, "w_mb": got["peak_tree_mb"]}


DECODE_ONE = """
import sys
from pathlib import Path
import msgspec
from tracekit import merge
from tracekit.load.source import read_input
merge._Rank(0, Path(sys.argv[1]), 0).rewrite(merge.MIN_PID_STRIDE, 0)
"""
BEGIN, END = "<!-- ranks: bench/ranks.py -->", "<!-- /ranks -->"


def machine() -> str:
    """The machine in one line: CPU model, cores, memory, Python, tracekit's commit."""
    import platform

    import psutil

    model = platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    return (f"{model}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB; "
            f"Python {platform.python_version()}; tracekit commit `{commit}`")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,32", help="rank counts, comma-separated (default 8,32)")
    ap.add_argument("--size-mb", type=float, default=100, help="MB of JSON per rank (default 100)")
    ap.add_argument("--workers", type=int, default=2, help="workers of each engine (default 2)")
    ap.add_argument("--engines", default="pool,ray", help="pool, ray or both (default)")
    ap.add_argument("--source", default=str(ROOT / "tests" / "data" / "real" / DLRM_RANK0),
                    help="the trace whose steps each rank replicates")
    ap.add_argument("--dir", default=None, help="where the ranks are written (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the ranks written (with --dir)")
    ap.add_argument("--no-merge", action="store_true", help="leave out the `tracekit merge` rows")
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md",
                    help="the file whose ranks section is replaced (default bench/RESULTS.md)")
    ap.add_argument("--no-results", action="store_true", help="print only")
    args = ap.parse_args(argv)
    counts = sorted({int(c) for c in args.ranks.split(",")})
    engines = [e for e in args.engines.split(",") if e]
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tracekit-ranks-bench-"))
    from tracekit.ranks import summary

    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    try:
        ranks = make_ranks(Path(args.source), work / f"r{counts[-1]}", counts[-1], args.size_mb)
        trace_mb = ranks[0].stat().st_size / MB
        data = summary.summary_of(str(ranks[0]))
        summary_kb, row = len(data) / 1000, summary.decode(data)
        one = {engine: one_worker(engine, ranks[0], Path(args.source)) for engine in engines}
        say(f"- One rank: {trace_mb:.1f} MB of JSON, the step window of `{Path(args.source).name}` repeated: "
            f"{row['steps']} steps, {row['kernel_count']:,} kernels, {row['calls'].height:,} collective calls; its "
            f"summary {summary_kb:.1f} KB ({summary_kb * 1000 / (trace_mb * MB):.3%} of it).")
        say("- One worker analysing one rank, **W**, the peak RSS of that worker process with its modules loaded: "
            + "; ".join(f"{engine} {one[engine]['w_mb']:.0f} MB ({ONE_WORKER[engine]})" for engine in engines) + ".")
        say("- *2 workers' worth*, the bound each run is checked against: peak RSS summed over all the run's "
            f"processes ≤ B + {args.workers} × W, where B is the peak summed RSS of the run's processes that "
            "read no trace (the parent; for Ray also its daemons: GCS, raylet, dashboard, agents) and W the "
            "engine's one-rank figure above. Whether B and the workers' peak grow with the rank count is read "
            "off the two counts' rows.")
        say()
        say("| ranks | engine | wall s | CPU s | per-rank cost (core·s) | peak RSS, all processes (MB) "
            "| workers (MB) | the rest: B (MB) | largest process (MB) "
            f"| bound B + {args.workers} × W (MB) | within |")
        say("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        found: dict[tuple[int, str], dict] = {}
        for count in counts:
            where = work / f"r{count}" if count == counts[-1] else linked(ranks[:count], work / f"r{count}")
            outputs = {}
            for engine in engines:
                outputs[engine] = work / f"out-{count}-{engine}.json"
                got = run_report(where, engine, args.workers, outputs[engine])
                got["per_rank_s"] = got["wall_s"] * args.workers / count
                bound = got["peak_others_mb"] + args.workers * one[engine]["w_mb"]
                found[count, engine] = got
                # Ray's workers are the raylet's children, ended with it and never waited for by the
                # run: their CPU time is not the run's to count.
                cpu = f"{got['cpu_s']:.1f}" if engine == "pool" else "—"
                name = engine + (" (tried again)" if got["retried"] else "")
                say(f"| {count} | {name} | {got['wall_s']:.1f} | {cpu} | {got['per_rank_s']:.2f} "
                    f"| {got['peak_tree_mb']:.0f} | {got['peak_workers_mb']:.0f} | {got['peak_others_mb']:.0f} "
                    f"| {got['peak_process_mb']:.0f} | {bound:.0f} "
                    f"| {'yes' if got['peak_tree_mb'] <= bound else '**no**'} |")
            if len(outputs) > 1:
                same = len({p.read_bytes() for p in outputs.values()}) == 1
                say(f"|  | JSON of {' and '.join(outputs)} | {'byte-identical' if same else '**DIFFERENT**'} "
                    "| | | | | | | | |")
        growth(found, one, counts, engines, args.workers, row, say)
        if not args.no_merge:
            merge_rows(work, ranks[:counts[0]], say)
        engine = "ray" if "ray" in engines else engines[0]
        lo, hi = counts[0], counts[-1]
        slope = ((found[hi, engine]["wall_s"] - found[lo, engine]["wall_s"]) / (hi - lo) * args.workers
                 if hi > lo else 0.0)
        if slope > 0:  # the slope between two counts: the start (Python, Ray) drops out
            per_rank = slope
            startup = max(0.0, found[lo, engine]["wall_s"] - lo * per_rank / args.workers)
        else:  # one count, or runs too small for the slope to rise above the noise: start included
            per_rank, startup = found[hi, engine]["per_rank_s"], 0.0
        say()
        say(f"**Estimate, not a measurement:** {hi} ranks on N machines of {args.workers} cores each, from the "
            f"{engine} runs (marginal cost {per_rank:.2f} core·s per rank, start {startup:.0f} s), "
            f"`start + ceil(ranks ÷ (N × {args.workers})) × marginal cost`; it assumes traces on storage every "
            "node reads at this machine's speed and no straggling node:")
        say()
        for n in (1, 4, 16):
            waves = math.ceil(hi / (n * args.workers))
            say(f"- N = {n}: about {startup + waves * per_rank:.0f} s ({waves} wave{'s' if waves != 1 else ''} of "
                f"up to {n * args.workers} ranks); peak memory per machine as measured for {args.workers} workers")
    finally:
        if not (args.keep and args.dir):
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()[0]
    # What the figures depend on (not where the ranks were written, nor whether they were kept).
    command = f"python bench/ranks.py --ranks {args.ranks} --size-mb {args.size_mb:g} --workers {args.workers}"
    if args.engines != ap.get_default("engines"):
        command += f" --engines {args.engines}"
    if args.source != ap.get_default("source"):
        command += f" --source {Path(args.source).name}"
    section = "\n".join([
        BEGIN, "## Many ranks: `report DIR` with the process pool and with Ray, and `merge`", "",
        f"Generated by `{command.strip()}` — rerun the script to refresh this section.", "",
        f"- Run: {when}; {machine()}; 1-minute load average {load_before:.1f} before, {load_after:.1f} after "
        "(the machine is shared: wall times move with its load, memory does not).",
        "- Each run is a fresh process (`tracekit.ranks.analyze`, no summary cache, so every rank is read; "
        "Ray: a local instance of as many CPUs as workers, started in the run and counted in it); memory is "
        "RSS sampled every 50 ms over the process and all its descendants; CPU time is the process's and every "
        "descendant's it waited for (not Ray's workers, which end with Ray's raylet: —). Summed RSS counts pages shared "
        "between processes (libraries) once per process: it overstates, never understates. The smaller "
        "count reads links to the first ranks of the larger (their `world_size` names the larger world: "
        "the report lists the others as missing; the work per rank is the same).",
        *lines, END])
    if not args.no_results:
        write_section(args.results, section, BEGIN, END)
        print(f"wrote the ranks section of {args.results}")
    return 0


def growth(found: dict, one: dict, counts: list[int], engines: list[str], workers: int, row: dict, say) -> None:
    """What grows from the smallest count to the largest: the largest worker against W (a worker
    that has read ranks before holds a little more than a fresh one), and B per rank added (the
    reducing process holds every rank's summary, and the cross-rank analysis concatenates their
    collective calls and host phase spans)."""
    lo, hi = counts[0], counts[-1]
    say()
    for engine in engines:
        small, large = found[lo, engine], found[hi, engine]
        w = one[engine]["w_mb"]
        line = (f"- {engine}: the largest worker peaked at {small['peak_process_mb']:.0f} MB with {lo} ranks and "
                f"{large['peak_process_mb']:.0f} MB with {hi} (W {w:.0f} MB); ")
        if engine == "pool":
            line += (f"B, the parent that reduces the summaries, {small['peak_others_mb']:.0f} MB then "
                     f"{large['peak_others_mb']:.0f} MB: "
                     f"{(large['peak_others_mb'] - small['peak_others_mb']) / (hi - lo):+.1f} MB per rank added "
                     f"(each rank's summary, {row['phases'].height:,} host phase spans and {row['calls'].height:,} "
                     "collective calls here, is held for the cross-rank analysis).")
        else:
            line += (f"B {small['peak_others_mb']:.0f} MB then {large['peak_others_mb']:.0f} MB, Ray's daemons' peak at "
                     "its start (the summaries are reduced after Ray has stopped).")
        say(line)


def merge_rows(work: Path, ranks: list[Path], say) -> None:
    """``tracekit merge`` of ``ranks`` (a folder of links) to a ``.json.gz``: with no summary cached
    (the analysis that estimates the clocks runs on the pool, then each rank is read again and
    written), and with them cached (the writing alone) for ``ranks`` and for its first rank alone;
    beside them, one process decoding and rewriting one rank as merge does (:data:`DECODE_ONE`),
    less what its imports take: one rank's events. The writing holds one rank at a time when
    ``ranks`` peak less than half of that above one rank."""
    cache = work / "merge-cache"
    env = {"TRACEKIT_CACHE_DIR": str(cache)}

    def merge(folder: Path, out: Path) -> dict:
        return measure([sys.executable, "-m", "tracekit", "merge", str(folder), "-o", str(out)], env)

    out = work / "merged.json.gz"
    where = linked(ranks, work / f"merge{len(ranks)}")
    cold = merge(where, out)
    warm = merge(where, out)
    alone = merge(linked(ranks[:1], work / "merge1"), work / "merged1.json.gz")  # its summary is cached
    decode = measure([sys.executable, "-c", DECODE_ONE, str(ranks[0])])
    imports = measure([sys.executable, "-c", DECODE_ONE.split("merge._Rank")[0], str(ranks[0])])
    say()
    say(f"`tracekit merge DIR -o merged.json.gz` on {len(ranks)} of these ranks "
        f"({len(ranks) * ranks[0].stat().st_size / MB:,.0f} MB of JSON in; {out.stat().st_size / MB:,.1f} MB "
        "of gzip out; the summaries cached in a folder of the run's own):")
    say()
    say("| run | wall s | CPU s | peak RSS, all processes (MB) | largest process (MB) |")
    say("|---|---:|---:|---:|---:|")
    for label, got in ((f"merge of {len(ranks)} ranks, no summary cached (analysis on {parallel_cores()} "
                        "workers, then the writing)", cold),
                       (f"merge of {len(ranks)} ranks, summaries cached (the writing alone)", warm),
                       ("merge of 1 rank, its summary cached (the writing alone)", alone),
                       ("one process decoding and rewriting one rank, nothing written", decode)):
        say(f"| {label} | {got['wall_s']:.1f} | {got['cpu_s']:.1f} | {got['peak_tree_mb']:.0f} "
            f"| {got['peak_process_mb']:.0f} |")
    one_rank = decode["peak_tree_mb"] - imports["peak_tree_mb"]  # one rank's events, decoded and rewritten
    more = warm["peak_tree_mb"] - alone["peak_tree_mb"]
    holds = more < one_rank / 2
    say()
    say(f"- One rank's events decoded and rewritten take {one_rank:.0f} MB (that process's peak, "
        f"{decode['peak_tree_mb']:.0f} MB, less its imports', {imports['peak_tree_mb']:.0f} MB). The writing of "
        f"{len(ranks)} ranks peaks {more:.0f} MB above the writing of one, "
        + ("so it holds one rank's events at a time (the rest is the summaries of the other ranks, read for the "
           "clocks)." if holds else "**so it holds more than one rank's events**."))


def parallel_cores() -> int:
    from tracekit import parallel

    return parallel.cores()


if __name__ == "__main__":
    sys.exit(main())
