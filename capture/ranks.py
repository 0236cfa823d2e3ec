"""``tracekit capture --variant ranks``: real multi-rank Kineto traces of a DDP training loop on the CPU.

Contract: :func:`run` spawns ``world_size`` processes (``torch.multiprocessing``, spawn), each one
rank of a ``torch.distributed`` group with the gloo backend on 127.0.0.1 (a free port, the loopback
interface), and leaves ``<out>/rank<r>.json.gz`` per rank and ``<out>/manifest.json``: a set of
ranks ``tracekit report <out>`` reads as such (the manifest is skipped there). No GPU is needed or
used: gloo runs the collectives on the CPU.

Each rank trains the same model — ``layers`` ``Linear(dim, dim)`` with ReLU between, wrapped in
``DistributedDataParallel`` with buckets of one layer each (:func:`bucket_cap_mb`), so that backward
runs one bucketed ``all_reduce`` per layer while it computes — with SGD for ``schedule.total`` steps
under ``torch.profiler.profile(activities=[CPU], schedule=..., record_shapes=True)``, ``prof.step()``
closing each step. A step is:

* ``data`` (a ``record_function("data")`` span): the rank draws its batch and ``all_gather`` s every
  rank's feature means, with which it normalises its batch (the explicit collective of another kind);
* forward (``DistributedDataParallel.forward``), loss, backward (the all_reduces), optimizer step.

The profiler starts after ``init_process_group``: PyTorch (2.13) reads ``distributedInfo``
(``backend``, ``rank``, ``world_size``, ``pg_count``, ``pg_config``) for the trace when the profiler
starts tracing, and only if ``torch.distributed`` is initialised then — a profiler started before the
group exists writes a trace that names no rank, whenever it is exported (checked with gloo: exported
after ``destroy_process_group``, a trace started inside the group keeps its rank). The trace is
exported in ``on_trace_ready`` (:func:`capture.record.record`) and each rank's manifest entry repeats
the ``distributedInfo`` its trace holds.

A planted delay (:class:`Late`, ``--late RANK:PHASE:MS``): on the middle profiled step
(:func:`late_step`), that rank sleeps MS ms — ``data``: inside the data span, before its all_gather;
``forward``: in a forward hook of the middle layer; ``backward``: in a full backward hook of the
middle layer, so the buckets of the later layers leave on time and the others wait at the buckets
after it. The sleep is real (``time.sleep``); each rank reports how long it actually slept and its
own wall time per step.

Manifest (:mod:`capture.manifest`, schema ``tracekit.capture-manifest/1``): ``device``, ``versions``,
``settings`` and ``ranks`` (``world_size``, ``backend``, ``address``, ``host_cpu_count``,
``load_average_1min``, ``model``, ``late``: rank, phase, ms and step, or null; ``late_step``,
``collectives_per_step``, ``elapsed_s``); ``captures`` holds one entry per rank (``variant``
``ranks``, ``mode`` ``rank<r>``, ``rank``, ``status``, ``trace_file``, ``trace_bytes``,
``trace_summary``, ``distributed_info`` as the trace states it, ``step_wall_ms``, ``slept_ms``,
``losses``; a rank that failed has its ``error``).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from capture.record import TMP_PREFIX, Schedule, write_bytes_atomic

PHASES = ("data", "forward", "backward")
BACKEND = "gloo"
ADDRESS = "127.0.0.1"
#: Default shape: batch, dim, layers.
DEFAULT_SHAPE = (32, 256, 4)
#: How long a rank waits for the others at the rendezvous and in a collective before giving up.
TIMEOUT_S = 120


@dataclass(frozen=True)
class Late:
    """A planted delay: ``rank`` sleeps ``ms`` in ``phase`` on ``step`` (a ProfilerStep number)."""

    rank: int
    phase: str
    ms: float
    step: int


@dataclass(frozen=True)
class Settings:
    """What every rank runs (picklable: it crosses into the spawned processes)."""

    world_size: int
    schedule: Schedule
    shape: tuple[int, int, int] = DEFAULT_SHAPE
    late: Late | None = None
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = False
    seed: int = 0


def bucket_cap_mb(dim: int) -> float:
    """DDP's bucket cap for one ``Linear(dim, dim)`` layer's fp32 gradients (weight and bias): a
    bucket closes once it holds that many bytes, so each holds one layer and backward issues one
    all_reduce per layer as the layers' gradients become ready (DDP counts MB as 2^20 bytes)."""
    return (dim * dim + dim) * 4 / 2**20


