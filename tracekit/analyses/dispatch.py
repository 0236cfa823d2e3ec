"""CPU-side dispatch: ops that launch nothing, torch.compile pre-ops, and the op → kernel paths.

Contracts (all frames sorted deterministically, ties broken by name or ``idx``):

:func:`zero_kernel_ops` — ``cpu_op`` spans (other than torch.compile's wrappers, see
:mod:`tracekit.analyses.compile_ops`) whose whole subtree launches no GPU activity
(``aten::t``, ``aten::transpose``, ``aten::view``, ``aten::as_strided``…), per name:
``name str, count u32, cpu_ns i64`` (inclusive CPU time), sorted by ``cpu_ns`` desc then name.

:func:`compile_preops` — the wrappers torch.compile runs around a compiled graph on every call,
per step and name: ``step i64?, name str, kind str, count u32, cpu_ns i64, graph_hash str?``.

:func:`launch_paths` — one row per kernel in launch order: ``step i64?, scope str?, top_op str?,
cpu_op str?, kernel str, kernel_class str, launch str, dur_ns i64`` where ``launch`` is the launch
API plus the hidden calls before it, e.g. ``cuLaunchKernelEx (+ memset)``.
"""

from __future__ import annotations

import polars as pl

from tracekit.analyses.compile_ops import COMPILE_PREOPS, GRAPH_HASH, preop_kind

_AUX_SHORT = {
    "cudaMemsetAsync": "memset", "hipMemsetAsync": "memset",
    "cudaMemcpyAsync": "memcpy", "hipMemcpyAsync": "memcpy",
}

ZERO_KERNEL_SCHEMA = {"name": pl.String, "count": pl.UInt32, "cpu_ns": pl.Int64}
PREOP_SCHEMA = {"step": pl.Int64, "name": pl.String, "kind": pl.String, "count": pl.UInt32,
                "cpu_ns": pl.Int64, "graph_hash": pl.String}
PATH_SCHEMA = {"step": pl.Int64, "scope": pl.String, "top_op": pl.String, "cpu_op": pl.String,
               "kernel": pl.String, "kernel_class": pl.String, "launch": pl.String,
               "dur_ns": pl.Int64}


def zero_kernel_ops(ops: pl.DataFrame) -> pl.DataFrame:
    """Aggregate cpu_ops with ``launches_gpu == False`` (``ops`` from the op tree, any filter)."""
    # Aggregate first (the projection keeps the filter to two columns), then drop the few names
    # that are torch.compile's wrappers: they are reported as compile pre-ops, not as the user's
    # dispatch.
    quiet = (ops.lazy().filter((pl.col("cat") == "cpu_op") & ~pl.col("launches_gpu"))
             .group_by("name").agg(count=pl.len().cast(pl.UInt32), cpu_ns=pl.col("dur").sum())
             .collect())
    wrappers = [n for n in quiet["name"].to_list() if n is not None and preop_kind(n) is not None]
    quiet = quiet.filter(~pl.col("name").is_in(wrappers))
    if quiet.height == 0:
        return pl.DataFrame(schema=ZERO_KERNEL_SCHEMA)
    return (
        quiet.sort(["cpu_ns", "name"], descending=[True, False])
        .cast(ZERO_KERNEL_SCHEMA)  # type: ignore[arg-type]
    )


def compile_preops(ops: pl.DataFrame) -> pl.DataFrame:
    """torch.compile wrapper ops per step (``ops`` must carry a ``step`` column)."""
    kind = pl.lit(None, pl.String)
    for label, pattern in reversed(COMPILE_PREOPS):
        kind = pl.when(pl.col("name").str.contains(pattern)).then(pl.lit(label)).otherwise(kind)
    # The patterns run over the few distinct names, not over every op.
    kinds = ops.select(pl.col("name").unique()).with_columns(kind=kind).filter(pl.col("kind").is_not_null())
    if kinds.height == 0:
        return pl.DataFrame(schema=PREOP_SCHEMA)
    found = ops.select("step", "name", "dur", "ts").join(kinds, on="name", how="inner")
    return (
        found.group_by("step", "name", "kind")
        .agg(count=pl.len().cast(pl.UInt32), cpu_ns=pl.col("dur").sum(), first=pl.col("ts").min())
        .with_columns(graph_hash=pl.col("name").str.extract(GRAPH_HASH, 1))
        .sort(["step", "first", "name"], nulls_last=True)
        .drop("first")
        .select(list(PREOP_SCHEMA))
        .cast(PREOP_SCHEMA)  # type: ignore[arg-type]
    )


def launch_label(api: str | None, aux_before: str | None) -> str:
    """``cuLaunchKernelEx (+ memset)``: the launch API and the hidden calls issued just before it."""
    label = api or "(no launch found)"
    if aux_before:
        extras = []
        for call in aux_before.split("+"):
            short = _AUX_SHORT.get(call, "occupancy query" if call.startswith("cudaOccupancy") else call)
            if short not in extras:
                extras.append(short)
        label += " (+ " + ", ".join(extras) + ")"
    return label


def launch_paths(gpu: pl.DataFrame) -> pl.DataFrame:
    """The blog's "op | CPU op | kernel | launch" table for the kernels in ``gpu``."""
    kernels = gpu.filter(pl.col("kind") == "kernel").sort(
        [pl.coalesce("launch_ts", "ts"), "ts", "idx"])
    if kernels.height == 0:
        return pl.DataFrame(schema=PATH_SCHEMA)
    labels = [launch_label(a, b) for a, b in zip(kernels["launch_api"].to_list(),
                                                  kernels["aux_before"].to_list())]
    return kernels.select(
        "step",
        pl.coalesce("module", "annotation").alias("scope"),
        "top_op", "cpu_op",
        pl.col("name").alias("kernel"),
        "kernel_class",
        pl.Series("launch", labels, dtype=pl.String),
        pl.col("dur").alias("dur_ns"),
    ).cast(PATH_SCHEMA)  # type: ignore[arg-type]


def graph_hashes(preops: pl.DataFrame) -> list[str]:
    """Distinct compiled-graph hashes, in first-seen order."""
    seen: list[str] = []
    for h in preops["graph_hash"].drop_nulls().to_list():
        if h not in seen:
            seen.append(h)
    return seen
