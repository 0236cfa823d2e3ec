"""Memory round trips: tensors one kernel writes to HBM and a later kernel of the same step reads back.

Contract: :func:`analyze` takes the trace, its :class:`~tracekit.analyses.attribution.Attribution` and
optionally an :class:`~tracekit.execution_trace.ExecutionTrace`, and returns a frozen
:class:`RoundTripReport`:

``traffic`` — one row per kernel, memcpy and memset (``attributed.gpu`` order):
    idx u32, step i64?, kind str, name str, kernel_class str, op str? (the cpu_op whose model was
    used; ``"cudaGraphLaunch"`` for graph replays), model str (``mm``, ``elementwise_binary``,
    ``inductor_pointwise``… ``graph_input_copy`` for a CUDA graph's input staging copy,
    ``memset``/``memcpy`` from the activity's own ``bytes``, or ``"unknown"``), dtype str?,
    bytes_read i64?, bytes_written i64?, flops i64?, dur_ns i64

``tensors`` — one row per read-back (a tensor read by two later kernels is two rows):
    step i64?, producer str, producer_op str, consumer str, consumer_op str, shape str
    ("[8192, 3072]", as written by the producer), dtype str ("bf16"), bytes i64

``tensor_kernels`` — row for row with ``tensors``: step i64?, producer_idx u32 (the producer's
    last kernel, a trace ``idx``), consumer_idx u32 (the consumer's first kernel): where the timeline
    draws each round trip.

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

Linking, per step, in GPU start order (reads of an op before its writes). Only device kernels make
round trips: a call whose activities are copies (``Memcpy HtoD``/``DtoD``/``DtoH``, e.g. ``aten::copy_``
moving a batch to the GPU) or memsets still writes the values it produces on the device — so a later
write replaces what a buffer held; a device-to-host copy writes nothing on the device — but a value
a copy wrote is not an intermediate a kernel sent through HBM, and a copy reading a value back is
not a kernel reading it: neither is a round trip. A CUDA graph's **input staging copy** counts as a
copy too, kernel or not: a call of ``aten::_foreach_copy_`` or ``aten::copy_`` whose next GPU work
in its step (past other such copies) is a graph replay. Static inputs make a graph copy its inputs
into its own buffers before each replay (cudagraph trees with ``_foreach_copy_``); the graph's GEMM
reading that copy is an artefact of static inputs, not an intermediate a fusion would remove. Its
traffic is reported, with model ``graph_input_copy``.

A kernel without a model (an op no model covers, a kernel without an op, a replayed kernel left
untied) may have consumed any value written before it and written one of any shape, which a later
kernel then read: no read is linked across it. The shape linker links no read to a value written
before such a kernel, and a note counts the reads whose only match was a kernel's value (the step's
bytes are then a floor, and its ``unknown_kernels`` say why); the exact linker marks the byte ranges
of its node's outputs as holding no model's value (a kernel without a node cannot be placed in
storage).

* ``execution_trace``: every write marks a byte range of a storage id as holding the producer's
  value (later writes overwrite ranges, which is how the caching allocator's reuse of storage ids
  is honoured); a read of a range links to each producer still holding part of it, for the bytes
  that overlap. A new output is found in the node's ``outputs``, or — for autograd Functions such as
  ``LigerGELUMulFunction`` whose node records none — as the last storage of that size allocated in
  its subtree that is not one of its inputs.
* ``shape_inference`` (no execution trace, or one that joins no op of this trace): every write is a
  value of some numel and dtype; a read takes, among earlier values of the step with equal numel and
  dtype, one not yet read (else one already read), the same shape first, the most recent first, and
  never the same value twice for one consumer, never one written before a kernel without a model
  (above). Counts agree with the exact method on the sample
  MLPs; a pairing may differ (which of two equal-shaped GEMM outputs fed which input), and a tensor
  that only matches a written shape by coincidence would be linked: the report says which method ran.
  A step whose calls repeat an earlier step's (same models, kernel names and order, and kernels
  without a model at the same places) gets that step's links, exactly what linking it again would
  give (long traces repeat their steps).

Inductor's written argument (``in_out_ptr0`` first vs ``out_ptr0`` last) is decided by whether the
last argument holds a live value of the step (exact: its storage range; inferred: a matching value).

CUDA-graph replays: the kernels replayed by ``cudaGraphLaunch`` carry the launch's correlation only.
Where :mod:`tracekit.analyses.graph_replays` tied them to the ops that launched them at capture (a
capture in the trace, or a companion trace), each replay's activities of one captured op form a call
of that op, modelled from its shapes like any launched call (a companion's ops join no execution
trace node: with one, links are then inferred from shapes, and a note says so). Replayed activities
it could not tie are listed with ``op = "cudaGraphLaunch"`` and model ``unknown`` (memsets keep their
bytes); no method can link through them, so such steps report ``unknown_kernels`` > 0 rather than a
silent zero, and the report words their bytes as unknown.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field, replace
from itertools import accumulate

import polars as pl

from tracekit.analyses import traffic as traffic_models
from tracekit.analyses.attribution import Attribution
from tracekit.analyses.graph_replays import GRAPH_LAUNCH_APIS
from tracekit.analyses.traffic import Access, OpTraffic, TensorSpec
from tracekit.execution_trace import EtNode, EtTensor, ExecutionTrace
from tracekit.trace import GPU_WORK_KINDS, Trace


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
TENSOR_KERNELS_SCHEMA = {"step": pl.Int64, "producer_idx": pl.UInt32, "consumer_idx": pl.UInt32}
#: The columns of ``attributed.gpu`` this analysis reads.
_GPU_COLUMNS = ("idx", "ts", "dur", "kind", "name", "kernel_class", "bytes", "step", "op_idx", "cpu_op",
                "launch_api", "launch_idx", "graph_source")
#: ``graph_source`` values that tie a replayed activity to the op that launched it at capture.
_TIED = ("capture", "companion capture", "companion")
#: Copy ops that stage a CUDA graph's inputs into its static buffers when they run right before its
#: replay: cudagraph trees copy with ``_foreach_copy_``; ``torch.cuda.graph`` users and servers with
#: ``copy_``.
STAGING_OPS = frozenset({"aten::_foreach_copy_", "aten::copy_"})
#: The ``model`` of a staging copy's traffic rows.
STAGING_MODEL = "graph_input_copy"


@dataclass(frozen=True)
class RoundTripReport:
    """Per-kernel traffic and the round-trip tensors of each step (see module docstring)."""

    traffic: pl.DataFrame
    tensors: pl.DataFrame
    bytes_per_step: pl.DataFrame
    method: str
    unknown_ops: pl.DataFrame
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Row for row with ``tensors``: the kernels each round trip goes between (module docstring).
    tensor_kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TENSOR_KERNELS_SCHEMA))


@dataclass(slots=True)
class _OpCall:
    """One op instance that launched GPU work, as the linkers see it."""

    op_name: str
    traffic: OpTraffic
    node: EtNode | None


def analyze(trace: Trace, attributed: Attribution, *,
            execution_trace: ExecutionTrace | None = None) -> RoundTripReport:
    """Model every kernel's traffic and link the step's round trips; pure, no I/O."""
    # Only the columns read here travel through the sort and the joins (the frame has ~35).
    gpu = attributed.gpu.select(_GPU_COLUMNS).filter(pl.col("kind").is_in(GPU_WORK_KINDS)).sort(["ts", "idx"])
    ops = attributed.tree.ops
    foreign = attributed.graphs.foreign_ops
    et, notes = _joined(ops, execution_trace)
    if et is not None and foreign.height:
        et = None
        notes.append("CUDA-graph replays attributed through a companion trace, whose ops join no node of "
                     "the execution trace: links inferred from shapes")
    if foreign.height:
        ops = pl.concat([ops.select(foreign.columns), foreign], how="vertical_relaxed")
    work, calls, names = _group_calls(gpu, ops)
    calls, kineto_models = _with_kineto_models(calls, names)
    figures, links = _link_steps(calls, kineto_models, names, et)
    if links.crossed:
        notes.append(f"{links.crossed:,} reads ({links.crossed_bytes:,} B) matched only values written before a "
                     "kernel without a traffic model ran: not linked, as that kernel may have consumed them and "
                     "written what was read")
    traffic_frame = _traffic_frame(work, calls, figures.per_call(calls.height), figures.models, names)
    notes.extend(_staging_notes(traffic_frame))
    tensors = links.frame()
    return RoundTripReport(
        tensor_kernels=_tensor_kernels(work, calls, links),
        traffic=traffic_frame, tensors=tensors,
        bytes_per_step=_per_step(trace, traffic_frame, tensors),
        method="execution_trace" if et is not None else "shape_inference",
        unknown_ops=_unknown_ops(traffic_frame), notes=tuple(notes),
    )


def _joined(ops: pl.DataFrame, execution_trace: ExecutionTrace | None) -> tuple[ExecutionTrace | None, list[str]]:
    """The execution trace to link by (None: infer from shapes), and a note when one was given but
    joins no op of the trace."""
    if execution_trace is None:
        return None, []
    if _joins(ops, execution_trace):
        return execution_trace, []
    return None, [f"execution trace {execution_trace.path} joins no op of this trace by "
                  "rf_id; links inferred from shapes"]


def _with_kineto_models(calls: pl.DataFrame, names: list) -> tuple[pl.DataFrame, list[OpTraffic | None]]:
    """``calls`` with ``token`` (u32: the index of its Kineto model), and the models — one per
    distinct (op name, input dims, input types, list dtype, staging), None where the op has no model.

    ``list_dtype`` is the dtype a foreach copy kernel's name states (Kineto records none for a
    TensorList); a staging copy's model is named ``graph_input_copy``."""
    copies = pl.Series([traffic_models.foreach_copy_dtype(n) if n and "multi_tensor_apply" in n else ""
                        for n in names], dtype=pl.String)
    calls = calls.with_columns(list_dtype=copies.gather(calls.get_column("first_code")))
    on = ["op_name", "input_dims", "input_types", "list_dtype", "staging"]
    keys = calls.select(on).unique(maintain_order=True)
    kineto_models = [
        _staged(_checked(traffic_models.model(name, traffic_models.with_list_dtype(
            traffic_models.args_from_kineto(dims, types), list_dtype))), staging)
        for name, dims, types, list_dtype, staging in keys.iter_rows()]
    calls = calls.join(keys.with_row_index("token"), on=on, how="left", nulls_equal=True, maintain_order="left")
    return calls, kineto_models


