"""Kernels inside a ``record_function`` annotation: what ``optimizer_unfused`` and ``zero_grad_fill``
share (``Optimizer.step``, ``Optimizer.zero_grad``).

Contract: :func:`in_annotation` returns the steady kernels (attributed GPU frame's columns) whose
annotation starts with a prefix; :func:`by_op_inside` groups them into evidence rows
(:mod:`tracekit.findings.evidence`) by annotation and op.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import grouped, steps_of
from tracekit.findings.model import Context


def in_annotation(context: Context, prefix: str) -> pl.DataFrame:
    """The steady steps' kernels inside an annotation whose name starts with ``prefix``."""
    return context.steady_gpu.filter(
        (pl.col("kind") == "kernel") & pl.col("annotation").fill_null("").str.starts_with(prefix))


def by_op_inside(context: Context, kernels: pl.DataFrame) -> tuple[pl.DataFrame, list[int]]:
    """Kernels inside an annotation as evidence rows by op, and the steps they occur in."""
    rows = grouped(context, kernels, ["annotation", "cpu_op"], "op", name="cpu_op", detail="annotation")
    rows = rows.with_columns(detail=pl.lit("inside ") + pl.col("detail"))
    return rows, steps_of(rows)
