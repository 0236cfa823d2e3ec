"""One rank's collective calls: kind, process group, size, time and bandwidth, and where the rank was.

Contract: :func:`analyze` takes the trace, its attributed GPU work (attribution's ``gpu``) and its
op tree's ops, and returns a :class:`Collectives` of two frames.

``calls`` (:data:`CALLS_SCHEMA`), one row per collective call, sorted by ``ts`` then ``call``. A
call on a GPU backend (NCCL, RCCL) is the communication kernels (``kernel_class ==
"communication"``) one call launched: those whose launch sits under the same ``record_param_comms``
op, else the same ``nccl:*`` annotation, else the kernel alone. A call on a host backend
(:data:`HOST_WORK`: gloo) has no kernel: it is the backend's own span of the work (``gloo:all_reduce``
on one of its worker threads, from the moment a worker takes the work to its completion), and its
launch is the ``c10d::`` op that enqueued it on the calling thread (:func:`_host_calls` pairs them):

* ``call u32`` — the first kernel's event index (a host call: its work span's op index); ``kernels
  u32`` (0 for a host call); ``step i64?`` (attribution's: the unit holding the launch); ``stream
  i64?``;
* ``launch_ts i64?`` — the first launch call (a host call: the enqueuing op's start); ``ts``/``end``
  — first kernel start, last kernel end (a host call: its work span's); ``dur i64 = end − ts``;
* ``kind str`` — :data:`KINDS` of the first name that says (a host call: its work span's name): the
  recorded ``Collective name``
  (``Trace.comms``: on the kernel, else on the ``record_param_comms`` op under which it was
  launched), else the ``nccl:*`` annotation (``nccl:all_to_all``), else the kernel's own name
  (``ncclDevKernel_AllGather_…``: DLRM's all_to_all runs as ``ncclKernel_SendRecv``, so the kernel
  name comes last); ``collective str?`` the name it was read from;
* ``pg str?`` (``Process Group Name``), ``group_size i64?`` (recorded, else the trace's
  ``distributedInfo.world_size``), ``seq i64?`` (``Seq``: the call's number in its group, the same on
  every rank; null before PyTorch ~2.5), ``dtype str?``;
* ``bytes i64?`` — the message: ``max(In msg nelems, Out msg nelems) × dtype size`` from the
  metadata, which is the nccl-tests size S for every kind (all_gather's gathered output,
  reduce_scatter's whole input, all_reduce's and all_to_all's buffer); without metadata the first
  tensor of the ``nccl:*`` annotation's (a host call: its work span's) ``Input Dims`` (its ``Input
  type`` gives the size), times the group size for all_gather (the span holds the local shard);
  ``bytes_from str?``
  (``metadata`` | ``input dims``);
* ``algbw_gbps f64?`` — ``bytes / dur`` in GB/s (1e9); ``busbw_gbps f64?`` — ``algbw`` times the
  nccl-tests factor of :data:`BUS_FACTORS` for the group size. A call's ``dur`` includes the time
  the rank waited in it for its peers, so a rank that arrived early shows a low bandwidth: the
  cross-rank analysis (:mod:`tracekit.analyses.skew`) takes the bandwidth over the last arriver's
  kernel, which waited for no one;
* ``phase str`` — the phase the call was launched in (:func:`phase_expr`).

``phases`` (:data:`PHASE_SPANS_SCHEMA`): the rank's host time by phase, ``phase str, ts i64, end
i64`` merged per phase, so the cross-rank analysis can say in which phase a late rank spent its
extra time. The host time is what the spans of every thread of the process cover — its ``cpu_op``
spans and its ``user_annotation`` spans, but for the ``ProfilerStep#N`` spans (the steps themselves)
and a host backend's work spans (the collectives themselves, not the host's work) — each instant
given the first phase that holds there.

Phases (:data:`PHASES`, first match): ``data`` inside a data-loading span
(:func:`tracekit.analyses.decomposition.data_span`), ``optimizer`` inside ``Optimizer.step#`` or
``Optimizer.zero_grad#``, ``backward`` under ``autograd::engine::evaluate_function`` (the autograd
engine's spans), else ``forward``: host time no other phase claims, such as a ``record_function``
region around the model's call (``DistributedDataParallel.forward``) where Python ran between ops —
a module's forward hook, say — which no op span covers.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.decomposition import data_span
from tracekit.analyses.op_tree import STEP_PREFIX
from tracekit.analyses.steps import tag_steps
from tracekit.shapes import parse_types, tensor_dims
from tracekit.trace import Trace

COMMUNICATION = "communication"

#: Collective kinds by the normalised name's start (lower case, no ``_``, ``nccl:``, ``gloo:`` and
#: ``c10d::`` stripped), first match; anything else is ``other``. ``reducescatter`` before ``reduce``.
KINDS: tuple[tuple[str, str], ...] = (
    ("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"),
    ("sendrecv", "send_recv"), ("send", "send_recv"), ("recv", "send_recv"), ("barrier", "barrier"),
)
#: Host backends (collectives run by the CPU, no kernel): the name prefix of the span a backend
#: records for one collective's work, and why that span is the collective.
HOST_WORK: dict[str, str] = {
    "gloo:": "ProcessGroupGloo runs each collective on one of its worker threads and records it there as "
             "a gloo:<kind> span (gloo:all_reduce, gloo:all_gather, gloo:broadcast) from the moment a worker "
             "takes the work from its queue to the collective's completion; PyTorch 2.13 records no "
             "record_param_comms op (so no Seq, no process group name) for it",
}
#: The ops that enqueue a host backend's collective on the calling thread (``c10d::allreduce_``,
#: ``c10d::allgather_``, ``c10d::broadcast_``): a host call's launch.
ENQUEUE_PREFIX = "c10d::"
#: nccl-tests' bus-bandwidth factor per kind for ``n`` ranks (``PERFORMANCE.md`` of nccl-tests): the
#: share of the message each rank's link carries, so bus bandwidth compares with the link's peak
#: whatever the kind and the group size.
BUS_FACTORS: dict[str, str] = {
    "all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n",
    "all_to_all": "(n-1)/n", "broadcast": "1", "reduce": "1", "send_recv": "1",
}
#: Bytes per element by the names Kineto writes: ``dtype`` of the metadata (c10 ScalarType names)
#: and ``Input type`` of an op (C++ type names).
DTYPE_BYTES: dict[str, int] = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1,
    "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1, "ComplexFloat": 8, "ComplexDouble": 16, "UInt16": 2, "UInt32": 4, "UInt64": 8,
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
}
#: An event's phase: (phase, why), in the order they are tested; else ``forward``.
PHASES: tuple[tuple[str, str], ...] = (
    ("data", "inside a data-loading span (the DataLoader iterator, a data annotation)"),
    ("optimizer", "inside torch.optim's Optimizer.step# / Optimizer.zero_grad# record_function"),
    ("backward", "under autograd::engine::evaluate_function, the autograd engine's span per backward node"),
)
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")

CALLS_SCHEMA: dict[str, pl.DataType] = {
    "call": pl.UInt32, "kernels": pl.UInt32, "step": pl.Int64, "stream": pl.Int64, "launch_ts": pl.Int64,
    "ts": pl.Int64, "end": pl.Int64, "dur": pl.Int64, "kind": pl.String, "collective": pl.String,
    "pg": pl.String, "group_size": pl.Int64, "seq": pl.Int64, "dtype": pl.String, "bytes": pl.Int64,
    "bytes_from": pl.String, "algbw_gbps": pl.Float64, "busbw_gbps": pl.Float64, "phase": pl.String,
}
PHASE_SPANS_SCHEMA: dict[str, pl.DataType] = {"phase": pl.String, "ts": pl.Int64, "end": pl.Int64}


@dataclass(frozen=True)
class Collectives:
    """One rank's collective calls and its host time by phase (module docstring)."""

    calls: pl.DataFrame
    phases: pl.DataFrame


