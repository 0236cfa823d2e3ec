"""Benchmark :func:`tracekit.load.load` against plain ``json.load`` on a large synthetic trace.

The trace is built by ``bench/synth.py`` from a real capture (the newest
``sample_traces/train_*.json.gz`` when present, else the hand-made H200 fixture), replicating its
steps to ``--size-mb`` MB of JSON, written as JSON or gzip (``--gzip``) under ``--work-dir``
(default ``/tmp/tracekit-bench``; the file is reused when it already exists). Each reader then runs
in its own fresh subprocess, so the peak RSS reported (the child's ``VmHWM``) belongs to that reader
alone. Times cover path -> result only (interpreter start and imports excluded, and reported
separately as the baseline RSS). MB/s is JSON megabytes (10^6 bytes, uncompressed) per second.

    python bench/load.py --size-mb 100 1000          # JSON, two sizes, one table
    python bench/load.py --size-mb 1000 --gzip --repeat 3 --json-repeat 1

This machine (2 shared vCPUs) varies by +-25% from run to run, hence best and median of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from synth import synthesize  # noqa: E402

from tracekit.parallel import cores  # noqa: E402

MB = 1_000_000

_CHILD = r"""
import json, os, sys, time, gc
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
tool, path = sys.argv[1], sys.argv[2]
if tool == "tracekit":
    from tracekit.load import load
    base = hwm()
    t0 = time.perf_counter()
    trace = load(path)
    secs = time.perf_counter() - t0
    info = {name: getattr(trace, name).height for name in
            ("ops", "launches", "gpu", "overhead", "flows", "memory", "threads", "steps")}
    info["events"] = trace.meta.event_count
    info["time_format"] = trace.meta.time_format
else:
    import gzip
    base = hwm()
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        doc = json.load(fh)
    secs = time.perf_counter() - t0
    info = {"events": len(doc["traceEvents"])}
print(json.dumps({"seconds": secs, "peak_rss": hwm(), "base_rss": base, "info": info}))
"""


def default_source() -> Path:
    real = sorted((ROOT / "sample_traces").glob("train_*.json.gz"), key=lambda p: p.stat().st_mtime)
    return real[-1] if real else ROOT / "tests" / "fixtures" / "kineto_2025_h200.json"


def run_child(tool: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _CHILD, tool, str(path)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{tool} failed on {path}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="tracekit.load vs json.load: MB/s and peak RSS")
    ap.add_argument("--src", type=Path, default=None, help="trace whose steps are replicated")
    ap.add_argument("--size-mb", type=float, nargs="+", default=[100.0], help="JSON size(s) in MB")
    ap.add_argument("--gzip", action="store_true", help="write and read gzip instead of JSON")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/tracekit-bench"))
    ap.add_argument("--tools", default="tracekit,json", help="comma list: tracekit,json")
    ap.add_argument("--repeat", type=int, default=3, help="runs of tracekit.load per size")
    ap.add_argument("--json-repeat", type=int, default=1, help="runs of json.load per size")
    ap.add_argument("--regen", action="store_true", help="rebuild the synthetic file even if present")
    args = ap.parse_args(argv)
    src = args.src or default_source()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    print(f"source: {src}  ({src.stat().st_size / MB:.2f} MB on disk); machine: "
          f"{cores()} CPUs; python {sys.version.split()[0]}")
    rows = []
    for size in args.size_mb:
        suffix = ".json.gz" if args.gzip else ".json"
        out = args.work_dir / f"synth_{src.name.split('.')[0]}_{size:g}MB{suffix}"
        size_file = out.with_name(out.name + ".size")
        if args.regen or not out.exists() or not size_file.exists():
            print(f"building {out} ...", flush=True)
            summary = synthesize(src, out, size, gzip=args.gzip)
            size_file.write_text(str(summary["json_bytes"]))
        json_bytes = int(size_file.read_text())
        file_bytes = out.stat().st_size
        for tool in args.tools.split(","):
            runs = []
            for _ in range(args.repeat if tool == "tracekit" else args.json_repeat):
                res = run_child(tool, out)
                runs.append(res)
                print(f"  {tool:9s} {size:g} MB: {res['seconds']:.2f} s, peak RSS "
                      f"{res['peak_rss'] / MB:.0f} MB", flush=True)
            rows.append((size, tool, file_bytes, json_bytes, runs))
            if tool == "tracekit":
                print(f"  frames: {runs[0]['info']}", flush=True)
    print()
    fmt = "{:>8} {:>5} {:>14} {:>8} {:>9} {:>5} {:>8} {:>8} {:>10} {:>10} {:>9} {:>8} {:>8}"
    print(fmt.format("JSON MB", "gzip", "reader", "file MB", "events", "runs", "best s",
                     "median s", "MB/s best", "MB/s med", "peak RSS", "RSS/JSON", "RSS/file"))
    for size, tool, file_bytes, json_bytes, runs in rows:
        secs = sorted(r["seconds"] for r in runs)
        peak = max(r["peak_rss"] for r in runs)
        print(fmt.format(
            f"{json_bytes / MB:.0f}", "yes" if args.gzip else "no",
            "tracekit.load" if tool == "tracekit" else "json.load", f"{file_bytes / MB:.0f}",
            runs[0]["info"]["events"], len(runs), f"{secs[0]:.2f}", f"{statistics.median(secs):.2f}",
            f"{json_bytes / MB / secs[0]:.1f}", f"{json_bytes / MB / statistics.median(secs):.1f}",
            f"{peak / MB:.0f} MB", f"{peak / json_bytes:.2f}x", f"{peak / file_bytes:.2f}x"))
    print("\nMB/s = uncompressed JSON MB (10^6 B) / seconds, path -> result, imports excluded. "
          "Peak RSS = the child's VmHWM (interpreter and imports included, about "
          f"{rows[0][4][0]['base_rss'] / MB:.0f} MB for the first reader).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
