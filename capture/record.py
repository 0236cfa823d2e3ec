"""Profile a workload and write its Kineto trace (and optional execution trace) atomically.

Contract: :func:`record` runs ``loop(prof)`` under ``torch.profiler.profile`` and leaves exactly
``<stem>.json.gz`` (and ``<stem>.et.json.gz`` when an execution trace is asked for) in ``out_dir``.
With a :class:`Schedule` the loop must call ``prof.step()`` once per step (which is what emits the
``ProfilerStep#N`` spans) and the trace holds the active steps; with ``schedule=None`` the trace holds
everything from the first call on (compilation, autotuning, JIT) and the loop's own
``record_function`` annotations are its units. :func:`step_loop` is the usual loop: ``wait + warmup +
active`` steps, each wrapped in ``record_function(label)`` and closed by ``prof.step()``, optionally
with an :class:`~capture.ground_truth.AllocatorProbe` around the active steps. Files appear only
complete: each is built under a dot-prefixed temp name in the same folder and renamed into place.
Returns a :class:`Recorded` summary.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capture import header
from tracekit import output

TMP_PREFIX = ".tmp-"



@dataclass(frozen=True)
class Schedule:
    wait: int = 1
    warmup: int = 1
    active: int = 3

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active


@dataclass
class Recorded:
    trace_file: str
    trace_bytes: int
    execution_trace_file: str | None = None
    execution_trace_bytes: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def write_bytes_atomic(final: Path, data: bytes) -> None:
    with output.atomic_path(final, make_parents=True) as tmp:
        tmp.write_bytes(data)


def gzip_file_atomic(src: Path, final: Path) -> int:
    """Compress ``src`` into ``final`` atomically; returns the compressed size. ``src`` is left alone.

    mtime=0 keeps the gzip header free of the capture time, so identical traces compress identically.
    """
    with output.atomic_path(final, make_parents=True) as tmp:
        with open(src, "rb") as fin, open(tmp, "wb") as raw, gzip.GzipFile(
            filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0
        ) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
    return final.stat().st_size


def _neutralise_header(raw: Path, trace_name: str) -> None:
    raw.write_bytes(header.neutralise(raw.read_bytes(), trace_name))


def summarize_trace(path: Path) -> dict[str, Any]:
    """Counts that let a reader of the manifest sanity-check a trace without opening it."""
    with open(path, "rb") as f:
        doc = json.load(f)
    events = doc.get("traceEvents", [])
    kernels: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    steps = memory = 0
    for ev in events:
        cat = ev.get("cat")
        if cat:
            cats[cat] += 1
        if cat == "kernel":
            kernels[ev.get("name", "")] += 1
        elif str(ev.get("name", "")).startswith("ProfilerStep#") and cat in ("user_annotation", "cpu_op"):
            steps += 1
        elif ev.get("name") == "[memory]":
            memory += 1
    summary = {
        "events": len(events),
        "categories": dict(sorted(cats.items())),
        "profiler_steps": steps,
        "kernels": dict(sorted(kernels.items())),
    }
    if memory:
        summary["memory_events"] = memory
    return summary


def step_loop(
    step: Callable[[], Any],
    *,
    label: str,
    schedule: Schedule,
    sync: Callable[[], None] = lambda: None,
    sync_each_step: bool = True,
    probe: Any = None,
) -> Callable[[Any], None]:
    """The usual profiled loop: ``schedule.total`` steps of ``record_function(label)`` + ``prof.step()``.

    ``sync_each_step`` synchronises inside every step so each ``ProfilerStep`` holds its own GPU work;
    without it only the steps before the active window are synchronised (the window then starts on an
    idle GPU and runs like a real training loop, the CPU free to run ahead). ``probe`` (an
    AllocatorProbe) is told where the active window and each active step begin and end.
    """

    def loop(prof: Any) -> None:
        from torch.profiler import record_function

        first_active = schedule.wait + schedule.warmup
        for i in range(schedule.total):
            active = i >= first_active
            if probe is not None and i == first_active:
                probe.window_begin()
            if probe is not None and active:
                probe.unit_begin()
            with record_function(label):
                step()
            if sync_each_step or not active:
                sync()
            if probe is not None and active:
                probe.unit_end(f"ProfilerStep#{i}")
                if i == schedule.total - 1:
                    probe.window_end()
            prof.step()

    return loop


def record(
    loop: Callable[[Any], None],
    *,
    out_dir: Path,
    stem: str,
    device: str,
    schedule: Schedule | None,
    record_shapes: bool = True,
    profile_memory: bool = False,
    with_stack: bool = False,
    execution_trace: bool = False,
) -> Recorded:
    """Profile ``loop(prof)`` and write ``out_dir/<stem>.json.gz`` (+ ``<stem>.et.json.gz``); see module doc."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler import schedule as make_schedule

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)

    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / f"{stem}.json.gz"
    et_final = out_dir / f"{stem}.et.json.gz"
    # Raw exports live in a private temp folder inside out_dir (same filesystem, cleaned on any exit).
    with tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{stem}.", dir=out_dir) as work:
        raw = Path(work) / f"{stem}.json"
        et_raw = Path(work) / f"{stem}.et.json"
        exported: list[Path] = []

        def on_trace_ready(prof: Any) -> None:
            prof.export_chrome_trace(str(raw))
            exported.append(raw)

        et_observer = None
        if execution_trace:
            et_observer = torch.profiler.ExecutionTraceObserver().register_callback(str(et_raw))

        scheduled = schedule is not None
        try:
            with warnings.catch_warnings():
                # A schedule without warmup steps is asked for on purpose (a cold first step in the window).
                warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
                prof = profile(
                    activities=activities,
                    schedule=make_schedule(wait=schedule.wait, warmup=schedule.warmup, active=schedule.active,
                                           repeat=1) if scheduled else None,
                    on_trace_ready=on_trace_ready if scheduled else None,
                    record_shapes=record_shapes,
                    profile_memory=profile_memory,
                    with_stack=with_stack,
                    execution_trace_observer=et_observer,
                )
            with prof:
                loop(prof)
            if not scheduled:
                on_trace_ready(prof)
        finally:
            if et_observer is not None:
                et_observer.unregister_callback()  # finalises the JSON file

        if not exported:
            raise RuntimeError("the profiler produced no trace (schedule never reached its active steps)")
        _neutralise_header(raw, final.name)
        summary = summarize_trace(raw)
        result = Recorded(trace_file=final.name, trace_bytes=gzip_file_atomic(raw, final), summary=summary)
        if execution_trace:
            if not et_raw.exists() or et_raw.stat().st_size == 0:
                raise RuntimeError("the execution trace observer wrote no file")
            result.execution_trace_file = et_final.name
            result.execution_trace_bytes = gzip_file_atomic(et_raw, et_final)
    return result
