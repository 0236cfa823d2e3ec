"""``tracekit capture``: the click command. Imports click and the stdlib only at module level.

torch, triton and kernels are imported inside the command, so ``tracekit report`` keeps working on a
machine without them. User-caused problems (no CUDA, no torch, bad flags) raise
:class:`tracekit.errors.UsageError` (exit 2, one line); captures that ran but failed end with exit 1
after every other capture and the manifest were written. ``--variant ranks`` (capture/ranks.py:
several processes, gloo, CPU only) is recorded alone, into a folder of its own, and needs no CUDA.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from click.core import ParameterSource

from capture.antipatterns import DEFAULT_SHAPE as ANTIPATTERN_SHAPE
from capture.antipatterns import TINY
from capture.ranks import PHASES as RANK_PHASES
from capture.record import Schedule
from capture.variants import (
    FIRST_CALL_VARIANTS,
    MODE_KINDS,
    PROCESS_VARIANTS,
    STUDY_VARIANTS,
    SWEEP_KINDS,
    VARIANTS,
    Options,
)
from tracekit.about import install_hint
from tracekit.errors import TracekitError, UsageError

ALL_KINDS = sorted({k for kinds in MODE_KINDS.values() for k in kinds} | set(SWEEP_KINDS))
DEFAULT_ET_VARIANTS = ("matmul_add", "linear", "mlp")  # a full training step's ET is large


class CaptureIncomplete(TracekitError):
    """Some captures failed; the others and the manifest are on disk."""

    exit_code = 1


def _split(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _ints(n: int | None):
    def parse(ctx: click.Context, param: click.Parameter, value: str | None):
        if value is None:
            return None
        try:
            nums = tuple(int(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise UsageError(f"--{param.name.replace('_', '-')}: expected comma-separated integers, got {value!r}") from None
        if (n is not None and len(nums) != n) or not nums or min(nums) <= 0:
            want = f"{n} positive integers" if n else "positive integers"
            raise UsageError(f"--{param.name.replace('_', '-')}: expected {want}, got {value!r}")
        return nums

    return parse


def _shapes(ctx: click.Context, param: click.Parameter, value: str | None):
    """``64x128,32x128`` -> ((64, 128), (32, 128)): batch x seq per shape of the sweep."""
    if value is None:
        return None
    shapes = []
    for item in (v.strip() for v in value.split(",")):
        parts = item.lower().split("x") if item else []
        try:
            dims = tuple(int(p) for p in parts)
        except ValueError:
            dims = ()
        if len(dims) != 2 or min(dims) <= 0:
            raise UsageError(f"--shapes: expected BATCHxSEQ[,BATCHxSEQ...] with positive integers, got {value!r}")
        shapes.append(dims)
    return tuple(shapes)


def _late(ctx: click.Context, param: click.Parameter, value: str | None):
    """``2:backward:30`` -> (2, "backward", 30.0): the rank, phase and milliseconds of a planted delay."""
    if value is None:
        return None
    parts = value.split(":")
    try:
        rank, phase, ms = int(parts[0]), parts[1].strip(), float(parts[2])
    except (ValueError, IndexError):
        rank, phase, ms = -1, "", 0.0
    if len(parts) != 3 or rank < 0 or phase not in RANK_PHASES or not 0 < ms < 600_000:
        raise UsageError(f"--late: expected RANK:PHASE:MS with PHASE one of {', '.join(RANK_PHASES)} and MS > 0, "
                         f"got {value!r}")
    return rank, phase, ms


def _world_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        size = int(value)
    except ValueError:
        size = 0
    if not 2 <= size <= 64:
        raise UsageError(f"--world-size: expected an integer from 2 to 64, got {value!r}")
    return size


class _RecordingCommand(click.Command):
    """Keeps the raw arguments so the manifest can state the exact command that made it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["capture.argv"] = list(args)
        return super().parse_args(ctx, args)


