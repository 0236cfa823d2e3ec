"""Across ranks: which rank the others waited for, at which collective, and how long.

Contract: :func:`analyze` takes every rank's collective calls and host phases
(:mod:`tracekit.analyses.collectives`, stacked with a ``rank i64`` column) and each rank's step
starts (``rank, step, cpu_start_ns``), and returns a :class:`Skew`. Times are Int64 ns on the
reference rank's clock (the lowest rank) once the offsets below are applied.

Matching. A call's instance key is its process group and ``Seq`` where the trace records both
(PyTorch ~2.5 and later: exact, ``match = "seq"``); else its process group (``""`` when unrecorded)
and its position among that group's calls on its rank, in the order they were issued — their launch
calls' (the order NCCL and gloo number a group's collectives by; gloo's worker threads may start two
works out of that order), else their starts — (``match = "order"``: right when every rank profiled
the same window and ran the same collectives; PyTorch 2.13's gloo records no Seq). An instance is
*complete* when every rank that has calls of its group has it, and, matched by order, all of them name
the same kind; the calls of incomplete instances are *unmatched* (``unmatched_share``) and take no part.

Clock offsets. The ranks of one collective leave it together (the last arriver's data releases
every rank), so its ends are nearly simultaneous on all ranks whatever their clocks. Each rank's
offset is the median, over the complete instances it shares with the reference rank, of its end
minus the reference's end (``offsets``: ``offset_ns``, and ``spread_ns`` the median absolute
deviation of those differences from it — what the estimate is worth); every time of the rank is
moved by ``−offset_ns`` before arrivals are compared. A rank sharing no instance with the
reference keeps offset 0 (``matched = 0``).

Arrival and wait. A rank arrives at an instance when its collective kernel starts, or, on a host
backend (gloo: no kernel), when its worker thread starts the work (the launch call when neither was
recorded); ``arrival`` says which (:data:`ARRIVALS`). The *last arriver* is the rank arriving last
(ties: the lowest rank), and every other rank's *wait* is the last arrival minus its own arrival.
NCCL's kernels spin until every rank is there, so that wait is GPU-busy time on the victim (on
gloo, a worker thread blocked in the collective): a step-length rule names the victim, this one
names the rank that was late. A rank's waits at collectives in flight together (gloo's worker
threads, NCCL on several streams) overlap in time: a rank's wait over several instances (its total,
its wait per step, the wait it caused another rank) is the length of the union of its waits
``[arrival, last arrival]``, never their sum — which one NCCL stream never makes differ.

Per step. Each instance belongs to the step of the reference rank's call (else the lowest step
found). A rank's *caused* wait in a step is, summed over the other ranks, each one's wait at the
instances of the step it arrived last at; the *culprit* is the rank with the largest caused wait
(ties: lowest rank), and the victims' wait is that sum. Where it lost the time: at the culprit's
costliest instance, each rank's host time by phase is compared between its call of the group at the
step's last instance before this one that the culprit was not late for (arrived last with a wait) —
else its step start — and its launch of this one; the phase in which the culprit spent the most more
than the other ranks' median is named (``lost_phase``, ``lost_ns``). Late for several collectives
in a row (DDP's gradient buckets after a slow backward hook), the culprit lost the time before the
first of them, however late the costliest one was. When the window starts at the step start, a rank
that entered the step later than the others' median (on the common clock) lost that time before the
step: :data:`BEFORE_STEP` competes with the phases (the public DLRM step: rank 7 begins
ProfilerStep#10 4.5 ms after the median rank and reaches its first all_to_all as fast as the others
from there). When nothing shows extra time (a late GPU rather than a late host), the phase of the
culprit's call itself is named and ``lost_ns`` is 0.

Bandwidth of an instance: its bytes over the last arriver's kernel time (``transfer_ns``: it
waited for no one), algorithm and bus bandwidth as :mod:`tracekit.analyses.collectives`.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracekit.analyses import intervals
from tracekit.analyses.collectives import bus_factor

#: The lost phase of a rank that entered the step late on the common clock: its time was lost before
#: the step's window (the previous step, or outside the profiled window), not in a phase of it.
BEFORE_STEP = "before-step"
#: What an instance's arrivals are: ``kernel`` (the collective kernel's start on the GPU) or ``host``
#: (a host backend's work starting on its worker thread: gloo, whose collectives have no kernel).
ARRIVALS = ("kernel", "host")

OFFSETS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64, "offset_ns": pl.Int64, "spread_ns": pl.Int64, "matched": pl.UInt32,
}
INSTANCES_SCHEMA: dict[str, pl.DataType] = {
    "instance": pl.UInt32, "match": pl.String, "pg": pl.String, "position": pl.Int64, "kind": pl.String,
    "step": pl.Int64, "ranks": pl.UInt32, "bytes": pl.Int64, "group_size": pl.Int64,
    "first_arrival_ns": pl.Int64, "last_arrival_ns": pl.Int64, "last_rank": pl.Int64, "skew_ns": pl.Int64,
    "wait_ns": pl.Int64, "transfer_ns": pl.Int64, "algbw_gbps": pl.Float64, "busbw_gbps": pl.Float64,
    "phase": pl.String, "arrival": pl.String,
}
WAITS_SCHEMA: dict[str, pl.DataType] = {
    "instance": pl.UInt32, "rank": pl.Int64, "arrival_ns": pl.Int64, "end_ns": pl.Int64, "wait_ns": pl.Int64,
    "launch_ns": pl.Int64, "call": pl.UInt32,
}
CULPRITS_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "rank": pl.Int64, "caused_ns": pl.Int64, "instances": pl.UInt32,
    "victims": pl.UInt32, "worst_instance": pl.UInt32, "lost_phase": pl.String, "lost_ns": pl.Int64,
}
RANK_WAITS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64, "calls": pl.UInt32, "unmatched": pl.UInt32, "wait_ns": pl.Int64, "caused_ns": pl.Int64,
    "last_at": pl.UInt32,
}


@dataclass(frozen=True)
class Skew:
    """Collectives matched across ranks (module docstring).

    ``offsets`` (:data:`OFFSETS_SCHEMA`, by rank); ``instances`` (:data:`INSTANCES_SCHEMA`, complete
    instances by first arrival); ``waits`` (:data:`WAITS_SCHEMA`: each rank's arrival, end and wait
    at each instance, aligned); ``culprits`` (:data:`CULPRITS_SCHEMA`, one row per step with a wait);
    ``ranks`` (:data:`RANK_WAITS_SCHEMA`: per rank its calls, unmatched calls, total wait, wait it
    caused and instances it arrived last at); ``match`` (``seq``, ``order``, ``mixed`` or None when
    no call matched), ``unmatched_share`` (unmatched calls over all calls; None without calls) and
    ``reference`` (the rank whose clock the times are on).
    """

    offsets: pl.DataFrame
    instances: pl.DataFrame
    waits: pl.DataFrame
    culprits: pl.DataFrame
    ranks: pl.DataFrame
    match: str | None
    unmatched_share: float | None
    reference: int | None


def analyze(calls: pl.DataFrame, phases: pl.DataFrame, starts: pl.DataFrame) -> Skew:
    """Match ``calls`` (``rank`` + :data:`tracekit.analyses.collectives.CALLS_SCHEMA`) across ranks
    and name who waited for whom (module docstring); ``phases``: ``rank`` + the ranks' phase spans;
    ``starts``: ``rank, step, cpu_start_ns``."""
    keyed = _keys(calls)
    complete = _complete(keyed)
    ranks_all = sorted(keyed["rank"].unique().to_list()) if keyed.height else []
    reference = ranks_all[0] if ranks_all else None
    offsets = _offsets(complete, ranks_all, reference)
    aligned = complete.join(offsets.select("rank", "offset_ns"), on="rank", how="left").with_columns(
        arrival_ns=pl.coalesce("ts", "launch_ts") - pl.col("offset_ns"),
        end_ns=pl.col("end") - pl.col("offset_ns"),
        launch_ns=pl.col("launch_ts") - pl.col("offset_ns"))
    instances, waits = _instances(aligned, reference)
    culprits = _culprits(instances, waits, aligned, phases, starts, offsets)
    per_rank = _per_rank(keyed, complete, waits, instances, ranks_all)
    total = keyed.height
    unmatched = total - complete.height
    kinds = set(complete["match"].unique().to_list()) if complete.height else set()
    match = None if not kinds else (kinds.pop() if len(kinds) == 1 else "mixed")
    return Skew(offsets=offsets, instances=instances, waits=waits, culprits=culprits, ranks=per_rank,
                match=match, unmatched_share=(unmatched / total) if total else None, reference=reference)


def _keys(calls: pl.DataFrame) -> pl.DataFrame:
    """Each call with its instance key: ``match`` (seq | order), ``pg`` (``""`` when unrecorded),
    ``position`` (its Seq, or its place among its rank's calls of the group)."""
    if calls.height == 0:
        return calls.with_columns(match=pl.lit(None, pl.String), position=pl.lit(None, pl.Int64))
    by_seq = pl.col("seq").is_not_null() & pl.col("pg").is_not_null()
    issued = pl.coalesce("launch_ts", "ts")
    ordered = (calls.sort(pl.col("rank"), issued, pl.col("ts"), pl.col("call"))
               .with_columns(pg=pl.col("pg").fill_null("")))
    return ordered.with_columns(
        match=pl.when(by_seq).then(pl.lit("seq")).otherwise(pl.lit("order")),
        position=pl.when(by_seq).then(pl.col("seq"))
        .otherwise(pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "pg", by_seq)))


