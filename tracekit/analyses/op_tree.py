"""The CPU op tree of every thread, by time nesting, and where each launch call sits in it.

Contract: :func:`build` sweeps each (pid, tid) once in time order with a stack. A span is the child
of the innermost open span that contains its start; launch calls (runtime/driver) are leaves. From
the stack it derives, for every op and every launch:

* ``cpu_op`` — the innermost enclosing ``cpu_op`` (for an op: itself if it is a cpu_op),
* ``top_op`` — the outermost enclosing ``cpu_op`` (the op the user called, e.g. ``aten::linear``),
* ``annotation`` — the innermost enclosing ``user_annotation`` other than ``ProfilerStep#N`` and
  torch.compile's own wrappers (so the user's ``mlp_fwd`` rather than ``## Call CompiledFxGraph ##``),
* ``module`` — the innermost ``nn.Module: …`` python_function, when the trace has stacks.

Nesting rather than ``External id`` because traces before PyTorch ~2.3 give kernels an External id
equal to their correlation, matching no op. Ties: at equal start the longer span is the parent;
``idx`` breaks remaining ties so the result is deterministic.

Frames returned (:class:`OpTree`):

``ops``: the trace's ops plus ``parent_idx u32?``, ``depth u32``, ``cpu_op str?``, ``top_op str?``,
``annotation str?``, ``module str?``, ``launches_gpu bool`` (its subtree contains a launch that has
GPU activity), ``direct_cpu_op_idx u32?`` (innermost cpu_op ancestor-or-self).

``launches``: the trace's launches plus ``op_idx u32?`` (innermost cpu_op), ``cpu_op str?``,
``top_op str?``, ``annotation str?``, ``module str?``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyses.compile_ops import preop_kind
from tracekit.trace import Trace

STEP_PREFIX = "ProfilerStep#"
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class OpTree:
    """Ops and launches annotated with their place in the per-thread op tree."""

    ops: pl.DataFrame
    launches: pl.DataFrame


def build(trace: Trace, gpu_correlations: set[int] | None = None) -> OpTree:
    """Nest ops and launches per thread.

    ``gpu_correlations`` are the correlation ids that have GPU activity; launches with one of them
    mark every enclosing op as ``launches_gpu``. Defaults to the correlations in ``trace.gpu``.
    """
    if gpu_correlations is None:
        gpu_correlations = set(
            trace.gpu.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))["correlation"]
            .drop_nulls().unique().to_list()
        )
    ops = trace.ops.select("idx", "cat", "name", "pid", "tid", "ts", "end")
    launches = trace.launches.select(
        "idx", pl.lit("launch").alias("cat"), "name", "pid", "tid", "ts", "end", "correlation"
    )
    items = pl.concat(
        [ops.with_columns(correlation=pl.lit(None, pl.Int64)), launches], how="vertical_relaxed"
    ).with_columns(is_launch=pl.col("cat") == "launch").sort(
        ["pid", "tid", "ts", "end", "is_launch", "idx"],
        descending=[False, False, False, True, False, False],
    )
    result = _sweep(
        items["idx"].to_list(), items["cat"].to_list(), items["name"].to_list(),
        items["pid"].to_list(), items["tid"].to_list(), items["ts"].to_list(),
        items["end"].to_list(), items["correlation"].to_list(), gpu_correlations,
    )
    op_cols, launch_cols = result
    op_info = pl.DataFrame(op_cols, schema={
        "idx": pl.UInt32, "parent_idx": pl.UInt32, "depth": pl.UInt32, "direct_cpu_op_idx": pl.UInt32,
        "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String, "module": pl.String,
        "launches_gpu": pl.Boolean,
    })
    launch_info = pl.DataFrame(launch_cols, schema={
        "idx": pl.UInt32, "op_idx": pl.UInt32, "cpu_op": pl.String, "top_op": pl.String,
        "annotation": pl.String, "module": pl.String,
    })
    return OpTree(
        ops=trace.ops.join(op_info, on="idx", how="left", maintain_order="left"),
        launches=trace.launches.join(launch_info, on="idx", how="left", maintain_order="left"),
    )


def _sweep(idxs, cats, names, pids, tids, starts, ends, correlations, gpu_correlations):
    """One pass over items sorted by (pid, tid, ts, -end, is_launch, idx); returns column dicts."""
    op_cols: dict[str, list] = {k: [] for k in (
        "idx", "parent_idx", "depth", "direct_cpu_op_idx", "cpu_op", "top_op", "annotation",
        "module", "launches_gpu")}
    launch_cols: dict[str, list] = {k: [] for k in (
        "idx", "op_idx", "cpu_op", "top_op", "annotation", "module")}
    # Stack frame: [end, idx, inner_cpu_idx, inner_cpu_name, top_cpu_name, annotation, module, pos]
    # where pos is the op's row in op_cols (to set launches_gpu later).
    stack: list[list] = []
    thread = None
    launches_gpu = op_cols["launches_gpu"]
    for i in range(len(idxs)):
        key = (pids[i], tids[i])
        if key != thread:
            stack.clear()
            thread = key
        ts = starts[i]
        while stack and stack[-1][0] <= ts:
            stack.pop()
        parent = stack[-1] if stack else None
        if parent is None:
            inner_idx = inner_name = top_name = annotation = module = None
        else:
            _, _, inner_idx, inner_name, top_name, annotation, module, _ = parent
        cat = cats[i]
        if cat == "launch":
            launch_cols["idx"].append(idxs[i])
            launch_cols["op_idx"].append(inner_idx)
            launch_cols["cpu_op"].append(inner_name)
            launch_cols["top_op"].append(top_name)
            launch_cols["annotation"].append(annotation)
            launch_cols["module"].append(module)
            corr = correlations[i]
            if corr is not None and corr in gpu_correlations:
                for frame in stack:
                    launches_gpu[frame[7]] = True
            continue
        name = names[i]
        if cat == "cpu_op":
            inner_idx, inner_name = idxs[i], name
            if top_name is None:
                top_name = name
        elif (cat == "user_annotation" and not name.startswith(STEP_PREFIX)
              and preop_kind(name) is None):
            annotation = name
        elif cat == "python_function" and name.startswith(MODULE_PREFIX):
            module = name[len(MODULE_PREFIX):]
        pos = len(op_cols["idx"])
        op_cols["idx"].append(idxs[i])
        op_cols["parent_idx"].append(parent[1] if parent is not None else None)
        op_cols["depth"].append(len(stack))
        op_cols["direct_cpu_op_idx"].append(inner_idx)
        op_cols["cpu_op"].append(inner_name)
        op_cols["top_op"].append(top_name)
        op_cols["annotation"].append(annotation)
        op_cols["module"].append(module)
        launches_gpu.append(False)
        stack.append([ends[i], idxs[i], inner_idx, inner_name, top_name, annotation, module, pos])
    return op_cols, launch_cols
