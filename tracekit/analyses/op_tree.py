"""The CPU op tree of every thread, by time nesting, and where each launch call sits in it.

Contract: :func:`build` sweeps each (pid, tid) once in time order with a stack. A span is the child
of the innermost open span that contains its start; launch calls (runtime/driver) are leaves. From
the stack it derives, for every op and every launch:

* ``cpu_op`` — the innermost enclosing ``cpu_op`` (for an op: itself if it is a cpu_op),
* ``top_op`` — the outermost enclosing ``cpu_op`` (the op the user called, e.g. ``aten::linear``),
* ``annotation`` — the innermost enclosing ``user_annotation`` other than ``ProfilerStep#N`` and
  torch.compile's own wrappers (so the user's ``mlp_fwd`` rather than ``## Call CompiledFxGraph ##``),
* ``module`` — the innermost ``nn.Module: …`` python_function, when the trace has stacks.

Nesting rather than ``External id`` because traces before PyTorch ~2.3 give kernels an External id
equal to their correlation, matching no op. Ties: at equal start the longer span is the parent;
``idx`` breaks remaining ties so the result is deterministic.

Frames returned (:class:`OpTree`):

``ops``: the trace's ops plus ``parent_idx u32?``, ``depth u32``, ``cpu_op str?``, ``top_op str?``,
``annotation str?``, ``module str?``, ``launches_gpu bool`` (its subtree contains a launch that has
GPU activity), ``direct_cpu_op_idx u32?`` (innermost cpu_op ancestor-or-self).

``launches``: the trace's launches plus ``op_idx u32?`` (innermost cpu_op), ``cpu_op str?``,
``top_op str?``, ``annotation str?``, ``module str?``, ``depth u32`` (its enclosing spans: the
timeline draws it one row below its innermost op).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import polars as pl

from tracekit.analyses.compile_ops import preop_kind
from tracekit.trace import GPU_WORK_KINDS, Trace

STEP_PREFIX = "ProfilerStep#"
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class OpTree:
    """Ops and launches annotated with their place in the per-thread op tree."""

    ops: pl.DataFrame
    launches: pl.DataFrame


def build(trace: Trace, gpu_correlations: set[int] | pl.Series | None = None) -> OpTree:
    """Nest ops and launches per thread.

    ``gpu_correlations`` are the correlation ids that have GPU activity (a set or a Series);
    launches with one of them mark every enclosing op as ``launches_gpu``. Defaults to the
    correlations in ``trace.gpu``.
    """
    if gpu_correlations is None:
        gpu_correlations = trace.gpu.filter(pl.col("kind").is_in(GPU_WORK_KINDS))["correlation"]
    correlations = (gpu_correlations if isinstance(gpu_correlations, pl.Series)
                    else pl.Series(list(gpu_correlations), dtype=pl.Int64))
    gpu_launch = trace.launches["correlation"].is_in(
        correlations.drop_nulls().unique().implode()).fill_null(False)
    ops = trace.ops.select("idx", "cat", "name", "pid", "tid", "ts", "end")
    launches = trace.launches.select(
        "idx", pl.lit("launch").alias("cat"), "name", "pid", "tid", "ts", "end"
    )
    # Row r of ``items`` is row r of the ops, then of the launches. One chunk per column: the sweep
    # gathers rows at random positions, about 9x slower across two chunks (measured on 2.1M rows).
    items = pl.concat([ops, launches], how="vertical_relaxed", rechunk=True)
    n_ops = trace.ops.height
    info = _nest(items, pl.concat([pl.repeat(False, n_ops, eager=True), gpu_launch], rechunk=True))
    launch_info = info.slice(n_ops).select(
        pl.col("direct_cpu_op_idx").alias("op_idx"), "cpu_op", "top_op", "annotation", "module", "depth")
    return OpTree(
        ops=trace.ops.hstack(info.slice(0, n_ops).select(list(_OP_COLUMNS)).cast(_OP_COLUMNS)),
        launches=trace.launches.hstack(launch_info.cast(_LAUNCH_INFO_SCHEMA)),
    )


def _dense_codes(column: pl.Series) -> pl.Series:
    """Integer codes in sort order of the values (nulls 0, first as the sort puts them)."""
    runs = column.rle().struct.field("value")
    if runs.len() < column.len() // 4:  # long runs (ops of a thread in a row): code each run once
        return _dense_codes(runs).gather(column.rle_id())
    values = column.drop_nulls().unique().sort()
    return column.replace_strict(values, pl.int_range(1, values.len() + 1, eager=True),
                                 default=0, return_dtype=pl.Int64)


def _sweep_keys(items: pl.DataFrame) -> tuple[pl.Series, pl.Series, pl.Series]:
    """``(order, thread, is_launch)``: row positions of ``items`` sorted by (pid, tid, ts, -end,
    is_launch, idx), nulls first; an integer per row that is equal exactly for rows of one
    (pid, tid); and whether each row is a launch."""
    pid, tid = _dense_codes(items["pid"]), _dense_codes(items["tid"])
    tids = int(tid.max() or 0) + 1
    thread = (pid * tids + tid).alias("thread")
    is_launch = (items["cat"] == "launch").fill_null(False)
    keys = pl.DataFrame({"thread": thread, "ts": items["ts"], "end": items["end"],
                         "is_launch": is_launch, "idx": items["idx"]})
    lo, hi = items["ts"].min(), items["ts"].max()
    span_bits = max(1, int(hi - lo).bit_length()) if hi is not None else 1
    threads = int(thread.max() or 0) + 1
    if items["ts"].null_count() == 0 and items["end"].null_count() == 0 and \
            threads.bit_length() + span_bits <= 62:
        # Pack (thread, ts) into one key and (is_launch, idx) into another: three integer keys sort
        # much faster than six.
        packed = keys.select(
            a=pl.col("thread") * (1 << span_bits) + (pl.col("ts") - lo),
            b=-pl.col("end"),
            c=pl.col("is_launch").cast(pl.Int64) * (1 << 32) + pl.col("idx").cast(pl.Int64),
        )
        order = _sort_ties_last(packed)
    else:
        order = keys.select(pl.arg_sort_by(
            ["thread", "ts", "end", "is_launch", "idx"],
            descending=[False, False, True, False, False]).alias("order")).to_series()
    return order, thread, is_launch


def _sort_ties_last(keys: pl.DataFrame) -> pl.Series:
    """``arg_sort_by`` over all columns of ``keys`` (integers, no nulls), found by sorting on the
    first column alone and then only the rows whose first key is tied (a three-key sort of all
    rows costs about three one-key sorts; ties are rare where timestamps are in ns)."""
    first = keys.columns[0]
    order = keys.select(pl.arg_sort_by(first).alias("order")).to_series()
    ordered = keys[first].gather(order)
    tied = ((ordered == ordered.shift(1)) | (ordered == ordered.shift(-1))).fill_null(False)
    if not tied.any():
        return order
    rows = order.filter(tied)  # contiguous runs of equal first keys, runs in order
    among = keys.gather(rows).select(pl.arg_sort_by(keys.columns)).to_series()
    return order.scatter(pl.int_range(order.len(), dtype=order.dtype, eager=True).filter(tied),
                         rows.gather(among))


def _nest(items: pl.DataFrame, gpu_launch: pl.Series) -> pl.DataFrame:
    """The stack sweep's results per row of ``items`` (ops, then launches with ``cat`` "launch"):
    ``idx, parent_idx, depth, direct_cpu_op_idx, cpu_op, top_op, annotation, module,
    launches_gpu`` (for a launch, ``direct_cpu_op_idx`` is its ``op_idx``). ``gpu_launch`` marks
    the rows that are launches with GPU activity.

    The sweep visits rows sorted by (pid, tid, ts, -end, is_launch, idx), pushes ops only and pops
    a frame once an item starts at or after its end. So at item ``i`` every earlier op of the
    thread with ``end > ts_i`` is still on the stack (nothing popped it) and the top is the latest
    of them: **the parent of ``i`` is the latest earlier op of its thread that ends after
    ``ts_i``**, and the stack is the parent chain (depth = its length). Everything the sweep
    derives follows from the parent chain, found here by pointer jumping: ``cand`` starts at the
    previous op and, while ``end[cand] <= ts_i``, jumps to ``cand``'s own candidate. Every op
    skipped that way ends by ``ts_i``, and a candidate never passes the parent (the parent of
    ``i`` is alive at the skipped op's start too, so that op's parent is at or after it). Each
    round shortens the remaining walk, so a few vectorised rounds replace a Python loop over every
    item. Work is on integer positions in sweep order; strings are looked up once at the end.
    """
    n = items.height
    if n == 0:
        return pl.DataFrame(schema=_OP_INFO_SCHEMA)
    pos_dtype = pl.UInt32 if n < 2**32 - 1 else pl.UInt64
    names, cats = items["name"], items["cat"]
    is_annotation = _where_named(names, cats == "user_annotation", lambda found: found.is_in(
        [name for name in found.unique().drop_nulls().to_list()
         if not name.startswith(STEP_PREFIX) and preop_kind(name) is None]))
    is_module = _where_named(names, cats == "python_function", lambda found: found.str.starts_with(MODULE_PREFIX))
    order, thread, is_launch = _sweep_keys(items)
    flags = pl.DataFrame({
        "thread": thread, "ts": items["ts"], "end": items["end"], "is_launch": is_launch,
        "is_cpu": (cats == "cpu_op").fill_null(False),
        "is_annotation": is_annotation,
        "is_module": is_module,
        "named_cpu": ((cats == "cpu_op") & names.is_not_null()).fill_null(False),
        "gpu_launch": gpu_launch,
    }).select(pl.all().gather(order))  # sweep order from here on
    own = pl.int_range(n, dtype=pos_dtype, eager=True)
    threads = flags["thread"]
    cand = flags.select(
        pl.when(~pl.col("is_launch")).then(own).shift(1).forward_fill().alias("cand")).to_series()
    # The previous op must be on the same thread (threads are contiguous in the sort order).
    cand = pl.select(pl.when(threads.gather(cand) == threads).then(cand)).to_series()
    starts, ends = flags["ts"], flags["end"]
    # A row that no earlier op of its thread outlives has no parent: settle those at once (with a
    # running maximum of the op ends) instead of walking back over every earlier top-level op.
    cand = _unless_all_ended(flags, cand)
    active = own.filter((ends.gather(cand) <= starts).fill_null(False))
    while active.len():
        jumped = cand.gather(cand.gather(active))
        cand = cand.scatter(active, jumped)
        active = active.filter((ends.gather(jumped) <= starts.gather(active)).fill_null(False))
    parent = cand

    def cpu_and_top() -> tuple[pl.Series, pl.Series]:
        is_cpu = flags["is_cpu"]
        inner_cpu = _nearest(parent, is_cpu, own)
        # top_op: the outermost cpu_op of the chain (the sweep keeps the first non-null name).
        named = flags["named_cpu"]
        inner_named = inner_cpu if named.sum() == is_cpu.sum() else _nearest(parent, named, own)
        return inner_cpu, _root(inner_named.gather(parent), own).gather(inner_named)

    def nearest_if_any(mark: pl.Series) -> pl.Series | None:
        return _nearest(parent, mark, own) if mark.any() else None

    # The passes below only read ``parent`` and ``own``; Polars releases the GIL inside its calls,
    # so two threads overlap their gathers and scatters.
    with ThreadPoolExecutor(max_workers=1) as pool:
        cpu_top = pool.submit(cpu_and_top)
        annotation = pool.submit(nearest_if_any, flags["is_annotation"])
        module = pool.submit(nearest_if_any, flags["is_module"])
        gpu = pool.submit(_with_ancestors, parent, parent.filter(flags["gpu_launch"]), n)
        depth = _depth(parent)
        (inner_cpu, top), inner_annotation = cpu_top.result(), annotation.result()
        inner_module, launches_gpu = module.result(), gpu.result()

    # Back to the rows' own order: sweep position p is row order[p].
    back = own.scatter(order, own)  # the inverse permutation

    def rows(pointer: pl.Series | None) -> pl.Series | None:
        return None if pointer is None else order.gather(pointer.gather(back))

    idxs = items["idx"]
    none = pl.Series([None], dtype=pl.String).extend_constant(None, n - 1)
    module_rows = rows(inner_module)
    annotation_rows = rows(inner_annotation)
    cpu_rows = rows(inner_cpu)
    return pl.DataFrame({
        "idx": idxs,
        "parent_idx": idxs.gather(rows(parent)),
        "depth": depth.gather(back),
        "direct_cpu_op_idx": idxs.gather(cpu_rows),
        "cpu_op": names.gather(cpu_rows),
        "top_op": names.gather(rows(top)),
        "annotation": none if annotation_rows is None else names.gather(annotation_rows),
        "module": none if module_rows is None else names.gather(module_rows).str.strip_prefix(MODULE_PREFIX),
        "launches_gpu": launches_gpu.gather(back),
    })


_OP_INFO_SCHEMA = {
    "idx": pl.UInt32, "parent_idx": pl.UInt32, "depth": pl.UInt32, "direct_cpu_op_idx": pl.UInt32,
    "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String, "module": pl.String,
    "launches_gpu": pl.Boolean,
}
_OP_COLUMNS = {k: v for k, v in _OP_INFO_SCHEMA.items() if k != "idx"}
_LAUNCH_INFO_SCHEMA = {
    "op_idx": pl.UInt32, "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String,
    "module": pl.String, "depth": pl.UInt32,
}


def _where_named(names: pl.Series, rows: pl.Series, test: Callable[[pl.Series], pl.Series]) -> pl.Series:
    """A mask: ``test`` of the names of the ``rows`` (a mask, null as false), false elsewhere and
    where ``test`` gives null. ``test`` sees only those rows' names (few of all)."""
    where = rows.fill_null(False).arg_true()
    mask = pl.repeat(False, names.len(), eager=True)
    if where.len():
        mask = mask.scatter(where, test(names.gather(where)).fill_null(False))
    return mask


