"""Memory round trips: tensors one kernel writes to HBM and a later kernel of the same step reads back.

Contract: :func:`analyze` takes the trace, its :class:`~tracekit.analyses.attribution.Attribution` and
optionally an :class:`~tracekit.execution_trace.ExecutionTrace`, and returns a frozen
:class:`RoundTripReport`:

``traffic`` — one row per kernel, memcpy and memset (``attributed.gpu`` order):
    idx u32, step i64?, kind str, name str, kernel_class str, op str? (the cpu_op whose model was
    used; ``"cudaGraphLaunch"`` for graph replays), model str (``mm``, ``elementwise_binary``,
    ``inductor_pointwise``… ``memset``/``memcpy`` from the activity's own ``bytes``, or
    ``"unknown"``), dtype str?, bytes_read i64?, bytes_written i64?, flops i64?, dur_ns i64

``tensors`` — one row per read-back (a tensor read by two later kernels is two rows):
    step i64?, producer str, producer_op str, consumer str, consumer_op str, shape str
    ("[8192, 3072]", as written by the producer), dtype str ("bf16"), bytes i64

``bytes_per_step`` — every ProfilerStep (and a null step when kernels fall outside all steps):
    step i64?, round_trip_bytes i64, tensor_count u32, unknown_kernels u32 (kernels of the step
    with no model: a step with unknown kernels may hide round trips)

``unknown_ops`` — op str, count u32: kernels without a model, by op, most first.

``method`` — ``"execution_trace"`` or ``"shape_inference"``; ``notes`` say why a fallback happened.

How a kernel's traffic is modelled: its innermost cpu_op (``attribution``) is modelled by
:mod:`tracekit.analyses.traffic` from the op's arguments — the execution-trace node's when one joins
by ``rf_id`` (exact dtypes, TensorLists), else the Kineto ``Input Dims``/``Input type``. When an op
launches several kernels, the first reads its inputs and the last writes its outputs; kernels between
have no model. A cuBLAS workspace memset beside a GEMM is its own ``memset`` row.

Linking, per step, in GPU start order (reads of an op before its writes):

* ``execution_trace``: every write marks a byte range of a storage id as holding the producer's
  value (later writes overwrite ranges, which is how the caching allocator's reuse of storage ids
  is honoured); a read of a range links to each producer still holding part of it, for the bytes
  that overlap. A new output is found in the node's ``outputs``, or — for autograd Functions such as
  ``LigerGELUMulFunction`` whose node records none — as the last storage of that size allocated in
  its subtree that is not one of its inputs.
* ``shape_inference`` (no execution trace, or one that joins no op of this trace): every write is a
  value of some numel and dtype; a read takes, among earlier values of the step with equal numel and
  dtype, one not yet read (else one already read), the same shape first, the most recent first, and
  never the same value twice for one consumer. Counts agree with the exact method on the sample
  MLPs; a pairing may differ (which of two equal-shaped GEMM outputs fed which input), and a tensor
  that only matches a written shape by coincidence would be linked: the report says which method ran.

Inductor's written argument (``in_out_ptr0`` first vs ``out_ptr0`` last) is decided by whether the
last argument holds a live value of the step (exact: its storage range; inferred: a matching value).

CUDA-graph replays: the kernels replayed by ``cudaGraphLaunch`` carry the launch's correlation only;
neither Kineto nor the execution trace records the graph's ops, shapes or tensors (the ET shows the
compiled region and its input copy, not the replay). They are listed with ``op = "cudaGraphLaunch"``
and model ``unknown`` (memsets keep their bytes); neither method can link through them, so such steps
report ``unknown_kernels`` > 0 rather than a silent zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import traffic as traffic_models
from tracekit.analyses.attribution import Attribution
from tracekit.analyses.traffic import Access, OpTraffic, TensorSpec
from tracekit.execution_trace import EtNode, EtTensor, ExecutionTrace
from tracekit.trace import Trace

GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
WORK_KINDS = ("kernel", "memcpy", "memset")

TRAFFIC_SCHEMA = {
    "idx": pl.UInt32, "step": pl.Int64, "kind": pl.String, "name": pl.String,
    "kernel_class": pl.String, "op": pl.String, "model": pl.String, "dtype": pl.String,
    "bytes_read": pl.Int64, "bytes_written": pl.Int64, "flops": pl.Int64, "dur_ns": pl.Int64,
}
TENSORS_SCHEMA = {
    "step": pl.Int64, "producer": pl.String, "producer_op": pl.String, "consumer": pl.String,
    "consumer_op": pl.String, "shape": pl.String, "dtype": pl.String, "bytes": pl.Int64,
}
PER_STEP_SCHEMA = {"step": pl.Int64, "round_trip_bytes": pl.Int64, "tensor_count": pl.UInt32,
                   "unknown_kernels": pl.UInt32}
UNKNOWN_SCHEMA = {"op": pl.String, "count": pl.UInt32}


@dataclass(frozen=True)
class RoundTripReport:
    """Per-kernel traffic and the round-trip tensors of each step (see module docstring)."""

    traffic: pl.DataFrame
    tensors: pl.DataFrame
    bytes_per_step: pl.DataFrame
    method: str
    unknown_ops: pl.DataFrame
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass
class _OpCall:
    """One op instance that launched GPU work: its rows, model, and (when joined) ET node."""

    op_name: str
    rows: list[dict]
    primary: list[dict]
    traffic: OpTraffic | None
    node: EtNode | None
    start: tuple[int, int]


def analyze(trace: Trace, attributed: Attribution, *,
            execution_trace: ExecutionTrace | None = None) -> RoundTripReport:
    """Model every kernel's traffic and link the step's round trips; pure, no I/O."""
    gpu = attributed.gpu.filter(pl.col("kind").is_in(WORK_KINDS)).sort(["ts", "idx"])
    ops = attributed.tree.ops.select("idx", "name", "record_function_id", "input_dims", "input_types")
    op_rows = {r["idx"]: r for r in ops.iter_rows(named=True)}
    notes: list[str] = []
    method = "shape_inference"
    if execution_trace is not None:
        joined = sum(1 for r in op_rows.values()
                     if r["record_function_id"] is not None
                     and r["record_function_id"] in execution_trace.by_rf_id
                     and execution_trace.by_rf_id[r["record_function_id"]].name == r["name"])
        if joined:
            method = "execution_trace"
        else:
            notes.append(f"execution trace {execution_trace.path} joins no op of this trace by "
                         "rf_id; links inferred from shapes")
    et = execution_trace if method == "execution_trace" else None

    calls, singles = _group_calls(gpu, op_rows, et)
    traffic_rows: dict[int, dict] = {}
    for row in singles:
        traffic_rows[row["idx"]] = _activity_row(row)
    links: list[dict] = []
    by_step: dict[int | None, list[_OpCall]] = {}
    for call in calls:
        by_step.setdefault(call.primary[0]["step"], []).append(call)
    for step in sorted(by_step, key=lambda s: (s is None, s or 0)):
        step_calls = by_step[step]
        step_calls.sort(key=lambda c: c.start)
        linker = _ExactLinker(et) if et is not None else _ShapeLinker()
        for call in step_calls:
            if call.traffic is not None and call.traffic.inductor_out:
                last = call.traffic.reads[-1]
                call.traffic = traffic_models.resolve_inductor(call.traffic, linker.is_live(call, last))
            producer_name = call.primary[-1]["name"]
            if call.traffic is not None:
                consumer = call.primary[0]["name"]
                for access in call.traffic.reads:
                    for prod, tensor, nbytes in linker.read(call, access):
                        links.append({
                            "step": step, "producer": prod[0], "producer_op": prod[1],
                            "consumer": consumer, "consumer_op": call.op_name,
                            "shape": _shape_text(tensor.shape), "dtype": tensor.short_dtype,
                            "bytes": nbytes,
                        })
                for access in call.traffic.writes:
                    linker.write(call, access, (producer_name, call.op_name))
        for call in step_calls:
            traffic_rows.update(_call_rows(call))

    traffic_frame = pl.DataFrame(
        [traffic_rows[r["idx"]] for r in gpu.iter_rows(named=True)], schema=TRAFFIC_SCHEMA)
    tensors = pl.DataFrame(links, schema=TENSORS_SCHEMA)
    return RoundTripReport(
        traffic=traffic_frame, tensors=tensors,
        bytes_per_step=_per_step(trace, traffic_frame, tensors), method=method,
        unknown_ops=_unknown_ops(traffic_frame), notes=tuple(notes),
    )


# ---- grouping kernels into op calls -----------------------------------------------------------

def _group_calls(gpu: pl.DataFrame, op_rows: dict, et: ExecutionTrace | None):
    """Op calls with their primary activities, and activities modelled on their own."""
    groups: dict[tuple, list[dict]] = {}
    singles: list[dict] = []
    for row in gpu.iter_rows(named=True):
        graph = row["launch_api"] in GRAPH_LAUNCH_APIS
        if graph or row["op_idx"] is None:
            singles.append(row)
            continue
        groups.setdefault((row["op_idx"], row["step"]), []).append(row)
    calls = []
    for (op_idx, _), rows in groups.items():
        kernels = [r for r in rows if r["kind"] == "kernel"]
        copies = [r for r in rows if r["kind"] == "memcpy"]
        primary = kernels or copies or rows
        singles.extend(r for r in rows if not any(r is p for p in primary))
        op = op_rows.get(op_idx) or {}
        name = op.get("name") or rows[0]["cpu_op"] or "?"
        node = None
        if et is not None and op.get("record_function_id") is not None:
            candidate = et.by_rf_id.get(op["record_function_id"])
            node = candidate if candidate is not None and candidate.name == name else None
        args = (traffic_models.args_from_et(node) if node is not None
                else traffic_models.args_from_kineto(op.get("input_dims"), op.get("input_types")))
        model = traffic_models.model(name, args)
        if model is not None and not model.inductor_out and (
                model.bytes_read is None or model.bytes_written is None):
            model = None  # e.g. a TensorList whose dtype Kineto does not record: unknown, not 0
        calls.append(_OpCall(name, rows, primary, model, node,
                             (primary[0]["ts"], primary[0]["idx"])))
    return calls, singles


def _base_row(row: dict) -> dict:
    return {"idx": row["idx"], "step": row["step"], "kind": row["kind"], "name": row["name"],
            "kernel_class": row["kernel_class"], "dur_ns": row["dur"]}


def _activity_row(row: dict) -> dict:
    """A memset/memcpy by its own ``bytes``, or a kernel that no op model covers."""
    out = _base_row(row)
    graph = row["launch_api"] in GRAPH_LAUNCH_APIS
    out["op"] = "cudaGraphLaunch" if graph else row["cpu_op"]
    if row["kind"] in ("memset", "memcpy") and row["bytes"] is not None:
        name = row["name"]
        read = row["bytes"] if row["kind"] == "memcpy" and ("DtoD" in name or "DtoH" in name) else 0
        written = row["bytes"] if row["kind"] == "memset" or "DtoH" not in name else 0
        out.update(model=row["kind"], dtype=None, bytes_read=read, bytes_written=written, flops=0)
    else:
        out.update(model="unknown", dtype=None, bytes_read=None, bytes_written=None, flops=None)
    return out


def _call_rows(call: _OpCall) -> dict[int, dict]:
    out = {}
    t = call.traffic
    first, last = call.primary[0]["idx"], call.primary[-1]["idx"]
    for row in call.primary:
        r = _base_row(row)
        r["op"] = call.op_name
        if t is None or (row["idx"] not in (first, last)):
            r.update(model="unknown", dtype=None, bytes_read=None, bytes_written=None, flops=None)
        else:
            single = first == last
            r.update(
                model=t.model if single else f"{t.model}/split", dtype=t.dtype,
                bytes_read=t.bytes_read if row["idx"] == first else 0,
                bytes_written=t.bytes_written if row["idx"] == last else 0,
                flops=t.flops if row["idx"] == first else 0,
            )
        out[row["idx"]] = r
    return out


# ---- linkers ------------------------------------------------------------------------------------

class _ExactLinker:
    """Follows storage byte ranges through the execution trace's tensor values."""

    def __init__(self, et: ExecutionTrace) -> None:
        self.et = et
        # storage id -> list of [start, end, producer, tensor spec]
        self.live: dict[int, list[list]] = {}

    def _tensor(self, call: _OpCall, access: Access) -> EtTensor | None:
        node = call.node
        if node is None:
            return None
        if access.arg is not None:
            value = node.inputs[access.arg] if access.arg < len(node.inputs) else None
            if isinstance(value, tuple):
                return value[access.item] if access.item is not None and access.item < len(value) else None
            return value
        value = node.outputs[access.output] if access.output < len(node.outputs) else None
        if isinstance(value, EtTensor):
            return value
        return self._allocated_in_subtree(node, access.tensor)

    def _allocated_in_subtree(self, node: EtNode, spec: TensorSpec) -> EtTensor | None:
        inputs = {t.storage_id for v in node.inputs for t in _flat(v)}
        found = None
        for child in self.et.descendants(node.id):
            for value in child.outputs:
                for t in _flat(value):
                    if t.storage_id not in inputs and t.numel == spec.numel:
                        found = t
        return found

    def is_live(self, call: _OpCall, access: Access) -> bool:
        tensor = self._tensor(call, access)
        if tensor is None:
            return False
        start, end = tensor.byte_range
        return any(s < end and start < e for s, e, _, _ in self.live.get(tensor.storage_id, ()))

    def read(self, call: _OpCall, access: Access):
        tensor = self._tensor(call, access)
        if tensor is None:
            return []
        start, end = tensor.byte_range
        return [(prod, spec, min(e, end) - max(s, start))
                for s, e, prod, spec in self.live.get(tensor.storage_id, ()) if s < end and start < e]

    def write(self, call: _OpCall, access: Access, producer: tuple[str, str]) -> None:
        tensor = self._tensor(call, access)
        if tensor is None:
            return
        start, end = tensor.byte_range
        kept = []
        for s, e, prod, spec in self.live.get(tensor.storage_id, ()):
            if e <= start or s >= end:
                kept.append([s, e, prod, spec])
                continue
            if s < start:
                kept.append([s, start, prod, spec])
            if e > end:
                kept.append([end, e, prod, spec])
        kept.append([start, end, producer, _spec_of(access.tensor, tensor)])
        self.live[tensor.storage_id] = kept


