"""The findings engine: what is wrong in a trace, the evidence, the price, and the fix.

Contract: :func:`analyze` takes a :class:`~tracekit.trace.Trace` (its ``steps`` the unit windows),
the whole-trace analyses (:class:`tracekit.report.TraceAnalyses`), the trace's compile pre-ops and
the device's ceilings, and returns a tuple of :class:`Finding` — warnings first, then by measured
cost per step (largest first), then rule id. No finding without evidence: every finding names the
ops, kernels or launch calls it saw, with a first timestamp and counts, enough to find it in
Perfetto.

Rules are data: :data:`RULES` maps a rule id to a :class:`Rule` (title, severity, the evidence it
reads, its thresholds — each a named constant with the reason it has that value — and the one-line
fix with the PyTorch knob). A rule's detector is one function over frames (vectorised with Polars),
registered in :data:`DETECTORS` under the rule's id. Figures are per step, taken over the *steady*
steps (:func:`tracekit.analyses.steps.steady_steps`; all steps when none is steady), except
``cold_first_step``, which is about the steps that are not steady.

A :class:`Finding` carries ``rule``, ``title``, ``severity`` (``warning``: costs time every step and
has a known fix; ``info``: worth knowing, not a defect on its own), ``steps`` (the unit numbers it
occurs in), ``evidence`` (:class:`Evidence` rows), ``cost_ns_per_step`` (measured: GPU or CPU time the
problem takes per step; for a one-time cost — a cold step, a recompile — the cost itself, with
``quantities["once"]`` true), ``saving_ns_per_step`` with ``saving_basis`` (projected from the trace: bytes ÷
the device's bandwidth, a copy's time against pinned bandwidth, launch overhead × launches…; None when
the trace cannot price it), ``fix`` and ``thresholds`` (the rule's constants, printed with it).

Compile findings read the compile analysis (:class:`tracekit.analyses.compilations.Compilations`,
``TraceAnalyses.compilation``) that :func:`analyze` is given as ``compilations``: ``recompile`` is
one finding per trace listing every frame recompilation (compile id, the unit it happened in, its
trigger and the dims that changed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.analyses.steps import SYNC_CALL_SUFFIX
from tracekit.trace import Trace

Value = int | float | str | bool | None
SEVERITIES = ("warning", "info")

# -- thresholds (each with why) -------------------------------------------------------------------

#: A rule about steps fires when at least this share of the steady steps shows it (one odd step
#: out of three is noise, not a property of the loop).
MIN_STEP_SHARE = 0.5
#: Overhead-bound: CPU dispatch at least this multiple of GPU busy (the study's "CPU ≫ GPU", as the
#: step verdict takes it: :data:`tracekit.analyses.steps.OVERHEAD_BOUND_MIN_CPU_OVER_GPU`).
OVERHEAD_CPU_OVER_GPU = steps_analysis.OVERHEAD_BOUND_MIN_CPU_OVER_GPU
#: ... with at least this many launch calls per step: the remedies (CUDA graphs, compile) remove
#: launch overhead, which needs launches to be there; a step of a few launches whose CPU time
#: dominates is bound by Python or by the profiler's own per-op cost (``record_shapes``), which a
#: trace cannot tell from dispatch (the sample Liger and compiled MLPs: 6 and 4 launches, GPU-bound
#: outside the profiler).
OVERHEAD_MIN_LAUNCHES = 20
#: Cold first step: wall time above this multiple of the median of the others (the step summary's
#: rule, :data:`tracekit.analyses.steps.COLD_STEP_FACTOR`).
COLD_FACTOR = steps_analysis.COLD_STEP_FACTOR
#: Input stall: the GPU idle before a step's first activity, waiting for its launch, for at least
#: this share of the step's wall time (less is the profiler's own step prologue) ...
STALL_MIN_SHARE = 0.10
#: ... and at least this long (a few tens of µs between steps is Python and the profiler).
STALL_MIN_NS = 100_000
#: A synchronise that ends within this of the GPU going idle was waiting for it (clocks of CPU and
#: GPU agree to a few µs on one host).
SYNC_SLACK_NS = 10_000
#: Host sync: blocked at least this long per step in syncs an op triggered (a sync of a few µs on
#: an idle device costs nothing; one that waits for queued work costs that work's latency).
SYNC_MIN_NS = 20_000
#: Pageable copies: at least this many bytes per step (a few scalars copied from pageable memory
#: are not worth pinning).
PAGEABLE_MIN_BYTES = 1 << 20
#: fp32 GEMMs without tensor cores: at least this share of the step's GPU busy time (a small fp32
#: GEMM beside bf16 work is noise).
FP32_GEMM_MIN_SHARE = 0.05
#: Unfused pointwise chain: each round-tripped intermediate at least this many bytes (small
#: tensors stay in L2, their round trip costs no HBM time).
POINTWISE_MIN_BYTES = 1 << 20
#: ... and its consumer at most this many kernels after its producer on the stream: a fuser joins
#: neighbours (GeGLU's gelu and mul have the up-projection GEMM between them); a consumer far later
#: (the backward reading a saved activation) needs the value in memory anyway.
POINTWISE_MAX_DISTANCE = 3
#: Extra copies: copy work of one op at least this long per step (a scalar copy is free).
COPY_MIN_NS = 10_000
#: Unfused optimizer: at least this many non-multi-tensor kernels in ``Optimizer.step`` per step
#: (a fused or foreach optimizer launches a handful of ``multi_tensor_apply_kernel``; a for-loop
#: one launches several kernels per parameter).
OPTIMIZER_MIN_KERNELS = 8
#: zero_grad filling: at least this many kernels in ``Optimizer.zero_grad`` per step (set_to_none
#: launches none).
ZERO_GRAD_MIN_KERNELS = 1
#: Occupancy queries: at least this many per step.
OCCUPANCY_MIN_PER_STEP = 1
#: Compile pre-op tax below this per step is not worth a line (always info: when the wrappers set
#: the pace, ``overhead_bound`` is the warning).
PREOP_MIN_NS = 10_000
#: Recompiles: at least this many frame recompilations (compile index > 0) in the trace: one
#: recompile is already a compile in the hot loop (seconds of CPU).
RECOMPILE_MIN = 1
#: Kernel time varies: a kernel's time per step spread (max − min) at least this share of its
#: median per step ...
VARIANCE_MIN_SPREAD = 0.5
#: ... and at least this long (µs-scale kernels jitter by their own size).
VARIANCE_MIN_NS = 50_000
#: Out of memory: one ``[OutOfMemory]`` event is an allocation the caching allocator could not serve
#: even after freeing its cache (the run raised, or a caller caught it and carried on degraded).
OOM_MIN_EVENTS = 1

#: Host-to-device bandwidth used to price a pageable copy when the trace has no pinned copy of its
#: own to measure: PCIe Gen5 x16, 64 GB/s per direction (the H100/H200/B200/MI300X host link;
#: an older link makes the saving smaller, never the finding wrong).
PINNED_BYTES_PER_S_DEFAULT = 64e9


@dataclass(frozen=True)
class Evidence:
    """One thing a finding saw: ``role`` (op | kernel | launch | memcpy | step | tensor), its
    ``name``, the unit ``step`` and ``ts_ns`` of its first occurrence among the steady steps,
    ``count_per_step``, ``dur_ns_per_step`` (GPU time for kernels/copies, host time for launch
    calls and ops), ``bytes_per_step`` where known and ``detail`` (a shape, a sync call, a direction)."""

    role: str
    name: str
    step: int | None = None
    ts_ns: int | None = None
    count_per_step: float | None = None
    dur_ns_per_step: int | None = None
    bytes_per_step: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Finding:
    """One problem found (module docstring)."""

    rule: str
    title: str
    severity: str
    steps: tuple[int, ...]
    evidence: tuple[Evidence, ...]
    cost_ns_per_step: int
    saving_ns_per_step: int | None
    saving_basis: str
    fix: str
    thresholds: Mapping[str, Value] = field(default_factory=dict)
    quantities: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """A rule of :data:`RULES`: what it looks for, how bad, what it reads, its thresholds (name →
    value; the reasons are the constants' docstrings in this module) and the fix."""

    title: str
    severity: str
    needs: str
    thresholds: Mapping[str, Value]
    fix: str


RULES: dict[str, Rule] = {
    "overhead_bound": Rule(
        "steps are overhead-bound: the CPU issues work slower than the GPU runs it", "warning",
        "per-step CPU dispatch vs GPU busy; launch calls per step and their mean cost",
        {"OVERHEAD_CPU_OVER_GPU": OVERHEAD_CPU_OVER_GPU, "OVERHEAD_MIN_LAUNCHES": OVERHEAD_MIN_LAUNCHES,
         "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile, "
        "or a larger batch"),
    "cold_first_step": Rule(
        "the first step is cold (lazy init, autotuning, allocator growth inside the window)", "warning",
        "per-step wall time",
        {"COLD_FACTOR": COLD_FACTOR},
        "warm up before measuring: torch.profiler.schedule(wait=1, warmup=1, active=N) or skip the "
        "first steps"),
    "input_stall": Rule(
        "the GPU waits for the CPU before each step's first launch (input pipeline stall)", "warning",
        "previous step's last GPU end, this step's first launch call and first GPU start",
        {"STALL_MIN_SHARE": STALL_MIN_SHARE, "STALL_MIN_NS": STALL_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "prefetch the next batch: DataLoader(num_workers>0, pin_memory=True, prefetch_factor), "
        "copies with non_blocking=True"),
    "host_sync": Rule(
        "an op synchronises the host with the GPU inside the step", "warning",
        "Synchronize calls and device-to-host copies launched under a CPU op (tracekit.diff.syncs)",
        {"SYNC_MIN_NS": SYNC_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "keep values on the device: no .item(), .cpu(), .tolist(), nonzero() or `if tensor:` in the "
        "step (log every N steps, torch.cuda.Event / non_blocking copies)"),
    "pageable_copy": Rule(
        "host↔device copies from pageable memory (synchronous, at a fraction of the link's bandwidth)",
        "warning", "memcpy activities whose source or destination is Pageable, with bytes",
        {"PAGEABLE_MIN_BYTES": PAGEABLE_MIN_BYTES, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "pin the host tensor (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
        ".to(device, non_blocking=True)"),
    "fp32_gemm": Rule(
        "float32 GEMMs run without tensor cores (SIMT / IEEE fp32, no TF32)", "warning",
        "GEMM kernels the classifier decodes as dtype fp32 with math simt or fp32",
        {"FP32_GEMM_MIN_SHARE": FP32_GEMM_MIN_SHARE, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision('high')) "
        "or torch.autocast(device_type='cuda', dtype=torch.bfloat16)"),
    "unfused_pointwise": Rule(
        "an unfused pointwise chain: an elementwise kernel's output goes through HBM to the next one",
        "warning", "consecutive elementwise kernels on a stream whose intermediate round-trips "
        "(tracekit.analyses.round_trips)",
        {"POINTWISE_MIN_BYTES": POINTWISE_MIN_BYTES, "POINTWISE_MAX_DISTANCE": POINTWISE_MAX_DISTANCE,
         "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "fuse the chain: torch.compile the module, or a fused kernel (e.g. Liger's GeGLU)"),
    "hot_path_copy": Rule(
        "extra copies in the hot path: an op copies a tensor every step", "warning",
        "copy kernels and device-to-device memcpys, by the op that asked for them",
        {"COPY_MIN_NS": COPY_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "drop the copy: use tensors as stored (F.linear takes the weight transposed), avoid "
        ".contiguous()/.clone()/.to() of device tensors in the step"),
    "gemm_bias_seed": Rule(
        "a device-to-device copy seeds a GEMM's output (torch.compile's addmm lowering)", "info",
        "device-to-device memcpys launched by a GEMM op (aten::addmm, aten::baddbmm)",
        {"COPY_MIN_NS": COPY_MIN_NS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "usually fine (the GEMM accumulates onto the bias); a bias-free Linear or a bias epilogue "
        "avoids it"),
    "optimizer_unfused": Rule(
        "the optimizer runs a for-loop over parameters (no foreach/fused kernels)", "warning",
        "kernels inside an Optimizer.step annotation that are not multi_tensor_apply_kernel",
        {"OPTIMIZER_MIN_KERNELS": OPTIMIZER_MIN_KERNELS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "torch.optim.AdamW(..., fused=True) (or foreach=True)"),
    "zero_grad_fill": Rule(
        "zero_grad fills gradients with zeros instead of setting them to None", "warning",
        "kernels inside an Optimizer.zero_grad annotation",
        {"ZERO_GRAD_MIN_KERNELS": ZERO_GRAD_MIN_KERNELS, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "optimizer.zero_grad(set_to_none=True) (the default since torch 2.0)"),
    "occupancy_query": Rule(
        "occupancy queries before launches (cudaOccupancy* calls on the launch path)", "info",
        "launch calls preceded by a cudaOccupancy* call in the same op",
        {"OCCUPANCY_MIN_PER_STEP": OCCUPANCY_MIN_PER_STEP, "MIN_STEP_SHARE": MIN_STEP_SHARE},
        "usually an op that sizes its grid on the fly (nonzero, sort, CUB); cache the launch "
        "configuration or avoid the op in the step"),
    "compile_preop_tax": Rule(
        "torch.compile's CPU wrappers (guards, pre-ops) cost time on every call", "info",
        "compile pre-ops per step (tracekit.analyses.dispatch.compile_preops)",
        {"PREOP_MIN_NS": PREOP_MIN_NS},
        "CUDA graphs (mode='reduce-overhead') or fewer, larger compiled regions; "
        "torch._dynamo.config.cache_size_limit if it recompiles"),
    "recompile": Rule(
        "torch.compile recompiled a frame inside the trace (a new shape or a failed guard)", "warning",
        "frame compilations with compile index > 0 and their trigger (tracekit.analyses.compilations)",
        {"RECOMPILE_MIN": RECOMPILE_MIN},
        "mark the changing dim dynamic (torch._dynamo.mark_dynamic(x, 0) or torch.compile(dynamic=True)) "
        "or pad inputs to a few fixed shapes; TORCH_LOGS=recompiles names the guard"),
    "kernel_time_varies": Rule(
        "a kernel's time varies widely between steps", "info",
        "a kernel's total time per steady step (same launches in every step)",
        {"VARIANCE_MIN_SPREAD": VARIANCE_MIN_SPREAD, "VARIANCE_MIN_NS": VARIANCE_MIN_NS},
        "look for contention (other streams, clocks, another process) or data-dependent work; "
        "compare the slow step's neighbours in Perfetto"),
    "out_of_memory": Rule(
        "the caching allocator ran out of device memory ([OutOfMemory] events)", "warning",
        "[OutOfMemory] events: the failed request, the totals, the op that asked (tracekit.analyses.memory)",
        {"OOM_MIN_EVENTS": OOM_MIN_EVENTS},
        "see the report's Memory section for what held the memory at the peak; lower the batch or sequence "
        "length, torch.utils.checkpoint for activations, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "when reserved far exceeds allocated"),
}


@dataclass(frozen=True)
class Context:
    """What every detector reads: the trace, its attributed GPU work and launch calls tagged with
    their unit, the step summary, the steady steps, round-trip tensors and traffic, compile pre-ops,
    the device's ceilings, and (when passed) the compile analysis."""

    trace: Trace
    gpu: pl.DataFrame
    launches: pl.DataFrame
    summary: pl.DataFrame
    steady: list[int]
    tensors: pl.DataFrame
    traffic: pl.DataFrame
    compile_preops: pl.DataFrame
    ceilings: Mapping[str, Any] | None
    compilations: Any = None
    #: The GPU work of the steady steps (``gpu`` filtered once).
    steady_gpu: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: The trace's :class:`tracekit.analyses.memory.MemoryReport` when the caller has it (the report
    #: does): the out-of-memory rule reads it instead of building the op tree again.
    memory: Any = None
    #: Every memcpy with its decoded ``direction``, ``src``, ``dst`` (decoded once, on these rows only:
    #: parsing every activity's ``decoded`` JSON per rule was most of the engine's time on big traces).
    memcpys: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def n(self) -> int:
        return max(len(self.steady), 1)

    def in_steady(self, frame: pl.DataFrame, column: str = "step") -> pl.DataFrame:
        return frame.filter(pl.col(column).is_in(self.steady))


def analyze(trace: Trace, analyses: Any, *, compile_preops: pl.DataFrame | None = None,
            ceilings: Mapping[str, Any] | None = None, step: int | None = None,
            compilations: Any = None, memory: Any = None) -> tuple[Finding, ...]:
    """The findings of ``trace`` (its ``steps`` the unit windows) from ``analyses`` (a
    :class:`tracekit.report.TraceAnalyses`); ``step`` restricts the per-step rules to that unit;
    ``memory``: the trace's memory analysis when the caller already has it."""
    summary = analyses.steps
    if summary.height == 0:
        return ()
    steady = [step] if step is not None else steps_analysis.steady_steps(summary)
    attributed = analyses.attribution
    launches = steps_analysis.tag_steps(attributed.launches, trace.steps)
    gpu = attributed.gpu
    memcpys = gpu.filter(pl.col("kind") == "memcpy").with_columns(
        **{key: pl.col("decoded").str.json_path_match(f"$.{key}") for key in ("direction", "src", "dst")})
    context = Context(
        trace=trace, gpu=gpu, launches=launches, summary=summary, steady=steady,
        tensors=analyses.round_trips.tensors, traffic=analyses.round_trips.traffic,
        compile_preops=compile_preops if compile_preops is not None else pl.DataFrame(),
        ceilings=ceilings, compilations=compilations, memory=memory,
        steady_gpu=gpu.filter(pl.col("step").is_in(steady)), memcpys=memcpys)
    found: list[Finding] = []
    for rule_id, detect in DETECTORS.items():
        found += [f for f in detect(context) if f.evidence]
    found.sort(key=lambda f: (SEVERITIES.index(f.severity), -f.cost_ns_per_step, f.rule))
    return tuple(found)


def _finding(rule_id: str, steps: list[int], evidence: list[Evidence], cost: float,
             saving: float | None, basis: str, severity: str | None = None,
             **quantities: Value) -> Finding:
    rule = RULES[rule_id]
    return Finding(rule=rule_id, title=rule.title, severity=severity or rule.severity,
                   steps=tuple(sorted(int(s) for s in steps)), evidence=tuple(evidence),
                   cost_ns_per_step=int(round(cost)),
                   saving_ns_per_step=None if saving is None else int(round(max(saving, 0))),
                   saving_basis=basis, fix=rule.fix, thresholds=dict(rule.thresholds),
                   quantities=quantities)


def _enough(context: Context, steps: list[int]) -> bool:
    return len(set(steps) & set(context.steady)) >= MIN_STEP_SHARE * len(context.steady) and bool(steps)


def _grouped(context: Context, frame: pl.DataFrame, by: list[str], role: str, *,
             name: str, dur: str = "dur", bytes_col: str | None = None,
             detail: str | None = None, count: str | None = None) -> pl.DataFrame:
    """``frame`` (rows in steady steps) grouped by ``by``: steps, first step/ts, count (rows, or
    distinct ``count`` values), time and bytes per step, the distinct ``detail`` values joined;
    sorted by time."""
    n = context.n
    aggs = [pl.col("step").unique().sort().alias("steps"), pl.col("step").first().alias("first_step"),
            pl.col("ts").min().alias("first_ts"), ((pl.col(count).n_unique() if count else pl.len()) / n).alias("per_step"),
            (pl.col(dur).sum() / n).alias("ns_per_step")]
    aggs.append((pl.col(bytes_col).sum() / n).alias("bytes_per_step") if bytes_col
                else pl.lit(None, pl.Float64).alias("bytes_per_step"))
    aggs.append(pl.col(detail).drop_nulls().unique(maintain_order=True).str.join(" + ").alias("detail") if detail
                else pl.lit(None, pl.String).alias("detail"))
    return (frame.sort("ts").group_by(by, maintain_order=True).agg(aggs)
            .with_columns(role=pl.lit(role), name=pl.col(name).fill_null("(no op)"))
            .sort(["ns_per_step", "name"], descending=[True, False]))


def _evidence(rows: pl.DataFrame) -> list[Evidence]:
    return [Evidence(role=r["role"], name=r["name"], step=r["first_step"], ts_ns=r["first_ts"],
                     count_per_step=round(r["per_step"], 3), dur_ns_per_step=int(round(r["ns_per_step"] or 0)),
                     bytes_per_step=None if r["bytes_per_step"] is None else int(round(r["bytes_per_step"])),
                     detail=r["detail"])
            for r in rows.iter_rows(named=True)]


def _steps_of(rows: pl.DataFrame) -> list[int]:
    return sorted({s for steps in rows["steps"].to_list() for s in steps}) if rows.height else []


# -- detectors ------------------------------------------------------------------------------------

def _overhead_bound(context: Context) -> list[Finding]:
    rows = context.in_steady(context.summary).filter(pl.col("verdict") == "overhead-bound")
    steps = rows["step"].to_list()
    if not _enough(context, steps):
        return []
    calls = context.launches.filter(pl.col("step").is_in(steps) & pl.col("gpu_kinds").list.len().gt(0))
    per_step = calls.height / len(steps)
    if per_step < OVERHEAD_MIN_LAUNCHES:
        return []
    mean_call = calls["dur"].mean() if calls.height else 0
    idle = float((rows["wall_ns"] - rows["gpu_busy_ns"]).median())
    first = rows.row(0, named=True)
    evidence = [Evidence("step", first["name"], first["step"], first["cpu_start_ns"], 1.0,
                         int(first["cpu_dispatch_ns"]),
                         detail=f"CPU dispatch {first['cpu_dispatch_ns']:,} ns vs GPU busy "
                                f"{first['gpu_busy_ns']:,} ns"),
                Evidence("launch", "launch calls", first["step"],
                         int(calls["ts"].min()) if calls.height else None, round(per_step, 3),
                         int(round(per_step * (mean_call or 0))), detail=f"mean {mean_call or 0:,.0f} ns per call")]
    return [_finding("overhead_bound", steps, evidence, idle, per_step * (mean_call or 0),
                     "launch overhead × launches per step (what CUDA graphs take off the CPU)",
                     launches_per_step=round(per_step, 3), mean_launch_ns=int(mean_call or 0),
                     gpu_busy_ns=int(rows["gpu_busy_ns"].median()),
                     cpu_dispatch_ns=int(rows["cpu_dispatch_ns"].median()))]


def _cold_first_step(context: Context) -> list[Finding]:
    summary = context.summary
    cold = summary.filter(pl.col("cold") | pl.col("warmup"))
    if cold.height == 0:
        return []
    others = summary.filter(~(pl.col("cold") | pl.col("warmup")))
    median = float(others["wall_ns"].median()) if others.height else 0.0
    evidence = [Evidence("step", r["name"], r["step"], r["cpu_start_ns"], 1.0, int(r["wall_ns"]),
                         detail=f"{r['wall_ns'] / median:.1f}× the median step" if median else None)
                for r in cold.iter_rows(named=True)]
    excess = float((cold["wall_ns"] - median).sum())
    return [_finding("cold_first_step", cold["step"].to_list(), evidence, excess, excess,
                     "the cold steps' wall time above the median step (once, not every step)",
                     median_step_ns=int(median), once=True)]


def _input_stall(context: Context) -> list[Finding]:
    work = context.gpu.filter(pl.col("step").is_not_null())
    if work.height == 0:
        return []
    per = (work.group_by("step").agg(first_ts=pl.col("ts").min(), last_end=pl.col("end").max(),
                                     first_launch=pl.col("launch_ts").min(),
                                     first_launch_end=pl.col("launch_end").min())
           .join(context.summary.select("step", "name", "cpu_start_ns", "wall_ns", "verdict"), on="step")
           .sort("cpu_start_ns")
           .with_columns(prev_end=pl.col("last_end").shift(1))
           .with_columns(idle=pl.col("first_ts") - pl.col("prev_end")))
    syncs = (context.launches.filter(pl.col("name").str.ends_with(SYNC_CALL_SUFFIX))
             .select(pl.col("end").alias("sync_end")).sort("sync_end"))
    # The last synchronise ending before the step's first launch: if it was still waiting when the
    # GPU went idle, the CPU could not run ahead (a sync after each step), not an input stall.
    per = (per.filter(pl.col("first_launch").is_not_null()).sort("first_launch")
           .join_asof(syncs, left_on="first_launch", right_on="sync_end", strategy="backward"))
    rows = context.in_steady(per).filter(
        (pl.col("sync_end").is_null() | (pl.col("sync_end") < pl.col("prev_end") - SYNC_SLACK_NS))
        & (pl.col("verdict") != "overhead-bound") & (pl.col("first_launch") >= pl.col("prev_end"))
        & (pl.col("idle") >= STALL_MIN_NS) & (pl.col("idle") >= STALL_MIN_SHARE * pl.col("wall_ns")))
    steps = rows["step"].to_list()
    if not _enough(context, steps):
        return []
    evidence = [Evidence("step", r["name"], r["step"], r["prev_end"], 1.0, int(r["idle"]),
                         detail=f"GPU idle from the previous step's last activity to this step's first; "
                                f"its first launch call at {r['first_launch']:,} ns")
                for r in rows.head(3).iter_rows(named=True)]
    idle = float(rows["idle"].median()) * len(steps) / context.n
    return [_finding("input_stall", steps, evidence, idle, idle,
                     "the idle time itself, if the next batch is ready when the step starts")]


def _host_sync(context: Context) -> list[Finding]:
    from tracekit.analyses import syncs

    launches = context.in_steady(context.launches).filter(pl.col("top_op").is_not_null())
    d2h = context.memcpys.filter(pl.col("direction") == "DtoH")
    d2h_idx = d2h["launch_idx"].drop_nulls().implode()
    # A pageable host-to-device copy synchronises by itself: pageable_copy prices it, not this rule
    # (a device-to-host copy synchronises because the host wants the value: that is this rule).
    pageable = context.memcpys.filter(pl.col("src") == "Pageable")[
        "op_idx"].drop_nulls().implode()
    blocking = launches.filter((pl.col("name").str.ends_with(SYNC_CALL_SUFFIX) | pl.col("idx").is_in(d2h_idx))
                               & ~pl.col("op_idx").is_in(pageable))
    if blocking.height == 0:
        return []
    windows = context.trace.steps.filter(pl.col("number").is_in(context.steady))
    measured, _ = syncs.measure(_with_launches(context.trace, blocking), context.gpu, windows)
    rows = _grouped(context, blocking.with_columns(call=pl.col("name")), ["top_op"], "op", name="top_op",
                    detail="call", count="op_idx")
    rows = rows.with_columns(detail=pl.lit("blocks in ") + pl.col("detail"))
    steps = _steps_of(rows)
    cost = float(measured["ns"].sum()) / context.n
    if cost < SYNC_MIN_NS or not _enough(context, steps):
        return []
    return [_finding("host_sync", steps, _evidence(rows), cost, cost,
                     "the host's blocked time (tracekit.diff.syncs): the CPU could queue the next "
                     "work instead", syncs_per_step=round(blocking.height / context.n, 3))]


def _with_launches(trace: Trace, launches: pl.DataFrame) -> Trace:
    """``trace`` seeing only ``launches`` and no CPU op: ``aten::item`` counts as a sync only
    through the copy and synchronise it launches (``item()`` on a CPU tensor launches neither)."""
    from dataclasses import replace

    return replace(trace, launches=launches.select(trace.launches.columns),
                   ops=trace.ops.clear())


def _pinned_rate(context: Context) -> tuple[float, str]:
    copies = context.memcpys.filter((pl.col("bytes") > 0)
                                    & ((pl.col("src") == "Pinned") | (pl.col("dst") == "Pinned")))
    if copies.height and copies["dur"].sum() > 0:
        return float(copies["bytes"].sum()) / (copies["dur"].sum() / 1e9), "pinned copies measured in this trace"
    return PINNED_BYTES_PER_S_DEFAULT, "PCIe Gen5 x16 (64 GB/s), no pinned copy in the trace"


def _pageable_copy(context: Context) -> list[Finding]:
    pageable = context.in_steady(context.memcpys).filter(
        (pl.col("src") == "Pageable") | (pl.col("dst") == "Pageable"))
    if pageable.height == 0 or pageable["bytes"].sum() / context.n < PAGEABLE_MIN_BYTES:
        return []
    rows = _grouped(context, pageable, ["top_op", "name"], "memcpy", name="name", bytes_col="bytes",
                    detail="top_op")
    rows = rows.with_columns(detail=pl.lit("launched by ") + pl.col("detail").fill_null("no op"))
    steps = _steps_of(rows)
    if not _enough(context, steps):
        return []
    cost = float(pageable["dur"].sum()) / context.n
    rate, basis = _pinned_rate(context)
    saving = cost - float(pageable["bytes"].sum()) / context.n / rate * 1e9
    return [_finding("pageable_copy", steps, _evidence(rows), cost, saving,
                     f"copy time − bytes ÷ pinned bandwidth ({rate / 1e9:.1f} GB/s: {basis})",
                     pinned_bytes_per_s=round(rate))]


def _fp32_gemm(context: Context) -> list[Finding]:
    # Class first, then the decoded fields of the GEMMs' distinct ``decoded`` texts only (a few).
    gemms = context.steady_gpu.filter(pl.col("kernel_class") == "gemm")
    fp32 = gemms.select(pl.col("decoded").unique()).filter(
        (pl.col("decoded").str.json_path_match("$.dtype") == "fp32")
        & pl.col("decoded").str.json_path_match("$.math").is_in(["simt", "fp32"]))
    gemms = gemms.filter(pl.col("decoded").is_in(fp32.get_column("decoded").implode()))
    if gemms.height == 0:
        return []
    busy = float(context.in_steady(context.summary)["gpu_busy_ns"].sum()) / context.n
    cost = float(gemms["dur"].sum()) / context.n
    if busy <= 0 or cost < FP32_GEMM_MIN_SHARE * busy:
        return []
    rows = _grouped(context, gemms, ["cpu_op", "name"], "kernel", name="name", detail="cpu_op")
    rows = rows.with_columns(detail=pl.lit("launched by ") + pl.col("detail").fill_null("no op"))
    steps = _steps_of(rows)
    if not _enough(context, steps):
        return []
    flops = (context.ceilings or {}).get("flops") or {}
    saving, basis = None, "unknown device: no fp32/tf32 peak rates to compare"
    if flops.get("fp32") and flops.get("tf32"):
        saving = cost * (1 - flops["fp32"] / flops["tf32"])
        basis = (f"GEMM time × (1 − fp32 peak ÷ tf32 peak) = × (1 − {flops['fp32'] / 1e12:g} ÷ "
                 f"{flops['tf32'] / 1e12:g} TFLOP/s) for {context.ceilings.get('device')}")
    return [_finding("fp32_gemm", steps, _evidence(rows.head(6)), cost, saving, basis,
                     gemm_share_of_busy=round(cost / busy, 4), gemms_per_step=round(gemms.height / context.n, 3))]


def _unfused_pointwise(context: Context) -> list[Finding]:
    tensors = context.in_steady(context.tensors).filter(pl.col("bytes") >= POINTWISE_MIN_BYTES)
    if tensors.height == 0:
        return []
    kernels = (context.steady_gpu.filter(pl.col("kind") == "kernel")
               .select("step", "stream", "ts", "idx", "name", "cpu_op", "kernel_class", "annotation")
               .sort(["step", "stream", "ts", "idx"]))
    # In-place ops (``add_``: gradient accumulation, optimizer updates) write tensors that live on,
    # not intermediates a fuser could keep in registers; the optimizer has its own rule.
    consumer_ok = (pl.col("kernel_class") == "elementwise") & ~pl.col("cpu_op").fill_null("").str.ends_with("_")
    kernels = kernels.with_columns(consumer_ok=consumer_ok, producer_ok=consumer_ok & ~pl.col(
        "annotation").fill_null("").str.starts_with("Optimizer."))
    # The kernel d places later on the same stream in the same step: one sort, plain shifts; the
    # flags are computed once and each shifted frame filtered before it is gathered.
    same = lambda d: (pl.col("step").shift(-d) == pl.col("step")) & (pl.col("stream").shift(-d) == pl.col("stream"))  # noqa: E731
    pairs = pl.concat([
        kernels.select("step", "ts", "name", "cpu_op", next_name=pl.col("name").shift(-d),
                       next_op=pl.col("cpu_op").shift(-d),
                       keep=pl.col("producer_ok") & same(d) & pl.col("consumer_ok").shift(-d)).filter("keep")
        for d in range(1, POINTWISE_MAX_DISTANCE + 1)])
    pairs = pairs.select("step", "ts", pl.col("name").alias("producer"), pl.col("cpu_op").alias("producer_op"),
                         pl.col("next_name").alias("consumer"), pl.col("next_op").alias("consumer_op")).unique(
        subset=["step", "producer", "producer_op", "consumer", "consumer_op"], keep="first")
    # Only tensors an elementwise kernel of a pair produced can join: drop the others on one key
    # before hashing all five (the round trips of a big trace are mostly GEMM and copy outputs).
    chained = tensors.filter(pl.col("producer").is_in(pairs.get_column("producer").unique().implode())).join(
        pairs, on=["step", "producer", "producer_op", "consumer", "consumer_op"], how="inner",
        maintain_order="left")
    if chained.height == 0:
        return []
    chained = chained.with_columns(link=pl.col("producer_op") + " → " + pl.col("consumer_op"), dur=pl.lit(0))
    rows = _grouped(context, chained, ["link", "shape", "dtype"], "tensor", name="link", bytes_col="bytes",
                    detail="shape")
    rows = rows.with_columns(detail=pl.col("detail") + " " + pl.col("dtype"))
    steps = _steps_of(rows)
    if not _enough(context, steps):
        return []
    moved = 2.0 * float(chained["bytes"].sum()) / context.n  # written once, read back once
    hbm = (context.ceilings or {}).get("hbm_bytes_per_s")
    saving = moved / hbm * 1e9 if hbm else None
    basis = (f"2 × round-trip bytes ({moved:,.0f} B per step) ÷ HBM bandwidth "
             f"({hbm / 1e12:g} TB/s)" if hbm else "unknown device: no HBM bandwidth")
    return [_finding("unfused_pointwise", steps, _evidence(rows.head(6)), saving or 0.0, saving, basis,
                     round_trip_bytes_per_step=int(moved / 2),
                     tensors_per_step=round(chained.height / context.n, 3))]


_GEMM_OPS = ("aten::addmm", "aten::baddbmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear")


def _copies(context: Context) -> pl.DataFrame:
    kernels = context.steady_gpu.filter((pl.col("kind") == "kernel") & (pl.col("kernel_class") == "copy"))
    d2d = context.in_steady(context.memcpys).filter(pl.col("direction") == "DtoD")
    return pl.concat([kernels, d2d.drop("direction", "src", "dst")])


def _copy_rows(context: Context, copies: pl.DataFrame, op: pl.Expr, where: pl.Expr) -> pl.DataFrame:
    """Copies by the op that asked for them (``op``), with ``where`` (the other end of its op chain)."""
    traffic = context.traffic.select("idx", "bytes_written")
    with_bytes = copies.join(traffic, on="idx", how="left").with_columns(
        moved=pl.coalesce(pl.col("bytes"), pl.col("bytes_written")), op=op,
        where=pl.col("name") + pl.lit(" via ") + where.fill_null("no op"))
    rows = _grouped(context, with_bytes, ["op", "name"], "op", name="op", bytes_col="moved", detail="where")
    return rows.filter(pl.col("ns_per_step") >= COPY_MIN_NS)


def _hot_path_copy(context: Context) -> list[Finding]:
    copies = _copies(context).filter(~pl.col("cpu_op").is_in(_GEMM_OPS) | (pl.col("kind") != "memcpy"))
    if copies.height == 0:
        return []
    top = pl.col("top_op").str.replace(r"^autograd::engine::evaluate_function: ", "")
    return _copy_finding(context, _copy_rows(context, copies, top, pl.col("cpu_op")), "hot_path_copy")


def _gemm_bias_seed(context: Context) -> list[Finding]:
    copies = _copies(context).filter(pl.col("cpu_op").is_in(_GEMM_OPS) & (pl.col("kind") == "memcpy"))
    if copies.height == 0:
        return []
    return _copy_finding(context, _copy_rows(context, copies, pl.col("cpu_op"), pl.col("top_op")),
                         "gemm_bias_seed")


def _copy_finding(context: Context, rows: pl.DataFrame, rule_id: str) -> list[Finding]:
    steps = _steps_of(rows)
    if not _enough(context, steps):
        return []
    kept = rows["name"].to_list()
    cost = float(rows["ns_per_step"].sum())
    return [_finding(rule_id, steps, _evidence(rows), cost, cost,
                     "the copies' GPU time (a copy not made costs nothing)",
                     ops=len(kept), bytes_per_step=int(rows["bytes_per_step"].fill_null(0).sum()))]


def _in_annotation(context: Context, prefix: str) -> pl.DataFrame:
    return context.steady_gpu.filter(
        (pl.col("kind") == "kernel") & pl.col("annotation").fill_null("").str.starts_with(prefix))


def _by_op_inside(context: Context, kernels: pl.DataFrame) -> tuple[pl.DataFrame, list[int]]:
    """Kernels inside an annotation as evidence rows by op, and the steps they occur in."""
    rows = _grouped(context, kernels, ["annotation", "cpu_op"], "op", name="cpu_op", detail="annotation")
    rows = rows.with_columns(detail=pl.lit("inside ") + pl.col("detail"))
    return rows, _steps_of(rows)


def _optimizer_unfused(context: Context) -> list[Finding]:
    kernels = _in_annotation(context, "Optimizer.step").filter(
        pl.col("decoded").str.json_path_match("$.template").fill_null("") != "multi_tensor_apply_kernel")
    if kernels.height / context.n < OPTIMIZER_MIN_KERNELS:
        return []
    rows, steps = _by_op_inside(context, kernels)
    if not _enough(context, steps):
        return []
    calls = context.launches.filter(pl.col("idx").is_in(kernels["launch_idx"].drop_nulls().implode()))
    launch_ns = float(calls["dur"].sum()) / context.n
    cost = float(kernels["dur"].sum()) / context.n
    return [_finding("optimizer_unfused", steps, _evidence(rows.head(8)), cost + launch_ns, launch_ns,
                     "the per-parameter launch calls' CPU time (a fused optimizer launches a few)",
                     kernels_per_step=round(kernels.height / context.n, 3), gpu_ns_per_step=int(cost))]


def _zero_grad_fill(context: Context) -> list[Finding]:
    kernels = _in_annotation(context, "Optimizer.zero_grad")
    if kernels.height / context.n < ZERO_GRAD_MIN_KERNELS:
        return []
    rows, steps = _by_op_inside(context, kernels)
    if not _enough(context, steps):
        return []
    cost = float(kernels["dur"].sum()) / context.n
    return [_finding("zero_grad_fill", steps, _evidence(rows), cost, cost,
                     "the fill kernels' GPU time (set_to_none launches none; backward then writes "
                     "gradients instead of adding to zeros)",
                     kernels_per_step=round(kernels.height / context.n, 3))]


def _occupancy_query(context: Context) -> list[Finding]:
    queries = context.in_steady(context.launches).filter(pl.col("name").str.starts_with("cudaOccupancy"))
    if queries.height / context.n < OCCUPANCY_MIN_PER_STEP:
        return []
    rows = _grouped(context, queries.with_columns(call=pl.col("name")), ["top_op"], "op", name="top_op",
                    detail="call")
    steps = _steps_of(rows)
    if not _enough(context, steps):
        return []
    cost = float(queries["dur"].sum()) / context.n
    return [_finding("occupancy_query", steps, _evidence(rows), cost, cost,
                     "the queries' CPU time", queries_per_step=round(queries.height / context.n, 3))]


def _compile_preop_tax(context: Context) -> list[Finding]:
    preops = context.compile_preops
    if preops.height == 0 or "step" not in preops.columns:
        return []
    preops = context.in_steady(preops)
    if preops.height == 0:
        return []
    cost = float(preops["cpu_ns"].sum()) / context.n
    if cost < PREOP_MIN_NS:
        return []
    # Info only: when the wrappers set the pace, overhead_bound says so with the launch figures.
    busy = float(context.in_steady(context.summary)["gpu_busy_ns"].median() or 0)
    rows = (preops.group_by("name", "kind").agg(steps=pl.col("step").unique().sort(),
                                                first_step=pl.col("step").min(),
                                                per_step=pl.col("count").sum() / context.n,
                                                ns_per_step=pl.col("cpu_ns").sum() / context.n)
            .sort(["ns_per_step", "name"], descending=[True, False]))
    first_ts = context.trace.ops.filter(pl.col("name").is_in(rows["name"].implode())).group_by("name").agg(
        first_ts=pl.col("ts").min())
    rows = rows.join(first_ts, on="name", how="left").with_columns(
        role=pl.lit("op"), bytes_per_step=pl.lit(None, pl.Float64), detail=pl.col("kind"))
    return [_finding("compile_preop_tax", _steps_of(rows), _evidence(rows.head(6)), cost, None,
                     "not projected: CUDA graphs remove most of it, fewer regions part of it",
                     gpu_busy_ns=int(busy))]


def _recompile(context: Context) -> list[Finding]:
    compiled = getattr(context.compilations, "compilations", None)
    if compiled is None or compiled.height == 0:
        return []
    again = compiled.filter(pl.col("trigger") != "first").sort("ts")
    if again.height < RECOMPILE_MIN:
        return []
    names = dict(zip(context.summary["step"].to_list(), context.summary["name"].to_list()))
    evidence = [Evidence("op", f"compile {r['compile_id'] or '?'}", r["step"], r["ts"], None, int(r["total_ns"]),
                         detail=f"{r['trigger']}" + (f": {r['changed']}" if r["changed"] else "")
                         + (f" in {names[r['step']]}" if r["step"] in names else ""))
               for r in again.iter_rows(named=True)]
    total = float(again["total_ns"].sum())
    steps = [s for s in again["step"].to_list() if s is not None]
    return [_finding("recompile", steps, evidence, total, total,
                     "the recompilations' CPU time (compile, autotuning, run-time work), once per new shape",
                     recompiles=again.height, once=True)]


def _kernel_time_varies(context: Context) -> list[Finding]:
    if len(context.steady) < 3:
        return []
    kernels = context.steady_gpu.filter(pl.col("kind") == "kernel")
    per = kernels.group_by("name", "step").agg(ns=pl.col("dur").sum(), count=pl.len(), ts=pl.col("ts").min())
    stats = (per.group_by("name").agg(steps=pl.col("step").sort(), n=pl.len(), counts=pl.col("count").n_unique(),
                                      lo=pl.col("ns").min(), hi=pl.col("ns").max(), med=pl.col("ns").median(),
                                      slow_step=pl.col("step").sort_by("ns").last(),
                                      slow_ts=pl.col("ts").sort_by("ns").last(),
                                      per_step=pl.col("count").median())
             .filter((pl.col("n") == len(context.steady)) & (pl.col("counts") == 1)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_NS)
                     & (pl.col("hi") - pl.col("lo") >= VARIANCE_MIN_SPREAD * pl.col("med")))
             .sort(["hi", "name"], descending=[True, False]))
    if stats.height == 0:
        return []
    evidence = [Evidence("kernel", r["name"], r["slow_step"], r["slow_ts"], float(r["per_step"]), int(r["med"]),
                         detail=f"{r['lo']:,}–{r['hi']:,} ns per step")
                for r in stats.head(5).iter_rows(named=True)]
    cost = float((stats["hi"] - stats["med"]).sum())
    return [_finding("kernel_time_varies", list(context.steady), evidence, cost, None,
                     "not projected: the cause is outside the trace", kernels=stats.height)]


def _out_of_memory(context: Context) -> list[Finding]:
    memory_rows = context.trace.memory
    if memory_rows.height == 0 or memory_rows["addr"].null_count() < OOM_MIN_EVENTS:
        return []
    found = context.memory
    if found is None:  # a caller without the memory analysis: build it (op tree included) only now
        from tracekit.analyses import memory

        found = memory.analyze(context.trace)
    ooms = steps_analysis.tag_steps(found.out_of_memory, context.trace.steps)
    if ooms.height < OOM_MIN_EVENTS:
        return []
    evidence = [Evidence("op", r["op"] or "(no op)", r["step"], r["ts"], bytes_per_step=r["bytes"],
                         detail=f"{r['device']}: {r['bytes']:,} B requested with {r['allocated'] or 0:,} B allocated, "
                                f"{r['reserved'] or 0:,} B reserved")
                for r in ooms.head(10).iter_rows(named=True)]
    return [_finding("out_of_memory", [s for s in ooms["step"].to_list() if s is not None], evidence, 0, None,
                     "not priced: a failed allocation stops the step", events=ooms.height,
                     largest_request_bytes=int(ooms["bytes"].max() or 0))]


#: The detector of each rule in :data:`RULES` (same keys, same order).
DETECTORS: dict[str, Callable[[Context], list[Finding]]] = {
    "overhead_bound": _overhead_bound, "cold_first_step": _cold_first_step, "input_stall": _input_stall,
    "host_sync": _host_sync, "pageable_copy": _pageable_copy, "fp32_gemm": _fp32_gemm,
    "unfused_pointwise": _unfused_pointwise, "hot_path_copy": _hot_path_copy,
    "gemm_bias_seed": _gemm_bias_seed, "optimizer_unfused": _optimizer_unfused,
    "zero_grad_fill": _zero_grad_fill, "occupancy_query": _occupancy_query,
    "compile_preop_tax": _compile_preop_tax, "recompile": _recompile,
    "kernel_time_varies": _kernel_time_varies, "out_of_memory": _out_of_memory,
}
assert list(DETECTORS) == list(RULES)


def rule_ids() -> tuple[str, ...]:
    """Every rule id, in table order (what ``--fail-if finding:ID`` and ``no_finding`` accept)."""
    return tuple(RULES)


def parse_gate(text: str) -> str:
    """The rule id of a ``tracekit report --fail-if 'finding:ID'`` expression; :class:`UsageError`
    for anything else."""
    from tracekit.errors import UsageError

    kind, _, rule = text.strip().partition(":")
    rule = rule.strip()
    if kind.strip() != "finding" or rule not in RULES:
        raise UsageError(f"--fail-if {text!r}: expected finding:RULE with RULE one of {', '.join(RULES)}")
    return rule
