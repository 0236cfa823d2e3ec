"""The kernel taxonomy measured: accuracy on real names, speed on many and on hostile names, and how much
kernel time of real traces changes class against an older revision of the rules.

    python bench/classify.py                         # accuracy + speed
    python bench/classify.py --before REV TRACE...   # + kernel time whose class changed since REV

Accuracy reads tests/data/real_kernel_names.json (the tuned table) and tests/data/heldout_kernel_names.json
(names gathered after the rules were written) and prints class+library and class-only accuracy.

Speed: ``classify_frame`` on a frame of N distinct real-looking names (each real name of the table made
unique by a suffix or an inserted token, so nothing is served from the cache), on 20,000 distinct names of
about 2 KB (a real name with a long random template argument), and ``classify_kernel`` on hostile names of
300,000 characters (runs of what the rules look for, without what completes a match).

Class changes: each TRACE is loaded and attributed with this checkout (kernel name, launch API, innermost CPU
op, duration); every distinct kernel is classified by the current rules and by the rules of ``--before``
(``tracekit/classify`` of that revision, extracted with ``git archive`` into a temporary directory and run
in a child process), and the kernel time whose class (or library) differs is printed per trace, with the
class totals before and after. Traces can also be taken from the folder named by TRACEKIT_REAL_TRACES.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
_OLD_CLASSIFIER = """
import json, sys
from tracekit.classify import classify_kernel
out = []
for name, api, op in json.load(sys.stdin):
    info = classify_kernel(name, launch_api=api, cpu_op=op)
    out.append([info.kernel_class, info.library])