def _staged(model: OpTraffic | None, staging: bool) -> OpTraffic | None:
    """A staging copy's model, named for what it is (see :func:`_staging`)."""
    return replace(model, model=STAGING_MODEL) if model is not None and staging else model


@dataclass(frozen=True)
class _CallColumns:
    """The columns of ``calls`` the linking loop reads, as lists (row ``j`` is call ``j``)."""

    tokens: list[int]
    op_names: list[str]
    first_code: list[int]
    last_code: list[int]
    kernel_call: list[bool]
    #: A CUDA graph's input staging copy (:func:`_staging`): its reads and writes make no round trip.
    staging: list[bool]
    #: Kernels without an op (or replayed untied) started before the call's first activity, all
    #: steps together: two calls of a step with different counts have such a kernel between them.
    unknown_before: list[int]
    #: Only read with an execution trace.
    record_function_id: list[int | None]
    list_dtype: list[str]

    @classmethod
    def of(cls, calls: pl.DataFrame, *, with_rf: bool) -> _CallColumns:
        rf = calls.get_column("record_function_id").to_list() if with_rf else []
        dtypes = calls.get_column("list_dtype").to_list() if with_rf else []
        return cls(*(calls.get_column(c).to_list() for c in ("token", "op_name", "first_code", "last_code",
                                                             "kernel_call", "staging", "unknown_before")),
                   rf, dtypes)


