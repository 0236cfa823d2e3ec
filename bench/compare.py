"""Big traces side by side: ``tracekit report``/``diff``/Parquet re-analysis vs HTA vs ``json.load``.

One run on one machine, every measurement a separate child process:

* traces built by ``bench/synth.py`` from a real capture (default ``sample_traces/train_eager.json.gz``)
  at ``--sizes`` MB of JSON (default 100, 300, 1000), plus gzip copies (``--gzip-sizes``), minified
  copies (``--minified-sizes``: the same trace re-encoded on one line, as tools that re-save traces
  write it) and a second trace of the largest size for ``diff`` (a few steps shorter, so A and B
  differ). Files live
  under ``--work-dir`` (default ``/tmp/tracekit-bench``) and are reused when already complete;
* ``tracekit report TRACE -o report.md`` (every analysis, Markdown rendered) per size and form
  (plain Kineto layout, gzip, minified);
* ``tracekit diff A B -o diff.md`` of the two largest traces;
* ``tracekit convert`` once, then ``tracekit report trace.parquet`` (the Parquet cache re-analysis);
* HolisticTraceAnalysis on the same file: ``TraceAnalysis`` load plus ``get_temporal_breakdown`` and
  ``get_idle_time_breakdown`` (the copy HTA needs — a directory with a rank — is staged beforehand
  and not timed), with a timeout per run recorded as a lower bound (``> 900 s``);
* plain ``json.load`` of the file (the floor any JSON reader pays);
* native JSON readers against tracekit's loader on the largest trace (``bench/readers.py``: DuckDB,
  pyarrow.json, Polars' read_ndjson, simdjson on an NDJSON copy; equal results checked), unless ``--no-readers``;
* a per-stage timing of the largest report in one process (where the time goes: ``bench/stages.py``);
* two more trace families at ``--family-sizes`` MB (default 100, 300), each with its report, HTA,
  json.load and stage table: ``sample_traces/memory/train_eager-memory.json.gz`` replicated (the
  same GPT-2 step with ``[memory]`` events, which the main trace lacks, so the memory analysis shows
  its real cost) and the ResNet capture of ``tests/data/real`` replicated with each copy wrapped in
  one ``ProfilerStep`` (``bench/synth.py --step-per-copy``: ~9,600 kernels per step against the main
  trace's 763);
* every ``tracekit report`` of the results table once more on one core (the run's CPU affinity set
  to one core: :func:`tracekit.parallel.cores` then answers 1, so the load decodes in this one
  process; Polars gets one thread), beside the same run on every core, to show what the second
  process buys and what it does not.

Each child runs under a small wrapper that reports its wall seconds (process start to exit, imports
included), its CPU seconds (user + system of all its processes, as the kernel accounts the waited-for
children) and peak RSS (``ru_maxrss`` of the child, i.e. its VmHWM); the 1-minute load average
before each run is kept beside it. The results, the machine
description and the targets of the big-traces issue (met or not, with the measured figure) are
written to ``bench/RESULTS.md`` — regenerate it with this script, never edit it by hand:

    python bench/compare.py            # the full run (tens of minutes: HTA is slow)
    python bench/compare.py --quick    # every family at 100 MB, one run each; writes under --work-dir
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

import readers  # noqa: E402
from synth import minify, synthesize  # noqa: E402
from stages import STAGES  # noqa: E402

from tracekit.parallel import cores  # noqa: E402

MB = 1_000_000
GB = 1_000_000_000
#: The rows of ``bench/stages.py`` that are analyses (not imports, load, build()'s own work, rendering).
ANALYSIS_STAGES = tuple(name for name, _ in STAGES)


class Family:
    """One kind of synthetic trace: its source, how it is replicated, what it is there to show."""

    def __init__(self, key: str, src: Path, stem: str, about: str, step_per_copy: bool = False) -> None:
        self.key, self.src, self.stem, self.about, self.step_per_copy = key, src, stem, about, step_per_copy

    def prefix(self) -> str:
        """Prefix of this family's keys in the raw figures ("" for the main family)."""
        return "" if self.key == "main" else f"{self.key}/"

    def label(self, size: float) -> str:
        return f"{size:g} MB {self.stem}"

    def src_name(self) -> str:
        return str(self.src.relative_to(ROOT)) if self.src.is_relative_to(ROOT) else str(self.src)


#: Run a command with this process's CPU affinity cut to one core (the lowest it may use) and Polars
#: to one thread: tracekit.parallel.cores() then answers 1, so the loader decodes in one process.
_ONE_CORE = r"""
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
os.environ["POLARS_MAX_THREADS"] = "1"
os.execvp(sys.argv[1], sys.argv[1:])
"""

#: Runs the command in argv[1:] and prints {"rc", "seconds", "peak_rss", ...} of it and its children.
#: Peak RSS is the larger of the biggest single process's VmHWM and the sum of the RSS of every
#: process of the run (the command and its descendants), sampled every 50 ms: a run that works in
#: several processes (``diff``, ``report DIR``) needs their memory together. The descendants are
#: found through ``/proc/PID/task/TID/children``, a few reads per sample; scanning every process of
#: the machine instead (its session) took a few ms per sample, CPU the measured run lost (the same
#: gzip report: 8.67-9.95 s sampled that way, 8.2-8.95 s unsampled, alternating). Where the kernel
#: has no ``children`` files the session scan is kept. CPU seconds (user, system) and minor page
#: faults come from the kernel's accounting of the waited-for children.
_WRAPPER = r"""
import json, os, resource, signal, subprocess, sys, threading, time
limit = float(sys.argv[1]); cmd = sys.argv[2:]
page = os.sysconf("SC_PAGE_SIZE")
def descendants(root):
    found, i = [root], 0
    while i < len(found):
        pid = found[i]
        i += 1
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    found += [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found
def in_session(sid):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 of stat: the session id
                yield int(pid)
        except (OSError, IndexError, ValueError):
            continue
have_children = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
def session_rss(root):
    total = 0
    for pid in (descendants(root) if have_children else in_session(root)):
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total
t0 = time.perf_counter()
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
peak_sum = [0]
done = threading.Event()
def sample():
    while not done.wait(0.05):
        peak_sum[0] = max(peak_sum[0], session_rss(proc.pid))
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
try:
    _, err = proc.communicate(timeout=limit)
    timed_out = False
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    timed_out = True
secs = time.perf_counter() - t0
done.set(); sampler.join()
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
peak = max(usage.ru_maxrss * 1024, peak_sum[0])
print(json.dumps({"rc": proc.returncode, "seconds": secs, "peak_rss": peak, "timed_out": timed_out,
                  "largest_process_rss": usage.ru_maxrss * 1024, "sampled_sum_rss": peak_sum[0],
                  "user_s": usage.ru_utime, "system_s": usage.ru_stime, "minor_faults": usage.ru_minflt,
                  "stderr": err.decode(errors="replace")[-2000:]}))
"""

_HTA = r"""
import logging, os, sys, warnings
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
analysis.get_temporal_breakdown(visualize=False)
analysis.get_idle_time_breakdown(visualize=False)
"""

