"""The trace-collection snippet of docs/guide/collect.md runs as written (CPU torch, a tiny model) and
tracekit reads what it wrote: one step per active step of its schedule, the ops, the memory events,
the Python frames and the execution trace it asked for."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import code_block

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "collect.md"


def test_the_collect_snippet_writes_a_trace_tracekit_reads(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (the capture extra, or pip install torch)")
    import tracekit

    snippet = code_block(PAGE, "COLLECT", "python")
    wait, warmup, active = map(int, re.search(r"schedule\(wait=(\d+), warmup=(\d+), active=(\d+)", snippet).groups())
    (tmp_path / "snippet.py").write_text(snippet, encoding="utf-8")
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]

    session = tracekit.open(tmp_path / "trace.json")
    assert session.execution_trace_path == tmp_path / "trace.et.json"  # found beside the trace
    report = session.report()
    assert report.steps["name"].to_list() == [f"ProfilerStep#{n}" for n in range(wait + warmup, wait + warmup + active)]
    ops = session.trace.ops
    assert {"aten::addmm", "aten::gelu", "Optimizer.step#AdamW.step"} <= set(ops["name"].to_list())
    assert (ops["cat"] == "python_function").any()  # with_stack
    assert ops.filter(ops["input_dims"].is_not_null()).height > 0  # record_shapes
    assert session.trace.memory.height > 0 and report.memory.devices.height > 0  # profile_memory
    assert report.round_trips.method == "execution_trace"  # the ExecutionTraceObserver's file


def test_the_snippets_gpu_trace_fills_every_section():
    """sample_traces/docs_collect/: the snippet, run unchanged on an H100, gives a report whose every
    section has rows. Figures counted in the raw JSON: three ProfilerStep# annotations (3,795.216,
    2,873.405, 2,804.928 µs), 75 kernels and 3 memcpys (25 kernels and one copy per step), 138
    [memory] events whose largest CUDA Total Allocated is 78,734,336 B."""
    import io

    import tracekit
    from tracekit.render import renderer_for

    folder = ROOT / "sample_traces" / "docs_collect"
    session = tracekit.open(folder / "trace.json.gz")
    assert session.execution_trace_path == folder / "trace.et.json.gz"
    report = session.report()
    assert report.steps.select("name", "dur_ns", "kernel_count", "gpu_activity_count").rows() == [
        ("ProfilerStep#2", 3_795_216, 25, 26), ("ProfilerStep#3", 2_873_405, 25, 26),
        ("ProfilerStep#4", 2_804_928, 25, 26)]
    assert dict(report.memory.devices.select("device", "peak_allocated").rows())["cuda:0"] == 78_734_336
    assert report.round_trips.method == "execution_trace"
    out = io.StringIO()
    renderer_for("md").render(report, out)
    text = out.getvalue()
    sections = text.split("\n## ")[1:]
    empty = [s.splitlines()[0] for s in sections if "\n| " not in s and "\n- " not in s]
    # An eager model compiles nothing: the one section without rows, and it says so.
    assert empty == ["torch.compile pre-ops"], empty
    for title in ("Findings", "GPU time by class", "Steps", "Launch paths", "Achieved throughput",
                  "Memory round trips", "Memory — peak per device", "Memory — allocations by op"):
        assert any(s.startswith(title) for s in sections), title
