"""The ``unfused_pointwise`` rule: pairs of elementwise kernels, close neighbours on one stream, whose
intermediate round-trips through HBM (:mod:`tracekit.analyses.round_trips`), priced by those bytes
÷ the device's HBM bandwidth.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import MIN_STEP_SHARE, as_evidence, enough_steps, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule

#: Unfused pointwise chain: each round-tripped intermediate at least this many bytes (small
#: tensors stay in L2, their round trip costs no HBM time).
POINTWISE_MIN_BYTES = 1 << 20
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
    thresholds={"POINTWISE_MIN_BYTES": POINTWISE_MIN_BYTES, "POINTWISE_MAX_DISTANCE": POINTWISE_MAX_DISTANCE,
                "MIN_STEP_SHARE": MIN_STEP_SHARE},
    fix="fuse the chain: torch.compile the module, or a fused kernel (e.g. Liger's GeGLU)",
)


def detect(context: Context) -> list[Finding]:
    tensors = context.in_steady(context.tensors).filter(pl.col("bytes") >= POINTWISE_MIN_BYTES)
    if tensors.height == 0:
        return []
    kernels = (context.steady_gpu.filter(pl.col("kind") == "kernel")
               .select("step", "stream", "ts", "idx", "name", "cpu_op", "kernel_class", "annotation")
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
        kernels.select("step", "ts", "name", "cpu_op", next_name=pl.col("name").shift(-d),
                       next_op=pl.col("cpu_op").shift(-d),
                       keep=pl.col("producer_ok") & same(d) & pl.col("consumer_ok").shift(-d)).filter("keep")
        for d in range(1, POINTWISE_MAX_DISTANCE + 1)])
    pairs = pairs.select("step", "ts", pl.col("name").alias("producer"), pl.col("cpu_op").alias("producer_op"),
                         pl.col("next_name").alias("consumer"), pl.col("next_op").alias("consumer_op")).unique(
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
    if not enough_steps(context, steps):
        return []
    moved = 2.0 * float(chained["bytes"].sum()) / context.n  # written once, read back once
    hbm = (context.ceilings or {}).get("hbm_bytes_per_s")
    saving = moved / hbm * 1e9 if hbm else None
    basis = (f"2 × round-trip bytes ({moved:,.0f} B per step) ÷ HBM bandwidth "
             f"({hbm / 1e12:g} TB/s)" if hbm else "unknown device: no HBM bandwidth")
    return [RULE.finding(steps, as_evidence(rows.head(6)), saving or 0.0, saving, basis,
                         round_trip_bytes_per_step=int(moved / 2),
                         tensors_per_step=round(chained.height / context.n, 3), resource="gpu")]
