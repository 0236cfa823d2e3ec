"""What detectors share: frames grouped into evidence rows, the rows as :class:`Evidence`, the steps
they cover, and the step-share test every per-step rule applies.

Contract: figures are per step, taken over the *steady* steps of the :class:`Context`
(:func:`tracekit.analyses.steps.steady_steps`; all steps when none is steady). An evidence-row frame
(what :func:`grouped` returns) has one row per group: the ``by`` columns, ``steps`` (List(Int64),
the distinct steps), ``first_step``, ``first_ts`` (Int64), ``per_step`` (Float64), ``ns_per_step``
(Float64), ``bytes_per_step`` (Float64, null when not counted), ``detail`` (String), ``role``
(String) and ``name`` (String), sorted by time per step (largest first), then name.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.model import Context, Evidence

#: A rule about steps fires when at least this share of the steady steps shows it (one odd step
#: out of three is noise, not a property of the loop).
MIN_STEP_SHARE = 0.5


def enough_steps(context: Context, steps: list[int]) -> bool:
    """Whether ``steps`` cover at least :data:`MIN_STEP_SHARE` of the steady steps (and any)."""
    return len(set(steps) & set(context.steady)) >= MIN_STEP_SHARE * len(context.steady) and bool(steps)


def grouped(context: Context, frame: pl.DataFrame, by: list[str], role: str, *,
            name: str, dur: str = "dur", bytes_col: str | None = None,
            detail: str | None = None, count: str | None = None) -> pl.DataFrame:
    """``frame`` (rows in steady steps) grouped by ``by``: steps, first step/ts, count (rows, or
    distinct ``count`` values), time and bytes per step, the distinct ``detail`` values joined;
    sorted by time."""
    n = context.n
    aggs = [pl.col("step").unique().sort().alias("steps"), pl.col("step").first().alias("first_step"),
            pl.col("ts").min().alias("first_ts"), ((pl.col(count).n_unique() if count else pl.len()) / n).alias("per_step"),
            (pl.col(dur).sum() / n).alias("ns_per_step")]
    aggs.append((pl.col(bytes_col).sum() / n).alias("bytes_per_step") if bytes_col
                else pl.lit(None, pl.Float64).alias("bytes_per_step"))
    aggs.append(pl.col(detail).drop_nulls().unique(maintain_order=True).str.join(" + ").alias("detail") if detail
                else pl.lit(None, pl.String).alias("detail"))
    return (frame.sort("ts").group_by(by, maintain_order=True).agg(aggs)
            .with_columns(role=pl.lit(role), name=pl.col(name).fill_null("(no op)"))
            .sort(["ns_per_step", "name"], descending=[True, False]))


def as_evidence(rows: pl.DataFrame) -> list[Evidence]:
    """Evidence-row frame (module docstring) → :class:`Evidence`, in row order."""
    return [Evidence(role=r["role"], name=r["name"], step=r["first_step"], ts_ns=r["first_ts"],
                     count_per_step=round(r["per_step"], 3), dur_ns_per_step=int(round(r["ns_per_step"] or 0)),
                     bytes_per_step=None if r["bytes_per_step"] is None else int(round(r["bytes_per_step"])),
                     detail=r["detail"])
            for r in rows.iter_rows(named=True)]


def steps_of(rows: pl.DataFrame) -> list[int]:
    """The distinct steps of evidence rows, sorted."""
    return sorted({s for steps in rows["steps"].to_list() for s in steps}) if rows.height else []