def _unless_all_ended(flags: pl.DataFrame, cand: pl.Series) -> pl.Series:
    """``cand``, null where every earlier op (in sweep order) of the row's thread ends by its start.

    ``flags`` is in sweep order (threads contiguous). Ends and starts are packed with the thread
    into one key, so one running maximum over all rows never carries one thread's ends into the next.
    """
    starts, ends = flags["ts"], flags["end"]
    if cand.null_count() == cand.len() or starts.null_count() or ends.null_count():
        return cand
    lo = int(starts.min())  # type: ignore[arg-type]
    bits = max(1, int(max(int(ends.max()), int(starts.max())) - lo).bit_length())  # type: ignore[arg-type]
    threads = int(flags["thread"].max()) + 1  # type: ignore[arg-type]
    if int(ends.min()) < lo or threads.bit_length() + bits > 62:  # type: ignore[arg-type]
        return cand
    base = pl.col("thread").cast(pl.Int64) * (1 << bits) - lo
    outlived = flags.select(
        (pl.when(~pl.col("is_launch")).then(base + pl.col("end")).cum_max().shift(1).forward_fill()
         > base + pl.col("ts")).fill_null(False)).to_series()
    return pl.select(pl.when(outlived).then(cand)).to_series()


def _nearest(parent: pl.Series, mark: pl.Series, own: pl.Series) -> pl.Series:
    """Per row, the nearest ancestor-or-self position with ``mark`` (null if none): pointer jumping."""
    ptr = pl.select(pl.when(mark).then(own).otherwise(parent)).to_series()
    active = own.filter((~mark.gather(ptr)).fill_null(False))
    while active.len():
        jumped = ptr.gather(ptr.gather(active))
        ptr = ptr.scatter(active, jumped)
        active = active.filter((~mark.gather(jumped)).fill_null(False))
    return ptr