_JSON_LOAD = r"""
import gzip, json, sys
path = sys.argv[1]
with open(path, "rb") as fh:
    gz = fh.read(2) == b"\x1f\x8b"
with (gzip.open if gz else open)(path, "rb") as fh:
    doc = json.load(fh)
print(len(doc["traceEvents"]))
"""

def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                POLARS_MAX_THREADS=os.environ.get("POLARS_MAX_THREADS", str(cores())))


def measure(cmd: list[str], timeout: float) -> dict:
    """Run ``cmd`` under the wrapper: wall seconds and peak RSS of that one child."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(timeout), *cmd], capture_output=True,
                          text=True, env=child_env(), check=False)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"rc": -1, "seconds": None, "peak_rss": None, "timed_out": False, "stderr": proc.stderr}
    out["ok"] = out["rc"] == 0 and not out["timed_out"]
    out["limit"] = timeout
    out["cpu_s"] = out["user_s"] + out["system_s"]
    return out


def last_step(parquet: Path) -> int | None:
    """The last ProfilerStep number stored in a converted trace."""
    code = ("import sys, polars as pl; print(pl.scan_parquet(sys.argv[1]).filter(pl.col('table') == 'steps')"
            ".select(pl.col('number').max()).collect().item())")
    proc = subprocess.run([sys.executable, "-c", code, str(parquet)], capture_output=True, text=True,
                          env=child_env(), check=False)
    try:
        return int(proc.stdout.strip())
    except ValueError:
        return None


def tracekit_cmd(*args: str) -> list[str]:
    """The installed ``tracekit`` command beside this interpreter, else the same entry point via -c."""
    script = Path(sys.executable).parent / "tracekit"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from tracekit.commands import main; main()", *args]


def make_trace(src: Path, out: Path, size_mb: float, gz: bool, minified_from: Path | None = None,
               step_per_copy: bool = False) -> dict:
    """Build (or reuse) one synthetic trace; the summary is cached beside it. ``minified_from``: the
    plain trace to re-encode on one line instead; ``step_per_copy`` as in :func:`synth.synthesize`."""
    meta = out.with_name(out.name + ".synth.json")
    if out.exists() and meta.exists():
        return json.loads(meta.read_text())
    log(f"synthesizing {out.name} ({size_mb:g} MB of JSON{', gzip' if gz else ''}"
        f"{', minified' if minified_from else ''})")
    tmp = out.with_name(out.name + ".partial")
    t0 = time.perf_counter()
    summary = (minify(minified_from, tmp) if minified_from
               else synthesize(src, tmp, size_mb, gzip=gz, step_per_copy=step_per_copy))
    summary["synth_seconds"] = time.perf_counter() - t0
    tmp.replace(out)
    summary["file_bytes"] = out.stat().st_size
    meta.write_text(json.dumps(summary))
    return summary


def stage_for_hta(trace: Path, directory: Path) -> Path:
    """HTA wants a directory holding one rank's trace with ``distributedInfo.rank`` (see
    :func:`tracekit.hta_oracle.stage`); staged once per trace, in a child (it parses the file)."""
    done = directory / ".staged"
    if done.exists():
        return directory
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    log(f"staging {trace.name} for HTA")
    subprocess.run([sys.executable, "-c",
                    "import sys; from tracekit.hta_oracle import stage; stage(sys.argv[1], sys.argv[2])",
                    str(trace), str(directory)], check=True, env=child_env())
    done.write_text("ok")
    return directory


def diff_available() -> bool:
    proc = subprocess.run(tracekit_cmd("diff", "--help"), capture_output=True, text=True,
                          env=child_env(), check=False)
    return proc.returncode == 0


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    versions = {}
    for mod in ("polars", "msgspec", "hta"):
        try:
            m = __import__(mod)
            versions[mod] = getattr(m, "__version__", "?")
        except ImportError:
            versions[mod] = "not installed"
    try:
        from importlib.metadata import version
        versions["hta"] = version("HolisticTraceAnalysis")
    except Exception:
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        commit = "?"
    try:
        dirty = [line[3:] for line in subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=False).stdout.splitlines()]
    except OSError:
        dirty = []
    return {"cpu": cpu, "cores": cores(), "memory_bytes": mem, "os": platform.platform(),
            "python": platform.python_version(), "versions": versions, "commit": commit,
            "dirty": dirty}


# -- formatting ---------------------------------------------------------------------------------

def fmt_s(r: dict | None) -> str:
    if r is None:
        return "not run"
    if r.get("unavailable"):
        return "not available"
    if r.get("timed_out"):
        return f"> {r['limit']:.0f} s (timeout)"
    if not r.get("ok"):
        return f"failed (rc {r.get('rc')})"
    spread = r.get("all_seconds")
    if spread and len(spread) > 1:
        return f"{r['seconds']:.2f} s ({min(spread):.2f}–{max(spread):.2f})"
    return f"{r['seconds']:.2f} s"


def fmt_cpu(r: dict | None, key: str) -> str:
    value = (r or {}).get(key)
    return "—" if value is None else f"{value:.1f} s"


def fmt_rss(r: dict | None) -> str:
    if r is None or r.get("unavailable") or r.get("peak_rss") is None:
        return "—"
    prefix = "≥ " if r.get("timed_out") else ""
    return f"{prefix}{r['peak_rss'] / GB:.2f} GB"


def secs(r: dict | None) -> float | None:
    """Seconds for ratios: the measured time, or the timeout as a lower bound (None if unusable)."""
    if r is None or r.get("unavailable") or r.get("seconds") is None:
        return None
    if r.get("timed_out"):
        return r["limit"]
    return r["seconds"] if r.get("ok") else None


def ratio(a: float | None, b: float | None, lower_bound: bool = False) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{'> ' if lower_bound else ''}{a / b:.1f}×"


def cpu_secs(r: dict | None) -> float | None:
    """CPU seconds (user + system of all the run's processes) for ratios: a run cut by its timeout
    gives the CPU it had used, a lower bound; None where unusable."""
    if r is None or r.get("unavailable") or r.get("cpu_s") is None:
        return None
    return r["cpu_s"] if r.get("ok") or r.get("timed_out") else None


def fmt_cpu_s(r: dict | None) -> str:
    value = cpu_secs(r)
    if value is None:
        return "—"
    return f"{'≥ ' if (r or {}).get('timed_out') else ''}{value:.2f} s"


def fmt_load(r: dict | None) -> str:
    """The 1-minute load average before the run (the median run where there were several)."""
    value = (r or {}).get("loadavg_1min_before")
    return "—" if value is None else f"{value:.2f}"


def both_ratios(slow: dict | None, fast: dict | None) -> tuple[str, str]:
    """``slow``/``fast`` in wall time and in CPU time (a timed-out ``slow``: lower bounds)."""
    lb = bool(slow and slow.get("timed_out"))
    return ratio(secs(slow), secs(fast), lb), ratio(cpu_secs(slow), cpu_secs(fast), lb)


# -- main ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="tracekit vs HTA vs json.load on big synthetic traces")
    ap.add_argument("--src", type=Path, default=ROOT / "sample_traces" / "train_eager.json.gz",
                    help="source of the main family (no [memory] events)")
    ap.add_argument("--memory-src", type=Path,
                    default=ROOT / "sample_traces" / "memory" / "train_eager-memory.json.gz",
                    help="source of the family with [memory] events")
    ap.add_argument("--kernels-src", type=Path,
                    default=ROOT / "tests" / "data" / "real" / "facebookresearch__param__resnet-2080ti-cudnn-train.json.gz",
                    help="source of the family with many kernels per step (each copy becomes one step)")
    ap.add_argument("--sizes", type=float, nargs="+", default=[100.0, 300.0, 1000.0])
    ap.add_argument("--family-sizes", type=float, nargs="*", default=[100.0, 300.0],
                    help="sizes of the memory and many-kernels families (none: those families are skipped)")
    ap.add_argument("--gzip-sizes", type=float, nargs="*", default=[1000.0],
                    help="sizes also measured as gzip (tracekit report only)")
    ap.add_argument("--minified-sizes", type=float, nargs="*", default=[1000.0],
                    help="sizes also measured minified (one line; tracekit report only; each also in --sizes)")
    ap.add_argument("--no-readers", action="store_true", help="skip the native readers comparison")
    ap.add_argument("--hta-sizes", type=float, nargs="*", default=None, help="default: all sizes")
    ap.add_argument("--hta-timeout", type=float, default=900.0)
    ap.add_argument("--timeout", type=float, default=900.0, help="timeout of every other run")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/tracekit-bench"))
    ap.add_argument("--results", type=Path, default=None,
                    help="where the Markdown goes (default bench/RESULTS.md; with --quick WORK_DIR/RESULTS-quick.md)")
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each tracekit measurement; the median is reported (default 3)")
    ap.add_argument("--quick", action="store_true",
                    help="a check of the script, not a result: every family at 100 MB (gzip and minified "
                         "too), each tracekit run once, HTA timeout 300 s, no native readers; never "
                         "writes bench/RESULTS.md unless --results names it")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.family_sizes = [100.0], [100.0]
        args.gzip_sizes, args.minified_sizes = [100.0], [100.0]
        args.repeat, args.hta_timeout, args.no_readers = 1, min(args.hta_timeout, 300.0), True
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    if args.results is None:
        args.results = work / "RESULTS-quick.md" if args.quick else ROOT / "bench" / "RESULTS.md"
    sizes = sorted(args.sizes)
    big = sizes[-1]
    hta_sizes = sizes if args.hta_sizes is None else sorted(args.hta_sizes)
    started = time.perf_counter()
    load_at_start = os.getloadavg()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mach = machine()
    main_family = Family("main", args.src, "train", "the main family: no `[memory]` events, 763 kernels per step")
    families = [main_family]
    if args.family_sizes:
        families += [
            Family("memory", args.memory_src, "memory",
                   "the same GPT-2 training step captured with `profile_memory=True`: `[memory]` events"),
            Family("kernels", args.kernels_src, "resnet",
                   "a ResNet training capture (30 DataLoader iterations) whose every copy is one "
                   "`ProfilerStep` (`bench/synth.py --step-per-copy`): many kernels per step",
                   step_per_copy=True)]
    family_sizes = {f.key: (sizes if f.key == "main" else sorted(args.family_sizes)) for f in families}

    def name(size: float, gz: bool = False, suffix: str = "", family: Family = main_family) -> Path:
        return work / f"{family.stem}_{size:g}mb{suffix}.json{'.gz' if gz else ''}"

    traces: dict[tuple[float, bool], dict] = {}
    family_traces: dict[str, dict[float, dict]] = {}
    for family in families:
        family_traces[family.key] = {
            size: make_trace(family.src, name(size, family=family), size, False,
                             step_per_copy=family.step_per_copy) for size in family_sizes[family.key]}
    for size in sizes:
        traces[(size, False)] = family_traces["main"][size]
    for size in args.gzip_sizes:
        traces[(size, True)] = make_trace(args.src, name(size, True), size, True)
    minified: dict[float, dict] = {}
    for size in args.minified_sizes:
        if (size, False) not in traces:
            traces[(size, False)] = make_trace(args.src, name(size), size, False)
        minified[size] = make_trace(args.src, name(size, suffix="_min"), size, False, minified_from=name(size))
    # B of the diff: the same capture a few steps shorter, so the two files differ.
    b_summary = make_trace(args.src, name(big, suffix="_b"), big * 0.97, False)

    results: dict[str, dict] = {}

    def run(key: str, cmd: list[str], timeout: float | None = None, repeat: int = 1) -> dict:
        """Measure ``cmd`` ``repeat`` times; keep the run with the median wall time (its RSS, CPU
        and faults with it) and every run's seconds, so one slow moment of a shared machine
        neither makes nor breaks a figure."""
        return run_together([(key, cmd)], timeout, repeat)[key]

    def run_together(commands: list[tuple[str, list[str]]], timeout: float | None = None,
                     repeat: int = 1) -> dict[str, dict]:
        """:func:`run` of several commands, their runs taken in turn (A, B, C, A, B, C, ...), so
        that the machine's drift (see below) falls on each of them alike."""
        for key, _ in commands:
            log(f"run {key}" + (f" ({repeat}×)" if repeat > 1 else ""))
        runs: dict[str, list[dict]] = {key: [] for key, _ in commands}
        for _ in range(repeat):
            for key, cmd in commands:
                if runs[key] and not runs[key][-1].get("ok"):
                    continue
                load_before = os.getloadavg()[0]
                r = measure(cmd, timeout or args.timeout)
                r["loadavg_1min_before"] = round(load_before, 2)
                log(f"  {key} -> {fmt_s(r)}, cpu {fmt_cpu_s(r)}, peak {fmt_rss(r)}, load before {load_before:.2f}"
                    + ("" if r.get("ok") else f"\n{r.get('stderr', '')}"))
                runs[key].append(r)
        for key, done in runs.items():
            if all(x.get("ok") for x in done) and len(done) > 1:
                ordered = sorted(done, key=lambda x: x["seconds"])
                r = dict(ordered[len(ordered) // 2])
                r["all_seconds"] = [round(x["seconds"], 3) for x in done]
                r["all_cpu_s"] = [round(x["cpu_s"], 3) for x in done]
                r["all_loadavg_1min_before"] = [x["loadavg_1min_before"] for x in done]
                r["median_run_peak_rss"] = r["peak_rss"]
                r["peak_rss"] = max(x["peak_rss"] for x in done)  # memory: the worst run counts
            else:
                r = done[-1]
            results[key] = r
        return {key: results[key] for key, _ in commands}

    def one_core(cmd: list[str]) -> list[str]:
        return [sys.executable, "-c", _ONE_CORE, *cmd]

    out_dir = Path(tempfile.mkdtemp(prefix="tracekit-bench-out-"))
    report_md = str(out_dir / "report.md")
    # Every tracekit report first, json.load after: a process that has just freed gigabytes (json.load
    # of 1000 MB peaks at 6.7 GB) leaves the next one's fresh pages slower on this virtual machine
    # (a 1 GB gzip report: 7.88-8.11 s, 8.42-8.52 s right after a 7 GB process exited). The forms
    # of a trace (all cores, one core; for the biggest also gzip and minified) run in turn, so that
    # drift falls on each alike.
    for family in families:
        for size in family_sizes[family.key]:
            path, pre = str(name(size, family=family)), family.prefix()
            forms = [(f"{pre}report:{size:g}", tracekit_cmd("report", path, "-o", report_md)),
                     (f"{pre}report-1core:{size:g}", one_core(tracekit_cmd("report", path, "-o", report_md)))]
            if family is main_family and size == big:
                forms += [(f"report-gz:{s:g}", tracekit_cmd("report", str(name(s, True)), "-o", report_md))
                          for s in args.gzip_sizes]
                forms += [(f"report-min:{s:g}", tracekit_cmd("report", str(name(s, suffix="_min")), "-o", report_md))
                          for s in args.minified_sizes]
            run_together(forms, repeat=args.repeat)
    # The default output (no -o): the terminal renderer, here to a pipe (stdout not a terminal).
    run(f"report-term:{sizes[0]:g}", tracekit_cmd("report", str(name(sizes[0]))))
    # The HTML report of the largest trace (timelines of every step, charts, tables), then opened in
    # a real headless Chromium: console errors, marks drawn, a screenshot to look at.
    html = out_dir / "report.html"
    if run(f"report-html:{big:g}", tracekit_cmd("report", str(name(big)), "-o", str(html)),
           repeat=args.repeat).get("ok"):
        shot = (work if args.quick else ROOT / "bench") / f"html_{big:g}mb.png"
        results[f"html-open:{big:g}"] = open_in_browser(html, shot)
        log(f"  opened in Chromium: {results[f'html-open:{big:g}']}")
    if diff_available():
        run(f"diff:{big:g}", tracekit_cmd("diff", str(name(big)), str(name(big, suffix="_b")), "-o",
                                          str(out_dir / "diff.md")), repeat=args.repeat)
    else:
        results[f"diff:{big:g}"] = {"unavailable": True}
    parquet = work / f"train_{big:g}mb.parquet"
    run(f"convert:{big:g}", tracekit_cmd("convert", str(name(big)), "-o", str(parquet)))
    if results[f"convert:{big:g}"].get("ok"):
        run(f"parquet:{big:g}", tracekit_cmd("report", str(parquet), "-o", report_md), repeat=args.repeat)
        # --step makes the report analyse the Parquet frames again (every analysis runs on the
        # whole trace, then the tables are cut to the step): the re-analysis without the stored report.
        last = last_step(parquet)
        if last is not None:
            run(f"parquet-step:{big:g}", tracekit_cmd("report", str(parquet), "--step", str(last), "-o",
                                                      report_md), repeat=args.repeat)
    stages: dict[str, dict] = {}
    for family in families:
        top = family_sizes[family.key][-1]
        log(f"per-stage timing of the {family.label(top)} report")
        stage_args = [str(name(top, family=family))]
        if family is main_family and parquet.exists():
            stage_args.append(str(parquet))
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "stages.py"), *stage_args],
                              capture_output=True, text=True, env=child_env(), check=False)
        try:
            stages[family.key] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            log(f"stage timing failed:\n{proc.stderr[-2000:]}")
    reader_rows: list[dict] = []
    if not args.no_readers:
        ndjson = work / f"train_{big:g}mb.ndjson"
        if not ndjson.exists():
            log(f"writing the NDJSON copy of {name(big).name} for the readers")
            readers.ndjson_copy(name(big), ndjson.with_name(ndjson.name + ".partial")).replace(ndjson)
        log("native readers against tracekit.load")
        reader_rows = readers.measure(name(big), ndjson, timeout=args.timeout)
        for row in reader_rows:
            log(f"  {row['reader']}: " + (f"{row['seconds']:.2f} s" if "error" not in row else row["error"]))
    for family in families:  # after every tracekit run (see above)
        for size in family_sizes[family.key]:
            run(f"{family.prefix()}json:{size:g}", [sys.executable, "-c", _JSON_LOAD, str(name(size, family=family))])
    if not args.no_hta:
        for family in families:
            for size in (hta_sizes if family is main_family else family_sizes[family.key]):
                directory = stage_for_hta(name(size, family=family), work / f"hta_{family.stem}_{size:g}mb")
                run(f"{family.prefix()}hta:{size:g}", [sys.executable, "-c", _HTA, str(directory)],
                    timeout=args.hta_timeout)
    shutil.rmtree(out_dir, ignore_errors=True)

    load = {"start": load_at_start, "end": os.getloadavg()}
    text = render(args, sizes, hta_sizes, big, traces, b_summary, results, stages, mach, when,
                  time.perf_counter() - started, minified, reader_rows, families, family_sizes,
                  family_traces, load)
    kept = kept_sections(args.results)
    args.results.write_text(text + ("\n" + kept if kept else ""))
    log(f"wrote {args.results}")
    print(text)
    return 0


