"""``tracekit report DIR`` on many large ranks: wall time and peak memory with the process pool and
with Ray on this machine, the cost of one rank, and an estimate for a cluster.

    python bench/ranks.py [--ranks 8,32] [--size-mb 100] [--workers 2] [--engines pool,ray]
                          [--source TRACE] [--dir DIR] [--keep]

Traces: ``bench/synth.py`` replicates the step window of ``--source`` (default: the shipped GPT-2
training step, ``sample_traces/train_eager.json.gz``; a real NCCL rank such as the public DLRM ones
adds collectives to match) until one trace holds ``--size-mb`` MB of JSON; each rank is that trace
with ``distributedInfo`` (``rank``, ``world_size``) put in front, as ``tests/factory.py``'s
``copy_as_rank`` sets it. The largest count's ranks are written once (plain JSON, ``--dir`` or a
temporary folder; ``32 × 100 MB`` is 3.2 GB of disk) and the smaller counts use a folder of links
to the first of them (naming the larger world: the report lists the other ranks as missing).

Runs: for each count and engine, a fresh Python process runs :func:`tracekit.ranks.analyze` with
``--workers`` workers (the pool's processes; for Ray, a local instance of that many CPUs, started
in the run and counted in it) and no summary cache, so every rank is read. Measured: wall time of
the process, and peak resident memory of it and all its descendants together (sampled every 50 ms
with psutil: the pool's workers, Ray's raylet, object store and workers), and of its largest single
process. The JSON reports of the engines are compared byte for byte.

Printed: a Markdown table per run, the per-rank cost (wall × workers ÷ ranks: the seconds of one
core that one rank takes, start included) and the size of one summary; then, **as an estimate**
from the Ray runs (the marginal per-rank cost: the slope between the smallest and largest count,
and the start: what the smallest run's wall leaves), the wall time on N machines of ``--workers``
cores each, ``start + ceil(ranks ÷ (N × workers)) × marginal cost``, which
assumes what this machine cannot show: traces on storage every node reads at this machine's speed,
and no straggling node.
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

MB = 1_000_000
RUN = """
import json, sys, time
from tracekit import ranks
directory, engine, workers, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if engine == "ray":
    import ray
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
result = ranks.analyze(directory, workers=workers, engine=engine, cache=False)
from tracekit.render import renderer_for
with open(out, "w") as f:
    renderer_for("json").render(result, f)
"""


def make_ranks(source: Path, where: Path, count: int, size_mb: float) -> list[Path]:
    """``count`` rank traces of about ``size_mb`` MB of JSON in ``where`` (module docstring)."""
    where.mkdir(parents=True, exist_ok=True)
    base = where / ".base.json"
    if not base.exists():
        synth.synthesize(source, base, size_mb)
    body = base.read_bytes()
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


def measure(directory: Path, engine: str, workers: int, out: Path) -> dict:
    """Wall time and peak memory of one run in a fresh process (module docstring)."""
    import psutil

    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(directory), engine, str(workers), str(out)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    peak_sum = peak_one = 0
    watched = psutil.Process(proc.pid)
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_sum, peak_one
        while not stop.is_set():
            try:
                tree = [watched, *watched.children(recursive=True)]
            except psutil.Error:
                break
            sizes = []
            for p in tree:
                try:
                    sizes.append(p.memory_info().rss)
                except psutil.Error:
                    pass
            peak_sum, peak_one = max(peak_sum, sum(sizes)), max(peak_one, max(sizes, default=0))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{engine} on {directory} failed ({proc.returncode}): {err.strip()[-2000:]}")
    return {"wall_s": wall, "peak_tree_mb": peak_sum / MB, "peak_process_mb": peak_one / MB}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,32", help="rank counts, comma-separated (default 8,32)")
    ap.add_argument("--size-mb", type=float, default=100, help="MB of JSON per rank (default 100)")
    ap.add_argument("--workers", type=int, default=2, help="workers of each engine (default 2)")
    ap.add_argument("--engines", default="pool,ray", help="pool, ray or both (default)")
    ap.add_argument("--source", default=str(ROOT / "sample_traces" / "train_eager.json.gz"),
                    help="the trace whose steps each rank replicates")
    ap.add_argument("--dir", default=None, help="where the ranks are written (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the ranks written (with --dir)")
    args = ap.parse_args(argv)
    counts = sorted({int(c) for c in args.ranks.split(",")})
    engines = [e for e in args.engines.split(",") if e]
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tracekit-ranks-bench-"))
    from tracekit.ranks import summary

    try:
        print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; {args.workers} workers; "
              f"source {Path(args.source).name}")
        ranks = make_ranks(Path(args.source), work / f"r{counts[-1]}", counts[-1], args.size_mb)
        trace_mb = ranks[0].stat().st_size / MB
        summary_kb = len(summary.summary_of(str(ranks[0]))) / 1000
        print(f"one rank: {trace_mb:.1f} MB of JSON; its summary {summary_kb:.1f} KB "
              f"({summary_kb * 1000 / (trace_mb * MB):.4%} of it)\n")
        print("| ranks | engine | wall s | per-rank cost (core·s) | peak RSS, all processes (MB) "
              "| peak RSS, largest process (MB) |")
        print("|---:|---|---:|---:|---:|---:|")
        found: dict[tuple[int, str], dict] = {}
        for count in counts:
            where = work / f"r{count}" if count == counts[-1] else linked(ranks[:count], work / f"r{count}")
            outputs = {}
            for engine in engines:
                outputs[engine] = work / f"out-{count}-{engine}.json"
                got = measure(where, engine, args.workers, outputs[engine])
                got["per_rank_s"] = got["wall_s"] * args.workers / count
                found[count, engine] = got
                print(f"| {count} | {engine} | {got['wall_s']:.1f} | {got['per_rank_s']:.2f} "
                      f"| {got['peak_tree_mb']:.0f} | {got['peak_process_mb']:.0f} |", flush=True)
            if len(outputs) > 1:
                same = len({p.read_bytes() for p in outputs.values()}) == 1
                print(f"|  | JSON of {' and '.join(outputs)} | {'identical' if same else 'DIFFERENT'} | | | |")
        engine = "ray" if "ray" in engines else engines[0]
        lo, hi = counts[0], counts[-1]
        slope = ((found[hi, engine]["wall_s"] - found[lo, engine]["wall_s"]) / (hi - lo) * args.workers
                 if hi > lo else 0.0)
        if slope > 0:  # the slope between two counts: the start (Python, Ray) drops out
            per_rank = slope
            startup = max(0.0, found[lo, engine]["wall_s"] - lo * per_rank / args.workers)
        else:  # one count, or runs too small for the slope to rise above the noise: start included

            per_rank, startup = found[hi, engine]["per_rank_s"], 0.0
        print(f"\nEstimate, not a measurement: {hi} ranks on N machines of {args.workers} cores each, from the "
              f"{engine} runs (marginal cost {per_rank:.2f} core·s per rank, start {startup:.0f} s):")
        for n in (1, 4, 16):
            waves = math.ceil(hi / (n * args.workers))
            print(f"- N = {n}: about {startup + waves * per_rank:.0f} s ({waves} wave{'s' if waves != 1 else ''} of "
                  f"up to {n * args.workers} ranks); peak memory per machine as measured for {args.workers} workers")
    finally:
        if not (args.keep and args.dir):
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
