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

from tracekit.findings import wall
from tracekit.findings.model import Context, Evidence

#: A rule about steps fires when at least this share of the steady steps shows it (one odd step
#: out of three is noise, not a property of the loop). Rules that aggregate over the steady window
#: (:func:`costs_enough`) no longer read it.
MIN_STEP_SHARE = 0.5


def enough_steps(context: Context, steps: list[int]) -> bool:
    """Whether ``steps`` cover at least :data:`MIN_STEP_SHARE` of the steady steps (and any)."""
    return len(set(steps) & set(context.steady)) >= MIN_STEP_SHARE * len(context.steady) and bool(steps)


def costs_enough(context: Context, steps: list[int], ns_per_step: float) -> bool:
    """Aggregate over the steady window: whether a problem seen in ``steps`` (any of the steady ones)
    costs, averaged over all the steady steps, at least the warning floor
    (:func:`tracekit.findings.wall.floor_ns`: 1 % of the median steady step and 20 µs) in its own
    resource. A problem in 14 of 29 steps that costs the floor over the window fires (with the steps
    it hit); one that costs less in total does not, however many steps show it."""
    if not set(steps) & set(context.steady):
        return False
    units = context.decomposition.units.filter(pl.col("step").is_in(context.steady))
    return ns_per_step >= wall.floor_ns(units)


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
            # No detail value at all joins to "": null, so that callers' fill_null applies.
            .with_columns(role=pl.lit(role), name=pl.col(name).fill_null("(no op)"),
                          detail=pl.when(pl.col("detail") != "").then(pl.col("detail")))
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