def kind_expr(name: pl.Expr) -> pl.Expr:
    """:data:`KINDS` of a collective's name (``allreduce``, ``nccl:all_to_all``, ``_allgather_base``,
    ``AllReduce``); null for a null name, ``other`` when no kind matches."""
    norm = (name.str.to_lowercase().str.strip_prefix("nccl:").str.strip_prefix("gloo:")
            .str.strip_prefix("c10d::").str.replace_all("_", ""))
    rule = pl.when(name.is_null()).then(pl.lit(None, pl.String))
    for prefix, kind in KINDS:
        rule = rule.when(norm.str.starts_with(prefix)).then(pl.lit(kind))
    return rule.otherwise(pl.lit("other"))


def bus_factor(kind: pl.Expr, n: pl.Expr) -> pl.Expr:
    """:data:`BUS_FACTORS` of ``kind`` for ``n`` ranks (null for an unknown kind or size)."""
    n = n.cast(pl.Float64)
    return (pl.when(n.is_null() | (n < 1)).then(pl.lit(None, pl.Float64))
            .when(kind == "all_reduce").then(2 * (n - 1) / n)
            .when(kind.is_in(["all_gather", "reduce_scatter", "all_to_all"])).then((n - 1) / n)
            .when(kind.is_in(["broadcast", "reduce", "send_recv"])).then(pl.lit(1.0)))