class _Figures:
    """The models calls were figured with, each once (``models``, by identity), and which call got
    which: gathered as (call, figure) pairs and spread over the calls by :meth:`per_call`."""

    def __init__(self) -> None:
        self.models: list[OpTraffic] = []
        self._index: dict[int, int] = {}  # id(model) -> index in ``models`` (which keeps it alive)
        self._calls: list[int] = []
        self._ids: list[int] = []

    def add(self, calls: list[int], models: list[OpTraffic]) -> list[int]:
        """Figure ``calls`` with ``models`` (one each); returns the models' indices."""
        ids = []
        for t in models:
            found = self._index.get(id(t))
            if found is None:
                found = self._index[id(t)] = len(self.models)
                self.models.append(t)
            ids.append(found)
        self.assign(calls, ids)
        return ids

    def assign(self, calls: list[int], ids: list[int]) -> None:
        """Figure ``calls`` with the models already at ``ids``."""
        self._calls.extend(calls)
        self._ids.extend(ids)

    def per_call(self, n: int) -> pl.Series:
        """u32 per call (``n`` of them): the index of its model in :attr:`models`, null when unknown."""
        return pl.repeat(None, n, dtype=pl.UInt32, eager=True).scatter(
            pl.Series(self._calls, dtype=pl.UInt32), pl.Series(self._ids, dtype=pl.UInt32))


@dataclass(frozen=True)
class _LinkedStep:
    """A step the shape linker linked: its calls, their figures and its links."""

    calls: list[int]
    ids: list[int]
    links: _Links


class _RepeatedSteps:
    """What lets the shape linker reuse a step's links (module docstring): the calls the linker sees
    (those with a model, and kernel calls without one, which it links nothing across), ascending,
    and each one's (model, first, last kernel name, kernels without an op before it) — what a step's
    signature is made of — gathered once for all steps; and the steps linked so far, by signature."""

    def __init__(self, calls: pl.DataFrame, kineto_models: list[OpTraffic | None]) -> None:
        modelled = pl.Series([t is not None for t in kineto_models], dtype=pl.Boolean)
        rows = calls.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("j"), "token", "first_code", "last_code",
            "unknown_before", modelled=modelled.gather(calls.get_column("token")),
        ).filter(pl.col("modelled") | calls.get_column("kernel_call"))
        self.calls: list[int] = rows.get_column("j").to_list()
        self.is_modelled: list[bool] = rows.get_column("modelled").to_list()
        self.keys = list(zip(*(rows.get_column(c).to_list()
                               for c in ("token", "first_code", "last_code", "unknown_before"))))
        self.seen: dict[tuple, _LinkedStep] = {}

    def seen_calls(self, lo: int, hi: int) -> tuple[list[int], list[int], tuple]:
        """Among calls ``lo``..``hi`` − 1: the calls the linker sees, those with a model, and the
        step's signature (kernels without an op counted from the step's first call seen)."""
        a, b = bisect_left(self.calls, lo), bisect_left(self.calls, hi)
        seen = self.calls[a:b]
        active = [j for j, m in zip(seen, self.is_modelled[a:b]) if m]
        keys = self.keys[a:b]
        base = keys[0][3] if keys else 0
        return seen, active, tuple((t, f, last, u - base) for t, f, last, u in keys)


