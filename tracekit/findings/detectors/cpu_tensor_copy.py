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

from tracekit.analyses import op_tree
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
    ops = op_tree.build(context.trace, context.gpu["correlation"]).ops
    pairs = _filled_then_copied(ops, htod)
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


def _filled_then_copied(ops: pl.DataFrame, htod: pl.DataFrame) -> pl.DataFrame:
    """One row per host-to-device copy whose copy op follows a host fill: ``step, ts, fill_name,
    copy_name, fill_dur, copy_dur, detail``."""
    cpu = ops.filter(pl.col("cat") == "cpu_op").select("idx", "parent_idx", "name", "pid", "tid", "ts", "end",
                                                      "launches_gpu")
    parent_of = dict(zip(cpu["idx"].to_list(), cpu["parent_idx"].to_list()))
    is_cpu = set(parent_of)
    copies = htod.filter(pl.col("op_idx").is_not_null())
    # The outermost cpu_op above each copy's launch (the op the user called: aten::to).
    top = []
    for op in copies["op_idx"].to_list():
        while op is not None and parent_of.get(op) in is_cpu:
            op = parent_of[op]
        top.append(op)
    copies = copies.with_columns(copy_idx=pl.Series(top, dtype=pl.UInt32)).filter(pl.col("copy_idx").is_not_null())
    copy_ops = copies.join(cpu.rename({c: f"copy_{c}" for c in cpu.columns if c != "idx"}),
                           left_on="copy_idx", right_on="idx").filter(pl.col("copy_name").is_in(list(COPY_OPS)))
    if copy_ops.height == 0:
        return pl.DataFrame()
    # Its previous sibling: the latest op of the same parent on the same thread ending before it.
    siblings = cpu.rename({c: f"fill_{c}" for c in cpu.columns})
    prev = (copy_ops.sort("copy_ts")
            .join_asof(siblings.sort("fill_end"), left_on="copy_ts", right_on="fill_end", strategy="backward",
                       by_left=["copy_pid", "copy_tid", "copy_parent_idx"],
                       by_right=["fill_pid", "fill_tid", "fill_parent_idx"], check_sortedness=False)
            .filter(pl.col("fill_idx").is_not_null() & ~pl.col("fill_launches_gpu")))
    if prev.height == 0:
        return pl.DataFrame()
    # The sibling fills a tensor: it, or an op inside it (same thread, within its span), is a fill op.
    fills = cpu.filter(pl.col("name").is_in(list(FILL_OPS))).select(
        "pid", "tid", filler="name", filler_ts="ts", filler_end="end")
    filled = (prev.join(fills, left_on=["copy_pid", "copy_tid"], right_on=["pid", "tid"])
              .filter((pl.col("filler_ts") >= pl.col("fill_ts")) & (pl.col("filler_end") <= pl.col("fill_end")))
              .group_by("launch_idx").agg(pl.col("filler").sort_by("filler_ts").first()))
    return (prev.join(filled, on="launch_idx")
            .select("step", "ts", "fill_name", "copy_name", fill_dur=pl.col("fill_end") - pl.col("fill_ts"),
                    copy_dur=pl.col("copy_end") - pl.col("copy_ts"),
                    detail=pl.format("{} on the CPU ({}), then copied to the device", "fill_name", "filler")))
