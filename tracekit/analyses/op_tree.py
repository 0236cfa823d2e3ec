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
``top_op str?``, ``annotation str?``, ``module str?``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyses.compile_ops import preop_kind
from tracekit.trace import Trace

STEP_PREFIX = "ProfilerStep#"
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class OpTree:
    """Ops and launches annotated with their place in the per-thread op tree."""

    ops: pl.DataFrame
    launches: pl.DataFrame


def build(trace: Trace, gpu_correlations: set[int] | None = None) -> OpTree:
    """Nest ops and launches per thread.

    ``gpu_correlations`` are the correlation ids that have GPU activity; launches with one of them
    mark every enclosing op as ``launches_gpu``. Defaults to the correlations in ``trace.gpu``.
    """
    if gpu_correlations is None:
        gpu_correlations = set(
            trace.gpu.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))["correlation"]
            .drop_nulls().unique().to_list()
        )
    ops = trace.ops.select("idx", "cat", "name", "pid", "tid", "ts", "end")
    launches = trace.launches.select(
        "idx", pl.lit("launch").alias("cat"), "name", "pid", "tid", "ts", "end", "correlation"
    )
    items = pl.concat(
        [ops.with_columns(correlation=pl.lit(None, pl.Int64)), launches], how="vertical_relaxed"
    ).with_columns(is_launch=pl.col("cat") == "launch")
    order = _sweep_order(items)
    info = _nest(items.select(pl.all().gather(order)), gpu_correlations)
    # Back to the rows' own order (row r of ``items`` is row r of ops, then of launches).
    info = info.select(pl.all().gather(order.arg_sort()))
    n_ops = trace.ops.height
    op_info = info.slice(0, n_ops)
    launch_info = info.slice(n_ops).select(
        pl.col("direct_cpu_op_idx").alias("op_idx"), "cpu_op", "top_op", "annotation", "module")
    return OpTree(
        ops=trace.ops.hstack(op_info.select(list(_OP_COLUMNS)).cast(_OP_COLUMNS)),
        launches=trace.launches.hstack(launch_info.cast(_LAUNCH_INFO_SCHEMA)),
    )


def _sweep_order(items: pl.DataFrame) -> pl.Series:
    """Row positions of ``items`` sorted by (pid, tid, ts, -end, is_launch, idx), nulls first."""
    if items.height == 0:
        return pl.Series("order", [], dtype=pl.UInt32)
    # pid and tid as dense ranks (nulls first, as the sort puts them), so the keys are all integers.
    keys = items.select(
        pid=pl.col("pid").rank("dense").fill_null(0).cast(pl.Int64),
        tid=pl.col("tid").rank("dense").fill_null(0).cast(pl.Int64),
        ts="ts", end="end", is_launch="is_launch", idx="idx",
    )
    bounds = keys.select(pl.col("tid").max().alias("tids"), pl.col("pid").max().alias("pids"),
                         pl.col("ts").min().alias("lo"), pl.col("ts").max().alias("hi")).row(0)
    tids, pids, lo, hi = bounds
    span_bits = max(1, int(hi - lo).bit_length()) if hi is not None else 1
    threads = (pids + 1) * (tids + 1)
    if keys["ts"].null_count() == 0 and keys["end"].null_count() == 0 and \
            threads.bit_length() + span_bits <= 62:
        # Pack (thread, ts) into one key and (is_launch, idx) into another: three integer keys sort
        # much faster than six.
        packed = keys.select(
            a=((pl.col("pid") * (tids + 1) + pl.col("tid")) * (1 << span_bits)) + (pl.col("ts") - lo),
            b=-pl.col("end"),
            c=pl.col("is_launch").cast(pl.Int64) * (1 << 32) + pl.col("idx").cast(pl.Int64),
        )
        return packed.select(pl.arg_sort_by(["a", "b", "c"]).alias("order")).to_series()
    return items.select(pl.arg_sort_by(
        ["pid", "tid", "ts", "end", "is_launch", "idx"],
        descending=[False, False, False, True, False, False]).alias("order")).to_series()