def _link_steps(calls: pl.DataFrame, kineto_models: list[OpTraffic | None], names: list,
                et: ExecutionTrace | None) -> tuple[_Figures, _Links]:
    """Every step's calls modelled and linked, step after step: each call's figure, and the links."""
    columns = _CallColumns.of(calls, with_rf=et is not None)
    figures = _Figures()
    links = _Links()
    # (id(model), live) -> (model, resolved model): holding the model keeps its id from being reused.
    resolved: dict[tuple[int, bool], tuple[OpTraffic, OpTraffic]] = {}
    repeats = _RepeatedSteps(calls, kineto_models) if et is None else None
    for step, lo, hi in _step_ranges(calls.get_column("step")):
        linker: _ExactLinker | _ShapeLinker
        if repeats is not None:
            seen, active, signature = repeats.seen_calls(lo, hi)
            earlier = repeats.seen.get(signature)
            if earlier is not None:
                # The shape linker sees nothing else than the signature: the same links.
                figures.assign(active, earlier.ids)
                links.extend(step, earlier.links, dict(zip(earlier.calls, active)))
                continue
            step_calls = [(j, _OpCall(columns.op_names[j], kineto_models[columns.tokens[j]], None))
                          for j in seen]
            linker = _ShapeLinker()
        else:
            assert et is not None
            step_calls = _et_calls(range(lo, hi), columns, kineto_models, et)
            linker = _ExactLinker(et)
        step_links = _link_step(step_calls, linker, columns, names, resolved)
        modelled = [(j, call.traffic) for j, call in step_calls if call.traffic is not None]
        done = [j for j, _ in modelled]
        ids = figures.add(done, [t for _, t in modelled])
        links.extend(step, step_links)
        if repeats is not None:
            repeats.seen[signature] = _LinkedStep(done, ids, step_links)
    return figures, links


def _et_calls(rows: range, columns: _CallColumns, kineto_models: list[OpTraffic | None],
              et: ExecutionTrace) -> list[tuple[int, _OpCall]]:
    """The calls ``rows`` that have a model, with it — the execution-trace node's where one joins by
    rf_id and name, else the Kineto one — and the kernel calls without one (``traffic`` None)."""
    step_calls = []
    for j in rows:
        name = columns.op_names[j]
        rf = columns.record_function_id[j]
        node = et.by_rf_id.get(rf) if rf is not None else None
        if node is not None and node.name == name:
            args = traffic_models.with_list_dtype(traffic_models.args_from_et(node), columns.list_dtype[j])
            model = _staged(_checked(traffic_models.model(name, args)), columns.staging[j])
        else:
            node, model = None, kineto_models[columns.tokens[j]]
        if model is not None or columns.kernel_call[j]:
            step_calls.append((j, _OpCall(name, model, node)))
    return step_calls


def _link_step(step_calls: list[tuple[int, _OpCall]], linker: _ExactLinker | _ShapeLinker,
               columns: _CallColumns, names: list,
               resolved: dict[tuple[int, bool], tuple[OpTraffic, OpTraffic]]) -> _Links:
    """One step's links: each call's reads linked to the values written before it (reads before
    writes), an Inductor call's written argument resolved first (its ``traffic`` replaced). A kernel
    without a model — a call's (``traffic`` None) or one without an op between two calls — is
    handed to the linker as an unknown writer."""
    step_links = _Links()
    before = columns.unknown_before[step_calls[0][0]] if step_calls else 0
    for j, call in step_calls:
        if columns.unknown_before[j] != before:
            before = columns.unknown_before[j]
            linker.unknown(None)
        t = call.traffic
        if t is None:
            linker.unknown(call)
            continue
        if t.inductor_out:
            live = linker.is_live(call, t.reads[-1])
            key = (id(t), live)
            if key not in resolved:
                resolved[key] = (t, traffic_models.resolve_inductor(t, live))
            call.traffic = t = resolved[key][1]
        # A staging copy is a copy: what it reads or writes is no intermediate of the computation.
        kernel_call = columns.kernel_call[j] and not columns.staging[j]
        consumer = names[columns.first_code[j]]
        for access in (t.reads if kernel_call else ()):  # a copy reading a value is no round trip
            for prod, tensor, nbytes in linker.read(call, access):
                if prod[2]:  # written by a kernel, not by a copy or memset
                    step_links.add(prod, consumer, call.op_name, tensor, nbytes, j)
        producer = (names[columns.last_code[j]], call.op_name, kernel_call, j)
        to_host = not kernel_call and "DtoH" in consumer
        for access in (() if to_host else t.writes):
            linker.write(call, access, producer)
    step_links.crossed, step_links.crossed_bytes = linker.crossed, linker.crossed_bytes
    return step_links