def late_step(schedule: Schedule) -> int:
    """The step a planted delay falls on: the middle profiled step (steady, with profiled steps
    before and after it)."""
    return schedule.wait + schedule.warmup + schedule.active // 2


def free_port() -> int:
    """A TCP port free on the loopback address now (the rendezvous binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ADDRESS, 0))
        return int(sock.getsockname()[1])


def _loopback() -> str | None:
    """The loopback interface's name (``lo``, ``lo0``), for gloo to bind: every rank is on this host."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    return next((n for n in names if n == "lo"), next((n for n in names if n.startswith("lo")), None))


def run(settings: Settings, *, out: Path, command: str, echo) -> Any:
    """Record one trace per rank into ``out`` and write the manifest; returns the
    :class:`capture.manifest.Manifest`. A rank that fails (or a process that dies) gets its entry
    with the error; the others keep theirs."""
    import torch.multiprocessing as mp

    from capture.manifest import Manifest, device_info, versions

    batch, dim, layers = settings.shape
    manifest = Manifest(out / "manifest.json", command=command, device=device_info("cpu"), versions=versions(),
                        settings={"schedule": asdict(settings.schedule), "record_shapes": settings.record_shapes,
                                  "profile_memory": settings.profile_memory, "with_stack": settings.with_stack,
                                  "execution_trace_variants": [], "seed": settings.seed,
                                  "trace_header_rewritten": {"host_name": "localhost",
                                                             "traceName": "the trace file name"}})
    manifest.doc["ranks"] = {
        "world_size": settings.world_size, "backend": BACKEND, "address": ADDRESS,
        # The ranks share this host's cores with each other (and with whatever else runs on it): what a
        # reader needs to judge the skew of the steps without a planted delay.
        "host_cpu_count": os.cpu_count(), "load_average_1min": _load_average(),
        "model": {"batch": batch, "dim": dim, "layers": layers, "layer": f"Linear({dim}, {dim}) + ReLU",
                  "wrapper": "DistributedDataParallel", "bucket_cap_mb": bucket_cap_mb(dim),
                  "optimizer": "SGD(lr=0.01)", "threads_per_rank": 1},
        "late": asdict(settings.late) if settings.late else None,
        "late_step": late_step(settings.schedule),
        "collectives_per_step": {"data": "1 all_gather of the batch's feature means ([dim] fp32 per rank)",
                                 "backward": f"{layers} all_reduce (one DDP bucket per layer)"},
    }
    manifest.write()
    port = free_port()
    t0 = time.perf_counter()
    failure = None
    # Each rank leaves its manifest entry as a file in a private folder (a pipe could fill and block
    # a rank that the parent, waiting for it to exit, never reads).
    with tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}ranks.", dir=out) as work:
        try:
            mp.spawn(_rank, args=(settings, port, str(out), work), nprocs=settings.world_size, join=True)
        except Exception as err:  # a rank raised or died: the others were stopped; keep what came back
            failure = " ".join(f"{type(err).__name__}: {err}".split())[:2000]
        entries = {int(p.stem.removeprefix("rank")): json.loads(p.read_text()) for p in Path(work).glob("rank*.json")}
    for rank in range(settings.world_size):
        entry = entries.get(rank) or {"variant": "ranks", "mode": f"rank{rank}", "rank": rank, "status": "failed",
                                      "error": failure or "the process reported nothing"}
        manifest.captures.append(entry)
        echo(_line(entry))
    manifest.doc["ranks"]["elapsed_s"] = round(time.perf_counter() - t0, 2)
    manifest.write()
    return manifest


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # not on every platform
        return None