def _nest(items: pl.DataFrame, gpu_correlations: set[int]) -> pl.DataFrame:
    """The stack sweep's results per row of ``items`` (sorted by (pid, tid, ts, -end, is_launch,
    idx)): ``idx, parent_idx, depth, direct_cpu_op_idx, cpu_op, top_op, annotation, module,
    launches_gpu`` (for a launch, ``direct_cpu_op_idx`` is its ``op_idx``).

    The sweep pushes ops only and pops a frame once an item starts at or after its end, so at item
    ``i`` every earlier op of the thread with ``end > ts_i`` is still on the stack (nothing popped
    it) and the top is the latest of them: **the parent of ``i`` is the latest earlier op of its
    thread that ends after ``ts_i``**, and the stack is the parent chain (depth = its length).
    Everything the sweep derives follows from the parent chain, found here by pointer jumping:
    ``cand`` starts at the previous op and, while ``end[cand] <= ts_i``, jumps to ``cand``'s own
    candidate. Every op skipped that way ends by ``ts_i``, and a candidate never passes the parent
    (the parent of ``i`` is alive at the skipped op's start too, so that op's parent is at or after
    it). Each round shortens the remaining walk, so a few vectorised rounds replace a Python loop
    over every item.
    """
    n = items.height
    if n == 0:
        return pl.DataFrame(schema=_OP_INFO_SCHEMA)
    pos_dtype = pl.UInt32 if n < 2**32 - 1 else pl.UInt64
    own = pl.int_range(n, dtype=pos_dtype, eager=True)
    is_op = ~items["is_launch"]
    prev = items.select(
        _thread=(pl.col("pid").ne_missing(pl.col("pid").shift(1))
                 | pl.col("tid").ne_missing(pl.col("tid").shift(1))).cum_sum(),
        _prev=pl.when(~pl.col("is_launch")).then(own).shift(1).forward_fill(),
    )
    threads = prev["_thread"]
    cand = prev["_prev"]
    # The previous op must be on the same thread (threads are contiguous in the sort order).
    cand = pl.select(pl.when(threads.gather(cand) == threads).then(cand)).to_series()
    starts = items["ts"]
    ends = items["end"]
    active = own.filter((ends.gather(cand) <= starts).fill_null(False))
    while active.len():
        jumped = cand.gather(cand.gather(active))
        cand = cand.scatter(active, jumped)
        active = active.filter((ends.gather(jumped) <= starts.gather(active)).fill_null(False))
    parent = cand

    names = items["name"]
    cats = items["cat"]
    is_cpu = (cats == "cpu_op").fill_null(False)
    annotation_names = [
        name for name in items.filter(pl.col("cat") == "user_annotation")["name"].unique().drop_nulls()
        .to_list() if not name.startswith(STEP_PREFIX) and preop_kind(name) is None
    ]
    is_annotation = ((cats == "user_annotation") & names.is_in(annotation_names)).fill_null(False)
    is_module = ((cats == "python_function") & names.str.starts_with(MODULE_PREFIX)).fill_null(False)

    inner_cpu = _nearest(parent, is_cpu, own)
    inner_annotation = _nearest(parent, is_annotation, own) if is_annotation.any() else _nulls(n, pos_dtype)
    inner_module = _nearest(parent, is_module, own) if is_module.any() else _nulls(n, pos_dtype)
    # top_op: the outermost cpu_op of the chain (the sweep keeps the first non-null name).
    is_named_cpu = is_cpu & names.is_not_null()
    inner_named = inner_cpu if names.filter(is_cpu).null_count() == 0 else _nearest(parent, is_named_cpu, own)
    top = _root(inner_named.gather(parent), own).gather(inner_named)

    gpu_launch = ~is_op & items["correlation"].is_in(list(gpu_correlations)).fill_null(False)
    idxs = items["idx"]
    return pl.DataFrame({
        "idx": idxs,
        "parent_idx": idxs.gather(parent),
        "depth": _depth(parent),
        "direct_cpu_op_idx": idxs.gather(inner_cpu),
        "cpu_op": names.gather(inner_cpu),
        "top_op": names.gather(top),
        "annotation": names.gather(inner_annotation),
        "module": names.gather(inner_module).str.strip_prefix(MODULE_PREFIX),
        "launches_gpu": _with_ancestors(parent, parent.filter(gpu_launch), n),
    })


_OP_INFO_SCHEMA = {
    "idx": pl.UInt32, "parent_idx": pl.UInt32, "depth": pl.UInt32, "direct_cpu_op_idx": pl.UInt32,
    "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String, "module": pl.String,
    "launches_gpu": pl.Boolean,
}
_OP_COLUMNS = {k: v for k, v in _OP_INFO_SCHEMA.items() if k != "idx"}
_LAUNCH_INFO_SCHEMA = {
    "op_idx": pl.UInt32, "cpu_op": pl.String, "top_op": pl.String, "annotation": pl.String,
    "module": pl.String,
}


def _nulls(n: int, dtype: pl.DataType) -> pl.Series:
    return pl.Series([None], dtype=dtype).extend_constant(None, n - 1)


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
