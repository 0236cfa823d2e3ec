"""Run a list of capture specs end to end: build, warm up, check, profile, time, record in the manifest.

Contract: :func:`run` never lets one capture's failure stop the others. Each capture's entry (ok,
failed with its error text, or skipped with a reason) is appended to the manifest, which is rewritten
atomically right after it, next to the trace files already written. Returns the manifest; the caller
decides the exit status from it (:func:`problems`).

One capture: inside the case's ``context`` — warm-up calls, check (unless the case checks after the
trace), the profiled loop (the case's own ``drive`` with no schedule, or the step loop under the
schedule), then the check after the trace, the case's ``after_trace`` facts and the timing. With
``profile_memory`` on CUDA the manifest entry gets ``allocator``: the caching allocator's own figures
for the profiled window and each unit (capture/ground_truth.py).
"""

from __future__ import annotations

import gc
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from capture.manifest import Manifest, device_info, versions
from capture.record import Schedule, record, step_loop
from capture.variants import Options, Spec

# Largest ‖out − eager‖ / ‖eager‖ accepted as "the same function" per dtype: bf16 carries 8 bits of
# mantissa, so fused/reordered arithmetic legitimately moves results by up to a few 1e-3.
TOLERANCE = {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 1e-4}


def run(
    specs: list[Spec],
    opts: Options,
    *,
    out: Path,
    schedule: Schedule,
    record_shapes: bool,
    profile_memory: bool,
    with_stack: bool,
    et_variants: set[str],
    measure_ceilings: bool,
    bench_ms: float | None,
    command: str,
    echo: Callable[[str], None],
) -> Manifest:
    import torch

    sync = torch.cuda.synchronize if opts.device == "cuda" else (lambda: None)
    settings = {
        "schedule": asdict(schedule),
        "record_shapes": record_shapes,
        "profile_memory": profile_memory,
        "with_stack": with_stack,
        "execution_trace_variants": sorted(et_variants),
        "sync_after_each_step": True,  # a capture's own sync_after_each_step / schedule entries override
        "trace_header_rewritten": {"host_name": "localhost", "traceName": "the trace file name"},
        "options": asdict(opts),
        "tolerance_rel_err_vs_eager": TOLERANCE.get(opts.dtype),
    }
    manifest = Manifest(out / "manifest.json", command=command, device=device_info(opts.device),
                        versions=versions(), settings=settings)
    manifest.write()

    if measure_ceilings and opts.device == "cuda":
        from capture.timing import ceilings

        try:
            manifest.doc["device"]["ceilings"] = ceilings()
            c = manifest.doc["device"]["ceilings"]
            echo(f"ceilings: d2d copy {c['d2d_copy']['TB_per_s']} TB/s, "
                 f"bf16 8192^3 matmul {c['matmul_bf16_8192']['TFLOP_per_s']} TFLOP/s")
        except Exception as err:  # a ceiling is context, never a reason to lose the captures
            manifest.doc["device"]["ceilings"] = {"error": f"{type(err).__name__}: {err}"}
        manifest.write()

    for spec in specs:
        manifest.add(_capture_one(spec, opts, out=out, schedule=schedule, record_shapes=record_shapes,
                                  profile_memory=profile_memory, with_stack=with_stack,
                                  execution_trace=spec.variant in et_variants, bench_ms=bench_ms, sync=sync,
                                  echo=echo))
    return manifest