def _tensor_kernels(work: pl.DataFrame, calls: pl.DataFrame, links: _Links) -> pl.DataFrame:
    """The ``tensor_kernels`` frame (module docstring): each link's producer call's last kernel and
    consumer call's first kernel."""
    work_idx = work.get_column("idx")
    return pl.DataFrame({
        "step": links.steps,
        "producer_idx": work_idx.gather(calls.get_column("last").gather(links.producer_calls)),
        "consumer_idx": work_idx.gather(calls.get_column("first").gather(links.consumer_calls)),
    }, schema=TENSOR_KERNELS_SCHEMA)


def _step_ranges(steps: pl.Series) -> list[tuple]:
    """(step, lo, hi) for each run of equal steps in ``steps`` (nulls equal each other)."""
    runs = steps.rle()
    ends = list(accumulate(runs.struct.field("len").to_list()))
    return list(zip(runs.struct.field("value").to_list(), [0, *ends[:-1]], ends))


def _joins(ops: pl.DataFrame, et: ExecutionTrace) -> bool:
    """Whether any op of the trace joins an execution-trace node by rf_id (and name)."""
    if not et.by_rf_id:
        return False
    nodes = pl.DataFrame({"record_function_id": list(et.by_rf_id),
                          "name": [node.name for node in et.by_rf_id.values()]},
                         schema={"record_function_id": pl.Int64, "name": pl.String})
    hits = ops.select(pl.col("record_function_id").cast(pl.Int64), pl.col("name")).join(
        nodes, on=["record_function_id", "name"], how="semi")
    return hits.height > 0


class _Links:
    """Rows of the ``tensors`` frame: one step's, added link by link (:meth:`add`), or the trace's,
    extended step by step (:meth:`extend`) — which keeps the step's :class:`_Links` instead of
    copying its rows (most steps repeat an earlier step's links) and gathers them in :meth:`frame`."""

    COLUMNS = ("producer", "producer_op", "consumer", "consumer_op", "shape", "dtype", "bytes")

    def __init__(self) -> None:
        self.steps: list = []
        self.columns: tuple[list, ...] = tuple([] for _ in self.COLUMNS)
        # The op calls (rows of ``calls``) each link goes from and to.
        self.producer_calls: list[int] = []
        self.consumer_calls: list[int] = []
        self.parts: list[_Links] = []  # the steps' links, in order (extend)
        # Reads left unlinked because their only match was written before an unknown kernel.
        self.crossed = 0
        self.crossed_bytes = 0

    def add(self, prod: tuple[str, str, bool, int], consumer: str, consumer_op: str, tensor: TensorSpec,
            nbytes: int, consumer_call: int) -> None:
        values = (prod[0], prod[1], consumer, consumer_op, _shape_text(tensor.shape),
                  tensor.short_dtype, nbytes)
        for column, value in zip(self.columns, values):
            column.append(value)
        self.producer_calls.append(prod[3])
        self.consumer_calls.append(consumer_call)

    def extend(self, step, other: _Links, calls: dict[int, int] | None = None) -> None:
        """Append ``other``'s rows (added with :meth:`add`), all of ``step``; ``calls`` maps
        ``other``'s op calls to this step's (when ``other`` is an earlier step whose links are
        repeated)."""
        self.steps.extend([step] * len(other.producer_calls))
        self.parts.append(other)
        self.crossed += other.crossed
        self.crossed_bytes += other.crossed_bytes
        if calls is None:
            self.producer_calls.extend(other.producer_calls)
            self.consumer_calls.extend(other.consumer_calls)
        else:
            self.producer_calls.extend(map(calls.__getitem__, other.producer_calls))
            self.consumer_calls.extend(map(calls.__getitem__, other.consumer_calls))

    def frame(self) -> pl.DataFrame:
        """The ``tensors`` frame of the steps extended: each distinct step's rows are built once
        and gathered for every step that repeats them."""
        schema = {c: TENSORS_SCHEMA[c] for c in self.COLUMNS}
        offsets: dict[int, int] = {}  # id(part) -> its first row in ``pool``
        pool: list[pl.DataFrame] = []
        rows: list[int] = []
        size = 0
        for part in self.parts:
            start = offsets.get(id(part))
            if start is None:
                start = offsets[id(part)] = size
                pool.append(pl.DataFrame(dict(zip(self.COLUMNS, part.columns)), schema=schema))
                size += len(part.producer_calls)
            rows.extend(range(start, start + len(part.producer_calls)))
        gathered = pl.concat(pool).gather(rows) if pool else pl.DataFrame(schema=schema)
        return gathered.insert_column(0, pl.Series("step", self.steps, dtype=pl.Int64))


