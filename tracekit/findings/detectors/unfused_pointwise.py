"""The ``unfused_pointwise`` rule: pairs of elementwise kernels, close neighbours on one stream, whose
intermediate round-trips through HBM (:mod:`tracekit.analyses.round_trips`).

Priced on what limits the step. Fusing a link saves two things: the intermediate's HBM round trip
(GPU time: the bytes written and read back ÷ the device's HBM bandwidth) and one op's dispatch
(host time: a fused chain is one op where the eager chain is two — the cheaper of the producer's
and the consumer's CPU time, since the fused op still costs one dispatch; one instance per kind of
link and step — the first, as the links are matched — so a chain repeated in a step is under-priced,
never over-priced). Both are projected on the wall (:func:`tracekit.findings.wall.on_wall`) and the finding
carries the one that saves more: GPU traffic where the step is GPU-bound, host dispatch where the
host sets the pace. A tensor small enough to stay in L2 (:data:`POINTWISE_L2_SHARE` of the
device's L2) makes no HBM round trip and is left out.
"""

from __future__ import annotations

import polars as pl

from tracekit import devices
from tracekit.findings.detectors.priced import best_resource
from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Unfused pointwise chain: each round-tripped intermediate at least this many bytes on a device
#: whose L2 size is not known (below it, a tensor stays in any current GPU's L2).
POINTWISE_MIN_BYTES = 1 << 20
#: ... and, where the device's L2 size is known (:data:`tracekit.devices.L2_BYTES`), at least this share of it: a
#: producer's output that fits in half the L2 is still mostly resident when its consumer, a few
#: kernels later, reads it (the other half holds those kernels' other operands); a larger one
#: streams out to HBM and is read back from it.
POINTWISE_L2_SHARE = 0.5
#: ... and its consumer at most this many kernels after its producer on the stream: a fuser joins
#: neighbours (GeGLU's gelu and mul have the up-projection GEMM between them); a consumer far later
#: (the backward reading a saved activation) needs the value in memory anyway.
POINTWISE_MAX_DISTANCE = 3


RULE = Rule(
    id="unfused_pointwise",
    title="an unfused pointwise chain: an elementwise kernel's output goes through HBM to the next one",
    severity="warning",
    needs=("consecutive elementwise kernels on a stream whose intermediate round-trips "
           "(tracekit.analyses.round_trips)"),
    thresholds={"POINTWISE_MIN_BYTES": POINTWISE_MIN_BYTES, "POINTWISE_L2_SHARE": POINTWISE_L2_SHARE,
                "POINTWISE_MAX_DISTANCE": POINTWISE_MAX_DISTANCE},
    fix="fuse the chain: torch.compile the module, or a fused kernel (e.g. Liger's GeGLU)",
)


def min_bytes(context: Context) -> float:
    """The smallest intermediate that round-trips through HBM on this device (module docstring)."""
    l2 = devices.L2_BYTES.get((context.ceilings or {}).get("device"))
    return max(POINTWISE_MIN_BYTES, POINTWISE_L2_SHARE * l2) if l2 else POINTWISE_MIN_BYTES