def phase_expr(top_op: pl.Expr, in_optimizer: pl.Expr, in_data: pl.Expr) -> pl.Expr:
    """:data:`PHASES` from an event's top op and whether it is inside an optimizer or a data span."""
    return (pl.when(in_data).then(pl.lit("data"))
            .when(in_optimizer).then(pl.lit("optimizer"))
            .when(top_op.str.starts_with(BACKWARD_PREFIX).fill_null(False)).then(pl.lit("backward"))
            .otherwise(pl.lit("forward")))


def analyze(trace: Trace, gpu: pl.DataFrame, tree_ops: pl.DataFrame) -> Collectives:
    """The collective calls of one rank and its host time by phase (module docstring)."""
    marks = _marks(trace)
    calls = pl.concat([_calls(trace, gpu, marks), _host_calls(trace, tree_ops, marks)]).sort("ts", "call")
    return Collectives(calls=calls, phases=_phase_spans(tree_ops, marks))


def _marks(trace: Trace) -> pl.DataFrame:
    """The spans that set a phase by containment: ``pid str, ts, end, mark str`` (data | optimizer)."""
    ops = trace.ops
    name = pl.col("name")
    optimizer = pl.any_horizontal(*(name.str.starts_with(p) for p in OPTIMIZER_PREFIXES))
    return (ops.filter(data_span() | optimizer)
            .select("pid", "ts", "end", mark=pl.when(data_span()).then(pl.lit("data")).otherwise(pl.lit("optimizer"))))


def _inside(frame: pl.DataFrame, marks: pl.DataFrame, time: str, mark: str) -> pl.Series:
    """Whether each row's ``time`` (on its ``pid``) is inside a ``mark`` span: the last such span
    starting at or before it, found by an as-of join (data and optimizer spans do not nest)."""
    spans = marks.filter(pl.col("mark") == mark).select("pid", _m_ts="ts", _m_end="end").sort("_m_ts")
    if spans.height == 0 or frame.height == 0:
        return pl.Series([False] * frame.height, dtype=pl.Boolean)
    keyed = frame.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"), pl.col("pid"),
                         pl.col(time).alias("_t")).filter(pl.col("_t").is_not_null()).sort("_t")
    hits = (keyed.join_asof(spans, left_on="_t", right_on="_m_ts", by="pid", check_sortedness=False)
            .filter(pl.col("_t") < pl.col("_m_end"))["_row"])
    return pl.int_range(frame.height, dtype=pl.Int64, eager=True).is_in(hits.implode())


