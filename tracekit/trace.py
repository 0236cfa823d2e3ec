"""The typed model every analysis reads: a :class:`Trace` of Polars frames with fixed schemas.

Produced only by :func:`tracekit.load.load`. All times are ``Int64`` nanoseconds on one clock per
trace (relative to ``meta.base_time_ns`` when the file has ``baseTimeNanoseconds``, else the file's own
absolute clock). ``end`` is always ``ts + dur``. ``idx`` is the event's position in ``traceEvents``
and is the tiebreaker of every sort, so results are deterministic.

Frames and their columns (dtypes):

``ops`` — CPU-side spans (``ph == "X"``; categories ``cpu_op``, ``user_annotation``,
``python_function``):
    idx u32, cat str, name str, pid str, tid str, ts i64, dur i64, end i64, external_id i64?,
    record_function_id i64?, sequence_number i64?, input_dims str? (raw JSON text, parse with
    :func:`tracekit.shapes.parse_dims`), input_types str? (raw JSON text)

``launches`` — host calls into the GPU runtime or driver (categories ``cuda_runtime``,
``cuda_driver``, and any other ``*_runtime``/``*_driver``):
    idx u32, cat str, name str, pid str, tid str, ts i64, dur i64, end i64, correlation i64?,
    external_id i64?, cbid i64?

``gpu`` — activities on a device (categories ``kernel``, ``gpu_memcpy``, ``gpu_memset``,
``gpu_user_annotation``, ``cuda_sync``):
    idx u32, kind str (``kernel`` | ``memcpy`` | ``memset`` | ``annotation`` | ``sync``), name str,
    pid str, tid str, ts i64, dur i64, end i64, device i64?, stream i64?, correlation i64?,
    external_id i64?, grid str? (raw JSON), block str? (raw JSON), registers i64?,
    shared_memory i64?, bytes i64?, graph_id i64?, graph_node_id i64? (CUPTI's ``graph id`` / ``graph
    node id`` of a replayed CUDA-graph activity, 0 or null when it was not replayed; the node id packs
    the exec graph's id in its upper 32 bits and the node's capture order in the lower 32),
    graph_annotation str? (the ``name`` PyTorch's CUDA-graph annotation script,
    ``torch.cuda._annotate_cuda_graph_trace``, writes into a replayed activity's args)

``overhead`` — profiler overhead spans (category ``overhead``, e.g. "Activity Buffer Request"):
    idx u32, name str, pid str, tid str, ts i64, dur i64, end i64

``flows`` — flow events (``ph`` ``s``/``f``; categories ``ac2g``, ``fwdbwd``; 2021's ``async``
normalised to ``ac2g``):
    idx u32, cat str, ph str, id i64?, pid str, tid str, ts i64

``memory`` — ``[memory]`` instant events and ``[OutOfMemory]`` ones (``oom`` true; ``bytes`` the
failed request, no ``addr``). ``addr`` is null on every row of traces from before PyTorch 1.9, whose
``[memory]`` events carry no address:
    idx u32, pid str, tid str, ts i64, addr i64?, bytes i64?, total_allocated i64?,
    total_reserved i64?, device_type i64?, device_id i64?, oom bool

``threads`` — metadata names: kind str (``process`` | ``thread``), pid str, tid str, name str

``comms`` — the collective metadata Kineto records, one row per event that carries a ``Collective
name`` (``record_param_comms`` ops since PyTorch ~2.1, NCCL/RCCL kernels too since ~2.4; libkineto's
``CollectiveMetadataFields``), sorted by ``idx``. Traces of older eras (the 2023 DLRM ranks, whose
``record_param_comms`` carry only ``Input Dims``) have no rows: the collective analysis then reads
the kind from the ``nccl:*`` annotation or the kernel's name and the size from the annotation's
``Input Dims``. ``event`` says which frame ``idx`` is in (``op``: ``ops``; ``kernel``: ``gpu``);
``pg_ranks``, ``in_split``, ``out_split`` are the recorded text (``"[0, 1]"``), a list written as
JSON text:
    idx u32, event str, collective str (``allreduce``, ``_allgather_base``, ``all_to_allv``,
    ``wait``, …), pg_name str? (``Process Group Name``), pg_desc str? (``Process Group
    Description``), pg_ranks str?, group_size i64? (``Group size``), seq i64? (``Seq``: the
    collective's number within its process group, the same on every rank), in_nelems i64?,
    out_nelems i64? (``In``/``Out msg nelems``: elements of the message on this rank), dtype str?
    (``Float``, ``BFloat16``, …), in_split str?, out_split str? (``In``/``Out split size``)

``steps`` — one row per ``ProfilerStep#N`` span, sorted by ``ts``:
    name str, number i64, ts i64, dur i64, end i64, pid str, tid str
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

OPS_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
    "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64, "external_id": pl.Int64,
    "record_function_id": pl.Int64, "sequence_number": pl.Int64, "input_dims": pl.String,
    "input_types": pl.String,
}
LAUNCHES_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
    "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64, "correlation": pl.Int64,
    "external_id": pl.Int64, "cbid": pl.Int64,
}
GPU_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "kind": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
    "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64, "device": pl.Int64, "stream": pl.Int64,
    "correlation": pl.Int64, "external_id": pl.Int64, "grid": pl.String, "block": pl.String,
    "registers": pl.Int64, "shared_memory": pl.Int64, "bytes": pl.Int64, "graph_id": pl.Int64,
    "graph_node_id": pl.Int64, "graph_annotation": pl.String,
}
OVERHEAD_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "name": pl.String, "pid": pl.String, "tid": pl.String,
    "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64,
}
FLOWS_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "cat": pl.String, "ph": pl.String, "id": pl.Int64, "pid": pl.String,
    "tid": pl.String, "ts": pl.Int64,
}
MEMORY_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "pid": pl.String, "tid": pl.String, "ts": pl.Int64, "addr": pl.Int64,
    "bytes": pl.Int64, "total_allocated": pl.Int64, "total_reserved": pl.Int64,
    "device_type": pl.Int64, "device_id": pl.Int64, "oom": pl.Boolean,
}
THREADS_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String, "pid": pl.String, "tid": pl.String, "name": pl.String,
}
COMMS_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "event": pl.String, "collective": pl.String, "pg_name": pl.String,
    "pg_desc": pl.String, "pg_ranks": pl.String, "group_size": pl.Int64, "seq": pl.Int64,
    "in_nelems": pl.Int64, "out_nelems": pl.Int64, "dtype": pl.String, "in_split": pl.String,
    "out_split": pl.String,
}
STEPS_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String, "number": pl.Int64, "ts": pl.Int64, "dur": pl.Int64, "end": pl.Int64,
    "pid": pl.String, "tid": pl.String,
}

#: The frames of a :class:`Trace` by name, with their schemas; all but ``steps`` come straight from
#: the trace's events (``steps`` is derived from ``ops``).
LOADED_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "ops": OPS_SCHEMA, "launches": LAUNCHES_SCHEMA, "gpu": GPU_SCHEMA, "overhead": OVERHEAD_SCHEMA,
    "flows": FLOWS_SCHEMA, "memory": MEMORY_SCHEMA, "threads": THREADS_SCHEMA, "comms": COMMS_SCHEMA,
}
FRAME_SCHEMAS: dict[str, dict[str, pl.DataType]] = {**LOADED_SCHEMAS, "steps": STEPS_SCHEMA}

#: ``gpu.kind`` values that are work on the device (annotations and ``sync`` rows are not).
GPU_WORK_KINDS = ("kernel", "memcpy", "memset")

#: Launch calls whose correlation id links to GPU activity (runtime, driver, ROCm).
KERNEL_LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cudaMemcpyAsync", "cudaMemcpy", "cudaMemcpy2DAsync",
    "cudaMemsetAsync", "cudaMemset", "cudaGraphLaunch", "cuGraphLaunch",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel",
    "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync", "hipGraphLaunch",
})


#: Device activity tracekit does not analyse, by category: (family named in the report, vendor).
#: From Kineto's ActivityType names (``libkineto/src/ActivityType.cpp``) and the vendor forks that
#: write Kineto traces (Cambricon MLU, Enflame GCU): the loader counts the events
#: (``TraceMeta.unanalysed_activity``) and the report names their family, never passing them over
#: in silence. XPU, MLU and GCU kernels arrive as ``kernel`` (analysed like any kernel); what is
#: listed here is their other activity.
UNANALYSED: dict[str, tuple[str, str]] = {
    "mtia_ccp_events": ("MTIA", "mtia"), "mtia_insight": ("MTIA", "mtia"),
    "mtia_counters": ("MTIA", "mtia"), "mtia_workloadd": ("MTIA", "mtia"),
    "hpu_op": ("HPU", "habana"),
    "xpu_scope_profiler": ("XPU", "intel"), "xpu_sync": ("XPU", "intel"),
    "mlu_user_annotation": ("MLU", "cambricon"), "mlu_memcpy": ("MLU", "cambricon"),
    "mlu_memset": ("MLU", "cambricon"), "mlu_notifier": ("MLU", "cambricon"),
    "mlu_profiler_range": ("MLU", "cambricon"),
    "GCU_USER_ANNOTATION": ("GCU", "enflame"), "GCU_MEMCPY": ("GCU", "enflame"),
    "GCU_MEMSET": ("GCU", "enflame"), "gcu_sync": ("GCU", "enflame"),
    "gcu_profiler_range": ("GCU", "enflame"),
    "cuda_profiler_range": ("CUDA profiler-range", "nvidia"), "cuda_event": ("CUDA event", "nvidia"),
}


#: Category of the events ``tracekit annotate`` adds to a trace (``tracekit`` and ``tracekit.<track>``):
#: the loader counts them (``TraceMeta.annotations``) and sets them aside, so that an annotated trace
#: reports what its original did.
ANNOTATION_CATEGORY = "tracekit"


def is_annotation(cat: str) -> bool:
    """Whether an event of category ``cat`` is one of tracekit's own annotations."""
    return cat == ANNOTATION_CATEGORY or cat.startswith(ANNOTATION_CATEGORY + ".")