# ---- grouping kernels into op calls -----------------------------------------------------------

def _group_calls(gpu: pl.DataFrame, ops: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list]:
    """The activities with their call's flags, one row per op call, and the distinct kernel names.

    Activities of one op instance (``op_idx``) in one step form a call, unless launched by a CUDA
    graph or without an op (those are modelled on their own). Its primary activities are its kernels,
    else its memcpys, else all (memsets); the others are modelled on their own. ``work`` adds ``pos``
    (row in GPU start order), ``primary``, ``first``/``last`` (the call's first and last primary
    positions); ``calls`` (steps ascending, no step last; then by first position) has ``step``,
    ``first``, ``first_code``/``last_code`` (the first/last primary activity's name as an index into
    the distinct names), ``kernel_call`` (its primary activities are kernels), ``replayed`` (by a
    graph launch), ``op_name`` (the op's name, else the first activity's ``cpu_op``, else "?"),
    ``record_function_id``, ``input_dims``, ``input_types``, ``unknown_before`` (see
    :class:`_CallColumns`) and ``staging`` (:func:`_staging`)."""
    kind = pl.col("kind")
    replayed = pl.col("launch_api").is_in(list(GRAPH_LAUNCH_APIS)).fill_null(False)
    alone = pl.col("op_idx").is_null() | (replayed & ~pl.col("graph_source").is_in(list(_TIED)).fill_null(False))
    rank = pl.when(kind == "kernel").then(0).when(kind == "memcpy").then(1).otherwise(2)
    # A captured op's activities form one call per replay (the graph launch), not one per step.
    group = ["op_idx", "step", "alone", "replay"]
    names = gpu.select("name").unique(maintain_order=True).with_row_index("code")
    work = gpu.with_row_index("pos").join(
        names, on="name", how="left", nulls_equal=True, maintain_order="left",
    ).with_columns(alone=alone, rank=rank,
                   replay=pl.when(replayed).then(pl.col("launch_idx"))).with_columns(
        primary=~pl.col("alone") & (pl.col("rank") == pl.col("rank").min().over(group)),
        group_first=pl.col("pos").min().over(group),  # rows are in ``pos`` order
    ).with_columns(
        first=pl.when("primary").then("pos").min().over(group),
        last=pl.when("primary").then("pos").max().over(group),
    ).with_columns(last_code=pl.col("code").gather(pl.col("last").fill_null(0)),
                   first_cpu_op=pl.col("cpu_op").gather(pl.col("group_first")))
    calls = work.filter(pl.col("primary") & (pl.col("pos") == pl.col("first"))).select(
        "op_idx", "step", "first", pl.col("code").alias("first_code"), "last_code",
        "last", "first_cpu_op", kernel_call=pl.col("rank") == 0,
        replayed=pl.col("replay").is_not_null()).sort(["step", "first"], nulls_last=True)
    # Only the ops that launched work (a tenth of them): joining all of them hashes every op.
    launched = calls.get_column("op_idx").drop_nulls().implode()
    called = ops.select(pl.col("idx").alias("op_idx"), "name", "record_function_id", "input_dims",
                        "input_types").filter(pl.col("op_idx").is_in(launched))
    calls = calls.join(
        called, on="op_idx", how="left", maintain_order="left",
    ).with_columns(op_name=pl.when(pl.col("name").is_not_null() & (pl.col("name") != "")).then("name")
                   .when(pl.col("first_cpu_op").is_not_null() & (pl.col("first_cpu_op") != ""))
                   .then("first_cpu_op").otherwise(pl.lit("?")))
    # Kernels without an op, or replayed untied, have no model and form no call.
    opless = work.filter(pl.col("alone") & (pl.col("kind") == "kernel")).get_column("pos")
    calls = calls.with_columns(unknown_before=opless.search_sorted(calls.get_column("first"), side="left")
                               .cast(pl.UInt32),
                               staging=_staging(work, calls))
    return work, calls, names.get_column("name").to_list()