def _line(entry: dict[str, Any]) -> str:
    name = f"rank{entry['rank']}"
    if entry["status"] != "ok":
        return f"{name}: {entry['status']}: {entry.get('error')}"
    slept = "".join(f"  slept {ms:.1f} ms in step {step}" for step, ms in entry["slept_ms"].items())
    return f"{name}: ok  trace {entry['trace_bytes'] / 1024:.0f} KiB{slept}"


def _rank(rank: int, settings: Settings, port: int, out: str, results: str) -> None:
    """One rank, in its own process (``mp.spawn`` passes ``rank`` first); its manifest entry goes to
    ``<results>/rank<r>.json``."""
    import datetime

    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = ADDRESS
    os.environ["MASTER_PORT"] = str(port)
    loopback = _loopback()
    if loopback and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback
    # One compute thread per rank: the ranks share the host's cores, and their own work stays comparable.
    torch.set_num_threads(1)
    entry: dict[str, Any] = {"variant": "ranks", "mode": f"rank{rank}", "rank": rank, "status": "failed"}
    dist.init_process_group(BACKEND, rank=rank, world_size=settings.world_size,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        entry.update(_train(rank, settings, Path(out)))
        entry["status"] = "ok"
    except Exception as err:
        entry["error"] = f"{type(err).__name__}: {err}".strip()
        entry["traceback"] = traceback.format_exc(limit=8)[-4000:]
        raise  # the other ranks are stopped rather than left waiting in a collective
    finally:
        write_bytes_atomic(Path(results) / f"rank{rank}.json", json.dumps(entry, default=str).encode())
        dist.destroy_process_group()


def _train(rank: int, settings: Settings, out: Path) -> dict[str, Any]:
    """Build the model, run the profiled loop and write ``rank<r>.json.gz``; the entry's facts."""
    import gzip

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import record_function

    from capture.record import record

    batch, dim, layers = settings.shape
    torch.manual_seed(settings.seed)  # the same initial weights on every rank (DDP checks them too)
    parts: list[nn.Module] = []
    for i in range(layers):
        parts.append(nn.Linear(dim, dim))
        if i < layers - 1:
            parts.append(nn.ReLU())
    model = nn.Sequential(*parts)
    middle = model[2 * (layers // 2)]  # the middle Linear: later buckets leave before its hook runs
    late = settings.late if settings.late is not None and settings.late.rank == rank else None
    current = {"step": -1}
    slept: dict[str, float] = {}

    def sleep_if(phase: str) -> None:
        if late is not None and late.phase == phase and current["step"] == late.step:
            t = time.perf_counter()
            time.sleep(late.ms / 1000)
            slept[str(current["step"])] = round((time.perf_counter() - t) * 1000, 3)

    middle.register_forward_hook(lambda module, args, output: sleep_if("forward"))
    middle.register_full_backward_hook(lambda module, grad_in, grad_out: sleep_if("backward"))
    ddp = DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb(dim))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(settings.seed * 1000 + rank)  # each rank its own batches
    target = torch.zeros(batch, dim)
    walls: list[float] = []
    losses: list[float] = []

    def step() -> None:
        with record_function("data"):
            sleep_if("data")
            x = torch.randn(batch, dim, generator=gen)
            means = [torch.empty(dim) for _ in range(settings.world_size)]
            dist.all_gather(means, x.mean(dim=0))
            x = x - torch.stack(means).mean(dim=0)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(x), target)
        loss.backward()
        opt.step()
        losses.append(round(float(loss.detach()), 6))

    def loop(prof: Any) -> None:
        dist.barrier()  # every rank enters the profiled loop together
        for i in range(settings.schedule.total):
            current["step"] = i
            t = time.perf_counter()
            step()
            walls.append(round((time.perf_counter() - t) * 1000, 3))
            prof.step()

    rec = record(loop, out_dir=out, stem=f"rank{rank}", device="cpu", schedule=settings.schedule,
                 record_shapes=settings.record_shapes, profile_memory=settings.profile_memory,
                 with_stack=settings.with_stack)
    info = json.loads(gzip.decompress((out / rec.trace_file).read_bytes())).get("distributedInfo")
    return {"trace_file": rec.trace_file, "trace_bytes": rec.trace_bytes, "trace_summary": rec.summary,
            "distributed_info": info, "step_wall_ms": walls, "slept_ms": slept, "losses": losses}
