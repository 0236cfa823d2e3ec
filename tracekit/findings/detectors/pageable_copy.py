"""The ``pageable_copy`` rule: host↔device copies from or to pageable memory, priced against the pinned
bandwidth the trace shows (or :data:`PINNED_BYTES_PER_S_DEFAULT`).
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Pageable copies: at least this many bytes per step (a few scalars copied from pageable memory
#: are not worth pinning).
PAGEABLE_MIN_BYTES = 1 << 20
#: Host-to-device bandwidth used to price a pageable copy when the trace has no pinned copy of its
#: own to measure: PCIe Gen5 x16, 64 GB/s per direction (the H100/H200/B200/MI300X host link;
#: an older link makes the saving smaller, never the finding wrong).
PINNED_BYTES_PER_S_DEFAULT = 64e9


RULE = Rule(
    id="pageable_copy",
    title="host↔device copies from pageable memory (synchronous, at a fraction of the link's bandwidth)",
    severity="warning",
    needs="memcpy activities whose source or destination is Pageable, with bytes",
    thresholds={"PAGEABLE_MIN_BYTES": PAGEABLE_MIN_BYTES, "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix=("pin the host tensor (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
         ".to(device, non_blocking=True)"),
)


def detect(context: Context) -> list[Finding]:
    pageable = context.in_steady(context.memcpys).filter(
        (pl.col("src") == "Pageable") | (pl.col("dst") == "Pageable"))
    if pageable.height == 0 or pageable["bytes"].sum() / context.n < PAGEABLE_MIN_BYTES:
        return []
    rows = grouped(context, pageable, ["top_op", "name"], "memcpy", name="name", bytes_col="bytes",
                   detail="top_op")
    rows = rows.with_columns(detail=pl.lit("launched by ") + pl.col("detail").fill_null("no op"))
    steps = steps_of(rows)
    if not enough_steps(context, steps):
        return []
    cost = float(pageable["dur"].sum()) / context.n
    rate, basis = _pinned_rate(context)
    saving = cost - float(pageable["bytes"].sum()) / context.n / rate * 1e9
    return [RULE.finding(steps, as_evidence(rows), cost, saving,
                         f"copy time − bytes ÷ pinned bandwidth ({rate / 1e9:.1f} GB/s: {basis})",
                         pinned_bytes_per_s=round(rate), resource="gpu")]


def _pinned_rate(context: Context) -> tuple[float, str]:
    copies = context.memcpys.filter((pl.col("bytes") > 0)
                                    & ((pl.col("src") == "Pinned") | (pl.col("dst") == "Pinned")))
    if copies.height and copies["dur"].sum() > 0:
        return float(copies["bytes"].sum()) / (copies["dur"].sum() / 1e9), "pinned copies measured in this trace"
    return PINNED_BYTES_PER_S_DEFAULT, "PCIe Gen5 x16 (64 GB/s), no pinned copy in the trace"