def _calls(trace: Trace, gpu: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    kernels = gpu.filter((pl.col("kind") == "kernel") & (pl.col("kernel_class") == COMMUNICATION))
    if kernels.height == 0:
        return pl.DataFrame(schema=CALLS_SCHEMA)
    comms = trace.comms.filter(pl.col("collective") != "wait")
    meta_cols = ["collective", "pg_name", "group_size", "seq", "in_nelems", "out_nelems", "dtype"]
    on_kernel = comms.filter(pl.col("event") == "kernel").select(pl.col("idx"), *(pl.col(c).alias(f"k_{c}") for c in meta_cols))
    on_op = comms.filter(pl.col("event") == "op").select(pl.col("idx").alias("op_idx"),
                                                         *(pl.col(c).alias(f"o_{c}") for c in meta_cols))
    kernels = kernels.join(trace.launches.select(launch_idx="idx", launch_pid="pid"), on="launch_idx", how="left")
    rows = (kernels.select("idx", "ts", "end", "step", "stream", "launch_ts", "launch_pid", "launch_tid",
                           "op_idx", "top_op", "name", pl.col("decoded").str.json_path_match("$.collective").alias("decoded_kind"))
            .join(on_kernel, on="idx", how="left").join(on_op, on="op_idx", how="left"))
    rows = rows.join(_annotations(trace, rows), on="idx", how="left")
    meta = {c: pl.coalesce(f"k_{c}", f"o_{c}") for c in meta_cols}
    world = _world_size(trace)
    rows = rows.with_columns(
        collective=pl.coalesce(meta["collective"], pl.col("ann_name"), pl.col("decoded_kind")),
        pg=meta["pg_name"], seq=meta["seq"], dtype=meta["dtype"],
        group_size=pl.coalesce(meta["group_size"], pl.lit(world, pl.Int64)),
        meta_bytes=pl.max_horizontal(meta["in_nelems"], meta["out_nelems"])
        * meta["dtype"].replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64),
        # A call: the kernels launched under one record_param_comms op, else one annotation.
        _call_key=pl.when(pl.col("o_collective").is_not_null() | pl.col("op_idx").is_not_null())
        .then(pl.col("op_idx").cast(pl.Int64)).otherwise(pl.col("ann_idx").cast(pl.Int64)),
    ).with_columns(kind=kind_expr(pl.col("collective")))
    rows = rows.with_columns(_call_key=pl.coalesce("_call_key", -pl.col("idx").cast(pl.Int64) - 1))
    rows = rows.with_columns(
        ann_bytes=pl.col("ann_numel") * pl.col("ann_type").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
        * pl.when(pl.col("kind") == "all_gather").then(pl.col("group_size")).otherwise(1),
        in_optimizer=_inside(rows.rename({"launch_pid": "pid"}).with_columns(pl.col("launch_ts").fill_null(pl.col("ts"))),
                             marks, "launch_ts", "optimizer"),
        in_data=_inside(rows.rename({"launch_pid": "pid"}).with_columns(pl.col("launch_ts").fill_null(pl.col("ts"))),
                        marks, "launch_ts", "data"))
    calls = (rows.sort("ts", "idx").group_by("_call_key", maintain_order=True).agg(
        call=pl.col("idx").first(), kernels=pl.len(), step=pl.col("step").first(), stream=pl.col("stream").first(),
        launch_ts=pl.col("launch_ts").min(), ts=pl.col("ts").min(), end=pl.col("end").max(),
        kind=pl.col("kind").first(), collective=pl.col("collective").first(), pg=pl.col("pg").first(),
        group_size=pl.col("group_size").first(), seq=pl.col("seq").first(), dtype=pl.col("dtype").first(),
        meta_bytes=pl.col("meta_bytes").first(), ann_bytes=pl.col("ann_bytes").first(),
        phase=phase_expr(pl.col("top_op"), pl.col("in_optimizer"), pl.col("in_data")).first()))
    calls = calls.with_columns(
        dur=pl.col("end") - pl.col("ts"),
        bytes=pl.coalesce("meta_bytes", "ann_bytes"),
        bytes_from=pl.when(pl.col("meta_bytes").is_not_null()).then(pl.lit("metadata"))
        .when(pl.col("ann_bytes").is_not_null()).then(pl.lit("input dims")))
    calls = calls.with_columns(algbw_gbps=pl.when(pl.col("dur") > 0).then(pl.col("bytes") / pl.col("dur")))
    calls = calls.with_columns(busbw_gbps=pl.col("algbw_gbps") * bus_factor(pl.col("kind"), pl.col("group_size")))
    return calls.select(list(CALLS_SCHEMA)).cast(CALLS_SCHEMA).sort("ts", "call")  # type: ignore[arg-type]


