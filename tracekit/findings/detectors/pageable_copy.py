"""The ``pageable_copy`` rule: large host↔device copies from or to pageable memory, priced against
the pinned bandwidth of the device's host link.

The rule owns every op that launched a pageable copy of at least :data:`PAGEABLE_COPY_MIN_BYTES`
(:func:`owned_ops`): the copy and the synchronise the op makes after it are one blocked interval,
priced here once; ``host_sync`` leaves those ops alone and owns the smaller pageable copies, whose
cost is the synchronisation rather than the bandwidth.
"""

from __future__ import annotations

import polars as pl

from tracekit import host_link
from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: A pageable copy this large is bandwidth-bound: at PCIe Gen4's ~25 GB/s 1 MiB takes ~40 µs, several
#: times a copy's fixed latency (launch, staging, ~10 µs), so pinning shortens it. Below it the copy's
#: cost is its synchronisation (``host_sync`` owns it), and pinning a few scalars saves nothing.
PAGEABLE_COPY_MIN_BYTES = 1 << 20
#: The host link assumed when the trace names no device the link table knows: PCIe Gen4 x16, the most
#: common data-centre link of the traces' era (Gen5 would promise a larger saving than an unknown
#: host may give).
DEFAULT_LINK = host_link.HostLink("PCIe Gen4 x16 (device unknown, assumed)", host_link.PCIE_GEN4_X16,
                                  "no device the link table knows")


RULE = Rule(
    id="pageable_copy",
    title="host↔device copies from pageable memory (synchronous, at a fraction of the link's bandwidth)",
    severity="warning",
    needs="memcpy activities whose source or destination is Pageable, with bytes; the device's host link",
    thresholds={"PAGEABLE_COPY_MIN_BYTES": PAGEABLE_COPY_MIN_BYTES},
    fix=("pin the host tensor (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with "
         ".to(device, non_blocking=True)"),
)


def owned_ops(memcpys: pl.DataFrame) -> pl.DataFrame:
    """The pageable copies this rule owns (``memcpys``: the engine's memcpy rows with decoded
    ``src``/``dst``): those of at least :data:`PAGEABLE_COPY_MIN_BYTES`, whatever step they are in."""
    return memcpys.filter(((pl.col("src") == "Pageable") | (pl.col("dst") == "Pageable"))
                          & (pl.col("bytes") >= PAGEABLE_COPY_MIN_BYTES))


def detect(context: Context) -> list[Finding]:
    pageable = context.in_steady(owned_ops(context.memcpys))
    if pageable.height == 0:
        return []
    rows = grouped(context, pageable, ["top_op", "name"], "memcpy", name="name", bytes_col="bytes",
                   detail="top_op")
    # ``grouped`` joins the distinct ops, "" when none: calls no op made.
    ops = pl.when(pl.col("detail") != "").then(pl.col("detail")).otherwise(pl.lit("no op"))
    rows = rows.with_columns(detail=pl.lit("launched by ") + ops)
    steps = steps_of(rows)
    cost = float(pageable["dur"].sum()) / context.n
    rate, basis = _pinned_rate(context, pageable)
    saving = cost - float(pageable["bytes"].sum()) / context.n / rate * 1e9
    if not costs_enough(context, steps, saving):
        return []
    return [RULE.finding(steps, as_evidence(rows), cost, saving,
                         f"copy time − bytes ÷ pinned bandwidth ({rate / 1e9:.1f} GB/s: {basis})",
                         pinned_bytes_per_s=round(rate), resource="gpu")]


def _pinned_rate(context: Context, pageable: pl.DataFrame) -> tuple[float, str]:
    """The bandwidth a pinned copy reaches: measured on the trace's own large pinned copies when it
    has some (small ones measure latency, not bandwidth), else the device's host link."""
    copies = context.memcpys.filter((pl.col("bytes") >= PAGEABLE_COPY_MIN_BYTES)
                                    & ((pl.col("src") == "Pinned") | (pl.col("dst") == "Pinned")))
    if copies.height and copies["dur"].sum() > 0:
        return float(copies["bytes"].sum()) / (copies["dur"].sum() / 1e9), "pinned copies measured in this trace"
    devices = context.trace.meta.devices
    device = pageable["device"].drop_nulls().mode().sort().first() if pageable["device"].drop_nulls().len() else None
    info = next((d for d in devices if d.id == device), devices[0] if devices else None)
    link = (host_link.link_for(info.name, info.compute_capability) if info else None) or DEFAULT_LINK
    where = f"{info.name}: " if info and link is not DEFAULT_LINK else ""
    return link.bytes_per_s, f"{where}{link.name}, {link.reason}"
