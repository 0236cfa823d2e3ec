"""Memory from the trace: the caching allocator's ``[memory]`` events tied to the ops that made them.

Contract: :func:`analyze` takes a :class:`~tracekit.trace.Trace` (its ``steps`` are the unit windows:
:meth:`tracekit.analyses.units.Units.apply`) and the op tree's ``ops``
(:func:`tracekit.analyses.op_tree.build`) and returns a frozen :class:`MemoryReport`. Pure and
vectorised: no loop runs over events (only over the depth of the op tree).

What the events say. Each ``[memory]`` instant is one allocation (``bytes > 0``) or free
(``bytes < 0``) of the block at ``addr`` on one device, written on the thread that asked for it,
with the allocator's ``total_allocated``/``total_reserved`` *after* it. So:

* the curves are those totals in event order (``ts``, then ``idx``) per device; where a trace has
  no totals (2021) the running sum of ``bytes`` stands in, relative to the trace's start
  (``totals = "summed"``);
* the op running at an event is the innermost span of its own thread that holds its ``ts``; its
  ``cpu_op``/``top_op``/``annotation`` come from the op tree. The *phase* follows :data:`PHASES`
  (the autograd engine runs backward ops on its own thread under
  ``autograd::engine::evaluate_function: …``);
* blocks pair an allocation with the next free of the same ``(device, addr)`` in event order. A
  free with no allocation before it is a block **allocated before the trace began**: counted apart
  (``frees_before_trace``), never guessed. Memory allocated before the trace that is never freed in
  it shows only in the totals: at any moment, ``allocated - (blocks allocated in the trace and
  alive)`` is what the trace began with, less the pre-trace blocks freed so far;
* the peak is the event with the largest ``total_allocated`` (the first such, in event order) —
  the allocator's own ``max_memory_allocated`` for the window, exactly, since the totals are its
  counters. Per unit: the largest within the unit's ``[ts, end)``.

Devices are ``(device_type, device_id)``; CPU allocations (``device_type`` 0) are kept and shown
apart as their own device rows (``device = "cpu"``; no reserve, no fragmentation, no total), never mixed into a GPU's figures.
``[OutOfMemory]`` events arrive as rows with ``oom`` set (the loader marks them by name; they carry
no ``addr``); ``bytes`` is the failed request.

Frames of :class:`MemoryReport` (all bytes ``i64``, times ``i64`` ns):

``devices`` — one row per device: ``device str`` (:data:`DEVICE_TYPES` label + ``:id``), ``device_type
i64, device_id i64, totals str, addressed bool`` (every event carries its block's address; false for
traces from before PyTorch 1.9: then ``frees_before_trace``, ``bytes_freed_before_trace``,
``live_bytes``, ``live_blocks`` and ``before_trace_at_peak`` are null and ``live`` has no row), ``events u32, allocations u32, frees u32, bytes_allocated,
bytes_freed, frees_before_trace u32, bytes_freed_before_trace, allocated_at_start`` (before its first
event), ``allocated_at_end, peak_allocated, peak_ts, peak_step i64?`` (the unit holding the peak),
``peak_offset_ns i64?`` (from that unit's start), ``peak_reserved`` (largest reserved),
``reserved_at_peak, fragmentation`` (``reserved_at_peak - peak_allocated``: cached, not in use),
``total_memory i64?`` (``deviceProperties.totalGlobalMem``), ``headroom i64?`` (``total_memory -
peak_reserved``), ``live_bytes`` (blocks allocated in the trace alive at the peak), ``live_blocks
u32``, ``before_trace_at_peak`` (``peak_allocated - live_bytes``: held since before the trace),
``op str?, cpu_op str?, top_op str?, annotation str?, phase str?`` (the op at the peak),
``out_of_memory u32``.

``steps`` — the peak per unit and device: ``step i64, device str, peak_allocated, peak_ts,
peak_reserved, allocated_at_start, allocated_at_end, op, top_op, annotation, phase`` (units without
memory events have no row).

``curve`` — ``device str, ts i64, allocated i64, reserved i64`` per event, in event order.

``events_frame`` — each allocation and free with the op that made it: ``device str, idx u32, ts i64, addr
i64, bytes i64, allocated i64, op str, cpu_op str?, top_op str?, annotation str?, phase str?`` (event
order; Python API only).

``timeline`` — the curve cut into at most :data:`TIMELINE_POINTS` equal spans of time per device,
each with its highest values: ``device str, ts i64`` (the span's start), ``allocated i64, reserved
i64`` (what ``tracekit.report/1`` carries; the whole curve stays in the Python API).

``live`` — what holds memory at each device's peak: blocks allocated in the trace and alive then,
by the op that allocated them: ``device str, op str?, top_op str?, phase str?, blocks u32, bytes,
largest``, most bytes first.

``ops`` — per device and op name (the innermost ``cpu_op``; an event outside any cpu_op is
counted under its annotation, else ``(no op)``): ``device str, op str, allocations u32,
bytes_allocated, bytes_freed, net, largest`` (self: events made in the op itself) and
``incl_allocations u32, incl_bytes_allocated, incl_bytes_freed, incl_net, incl_largest`` (the op
and everything nested in it on its thread), most ``incl_bytes_allocated`` first.

``growth`` — the top :data:`TOP_GROWTH` ops per unit and device by self ``net`` growth (> 0):
``step i64, device str, op str, net, allocations u32`` (activations kept for backward show here).

``out_of_memory`` — ``device str, ts, bytes`` (the failed request), ``allocated, reserved,
op str?`` per ``[OutOfMemory]`` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses.steps import tag_steps
from tracekit.trace import Trace

#: c10's ``DeviceType`` numbers as Kineto writes them in ``Device Type`` (ROCm reports 1 too).
DEVICE_TYPES: dict[int, str] = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia",
                                20: "privateuse1"}
CPU_DEVICE_TYPE = 0
#: Top ops by net growth kept per unit and device.
TOP_GROWTH = 5
#: Points per device in ``timeline`` (the report's curve; the whole one is ``curve``).
TIMELINE_POINTS = 256
#: An event's phase: the first rule that matches (column, prefix, phase, why); else ``forward``.
PHASES: tuple[tuple[str, str, str, str], ...] = (
    ("top_op", "autograd::engine::evaluate_function", "backward",
     "the autograd engine runs each backward node under this span, on its own thread"),
    ("annotation", "Optimizer.step#", "optimizer", "torch.optim wraps step() in this record_function"),
    ("annotation", "Optimizer.zero_grad#", "optimizer", "torch.optim wraps zero_grad() in this record_function"),
)
NO_OP = "(no op)"

DEVICES_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "device_type": pl.Int64, "device_id": pl.Int64, "totals": pl.String,
    "addressed": pl.Boolean, "events": pl.UInt32, "allocations": pl.UInt32, "frees": pl.UInt32, "bytes_allocated": pl.Int64,
    "bytes_freed": pl.Int64, "frees_before_trace": pl.UInt32, "bytes_freed_before_trace": pl.Int64,
    "allocated_at_start": pl.Int64, "allocated_at_end": pl.Int64, "peak_allocated": pl.Int64,
    "peak_ts": pl.Int64, "peak_step": pl.Int64, "peak_offset_ns": pl.Int64, "peak_reserved": pl.Int64, "reserved_at_peak": pl.Int64,
    "fragmentation": pl.Int64, "total_memory": pl.Int64, "headroom": pl.Int64, "live_bytes": pl.Int64,
    "live_blocks": pl.UInt32, "before_trace_at_peak": pl.Int64, "op": pl.String, "cpu_op": pl.String,
    "top_op": pl.String, "annotation": pl.String, "phase": pl.String, "out_of_memory": pl.UInt32,
}
_AT = {"op": pl.String, "top_op": pl.String, "annotation": pl.String, "phase": pl.String}
STEPS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "device": pl.String, "peak_allocated": pl.Int64, "peak_ts": pl.Int64,
    "peak_reserved": pl.Int64, "allocated_at_start": pl.Int64, "allocated_at_end": pl.Int64, **_AT,
}
CURVE_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "ts": pl.Int64, "allocated": pl.Int64, "reserved": pl.Int64}
LIVE_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "op": pl.String, "top_op": pl.String, "phase": pl.String, "blocks": pl.UInt32,
    "bytes": pl.Int64, "largest": pl.Int64,
}
_OP_STATS = {"allocations": pl.UInt32, "bytes_allocated": pl.Int64, "bytes_freed": pl.Int64,
             "net": pl.Int64, "largest": pl.Int64}
OPS_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "op": pl.String, **_OP_STATS, **{f"incl_{k}": v for k, v in _OP_STATS.items()}}
GROWTH_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "device": pl.String, "op": pl.String, "net": pl.Int64, "allocations": pl.UInt32}
EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "idx": pl.UInt32, "ts": pl.Int64, "addr": pl.Int64, "bytes": pl.Int64,
    "allocated": pl.Int64, "op": pl.String, "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String,
    "phase": pl.String}
OOM_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String, "ts": pl.Int64, "bytes": pl.Int64, "allocated": pl.Int64, "reserved": pl.Int64,
    "op": pl.String}


def _empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass(frozen=True)
class MemoryReport:
    """The memory analysis of one trace (frames in this module's docstring). ``events`` counts the
    ``[memory]`` events read; 0 means the trace was recorded without ``profile_memory=True``."""

    events: int = 0
    devices: pl.DataFrame = field(default_factory=lambda: _empty(DEVICES_SCHEMA))
    steps: pl.DataFrame = field(default_factory=lambda: _empty(STEPS_SCHEMA))
    curve: pl.DataFrame = field(default_factory=lambda: _empty(CURVE_SCHEMA))
    timeline: pl.DataFrame = field(default_factory=lambda: _empty(CURVE_SCHEMA))
    events_frame: pl.DataFrame = field(default_factory=lambda: _empty(EVENTS_SCHEMA))
    live: pl.DataFrame = field(default_factory=lambda: _empty(LIVE_SCHEMA))
    ops: pl.DataFrame = field(default_factory=lambda: _empty(OPS_SCHEMA))
    growth: pl.DataFrame = field(default_factory=lambda: _empty(GROWTH_SCHEMA))
    out_of_memory: pl.DataFrame = field(default_factory=lambda: _empty(OOM_SCHEMA))
    #: Events read but left out of some figures, by :data:`SET_ASIDE` reason (reasons without events
    #: absent): what the analysis could not use, counted instead of guessed.
    set_aside: dict[str, int] = field(default_factory=dict)

    def peak_per_step(self, gpu_only: bool = True) -> pl.DataFrame:
        """``step i64, peak_allocated i64``: the largest peak over the (GPU) devices per unit."""
        rows = self.steps
        if gpu_only:
            cpu = self.devices.filter(pl.col("device_type") == CPU_DEVICE_TYPE)["device"]
            rows = rows.filter(~pl.col("device").is_in(cpu.implode()))
        return rows.group_by("step").agg(pl.col("peak_allocated").max()).sort("step")


def analyze(trace: Trace, tree_ops: pl.DataFrame | None = None) -> MemoryReport:
    """Memory per device, per unit and per op (see the module docstring).

    Parameters
    ----------
    trace : Trace
        The loaded trace; its ``steps`` frame gives the units.
    tree_ops : DataFrame, optional
        :attr:`tracekit.analyses.op_tree.OpTree.ops` of the same trace (built when not given).

    Returns
    -------
    MemoryReport
    """
    memory = trace.memory
    if memory.height == 0:
        return MemoryReport()
    if tree_ops is None:
        from tracekit.analyses import op_tree

        tree_ops = op_tree.build(trace).ops
    label = pl.col("device_type").replace_strict(DEVICE_TYPES, default=None, return_dtype=pl.String)
    # The host has one allocator: "cpu" (Kineto writes Device Id -1 for it).
    device = (pl.when(pl.col("device_type") == CPU_DEVICE_TYPE).then(pl.lit("cpu"))
              .otherwise(label.fill_null("device" + pl.col("device_type").cast(pl.String))
                         + ":" + pl.col("device_id").cast(pl.String)))
    events = (memory.with_columns(device_type=pl.col("device_type").fill_null(-1),
                                  device_id=pl.col("device_id").fill_null(-1))
              .sort(["device_type", "device_id", "ts", "idx"]))
    # Labels made once per device, not once per event.
    labels = events.select("device_type", "device_id").unique().with_columns(device=device)
    events = events.join(labels, on=["device_type", "device_id"], how="left", maintain_order="left")
    rows = _Rows(tree_ops)
    events = _with_ops(events, tree_ops, rows)
    oom = events.filter(pl.col("oom"))
    events = events.filter(~pl.col("oom") & pl.col("bytes").is_not_null() & (pl.col("bytes") != 0))
    events, set_aside = _plausible(events)
    if events.height == 0 and oom.height == 0:
        return MemoryReport(set_aside=set_aside)
    # Totals: the allocator's own, else the running sum (2021 traces write none).
    summed = pl.col("bytes").cum_sum().over("device")
    events = events.with_columns(
        totals=pl.when(pl.col("total_allocated").is_null().any().over("device"))
        .then(pl.lit("summed")).otherwise(pl.lit("allocator")),
        pos=pl.int_range(pl.len(), dtype=pl.Int64),
        is_alloc=pl.col("bytes") > 0,
    ).with_columns(
        allocated=pl.when(pl.col("totals") == "summed").then(summed).otherwise(pl.col("total_allocated")),
        reserved=pl.col("total_reserved"),
    )
    # Blocks need addresses: events before PyTorch 1.9 carry none, and a device whose events have
    # none gets totals and per-op bytes but no blocks (its block figures are null, not zero).
    blocks = _blocks(events.filter(pl.col("addr").is_not_null()))
    devices = _devices(events, blocks, trace, oom)
    live = _live(blocks, devices)
    addressed = pl.col("addressed")
    devices = devices.join(live.group_by("device").agg(live_bytes=pl.col("bytes").sum(),
                                                      live_blocks=pl.col("blocks").sum()),
                           on="device", how="left").with_columns(
        live_bytes=pl.when(addressed).then(pl.col("live_bytes").fill_null(0)),
        live_blocks=pl.when(addressed).then(pl.col("live_blocks").fill_null(0)),
        frees_before_trace=pl.when(addressed).then(pl.col("frees_before_trace")),
        bytes_freed_before_trace=pl.when(addressed).then(pl.col("bytes_freed_before_trace")),
    ).with_columns(before_trace_at_peak=pl.col("peak_allocated") - pl.col("live_bytes"))
    stepped = tag_steps(events, trace.steps)
    starts = trace.steps.select(pl.col("number").alias("peak_step"), pl.col("ts").alias("_start"))
    devices = (tag_steps(devices, trace.steps, "peak_ts").rename({"step": "peak_step"})
               .join(starts, on="peak_step", how="left")
               .with_columns(peak_offset_ns=pl.col("peak_ts") - pl.col("_start")))
    curve = events.select(pl.col(c).cast(t) for c, t in CURVE_SCHEMA.items())
    return MemoryReport(
        events=int(events.height),
        devices=devices.select([pl.col(c).cast(t) for c, t in DEVICES_SCHEMA.items()]),
        steps=_steps(stepped),
        curve=curve, timeline=_timeline(curve),
        events_frame=events.select([pl.col(c).cast(t) for c, t in EVENTS_SCHEMA.items()]),
        live=live.select(pl.col(c).cast(t) for c, t in LIVE_SCHEMA.items()),
        ops=_ops(events, rows),
        growth=_growth(stepped),
        set_aside=set_aside,
        out_of_memory=oom.select(
            "device", "ts", "bytes", allocated=pl.col("total_allocated"), reserved=pl.col("total_reserved"),
            op=pl.col("op")).sort("ts").cast(OOM_SCHEMA),  # type: ignore[arg-type]
    )


#: No allocator hands out or frees a block this large (256 TiB): an event claiming it is damage.
MAX_EVENT_BYTES = 1 << 48
#: A device whose running sum of bytes leaves this range would wrap the Int64 figures.
MAX_SUM_BYTES = 1 << 62
#: Why events are set aside (``MemoryReport.set_aside`` keys), as the report words them.
SET_ASIDE = {
    "implausible_size": "claim more than 256 TiB in one allocation or free (left out)",
    "sums_overflow": "on a device whose summed bytes exceed 2^62 B (the device is left out)",
    "no_address": "carry no block address (in the totals and per-op bytes; in no block)",
}


def _plausible(events: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """``events`` less those no allocator writes, and the count of each kind set aside: sizes past
    :data:`MAX_EVENT_BYTES`, and every event of a device whose running sums (taken in Int128) would
    wrap Int64. Events without an address are kept and counted when other events have one."""
    counts: dict[str, int] = {}
    sized = events.filter(pl.col("bytes").abs() <= MAX_EVENT_BYTES)
    if sized.height < events.height:
        counts["implausible_size"] = events.height - sized.height
    wide = pl.col("bytes").cast(pl.Int128)
    over = (sized.group_by("device")
            .agg(reach=pl.max_horizontal(wide.cum_sum().abs().max(), wide.abs().sum()))
            .filter(pl.col("reach") > MAX_SUM_BYTES)["device"])
    if over.len():
        kept = sized.filter(~pl.col("device").is_in(over.implode()))
        counts["sums_overflow"] = sized.height - kept.height
        sized = kept
    without = int(sized["addr"].null_count())
    if 0 < without < sized.height:
        counts["no_address"] = without
    return sized, counts


class _Rows:
    """Rows of ``frame`` by its ``idx`` column: a dense table indexed by ``idx`` (event indices are
    small integers), so a look-up is a gather, never a join."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.size = int(frame["idx"].max() or 0) + 1
        self.table = (pl.Series([None], dtype=pl.UInt32).extend_constant(None, self.size - 1)
                      .scatter(frame["idx"], pl.int_range(frame.height, dtype=pl.UInt32, eager=True)))

    def of(self, idx: pl.Series) -> pl.Series:
        inside = idx.is_not_null() & (idx.cast(pl.Int64) < self.size)
        return self.table.gather(pl.select(pl.when(inside).then(idx.cast(pl.Int64))).to_series())

    def get(self, column: str, idx: pl.Series) -> pl.Series:
        """``column`` of the rows whose ``idx`` is each of ``idx`` (null where none)."""
        return self.frame[column].gather(self.of(idx))


def _with_ops(events: pl.DataFrame, tree_ops: pl.DataFrame, rows: _Rows) -> pl.DataFrame:
    """``events`` plus ``span_idx u32?`` (the innermost span of the event's thread holding its
    ``ts``), ``cpu_op_idx u32?`` (its innermost cpu_op), ``op, cpu_op, top_op, annotation, phase``."""
    spans = (tree_ops.select("idx", "pid", "tid", "ts", "end", "parent_idx")
             .sort(["ts", "end", "idx"], descending=[False, True, False]))
    # The last span of the thread starting at or before ts (the innermost of equal starts sorts last) …
    found = (events.select("pid", "tid", "ts").with_row_index("_row").sort("ts")
             .join_asof(spans.select("pid", "tid", pl.col("ts").alias("_start"), pl.col("idx").alias("span_idx")),
                        left_on="ts", right_on="_start", by=["pid", "tid"], strategy="backward",
                        check_sortedness=False)  # both sorted by ts above
             .sort("_row"))
    span, ts = found["span_idx"], found["ts"]
    # … else its nearest ancestor still open at ts: one gather per level of the tree, on those left.
    active = pl.arg_where((rows.get("end", span) <= ts).fill_null(False), eager=True)
    while active.len():
        up = rows.get("parent_idx", span.gather(active))
        span = span.scatter(active, up)
        still = (rows.get("end", up) <= ts.gather(active)).fill_null(False)
        active = active.filter(still)
    at_rows = rows.of(span)
    at = pl.DataFrame({"span_idx": span.cast(pl.UInt32)}).with_columns(
        **{c: tree_ops[c].gather(at_rows) for c in ("cpu_op", "top_op", "annotation")},
        cpu_op_idx=tree_ops["direct_cpu_op_idx"].gather(at_rows))
    phase = pl.lit("forward")
    for column, prefix, name, _why in reversed(PHASES):
        phase = pl.when(pl.col(column).str.starts_with(prefix).fill_null(False)).then(pl.lit(name)).otherwise(phase)
    at = at.with_columns(
        op=pl.coalesce("cpu_op", "annotation", pl.lit(NO_OP)),
        phase=pl.when(pl.col("span_idx").is_null()).then(pl.lit(None, pl.String)).otherwise(phase))
    return events.hstack(at.select("span_idx", "cpu_op_idx", "op", "cpu_op", "top_op", "annotation", "phase"))


def _blocks(events: pl.DataFrame) -> pl.DataFrame:
    """One row per block: ``device, addr, size, alloc_pos i64?, free_pos i64?`` plus the allocating
    event's ``op, top_op, phase`` (null ``alloc_pos``: allocated before the trace)."""
    numbered = events.select(
        "device", "addr", "bytes", "pos", "is_alloc", "op", "top_op", "phase",
        # Blocks of one address in event order: an allocation opens block n, the frees after it close it.
        n=pl.col("is_alloc").cast(pl.Int64).cum_sum().over(["device", "addr"]))  # rows are in event order
    allocs = numbered.filter(pl.col("is_alloc")).select(
        "device", "addr", "n", "op", "top_op", "phase", size=pl.col("bytes"), alloc_pos=pl.col("pos"))
    frees = (numbered.filter(~pl.col("is_alloc"))
             .group_by("device", "addr", "n").agg(free_pos=pl.col("pos").min(), freed=-pl.col("bytes").first()))
    paired = allocs.join(frees, on=["device", "addr", "n"], how="left").drop("freed")
    before = frees.filter(pl.col("n") == 0).select(
        "device", "addr", "n", op=pl.lit(None, pl.String), top_op=pl.lit(None, pl.String),
        phase=pl.lit(None, pl.String), size=pl.col("freed"), alloc_pos=pl.lit(None, pl.Int64), free_pos="free_pos")
    return pl.concat([paired, before], how="vertical_relaxed")


def _devices(events: pl.DataFrame, blocks: pl.DataFrame, trace: Trace, oom: pl.DataFrame) -> pl.DataFrame:
    total = pl.DataFrame({"device_id": [d.id for d in trace.meta.devices],
                          "total_memory": [d.total_global_mem for d in trace.meta.devices]},
                         schema={"device_id": pl.Int64, "total_memory": pl.Int64}).unique("device_id", keep="first")
    at_peak = pl.col("allocated").arg_max()
    found = events.group_by("device").agg(
        pl.col("device_type", "device_id", "totals").first(),
        addressed=pl.col("addr").is_not_null().all(),
        events=pl.len(), allocations=pl.col("is_alloc").sum(), frees=(~pl.col("is_alloc")).sum(),
        bytes_allocated=pl.col("bytes").filter(pl.col("is_alloc")).sum(),
        bytes_freed=-pl.col("bytes").filter(~pl.col("is_alloc")).sum(),
        allocated_at_start=pl.col("allocated").first() - pl.col("bytes").first(),
        allocated_at_end=pl.col("allocated").last(),
        peak_allocated=pl.col("allocated").max(), peak_ts=pl.col("ts").get(at_peak),
        peak_pos=pl.col("pos").get(at_peak), peak_reserved=pl.col("reserved").max(),
        reserved_at_peak=pl.col("reserved").get(at_peak),
        **{c: pl.col(c).get(at_peak) for c in ("op", "cpu_op", "top_op", "annotation", "phase")},
    )
    before = blocks.filter(pl.col("alloc_pos").is_null()).group_by("device").agg(
        frees_before_trace=pl.len(), bytes_freed_before_trace=pl.col("size").sum())
    ooms = oom.group_by("device").agg(out_of_memory=pl.len())
    return (found.join(before, on="device", how="left").join(ooms, on="device", how="left")
            .join(total, on="device_id", how="left")
            .with_columns(
                pl.when(pl.col("device_type") == CPU_DEVICE_TYPE).then(None).otherwise(pl.col("total_memory"))
                .alias("total_memory"),
                pl.col("frees_before_trace", "out_of_memory").fill_null(0),
                pl.col("bytes_freed_before_trace").fill_null(0),
                fragmentation=pl.when(pl.col("device_type") != CPU_DEVICE_TYPE)
                .then(pl.col("reserved_at_peak") - pl.col("peak_allocated")))
            .with_columns(headroom=pl.col("total_memory") - pl.col("peak_reserved"))
            .sort("device"))


def _live(blocks: pl.DataFrame, devices: pl.DataFrame) -> pl.DataFrame:
    """Blocks allocated in the trace and alive at each device's peak, by allocating op."""
    alive = (blocks.join(devices.select("device", "peak_pos"), on="device")
             .filter((pl.col("alloc_pos") <= pl.col("peak_pos"))
                     & (pl.col("free_pos").is_null() | (pl.col("free_pos") > pl.col("peak_pos")))))
    return (alive.group_by("device", "op", "top_op", "phase")
            .agg(blocks=pl.len(), bytes=pl.col("size").sum(), largest=pl.col("size").max())
            .sort(["device", "bytes", "op", "top_op", "phase"], descending=[False, True, False, False, False],
                  nulls_last=True))


def _steps(stepped: pl.DataFrame) -> pl.DataFrame:
    at_peak = pl.col("allocated").arg_max()
    found = stepped.filter(pl.col("step").is_not_null())
    if found.height == 0:
        return _empty(STEPS_SCHEMA)
    return (found.group_by("step", "device").agg(
        peak_allocated=pl.col("allocated").max(), peak_ts=pl.col("ts").get(at_peak),
        peak_reserved=pl.col("reserved").max(),
        allocated_at_start=pl.col("allocated").first() - pl.col("bytes").first(),
        allocated_at_end=pl.col("allocated").last(),
        **{c: pl.col(c).get(at_peak) for c in ("op", "top_op", "annotation", "phase")})
        .sort("step", "device").select([pl.col(c).cast(t) for c, t in STEPS_SCHEMA.items()]))


def _stats(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    alloc = pl.col("bytes").filter(pl.col("bytes") > 0)
    return frame.group_by(by).agg(
        allocations=(pl.col("bytes") > 0).sum().cast(pl.UInt32), bytes_allocated=alloc.sum(),
        bytes_freed=-pl.col("bytes").filter(pl.col("bytes") < 0).sum(), largest=alloc.max())


def _ops(events: pl.DataFrame, rows: _Rows) -> pl.DataFrame:
    """Self and inclusive figures per op name: each event counts for the op instance it was made in
    and every enclosing cpu_op instance on its thread (counted once per instance, so a recursive name
    counts twice)."""
    keyed = events.select("device", "op", "bytes", pl.col("cpu_op_idx").alias("inst"))
    # Self figures per instance first (integer keys: an instance's op is its cpu_op's name), then per
    # name; events outside every cpu_op are grouped by their op (annotation) directly.
    inside = keyed.filter(pl.col("inst").is_not_null())
    per_inst = _stats(inside, ["device", "inst"])
    named = per_inst.with_columns(op=rows.get("name", per_inst["inst"]))
    own = (pl.concat([named.drop("inst"), _stats(keyed.filter(pl.col("inst").is_null()), ["device", "op"])],
                     how="diagonal")
           .group_by("device", "op").agg(pl.col("allocations", "bytes_allocated", "bytes_freed").sum(),
                                         pl.col("largest").max()))
    frontier = per_inst
    levels = []
    while frontier.height:
        levels.append(frontier)
        # Each cpu_op's nearest enclosing cpu_op: the innermost cpu_op of its parent.
        up = rows.get("direct_cpu_op_idx", rows.get("parent_idx", frontier["inst"]))
        frontier = (frontier.with_columns(inst=up).filter(pl.col("inst").is_not_null())
                    .group_by("device", "inst").agg(pl.col("allocations", "bytes_allocated", "bytes_freed").sum(),
                                                    pl.col("largest").max()))
    every = pl.concat(levels) if levels else per_inst
    # Events outside every cpu_op are inside their own (annotation) row, so they count in its
    # inclusive figures too: an op name that is also an annotation's never shows incl. below self.
    outside = _stats(keyed.filter(pl.col("inst").is_null()), ["device", "op"])
    incl = (pl.concat([every.with_columns(op=rows.get("name", every["inst"])).drop("inst"), outside],
                      how="diagonal")
            .group_by("device", "op")
            .agg(pl.col("allocations", "bytes_allocated", "bytes_freed").sum(), pl.col("largest").max()))
    incl = incl.rename({k: f"incl_{k}" for k in ("allocations", "bytes_allocated", "bytes_freed", "largest")})
    out = own.join(incl, on=["device", "op"], how="full", coalesce=True).with_columns(
        pl.col("allocations", "incl_allocations").fill_null(0),
        pl.col("bytes_allocated", "bytes_freed", "incl_bytes_allocated", "incl_bytes_freed").fill_null(0))
    out = out.with_columns(pl.col("incl_allocations", "incl_bytes_allocated", "incl_bytes_freed", "incl_largest")
                           .fill_null(pl.col("allocations", "bytes_allocated", "bytes_freed", "largest")))
    out = out.with_columns(net=pl.col("bytes_allocated") - pl.col("bytes_freed"),
                           incl_net=pl.col("incl_bytes_allocated") - pl.col("incl_bytes_freed"))
    return (out.select([pl.col(c).cast(t) for c, t in OPS_SCHEMA.items()])
            .sort(["device", "incl_bytes_allocated", "op"], descending=[False, True, False]))


def _growth(stepped: pl.DataFrame) -> pl.DataFrame:
    found = stepped.filter(pl.col("step").is_not_null())
    if found.height == 0:
        return _empty(GROWTH_SCHEMA)
    per = _stats(found, ["step", "device", "op"]).with_columns(
        net=pl.col("bytes_allocated") - pl.col("bytes_freed")).filter(pl.col("net") > 0)
    return (per.sort(["step", "device", "net", "op"], descending=[False, False, True, False])
            .group_by("step", "device", maintain_order=True).head(TOP_GROWTH)
            .select([pl.col(c).cast(t) for c, t in GROWTH_SCHEMA.items()]))


def _timeline(curve: pl.DataFrame) -> pl.DataFrame:
    """At most :data:`TIMELINE_POINTS` rows per device: the highest values in each equal span of time."""
    span = (pl.col("ts").max() - pl.col("ts").min()).over("device") + 1
    bucket = ((pl.col("ts") - pl.col("ts").min().over("device")) * TIMELINE_POINTS // span)
    return (curve.with_columns(_bucket=bucket)
            .group_by("device", "_bucket").agg(pl.col("ts").min(), pl.col("allocated").max(),
                                               pl.col("reserved").max())
            .sort("device", "ts").select(list(CURVE_SCHEMA)))