def empty_frame(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """An empty frame with ``schema`` (used for traces without such events)."""
    return pl.DataFrame(schema=schema)


@dataclass(frozen=True)
class DeviceInfo:
    """One entry of the trace's ``deviceProperties`` (fields the reports show)."""

    id: int
    name: str
    compute_capability: str | None = None
    num_sms: int | None = None
    total_global_mem: int | None = None


@dataclass(frozen=True)
class TraceMeta:
    """Top-level facts of a trace file.

    ``versions`` maps the version keys found (``schemaVersion``, ``cuda_runtime_version``,
    ``cuda_driver_version``, ``cupti_version``, ``roctracer_version``, ``hip_*``...) to their text.
    ``vendor`` is decided from the kinds of device activity found (GPU rows through their launch
    calls' family, :data:`tracekit.load.frames.LAUNCH_VENDORS`; else activity tracekit does not
    analyse, :data:`tracekit.trace.UNANALYSED`): ``"nvidia"``, ``"amd"``, ``"intel"`` (XPU),
    ``"mtia"``, ``"habana"`` (HPU), ``"cambricon"`` (MLU), ``"enflame"`` (GCU), ``"privateuse1"``,
    or ``"cpu"`` when the trace has no device activity and no launch calls.

    What the load could not take as it is, so that a report never passes it over in silence:
    ``unanalysed_activity`` counts events by category of device activity tracekit does not analyse
    (MTIA ``mtia_ccp_events``, HPU ``hpu_op``, …); ``dropped_events`` counts events of the kinds
    tracekit reads (the frames above) left out, by reason (``unusable_time``: a ``ts``/``dur``
    missing, not a number, NaN/Infinity, negative or out of range; ``not_an_event``: an entry of
    ``traceEvents`` that is not an object with a ``ph``); ``partial`` is None for a whole trace,
    else why only the events before a cut were read (``--partial`` on a truncated or corrupt input);
    ``annotations`` counts the events ``tracekit annotate`` added (:data:`ANNOTATION_CATEGORY`), set
    aside unread.
    """

    path: str
    size_bytes: int
    base_time_ns: int | None
    devices: tuple[DeviceInfo, ...]
    versions: dict[str, str]
    distributed: dict[str, Any] | None
    vendor: str
    time_format: str  # "relative-ns3" | "absolute-us-int" | "absolute-us3" | "empty"
    event_count: int
    trace_name: str | None = None
    unanalysed_activity: dict[str, int] = field(default_factory=dict)
    dropped_events: dict[str, int] = field(default_factory=dict)
    partial: str | None = None
    annotations: int = 0


@dataclass(frozen=True)
class Trace:
    """A loaded trace: the frames documented in this module's docstring plus :class:`TraceMeta`."""

    meta: TraceMeta
    ops: pl.DataFrame
    launches: pl.DataFrame
    gpu: pl.DataFrame
    overhead: pl.DataFrame
    flows: pl.DataFrame
    memory: pl.DataFrame
    threads: pl.DataFrame
    steps: pl.DataFrame
    comms: pl.DataFrame = field(default_factory=lambda: empty_frame(COMMS_SCHEMA))

    @property
    def kernels(self) -> pl.DataFrame:
        """GPU rows that are kernels (not memcpy, memset, annotations or syncs)."""
        return self.gpu.filter(pl.col("kind") == "kernel")