def _staging(work: pl.DataFrame, calls: pl.DataFrame) -> pl.Series:
    """Whether each call (row of ``calls``) is a CUDA graph's input staging copy: a call of a copy op
    (:data:`STAGING_OPS`), not itself replayed, whose next GPU work in its step — past other such
    copies — is a graph replay. Static inputs make a graph copy its inputs before each replay; a
    GEMM of the graph reading the copy is an artefact of static inputs, not an intermediate a fusion
    would remove."""
    replays = work.filter(pl.col("replay").is_not_null()).group_by("replay").agg(
        pl.col("step").first(), pl.col("pos").min()).select("pos", "step")
    if replays.height == 0:
        return pl.repeat(False, calls.height, dtype=pl.Boolean, eager=True)
    kind = (pl.when(pl.col("replayed")).then(pl.lit("replay"))
            .when(pl.col("op_name").is_in(list(STAGING_OPS))).then(pl.lit("copy")).otherwise(pl.lit("other")))
    events = pl.concat([
        calls.select(pl.col("first").alias("pos"), "step", kind.alias("kind"),
                     pl.int_range(pl.len(), dtype=pl.Int64).alias("j")),
        replays.select("pos", "step", kind=pl.lit("replay"), j=pl.lit(-1, pl.Int64)),
    ], how="vertical_relaxed").sort("pos", descending=True)
    staging = [False] * calls.height
    replay_step: tuple | None = None  # (step,) of the replay the copies seen since lead to
    for _, step, what, j in events.iter_rows():
        if what == "replay":
            replay_step = (step,)
        elif what == "copy" and replay_step == (step,):
            staging[j] = True
        else:
            replay_step = None
    return pl.Series(staging, dtype=pl.Boolean)


def _traffic_frame(work: pl.DataFrame, calls: pl.DataFrame, call_figure: pl.Series,
                   figures: list[OpTraffic], names: list) -> pl.DataFrame:
    """The ``traffic`` frame: primary activities by their call's model, the rest on their own
    (``names``: the distinct activity names ``work``'s ``code`` indexes)."""
    table = pl.DataFrame({
        "figure": range(len(figures)),
        "f_model": [t.model for t in figures],
        "f_dtype": [t.dtype for t in figures],
        "f_read": [t.bytes_read for t in figures],
        "f_written": [t.bytes_written for t in figures],
        "f_flops": [t.flops for t in figures],
    }, schema={"figure": pl.UInt32, "f_model": pl.String, "f_dtype": pl.String, "f_read": pl.Int64,
               "f_written": pl.Int64, "f_flops": pl.Int64})
    per_call = calls.select(pl.col("op_name").alias("call_op"), call_figure.alias("figure")).join(
        table, on="figure", how="left", maintain_order="left")
    # Each activity's call by position: the call whose first primary activity is at ``first``.
    call_at = pl.repeat(None, work.height, dtype=pl.UInt32, eager=True).scatter(
        calls.get_column("first"), pl.int_range(calls.height, dtype=pl.UInt32, eager=True))
    rows = work.hstack(per_call.gather(call_at.gather(work.get_column("first"))))
    # A copy's direction from its name, looked up once per distinct name (null for a null name).
    codes = rows.get_column("code")
    direction = {key: pl.Series([None if n is None else key in n for n in names], dtype=pl.Boolean)
                 .gather(codes) for key in ("DtoD", "DtoH")}
    pos, first, last = pl.col("pos"), pl.col("first"), pl.col("last")
    kind, nbytes = pl.col("kind"), pl.col("bytes")
    modelled = pl.col("primary") & pl.col("figure").is_not_null()
    edge = modelled & ((pos == first) | (pos == last))
    own = ~pl.col("primary") & kind.is_in(["memset", "memcpy"]) & nbytes.is_not_null()
    null = pl.lit(None)
    return rows.select(
        "idx", "step", "kind", "name", "kernel_class",
        op=pl.when("primary").then("call_op")
        .when(pl.col("launch_api").is_in(list(GRAPH_LAUNCH_APIS))).then(pl.lit("cudaGraphLaunch"))
        .otherwise("cpu_op"),
        model=pl.when(edge & (first == last)).then("f_model")
        .when(edge).then(pl.col("f_model") + "/split")
        .when(own).then(kind).otherwise(pl.lit("unknown")),
        dtype=pl.when(edge).then("f_dtype").otherwise(null),
        bytes_read=pl.when(modelled & (pos == first)).then("f_read")
        .when(edge).then(0)
        .when(own & (kind == "memcpy") & (direction["DtoD"] | direction["DtoH"])).then(nbytes)
        .when(own).then(0).otherwise(null),
        bytes_written=pl.when(modelled & (pos == last)).then("f_written")
        .when(edge).then(0)
        .when(own & ((kind == "memset") | ~direction["DtoH"])).then(nbytes)
        .when(own).then(0).otherwise(null),
        flops=pl.when(modelled & (pos == first)).then("f_flops")
        .when(edge).then(0).when(own).then(0).otherwise(null),
        dur_ns="dur",
    ).cast(TRAFFIC_SCHEMA)


def _checked(model: OpTraffic | None) -> OpTraffic | None:
    if model is not None and not model.inductor_out and (
            model.bytes_read is None or model.bytes_written is None):
        return None  # e.g. a TensorList whose dtype Kineto does not record: unknown, not 0
    return model


# ---- linkers ------------------------------------------------------------------------------------