def _capture_one(spec: Spec, opts: Options, *, out: Path, schedule: Schedule, record_shapes: bool,
                 profile_memory: bool, with_stack: bool, execution_trace: bool, bench_ms: float | None,
                 sync: Callable[[], None], echo: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from capture.ground_truth import AllocatorProbe
    from capture.timing import bench

    entry: dict[str, Any] = {"variant": spec.variant, "mode": spec.mode, "status": "failed"}
    name = f"{spec.variant}_{spec.mode}"
    if spec.needs_cuda and opts.device != "cuda":
        entry.update(status="skipped", reason=spec.cuda_reason)
        echo(f"{name}: skipped (needs CUDA)")
        return entry
    t0 = time.perf_counter()
    case = None
    try:
        case = spec.build(opts)
        entry.update(label=case.label, dtype=case.dtype, shapes=case.shapes, **case.notes)
        probe = AllocatorProbe(opts.device) if profile_memory else None
        with case.context():
            # Warm up before the profiler starts: compilation, autotuning, Triton JIT, cuBLAS handles and
            # CUDA-graph recording all happen here, not inside the recorded steps (cases that profile
            # from the first call, or warm up inside the schedule, ask for no warm-up calls).
            for _ in range(case.warmup_calls):
                case.step()
            sync()
            if case.check is not None and not case.check_after_trace:
                entry["correctness"] = _checked(case.check, opts)
                sync()
            if case.drive is not None:
                loop, used_schedule = (lambda prof: case.drive(prof, probe)), None
            else:
                used_schedule = case.schedule or schedule
                loop = step_loop(case.step, label=case.label, schedule=used_schedule, sync=sync,
                                 sync_each_step=case.sync_each_step, probe=probe)
            rec = record(loop, out_dir=out, stem=name, device=opts.device, schedule=used_schedule,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         execution_trace=execution_trace)
            entry.update(trace_file=rec.trace_file, trace_bytes=rec.trace_bytes, trace_summary=rec.summary)
            if not case.sync_each_step:
                entry["sync_after_each_step"] = False
            if rec.execution_trace_file:
                entry.update(execution_trace_file=rec.execution_trace_file,
                             execution_trace_bytes=rec.execution_trace_bytes)
            if probe is not None:
                entry["allocator"] = probe.result()
            if case.check is not None and case.check_after_trace:
                entry["correctness"] = _checked(case.check, opts)
            if case.after_trace is not None:
                entry.update(case.after_trace())
            if case.bench:
                entry["timing"] = bench(case.step, device=opts.device, rep_ms=bench_ms or case.bench_rep_ms)
        entry["status"] = "ok"
    except Exception as err:
        entry["error"] = f"{type(err).__name__}: {err}".strip()
        entry["traceback"] = traceback.format_exc(limit=8)[-4000:]
    finally:
        entry["elapsed_s"] = round(time.perf_counter() - t0, 2)
        del case
        gc.collect()
        if opts.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    echo(_line(name, entry))
    return entry


def _checked(check: Callable[[], dict[str, Any]], opts: Options) -> dict[str, Any]:
    correctness = check()
    tol = TOLERANCE.get(opts.dtype)
    if "rel_err_vs_eager" in correctness and tol is not None:
        correctness["tolerance"] = tol
        correctness["within_tolerance"] = bool(correctness["rel_err_vs_eager"] <= tol)
    return correctness


def _line(name: str, entry: dict[str, Any]) -> str:
    if entry["status"] != "ok":
        return f"{name}: {entry['status']}: {entry.get('error') or entry.get('reason')}"
    corr = entry.get("correctness", {})
    err = corr.get("rel_err_vs_eager", corr.get("rel_err_vs_fp64"))
    err_s = f"  rel_err {err:.2e}" if isinstance(err, float) else ""
    t = entry.get("timing")
    if t is not None:
        what = f"median {t['median']:.1f} us (min {t['min']:.1f}, max {t['max']:.1f}, n {t['n']})"
    else:
        gt = entry.get("ground_truth", {})
        what = f"{len(entry.get('calls', []))} calls, {gt.get('compilations', 0)} compilations"
    return f"{name}: ok  {what}{err_s}  trace {entry['trace_bytes'] / 1024:.0f} KiB  {entry['elapsed_s']:.1f}s"


def problems(manifest: Manifest) -> list[str]:
    """Names of captures that failed or disagreed with eager beyond tolerance (skips are not problems)."""
    bad = []
    for e in manifest.captures:
        name = f"{e['variant']}_{e['mode']}"
        if e["status"] == "failed":
            bad.append(name)
        elif e.get("correctness", {}).get("within_tolerance") is False:
            bad.append(f"{name} (rel_err beyond tolerance)")
    return bad
