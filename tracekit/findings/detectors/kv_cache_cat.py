"""The ``kv_cache_cat`` rule: a cache grown by concatenation every step — ``torch.cat([past, new])`` whose
``past`` is the previous step's output (each step copies the whole cache to append a token or a few),
or ``torch.stack`` of a list that gains one entry per step (:mod:`.copies`: cause ``cat``, and the
growth read from the op's input shapes across the steady steps).

Contract: a cat op is followed across steps by its place among the same op's calls on its thread in
its step (the k-th ``aten::cat`` of step s is the k-th of step s+1: a decode loop runs the same
code each step). It grows when, from one steady step to the next, either exactly one input grows along
one dim by exactly the other inputs' size along that dim (``past`` became the output), or the number of
inputs grows by one with every input the same shape (a list appended to). It must grow at least
:data:`KV_MIN_GROWTHS` times in a row: a shape sweep changes shapes once per step too, but never by the
appended part each time. A grown tensor of fewer than :data:`KV_MIN_DIMS` dims is no cache: a
generate() loop appends each new token to its ``input_ids`` and attention mask (``[batch, seq]``
int64, a few hundred bytes) every step, by design of the loop, whatever cache the model keeps.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, copy_finding, copy_rows, of_cause, user_op
from tracekit.findings.model import Context, Finding, Rule
from tracekit.shapes import parse_dims

#: Growths in a row before a cat is called a growing cache: two (three steps) tell a pattern from a
#: shape that changed once.
KV_MIN_GROWTHS = 2
#: A cache holds a feature dim beside batch and sequence ([batch, heads, seq, head_dim], [batch, seq,
#: hidden]); a growing [batch, seq] tensor is the loop's token ids or attention mask.
KV_MIN_DIMS = 3

RULE = Rule(
    id="kv_cache_cat",
    title="a cache grown by torch.cat every step: each step copies the whole cache to append to it",
    severity="warning",
    needs="aten::cat / aten::stack whose output grows by the appended part from one steady step to the next, "
          "and the copy kernels they launch",
    thresholds={"COPY_MIN_BUSY_SHARE": COPY_MIN_BUSY_SHARE, "KV_MIN_GROWTHS": KV_MIN_GROWTHS,
                "KV_MIN_DIMS": KV_MIN_DIMS},
    fix=("pre-allocate the cache once at its maximum length and write each step's keys/values into it in "
         "place (a static cache: cache[:, :, pos] = new, transformers' StaticCache), attending over the "
         "filled part"),
)


def _inputs(raw: str | None) -> list[tuple[int, ...]] | None:
    """The tensor list of a cat/stack's ``Input Dims`` (its first argument), or None."""
    dims = parse_dims(raw)
    first = dims[0] if dims else None
    if not isinstance(first, tuple) or not first or not all(
            isinstance(s, tuple) and all(isinstance(d, int) for d in s) for s in first):
        return None
    return list(first)


def _appended(before: list[tuple[int, ...]], after: list[tuple[int, ...]]) -> float | None:
    """The share of ``after``'s output that was already there (``past``'s part) when ``after`` is
    ``before``'s output plus an appended part (module docstring); None otherwise."""
    if len(after) == len(before) + 1 and len(set(after)) == 1 and set(before) <= set(after):
        return len(before) / len(after)  # a list that gained one entry: all but it were copied before
    if len(after) != len(before) or len(before) < 2:
        return None
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    if len(changed) != 1:
        return None
    i = changed[0]
    old, new = before[i], after[i]
    if len(old) != len(new) or len(old) < KV_MIN_DIMS:
        return None
    dims = [d for d in range(len(old)) if old[d] != new[d]]
    if len(dims) != 1:
        return None
    d = dims[0]
    rest = sum(s[d] for j, s in enumerate(before) if j != i and len(s) > d)
    if new[d] - old[d] != rest or rest <= 0:
        return None
    total = new[d] + sum(s[d] for j, s in enumerate(after) if j != i and len(s) > d)
    return new[d] / total


def growing_ops(context: Context, op_idx: list[int]) -> dict[int, float]:
    """The ops among ``op_idx`` (cat/stack ops) that belong to a growing cat (module docstring),
    each with the share of its output that the previous step already held."""
    ops = (context.trace.ops.filter(pl.col("idx").is_in(op_idx) | (
        pl.col("name").is_in(context.trace.ops.filter(pl.col("idx").is_in(op_idx))["name"].unique().implode())
        & (pl.col("cat") == "cpu_op")))
           .select("idx", "name", "pid", "tid", "ts", "input_dims"))
    steps = context.trace.steps
    if ops.height == 0 or steps.height == 0:
        return {}
    ops = (ops.sort("ts").join_asof(steps.select(pl.col("ts").alias("step_ts"), pl.col("number").alias("step"), "end").sort("step_ts"),
                                    left_on="ts", right_on="step_ts")
           .filter(pl.col("ts") < pl.col("end")).filter(pl.col("step").is_in(context.steady)))
    ops = ops.with_columns(nth=pl.col("ts").rank("ordinal").over("step", "pid", "tid", "name"))
    by_place: dict[tuple, list[tuple[int, int, str]]] = {}
    for row in ops.sort("step", "ts").iter_rows(named=True):
        by_place.setdefault((row["pid"], row["tid"], row["name"], row["nth"]), []).append(
            (row["step"], row["idx"], row["input_dims"]))
    steady = sorted(context.steady)
    grown: dict[int, float] = {}
    for calls in by_place.values():
        run: list[tuple[int, float]] = []
        for (s0, _, d0), (s1, i1, d1) in zip(calls, calls[1:]):
            a, b = _inputs(d0), _inputs(d1)
            share = _appended(a, b) if a is not None and b is not None and steady.index(s1) == steady.index(s0) + 1 \
                else None
            run = run + [(i1, share)] if share is not None else []
            if len(run) >= KV_MIN_GROWTHS:
                grown.update(run)
    return {i: s for i, s in grown.items() if i in set(op_idx)}


def detect(context: Context) -> list[Finding]:
    copies = of_cause(context, "cat")
    if copies.height == 0:
        return []
    grown = growing_ops(context, copies["op_idx"].drop_nulls().unique().cast(pl.Int64).to_list())
    if not grown:
        return []
    shares = pl.DataFrame({"op_idx": list(grown), "old_share": list(grown.values())},
                          schema={"op_idx": pl.Int64, "old_share": pl.Float64})
    copies = (copies.with_columns(pl.col("op_idx").cast(pl.Int64))
              .join(shares, on="op_idx", how="inner"))
    if copies.height == 0:
        return []
    saving = float((copies["dur"] * copies["old_share"]).sum()) / context.n
    return copy_finding(context, copy_rows(context, copies.drop("old_share"), user_op(), pl.col("cpu_op")), RULE,
                        saving=saving, basis="the cat's GPU time for the part the previous step already held "
                                             "(a static cache copies only the appended part)")
