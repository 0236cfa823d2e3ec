"""Every command's output on every shipped sample trace, in every format — snapshot and compare.

A refactor that must not change what users see is checked with this script: take a snapshot of
the outputs before the change (from a checkout of the old commit), one after, and compare them.

    python bench/outputs.py snapshot OUT_DIR [--tracekit CMD]   # run every case, write OUT_DIR/*
    python bench/outputs.py compare OLD_DIR NEW_DIR             # byte-compare; JSON keys listed
                                                                # in ADDED_KEYS may be new in NEW

Each case is one ``tracekit`` invocation (report / report DIR / convert + report of the Parquet /
diff with gates / check, each in term, md and json); its stdout, stderr and exit status are stored.
Paths in the outputs are the sample paths as given (relative), so two checkouts compare equal.
``--tracekit`` names the command to run (default: the ``tracekit`` command of the checkout at
``--root``, this one unless given), so the same script measures an old commit:
``--root /path/to/old/checkout``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracekit.parallel import cores

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ("linear_compile", "linear_eager", "matmul_add_compile-4096", "matmul_add_compile-64",
           "matmul_add_eager-4096", "matmul_add_eager-64", "mlp_compile-cudagraphs", "mlp_compile",
           "mlp_eager", "mlp_liger", "train_eager")
FORMATS = ("term", "md", "json")
DIFFS = (("mlp_eager", "mlp_compile"), ("mlp_eager", "mlp_liger"), ("mlp_compile", "mlp_eager"),
         ("linear_eager", "linear_compile"), ("matmul_add_eager-64", "matmul_add_compile-64"),
         ("matmul_add_eager-4096", "matmul_add_compile-4096"), ("mlp_eager", "mlp_eager"),
         ("mlp_eager", "mlp_compile-cudagraphs"), ("train_eager", "train_eager"))
GATES = ("--fail-if", "gpu_time>+5%", "--fail-if", "kernels>+0", "--fail-if", "cpu_time>+20us")
CHECKS = (("mlp_eager", "mlp_eager"), ("mlp_compile", "mlp_compile"), ("mlp_liger", "mlp_liger"),
          ("mlp_compile-cudagraphs", "mlp_compile-cudagraphs"), ("mlp_eager", "mlp_compile"))

#: JSON keys (dotted paths, ``[]`` for any list item) that a newer version may add to an output.
ADDED_KEYS: dict[str, tuple[str, ...]] = {
    "tracekit.report/1": ("kernels[].class_total_ns", "launch_gaps.idle_by_cause", "launch_gaps.steps[].cpu_span_ns",
                          "steps[].gpu_window_ns"),
    "tracekit.diff/1": ("findings",),
    "tracekit.check/1": ("items[].observed_value", "items[].expected_value", "items[].unit",
                         "items[].observed_min", "items[].observed_max", "items[].steps_met",
                         "items[].steps", "items[].op", "items[].steps_present", "items[].example"),
}


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) of every case; argv paths are relative to the checkout root."""
    out: list[tuple[str, list[str]]] = []
    for s in SAMPLES:
        for fmt in FORMATS:
            out.append((f"report__{s}.{fmt}", ["report", f"sample_traces/{s}.json.gz", "--format", fmt]))
        out.append((f"report_noet__{s}.md", ["report", f"sample_traces/{s}.json.gz", "--format", "md",
                                             "--no-execution-trace"]))
    for fmt in FORMATS:
        out.append((f"report_step__mlp_eager.{fmt}", ["report", "sample_traces/mlp_eager.json.gz",
                                                      "--step", "4", "--format", fmt]))
        out.append((f"report_ceiling__mlp_eager.{fmt}", [
            "report", "sample_traces/mlp_eager.json.gz", "--ceiling", "hbm_gbps=4256",
            "--ceiling", "bf16_tflops=704", "--format", fmt]))
        out.append((f"report_dir.{fmt}", ["report", "sample_traces", "--format", fmt]))
    for a, b in DIFFS:
        for fmt in FORMATS:
            out.append((f"diff__{a}__{b}.{fmt}", ["diff", f"sample_traces/{a}.json.gz",
                                                  f"sample_traces/{b}.json.gz", *GATES, "--format", fmt]))
    for fmt in FORMATS:
        out.append((f"diff_bytes__mlp_eager__mlp_compile.{fmt}", [
            "diff", "sample_traces/mlp_eager.json.gz", "sample_traces/mlp_compile.json.gz",
            "--fail-if", "round_trip_bytes>+0", "--fail-if", "round_trip_bytes<-1MB", "--format", fmt]))
        out.append((f"diff_unit__mlp_eager__mlp_compile.{fmt}", [
            "diff", "sample_traces/mlp_eager.json.gz", "sample_traces/mlp_compile.json.gz",
            "--unit", "mlp_fwd", "--format", fmt]))
    for trace, exp in CHECKS:
        for fmt in FORMATS:
            out.append((f"check__{trace}__{exp}.{fmt}", ["check", f"sample_traces/{trace}.json.gz",
                                                         "--expect", f"expectations/{exp}.toml",
                                                         "--format", fmt]))
    errors = [("error__missing", ["report", "sample_traces/nope.json.gz"]),
              ("error__step", ["report", "sample_traces/mlp_eager.json.gz", "--step", "99"]),
              ("error__gate", ["diff", "sample_traces/mlp_eager.json.gz", "sample_traces/mlp_eager.json.gz",
                               "--fail-if", "bogus>1"]),
              ("error__ceiling", ["report", "sample_traces/mlp_eager.json.gz", "--ceiling", "x"])]
    out += errors
    return out