class _ShapeLinker:
    """Matches reads to earlier writes of equal numel and dtype (see module docstring)."""

    def __init__(self) -> None:
        self.values: list[dict] = []
        self.used: dict[int, set[int]] = {}  # id(call) -> values it already read

    def _candidates(self, spec: TensorSpec, exclude: set[int]) -> list[dict]:
        found = [v for v in self.values
                 if v["numel"] == spec.numel and v["dtype"] == spec.dtype and id(v) not in exclude]
        return sorted(found, key=lambda v: (v["read"], v["shape"] != spec.shape, -v["seq"]))

    def is_live(self, call: _OpCall, access: Access) -> bool:
        return bool(self._candidates(access.tensor, set()))

    def read(self, call: _OpCall, access: Access):
        used = self.used.setdefault(id(call), set())
        spec = access.tensor
        if not spec.dtype or spec.nbytes is None:
            return []
        candidates = self._candidates(spec, used)
        if not candidates:
            return []
        value = candidates[0]
        value["read"] = True
        used.add(id(value))
        return [(value["producer"], value["spec"], spec.nbytes)]

    def write(self, call: _OpCall, access: Access, producer: tuple[str, str]) -> None:
        spec = access.tensor
        self.values.append({"numel": spec.numel, "dtype": spec.dtype, "shape": spec.shape,
                            "spec": spec, "producer": producer, "read": False,
                            "seq": len(self.values)})


