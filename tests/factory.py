"""Tiny hand-built Kineto traces for rule-level tests.

Builders return event dicts shaped like PyTorch ≥ 2.4 writes them (µs with 3 decimals, relative
to ``baseTimeNanoseconds``); :func:`write_trace` wraps them in the top-level object.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

CPU_PID, CPU_TID = 100, 100
GPU_PID = 0


def span(cat: str, name: str, ts: float, dur: float, *, pid=CPU_PID, tid=CPU_TID, **args) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


def make_step(number: int, ts: float, dur: float) -> dict:
    return span("user_annotation", f"ProfilerStep#{number}", ts, dur)


def make_op(name: str, ts: float, dur: float, **args) -> dict:
    return span("cpu_op", name, ts, dur, **args)


def make_annotation(name: str, ts: float, dur: float) -> dict:
    return span("user_annotation", name, ts, dur)


def make_launch(name: str, ts: float, dur: float, correlation: int, *, cat="cuda_runtime", **args) -> dict:
    return span(cat, name, ts, dur, correlation=correlation, **args)


def make_kernel(name: str, ts: float, dur: float, correlation: int | None, *, stream=7,
                kind="kernel", **args) -> dict:
    cat = {"kernel": "kernel", "memset": "gpu_memset", "memcpy": "gpu_memcpy"}[kind]
    extra = {"device": 0, "stream": stream, **args}
    if correlation is not None:
        extra["correlation"] = correlation
    return span(cat, name, ts, dur, pid=GPU_PID, tid=stream, **extra)


def make_flow(flow_id: int, launch_ts: float, kernel_ts: float, stream=7) -> list[dict]:
    return [
        {"ph": "s", "id": flow_id, "pid": CPU_PID, "tid": CPU_TID, "ts": launch_ts, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": flow_id, "pid": GPU_PID, "tid": stream, "ts": kernel_ts, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
    ]


def make_memory(ts: float, addr: int, nbytes: int, allocated: int, reserved: int, *, device_type: int = 1,
                device_id: int = 0, tid=CPU_TID) -> dict:
    """A ``[memory]`` instant as Kineto writes it (``Bytes`` < 0 frees; totals are after the event)."""
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": CPU_PID, "tid": tid,
            "ts": ts, "args": {"Addr": addr, "Bytes": nbytes, "Total Allocated": allocated,
                               "Total Reserved": reserved, "Device Type": device_type, "Device Id": device_id}}


def make_oom(ts: float, nbytes: int, allocated: int, reserved: int, *, device_id: int = 0, tid=CPU_TID) -> dict:
    """An ``[OutOfMemory]`` instant: the failed request's size and the totals, no ``Addr``."""
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[OutOfMemory]", "pid": CPU_PID, "tid": tid,
            "ts": ts, "args": {"Bytes": nbytes, "Total Allocated": allocated, "Total Reserved": reserved,
                               "Device Type": 1, "Device Id": device_id}}


def write_trace(path: Path, events: list[dict], *, gpu: bool = True, gz: bool = False,
                rank: tuple[int, int] | None = None) -> Path:
    """A Kineto file of ``events``; ``rank=(rank, world_size)`` makes it one rank of a run
    (``distributedInfo``, as ``tracekit report DIR`` wants of each file)."""
    top = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": events}
    if gpu:
        top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0,
                                    "numSms": 132, "totalGlobalMem": 150_000_000_000}]
    if rank is not None:
        top["distributedInfo"] = {"backend": "nccl", "rank": rank[0], "world_size": rank[1]}
    data = json.dumps(top).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def copy_as_rank(src: Path, dest: Path, rank: int, world_size: int) -> Path:
    """``src`` (a gzip Kineto trace) written to ``dest`` as rank ``rank`` of a run of ``world_size``
    (its ``distributedInfo`` set; every other byte of its events as they were)."""
    data = json.loads(gzip.decompress(Path(src).read_bytes()))
    data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    dest.write_bytes(gzip.compress(json.dumps(data).encode()))
    return dest
