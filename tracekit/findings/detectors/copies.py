"""Copy work by its cause: what the copy rules share (``hot_path_copy``, ``dtype_cast``,
``kv_cache_cat``, ``conv_layout_transpose``, ``ddp_bucket_copy``, ``gemm_bias_seed``).

Contract: :func:`copy_work` returns the steady GPU rows of copy work — kernels of class ``copy`` and
device-to-device memcpys — with the attributed GPU frame's columns plus ``chain`` (String: the names
of the ``cpu_op`` and ``user_annotation`` spans around the op that launched it, outermost first,
``ProfilerStep#N`` left out, joined by ``" > "``) and ``cause`` (String, one of :data:`CAUSES`: the
first row of :func:`cause_table` that matches). :func:`copy_rows` groups rows into evidence rows
(:mod:`tracekit.findings.evidence`) by the op the model called and the kernel; :func:`copy_finding`
makes a rule's finding of them when they cost at least the rule's share of the GPU's busy time,
aggregated over the steady window.

Why a cause per copy: the same kernel (``direct_copy_kernel_cuda``, ``CatArrayBatchedCopy``) does a
dtype cast, a KV cache's growth, a layout change or a collective's unpacking, and each has its own fix
(or none). The cause is read from the ops around the launch (the op tree) and the kernel's name, so
a rule names only the copies its fix removes.

Why ``gpu`` is the resource of every copy rule: a copy kernel or a copy-engine transfer occupies the
GPU (HBM bandwidth) for its duration and nothing else; removing the copy removes that GPU time. The
host's share (one launch per copy) is small beside it and is not claimed; in a host-bound step the
wall price (:mod:`tracekit.findings.wall`) is then ≈ 0, as it should be.
"""

from __future__ import annotations

import weakref

import polars as pl

from tracekit.findings.evidence import as_evidence, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: A copy rule fires when its copies take at least this share of the median steady step's GPU busy
#: time, summed over the steady window: 1 % is the run-to-run spread of a step's GPU time, so less
#: could not be measured once removed; relative to the step, not a fixed time, so a 2 MiB
#: ``.contiguous()`` of 8.8 µs in a 220 µs GPU step (4 %) counts and 10 µs of a 100 ms step does not.
COPY_MIN_BUSY_SHARE = 0.01

#: The GEMM ops whose device-to-device memcpy seeds their output (``gemm_bias_seed``, not a hot-path copy).
GEMM_OPS = ("aten::addmm", "aten::baddbmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear")

#: Copy kernels that are no removable copy, whatever their class says, by kernel name: a serving
#: engine's KV-cache writes and gathers (the classifier's ``custom_op.kv_cache`` rule: vLLM
#: ``reshape_and_cache_flash_kernel`` writes the step's keys into the paged cache — the op's purpose),
#: FBGEMM's ``permute_*`` kernels (reordering jagged sparse features by rank for the all-to-all), and
#: TransformerEngine's fp8 ``*cast_transpose*`` kernels (quantising and transposing in one pass, the
#: cheapest way to feed an fp8 GEMM).
NOT_A_COPY_PATTERN = r"(?i)fbgemm\w*::permute_|cast_(?:and_)?transpose"
#: Ops and annotations of compiled graphs and CUDA-graph trees: copies inside them are Inductor's or the
#: graph runner's (a cudagraph tree copies its inputs into static buffers before each replay) — the
#: model's code has no copy to drop there, so they get no copy rule (they need their own reasoning).
COMPILED_PATTERN = (r"(?i)Torch-Compiled Region|CompiledFunction|CompiledFxGraph|cudagraph|"
                    r"## Call |inductor")
#: Spans of collectives and of the exchanges built on them (DTensor ``Redistribute``, DLRM's
#: ``All2All_*`` autograd functions, TorchRec awaitables, FSDP's copy-in/out around its all-gathers and
#: reduce-scatters, c10d/NCCL ops): the cat/clone kernels inside reassemble shards or unpack exchange
#: buffers — part of the communication, not a copy to drop.
COLLECTIVE_PATTERN = (r"(?i)\bnccl|rccl|c10d::|record_param_comms|Redistribute|All2All|all_to_all|all2all|"
                      r"all_gather|allgather|reduce_scatter|Awaitable|_functional_collectives|FSDP")