def _complete(keyed: pl.DataFrame) -> pl.DataFrame:
    """The calls of complete instances (module docstring), with ``instance u32`` numbered by the
    instance's first start on the ranks' own clocks (pg and position break ties)."""
    if keyed.height == 0:
        return keyed.with_columns(instance=pl.lit(None, pl.UInt32))
    members = keyed.group_by("pg").agg(_members=pl.col("rank").n_unique())
    key = ["match", "pg", "position"]
    found = (keyed.group_by(key).agg(_n=pl.col("rank").n_unique(), _calls=pl.len(), _kinds=pl.col("kind").n_unique(),
                                     _first=pl.col("ts").min())
             .join(members, on="pg")
             .filter((pl.col("_n") == pl.col("_members")) & (pl.col("_calls") == pl.col("_n")) & (pl.col("_n") >= 2)
                     & ((pl.col("match") == "seq") | (pl.col("_kinds") == 1)))
             .sort("_first", "pg", "position")
             .with_columns(instance=pl.int_range(pl.len(), dtype=pl.UInt32)))
    return keyed.join(found.select(*key, "instance"), on=key, how="inner")


def _offsets(complete: pl.DataFrame, ranks: list[int], reference: int | None) -> pl.DataFrame:
    if reference is None:
        return pl.DataFrame(schema=OFFSETS_SCHEMA)
    ref = complete.filter(pl.col("rank") == reference).select("instance", _ref_end="end")
    diffs = (complete.join(ref, on="instance", how="inner")
             .with_columns(_d=pl.col("end") - pl.col("_ref_end")))
    found = diffs.group_by("rank").agg(offset_ns=pl.col("_d").median().round(0).cast(pl.Int64), matched=pl.len())
    spread = (diffs.join(found, on="rank").group_by("rank")
              .agg(spread_ns=(pl.col("_d") - pl.col("offset_ns")).abs().median().round(0).cast(pl.Int64)))
    grid = pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int64})
    return (grid.join(found, on="rank", how="left").join(spread, on="rank", how="left")
            .with_columns(pl.col("offset_ns").fill_null(0), pl.col("spread_ns").fill_null(0),
                          pl.col("matched").fill_null(0))
            .select(list(OFFSETS_SCHEMA)).cast(OFFSETS_SCHEMA).sort("rank"))  # type: ignore[arg-type]


