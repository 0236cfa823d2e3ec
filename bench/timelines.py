"""What the step timelines cost on a big trace: the HTML report against the Markdown one.

    python bench/timelines.py [--src sample_traces/train_eager.json.gz] [--size-mb 1000] [--keep DIR]

Builds a synthetic trace with ``bench/synth.py`` (the source's steps replicated to ``--size-mb`` MB of
JSON) in a temporary folder, deleted afterwards unless ``--keep`` names a folder to build it in, then

1. times the commands as a user runs them: ``tracekit report T --format md -o T.md`` and, when the
   ``html`` format exists, ``--format html -o T.html`` (each a fresh process: load + analyses +
   render); the issue's bound is HTML ≤ 2× Markdown;
2. in one process, times the parts the HTML adds: :func:`tracekit.analyses.timeline.analyze` over
   every unit, and :func:`tracekit.render.timeline.draw` of every unit, with the marks drawn and
   left out and the SVG bytes.

Prints one line per figure and the load average (the machine may be shared: read the figures
with it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare import tracekit_cmd  # noqa: E402
from synth import synthesize  # noqa: E402


def timed_command(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(tracekit_cmd(*args), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "sample_traces" / "train_eager.json.gz")
    ap.add_argument("--size-mb", type=float, default=1000)
    ap.add_argument("--keep", type=Path, default=None, help="build the trace in this folder and keep it")
    ap.add_argument("--repeat", type=int, default=1, help="time each command this many times (best kept)")
    args = ap.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="tk-timelines-"))
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / f"synth-{args.size_mb:g}mb.json"
    try:
        if not trace.exists():
            t0 = time.perf_counter()
            synthesize(args.src, trace, args.size_mb)
            print(f"synthesized {trace.name}: {trace.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s")
        from tracekit.render import FORMATS

        md = min(timed_command("report", str(trace), "--format", "md", "-o", str(folder / "r.md"))
                 for _ in range(args.repeat))
        print(f"report --format md   : {md:6.2f} s")
        if "html" in FORMATS:
            html = min(timed_command("report", str(trace), "--format", "html", "-o", str(folder / "r.html"))
                       for _ in range(args.repeat))
            print(f"report --format html : {html:6.2f} s  ({html / md:.2f}x Markdown; bound 2x), "
                  f"{(folder / 'r.html').stat().st_size / 1e6:,.1f} MB")

        import tracekit
        from tracekit.analyses import timeline
        from tracekit.render import timeline as draw_mod

        session = tracekit.open(trace)
        report = session.report()
        t0 = time.perf_counter()
        tl = timeline.analyze(session.analyses(), default_step=report.path_step)
        analysed = time.perf_counter() - t0
        t0 = time.perf_counter()
        svgs = [draw_mod.draw(step) for step in tl.steps]
        drawn = time.perf_counter() - t0
        cpu = sum(s.cpu.height for s in tl.steps)
        gpu = sum(s.gpu.height for s in tl.steps)
        left = sum(sum(s.left_out.values()) for s in tl.steps)
        print(f"events {session.trace.meta.event_count:,}, units {len(tl.steps):,}")
        print(f"timeline.analyze (all units): {analysed:6.2f} s; marks kept: {cpu:,} CPU, {gpu:,} GPU; left out {left:,}")
        print(f"timeline.draw (all units)   : {drawn:6.2f} s; SVG {sum(map(len, svgs)) / 1e6:,.1f} MB")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