#: cuDNN's and MIOpen's layout transposes around a convolution (NCHW tensors fed to NHWC kernels).
CONV_TRANSPOSE_PATTERN = (r"(?i)nchwToNhwc|nhwcToNchw|NCHW2NHWC|NHWC2NCHW|batched_transpose|"
                          r"general_4d_reorder")
#: Ops that convert a dtype (``aten::to``/``_to_copy`` and the autograd node that casts gradients back).
CAST_PATTERN = r"aten::_?to(?:_copy)?\b|aten::type_as|ToCopyBackward|aten::(?:half|float|bfloat16|double)\b"
#: Kernels that convert while they copy: ATen's casting loads/stores (``LoadWithCast``/``StoreWithCast``,
#: ``float -> bf16`` as ``bfloat16_copy_kernel_cuda``), MIOpen's ``SubTensorOpWithCastTensor``. A copy
#: kernel under ``aten::to`` without them (``gpu_kernel_impl_nocast``) changes no dtype: it stages a
#: device move or a memory-format change.
CONVERTING_KERNEL_PATTERN = r"WithCast|(?:bfloat16|float16|half|float8\w*|float|double)_copy_kernel"
#: Ops that grow a tensor by concatenation.
CAT_OPS = ("aten::cat", "aten::_cat", "aten::stack", "aten::hstack", "aten::vstack", "aten::concat",
           "aten::concatenate")
#: A layout copy the model's code asked for: ``.contiguous()``, a ``reshape``/``flatten`` of a view that
#: cannot stay a view (it clones), ``.clone()`` called by the model itself, and the copy AccumulateGrad
#: makes when a gradient arrives in another layout than its parameter (it cannot take it as ``.grad``).
LAYOUT_PATTERN = (r"aten::contiguous|aten::(?:reshape|flatten|unflatten) > aten::clone|"
                  r"(?:^|> )torch::autograd::AccumulateGrad > aten::copy_")
#: ... and ``.clone()`` when it is the op the model called (a clone inside another op is that op's own).
LAYOUT_USER_OPS = ("aten::clone", "aten::contiguous")
#: DDP's reducer copying a gradient into its bucket: a copy run by AccumulateGrad's post-hook (inside
#: ``evaluate_function: AccumulateGrad`` but not inside the node itself) in a process that runs DDP.
DDP_BUCKET_PATTERN = r"evaluate_function: torch::autograd::AccumulateGrad > aten::copy_"
#: Names that show a process runs DistributedDataParallel.
DDP_MARK_PATTERN = r"DistributedDataParallel|c10d::allreduce_|nccl:all_reduce"

#: The causes, in the order :func:`cause_table` tries them (a copy that no row matches is ``other``: no rule).
CAUSES = ("gemm_seed", "not_a_copy", "compiled", "collective", "conv_layout", "ddp_bucket", "cast", "transfer",
          "cat", "layout", "other")


def cause_table(ddp: bool) -> list[tuple[str, pl.Expr]]:
    """(cause, condition) rows, first match wins; ``ddp``: the process runs DDP."""
    chain, name = pl.col("chain"), pl.col("name")
    return [
        ("gemm_seed", (pl.col("kind") == "memcpy") & pl.col("cpu_op").is_in(GEMM_OPS)),
        ("not_a_copy", (pl.col("rule") == "custom_op.kv_cache") | name.str.contains(NOT_A_COPY_PATTERN)),
        ("compiled", chain.str.contains(COMPILED_PATTERN) | name.str.starts_with("triton")
         | (pl.col("launch_api").fill_null("") == "cudaGraphLaunch")),
        ("collective", chain.str.contains(COLLECTIVE_PATTERN)),
        ("conv_layout", name.str.contains(CONV_TRANSPOSE_PATTERN) & chain.str.contains(r"(?i)conv|cudnn|miopen")),
        ("ddp_bucket", pl.lit(ddp) & chain.str.contains(DDP_BUCKET_PATTERN)),
        ("cast", (pl.col("kind") == "kernel") & chain.str.contains(CAST_PATTERN)
         & name.str.contains(CONVERTING_KERNEL_PATTERN)),
        # .to() that converts no dtype: a device move staged through a contiguous copy, or a memory format.
        ("transfer", chain.str.contains(CAST_PATTERN)),
        ("cat", pl.col("cpu_op").is_in(CAT_OPS)),
        ("layout", chain.str.contains(LAYOUT_PATTERN) | user_op().is_in(LAYOUT_USER_OPS)),
    ]


