"""The ``cpu_tensor_copy`` rule: a tensor filled on the CPU inside the step and copied to the device right
after (TorchTidy's ExtraCUDACopy pattern: ``torch.zeros(n).to("cuda")``), where creating it on the
device would skip both the host's fill and the host-to-device copy.

Contract: over the steady steps, every host-to-device memcpy whose launching op tree is entered by a
copy op (:data:`COPY_OPS`, outermost ``cpu_op`` above the copy's launch) whose previous sibling on
the same thread is a CPU op that launched no GPU work and whose subtree fills a tensor
(:data:`FILL_OPS`). The cost is the host time of both (the fill and the copy call), per steady step,
``resource="host"``; the rule fires when that costs the floor over the steady window
(:func:`tracekit.findings.evidence.costs_enough`). An input batch from a DataLoader is not filled by
an op in the step, so it never matches.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.evidence import as_evidence, costs_enough, grouped, steps_of
from tracekit.findings.model import Context, Finding, Rule
from tracekit.findings.wall import WARN_MIN_NS, WARN_MIN_STEP_SHARE

#: Ops that fill a new tensor's memory on the host (TorchTidy's init ops, and the factories and
#: random fills that do not go through them).
FILL_OPS = frozenset({
    "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_", "aten::random_", "aten::bernoulli_",
    "aten::arange", "aten::randperm", "aten::linspace", "aten::eye",
})
#: The op a ``.to(device)`` / ``.cuda()`` / ``copy_`` enters with.
COPY_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})

RULE = Rule(
    id="cpu_tensor_copy",
    title="tensors are filled on the CPU in the step and copied to the device right after",
    severity="warning",
    needs="host-to-device memcpys, the op tree of their launches and the op just before",
    # Fires when the fills and copies cost the wall's floor over the steady window.
    thresholds={"WARN_MIN_STEP_SHARE": WARN_MIN_STEP_SHARE, "WARN_MIN_NS": WARN_MIN_NS},
    fix=("create the tensor on the device: torch.zeros(..., device='cuda') (or torch.arange/randn/full with "
         "device=), or build it once outside the step"),
)


def detect(context: Context) -> list[Finding]:
    memcpys = context.memcpys
    if memcpys.height == 0:
        return []
    htod = context.in_steady(memcpys).filter((pl.col("direction") == "HtoD") & pl.col("launch_idx").is_not_null())
    if htod.height == 0:
        return []
    pairs = _filled_then_copied(context, htod)
    if pairs.height == 0:
        return []
    pairs = pairs.with_columns(dur=pl.col("fill_dur") + pl.col("copy_dur"))
    rows = grouped(context, pairs, ["fill_name", "copy_name"], "op", name="copy_name", detail="detail")
    ns_per_step = float(rows["ns_per_step"].sum())
    steps = steps_of(rows)
    if not costs_enough(context, steps, ns_per_step):
        return []
    return [RULE.finding(steps, as_evidence(rows), ns_per_step, ns_per_step,
                         "the host time of the CPU fill and of the copy call, per steady step (a device-side "
                         "fill costs a kernel launch)", resource="host")]


def _filled_then_copied(context: Context, htod: pl.DataFrame) -> pl.DataFrame:
    """One row per host-to-device copy whose copy op follows a host fill: ``step, ts, fill_name,
    copy_name, fill_dur, copy_dur, detail``. Ops are compared at the top of their thread's op nesting
    (a ``cpu_op`` inside no other): the copy op is the top op holding the copy's launch call, the fill
    op the top op just before it."""
    thread = ["pid", "tid"]
    top = (context.trace.ops.lazy().filter(pl.col("cat") == "cpu_op").select("name", *thread, "ts", "end")
           .sort([*thread, "ts", "end"], descending=[False, False, False, True])
           # Inside another op when it starts before the furthest end of the ops that started earlier.
           .with_columns(_reach=pl.col("end").cum_max().shift(1).over(thread))
           .filter(pl.col("_reach").is_null() | (pl.col("ts") >= pl.col("_reach")))
           .with_columns(**{f"fill_{c}": pl.col(c).shift(1).over(thread) for c in ("name", "ts", "end")})
           .drop("_reach").sort("ts").collect())
    launches = context.launches.select(pl.col("idx").alias("launch_idx"), *thread, call_ts="ts", call_end="end")
    calls = (htod.select("launch_idx", "step", "ts").join(launches, on="launch_idx")
             .select("step", "ts", *thread, "call_ts", "call_end").sort("call_ts"))
    copies = (calls.join_asof(top.rename({"name": "copy_name", "ts": "copy_ts", "end": "copy_end"}),
                              left_on="call_ts", right_on="copy_ts", by=thread, strategy="backward",
                              check_sortedness=False)
              .filter(pl.col("copy_name").is_in(list(COPY_OPS)) & (pl.col("copy_end") >= pl.col("call_end"))
                      & pl.col("fill_name").is_not_null())
              .sort("fill_ts"))
    if copies.height == 0:
        return pl.DataFrame()
    # The op before must run on the host: no launch call with device work inside it ...
    device = (context.launches.filter(pl.col("gpu_kinds").list.len() > 0)
              .select(*thread, device_ts="ts").sort("device_ts"))
    # ... and fill a tensor: it, or the first fill op starting inside it, ends within it.
    fills = (context.trace.ops.filter((pl.col("cat") == "cpu_op") & pl.col("name").is_in(list(FILL_OPS)))
             .select(*thread, filler="name", filler_ts="ts", filler_end="end").sort("filler_ts"))
    found = (copies.join_asof(device, left_on="fill_ts", right_on="device_ts", by=thread, strategy="forward",
                              check_sortedness=False)
             .join_asof(fills, left_on="fill_ts", right_on="filler_ts", by=thread, strategy="forward",
                        check_sortedness=False)
             .filter((pl.col("device_ts").is_null() | (pl.col("device_ts") >= pl.col("fill_end")))
                     & (pl.col("filler_end") <= pl.col("fill_end"))))
    return found.select("step", "ts", "fill_name", "copy_name", fill_dur=pl.col("fill_end") - pl.col("fill_ts"),
                        copy_dur=pl.col("copy_end") - pl.col("copy_ts"),
                        detail=pl.format("{} on the CPU ({}), then copied to the device", "fill_name", "filler"))