def _flat(value) -> list[EtTensor]:
    if value is None:
        return []
    return list(value) if isinstance(value, tuple) else [value]


def _spec_of(spec: TensorSpec, tensor: EtTensor) -> TensorSpec:
    return spec if spec.dtype else TensorSpec(spec.shape, tensor.dtype)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---- summaries ----------------------------------------------------------------------------------

def _per_step(trace: Trace, traffic: pl.DataFrame, tensors: pl.DataFrame) -> pl.DataFrame:
    steps = pl.DataFrame({"step": trace.steps["number"]}, schema={"step": pl.Int64})
    seen = traffic.select("step").unique()
    if seen.filter(pl.col("step").is_null()).height:
        steps = pl.concat([steps, pl.DataFrame({"step": [None]}, schema={"step": pl.Int64})])
    trips = tensors.group_by("step").agg(
        round_trip_bytes=pl.col("bytes").sum(), tensor_count=pl.len().cast(pl.UInt32))
    unknown = traffic.filter((pl.col("kind") == "kernel") & (pl.col("model") == "unknown")).group_by(
        "step").agg(unknown_kernels=pl.len().cast(pl.UInt32))
    out = steps.join(trips, on="step", how="left", nulls_equal=True).join(
        unknown, on="step", how="left", nulls_equal=True)
    return out.with_columns(
        pl.col("round_trip_bytes").fill_null(0), pl.col("tensor_count").fill_null(0),
        pl.col("unknown_kernels").fill_null(0),
    ).select(list(PER_STEP_SCHEMA)).cast(PER_STEP_SCHEMA).sort("step", nulls_last=True)


def _unknown_ops(traffic: pl.DataFrame) -> pl.DataFrame:
    unknown = traffic.filter((pl.col("kind") == "kernel") & (pl.col("model") == "unknown"))
    return unknown.with_columns(op=pl.col("op").fill_null("(no op)")).group_by("op").agg(
        count=pl.len().cast(pl.UInt32)).sort(["count", "op"], descending=[True, False]).cast(
        UNKNOWN_SCHEMA)