def chains(context: Context, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (GPU rows with ``op_idx``) with ``chain``: the cpu_op and user_annotation spans that
    contain each row's op on its thread, outermost first (``ProfilerStep#N`` left out).

    Walked up the op tree's parent links, one level per step of the walk, for one op per signature
    (a join on thread and time containment instead grows with the square of the ops of a thread: tens
    of GB on a 60 MB trace)."""
    tree = context.tree_ops.select(pl.col("parent_idx").cast(pl.Int64), "name", "cat")
    ids = context.tree_ops["idx"].cast(pl.Int64)
    order = ids.arg_sort()  # the ids in order, to binary-search (sorting the whole frame costs more)
    idx = ids.gather(order)
    # One op stands for every op of its signature (name, depth and the names of its outermost and
    # innermost enclosing ops and annotation): the same line of the model in another step has the
    # same spans around it, and a big trace repeats each such op once per step.
    signature = ["name", "depth", "top_op", "cpu_op", "annotation"]
    ops = (rows.select(pl.col("op_idx").cast(pl.Int64).alias("op")).drop_nulls().unique()
           .join(context.tree_ops.select(pl.col("idx").cast(pl.Int64).alias("op"), *signature), on="op", how="left"))
    ops = ops.with_columns(rep=pl.col("op").min().over(signature))
    current = ops.select(pl.col("rep").unique().alias("op")).with_columns(at=pl.col("op"))
    found, level = [], 0
    while current.height:
        # Each level gathers the few rows it needs by binary search in the sorted ids, instead of
        # joining against the whole tree (millions of ops on a big trace).
        at = idx.search_sorted(current["at"])
        hit = (at < idx.len()) & (idx.gather(at.clip(0, max(idx.len() - 1, 0))) == current["at"])
        current = pl.concat([current.filter(hit).select("op"), tree.gather(order.gather(at.filter(hit)))],
                            how="horizontal")
        found.append(current.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"])
                                    & ~pl.col("name").str.starts_with("ProfilerStep#"))
                     .select("op", "name", level=pl.lit(level)))
        current = current.select("op", at="parent_idx").drop_nulls()
        level += 1
    if not found or sum(f.height for f in found) == 0:
        return rows.with_columns(chain=pl.lit("", pl.String))
    by_rep = (pl.concat(found).sort(["op", "level"], descending=[False, True])
              .group_by("op", maintain_order=True).agg(pl.col("name").str.join(" > ").alias("chain")))
    named = ops.select("op", "rep").join(by_rep.rename({"op": "rep"}), on="rep", how="left").drop("rep")
    return (rows.with_columns(pl.col("op_idx").cast(pl.Int64).alias("_op"))
            .join(named, left_on="_op", right_on="op", how="left").drop("_op")
            .with_columns(pl.col("chain").fill_null("")))


def runs_ddp(context: Context) -> bool:
    """Whether the trace's process runs DistributedDataParallel (its forward span or an all-reduce)."""
    return context.trace.ops.select(pl.col("name").str.contains(DDP_MARK_PATTERN).any()).item() or False


#: The last context's copy work: six rules read it, and the op-tree join behind ``chain`` is the
#: costly part (a weak reference, so the cache never keeps a trace alive).
_LAST: list = [None, None]


def copy_work(context: Context) -> pl.DataFrame:
    """Copy kernels and device-to-device memcpys of the steady steps, with ``chain`` and ``cause``."""
    if _LAST[0] is not None and _LAST[0]() is context:
        return _LAST[1]
    work = _copy_work(context)
    _LAST[:] = [weakref.ref(context), work]
    return work


def _copy_work(context: Context) -> pl.DataFrame:
    kernels = context.steady_gpu.filter((pl.col("kind") == "kernel") & (pl.col("kernel_class") == "copy"))
    d2d = context.in_steady(context.memcpys).filter(pl.col("direction") == "DtoD")
    work = pl.concat([kernels, d2d.drop("direction", "src", "dst")])
    if work.height == 0:
        return work.with_columns(chain=pl.lit("", pl.String), cause=pl.lit("other", pl.String))
    work = chains(context, work)
    cause = pl.lit("other", pl.String)
    for name, condition in reversed(cause_table(runs_ddp(context))):
        cause = pl.when(condition.fill_null(False)).then(pl.lit(name)).otherwise(cause)
    return work.with_columns(cause=cause)


def user_op() -> pl.Expr:
    """The op the model called: the outermost cpu_op, autograd's ``evaluate_function:`` prefix dropped."""
    return pl.col("top_op").str.replace(r"^autograd::engine::evaluate_function: ", "")


def copy_rows(context: Context, copies: pl.DataFrame, op: pl.Expr, where: pl.Expr) -> pl.DataFrame:
    """Copies by the op that asked for them (``op``) and kernel, with ``where`` (the other end of
    its op chain) as detail; every row, largest first."""
    traffic = context.traffic.select("idx", "bytes_written")
    with_bytes = copies.join(traffic, on="idx", how="left").with_columns(
        moved=pl.coalesce(pl.col("bytes"), pl.col("bytes_written")), op=op,
        where=pl.col("name") + pl.lit(" via ") + where.fill_null("no op"))
    return grouped(context, with_bytes, ["op", "name"], "op", name="op", bytes_col="moved", detail="where")


def median_busy_ns(context: Context) -> float:
    """The median GPU busy time of the steady steps (ns)."""
    units = context.decomposition.units.filter(pl.col("step").is_in(context.steady))
    return float(units["gpu_busy_ns"].median() or 0) if units.height else 0.0


def costs_share(context: Context, steps: list[int], ns_per_step: float, share: float) -> bool:
    """Aggregate over the steady window: copies seen in ``steps`` (any steady ones) that cost, averaged
    over every steady step, at least ``share`` of the median steady GPU busy time."""
    return bool(set(steps) & set(context.steady)) and ns_per_step > 0 and \
        ns_per_step >= share * median_busy_ns(context)


def copy_finding(context: Context, rows: pl.DataFrame, rule: Rule, *, share: float = COPY_MIN_BUSY_SHARE,
                 saving: float | None = None, basis: str = "the copies' GPU time (a copy not made costs nothing)",
                 ) -> list[Finding]:
    """``rule``'s finding of the copy rows when they cost at least ``share`` of GPU busy, priced by
    the copies' GPU time (``saving`` when the fix saves less than all of it)."""
    steps = steps_of(rows)
    cost = float(rows["ns_per_step"].sum()) if rows.height else 0.0
    if not costs_share(context, steps, cost, share):
        return []
    busy = median_busy_ns(context)
    return [rule.finding(steps, as_evidence(rows), cost, cost if saving is None else saving, basis,
                         resource="gpu", ops=rows.height,
                         bytes_per_step=int(rows["bytes_per_step"].fill_null(0).sum()),
                         busy_share=round(cost / busy, 4) if busy else None)]


def of_cause(context: Context, cause: str) -> pl.DataFrame:
    """The steady copy work of one cause (:data:`CAUSES`)."""
    work = copy_work(context)
    return work.filter(pl.col("cause") == cause)


def cause_finding(context: Context, cause: str, rule: Rule, basis: str) -> list[Finding]:
    """``rule``'s finding of the copies of ``cause``, by the op the model called and kernel, priced by
    their GPU time (the fix removes them all)."""
    copies = of_cause(context, cause)
    if copies.height == 0:
        return []
    return copy_finding(context, copy_rows(context, copies, user_op(), pl.col("cpu_op")), rule, basis=basis)