@click.command("capture", cls=_RecordingCommand)
@click.option("--variant", "variants", multiple=True, default=("all",), show_default=True,
              help=f"Variant(s) to record, comma-separated or repeated: {', '.join(VARIANTS)}, or all "
                   f"({', '.join(STUDY_VARIANTS)}); or ranks alone: one trace per rank of a DDP training "
                   "loop, several processes with the gloo backend on the CPU (no CUDA needed).")
@click.option("--mode", "modes", multiple=True,
              help=f"Only these mode kinds ({', '.join(ALL_KINDS)}); matmul_add's eager/compile cover every size.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for <variant>_<mode>.json.gz traces and manifest.json.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True,
              help="cpu records CPU activities only (for tests and CI).")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default=None,
              help="Data type (train: autocast dtype). Default bf16 on CUDA, fp32 on CPU.")
@click.option("--sizes", callback=_ints(None), default="64,4096", show_default=True,
              help="matmul_add square sizes N ([N,N] @ [N,N] + [N]).")
@click.option("--linear-shape", callback=_ints(3), default="1024,32,64", show_default=True,
              help="linear: batch,in_features,out_features.")
@click.option("--mlp-shape", callback=_ints(4), default="64,128,768,3072", show_default=True,
              help="mlp: batch,seq,dim,hidden.")
@click.option("--train-shape", callback=_ints(2), default="8,512", show_default=True, help="train: batch,seq.")
@click.option("--train-model", callback=_ints(4), default="12,768,12,50304", show_default=True,
              help="train: layers,dim,heads,vocab (default GPT-2 small).")
@click.option("--antipattern-shape", callback=_ints(4), default=",".join(map(str, ANTIPATTERN_SHAPE)),
              show_default=True, help="antipatterns: batch,dim,hidden,blocks of the training loop "
                                      f"(overhead-bound uses {','.join(map(str, TINY))},blocks).")
@click.option("--from-first-call", is_flag=True,
              help="mlp: profile a shape sweep from the very first call, no schedule and no warm-up, so "
                   "compilations, recompiles, CUDA-graph records and Triton JIT are in the trace.")
@click.option("--shapes", callback=_shapes, default=None,
              help="With --from-first-call: the sweep's input shapes, BATCHxSEQ comma-separated "
                   "(default: --mlp-shape's batch x seq).")
@click.option("--calls-per-shape", callback=_ints(1), default="4", show_default=True,
              help="With --from-first-call: calls per shape (steady calls follow each (re)compile).")
@click.option("--wait", type=click.IntRange(0), default=1, show_default=True, help="Profiler schedule: wait steps.")
@click.option("--warmup", type=click.IntRange(0), default=1, show_default=True, help="Profiler schedule: warmup steps.")
@click.option("--active", type=click.IntRange(1), default=3, show_default=True, help="Profiler schedule: active steps.")
@click.option("--record-shapes/--no-record-shapes", default=True, show_default=True)
@click.option("--profile-memory", "--memory", "memory", is_flag=True,
              help="profile_memory=True ([memory] events; modes get a -memory suffix) and, on CUDA, the "
                   "caching allocator's own peak/before/after figures in the manifest.")
@click.option("--stack", is_flag=True, help="with_stack=True (python stacks; larger traces).")
@click.option("--execution-trace", is_flag=True,
              help="Also write <variant>_<mode>.et.json.gz (ExecutionTraceObserver) for --et-variants.")
@click.option("--et-variants", default=",".join(DEFAULT_ET_VARIANTS), show_default=True,
              help="Variants that get an execution trace with --execution-trace (or all).")
@click.option("--kernel-repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Local kernels repository for kernels-community/liger-kernels "
                   "(build one with: python -m capture.liger_local --out DIR). Same as LOCAL_KERNELS.")
@click.option("--ceilings/--no-ceilings", default=True, show_default=True,
              help="Measure D2D copy bandwidth and 8192^3 bf16 matmul rate first (CUDA only).")