def _root(up: pl.Series, own: pl.Series) -> pl.Series:
    """Per row, the last position of the chain row -> up[row] -> … (the row itself if up is null)."""
    root = up.fill_null(own)
    active = own.filter(root != own)
    while active.len():
        jumped = root.gather(root.gather(active))
        changed = jumped != root.gather(active)
        root = root.scatter(active, jumped)
        active = active.filter(changed)
    return root


def _depth(parent: pl.Series) -> pl.Series:
    """Per row, the number of ancestors (pointer doubling over the parent links)."""
    own = pl.int_range(parent.len(), dtype=parent.dtype, eager=True)
    active = own.filter(parent.is_not_null())
    anc = parent.clone()  # scatter writes in place
    dist = parent.is_not_null().cast(pl.UInt32)
    while active.len():
        hop = anc.gather(active)
        dist = dist.scatter(active, dist.gather(active) + dist.gather(hop))
        up = anc.gather(hop)
        anc = anc.scatter(active, up)
        active = active.filter(up.is_not_null())
    return dist


def _with_ancestors(parent: pl.Series, rows: pl.Series, n: int) -> pl.Series:
    """A mask of ``rows`` and every ancestor of them."""
    marked = pl.repeat(False, n, eager=True)
    frontier = rows.drop_nulls().unique()
    while frontier.len():
        marked = marked.scatter(frontier, True)
        up = parent.gather(frontier).drop_nulls().unique()
        frontier = up.filter(~marked.gather(up))
    return marked
