"""The GeGLU MLP over a sequence of input shapes, profiled from its first call (``--from-first-call``).

Contract: ``tracekit capture --variant mlp --from-first-call [--shapes 64x128,32x128,…]`` records one
capture per mode of :data:`SWEEP_MODES`, trace ``mlp_<kind>-sweep.json.gz``. Every mode calls the same
MLP (same weights, ``--mlp-shape``'s dim and hidden) on the same inputs, shape after shape,
``--calls-per-shape`` times each, under a profiler started before the first call and given no schedule:
compilations, recompilations, Inductor's autotuning, CUDA-graph recording and Triton JIT all lie inside
the trace. Each call is one ``record_function`` span named ``mlp_fwd#<call> <batch>x<seq>`` (``call``
counted from 0 across the sweep: the unit the analyses read), followed by a device synchronise outside
it; without a schedule there are no ``ProfilerStep`` spans.

Before each mode: ``torch._dynamo.reset()`` and an empty Inductor + Triton cache directory
(``torch._inductor.utils.fresh_cache``) held for the whole mode, so each mode compiles cold, as on a
first run, whatever ran before it. The compiler's once-per-process start-up (imports, compile workers)
is paid once, outside every trace, by compiling an unrelated one-line function first
(``compiler_prewarm_s`` in the manifest).

The manifest entry holds the ground truth per call (``calls``: annotation, shape, wall time with a
synchronise, CUDA-event time, Dynamo's counters before/after and their change, the CompilationMetrics
of the frame compilations made in the call (``compilations``) and of the compile work done when a
compiled graph first ran (``runtime_compilations``: Triton autotuning, CUDA-graph recording), the
CUDA-graph tree state after it, the Triton cache's growth), a summary (``ground_truth``: compiled calls,
compilations, recompiles, autotuning calls, graph warm-ups/records/replays, JIT calls), and, taken after
the trace, correctness and steady timings per shape.
"""

from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

# kind -> torch.compile keyword arguments (None: not compiled). The names are an interface.
SWEEP_MODES: dict[str, dict[str, Any] | None] = {
    "eager": None,
    "compile": {},                                 # default dynamic handling (dynamic=None)
    "compile-static": {"dynamic": False},
    "compile-dynamic": {"dynamic": True},
    "compile-cudagraphs": {"mode": "reduce-overhead"},  # CUDA graphs, default dynamic handling
    "liger": None,
}
SWEEP_SUFFIX = "-sweep"
# 4: under CUDA graphs a new shape takes a warm-up call and a recording call before it replays.
DEFAULT_CALLS_PER_SHAPE = 4
LABEL = "mlp_fwd"


def annotation(call: int, batch: int, seq: int) -> str:
    """The name of one call's ``record_function`` span."""
    return f"{LABEL}#{call} {batch}x{seq}"


_prewarmed: dict[str, float] = {}


def prewarm_compiler(device: str) -> float:
    """Pay the compiler's process start-up once (imports, compile workers), outside any trace."""
    if device in _prewarmed:
        return _prewarmed[device]
    import torch
    from torch._inductor.utils import fresh_cache

    t0 = time.perf_counter()
    with fresh_cache():
        fn = torch.compile(lambda t: t * 2 + 1)
        fn(torch.ones(8, device=device))
        if device == "cuda":
            torch.cuda.synchronize()
    torch._dynamo.reset()
    _prewarmed[device] = round(time.perf_counter() - t0, 3)
    return _prewarmed[device]