json.dump(out, sys.stdout)
"""


def accuracy() -> None:
    from tracekit.classify import classify_kernel

    for label, path in (("tuned table", DATA / "real_kernel_names.json"),
                        ("held-out", DATA / "heldout_kernel_names.json")):
        rows = json.loads(path.read_text())["cases"]
        right = class_right = 0
        misses = []
        for row in rows:
            info = classify_kernel(row["name"], kind=row["kind"], launch_api=row["launch_api"],
                                   cpu_op=row.get("cpu_op"))
            class_right += info.kernel_class == row["kernel_class"]
            ok = (info.kernel_class, info.library) == (row["kernel_class"], row["library"])
            right += ok
            if not ok:
                misses.append(f"    expected {row['kernel_class']}/{row['library']}, got {info.kernel_class}/"
                              f"{info.library} ({info.rule}): {row['name'][:90]}")
        print(f"{label:12} {len(rows):4} names: class+library {right}/{len(rows)} ({100 * right / len(rows):.1f}%), "
              f"class {class_right}/{len(rows)} ({100 * class_right / len(rows):.1f}%)")
        for line in misses:
            print(line)


def speed(n: int) -> None:
    import polars as pl

    from tracekit.classify import classify_frame, classify_kernel
    from tracekit.classify.rules import _classify

    base = [r["name"] for r in json.loads((DATA / "real_kernel_names.json").read_text())["cases"]]
    names = []
    for i in range(n):
        b = base[i % len(base)]
        names.append(f"{b}_{i}" if i % 2 else f"{b[: len(b) // 2]}x{i}{b[len(b) // 2:]}")
    frame = pl.DataFrame({"name": names, "kind": ["kernel"] * n})
    _classify.cache_clear()
    t0 = time.perf_counter()
    out = classify_frame(frame)
    took = time.perf_counter() - t0
    mean_len = sum(map(len, names)) / n
    print(f"classify_frame: {n:,} distinct names (mean {mean_len:.0f} chars) in {took:.2f} s "
          f"({1e6 * took / n:.0f} us/name); {out['kernel_class'].n_unique()} classes")
    # Many long distinct names (generated code, a name per shape): every name is read by every
    # substring test of the table unless the tests share one scan (rules.classify_many).
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyz_0123456789"
    long_names = [f"{base[i % len(base)]}<{''.join(rng.choice(alphabet) for _ in range(2000))}>{i}"
                  for i in range(20_000)]
    long_frame = pl.DataFrame({"name": long_names, "kind": ["kernel"] * len(long_names)})
    _classify.cache_clear()
    t0 = time.perf_counter()
    classify_frame(long_frame)
    took = time.perf_counter() - t0
    print(f"classify_frame: {len(long_names):,} distinct names of ~2 KB in {took:.2f} s "
          f"({1e6 * took / len(long_names):.0f} us/name)")
    long = 300_000
    hostile = {
        "letters": "a" * long,
        "python-private": "_" + "a_" * (long // 2),
        "namespaces": "void " + "a::" * (long // 3) + "<",
        "inductor": "triton_poi_fused_" + "add_" * (long // 4) + "0",
        "xmma": "sm90_xmma_gemm_" + "a1" * (long // 2),
        "cutlass": "cutlass" * (long // 7),
        "attention": "attention_" + "a_" * (long // 2),
        "templates": "void at::native::vectorized_elementwise_kernel<" + "<" * long,
        "mangled": "_Z" + "N1a" * (long // 3) + "E",
    }
    worst = 0.0
    for label, name in hostile.items():
        _classify.cache_clear()
        t0 = time.perf_counter()
        classify_kernel(name)
        ms = 1e3 * (time.perf_counter() - t0)
        worst = max(worst, ms)
        print(f"  {len(name):,}-char name ({label}): {ms:.1f} ms")
    print(f"hostile 300k-char names: worst {worst:.1f} ms")


def _old_answers(rev: str, keys: list[tuple]) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "tracekit/classify"],
                                 check=True, capture_output=True).stdout
        archive_path = Path(tmp) / "old.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tmp, filter="data")
        (Path(tmp) / "tracekit" / "__init__.py").write_text("")
        env = {**os.environ, "PYTHONPATH": tmp}
        done = subprocess.run([sys.executable, "-c", _OLD_CLASSIFIER], input=json.dumps(keys), text=True,
                              capture_output=True, env=env, cwd=tmp, check=True)
    return [tuple(x) for x in json.loads(done.stdout)]


def class_changes(rev: str, traces: list[Path]) -> None:
    import polars as pl

    import tracekit
    from tracekit.analyses import attribution

    total_all = changed_all = 0
    before_all: dict[str, int] = defaultdict(int)
    after_all: dict[str, int] = defaultdict(int)
    print(f"kernel time whose class changed, rules of {rev} -> this checkout:")
    for path in traces:
        try:
            gpu = attribution.analyze(tracekit.open(path).trace).gpu
        except Exception as exc:  # noqa: BLE001 - a trace this checkout cannot load is reported, not fatal
            print(f"  {path.name}: not loaded ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        gpu = gpu.filter(pl.col("kind") == "kernel")
        if gpu.height == 0:
            print(f"  {path.name}: no kernels")
            continue
        cols = [c if c in gpu.columns else None for c in ("launch_api", "cpu_op")]
        frame = gpu.select(
            "name", "dur", "kernel_class", "library",
            *(pl.col(c).cast(pl.String) if c else pl.lit(None, dtype=pl.String).alias(n)
              for c, n in zip(cols, ("launch_api", "cpu_op"))),
        )
        keys = frame.select("name", "launch_api", "cpu_op").unique(maintain_order=True)
        old = _old_answers(rev, [list(r) for r in keys.iter_rows()])
        keys = keys.with_columns(pl.Series("old_class", [o[0] for o in old]), pl.Series("old_library", [o[1] for o in old]))
        joined = frame.join(keys, on=["name", "launch_api", "cpu_op"], how="left", nulls_equal=True)
        total = int(joined["dur"].sum())
        cls_changed = int(joined.filter(pl.col("kernel_class") != pl.col("old_class"))["dur"].sum())
        lib_changed = int(joined.filter((pl.col("kernel_class") != pl.col("old_class"))
                                        | (pl.col("library") != pl.col("old_library")))["dur"].sum())
        names_changed = joined.filter(pl.col("kernel_class") != pl.col("old_class"))["name"].n_unique()
        total_all += total
        changed_all += cls_changed
        for row in joined.group_by("old_class").agg(pl.col("dur").sum()).iter_rows():
            before_all[row[0]] += row[1]
        for row in joined.group_by("kernel_class").agg(pl.col("dur").sum()).iter_rows():
            after_all[row[0]] += row[1]
        moves = (joined.filter(pl.col("kernel_class") != pl.col("old_class"))
                 .group_by("old_class", "kernel_class").agg(pl.col("dur").sum()).sort("dur", descending=True))
        move_text = ", ".join(f"{a}->{b} {100 * d / total:.1f}%" for a, b, d in moves.head(4).iter_rows())
        print(f"  {path.name}: {100 * cls_changed / total:.1f}% of kernel time changes class "
              f"({names_changed} distinct names; class or library: {100 * lib_changed / total:.1f}%)"
              + (f" [{move_text}]" if move_text else ""))
    if total_all:
        print(f"all traces: {100 * changed_all / total_all:.1f}% of {total_all / 1e6:.1f} ms kernel time changes class")
        print("  class share of kernel time, before -> after:")
        for cls in sorted(set(before_all) | set(after_all), key=lambda c: -after_all.get(c, 0)):
            print(f"    {cls:14} {100 * before_all.get(cls, 0) / total_all:5.1f}% -> {100 * after_all.get(cls, 0) / total_all:5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="traces for --before (also: $TRACEKIT_REAL_TRACES)")
    parser.add_argument("--before", help="git revision whose rules to compare kernel-time classes against")
    parser.add_argument("--names", type=int, default=50_000, help="distinct names for the speed figure")
    args = parser.parse_args()
    accuracy()
    speed(args.names)
    if args.before:
        traces = list(args.traces)
        folder = os.environ.get("TRACEKIT_REAL_TRACES")
        if not traces and folder:
            traces = sorted(Path(folder).glob("*.json.gz"))
        class_changes(args.before, traces)


if __name__ == "__main__":
    main()