@click.option("--bench-ms", type=click.FloatRange(min=1), default=None,
              help="Timing budget per capture in ms (default 200; train 1000).")
@click.option("--world-size", callback=_world_size, default=None, metavar="N",
              help="ranks: how many processes (ranks) to start, 2 to 64 [default: 4].")
@click.option("--late", callback=_late, default=None, metavar="RANK:PHASE:MS",
              help="ranks: plant a real delay: RANK sleeps MS ms in PHASE (data, forward or backward) on the "
                   "middle profiled step.")
@click.option("--ranks-shape", callback=_ints(3), default=None,
              help="ranks: batch,dim,layers of the DDP model (Linear(dim, dim) layers) [default: 32,256,4].")
@click.option("--seed", type=int, default=0, show_default=True)
def capture_command(variants, modes, out, device, dtype, sizes, linear_shape, mlp_shape, train_shape, train_model,
                    antipattern_shape, from_first_call, shapes, calls_per_shape, wait, warmup, active,
                    record_shapes, memory, stack, execution_trace, et_variants, kernel_repo, ceilings, bench_ms,
                    world_size, late, ranks_shape, seed) -> None:
    """Record PyTorch profiler traces of known workloads (matmul_add, linear, mlp, train, antipatterns, ranks).

    Writes OUT/<variant>_<mode>.json.gz per capture and OUT/manifest.json (device, versions, shapes,
    timings, relative errors). Needs CUDA unless --device cpu; --variant ranks writes OUT/rank<r>.json.gz
    per rank and runs on the CPU.
    """
    chosen = _split(variants)
    known = (*VARIANTS, *PROCESS_VARIANTS)
    bad = [v for v in chosen if v not in (*known, "all")]
    if bad:
        raise UsageError(f"unknown variant {bad[0]!r}; choose from {', '.join(known)} or all")
    ctx = click.get_current_context()
    if any(v in PROCESS_VARIANTS for v in chosen):
        _ranks(ctx, chosen, modes=modes, out=out, device=device, execution_trace=execution_trace,
               from_first_call=from_first_call, world_size=world_size, late=late, shape=ranks_shape,
               wait=wait, warmup=warmup, active=active, record_shapes=record_shapes, memory=memory, stack=stack,
               seed=seed)
        return
    given = [flag for flag, value in (("--world-size", world_size), ("--late", late), ("--ranks-shape", ranks_shape))
             if value is not None]
    if given:
        raise UsageError(f"{given[0]} is for --variant ranks")
    chosen = list(dict.fromkeys([*(STUDY_VARIANTS if "all" in chosen else ()), *(v for v in chosen if v != "all")]))
    kinds = _split(modes)
    bad = [k for k in kinds if k not in ALL_KINDS]
    if bad:
        raise UsageError(f"unknown mode {bad[0]!r}; choose from {', '.join(ALL_KINDS)}")
    ets = _split((et_variants,))
    if "all" in ets:
        ets = list(VARIANTS)
    bad = [v for v in ets if v not in VARIANTS]
    if bad:
        raise UsageError(f"--et-variants: unknown variant {bad[0]!r}")
    if shapes is not None and not from_first_call:
        raise UsageError("--shapes needs --from-first-call (a shape sweep is profiled from its first call)")
    if from_first_call and [v for v in chosen if v not in FIRST_CALL_VARIANTS]:
        raise UsageError(f"--from-first-call records the {'/'.join(FIRST_CALL_VARIANTS)} shape sweep; "
                         f"use it with --variant {','.join(FIRST_CALL_VARIANTS)}")

    # Planning needs no torch: a flag combination that selects nothing is reported first, torch or not.
    from capture import variants as variants_mod

    opts = Options(device=device, dtype=dtype or ("bf16" if device == "cuda" else "fp32"), sizes=sizes,
                   linear_shape=linear_shape, mlp_shape=mlp_shape, train_shape=train_shape, train_model=train_model,
                   antipattern_shape=antipattern_shape, kernel_repo=str(kernel_repo) if kernel_repo else None,
                   seed=seed, schedule=Schedule(wait, warmup, active), from_first_call=from_first_call,
                   sweep_shapes=shapes, calls_per_shape=calls_per_shape[0], profile_memory=memory)
    specs = variants_mod.plan(chosen, kinds, opts)
    if not specs:
        raise UsageError(f"no mode {'/'.join(kinds)} exists for variant(s) {', '.join(chosen)}")

    try:
        import torch
    except ImportError:
        raise UsageError(f"install the capture extra: {install_hint('capture')}") from None
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("no CUDA device found; use --device cpu for a CPU-only capture")

    from capture import session

    out.mkdir(parents=True, exist_ok=True)
    manifest = session.run(
        specs, opts, out=out, schedule=opts.schedule, record_shapes=record_shapes,
        profile_memory=memory, with_stack=stack, et_variants=set(ets) if execution_trace else set(),
        measure_ceilings=ceilings, bench_ms=bench_ms,
        command=shlex.join(["tracekit", "capture", *click.get_current_context().meta.get("capture.argv", [])]),
        echo=lambda line: click.echo(line, err=True),
    )
    ok = sum(e["status"] == "ok" for e in manifest.captures)
    click.echo(f"{ok}/{len(manifest.captures)} captures written to {out} (manifest.json)")
    failed = session.problems(manifest)
    if failed:
        raise CaptureIncomplete(f"{len(failed)} capture(s) failed: {', '.join(failed)}; see {out / 'manifest.json'}")