def build(spec: Any, opts: Any) -> Any:
    """A Case whose ``drive`` runs the sweep under the profiler (see module doc)."""
    import torch

    from capture.timing import bench, rel_err
    from capture.variants import LABELS, Case, _torch_dtype, geglu_reference64, load_liger, make_geglu_mlp

    kind = spec.kind
    compile_kwargs = SWEEP_MODES[kind]
    dev, dt = opts.device, _torch_dtype(opts)
    _, _, dim, hidden = opts.mlp_shape
    shapes = list(opts.sweep_shapes or [tuple(opts.mlp_shape[:2])])
    per_shape = opts.calls_per_shape
    cuda = dev == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    notes: dict[str, Any] = {"kind": kind, "profiled_from_first_call": True, "schedule": None}
    if compile_kwargs is not None:
        paid = dev not in _prewarmed
        seconds = prewarm_compiler(dev)
        notes["compiler_prewarmed"] = True
        if paid:  # only the first compiled mode of the process pays it
            notes["compiler_prewarm_s"] = seconds
    torch._dynamo.reset()
    torch.manual_seed(opts.seed)
    eager = make_geglu_mlp(dim, hidden).to(device=dev, dtype=dt)
    if compile_kwargs is not None:
        model: Any = torch.compile(copy.deepcopy(eager), **compile_kwargs)
        notes["torch_compile"] = {"dynamic": compile_kwargs.get("dynamic"), "mode": compile_kwargs.get("mode")}
    elif kind == "liger":
        module, notes["kernel_source"] = load_liger(opts.kernel_repo)
        cfg = SimpleNamespace(hidden_size=dim, intermediate_size=hidden, hidden_act="gelu_pytorch_tanh")
        model = module.layers.LigerGEGLUMLP(cfg).to(device=dev, dtype=dt)
        model.load_state_dict(eager.state_dict())
    else:
        model = eager
    graphs = kind == "compile-cudagraphs"

    def fwd(x: Any) -> Any:
        with torch.no_grad():
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            return model(x)

    inputs = [torch.randn(b, s, dim, dtype=dt, device=dev) for b, s in shapes]  # made before the profiler
    calls: list[dict[str, Any]] = []
    state: dict[str, Any] = {}

    def drive(prof: Any, probe: Any) -> None:
        from torch.profiler import record_function

        from capture import ground_truth as gt

        log = gt.CompilationLog()
        state["compilation_log"] = log
        if probe is not None:
            probe.window_begin()
        call = 0
        for (b, s), x in zip(shapes, inputs):
            for _ in range(per_shape):
                name = annotation(call, b, s)
                counters_before = gt.dynamo_counters()
                triton_before = gt.triton_cache_entries() if cuda else None
                if probe is not None:
                    probe.unit_begin()
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                sync()
                t0 = time.perf_counter()
                if cuda:
                    start.record()
                with record_function(name):
                    fwd(x)
                if cuda:
                    end.record()
                sync()
                wall_us = (time.perf_counter() - t0) * 1e6
                if probe is not None:
                    probe.unit_end(name)
                counters_after = gt.dynamo_counters()
                records = log.new()
                compilations = [r for r in records if not _is_runtime(r)]
                record: dict[str, Any] = {
                    "call": call,
                    "annotation": name,
                    "shape": [b, s],
                    "x": [b, s, dim],
                    "wall_us": round(wall_us, 3),
                    "unique_graphs_before": gt.unique_graphs(counters_before),
                    "unique_graphs_after": gt.unique_graphs(counters_after),
                    "dynamo_counters_delta": gt.counters_delta(counters_before, counters_after),
                    "compilations": compilations,
                    "runtime_compilations": [r for r in records if _is_runtime(r)],
                }
                record["compiled"] = bool(compilations) or record["unique_graphs_after"] > record["unique_graphs_before"]
                if cuda:
                    record["cuda_event_us"] = round(start.elapsed_time(end) * 1e3, 3)
                    triton_after = gt.triton_cache_entries()
                    record["triton_cache_entries_before"] = triton_before
                    record["triton_cache_entries_after"] = triton_after
                if graphs:
                    record["cudagraph"] = gt.cudagraph_state(torch.cuda.current_device())
                calls.append(record)
                call += 1
        if probe is not None:
            probe.window_end()

    def check() -> dict[str, Any]:
        # After the trace: every shape was seen, so these calls must compile nothing (recorded below).
        per: dict[str, Any] = {}
        for b, s in shapes:
            xs = torch.randn(b, s, dim, dtype=dt, device=dev)
            out = fwd(xs).clone()
            ref64 = geglu_reference64(eager, xs)
            with torch.no_grad():
                ref = eager(xs)
            per[f"{b}x{s}"] = {"rel_err_vs_fp64": rel_err(out, ref64), "rel_err_vs_eager": rel_err(out, ref)}
        res: dict[str, Any] = {"per_shape": per,
                               "rel_err_vs_fp64": max(v["rel_err_vs_fp64"] for v in per.values())}
        if kind != "eager":
            res["rel_err_vs_eager"] = max(v["rel_err_vs_eager"] for v in per.values())
        return res

    def after_trace() -> dict[str, Any]:
        steady = {}
        for (b, s), x in zip(shapes, inputs):
            steady[f"{b}x{s}"] = bench(lambda x=x: fwd(x), device=dev, rep_ms=100.0)
        log = state.get("compilation_log")
        later = log.new() if log is not None else []  # from the checks and timings above
        return {
            "sweep": {
                "shapes": [list(sh) for sh in shapes],
                "calls_per_shape": per_shape,
                "calls": len(calls),
                "annotation": f"{LABEL}#<call> <batch>x<seq>",
                "sync_after_each_call": True,
                "caches": "torch._dynamo.reset() and an empty Inductor/Triton cache (fresh_cache) per mode",
            },
            "calls": calls,
            "ground_truth": summarize(calls, kind),
            "steady_timing": steady,
            "compilations_after_trace": sum(1 for r in later if not _is_runtime(r)),
            "runtime_compilations_after_trace": sum(1 for r in later if _is_runtime(r)),
            "compilation_metrics_error": log.error if log is not None else None,
        }

    @contextmanager
    def context():
        from torch._inductor.utils import fresh_cache

        try:
            with fresh_cache():
                yield
        finally:
            torch._dynamo.reset()

    shapes_note = {"sweep": [[b, s, dim] for b, s in shapes], "gate_proj": [hidden, dim], "up_proj": [hidden, dim],
                   "down_proj": [dim, hidden]}
    return Case(spec.variant, spec.mode, LABELS["mlp"], opts.dtype, shapes_note, step=lambda: None,
                check=check, notes=notes, warmup_calls=0, drive=drive, check_after_trace=True,
                after_trace=after_trace, bench=False, context=context)