def open_in_browser(page: Path, screenshot: Path) -> dict:
    """Open ``page`` in headless Chromium (``tests/browser.py``): its size, load seconds, console
    errors, timelines and kernel marks in the DOM; the screenshot is written to ``screenshot``."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import browser
    except ImportError as err:
        return {"unavailable": f"tests/browser.py: {err}"}
    binary = browser.chromium_binary()
    if binary is None:
        return {"unavailable": "no chromium on PATH"}
    started = time.perf_counter()
    with browser.Browser(binary, timeout=300) as chromium:
        tab = chromium.new_page()
        tab.open(page.as_uri())
        loaded = time.perf_counter() - started
        counts = tab.evaluate(
            "({timelines: document.querySelectorAll('svg.tk-timeline').length,"
            " kernels: document.querySelectorAll('svg.tk-timeline rect.tk-kernel').length,"
            " charts: document.querySelectorAll('figure.tk-chart').length})")
        tab.screenshot(screenshot)
        errors = tab.errors()
    return {"bytes": page.stat().st_size, "load_s": round(loaded, 2), "errors": errors, **counts,
            "screenshot": str(screenshot.relative_to(ROOT) if screenshot.is_relative_to(ROOT) else screenshot)}


def stage_table(stage: dict, label: str, summary: dict) -> list[str]:
    """The Markdown of one ``bench/stages.py`` result for the trace ``label`` (``summary``: its
    :func:`synth.synthesize` summary), with the memory analysis's share stated under it."""
    seconds = stage.get("seconds", {})
    peaks = stage.get("peak_rss_after", {})
    parts = {k: v for k, v in seconds.items() if not k.startswith("(")}
    total = sum(parts.values()) or 1.0
    analyses = {k: parts.get(k, 0.0) for k in ANALYSIS_STAGES if k in parts}
    in_analyses = sum(analyses.values()) or 1.0
    copies = summary.get("copies", 0)
    L = ["", f"### {label} ({summary.get('events', 0):,} events; {copies * summary.get('kernels_per_copy', 0):,} "
             f"kernels, {copies * summary.get('memory_events_per_copy', 0):,} `[memory]` events, "
             f"{copies * summary.get('steps_per_copy', 0):,} steps)", "",
         "| stage | seconds | share | share of the analyses | peak RSS after |", "|---|---:|---:|---:|---:|"]
    for k, v in parts.items():
        share = f"{100 * v / in_analyses:.0f} %" if k in analyses else ""
        L.append(f"| {k} | {v:.2f} | {100 * v / total:.0f} % | {share} | {(peaks.get(k) or 0) / GB:.2f} GB |")
    L.append(f"| total | {total:.2f} | 100 % | {in_analyses:.2f} s in the analyses | |")
    whole = seconds.get("(whole build() again, for reference)")
    notes = []
    if "memory" in analyses and not summary.get("memory_events_per_copy"):
        notes.append("This trace has no `[memory]` events: the memory analysis has nothing to do here.")
    elif "memory" in analyses:
        ranked = sorted(analyses, key=analyses.__getitem__, reverse=True)
        notes.append(f"The memory analysis: {analyses['memory']:.2f} s, {100 * analyses['memory'] / in_analyses:.0f} % "
                     f"of the analyses' time (rank {ranked.index('memory') + 1} of {len(ranked)}).")
    if whole is not None:
        notes.append(f"`report.build()` alone, on the already loaded trace: {whole:.2f} s.")
    pq_load = seconds.get("(load of the Parquet cache)")
    if pq_load is not None:
        notes.append(f"Loading the Parquet cache of the same trace: {pq_load:.2f} s.")
    return L + (["", " ".join(notes)] if notes else [])