def _ranks(ctx: click.Context, chosen: list[str], *, modes, out: Path, device: str, execution_trace: bool,
           from_first_call: bool, world_size: int | None, late, shape, wait: int, warmup: int, active: int,
           record_shapes: bool, memory: bool, stack: bool, seed: int) -> None:
    """``--variant ranks``: check its flags, then record one trace per rank (capture/ranks.py)."""
    if chosen != ["ranks"]:
        raise UsageError("--variant ranks records a set of rank traces into a folder of its own; ask for it alone")
    refused = [flag for flag, on in (
        ("--mode", bool(modes)), ("--execution-trace", execution_trace), ("--from-first-call", from_first_call),
        ("--device cuda", device == "cuda" and ctx.get_parameter_source("device") != ParameterSource.DEFAULT),
    ) if on]
    if refused:
        raise UsageError(f"--variant ranks does not take {refused[0]} (it runs a DDP loop on the CPU, gloo backend)")
    world = world_size or 4
    if late is not None and late[0] >= world:
        raise UsageError(f"--late: rank {late[0]} is not a rank of a world of {world}")
    try:
        import torch
    except ImportError:
        raise UsageError(f"install the capture extra: {install_hint('capture')}") from None
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        raise UsageError("this torch has no torch.distributed gloo backend, which --variant ranks needs")

    from capture import ranks

    schedule = Schedule(wait, warmup, active)
    planted = None if late is None else ranks.Late(late[0], late[1], late[2], ranks.late_step(schedule))
    settings = ranks.Settings(world_size=world, schedule=schedule, shape=tuple(shape) if shape else ranks.DEFAULT_SHAPE,
                              late=planted, record_shapes=record_shapes, profile_memory=memory, with_stack=stack,
                              seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    manifest = ranks.run(settings, out=out,
                         command=shlex.join(["tracekit", "capture", *ctx.meta.get("capture.argv", [])]),
                         echo=lambda line: click.echo(line, err=True))
    ok = sum(e["status"] == "ok" for e in manifest.captures)
    click.echo(f"{ok}/{len(manifest.captures)} rank traces written to {out} (manifest.json)")
    failed = [f"rank{e['rank']}" for e in manifest.captures if e["status"] != "ok"]
    if failed:
        raise CaptureIncomplete(f"{len(failed)} rank(s) failed: {', '.join(failed)}; see {out / 'manifest.json'}")