def _is_runtime(record: dict[str, Any]) -> bool:
    # torch without the is_runtime field files runtime records without a code object name.
    return bool(record["is_runtime"]) if "is_runtime" in record else record.get("co_name") is None


def summarize(calls: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """Which calls compiled, recorded a CUDA graph, replayed one, or JIT-compiled a Triton kernel."""
    compilations = [c for call in calls for c in call["compilations"]]
    compiled = [c["call"] for c in calls if c["compiled"]]
    autotuned = [c["call"] for c in calls if any(r.get("runtime_triton_autotune_time_us") for r in c["runtime_compilations"])]
    out: dict[str, Any] = {
        "compiled_calls": compiled,
        "compilations": len(compilations),
        "compile_ids": [c.get("compile_id") for c in compilations],
        "autotune_calls": autotuned,
        "runtime_compilation_calls": [c["call"] for c in calls if c["runtime_compilations"]],
        "recompiles": sum(1 for c in compilations if c.get("recompile_reason")),
        "recompile_reasons": [c["recompile_reason"] for c in compilations if c.get("recompile_reason")],
        "unique_graphs": (calls[-1]["unique_graphs_after"] - calls[0]["unique_graphs_before"]) if calls else 0,
        "compile_wall_us": round(sum(c["wall_us"] for c in calls if c["compiled"]), 3),
    }
    if any("cudagraph" in c for c in calls):
        states = [(c["call"], (c.get("cudagraph") or {}).get("path_state")) for c in calls]
        out["cudagraph_states"] = [s for _, s in states]
        out["cudagraph_warmup_calls"] = [i for i, s in states if s == "WARMUP"]
        out["cudagraph_record_calls"] = [i for i, s in states if s == "RECORDING"]
        out["cudagraph_replay_calls"] = [i for i, s in states if s == "EXECUTION"]
        last = calls[-1].get("cudagraph") or {}
        out["cudagraph_graphs_recorded"] = last.get("graphs_recorded")
    if calls and "triton_cache_entries_after" in calls[0]:
        jit = [c["call"] for c in calls
               if c["triton_cache_entries_after"] is not None and c["triton_cache_entries_before"] is not None
               and c["triton_cache_entries_after"] > c["triton_cache_entries_before"]]
        out["triton_compile_calls"] = jit
        if kind == "liger":
            out["jit_calls"] = jit
            out["first_call_jit"] = 0 in jit
    return out

