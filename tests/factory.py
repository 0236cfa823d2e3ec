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


def make_generate(prompt_len: int = 6, new_tokens: int = 4, *, layers: int = 2, t0: float = 0.0,
                  period: float = 200.0) -> list[dict]:
    """A Hugging Face ``generate()``-like decode loop: 1 prefill + ``new_tokens - 1`` decode forwards.

    Faithful to the family as a profiler records it without a schedule or annotations: no
    ``ProfilerStep``, no ``record_function``; every op is a top-level ``cpu_op`` of one thread. Each
    forward opens with ``aten::embedding`` (``Input Dims`` ``[[vocab, hidden], [batch, seq]]``: seq
    is the prompt length in the prefill, 1 in each decode step), runs ``layers`` × (``aten::linear``
    + ``aten::add``) and the LM head, then samples (``aten::argmax``), reads the token back for the
    stopping check (``aten::item`` → ``aten::_local_scalar_dense`` with its copy and stream sync)
    and appends it (``aten::cat``). The prefill's kernels run longer (more tokens).

    Times (µs) are fixed so a test can count them by hand: a forward starts every ``period`` µs
    (200); each op lasts 8 µs, its launch call 2 µs into it, its kernel 5 µs after the launch.
    """
    events: list[dict] = []
    corr = 1
    t = t0
    for step in range(new_tokens):
        seq = prompt_len if step == 0 else 1
        scale = 4.0 if step == 0 else 1.0
        ops = [("aten::embedding", f"[[32000, 64], [1, {seq}]]", "void at::native::indexSelectLargeIndex<float>", 2.0)]
        for _ in range(layers):
            ops += [("aten::linear", f"[[1, {seq}, 64], [64, 64], []]", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT", 6.0),
                    ("aten::add", f"[[1, {seq}, 64], [1, {seq}, 64], []]",
                     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 1.0)]
        ops += [("aten::linear", f"[[1, {seq}, 64], [32000, 64], []]", "nvjet_tst_128x64_64x4_1x2_h_bz_TNN", 10.0),
                ("aten::argmax", "[[1, 32000], [], []]", "void at::native::reduce_kernel<512, 1>", 2.0)]
        for name, dims, kernel, dur in ops:
            events.append(span("cpu_op", name, t, 8, **{"Input Dims": json.loads(dims)}))
            events.append(make_launch("cudaLaunchKernel", t + 2, 2, corr))
            events.append(make_kernel(kernel, t + 7, dur * scale, corr))
            corr += 1
            t += 10
        # The stopping check reads the token back: a blocking copy and sync inside aten::item.
        events.append(span("cpu_op", "aten::item", t, 20))
        events.append(span("cpu_op", "aten::_local_scalar_dense", t + 1, 18))
        events.append(make_launch("cudaMemcpyAsync", t + 2, 3, corr))
        events.append(make_kernel("Memcpy DtoH (Device -> Pinned)", t + 6, 1, corr, kind="memcpy"))
        events.append(make_launch("cudaStreamSynchronize", t + 6, 10, corr + 1))
        corr += 2
        t += 22
        events.append(span("cpu_op", "aten::cat", t, 8, **{"Input Dims": [[1, prompt_len + step], [1, 1]]}))
        events.append(make_launch("cudaLaunchKernel", t + 2, 2, corr))
        events.append(make_kernel("void at::native::CatArrayBatchedCopy<float>", t + 7, 1, corr))
        corr += 1
        t = t0 + period * (step + 1)
    return events


def copy_as_rank(src: Path, dest: Path, rank: int, world_size: int) -> Path:
    """``src`` (a gzip Kineto trace) written to ``dest`` as rank ``rank`` of a run of ``world_size``
    (its ``distributedInfo`` set; every other byte of its events as they were)."""
    data = json.loads(gzip.decompress(Path(src).read_bytes()))
    data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    dest.write_bytes(gzip.compress(json.dumps(data).encode()))
    return dest


# --- two ranks of one run, for merge and the cross-rank pictures -----------------------------------

#: Rank 1's clock runs this many µs ahead of rank 0's in the hand-made set.
SHIFT_US = 5000.25
ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def two_rank_events(rank: int) -> list[dict]:
    """One step of two all-reduces; rank 1 arrives late at both, and both ranks leave each together
    (at 350 and 650 µs of true time). Both files use CPU pid 100 and GPU pid 0, and the same ids."""
    arrivals = [(150, 200), (550, 100)] if rank == 0 else [(300, 50), (600, 50)]
    gemm_ts = 400 if rank == 0 else 400.125
    events = [make_step(1, 0, 1000), make_op("aten::mm", 380, 30, **{"External id": 7}),
              make_launch("cudaLaunchKernel", 390, 5, 2, **{"External id": 7}),
              make_kernel("ampere_sgemm_128x64_nn", gemm_ts, 100, 2, device=rank, **{"External id": 7})]
    for i, ((start, dur), launch) in enumerate(zip(arrivals, (100, 520))):
        corr = 10 + i
        events += [make_op("nccl:all_reduce", launch - 5, 15, **{"External id": 20 + i}),
                   make_launch("cudaLaunchKernel", launch, 5, corr, **{"External id": 20 + i}),
                   make_kernel(ALL_REDUCE, start, dur, corr, device=rank, **{"External id": 20 + i}),
                   *make_flow(corr, launch, start)]
    for e in events:
        e["ts"] += SHIFT_US * rank
    return events


def write_two_ranks(directory: Path) -> Path:
    """``directory`` (made) holding ``rank0.json`` and ``rank1.json`` of :func:`two_rank_events`:
    rank 0 waits 150 µs at all-reduce #0 and 50 µs at #1 for rank 1; rank 1's clock runs
    :data:`SHIFT_US` ahead."""
    directory.mkdir()
    for rank in (0, 1):
        write_trace(directory / f"rank{rank}.json", two_rank_events(rank), rank=(rank, 2))
    return directory
