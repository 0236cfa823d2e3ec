"""Kernels grouped by name with their class, library, decoded fields and time.

Contract: :func:`analyze` takes the attributed ``gpu`` frame (any subset of rows) and returns
``name str, kernel_class str, library str, kind str, count u32, total_ns i64, mean_ns i64,
launch_api str?, cpu_op str?, decoded str, class_total_ns i64`` sorted by ``total_ns`` desc then
``name``; ``class_total_ns`` is the total of the row's class (the order the report lists classes
in). Where a name was launched by several APIs or ops, the most frequent one is shown (ties:
alphabetical).
"""

from __future__ import annotations

import polars as pl

KERNEL_SCHEMA = {
    "name": pl.String, "kernel_class": pl.String, "library": pl.String, "kind": pl.String,
    "count": pl.UInt32, "total_ns": pl.Int64, "mean_ns": pl.Int64, "launch_api": pl.String,
    "cpu_op": pl.String, "decoded": pl.String, "class_total_ns": pl.Int64,
}


def _mode(column: str) -> pl.Expr:
    # Most frequent non-null value; sort first so ties resolve alphabetically (deterministic).
    return pl.col(column).drop_nulls().sort().mode().sort().first()


def analyze(gpu: pl.DataFrame) -> pl.DataFrame:
    """Group GPU activity (kernels, memcpy, memset) by name."""
    if gpu.height == 0:
        return pl.DataFrame(schema=KERNEL_SCHEMA)
    return (
        gpu.group_by("name")
        .agg(
            pl.col("kernel_class").first(), pl.col("library").first(), pl.col("kind").first(),
            count=pl.len().cast(pl.UInt32), total_ns=pl.col("dur").sum(),
            mean_ns=pl.col("dur").mean().round(0).cast(pl.Int64),
            launch_api=_mode("launch_api"), cpu_op=_mode("cpu_op"),
            decoded=pl.col("decoded").first(),
        )
        .sort(["total_ns", "name"], descending=[True, False])
        .with_columns(class_total_ns=pl.col("total_ns").sum().over("kernel_class"))
        .select(list(KERNEL_SCHEMA))
        .cast(KERNEL_SCHEMA)  # type: ignore[arg-type]
    )
