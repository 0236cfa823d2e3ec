"""``tracekit annotate`` on a big trace: wall time and peak RSS beside ``tracekit report`` of the same file.

A trace of ``--size-mb`` MB of JSON is built by ``bench/synth.py`` from a real capture (default
``sample_traces/train_eager.json.gz``), plain and gzip. Each run is a child process measured by
``bench/compare.py``'s wrapper (wall seconds, peak RSS: the largest process's VmHWM or the sampled
sum over its worker processes, whichever is larger): ``tracekit report -o report.md``, then
``tracekit annotate`` to ``.json.gz`` and ``.json``; the annotated output is reloaded once to check it
reports the same steps with its annotations set aside. Prints one table; every file it made is
deleted at the end (``--keep`` keeps them).

    python bench/annotate.py                  # 300 MB
    python bench/annotate.py --size-mb 1000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from compare import child_env, measure, tracekit_cmd  # noqa: E402
from synth import synthesize  # noqa: E402

MB = 1_000_000

_FACTS = ("import json, sys, tracekit; r = tracekit.open(sys.argv[1]).report(); "
          "print(json.dumps({'steps': r.facts.step_numbers, 'annotations': r.facts.annotations, "
          "'events': r.facts.event_count}))")


def _facts(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _FACTS, str(path)], capture_output=True, text=True,
                         env=child_env(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "sample_traces" / "train_eager.json.gz")
    parser.add_argument("--size-mb", type=float, default=300)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--keep", action="store_true", help="keep the files (printed) instead of deleting them")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tracekit-annotate-"))
    try:
        rows = []
        for gz in (False, True):
            trace = work / f"synth.json{'.gz' if gz else ''}"
            synthesize(args.src, trace, args.size_mb, gzip=gz)
            size = trace.stat().st_size
            runs = [("report -o report.md", tracekit_cmd("report", str(trace), "-o", str(work / "report.md")))]
            for suffix in (".json.gz", ".json"):
                runs.append((f"annotate -o out{suffix}",
                             tracekit_cmd("annotate", str(trace), "-o", str(work / f"out{suffix}"))))
            for label, cmd in runs:
                m = measure(cmd, args.timeout)
                if not m.get("ok"):
                    raise SystemExit(f"{label} failed: {m.get('stderr', '')[-500:]}")
                out = work / label.split("-o ")[1] if label.startswith("annotate") else None
                rows.append((trace.name, size, label, m["seconds"], m["peak_rss"],
                             out.stat().st_size if out else None))
            original, again = _facts(trace), _facts(work / "out.json.gz")
            assert again["steps"] == original["steps"] and again["annotations"] > 0, (original, again)
            assert again["events"] == original["events"] + again["annotations"]
            rows.append((trace.name, size, f"reloaded: {len(again['steps'])} steps, "
                         f"{again['annotations']:,} annotation events set aside", None, None, None))
            for p in work.glob("out.json*"):
                p.unlink()
            if not args.keep:
                trace.unlink()
        print("| input | input MB | run | wall s | peak RSS MB | output MB |\n|---|---:|---|---:|---:|---:|")
        for name, size, label, secs, rss, out in rows:
            cell = (lambda v, f: "" if v is None else f.format(v))
            print(f"| {name} | {size / MB:,.0f} | {label} | {cell(secs, '{:.2f}')} | "
                  f"{cell(rss and rss / MB, '{:,.0f}')} | {cell(out and out / MB, '{:,.0f}')} |")
    finally:
        if args.keep:
            print(f"files kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
