"""What the memory analysis adds to a report, on a trace with over a million ``[memory]`` events.

    python bench/memory.py [TRACE] [--memory-events N] [--repeat R] [--json-mb MB]

TRACE defaults to the H200 GPT-2 training step captured with ``profile_memory=True``
(``sample_traces/memory/train_eager-memory.json.gz``: 6,330 ``[memory]`` events in 3 steps). Its
step window is replicated as ``bench/synth.py`` replicates it — every frame (ops, launch calls, GPU
work, flows, memory events) copied with times shifted by one window, ids shifted past the largest
(correlation, External id, Record function id, sequence numbers, flow ids, ``idx``) and step numbers
continued — until the trace holds at least N memory events (default 1,000,000). The copies are made
on the loaded frames rather than written as JSON and read back: the same trace as a file would be
several GB, and the load is not what is measured here (``bench/load.py`` measures it).

Then the report (``tracekit.results.report.build`` of ``tracekit.analyses.pipeline.run``) runs R times with
the memory analysis and R times without it (the pipeline's ``memory.analyze`` replaced by one
returning an empty :class:`~tracekit.analyses.memory.MemoryReport`), alternating, and the memory
analysis alone R times. Prints wall and CPU (process) time of each, best of R, and the share the
memory analysis adds to the report; the machine's load average is printed too (others' jobs inflate
wall time; CPU time is the steadier figure).

``--json-mb MB`` also writes a trace of about MB megabytes of JSON with ``bench/synth.py`` (the same
replication, as a file) and times what ``tracekit report`` does with it — load, then build — with and
without the memory analysis: the share the analysis adds to the whole report.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's tracekit

import tracekit  # noqa: E402
from tracekit.results import report as report_mod  # noqa: E402
from tracekit.analyses import attribution, memory, pipeline  # noqa: E402
from tracekit.trace import Trace  # noqa: E402

DEFAULT = ROOT / "sample_traces" / "memory" / "train_eager-memory.json.gz"
#: Id columns shifted per copy, per frame.
_IDS = {"ops": ("external_id", "record_function_id", "sequence_number"),
        "launches": ("correlation", "external_id"), "gpu": ("correlation", "external_id"), "flows": ("id",)}
_TIMED = ("ops", "launches", "gpu", "overhead", "flows", "memory")


def replicate(trace: Trace, min_memory_events: int) -> Trace:
    """``trace``'s step window repeated until it holds ``min_memory_events`` memory events."""
    steps = trace.steps
    start, end = int(steps["ts"].min()), int(steps["end"].max())
    window = end - start
    frames = {name: getattr(trace, name).filter((pl.col("ts") >= start) & (pl.col("ts") < end)) for name in _TIMED}
    per_copy = frames["memory"].height
    copies = -(-min_memory_events // per_copy)
    idx_shift = max(int(getattr(trace, n)["idx"].max() or 0) for n in _TIMED) + 1
    id_shift = {c: max(int(getattr(trace, n)[c].max() or 0) for n, cols in _IDS.items() if c in cols) + 1
                for cols in _IDS.values() for c in cols}
    out = {}
    for name, frame in frames.items():
        parts = []
        for k in range(copies):
            shifted = [pl.col("ts") + k * window, (pl.col("idx").cast(pl.Int64) + k * idx_shift).cast(pl.UInt32)]
            if "end" in frame.columns:
                shifted.append(pl.col("end") + k * window)
            shifted += [pl.col(c) + k * id_shift[c] for c in _IDS.get(name, ())]
            parts.append(frame.with_columns(shifted))
        out[name] = pl.concat(parts)
    n = steps.height
    new_steps = pl.concat([steps.with_columns(pl.col("ts") + k * window, pl.col("end") + k * window,
                                              number=pl.col("number") + k * n,
                                              name=pl.lit("ProfilerStep#") + (pl.col("number") + k * n).cast(pl.String))
                           for k in range(copies)])
    return Trace(meta=trace.meta, threads=trace.threads, steps=new_steps, **out)


def _timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


_MEMORY_ANALYSIS = memory.analyze


def _memory_analysis(on: bool) -> None:
    """The pipeline's memory analysis: the real one, or one that finds nothing (``on`` False)."""
    memory.analyze = _MEMORY_ANALYSIS if on else (lambda trace, tree_ops=None: memory.MemoryReport())


def _report(trace) -> None:
    report_mod.build(pipeline.run(trace))


def _whole_report(args: argparse.Namespace) -> None:
    """Load + build of a synthesized JSON trace, with and without the memory analysis."""
    import tempfile

    sys.path.insert(0, str(ROOT / "bench"))
    from synth import synthesize

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.json"
        synthesize(args.trace, path, args.json_mb)
        runs: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
        for _ in range(args.repeat):
            for name in ("with", "without"):
                _memory_analysis(name == "with")
                runs[name].append(_timed(lambda: _report(tracekit.open(path).trace)))
        _memory_analysis(True)
        events = tracekit.open(path).trace.memory.height
    (w_wall, w_cpu), (o_wall, o_cpu) = ((min(w for w, _ in r), min(c for _, c in r)) for r in runs.values())
    print(f"JSON {args.json_mb:.0f} MB ({events:,} memory events): load + build with memory wall {w_wall:.2f} s "
          f"cpu {w_cpu:.2f} s; without wall {o_wall:.2f} s cpu {o_cpu:.2f} s; added wall "
          f"{100 * (w_wall - o_wall) / o_wall:.1f} %, cpu {100 * (w_cpu - o_cpu) / o_cpu:.1f} % "
          "(cpu: this process only; the load's share workers are other processes)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default=str(DEFAULT))
    parser.add_argument("--memory-events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json-mb", type=float, default=0)
    args = parser.parse_args(argv)
    if args.json_mb:
        _whole_report(args)
    source = tracekit.open(args.trace).trace
    t0 = time.perf_counter()
    big = replicate(source, args.memory_events)
    rows = sum(getattr(big, n).height for n in _TIMED)
    print(f"trace: {Path(args.trace).name} x {big.steps.height // source.steps.height} copies of its step window: "
          f"{big.memory.height:,} memory events, {rows:,} rows in all, {big.steps.height} steps "
          f"(built in {time.perf_counter() - t0:.1f} s)")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with_memory, without, alone = [], [], []
    tree = attribution.analyze(big).tree.ops
    for _ in range(args.repeat):
        _memory_analysis(True)
        with_memory.append(_timed(lambda: _report(big)))
        _memory_analysis(False)
        without.append(_timed(lambda: _report(big)))
        _memory_analysis(True)
        alone.append(_timed(lambda: memory.analyze(big, tree)))
    best = {name: (min(w for w, _ in runs), min(c for _, c in runs))
            for name, runs in (("report with memory", with_memory), ("report without memory", without),
                               ("memory analysis alone", alone))}
    for name, (wall, cpu) in best.items():
        print(f"{name:24s} wall {wall:7.2f} s   cpu {cpu:7.2f} s   (best of {args.repeat})")
    base_wall, base_cpu = best["report without memory"]
    for label, (wall, cpu) in (("added (with - without)", best["report with memory"]),
                               ("added (analysis alone)", best["memory analysis alone"])):
        extra_wall = wall - base_wall if label.startswith("added (with") else wall
        extra_cpu = cpu - base_cpu if label.startswith("added (with") else cpu
        print(f"{label:24s} wall {100 * extra_wall / base_wall:6.1f} %   cpu {100 * extra_cpu / base_cpu:6.1f} % "
              "of the report without memory")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