class _ExactLinker:
    """Follows storage byte ranges through the execution trace's tensor values."""

    #: Never left unlinked for an unknown kernel (see :meth:`unknown`).
    crossed = 0
    crossed_bytes = 0

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

    def unknown(self, call: _OpCall | None) -> None:
        """A kernel without a model ran: the storage ranges of its node's outputs (when it has one)
        now hold a value no model wrote, so a later read of them links to nothing. A kernel without
        a node cannot be placed in storage; what it wrote stays unseen."""
        if call is None or call.node is None:
            return
        for value in call.node.outputs:
            for tensor in _flat(value):
                self._put(tensor, ("", call.op_name, False, -1), None)

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

    def write(self, call: _OpCall, access: Access, producer: tuple[str, str, bool, int]) -> None:
        tensor = self._tensor(call, access)
        if tensor is not None:
            self._put(tensor, producer, _spec_of(access.tensor, tensor))

    def _put(self, tensor: EtTensor, producer: tuple[str, str, bool, int], spec: TensorSpec | None) -> None:
        """``tensor``'s byte range now holds ``producer``'s value (earlier values' overlaps cut)."""
        start, end = tensor.byte_range
        kept = []
        for s, e, prod, held in self.live.get(tensor.storage_id, ()):
            if e <= start or s >= end:
                kept.append([s, e, prod, held])
                continue
            if s < start:
                kept.append([s, start, prod, held])
            if e > end:
                kept.append([end, e, prod, held])
        kept.append([start, end, producer, spec])
        self.live[tensor.storage_id] = kept


class _ShapeLinker:
    """Matches reads to earlier writes of equal numel and dtype (see module docstring).

    Values are kept in buckets by (numel, dtype), oldest first; a read scans its bucket from the
    most recent value and stops at the first unread one of the same shape (the best possible)."""

    def __init__(self) -> None:
        # (numel, dtype) -> values, each [seq, shape, spec, producer, read, era]
        self.buckets: dict[tuple[int, str], list[list]] = {}
        self.count = 0
        self.used: dict[int, set[int]] = {}  # id(call) -> seqs of the values it already read
        # Kernels without a model seen so far: a value of an earlier era is never linked.
        self.era = 0
        self.crossed = 0  # reads whose only matches were of an earlier era, and their bytes
        self.crossed_bytes = 0

    def unknown(self, call: _OpCall | None) -> None:
        """A kernel without a model ran: it may have consumed any value written so far and written
        one of any shape, so no later read is linked to a value written before it."""
        self.era += 1

    def is_live(self, call: _OpCall, access: Access) -> bool:
        spec = access.tensor
        return bool(self.buckets.get((spec.numel, spec.dtype)))

    def read(self, call: _OpCall, access: Access):
        spec = access.tensor
        if not spec.dtype or spec.nbytes is None:
            return []
        bucket = self.buckets.get((spec.numel, spec.dtype))
        if not bucket:
            return []
        used = self.used.setdefault(id(call), set())
        shape = spec.shape
        best = None
        best_rank = 4
        older = 0  # how many values, oldest first, are left when one of an earlier era is met
        for k, value in enumerate(reversed(bucket)):  # most recent first: on equal rank the first seen wins
            if value[5] != self.era:
                older = len(bucket) - k  # written before an unknown kernel, as is every older value
                break
            if value[0] in used:
                continue
            rank = (2 if value[4] else 0) + (value[1] != shape)
            if rank == 0:
                best = value
                break
            if rank < best_rank:
                best, best_rank = value, rank
        if best is None:
            # Only a kernel's value would have made a round trip.
            if any(value[3][2] for value in bucket[:older]):
                self.crossed += 1
                self.crossed_bytes += spec.nbytes
            return []
        best[4] = True
        used.add(best[0])
        return [(best[3], best[2], spec.nbytes)]

    def write(self, call: _OpCall, access: Access, producer: tuple[str, str, bool, int]) -> None:
        spec = access.tensor
        key = (spec.numel, spec.dtype)
        value = [self.count, spec.shape, spec, producer, False, self.era]
        self.count += 1
        self.buckets.setdefault(key, []).append(value)


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


def _staging_notes(traffic: pl.DataFrame) -> list[str]:
    """One note per op of the staging copies (module docstring): how many and their bytes."""
    staged = traffic.filter(pl.col("model") == STAGING_MODEL).group_by("op").agg(
        count=pl.len(), read=pl.col("bytes_read").sum(), written=pl.col("bytes_written").sum()).sort("op")
    return [f"CUDA-graph input copies ({op} ×{count:,}, right before a replay): {read:,} B read and "
            f"{written:,} B written into the graphs' static inputs; counted as traffic, not as round trips"
            for op, count, read, written in staged.iter_rows()]


def _unknown_ops(traffic: pl.DataFrame) -> pl.DataFrame:
    unknown = traffic.filter((pl.col("kind") == "kernel") & (pl.col("model") == "unknown"))
    return unknown.with_columns(op=pl.col("op").fill_null("(no op)")).group_by("op").agg(
        count=pl.len().cast(pl.UInt32)).sort(["count", "op"], descending=[True, False]).cast(
        UNKNOWN_SCHEMA)