def parquet_cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """Reports of Parquet files converted first (stored report) and re-analysed (``--step``)."""
    out = []
    for s in SAMPLES:
        pq = str(tmp / f"{s}.parquet")
        for fmt in FORMATS:
            out.append((f"parquet__{s}.{fmt}", ["report", pq, "--format", fmt]))
        out.append((f"parquet_noet__{s}.json", ["report", pq, "--format", "json", "--no-execution-trace"]))
    out.append(("parquet_diff__mlp_eager__mlp_compile.md", [
        "diff", str(tmp / "mlp_eager.parquet"), str(tmp / "mlp_compile.parquet"), "--format", "md"]))
    return out


def _run(cmd: list[str], root: Path, name: str, argv: list[str], out_dir: Path) -> None:
    proc = subprocess.run([*cmd, *argv], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "160", "NO_COLOR": "1"})
    (out_dir / f"{name}.out").write_text(proc.stdout)
    # The JSON of a Parquet report names the Parquet file (a temp path): keep only its basename.
    (out_dir / f"{name}.err").write_text(proc.stderr.replace(str(Path(tempfile.gettempdir())), "TMP"))
    (out_dir / f"{name}.rc").write_text(str(proc.returncode))


def snapshot(out_dir: Path, root: Path, cmd: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tk-outputs-"))
    try:
        # The Parquet copies sit beside copies of their execution traces, as a user would convert.
        for s in SAMPLES:
            subprocess.run([*cmd, "convert", f"sample_traces/{s}.json.gz", "-o", str(tmp / f"{s}.parquet")],
                           cwd=root, check=True, capture_output=True)
        with ThreadPoolExecutor(max_workers=cores()) as pool:
            jobs = [pool.submit(_run, cmd, root, n, a, out_dir) for n, a in cases(tmp)]
            jobs += [pool.submit(_run, cmd, root, n, a, out_dir) for n, a in parquet_cases(tmp)]
            for j in jobs:
                j.result()
        for f in out_dir.glob("parquet*.out"):  # the Parquet path is a temp directory
            f.write_text(f.read_text().replace(str(tmp), "TMP"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(list(out_dir.glob('*.rc')))} cases written to {out_dir}")


def _strip_added(data, schema: str):
    """``data`` without the keys :data:`ADDED_KEYS` allows for ``schema``."""
    for path in ADDED_KEYS.get(schema, ()):
        _drop(data, path.split("."))
    return data


def _drop(node, parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head[:-2] if many else head
    if not isinstance(node, dict) or key not in node:
        return
    if not rest:
        node.pop(key)
        return
    children = node[key] if many else [node[key]]
    for child in children if isinstance(children, list) else []:
        _drop(child, rest)


def compare(old: Path, new: Path) -> int:
    names = sorted(p.name for p in old.iterdir())
    missing = [n for n in names if not (new / n).exists()]
    differ = []
    for n in names:
        if n in missing:
            continue
        a, b = (old / n).read_text(), (new / n).read_text()
        if a == b:
            continue
        if n.endswith(".json.out") and a and b:
            da, db = json.loads(a), json.loads(b)
            schema = db.get("schema", "") if isinstance(db, dict) else ""
            if _strip_added(db, schema) == da:
                continue
        differ.append(n)
    for n in missing:
        print(f"missing in {new}: {n}")
    for n in differ:
        print(f"differs: {n}")
    print(f"{len(names)} files compared: {len(differ)} differ, {len(missing)} missing "
          f"(JSON keys allowed to be new: {sum(len(v) for v in ADDED_KEYS.values())} paths)")
    return 1 if differ or missing else 0


_MAIN = ("try:\n    from tracekit.commands import main\nexcept ImportError:\n"
         "    from tracekit.cli import main\nmain()")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    snap = sub.add_parser("snapshot")
    snap.add_argument("out_dir", type=Path)
    snap.add_argument("--root", type=Path, default=ROOT, help="checkout whose tracekit runs")
    snap.add_argument("--tracekit", default=None, help="command to run (default: the tracekit command of --root)")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("old", type=Path)
    cmp_.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.what == "snapshot":
        # Older checkouts have tracekit.cli, newer tracekit.commands: import whichever exists.
        cmd = args.tracekit.split() if args.tracekit else [sys.executable, "-c", _MAIN]
        snapshot(args.out_dir.resolve(), args.root.resolve(), cmd)
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