def _world_size(trace: Trace) -> int | None:
    size = (trace.meta.distributed or {}).get("world_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and 0 < size < 2**31 else None


def _annotations(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """Per kernel of ``rows`` (``idx``, ``launch_pid``, ``launch_tid``, ``launch_ts``), the
    innermost ``nccl:*`` annotation around its launch on the launching thread: ``idx, ann_idx u32?,
    ann_name str?, ann_numel i64?, ann_type str?`` (the first tensor of its ``Input Dims``)."""
    spans = trace.ops.filter(pl.col("name").str.starts_with("nccl:")).select(
        pl.col("idx").alias("ann_idx"), pl.col("name").alias("ann_name"), pl.col("pid").alias("launch_pid"),
        pl.col("tid").alias("launch_tid"), pl.col("ts").alias("_ann_ts"), pl.col("end").alias("_ann_end"),
        pl.col("input_dims"), pl.col("input_types"))
    out = {"idx": pl.UInt32, "ann_idx": pl.UInt32, "ann_name": pl.String, "ann_numel": pl.Int64, "ann_type": pl.String}
    launched = rows.filter(pl.col("launch_ts").is_not_null()).select("idx", "launch_pid", "launch_tid", "launch_ts")
    if spans.height == 0 or launched.height == 0:
        return pl.DataFrame(schema=out)
    found = (launched.sort("launch_ts")
             .join_asof(spans.sort("_ann_ts"), left_on="launch_ts", right_on="_ann_ts",
                        by=["launch_pid", "launch_tid"], check_sortedness=False)
             .filter(pl.col("_ann_end") >= pl.col("launch_ts")))
    # Few rows (one per collective call): the shapes module's parsers, which take any nesting.
    dims = [next(iter(tensor_dims(raw)), None) for raw in found["input_dims"]]
    types = [next(iter(parse_types(raw)), None) for raw in found["input_types"]]
    numel = [math.prod(d) if d else None for d in dims]
    return found.select("idx", "ann_idx", "ann_name").with_columns(
        ann_numel=pl.Series(numel, dtype=pl.Int64), ann_type=pl.Series(types, dtype=pl.String)).cast(out)  # type: ignore[arg-type]


def _phase_spans(tree_ops: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """The process's host time by phase (module docstring): the spans of every thread — ``cpu_op``
    and ``user_annotation`` but the steps and a host backend's work — each with its phase (its top
    op's, and the data or optimizer span holding its start), merged per phase; data and optimizer
    spans themselves count as their phase. ``forward`` keeps only what no other phase covers: a
    ``record_function`` region around a whole step, or around the model's call, holds the other
    phases' time too."""
    if tree_ops.height == 0:
        return pl.DataFrame(schema=PHASE_SPANS_SCHEMA)
    host = (pl.col("cat") == "cpu_op") | ((pl.col("cat") == "user_annotation")
                                          & ~pl.col("name").str.starts_with(STEP_PREFIX) & ~_host_work())
    ops = tree_ops.filter(host).select("pid", "ts", "end", "top_op")
    ops = ops.with_columns(phase=phase_expr(pl.col("top_op"), _inside(ops, marks, "ts", "optimizer"),
                                            _inside(ops, marks, "ts", "data")))
    spans = pl.concat([ops.select("phase", "ts", "end"), marks.select(phase="mark", ts="ts", end="end")])
    claimed = spans.filter(pl.col("phase") != "forward")
    forward = intervals.subtract(spans.filter(pl.col("phase") == "forward"), claimed)
    merged = pl.concat([intervals.merge(claimed, by=["phase"]),
                        forward.select(pl.lit("forward").alias("phase"), "ts", "end")])
    return merged.select(list(PHASE_SPANS_SCHEMA)).cast(PHASE_SPANS_SCHEMA).sort("phase", "ts")  # type: ignore[arg-type]


def _host_work() -> pl.Expr:
    """Whether an op is a host backend's span of one collective's work (:data:`HOST_WORK`)."""
    return (pl.col("cat") == "user_annotation") & pl.any_horizontal(
        *(pl.col("name").str.starts_with(prefix) for prefix in HOST_WORK))


def _host_calls(trace: Trace, tree_ops: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """The calls of host backends (module docstring): each work span with the ``c10d::`` op that
    enqueued it (:func:`_pair_enqueued`), rows of :data:`CALLS_SCHEMA`."""
    work = tree_ops.filter(_host_work())
    if work.height == 0:
        return pl.DataFrame(schema=CALLS_SCHEMA)
    # A c10d op that launched a GPU kernel belongs to a GPU backend's call, never to a host one.
    enqueue = tree_ops.filter((pl.col("cat") == "cpu_op") & pl.col("name").str.starts_with(ENQUEUE_PREFIX)
                              & ~pl.col("launches_gpu").fill_null(False))
    work = work.with_columns(kind=kind_expr(pl.col("name")))
    enqueue = enqueue.with_columns(kind=kind_expr(pl.col("name")))
    rows = (work.select(call="idx", ts="ts", end="end", kind="kind", collective="name", work_pid="pid",
                        input_dims="input_dims", input_types="input_types")
            .join(_pair_enqueued(work, enqueue), on="call", how="left")
            .join(enqueue.select(_enqueue="idx", launch_ts="ts", launch_pid="pid", top_op="top_op"),
                  on="_enqueue", how="left")
            .with_columns(pid=pl.coalesce("launch_pid", "work_pid"), _at=pl.coalesce("launch_ts", "ts")))
    rows = tag_steps(rows, trace.steps, "_at")
    # Few rows (one per collective call): the shapes module's parsers, which take any nesting.
    dims = [next(iter(tensor_dims(raw)), None) for raw in rows["input_dims"]]
    types = [next(iter(parse_types(raw)), None) for raw in rows["input_types"]]
    numel = pl.Series([math.prod(d) if d else None for d in dims], dtype=pl.Int64)
    world = _world_size(trace)
    rows = rows.with_columns(
        group_size=pl.lit(world, pl.Int64),
        bytes=numel * pl.Series(types, dtype=pl.String).replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64),
        in_optimizer=_inside(rows, marks, "_at", "optimizer"), in_data=_inside(rows, marks, "_at", "data"))
    rows = rows.with_columns(
        bytes=pl.col("bytes") * pl.when(pl.col("kind") == "all_gather").then(pl.col("group_size")).otherwise(1),
        phase=phase_expr(pl.col("top_op"), pl.col("in_optimizer"), pl.col("in_data")))
    calls = rows.with_columns(
        kernels=pl.lit(0, pl.UInt32), stream=pl.lit(None, pl.Int64), dur=pl.col("end") - pl.col("ts"),
        pg=pl.lit(None, pl.String), seq=pl.lit(None, pl.Int64), dtype=pl.lit(None, pl.String),
        bytes_from=pl.when(pl.col("bytes").is_not_null()).then(pl.lit("input dims")))
    calls = calls.with_columns(algbw_gbps=pl.when(pl.col("dur") > 0).then(pl.col("bytes") / pl.col("dur")))
    calls = calls.with_columns(busbw_gbps=pl.col("algbw_gbps") * bus_factor(pl.col("kind"), pl.col("group_size")))
    return calls.select(list(CALLS_SCHEMA)).cast(CALLS_SCHEMA).sort("ts", "call")  # type: ignore[arg-type]


def _pair_enqueued(work: pl.DataFrame, enqueue: pl.DataFrame) -> pl.DataFrame:
    """Each work span's enqueuing op: ``call u32, _enqueue u32?``.

    A backend takes its work first in, first out, so per process and kind the spans, in start order,
    belong to the ops, in start order: each span to the oldest op of its kind that started before it
    and has no span yet. The trace links them no other way (their External ids differ). Two works
    two worker threads took within microseconds of each other may be paired the other way round;
    of one kind, their spans then differ by those microseconds at their starts.
    """
    events = pl.concat([
        enqueue.select("pid", "kind", "ts", pl.lit(0, pl.Int8).alias("_work"), pl.col("idx").cast(pl.UInt32)),
        work.select("pid", "kind", "ts", pl.lit(1, pl.Int8).alias("_work"), pl.col("idx").cast(pl.UInt32)),
    ]).sort("ts", "_work", "idx")  # an op at a span's very start enqueued it: ops first
    pending: dict[tuple, deque[int]] = {}
    calls, enqueued = [], []
    for pid, kind, _, is_work, idx in events.iter_rows():
        queue = pending.setdefault((pid, kind), deque())
        if not is_work:
            queue.append(idx)
            continue
        calls.append(idx)
        enqueued.append(queue.popleft() if queue else None)
    return pl.DataFrame({"call": calls, "_enqueue": enqueued}, schema={"call": pl.UInt32, "_enqueue": pl.UInt32})
