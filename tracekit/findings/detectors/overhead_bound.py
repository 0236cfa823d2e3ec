"""The ``overhead_bound`` rule: the host's dispatch of ops and launches, not the GPU, sets the step's pace.

Read from the step decomposition (:mod:`tracekit.analyses.decomposition`): a steady unit is
overhead-bound when its limit is ``dispatch`` (not blocked on the device, not waiting for data,
not op-free Python: those are other rules' causes) and that dispatch is at least
:data:`OVERHEAD_CPU_OVER_GPU` × its GPU busy time. Launch calls that are the driver loading a
kernel for the first time (:func:`tracekit.findings.detectors.host_wait.cold_launches`) are a cold
start, not dispatch overhead: they are taken out of the dispatch first.

The price (``resource="host"``): what CUDA graphs or torch.compile take off the host, the step's
dispatch in excess of its GPU busy time (a replayed graph issues the whole step in one call; the
GPU's own work stays), summed over the overhead-bound steady units and spread over the steady
window (:func:`tracekit.findings.evidence.costs_enough`). A trace that already replays CUDA graphs
(``cudaGraphLaunch`` calls) is told to fuse or batch instead, never to use CUDA graphs. A trace whose
overhead-bound steps run compiled regions (``Torch-Compiled Region``) and replay no graph is already
compiled: it is told that its compiled code replays no CUDA graph and how to find out why (Inductor
skips ``reduce-overhead``'s graphs for mutated inputs, CPU tensors or dynamic shapes, and logs it), not
to compile. A unit that records a CUDA graph (:mod:`tracekit.analyses.compilations`' ``graph_record``:
``torch.cuda.graph``, a serving engine's capture phase, a cudagraph tree's record) is never
overhead-bound: its launch calls record graph nodes, once, and run nothing.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from tracekit.analyses import compilations
from tracekit.analyses import steps as steps_analysis
from tracekit.analyses.round_trips import GRAPH_LAUNCH_APIS
from tracekit.findings.detectors.host_wait import cold_launches
from tracekit.findings.evidence import costs_enough
from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Overhead-bound: dispatch at least this multiple of GPU busy (the study's "CPU ≫ GPU", as the
#: step verdict takes it: :data:`tracekit.analyses.steps.OVERHEAD_BOUND_MIN_CPU_OVER_GPU`).
OVERHEAD_CPU_OVER_GPU = steps_analysis.OVERHEAD_BOUND_MIN_CPU_OVER_GPU
#: ... with at least this many launch calls per step: the remedies (CUDA graphs, compile) remove
#: launch overhead, which needs launches to be there; a step of a few launches whose CPU time
#: dominates is bound by Python or by the profiler's own per-op cost (``record_shapes``), which a
#: trace cannot tell from dispatch (the sample Liger and compiled MLPs: 6 and 4 launches, GPU-bound
#: outside the profiler).
OVERHEAD_MIN_LAUNCHES = 20
#: The fix for a trace whose launches are already CUDA-graph replays.
GRAPHED_FIX = ("the step already replays CUDA graphs: fuse what runs outside them (torch.compile the eager "
               "parts) or give each launch more work (a larger batch)")

#: The fix for steps that already run compiled regions but replay no CUDA graph.
COMPILED_FIX = ("the step already runs compiled code that replays no CUDA graph: with "
                "torch.compile(mode='reduce-overhead') Inductor skips CUDA graphs for mutated inputs, CPU tensors "
                "or dynamic shapes and says why in its log (TORCH_LOGS=perf_hints); remove that cause, capture "
                "the step with torch.cuda.graph, or give each launch more work (a larger batch)")


RULE = Rule(
    id="overhead_bound",
    title="steps are overhead-bound: the CPU issues work slower than the GPU runs it",
    severity="warning",
    needs="the decomposition's dispatch vs GPU busy per steady unit; launch calls per step",
    thresholds={"OVERHEAD_CPU_OVER_GPU": OVERHEAD_CPU_OVER_GPU, "OVERHEAD_MIN_LAUNCHES": OVERHEAD_MIN_LAUNCHES},
    fix=("fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile, "
         "or a larger batch"),
)


def _recording_units(context: Context) -> list[int]:
    """The units that record a CUDA graph (module docstring)."""
    units = getattr(context.compilations, "units", None)
    if units is None or units.height == 0:
        return []
    return units.filter(pl.col("graph_record"))["step"].to_list()


def detect(context: Context) -> list[Finding]:
    dec = context.decomposition
    if dec is None or dec.units.height == 0:
        return []
    cold = cold_launches(context).group_by("step").agg(cold_ns=pl.col("dur").sum())
    recording = _recording_units(context)
    units = (dec.units.filter(pl.col("step").is_in(context.steady) & ~pl.col("step").is_in(recording))
             .join(cold, on="step", how="left").with_columns(pl.col("cold_ns").fill_null(0))
             .with_columns(dispatch=(pl.col("dispatch_ns") - pl.col("cold_ns")).clip(lower_bound=0)))
    # The limit again with cold launches out of dispatch: dominant among the host's parts and ≫ GPU busy.
    bound = units.filter((pl.col("limit") == "dispatch")
                         & (pl.col("dispatch") >= pl.max_horizontal("blocked_ns", "data_ns", "op_free_ns"))
                         & (pl.col("dispatch") >= OVERHEAD_CPU_OVER_GPU * pl.col("gpu_busy_ns")))
    if bound.height == 0:
        return []
    steps = bound["step"].to_list()
    calls = context.launches.filter(pl.col("step").is_in(steps) & pl.col("gpu_kinds").list.len().gt(0))
    per_step = calls.height / len(steps)
    if per_step < OVERHEAD_MIN_LAUNCHES:
        return []
    excess = float((bound["dispatch"] - bound["gpu_busy_ns"]).sum()) / context.n
    if not costs_enough(context, steps, excess):
        return []
    mean_call = float(calls["dur"].mean() or 0) if calls.height else 0.0
    first = bound.row(0, named=True)
    name = context.summary.filter(pl.col("step") == first["step"])["name"]
    start = context.summary.filter(pl.col("step") == first["step"])["cpu_start_ns"]
    evidence = [Evidence("step", name[0] if name.len() else f"step {first['step']}", first["step"],
                         int(start[0]) if start.len() else None, round(len(steps) / context.n, 3),
                         int(first["dispatch"]),
                         detail=f"dispatch {first['dispatch']:,} ns vs GPU busy {first['gpu_busy_ns']:,} ns of a "
                                f"{first['wall_ns']:,} ns step (blocked {first['blocked_ns']:,}, data "
                                f"{first['data_ns']:,}, op-free {first['op_free_ns']:,})"),
                Evidence("launch", "launch calls", first["step"],
                         int(calls["ts"].min()) if calls.height else None, round(per_step, 3),
                         int(round(per_step * mean_call)), detail=f"mean {mean_call:,.0f} ns per call")]
    finding = RULE.finding(steps, evidence, float(bound["dispatch"].sum()) / context.n, excess,
                           "dispatch in excess of GPU busy in the overhead-bound steady steps (what a replayed "
                           "CUDA graph or a compiled step takes off the host; the GPU's own work stays)",
                           launches_per_step=round(per_step, 3), mean_launch_ns=int(mean_call),
                           gpu_busy_ns=int(bound["gpu_busy_ns"].median()),
                           cpu_dispatch_ns=int(bound["dispatch"].median()), resource="host")
    graphed = context.launches.filter(pl.col("name").is_in(list(GRAPH_LAUNCH_APIS))).height > 0
    if graphed:
        return [replace(finding, fix=GRAPHED_FIX)]
    compiled = context.tree_ops.height > 0 and context.tree_ops.filter(
        pl.col("step").is_in(steps) & pl.col("name").str.starts_with(compilations.REGION_PREFIX)).height > 0
    return [replace(finding, fix=COMPILED_FIX) if compiled else finding]
