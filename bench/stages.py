"""Where one report's time and memory go, stage by stage, in one process (run by ``bench/compare.py``).

    python bench/stages.py TRACE [TRACE.parquet]

Loads TRACE as ``tracekit report`` does (one process per core), then runs the real analysis
pipeline and report (``tracekit.results.report.build(tracekit.analyses.pipeline.run(trace))``, "``build()``"
below) once with every public function of each analysis module wrapped in a timer, so the stages are
exactly the calls the report makes — never a copy of them that could drift.
A stage's time is exclusive: a stage called inside another (``op_tree`` inside ``attribution``)
is counted once, in its own row; ``build()``'s own work between the analyses is one more row. While timed, the analyses run one at
a time: the work ``build()`` hands a second thread (round trips beside the unit summary, launch gaps
and breakdown) runs where it is handed, so each row is that stage's own work and the rows add up;
their sum is then more than ``build()``'s wall time. Then ``build()`` runs again unwrapped and
threaded, as the command runs it, for reference, the report is rendered as Markdown, and (given a
Parquet file) the converted trace is loaded.

Prints one JSON line: ``{"seconds": {stage: s}, "peak_rss_after": {stage: bytes}}``; rows whose
name starts with ``(`` are references, not parts of the whole. Peak RSS is the process's
high-water mark when the stage last ended.
"""

from __future__ import annotations

import functools
import gc
import inspect
import io
import json
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tracekit

#: Report stages in the order they run: (row name, analysis modules whose functions it covers; a
#: bare name is under ``tracekit.analyses``). Modules this checkout lacks are left out.
STAGES = (
    ("op_tree", ("op_tree",)),
    ("attribution", ("attribution",)),
    ("units", ("units",)),
    ("compilations", ("compilations",)),
    ("steps", ("steps",)),
    ("launch_gaps (+ clock)", ("launch_gaps", "clock")),
    ("round_trips (+ traffic models)", ("round_trips", "traffic")),
    ("breakdown", ("breakdown",)),
    ("throughput", ("throughput",)),
    ("dispatch", ("dispatch", "compile_ops")),
    ("kernels", ("kernels",)),
    ("memory", ("memory",)),
    ("host syncs", ("syncs",)),
    ("findings", ("tracekit.findings.engine", "tracekit.findings")),
)


def hwm() -> int:
    """This process's peak RSS so far (VmHWM), in bytes."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class Clock:
    """Exclusive seconds per stage: time inside a nested stage is taken out of the enclosing one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.peaks: dict[str, int] = {}
        self.mark = time.perf_counter()
        self.inner: list[float] = []  # per open stage: seconds spent in stages nested inside it

    def tick(self, name: str) -> None:
        """Charge the time since the last tick to ``name`` (for the steps outside ``build()``)."""
        now = time.perf_counter()
        self._charge(name, now - self.mark)
        self.mark = now

    def _charge(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.peaks[name] = hwm()

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            self.inner.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                nested = self.inner.pop()
                if self.inner:
                    self.inner[-1] += spent
                self._charge(name, spent - nested)
        return timed


class InlineExecutor:
    """Stands in for ``concurrent.futures.ThreadPoolExecutor`` in the report while it is timed: each
    task runs when it is submitted, in this thread, so the stages never overlap."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn, *args, **kwargs) -> Future:
        done: Future = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as err:  # noqa: BLE001 - handed to whoever asks for the result
            done.set_exception(err)
        return done


def instrument(clock: Clock, modules: dict[str, ModuleType]) -> list[tuple[ModuleType, str, object]]:
    """Wrap every public function defined in each stage's modules (calls between analyses go through
    module attributes, so the report's own calls reach the wrappers); returns what to put back."""
    originals = []
    for name, module_names in STAGES:
        for module_name in module_names:
            module = modules.get(module_name)
            if module is None:
                continue
            for attr, value in vars(module).copy().items():
                if (not attr.startswith("_") and inspect.isfunction(value)
                        and value.__module__.startswith(module.__name__)):  # a package's own too
                    originals.append((module, attr, value))
                    setattr(module, attr, clock.wrap(name, value))
    return originals


def main(argv: list[str]) -> None:
    clock = Clock()
    import importlib

    from tracekit.results import report as report_mod
    from tracekit.analyses import pipeline
    from tracekit.load import open_trace
    from tracekit.render import renderer_for

    modules = {}
    for _, names in STAGES:
        for m in names:
            try:
                modules[m] = importlib.import_module(m if "." in m else f"tracekit.analyses.{m}")
            except ImportError:  # an older checkout
                pass
    clock.tick("imports")
    trace = open_trace(argv[0], workers=None)
    clock.tick("load (tracekit/load/, one process per core)")
    originals = instrument(clock, modules)
    # One stage at a time (see the module docstring).
    originals.append((pipeline, "ThreadPoolExecutor", pipeline.ThreadPoolExecutor))
    pipeline.ThreadPoolExecutor = InlineExecutor
    for name, names in STAGES:  # rows in the order the report runs them, whichever is first to end
        if any(m in modules for m in names):
            clock.seconds[name] = 0.0
    report_mod.build(pipeline.run(trace))
    in_stages = sum(clock.seconds.get(name, 0.0) for name, _ in STAGES)
    clock.tick("build() between the stages")
    clock.seconds["build() between the stages"] -= in_stages
    for module, attr, value in originals:  # the reference run below is the plain build()
        setattr(module, attr, value)
    gc.collect()  # so the next high-water mark is build()'s own
    clock.mark = time.perf_counter()
    result = report_mod.build(pipeline.run(trace))
    clock.tick("(whole build() again, for reference)")
    renderer_for("md").render(result, io.StringIO())
    clock.tick("render md")
    if len(argv) > 1:  # the Parquet cache of the same trace: its load alone
        clock.mark = time.perf_counter()
        open_trace(argv[1])
        clock.tick("(load of the Parquet cache)")
    print(json.dumps({"seconds": clock.seconds, "peak_rss_after": clock.peaks}))


if __name__ == "__main__":  # the loader's worker processes import this file again
    main(sys.argv[1:])