def _instances(aligned: pl.DataFrame, reference: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    if aligned.height == 0:
        return pl.DataFrame(schema=INSTANCES_SCHEMA), pl.DataFrame(schema=WAITS_SCHEMA)
    last = (aligned.sort("instance", "arrival_ns", "rank", descending=[False, True, False])
            .group_by("instance", maintain_order=True)
            .agg(last_rank=pl.col("rank").first(), last_arrival_ns=pl.col("arrival_ns").first(),
                 transfer_ns=(pl.col("end_ns") - pl.col("arrival_ns")).first(), phase=pl.col("phase").first()))
    waits = (aligned.join(last.select("instance", "last_arrival_ns"), on="instance")
             .with_columns(wait_ns=(pl.col("last_arrival_ns") - pl.col("arrival_ns")).clip(lower_bound=0))
             .select(list(WAITS_SCHEMA)).cast(WAITS_SCHEMA).sort("instance", "rank"))  # type: ignore[arg-type]
    ref_step = aligned.filter(pl.col("rank") == reference).select("instance", _ref_step="step")
    summary = (aligned.group_by("instance").agg(
        match=pl.col("match").first(), pg=pl.col("pg").first(), position=pl.col("position").first(),
        kind=pl.col("kind").first(), _min_step=pl.col("step").min(), ranks=pl.len(),
        arrival=pl.when((pl.col("kernels") == 0).all()).then(pl.lit("host")).otherwise(pl.lit("kernel")),
        bytes=pl.col("bytes").max(), group_size=pl.col("group_size").max(),
        first_arrival_ns=pl.col("arrival_ns").min())
        .join(ref_step, on="instance", how="left")
        .with_columns(step=pl.coalesce("_ref_step", "_min_step"))
        .join(last, on="instance")
        .join(waits.group_by("instance").agg(wait_ns=pl.col("wait_ns").sum()), on="instance")
        .with_columns(skew_ns=pl.col("last_arrival_ns") - pl.col("first_arrival_ns"),
                      algbw_gbps=pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns")))
        .with_columns(busbw_gbps=pl.col("algbw_gbps") * bus_factor(pl.col("kind"), pl.col("group_size"))))
    instances = summary.select(list(INSTANCES_SCHEMA)).cast(INSTANCES_SCHEMA).sort("instance")  # type: ignore[arg-type]
    return instances, waits


def _culprits(instances: pl.DataFrame, waits: pl.DataFrame, aligned: pl.DataFrame, phases: pl.DataFrame,
              starts: pl.DataFrame, offsets: pl.DataFrame) -> pl.DataFrame:
    timed = instances.filter((pl.col("wait_ns") > 0) & pl.col("step").is_not_null())
    if timed.height == 0:
        return pl.DataFrame(schema=CULPRITS_SCHEMA)
    caused = (timed.group_by("step", "last_rank").agg(
        instances=pl.len(),
        worst_instance=pl.col("instance").sort_by(pl.col("wait_ns"), pl.col("instance"), descending=[True, False]).first())
        .join(_caused(waits, timed, ["step"]), on=["step", "last_rank"])
        .sort("step", "caused_ns", "last_rank", descending=[False, True, False])
        .group_by("step", maintain_order=True).first()
        .rename({"last_rank": "rank"}))
    rows = []
    for step, rank, caused_ns, count, worst in caused.select("step", "rank", "caused_ns", "instances",
                                                              "worst_instance").iter_rows():
        victims = waits.filter((pl.col("instance") == worst) & (pl.col("rank") != rank) & (pl.col("wait_ns") > 0)).height
        phase, lost = _lost_phase(worst, rank, step, aligned, phases, starts, offsets, timed)
        if phase is None:
            phase = instances.filter(pl.col("instance") == worst)["phase"][0]
        rows.append({"step": step, "rank": rank, "caused_ns": caused_ns, "instances": count, "victims": victims,
                     "worst_instance": worst, "lost_phase": phase, "lost_ns": lost})
    return pl.DataFrame(rows, schema=CULPRITS_SCHEMA).sort("step")


def _lost_phase(instance: int, culprit: int, step: int, aligned: pl.DataFrame, phases: pl.DataFrame,
                starts: pl.DataFrame, offsets: pl.DataFrame, timed: pl.DataFrame) -> tuple[str | None, int]:
    """The phase the culprit spent the most extra host time in before its launch of ``instance``,
    against the other ranks' median (module docstring); (None, 0) when none shows extra time.
    ``timed``: the instances with a wait (``instance``, ``last_rank``)."""
    at = aligned.filter(pl.col("instance") == instance).select("rank", "pg", "launch_ts", "ts", "step")
    pg = at["pg"][0]
    late = timed.filter(pl.col("last_rank") == culprit)["instance"]
    before = (aligned.filter((pl.col("pg") == pg) & (pl.col("step") == step) & ~pl.col("instance").is_in(late.implode()))
              .join(at.select("rank", _at_ts="ts"), on="rank")
              .filter(pl.col("ts") < pl.col("_at_ts"))
              .group_by("rank").agg(_prev=pl.col("launch_ts").max()))
    windows = (at.join(before, on="rank", how="left")
               .join(starts.filter(pl.col("step") == step).select("rank", "cpu_start_ns"), on="rank", how="left")
               .join(offsets.select("rank", "offset_ns"), on="rank", how="left")
               .select("rank", w_start=pl.coalesce("_prev", "cpu_start_ns"), w_end=pl.coalesce("launch_ts", "ts"),
                       from_step=pl.col("_prev").is_null(), offset_ns=pl.col("offset_ns").fill_null(0))
               .filter(pl.col("w_start").is_not_null() & (pl.col("w_end") > pl.col("w_start"))))
    if windows.filter(pl.col("rank") == culprit).height == 0 or windows.height < 2:
        return None, 0
    clipped = (phases.join(windows, on="rank")
               .with_columns(_s=pl.max_horizontal("ts", "w_start"), _e=pl.min_horizontal("end", "w_end"))
               .filter(pl.col("_e") > pl.col("_s"))
               .group_by("rank", "phase").agg(time_ns=(pl.col("_e") - pl.col("_s")).sum()))
    grid = windows.select("rank").join(clipped.select("phase").unique(), how="cross")
    per = grid.join(clipped, on=["rank", "phase"], how="left").with_columns(pl.col("time_ns").fill_null(0))
    others = per.filter(pl.col("rank") != culprit).group_by("phase").agg(_median=pl.col("time_ns").median())
    excess = (per.filter(pl.col("rank") == culprit).join(others, on="phase")
              .select("phase", excess=(pl.col("time_ns") - pl.col("_median")).round(0).cast(pl.Int64)))
    if windows.filter(pl.col("rank") == culprit)["from_step"][0]:
        # Entering the step late (on the common clock) is time lost before the step's window.
        starts_at = windows.select("rank", _at=pl.col("w_start") - pl.col("offset_ns"))
        mine = starts_at.filter(pl.col("rank") == culprit)["_at"][0]
        # Differences first: a median of absolute ns in float64 would lose the last 8 bits.
        late = (mine - starts_at.filter(pl.col("rank") != culprit)["_at"]).median()
        excess = pl.concat([excess, pl.DataFrame({"phase": [BEFORE_STEP], "excess": [round(late)]},
                                                 schema={"phase": pl.String, "excess": pl.Int64})])
    excess = excess.sort("excess", "phase", descending=[True, False])
    if excess.height == 0 or excess["excess"][0] <= 0:
        return None, 0
    return excess["phase"][0], int(excess["excess"][0])


def _per_rank(keyed: pl.DataFrame, complete: pl.DataFrame, waits: pl.DataFrame, instances: pl.DataFrame,
              ranks: list[int]) -> pl.DataFrame:
    grid = pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int64})
    if not ranks:
        return pl.DataFrame(schema=RANK_WAITS_SCHEMA)
    calls = keyed.group_by("rank").agg(calls=pl.len())
    matched = complete.group_by("rank").agg(_matched=pl.len())
    waited = intervals.union_ns(_wait_spans(waits), by=["rank"]).rename({"busy_ns": "wait_ns"})
    timed = instances.filter(pl.col("wait_ns") > 0)
    caused = (timed.group_by("last_rank").agg(last_at=pl.len())
              .join(_caused(waits, timed, []), on="last_rank", how="left").rename({"last_rank": "rank"}))
    return (grid.join(calls, on="rank", how="left").join(matched, on="rank", how="left")
            .join(waited, on="rank", how="left").join(caused, on="rank", how="left")
            .with_columns(pl.col("calls").fill_null(0), pl.col("wait_ns").fill_null(0), pl.col("caused_ns").fill_null(0),
                          pl.col("last_at").fill_null(0),
                          unmatched=pl.col("calls").fill_null(0) - pl.col("_matched").fill_null(0))
            .select(list(RANK_WAITS_SCHEMA)).cast(RANK_WAITS_SCHEMA).sort("rank"))  # type: ignore[arg-type]