def detect(context: Context) -> list[Finding]:
    tensors = context.in_steady(context.tensors).filter(pl.col("bytes") >= min_bytes(context))
    if tensors.height == 0:
        return []
    kernels = (context.steady_gpu.filter(pl.col("kind") == "kernel")
               .select("step", "stream", "ts", "idx", "name", "cpu_op", "op_idx", "kernel_class", "annotation")
               .sort(["step", "stream", "ts", "idx"]))
    # In-place ops (``add_``: gradient accumulation, optimizer updates) write tensors that live on,
    # not intermediates a fuser could keep in registers; the optimizer has its own rule.
    consumer_ok = (pl.col("kernel_class") == "elementwise") & ~pl.col("cpu_op").fill_null("").str.ends_with("_")
    kernels = kernels.with_columns(consumer_ok=consumer_ok, producer_ok=consumer_ok & ~pl.col(
        "annotation").fill_null("").str.starts_with("Optimizer."))
    # The kernel d places later on the same stream in the same step: one sort, plain shifts; the
    # flags are computed once and each shifted frame filtered before it is gathered.
    same = lambda d: (pl.col("step").shift(-d) == pl.col("step")) & (pl.col("stream").shift(-d) == pl.col("stream"))  # noqa: E731
    pairs = pl.concat([
        kernels.select("step", "ts", "name", "cpu_op", "op_idx", next_name=pl.col("name").shift(-d),
                       next_op=pl.col("cpu_op").shift(-d), next_op_idx=pl.col("op_idx").shift(-d),
                       keep=pl.col("producer_ok") & same(d) & pl.col("consumer_ok").shift(-d)).filter("keep")
        for d in range(1, POINTWISE_MAX_DISTANCE + 1)])
    pairs = pairs.select("step", "ts", pl.col("name").alias("producer"), pl.col("cpu_op").alias("producer_op"),
                         pl.col("next_name").alias("consumer"), pl.col("next_op").alias("consumer_op"),
                         pl.col("op_idx").alias("producer_idx"), pl.col("next_op_idx").alias("consumer_idx")).unique(
        subset=["step", "producer", "producer_op", "consumer", "consumer_op"], keep="first")
    # Only tensors an elementwise kernel of a pair produced can join: drop the others on one key
    # before hashing all five (the round trips of a big trace are mostly GEMM and copy outputs).
    chained = tensors.filter(pl.col("producer").is_in(pairs.get_column("producer").unique().implode())).join(
        pairs, on=["step", "producer", "producer_op", "consumer", "consumer_op"], how="inner",
        maintain_order="left")
    if chained.height == 0:
        return []
    chained = chained.with_columns(link=pl.col("producer_op") + " → " + pl.col("consumer_op"), dur=pl.lit(0))
    rows = grouped(context, chained, ["link", "shape", "dtype"], "tensor", name="link", bytes_col="bytes",
                   detail="shape")
    rows = rows.with_columns(detail=pl.col("detail") + " " + pl.col("dtype"))
    steps = steps_of(rows)
    moved = 2.0 * float(chained["bytes"].sum()) / context.n  # written once, read back once
    hbm = (context.ceilings or {}).get("hbm_bytes_per_s")
    gpu_saving = moved / hbm * 1e9 if hbm else None
    host_saving = dispatch_saved(context, chained)
    resource, saving = best_resource(context, {"gpu": gpu_saving, "host": host_saving or None})
    if resource == "host":
        basis = ("one op's dispatch per fused link: the cheaper of producer and consumer op's CPU time "
                 f"({host_saving / 1e3:,.1f} µs per step; the host sets the pace)")
    else:
        basis = (f"2 × round-trip bytes ({moved:,.0f} B per step) ÷ HBM bandwidth ({hbm / 1e12:g} TB/s)"
                 if hbm else "unknown device: no HBM bandwidth")
    if saving is None or not costs_enough(context, steps, saving):
        return []
    return [RULE.finding(steps, as_evidence(rows.head(6)), saving, saving, basis,
                         round_trip_bytes_per_step=int(moved / 2), dispatch_ns_per_step=int(host_saving),
                         hbm_ns_per_step=int(gpu_saving or 0),
                         tensors_per_step=round(chained.height / context.n, 3), resource=resource)]


def dispatch_saved(context: Context, chained: pl.DataFrame) -> float:
    """Host ns per step a fuser saves on ``chained`` links: per consumer op instance the links name
    (one per kind of link and step), the cheaper of its producer's and its own CPU time (the fused
    op still costs one dispatch)."""
    links = chained.select("producer_idx", "consumer_idx").drop_nulls().unique(subset=["consumer_idx"])
    if links.height == 0:
        return 0.0
    durs = context.trace.ops.select("idx", "dur")
    priced = (links.join(durs.rename({"idx": "producer_idx", "dur": "p_dur"}), on="producer_idx", how="left")
              .join(durs.rename({"idx": "consumer_idx", "dur": "c_dur"}), on="consumer_idx", how="left"))
    return float(priced.select(pl.min_horizontal("p_dur", "c_dur").sum()).item() or 0) / context.n