def split_section(families, family_sizes, results, n: int) -> list[str]:
    """What tracekit's second process buys: every report of the results table on all ``n`` cores
    against the same command on one core, from the same run, and the sentence drawn from them."""
    rows, main = [], None
    for family in families:
        pre = family.prefix()
        for size in family_sizes.get(family.key, []):
            rep, one = results.get(f"{pre}report:{size:g}"), results.get(f"{pre}report-1core:{size:g}")
            hta = results.get(f"{pre}hta:{size:g}")
            if rep is None and one is None:
                continue
            lb = bool(hta and hta.get("timed_out"))
            saved = (f"{100 * (1 - secs(rep) / secs(one)):.0f} %" if secs(rep) and secs(one) else "—")
            rows.append(f"| {family.label(size)} | {fmt_s(rep)} | {fmt_s(one)} | {saved} | {fmt_cpu_s(rep)} | "
                        f"{fmt_cpu_s(one)} | {ratio(secs(hta), secs(rep), lb)} | {ratio(secs(hta), secs(one), lb)} | "
                        f"{ratio(cpu_secs(hta), cpu_secs(rep), lb)} | {ratio(cpu_secs(hta), cpu_secs(one), lb)} | "
                        f"{fmt_load(rep)} / {fmt_load(one)} |")
            if family.key == "main":
                main = (size, rep, one, hta)
    if not rows:
        return []
    L = ["## What tracekit's second process buys, and what it does not", "",
         "`tracekit report` loads a big trace in shares, one process per core (`tracekit/load/shares.py`, "
         "its workers from `tracekit.parallel.spawn_pool`), and its analysis pipeline runs round trips in "
         "a second thread (`tracekit/analyses/pipeline.py`). No option of the command turns this off: the "
         "number of shares follows `tracekit.parallel.cores()`, the cores the process may run on (its CPU "
         "affinity). So each report below ran once more with its affinity set to one core (and Polars to "
         "one thread): the same command, decoding in one process, everything sharing one core — what the "
         "command gets when the machine's other cores are busy. HTA and json.load decode in one process "
         "either way. Same run, runs taken in turn.", "",
         f"| trace | wall, {n} cores | wall, one core | wall saved by the other cores | CPU, {n} cores "
         "| CPU, one core | HTA / tracekit wall | HTA / tracekit wall, one core | HTA / tracekit CPU "
         f"| HTA / tracekit CPU, one core | load ({n} cores / one core runs) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]
    if main and secs(main[1]) and secs(main[2]):
        size, rep, one, hta = main
        w2, w1, c2, c1 = secs(rep), secs(one), cpu_secs(rep), cpu_secs(one)
        cpu_words = (f"{c2 / c1:.2f}× the one-core CPU time: the split spreads the work over the cores, it "
                     "does not reduce it: each share is decoded, then the shares are joined"
                     if c2 >= 0.95 * c1 else
                     f"{c2 / c1:.2f}× the one-core CPU time: the one-core run's CPU time is no lower, so the "
                     "split saves wall time only by running work side by side")
        if w1 > 1.05 * w2:
            helps = (f"- **Where it helps — wall time, with idle cores:** on the {size:g} MB train trace the "
                     f"report took {w2:.2f} s with {n} cores against {w1:.2f} s on one ({w1 / w2:.2f}× as long "
                     "on one core); the load's shares and the second thread overlap on cores that would "
                     "otherwise idle.")
        else:
            helps = (f"- **Where it should help — wall time, with idle cores — it did not in this run:** on the "
                     f"{size:g} MB train trace the report took {w2:.2f} s with {n} cores against {w1:.2f} s on "
                     f"one. The 1-minute load average before the two runs ({fmt_load(rep)} and "
                     f"{fmt_load(one)}, out of {n} cores) says whether the other cores were idle; where they "
                     "are busy, the second process waits for a core instead of overlapping the first.")
        L += [helps,
              f"- **Where it does not — CPU time, and a busy machine:** the same run used {c2:.2f} s of CPU "
              f"on {n} cores against {c1:.2f} s on one ({cpu_words}). A machine whose other cores are busy "
              "gives the report about the one-core figure, so its wall ratio to HTA there is "
              f"{ratio(secs(hta), w1)} (not {ratio(secs(hta), w2)}); the CPU ratio "
              f"({ratio(cpu_secs(hta), c2)}) compares the work done, whatever the machine's load.", ""]
    return L


#: Sections other scripts keep in RESULTS.md between markers (``bench/charts.py``): carried over.
_KEPT_SECTION = re.compile(r"<!-- (\w+): bench/\S+ -->\n.*?<!-- /\1 -->\n?", re.S)


def kept_sections(path: Path) -> str:
    """The marked sections of the current ``path`` (see :data:`_KEPT_SECTION`), to append again."""
    try:
        text = path.read_text()
    except OSError:
        return ""
    return "".join(m.group(0) if m.group(0).endswith("\n") else m.group(0) + "\n"
                   for m in _KEPT_SECTION.finditer(text))


def render(args, sizes, hta_sizes, big, traces, b_summary, results, stages, mach, when, total,
           minified=None, reader_rows=None, families=None, family_sizes=None, family_traces=None,
           load=None) -> str:
    minified = minified or {}
    families = families or []
    family_sizes = family_sizes or {}
    family_traces = family_traces or {}
    load = load or {}
    L: list[str] = []
    mem = mach["memory_bytes"]
    n = mach["cores"]
    befores = [v for r in results.values() for v in (r.get("all_loadavg_1min_before")
                                                     or [r.get("loadavg_1min_before")]) if v is not None]
    rep_big, hta_big, js_big = (results.get(f"report:{big:g}"), results.get(f"hta:{big:g}"),
                                results.get(f"json:{big:g}"))
    one_big = results.get(f"report-1core:{big:g}")
    (hw, hc), (jw, jc) = both_ratios(hta_big, rep_big), both_ratios(js_big, rep_big)
    L += [
        "# Big traces: tracekit vs HolisticTraceAnalysis vs json.load",
        "",
        "Generated by `python bench/compare.py` — do not edit by hand; rerun the script.",
        "",
        f"**Headline ({big:g} MB trace, {n} cores):** `tracekit report` is {hw} faster than HTA in wall "
        f"time and {hc} in CPU time (user + system of all its processes: the load decodes in one process "
        f"per core), and {jw} / {jc} faster than a plain `json.load` of the file; with one core "
        f"({fmt_s(one_big)}) the wall ratio to HTA is {ratio(secs(hta_big), secs(one_big))}. The 1-minute "
        f"load average before each run is beside it (below); a figure taken while the other core was "
        f"busy is not a figure of an idle {n}-core machine.",
        "",
        f"- Run: {when}, {total / 60:.1f} min in all, tracekit commit `{mach['commit']}`"
        + (f" (working tree with uncommitted edits to {', '.join(f'`{d}`' for d in mach['dirty'])})."
           if mach["dirty"] else "."),
        f"- Machine: {mach['cpu']}, {n} cores, "
        f"{(mem or 0) / 2**30:.1f} GiB RAM, {mach['os']}.",
        f"- Python {mach['python']}; " + ", ".join(f"{k} {v}" for k, v in mach["versions"].items()) + ".",
        "- Machine load: the machine may be shared with other work; the 1-minute load average before "
        f"each run is in the tables (column *load*, out of {n} cores) and in the raw figures "
        "(`loadavg_1min_before`)"
        + (f"; over the run's measurements it went from {min(befores):.2f} to {max(befores):.2f}" if befores else "")
        + (f"; 1/5/15-minute load averages at the start {', '.join(f'{x:.2f}' for x in load['start'])}, "
           f"at the end {', '.join(f'{x:.2f}' for x in load['end'])}" if load else "") + ".",
        "- Traces: `bench/synth.py` replicating the steps of a real capture (fresh correlation/External "
        "ids, shifted times); sizes are MB (10^6 bytes) of JSON text. Families:",
        *(f"  - `{f.stem}`: `{f.src_name()}` — {f.about}"
          + (f" ({family_traces[f.key][family_sizes[f.key][0]].get('kernels_per_copy', 0):,} kernels and "
             f"{family_traces[f.key][family_sizes[f.key][0]].get('memory_events_per_copy', 0):,} `[memory]` "
             f"events per copy of {family_traces[f.key][family_sizes[f.key][0]].get('steps_per_copy', 0)} step(s))"
             if family_traces.get(f.key) else "") + "."
          for f in families),
        "- Each figure is one child process: wall seconds from process start to exit (interpreter "
        "start and imports included), CPU seconds (user + system of all its processes: the command, "
        "the loader's worker processes, every thread) and peak RSS: the larger of its biggest process's "
        "VmHWM and the sum over all its processes sampled every 50 ms. Wall time is what a user waits; "
        "CPU time is the work done, which a second core can overlap but not remove. tracekit's report, "
        f"diff and Parquet figures are the median wall time of {args.repeat} run(s) (fastest–slowest in "
        "brackets; the CPU and load of that median run) and the largest peak RSS of them; `convert`, "
        "json.load and HTA run once. tracekit writes its Markdown report to a file. HTA: `TraceAnalysis` "
        "load + `get_temporal_breakdown` + `get_idle_time_breakdown` on a staged copy (staging not "
        f"timed), timeout {args.hta_timeout:.0f} s per run.",
        "- Order: every tracekit report runs before json.load and HTA (a process that has just freed "
        "gigabytes leaves the next one's fresh pages slower on this virtual machine: a 1 GB gzip report "
        "took 7.88–8.11 s, and 8.42–8.52 s right after a 7 GB process exited); the forms of a trace "
        f"(all cores, one core, and for the {big:g} MB one gzip and minified) run in turn, so drift falls "
        "on each alike.",
        "",
        "## Results",
        "",
        "Ratios are HTA's (json.load's) figure over tracekit's, in wall time and in CPU time; *load* is "
        f"the 1-minute load average before tracekit's / HTA's / json.load's run, out of {n} cores.",
        "",
        "| trace | events | file | tracekit wall | tracekit CPU | peak RSS | HTA wall | HTA CPU | peak RSS "
        "| json.load wall | json.load CPU | peak RSS | HTA / tracekit wall | HTA / tracekit CPU "
        f"| json.load / tracekit wall | json.load / tracekit CPU | load (of {n} cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for family in families:
        pre = family.prefix()
        for size in family_sizes.get(family.key, []):
            t = family_traces[family.key][size]
            rep, hta, js = (results.get(f"{pre}report:{size:g}"), results.get(f"{pre}hta:{size:g}"),
                            results.get(f"{pre}json:{size:g}"))
            (hw_, hc_), (jw_, jc_) = both_ratios(hta, rep), both_ratios(js, rep)
            L.append(
                f"| {family.label(size)} | {t['events']:,} | {t['file_bytes'] / MB:,.0f} MB | {fmt_s(rep)} | "
                f"{fmt_cpu_s(rep)} | {fmt_rss(rep)} | {fmt_s(hta)} | {fmt_cpu_s(hta)} | {fmt_rss(hta)} | "
                f"{fmt_s(js)} | {fmt_cpu_s(js)} | {fmt_rss(js)} | {hw_} | {hc_} | {jw_} | {jc_} | "
                f"{fmt_load(rep)} / {fmt_load(hta)} / {fmt_load(js)} |")
    for size in args.gzip_sizes:
        t = traces[(size, True)]
        rep = results.get(f"report-gz:{size:g}")
        L.append(f"| {size:g} MB train gzip | {t['events']:,} | {t['file_bytes'] / MB:,.0f} MB | {fmt_s(rep)} | "
                 f"{fmt_cpu_s(rep)} | {fmt_rss(rep)} | — | — | — | — | — | — | — | — | — | — | {fmt_load(rep)} |")
    for size, t in minified.items():
        rep = results.get(f"report-min:{size:g}")
        L.append(f"| {size:g} MB train minified (one line) | {t['events']:,} | {t['file_bytes'] / MB:,.0f} MB | "
                 f"{fmt_s(rep)} | {fmt_cpu_s(rep)} | {fmt_rss(rep)} | — | — | — | — | — | — | — | — | — | — "
                 f"| {fmt_load(rep)} |")
    diff = results.get(f"diff:{big:g}")
    conv = results.get(f"convert:{big:g}")
    parq = results.get(f"parquet:{big:g}")
    parq_step = results.get(f"parquet-step:{big:g}")
    term = results.get(f"report-term:{sizes[0]:g}")

    def other(label: str, r: dict | None) -> str:
        return f"| {label} | {fmt_s(r)} | {fmt_cpu_s(r)} | {fmt_rss(r)} | {fmt_load(r)} |"

    L += [
        "",
        f"| other run ({big:g} MB train) | wall | CPU | peak RSS | load (of {n} cores) |",
        "|---|---:|---:|---:|---:|",
        other(f"`tracekit diff A B` (A {traces[(big, False)]['events']:,} events, B {b_summary['events']:,})", diff),
        other("`tracekit convert A -o A.parquet` (once)", conv),
        other(f"`tracekit report` {sizes[0]:g} MB with the default terminal output (to a pipe) instead of "
              "`-o report.md`", term),
        other("`tracekit report A.parquet`: the report `convert` stored, rendered (no analysis)", parq),
        other("`tracekit report A.parquet --step N`: every analysis re-run on the Parquet frames", parq_step),
        "",
        "Peak RSS is that of all the run's processes together (`diff` profiles A and B in two "
        "processes); CPU seconds split into user and system, and page faults, of the main runs:",
        "",
        f"| run | wall | user CPU | system CPU | minor page faults | load (of {n} cores) |",
        "|---|---:|---:|---:|---:|---:|",
        *[f"| {label} | {fmt_s(r)} | {fmt_cpu(r, 'user_s')} | {fmt_cpu(r, 'system_s')} | "
          f"{(r or {}).get('minor_faults', 0):,} | {fmt_load(r)} |"
          for label, r in ((f"report {big:g} MB", rep_big),
                           *((f"report {size:g} MB gzip", results.get(f"report-gz:{size:g}"))
                             for size in args.gzip_sizes),
                           *((f"report {size:g} MB minified", results.get(f"report-min:{size:g}"))
                             for size in minified),
                           (f"diff {big:g} MB", diff),
                           (f"report {sizes[0]:g} MB", results.get(f"report:{sizes[0]:g}")))],
        "",
    ]
    L += split_section(families, family_sizes, results, n)

    # -- targets -----------------------------------------------------------------------------
    small = sizes[0]
    t_big, t_small = secs(rep_big), secs(results.get(f"report:{small:g}"))
    size_ratio = traces[(big, False)]["json_bytes"] / traces[(small, False)]["json_bytes"]
    growth = (t_big / t_small) if t_big and t_small else None
    hta_ratio = (secs(hta_big) / t_big) if secs(hta_big) and t_big else None
    hta_cpu_ratio = (cpu_secs(hta_big) / cpu_secs(rep_big)) if cpu_secs(hta_big) and cpu_secs(rep_big) else None
    t_one = secs(one_big)
    hta_one_ratio = (secs(hta_big) / t_one) if secs(hta_big) and t_one else None
    diff_ratio = (secs(diff) / t_big) if secs(diff) and t_big else None
    rss_big = rep_big.get("peak_rss") if rep_big else None
    html_run = results.get(f"report-html:{big:g}")
    html_ratio = (secs(html_run) / t_big) if secs(html_run) and t_big else None
    opened = results.get(f"html-open:{big:g}") or {}

    def verdict(ok: bool | None) -> str:
        return "—" if ok is None else ("**met**" if ok else "**not met**")

    hta_lb = bool(hta_big and hta_big.get("timed_out"))
    # The wall and memory targets hold for each input form of the largest size measured in it.
    forms = [("plain Kineto layout", rep_big)]
    forms += [("gzip", results.get(f"report-gz:{big:g}"))] if big in args.gzip_sizes else []
    forms += [("minified", results.get(f"report-min:{big:g}"))] if big in minified else []
    rows = [
        *((f"`tracekit report` on {big:g} MB, {form}: wall ≤ 8 s", fmt_s(r),
           verdict(secs(r) <= 8 if secs(r) else None)) for form, r in forms),
        *((f"`tracekit report` on {big:g} MB, {form}: peak RSS ≤ 2.5 GB", fmt_rss(r),
           verdict(r["peak_rss"] <= 2.5 * GB if r and r.get("peak_rss") else None)) for form, r in forms),
        (f"≥ 10× faster than HTA on {big:g} MB (same run), in wall time / in CPU time / in wall "
         f"time on one core",
         " / ".join(("> " if hta_lb else "") + (f"{x:.1f}×" if x else "—")
                    for x in (hta_ratio, hta_cpu_ratio, hta_one_ratio)),
         " / ".join(verdict(x >= 10 if x else None) for x in (hta_ratio, hta_cpu_ratio, hta_one_ratio))),
        (f"growth: {size_ratio:.1f}× the size ({small:g} → {big:g} MB) costs ≤ {1.1 * size_ratio:.1f}× the time",
         f"{growth:.1f}×" if growth else "—", verdict(growth <= 1.1 * size_ratio if growth else None)),
        (f"`tracekit diff` of two {big:g} MB traces ≤ 2× one report",
         f"{diff_ratio:.2f}×" if diff_ratio else fmt_s(diff), verdict(diff_ratio <= 2 if diff_ratio else None)),
        (f"HTML report of {big:g} MB ({fmt_s(html_run)}) within 2× the Markdown report's time",
         f"{html_ratio:.2f}×" if html_ratio else fmt_s(html_run), verdict(html_ratio <= 2 if html_ratio else None)),
        (f"HTML report of {big:g} MB opens in headless Chromium without errors "
         f"(screenshot `{opened.get('screenshot', '—')}`)",
         (f"{len(opened['errors'])} errors; {opened['timelines']} step timelines, {opened['kernels']:,} kernel "
          f"marks, {opened['charts']} charts; {opened['bytes'] / MB:.1f} MB, loaded in {opened['load_s']:.1f} s")
         if "errors" in opened else opened.get("unavailable", "—"),
         verdict(not opened["errors"] and opened["timelines"] > 0 if "errors" in opened else None)),
        (f"Parquet re-analysis of {big:g} MB ≤ 1 s (stored report; every analysis re-run: "
         f"{fmt_s(parq_step)})", fmt_s(parq), verdict(secs(parq) <= 1 if secs(parq) else None)),
    ]
    L += ["## Targets (2-core, 24 GB machine of the issue)", "", "| target | measured | verdict |",
          "|---|---:|---|"]
    L += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    ratio_parts = []
    for family in families:
        for size in family_sizes.get(family.key, []):
            pre = family.prefix()
            rep_, one_ = results.get(f"{pre}report:{size:g}"), results.get(f"{pre}report-1core:{size:g}")
            hta_, js_ = results.get(f"{pre}hta:{size:g}"), results.get(f"{pre}json:{size:g}")
            (a, b), (c, d) = both_ratios(hta_, rep_), both_ratios(js_, rep_)
            ratio_parts.append(f"{family.label(size)}: HTA/tracekit {a} wall, {b} CPU, "
                               f"{ratio(secs(hta_), secs(one_), bool(hta_ and hta_.get('timed_out')))} wall on "
                               f"one core; json.load/tracekit {c} wall, {d} CPU, {ratio(secs(js_), secs(one_))} "
                               "wall on one core")
    L += ["", "Ratios (wall, CPU, and wall with tracekit on one core): " + "; ".join(ratio_parts) + "."]

    if reader_rows:
        L += ["", f"## Native JSON readers against tracekit's loader ({big:g} MB trace)", "",
              "`bench/readers.py`: each reader in its own child process, timed from its first read to a "
              "Polars frame of the events' fields (imports not timed), on the same machine in the same run; "
              "the result compared is the number of kernels and the sum of their durations in ns. DuckDB, "
              "pyarrow.json, Polars' read_ndjson and simdjson read a newline-delimited copy of the events (a Kineto file is one "
              "JSON object, not NDJSON; the copy is made beforehand and not timed), so their figures are "
              "their best case.", "", readers.markdown(reader_rows)]

    if stages:
        L += ["", "## Where a report's time goes (one process, stage by stage)", "",
              "`bench/stages.py` on the largest trace of each family. Peak RSS is the process's "
              "high-water mark at the end of the stage, so the stage where it jumps is the one that needs "
              "the memory. The analyses are timed one at a time; the report itself runs round trips in a "
              "second thread beside the unit summary (steps), launch gaps and breakdown, so "
              "`report.build()` alone (below each table) takes less than their sum. *Share of the "
              "analyses*: of the analysis rows (from op_tree to findings), without imports, load, "
              "`build()`'s own work and rendering."]
        for family in families:
            top = family_sizes.get(family.key, [big])[-1]
            if stages.get(family.key):
                L += stage_table(stages[family.key], family.label(top),
                                 family_traces.get(family.key, {}).get(top, {}))
    main_stages = stages.get("main") if stages else None
    if main_stages:
        seconds = main_stages.get("seconds", {})
        peaks = main_stages.get("peak_rss_after", {})
        whole = seconds.get("(whole build() again, for reference)")
        pq_load = seconds.get("(load of the Parquet cache)")
        parts = {k: v for k, v in seconds.items() if not k.startswith("(")}
        why = []
        ranked = sorted(((v, k) for k, v in parts.items() if k not in ("imports",)), reverse=True)
        if t_big and t_big > 8:
            over = [f"{k} {v:.1f} s" for v, k in ranked if v >= 1.0]
            cpu = ""
            if rep_big and rep_big.get("system_s") is not None:
                cpu = (f" The run used {rep_big['user_s']:.1f} s of user CPU and {rep_big['system_s']:.1f} s "
                       f"of system CPU, the latter mostly the kernel providing fresh memory pages "
                       f"({rep_big.get('minor_faults', 0):,} minor page faults, "
                       f"{1e6 * rep_big['system_s'] / max(rep_big.get('minor_faults', 1), 1):.1f} µs each "
                       "on this virtual machine).")
            why.append(f"- **≤ 8 s**: the stages over a second are {', '.join(over)}.{cpu} The load "
                       f"decodes the JSON in shares, one process per core (here {mach['cores']}): msgspec decodes every "
                       "event into a typed struct and Python routes its fields into column lists that "
                       "become Polars series, then the shares are joined and sorted by time; the analyses "
                       f"then run in one process on Polars (`report.build()` {whole or 0:.1f} s here). "
                       "The stage timing above and the command's wall time are separate runs of the "
                       "same work; their difference is how much this shared machine's speed varied.")
        for form, r in forms[1:]:
            if secs(r) and secs(r) > 8 and rep_big and r.get("user_s") is not None:
                why.append(f"- **≤ 8 s, {form}**: {fmt_s(r)}, with {r['user_s']:.1f} s of user and "
                           f"{r['system_s']:.1f} s of system CPU against {rep_big['user_s']:.1f} s and "
                           f"{rep_big['system_s']:.1f} s for the plain file: the difference is what this "
                           "form adds to the same decode in shares (a gzip trace is inflated by both "
                           "processes, each decoding its own part as it inflates; a minified one is "
                           "planned at its event separators).")
        if rss_big and rss_big > 2.5 * GB:
            prev, jumps = 0, []
            for k in parts:
                p = peaks.get(k) or 0
                if p - prev > 0.25 * GB:
                    jumps.append(f"{k} (to {p / GB:.2f} GB)")
                prev = max(prev, p)
            why.append("- **peak RSS ≤ 2.5 GB**: the high-water mark rises in " + ", ".join(jumps) + ".")
        if hta_ratio and hta_ratio < 10:
            why.append(f"- **≥ 10× HTA**: HTA took {secs(hta_big):.0f} s ({fmt_cpu_s(hta_big)} CPU), so "
                       f"tracekit must finish in {secs(hta_big) / 10:.1f} s; it took {t_big:.1f} s "
                       f"({fmt_cpu_s(rep_big)} CPU; the same stages as above).")
        if hta_cpu_ratio and hta_cpu_ratio < 10 <= (hta_ratio or 0):
            why.append(f"- **≥ 10× HTA, in CPU time**: {hta_cpu_ratio:.1f}× — HTA used {fmt_cpu_s(hta_big)} of CPU "
                       f"and tracekit {fmt_cpu_s(rep_big)}: the wall ratio ({hta_ratio:.1f}×) counts on the "
                       "second core being free for tracekit's second process.")
        if secs(parq_step):
            why.append(f"- **Parquet**: `convert` stores the report it computed (keyed by the tracekit "
                       f"code and the execution trace used), so re-reporting the converted trace takes "
                       f"{fmt_s(parq)}; asking for something the stored report does not hold (`--step`, "
                       f"`--ceiling`, `--hta`) re-runs every analysis on the Parquet frames: "
                       f"{fmt_s(parq_step)}, of which loading the frames is {pq_load or 0:.2f} s.")
        if secs(parq) and secs(parq) > 1:
            why.append(f"- **Parquet re-analysis ≤ 1 s**: the cache removes only the JSON parse "
                       f"(Parquet load {pq_load or 0:.2f} s); the analyses themselves "
                       f"(`report.build()` {whole or 0:.1f} s) and rendering remain.")
        if diff_ratio and diff_ratio > 2:
            d = secs(diff) or 0
            why.append(f"- **diff ≤ 2× report**: the diff took {d:.1f} s against {t_big:.1f} s for one "
                       f"report; it profiles A and B in two processes at once, which on {mach['cores']} cores compete "
                       f"for the cores and for fresh memory pages ({(diff or {}).get('minor_faults', 0):,} "
                       f"page faults, {(diff or {}).get('system_s', 0):.1f} s system CPU).")
        if why:
            L += ["", "### Notes on the targets: why one is not met, what a figure means", "", *why]
    L += ["", "## Raw figures", "", "```json", json.dumps(
        {k: {kk: vv for kk, vv in v.items() if kk != "stderr"} for k, v in results.items()}, indent=1,
        sort_keys=True), "```", ""]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
