"""Copy work by the op that asked for it: what ``hot_path_copy`` and ``gemm_bias_seed`` share (copy
kernels and device-to-device memcpys of the steady steps, split by whether a GEMM op launched a
memcpy).

Contract: :func:`copy_work` returns the steady GPU rows of copy work (the attributed GPU frame's
columns); :func:`copy_rows` groups them into evidence rows (:mod:`tracekit.findings.evidence`) of at
least :data:`COPY_MIN_NS` per step; :func:`copy_finding` makes a rule's finding of them.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, enough_steps, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Extra copies: copy work of one op at least this long per step (a scalar copy is free).
COPY_MIN_NS = 10_000

#: The GEMM ops whose device-to-device memcpy seeds their output (``gemm_bias_seed``, not a hot-path copy).
GEMM_OPS = ("aten::addmm", "aten::baddbmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear")


def copy_work(context: Context) -> pl.DataFrame:
    """Copy kernels and device-to-device memcpys of the steady steps."""
    kernels = context.steady_gpu.filter((pl.col("kind") == "kernel") & (pl.col("kernel_class") == "copy"))
    d2d = context.in_steady(context.memcpys).filter(pl.col("direction") == "DtoD")
    return pl.concat([kernels, d2d.drop("direction", "src", "dst")])


def copy_rows(context: Context, copies: pl.DataFrame, op: pl.Expr, where: pl.Expr) -> pl.DataFrame:
    """Copies by the op that asked for them (``op``), with ``where`` (the other end of its op chain)."""
    traffic = context.traffic.select("idx", "bytes_written")
    with_bytes = copies.join(traffic, on="idx", how="left").with_columns(
        moved=pl.coalesce(pl.col("bytes"), pl.col("bytes_written")), op=op,
        where=pl.col("name") + pl.lit(" via ") + where.fill_null("no op"))
    rows = grouped(context, with_bytes, ["op", "name"], "op", name="op", bytes_col="moved", detail="where")
    return rows.filter(pl.col("ns_per_step") >= COPY_MIN_NS)


def copy_finding(context: Context, rows: pl.DataFrame, rule: Rule) -> list[Finding]:
    """``rule``'s finding of the copy rows, priced by the copies' GPU time."""
    steps = steps_of(rows)
    if not enough_steps(context, steps):
        return []
    kept = rows["name"].to_list()
    cost = float(rows["ns_per_step"].sum())
    return [rule.finding(steps, as_evidence(rows), cost, cost,
                         "the copies' GPU time (a copy not made costs nothing)", resource="gpu",
                         ops=len(kept), bytes_per_step=int(rows["bytes_per_step"].fill_null(0).sum()))]