def _wait_spans(waits: pl.DataFrame) -> pl.DataFrame:
    """Each wait as the span it lasted on the common clock: ``instance, rank, ts, end`` (arrival to
    the last arrival), waits of 0 left out."""
    return (waits.filter(pl.col("wait_ns") > 0)
            .select("instance", "rank", ts=pl.col("arrival_ns"), end=pl.col("arrival_ns") + pl.col("wait_ns")))


def _caused(waits: pl.DataFrame, timed: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The wait each last arriver caused, per ``by`` (columns of ``timed``, the instances with a
    wait): ``*by, last_rank, caused_ns`` — summed over the other ranks, each one's union of its
    waits at those instances (module docstring: waits in flight together count once)."""
    spans = _wait_spans(waits).join(timed.select("instance", "last_rank", *by), on="instance")
    keys = [*by, "last_rank"]
    if spans.height == 0:
        return timed.select(*keys).unique().with_columns(caused_ns=pl.lit(0, pl.Int64))
    per_victim = intervals.union_ns(spans.filter(pl.col("rank") != pl.col("last_rank")), by=[*keys, "rank"])
    return per_victim.group_by(keys).agg(caused_ns=pl.col("busy_ns").sum())


def waited_per_step(cross: Skew) -> pl.DataFrame:
    """Each rank's wait per step: ``rank i64, step i64, wait_ns i64``, the union of its waits at the
    instances of that step (module docstring); ranks and steps without a wait have no row."""
    spans = _wait_spans(cross.waits).join(cross.instances.select("instance", "step"), on="instance")
    spans = spans.filter(pl.col("step").is_not_null())
    if spans.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int64, "step": pl.Int64, "wait_ns": pl.Int64})
    return (intervals.union_ns(spans, by=["rank", "step"]).rename({"busy_ns": "wait_ns"})
            .select("rank", "step", "wait_ns").sort("rank", "step"))
