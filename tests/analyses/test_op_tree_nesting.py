"""The vectorised op tree equals the plain stack sweep it replaced, on arbitrary span soups.

The reference below is the original per-item loop (sorted by pid, tid, ts, -end, is_launch, idx;
pop frames whose end <= ts; push ops; launches are leaves). Random inputs include improper
nesting, equal starts, zero durations, null names and tids, several threads and processes.
"""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyses import op_tree
from tracekit.analyses.compile_ops import preop_kind

OPS_SCHEMA = {"idx": pl.UInt32, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
              "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64}
LAUNCH_SCHEMA = {**OPS_SCHEMA, "correlation": pl.Int64}
NAMES = {
    "cpu_op": ["aten::mm", "aten::add", None, "TorchDynamo Cache Lookup"],
    "user_annotation": ["ProfilerStep#1", "mlp_fwd", "## Call CompiledFxGraph abc ##", "bwd"],
    "python_function": ["nn.Module: Linear", "model.py(12): forward", "nn.Module: MLP"],
    "cuda_runtime": ["cudaLaunchKernel", "cudaMemsetAsync"],
}


def reference(trace, gpu: set[int]):
    items = sorted(
        [(r["pid"] or "", r["pid"] is not None, r["tid"] or "", r["tid"] is not None, r, False)
         for r in trace.ops.iter_rows(named=True)]
        + [(r["pid"] or "", r["pid"] is not None, r["tid"] or "", r["tid"] is not None, r, True)
           for r in trace.launches.iter_rows(named=True)],
        key=lambda x: (x[1], x[0], x[3], x[2], x[4]["ts"], -x[4]["end"], x[5], x[4]["idx"]))
    ops, launches, stack, thread = {}, {}, [], None
    for _, _, _, _, r, is_launch in items:
        if (r["pid"], r["tid"]) != thread:
            stack, thread = [], (r["pid"], r["tid"])
        while stack and stack[-1]["end"] <= r["ts"]:
            stack.pop()
        parent = stack[-1] if stack else {"idx": None, "cpu": None, "cpu_name": None, "top": None,
                                           "ann": None, "mod": None}
        if is_launch:
            launches[r["idx"]] = (parent["cpu"], parent["cpu_name"], parent["top"], parent["ann"], parent["mod"])
            if r["correlation"] in gpu:
                for frame in stack:
                    ops[frame["idx"]][-1] = True
            continue
        frame = dict(parent, idx=r["idx"], end=r["end"])
        name, cat = r["name"], r["cat"]
        if cat == "cpu_op":
            frame["cpu"], frame["cpu_name"] = r["idx"], name
            if frame["top"] is None:
                frame["top"] = name
        elif cat == "user_annotation" and not name.startswith("ProfilerStep#") and preop_kind(name) is None:
            frame["ann"] = name
        elif cat == "python_function" and name.startswith("nn.Module: "):
            frame["mod"] = name[len("nn.Module: "):]
        ops[r["idx"]] = [parent["idx"], len(stack), frame["cpu"], frame["cpu_name"], frame["top"],
                         frame["ann"], frame["mod"], False]
        stack.append(frame)
    return ops, launches


@st.composite
def span_soups(draw):
    n = draw(st.integers(0, 40))
    idxs = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n, unique=True))
    ops, launches = [], []
    for i in idxs:
        cat = draw(st.sampled_from(["cpu_op", "cpu_op", "user_annotation", "python_function",
                                    "cuda_runtime", "cuda_runtime"]))
        name = draw(st.sampled_from(NAMES[cat]))
        if name is None and cat != "cpu_op":
            name = "x"
        ts = draw(st.integers(0, 50))
        dur = draw(st.sampled_from([0, 1, 2, 5, 10, 40]))
        row = {"idx": i, "cat": cat, "name": name, "pid": draw(st.sampled_from(["1", "2", "10"])),
               "tid": draw(st.sampled_from(["1", "7", None])), "ts": ts, "dur": dur, "end": ts + dur}
        if cat == "cuda_runtime":
            launches.append({**row, "correlation": draw(st.sampled_from([None, 1, 2, 3]))})
        else:
            ops.append(row)
    return SimpleNamespace(ops=pl.DataFrame(ops, schema=OPS_SCHEMA),
                           launches=pl.DataFrame(launches, schema=LAUNCH_SCHEMA))


@settings(max_examples=300, deadline=None)
@given(span_soups())
@pytest.mark.slow
def test_vectorised_tree_equals_stack_sweep(trace):
    gpu = {1, 3}
    tree = op_tree.build(trace, gpu)
    ops, launches = reference(trace, gpu)
    got_ops = {r["idx"]: [r["parent_idx"], r["depth"], r["direct_cpu_op_idx"], r["cpu_op"], r["top_op"],
                          r["annotation"], r["module"], r["launches_gpu"]]
               for r in tree.ops.iter_rows(named=True)}
    got_launches = {r["idx"]: (r["op_idx"], r["cpu_op"], r["top_op"], r["annotation"], r["module"])
                    for r in tree.launches.iter_rows(named=True)}
    assert got_ops == ops
    assert got_launches == launches
    assert tree.ops.select("idx").equals(trace.ops.select("idx"))
    assert tree.launches.select("idx").equals(trace.launches.select("idx"))
