"""Iteration units: what a trace's "steps" are, with or without ``ProfilerStep#N``.

Every per-step figure (the Steps and Launch-gaps tables, round trips per step, the per-class summary
per unit, ``diff`` and ``check``) is computed per *unit*. A trace profiled with a schedule has
``ProfilerStep#N`` spans and those are its units. Many real traces have none (``prof.step()``
without a ``schedule`` writes no ``ProfilerStep``; serving engines and one-shot scripts never call
it), so units are found by one rule, the same for ``report``, ``diff`` and ``check``:

1. ``--unit NAME`` (``source = "user"``): the spans named NAME (any category), numbered 1, 2, … in
   time order; ``--unit from:OP``: the periods from one top-level OP to the next (rule d's units).
2. ``ProfilerStep#N`` spans when the trace has them (``source = "profiler"``).
3. Otherwise (``source = "auto"``), the first of these that applies:

   a. **Repeating span** (``kind = "span"``): among *user annotations* (``record_function``
      labels: ``mlp_fwd``, ``execute_context_…``, ``DistributedDataParallel.forward``) at any depth
      and *top-level ops* (a ``cpu_op`` no other op or annotation encloses, e.g. ``Torch-Compiled
      Region: 0/0`` around a compiled model), the span names whose outermost occurrences repeat
      at least :data:`MIN_REPEATS` times and hold the launch calls of at least
      :data:`MIN_COVERAGE` of the GPU activities that have a launch call in the trace. Coverage
      counts activities, not GPU time: an iteration launches nearly all kernels, while an op that
      merely waits on a long communication kernel (``record_param_comms``) would win on time.
      Among those: a top-level one first, then the highest coverage, then the fewest occurrences
      (the enclosing loop rather than a layer inside it), then the earliest, then the name.
   b. **Iteration markers** (``kind = "period"``): PyTorch writes some annotations once per
      training iteration without enclosing it (:data:`ITERATION_MARKERS`: the DataLoader fetch, the
      optimizer step). With at least :data:`MIN_REPEATS` of one, unit k runs from the start of
      occurrence k to the start of occurrence k+1; the last runs to the end of the thread's CPU
      activity and is flagged ``partial`` (the trace may have cut it). The periods must cover
      :data:`MIN_COVERAGE` too.
   c. **One iteration** (``kind = "span"``): a single span of the same candidates that covers
      :data:`MIN_COVERAGE` (a trace of one ``Model_Forward`` or ``training_step``).
   d. **A repeated forward** (``kind = "period"``, name ``from:OP``): a loop without annotations (a
      generate() or decode loop) — from one top-level op of the busiest thread to the next, the last
      open-ended and ``partial``, when the op opens a forward (:data:`FORWARD_ENTRY_OPS`:
      ``aten::embedding``; or a compiled model's call, ``Torch-Compiled Region: F/*`` — every
      compilation of frame F, :data:`COMPILED_CALL` — inside which the embedding runs), repeats >=
      :data:`MIN_FORWARDS` times, its periods hold :data:`MIN_COVERAGE` of the launches and at least
      half of them the same top-level op sequence. A loop whose forward runs eagerly for a while and
      compiled after (Hugging Face's static-cache ``generate``: an eager prefill, compiled decode
      steps) has both, one block after the other: their union (``from:aten::embedding|Torch-Compiled
      Region: 0/*``) is a candidate of its own and, when it qualifies, is chosen before either part.
      Other ops that split the trace alike are offered (``candidates``, ``--unit from:OP``) but never
      chosen: a layer of one forward repeats too.
   e. **The whole trace** (``kind = "trace"``, unit number 0): from the first CPU event to the last
      CPU event's end (the GPU work if the trace has no CPU events); its rule names the best period
      candidate with its coverage.

Occurrences on several threads: the thread holding the most occurrences is used (ties: the first
in time), so units never overlap. Spans named ``ProfilerStep…`` are never candidates.

Numbered labels: a user annotation named ``<stem>#<n>``, optionally followed by a space and more text
(``mlp_fwd#3``, ``mlp_fwd#3 64x128``), is one call of the family ``<stem>#N`` when the family's labels
differ — PyTorch's own ``ProfilerStep#N`` convention, used by scripts that number their calls (a shape
sweep labels each call with its number and shape, so no two names are equal); one label repeated is
just a repeating name. Rules a–c count the family as one name;
its units keep their own labels and, when the numbers are distinct, their own numbers (else 1, 2, …).
``--unit mlp_fwd#N`` names the family. A serving engine's iteration labels
(:mod:`tracekit.analyses.serving_labels`: ``execute_context_1(512)_generation_3(3)``, ``step[DECODE
bs=8]``) are families too, named ``execute_context_N(ctx)_generation_M(gen)``, ``step[MODE bs=N]``,
``_forward_step``; their units keep their own labels, numbered 1, 2, ….

Contract: :func:`detect` returns a frozen :class:`Units`; :meth:`Units.apply` gives the trace with
its ``steps`` frame replaced by the unit windows (what every per-step analysis reads), and
:meth:`Units.tag` the step of GPU work by its launch call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

import polars as pl

from tracekit.analyses import compilations
from tracekit.analyses import steps as steps_analysis
from tracekit.errors import UsageError
from tracekit.analyses import serving_labels
from tracekit.trace import STEPS_SCHEMA, Trace

#: A span name must repeat this often to be a unit (rules a and b).
MIN_REPEATS = 2
#: Share of the launched GPU activities the units must hold (rules a, b and c).
MIN_COVERAGE = 0.80
STEP_PREFIX = "ProfilerStep"
#: A numbered label (``mlp_fwd#3 64x128``) and what its family is called (``mlp_fwd#N``).
NUMBERED_LABEL = r"(?s)^(.+?#)\d+(?:\s.*)?$"
FAMILY_SUFFIX = "#N"
#: Annotations PyTorch writes once per training iteration, without enclosing it; the first found
#: (in this order) delimits units. (prefix, why)
ITERATION_MARKERS: tuple[tuple[str, str], ...] = (
    ("enumerate(DataLoader)#", "the training loop fetching its batch: the start of each iteration"),
    ("Optimizer.step#", "the optimizer step: once per iteration, at its end"),
)
#: A loop without annotations (rule e) needs this many periods: a prefill and two decode forwards.
MIN_FORWARDS = 3
#: Ops that open a model's forward, preferred as rule e's period boundary (op, why).
FORWARD_ENTRY_OPS: tuple[tuple[str, str], ...] = (
    ("aten::embedding", "a language model's forward opens with its token-embedding lookup, whose index "
                        "input also says how many tokens the forward processes"),
)
#: A compiled model's call (rule d): the op ``torch.compile`` wraps each call of a compiled frame in,
#: ``Torch-Compiled Region: <frame>/<compilation>``; a frame's compilations (one per shape or guard
#: failure) are one family, written ``Torch-Compiled Region: <frame>/*``.
COMPILED_CALL = rf"^{compilations.REGION_PREFIX}(\d+)/\d+$"
COMPILED_FAMILY = compilations.REGION_PREFIX + "{frame}/*"
#: ``--unit from:OP``: units from one top-level OP to the next (rule e's units, chosen by hand);
#: ``from:A|B``: from each top-level A or B to the next of either; a name ending ``/*`` is a family.
PERIOD_PREFIX = "from:"
MARK_SEPARATOR = "|"
#: Period candidates listed when rule e is reached (the report's notes and JSON).
MAX_OFFERED = 5
#: Rule e in one sentence.
FORWARD_RULE = (
    f"a top-level op repeating >= {MIN_FORWARDS} times on the busiest thread whose periods (one occurrence to the "
    f"next, the last to the thread's end) hold >= {100 * MIN_COVERAGE:.0f}% of the launches, at least half of them "
    f"(and >= {MIN_REPEATS}) the same top-level op sequence, the op one that opens a forward "
    f"({', '.join(op for op, _ in FORWARD_ENTRY_OPS)}, or a compiled model's call, Torch-Compiled Region; an "
    f"eager block of embeddings followed by compiled calls is one loop, preferred to either part; a layer repeats "
    f"too: other ops are only offered, --unit from:OP): "
    f"the fewest periods, then the highest share, the earliest")
#: The automatic rule in one sentence (the report's notes print it under the tables).
DETECTION_RULE = (
    f"without ProfilerStep spans, a unit is each outermost span of the user annotation or top-level op "
    f"that repeats >= {MIN_REPEATS} times and holds the launch calls of >= {100 * MIN_COVERAGE:.0f}% of the "
    f"launched GPU activities (top-level first, then highest share, fewest repeats); else the periods between "
    f"PyTorch's per-iteration annotations ({', '.join(p + '…' for p, _ in ITERATION_MARKERS)}); else one span "
    f"holding >= {100 * MIN_COVERAGE:.0f}% of them; else the periods of a repeated forward ({FORWARD_RULE}); "
    f"else the whole trace. Cold, warm-up, compiling and cut-short "
    f"units are flagged and left out of medians")
CANDIDATES_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String, "cat": pl.String, "occurrences": pl.UInt32, "top_level": pl.Boolean,
    "coverage": pl.Float64, "first_ns": pl.Int64, "alike": pl.UInt32,
}
_KIND_WORDS = {"ProfilerStep": "ProfilerStep#N spans", "span": "spans of", "period": "iterations delimited by",
               "trace": "the whole trace"}


@dataclass(frozen=True)
class Units:
    """The iteration units of a trace (see module docstring).

    Attributes
    ----------
    kind : str
        ``"ProfilerStep"``, ``"span"`` (each occurrence of ``name`` is a unit), ``"period"`` (units
        run from one ``name`` marker to the next), ``"trace"`` (one unit, number 0) or ``"none"``
        (an empty trace).
    name : str or None
        The span or marker name (``"ProfilerStep"`` for profiler steps; None for the whole trace).
    source : str
        ``"profiler"``, ``"user"`` (``--unit``) or ``"auto"``.
    rule : str
        Why these units, in words (the detection rule that chose them).
    windows : DataFrame
        One row per unit with the ``Trace.steps`` schema: ``name str`` (label, e.g. ``mlp_fwd#3``),
        ``number i64``, ``ts i64, dur i64, end i64`` (its CPU window), ``pid str, tid str``.
    partial : tuple of int
        Units the trace may have cut short (the last period of a marker).
    candidates : DataFrame
        For automatic detection, every name considered (:data:`CANDIDATES_SCHEMA`: ``name, cat,
        occurrences u32, top_level bool, coverage f64, first_ns i64``), best first; empty otherwise.
    """

    kind: str
    name: str | None
    source: str
    rule: str
    windows: pl.DataFrame
    partial: tuple[int, ...] = ()
    candidates: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CANDIDATES_SCHEMA))

    @property
    def label(self) -> str:
        """``ProfilerStep``, the span name, or ``trace`` (the ``unit_kind`` diff and check name)."""
        return "trace" if self.kind in ("trace", "none") else (self.name or self.kind)

    def describe(self) -> str:
        """One line for the report's facts: what the units are and why."""
        n = self.windows.height
        if self.kind == "none":
            return "none (no events)"
        what = _KIND_WORDS.get(self.kind, self.kind)
        head = what if self.kind in ("ProfilerStep", "trace") else f"{what} {self.name}"
        return f"{head} ({n} unit{'s' if n != 1 else ''}; {self.rule})"

    def apply(self, trace: Trace) -> Trace:
        """``trace`` with its ``steps`` frame replaced by the unit windows (the same trace when the
        units are its ProfilerSteps)."""
        return trace if self.kind == "ProfilerStep" else replace(trace, steps=self.windows)

    def tag(self, gpu: pl.DataFrame) -> pl.DataFrame:
        """``gpu`` (attributed work with ``launch_ts``) with ``step`` = the unit holding its launch
        call (null without a launch call in the trace, or outside every unit)."""
        return steps_analysis.tag_steps(gpu, self.windows, "launch_ts")


def detect(trace: Trace, gpu: pl.DataFrame, unit: str | None = None) -> Units:
    """The units of ``trace`` by the module docstring's rule.

    ``gpu`` is the attributed GPU work (:class:`~tracekit.analyses.attribution.Attribution`'s
    ``gpu``: ``launch_ts`` is read); ``unit`` a span name to use instead (``--unit``).
    Raises :class:`~tracekit.errors.UsageError` when ``unit`` names no span of the trace.
    """
    if unit is not None:
        named = trace.ops.filter(pl.col("name") == unit)
        families = {name for _, _, name, _, _ in serving_labels.ENGINES}
        if named.height == 0 and (unit.endswith(FAMILY_SUFFIX) or unit in families):
            named = _family_names(trace.ops.filter(pl.col("cat") == "user_annotation")).filter(pl.col("name") == unit)
        if named.height == 0 and unit.startswith(PERIOD_PREFIX):
            launched = gpu.filter(pl.col("launch_ts").is_not_null())["launch_ts"].sort()
            chosen = _forward_periods(trace, launched, unit[len(PERIOD_PREFIX):])
            if chosen is not None:
                return chosen
        spans = _one_thread(_outermost(named))
        if spans.height == 0:
            raise UsageError(f"{os.path.basename(trace.meta.path)}: no span named {unit!r} to use as --unit")
        return Units("span", unit, "user", f"--unit {unit}", _span_windows(spans, unit))
    if trace.steps.height:
        return Units("ProfilerStep", "ProfilerStep", "profiler", "the profiler's schedule wrote them",
                     trace.steps.select(list(STEPS_SCHEMA)))
    launched = gpu.filter(pl.col("launch_ts").is_not_null())["launch_ts"].sort()
    candidates = _candidates(trace, launched)
    repeating = candidates.filter(pl.col("occurrences") >= MIN_REPEATS)
    if repeating.height:
        name = repeating["name"][0]
        spans = _one_thread(_outermost(_candidate_spans(trace).filter(pl.col("name") == name)))
        return Units("span", name, "auto", _rule_text("repeats", repeating.row(0, named=True)),
                     _span_windows(spans, name), candidates=candidates)
    found = _periods(trace, launched)
    if found is not None:
        return replace(found, candidates=candidates)
    single = candidates.filter(pl.col("occurrences") == 1)
    if single.height:
        name = single["name"][0]
        spans = _outermost(_candidate_spans(trace).filter(pl.col("name") == name))
        return Units("span", name, "auto", _rule_text("single", single.row(0, named=True)),
                     _span_windows(spans, name), candidates=candidates)
    # Rule e: a loop without annotations (a generate() or decode loop) — the repeated forward.
    offered = _forward_candidates(trace, launched)
    chosen = offered.filter(pl.col("qualifies"))
    if chosen.height:
        name = chosen["name"][0][len(PERIOD_PREFIX):]
        found = _forward_periods(trace, launched, name, source="auto")
        if found is not None:
            return replace(found, candidates=pl.concat([candidates, _offered(offered)]))
    whole = _whole_trace(trace, gpu)
    if offered.height:
        best = offered.row(0, named=True)
        whole = replace(whole, rule=(
            f"{whole.rule}; the best candidate, --unit '{best['name']}', holds {100 * best['coverage']:.1f}% of the "
            f"launches in {best['occurrences']} periods, {best['alike']} of them alike"))
    return replace(whole, candidates=pl.concat([candidates, _offered(offered)]))


def _rule_text(how: str, row: dict) -> str:
    share = f"{100 * row['coverage']:.0f}%"
    where = "a top-level op" if row["top_level"] and row["cat"] == "cpu_op" else (
        "a top-level annotation" if row["top_level"] else "an annotation")
    if how == "repeats":
        return (f"auto: {where} repeating {row['occurrences']} times and holding the launches of {share} "
                f"of the GPU activities; --unit NAME to choose another")
    return (f"auto: one iteration — {where} holding the launches of {share} of the GPU activities, "
            f"nothing repeats; --unit NAME to choose another")


# -- candidates --------------------------------------------------------------------------------

def _nested(by: list[str]) -> pl.Expr:
    """Whether a span starts inside an earlier (or equal, longer) span of its ``by`` group; the
    frame must be in :func:`_ordered` order."""
    return (pl.col("ts") < pl.col("end").cum_max().shift(1).over(by)).fill_null(False)


def _ordered(spans: pl.DataFrame) -> pl.DataFrame:
    return spans.sort(["pid", "tid", "ts", "end", "idx"], descending=[False, False, False, True, False])


def _outermost(spans: pl.DataFrame) -> pl.DataFrame:
    """The occurrences of each name not nested in another occurrence of it (same thread)."""
    ordered = _ordered(spans)
    return ordered.filter(~_nested(["pid", "tid", "name"])).sort(["ts", "idx"])


def _one_thread(spans: pl.DataFrame) -> pl.DataFrame:
    """``spans`` of the (pid, tid) holding most of them (ties: the earliest), in time order."""
    if spans.height == 0:
        return spans
    best = (spans.group_by("pid", "tid").agg(n=pl.len(), first=pl.col("ts").min())
            .sort(["n", "first", "pid", "tid"], descending=[True, False, False, False]).row(0, named=True))
    return spans.filter((pl.col("pid") == best["pid"]) & (pl.col("tid") == best["tid"])).sort(["ts", "idx"])


def _family_names(spans: pl.DataFrame) -> pl.DataFrame:
    """``spans`` with ``label`` (the name as written) and ``name`` the family of a numbered user
    annotation (``mlp_fwd#3 64x128`` -> ``mlp_fwd#N``) or of a serving engine's iteration label
    (``execute_context_1(512)_generation_3(3)`` -> ``execute_context_N(ctx)_generation_M(gen)``;
    see the module docstring), else the name."""
    numbered = (pl.col("cat") == "user_annotation") & ~pl.col("name").str.starts_with(STEP_PREFIX)
    family = pl.col("name").str.replace(NUMBERED_LABEL, "${1}" + FAMILY_SUFFIX[1:])
    for _, pattern, name, _, _ in serving_labels.ENGINES:
        family = pl.when(pl.col("name").str.contains(pattern.pattern)).then(pl.lit(name)).otherwise(family)
    spans = spans.with_columns(label=pl.col("name"), name=pl.when(numbered).then(family).otherwise(pl.col("name")))
    # A family is labels that differ: one label repeated (a name that merely holds "#12 ") stays itself.
    return spans.with_columns(name=pl.when(pl.col("label").n_unique().over("name") > 1).then(pl.col("name"))
                              .otherwise(pl.col("label")))


def _candidate_spans(trace: Trace) -> pl.DataFrame:
    """User annotations at any depth and top-level cpu_ops, ProfilerStep excluded, with ``top_level``
    (numbered annotations named by their family, their own names in ``label``)."""
    spans = _ordered(trace.ops.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"])))
    spans = spans.with_columns(top_level=~_nested(["pid", "tid"]))
    return _family_names(spans.filter(
        ~pl.col("name").str.starts_with(STEP_PREFIX)
        & ((pl.col("cat") == "user_annotation") | ((pl.col("cat") == "cpu_op") & pl.col("top_level")))))


def _covered(windows: pl.DataFrame, launched: pl.Series) -> pl.Series:
    """Per window, how many of the (sorted) launch times fall in its ``[ts, end)``."""
    return (launched.search_sorted(windows["end"], side="left").cast(pl.Int64)
            - launched.search_sorted(windows["ts"], side="left").cast(pl.Int64))


def _candidates(trace: Trace, launched: pl.Series) -> pl.DataFrame:
    """Every candidate name with its outermost occurrences (on one thread) and coverage, best first.

    Vectorised over all names at once: a name's occurrences on one thread are disjoint, so its
    coverage is the sum over its windows of the launch times inside each (two binary searches)."""
    spans = _candidate_spans(trace)
    if spans.height == 0:
        return pl.DataFrame(schema=CANDIDATES_SCHEMA)
    outer = _outermost(spans)
    busiest = (outer.group_by("name", "pid", "tid").agg(_n=pl.len(), _first=pl.col("ts").min())
               .sort(["name", "_n", "_first", "pid", "tid"], descending=[False, True, False, False, False])
               .unique(subset=["name"], keep="first").select("name", "pid", "tid"))
    mine = outer.join(busiest, on=["name", "pid", "tid"], how="semi")
    total = launched.len()
    mine = mine.with_columns(_inside=_covered(mine, launched) if total else pl.lit(0, pl.Int64))
    frame = (mine.group_by("name")
             .agg(cat=pl.col("cat").sort_by("ts").first(), occurrences=pl.len(), top_level=pl.col("top_level").any(),
                  coverage=(pl.col("_inside").sum() / total) if total else pl.lit(0.0), first_ns=pl.col("ts").min(),
                  alike=pl.lit(None, pl.UInt32))
             .select(list(CANDIDATES_SCHEMA)).cast(CANDIDATES_SCHEMA))  # type: ignore[arg-type]
    return (frame.filter(pl.col("coverage") >= MIN_COVERAGE)
            .sort(["top_level", "coverage", "occurrences", "first_ns", "name"],
                  descending=[True, True, False, False, False]))


def _span_windows(spans: pl.DataFrame, name: str) -> pl.DataFrame:
    n = spans.height
    label = pl.lit(f"{name}#") + pl.int_range(1, n + 1).cast(pl.String)
    number = pl.int_range(1, n + 1, dtype=pl.Int64)
    if "label" in spans.columns and name in {fam for _, _, fam, _, _ in serving_labels.ENGINES}:
        label = pl.col("label")  # a serving engine's iterations keep their own labels (their counts)
    elif name.endswith(FAMILY_SUFFIX) and "label" in spans.columns:
        # A numbered family keeps each call's own label, and its number when they are distinct.
        stem = len(name) - len(FAMILY_SUFFIX) + 1
        own = spans["label"].str.slice(stem).str.extract(r"^(\d{1,18})", 1).cast(pl.Int64, strict=False)
        label = pl.col("label")
        if own.null_count() == 0 and own.n_unique() == n:
            number = pl.lit(own)
    return spans.select(
        label.alias("name"),
        number.alias("number"),
        "ts", (pl.col("end") - pl.col("ts")).alias("dur"), "end", "pid", "tid",
    ).cast(STEPS_SCHEMA)  # type: ignore[arg-type]


def _mark_to_mark(marks: pl.DataFrame, prefix: str, end: int) -> pl.DataFrame:
    """Units (:data:`STEPS_SCHEMA`) from each of ``marks`` (``ts, pid, tid``, in time order) to the
    next, the last to ``end``, named ``<prefix>#1``, ``#2``, …"""
    n = marks.height
    return marks.select(
        (pl.lit(f"{prefix}#") + pl.int_range(1, n + 1).cast(pl.String)).alias("name"),
        pl.int_range(1, n + 1, dtype=pl.Int64).alias("number"),
        "ts", pl.col("ts").shift(-1).fill_null(end).alias("end"), "pid", "tid",
    ).with_columns(dur=pl.col("end") - pl.col("ts")).select(list(STEPS_SCHEMA)).cast(STEPS_SCHEMA)  # type: ignore[arg-type]


def _periods(trace: Trace, launched: pl.Series) -> Units | None:
    """Rule b: units between consecutive iteration markers, or None."""
    notes = trace.ops.filter(pl.col("cat") == "user_annotation")
    for prefix, why in ITERATION_MARKERS:
        marks = _one_thread(_outermost(notes.filter(pl.col("name").str.starts_with(prefix))))
        if marks.height < MIN_REPEATS:
            continue
        pid = marks["pid"][0]
        cpu = pl.concat([trace.ops.filter(pl.col("pid") == pid).select("end"),
                         trace.launches.filter(pl.col("pid") == pid).select("end")])
        last_end = max(int(cpu["end"].max()), int(marks["end"].max()))  # type: ignore[arg-type]
        n = marks.height
        windows = _mark_to_mark(marks, "iteration", last_end)
        total = launched.len()
        coverage = int(_covered(windows, launched).sum()) / total if total else 0.0
        if coverage < MIN_COVERAGE:
            continue
        name = marks["name"][0]
        rule = (f"auto: no span holds an iteration; {n} annotations {prefix}… ({why}) delimit them, "
                f"holding the launches of {100 * coverage:.0f}% of the GPU activities; the last is "
                f"open-ended; --unit NAME to choose another")
        return Units("period", name, "auto", rule, windows, partial=(n,))
    return None


# -- rule e: the repeated forward --------------------------------------------------------------

def _forward_thread(trace: Trace) -> pl.DataFrame:
    """The top-level cpu_ops (ProfilerStep excluded) of the thread holding most of them, in time order."""
    spans = _ordered(trace.ops.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"])))
    spans = spans.with_columns(top_level=~_nested(["pid", "tid"]))
    top = spans.filter(pl.col("top_level") & (pl.col("cat") == "cpu_op")
                       & ~pl.col("name").str.starts_with(STEP_PREFIX))
    return _one_thread(top)


def _thread_end(trace: Trace, pid: str, ops: pl.DataFrame) -> int:
    """Where the last period of a thread ends: its process's last CPU event's end."""
    cpu = pl.concat([trace.ops.filter(pl.col("pid") == pid).select("end"),
                     trace.launches.filter(pl.col("pid") == pid).select("end")])
    return max(int(cpu["end"].max()), int(ops["end"].max()))  # type: ignore[arg-type]


def _mark_label(name: str) -> str:
    """The name a top-level op marks periods under: a compiled call's family, else its own name."""
    frame = re.match(COMPILED_CALL, name)
    return COMPILED_FAMILY.format(frame=frame.group(1)) if frame else name


def _mark_sets(labels: list[str]) -> dict[str, tuple[list[int], bool]]:
    """Every period candidate of rule d: ``{from-name: (positions of its marks, opens a forward)}``.

    One per top-level op name (a compiled call's family as one name) repeating >= :data:`MIN_FORWARDS`
    times, plus, per compiled family, its union with the forward entry op when the two come in two
    blocks, one before the other (an eager prefill, then compiled decode steps) — interleaved, the
    compiled calls are parts of each forward (compiled layers), not forwards."""
    positions: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        positions.setdefault(label, []).append(i)
    entry = {op for op, _ in FORWARD_ENTRY_OPS}
    compiled = {name for name in positions if name.startswith(compilations.REGION_PREFIX)}
    sets = {name: (where, name in entry or name in compiled)
            for name, where in positions.items() if len(where) >= MIN_FORWARDS}
    for name in compiled:
        where = positions[name]
        for op in entry & positions.keys():
            eager = positions[op]
            if max(eager) < min(where) or max(where) < min(eager):
                union = sorted(eager + where)
                if len(union) >= MIN_FORWARDS:
                    sets[f"{op}{MARK_SEPARATOR}{name}"] = (union, True)
    return sets


def _forward_candidates(trace: Trace, launched: pl.Series) -> pl.DataFrame:
    """Every period candidate of the busiest thread (:func:`_mark_sets`) as a row of
    :data:`CANDIDATES_SCHEMA` plus ``qualifies bool`` (``name`` is the ``--unit`` argument
    ``from:NAME``), best first (:data:`FORWARD_RULE`)."""
    ops = _forward_thread(trace)
    schema = {**CANDIDATES_SCHEMA, "qualifies": pl.Boolean}
    if ops.height == 0:
        return pl.DataFrame(schema=schema)
    names = ops["name"].to_list()
    labels = [_mark_label(n) for n in names]
    starts = ops["ts"].to_list()
    end = _thread_end(trace, ops["pid"][0], ops)
    total = launched.len()
    rows = []
    for name, (where, opens) in _mark_sets(labels).items():
        first = starts[where[0]]
        inside = (int(launched.search_sorted(end, side="left")) - int(launched.search_sorted(first, side="left"))
                  if total else 0)
        coverage = inside / total if total else 0.0
        bounds = where + [len(names)]
        shapes = [tuple(labels[bounds[k]:bounds[k + 1]]) for k in range(len(where))]
        alike = max(shapes.count(x) for x in set(shapes))
        # A layer of one forward repeats too (SwitchTransformers' MoE layers, nano-vllm's linears):
        # only an op that opens a forward makes units by itself; the others are offered.
        qualifies = coverage >= MIN_COVERAGE and alike >= max(MIN_REPEATS, -(-len(where) // 2)) and opens
        rows.append({"name": PERIOD_PREFIX + name, "cat": "cpu_op", "occurrences": len(where), "top_level": True,
                     "coverage": coverage, "first_ns": first, "alike": alike, "qualifies": qualifies,
                     "_entry": opens, "_union": MARK_SEPARATOR in name})
    if not rows:
        return pl.DataFrame(schema=schema)
    frame = pl.DataFrame(rows).cast({**schema, "_entry": pl.Boolean, "_union": pl.Boolean})  # type: ignore[arg-type]
    return (frame.sort(["qualifies", "_entry", "_union", "occurrences", "coverage", "first_ns", "name"],
                       descending=[True, True, True, False, True, False, False])
            .drop("_entry", "_union").select(list(schema)))


def _marks(ops: pl.DataFrame, name: str) -> pl.DataFrame:
    """The top-level ops that ``from:name`` delimits periods at (:data:`PERIOD_PREFIX`)."""
    parts = name.split(MARK_SEPARATOR)
    family = pl.col("name").str.replace(COMPILED_CALL, COMPILED_FAMILY.format(frame="${1}"))
    return ops.filter(family.is_in(parts) | pl.col("name").is_in(parts))


def _offered(offered: pl.DataFrame) -> pl.DataFrame:
    """The first :data:`MAX_OFFERED` period candidates, as candidates rows."""
    return offered.head(MAX_OFFERED).select(list(CANDIDATES_SCHEMA))


def _forward_periods(trace: Trace, launched: pl.Series, op: str, *, source: str = "user") -> Units | None:
    """Units from one top-level ``op`` of the busiest thread to the next (the last open-ended and
    ``partial``), or None when that thread has no such op."""
    ops = _forward_thread(trace)
    marks = _marks(ops, op)
    if marks.height == 0:
        return None
    n = marks.height
    end = _thread_end(trace, marks["pid"][0], ops)
    windows = _mark_to_mark(marks, "forward", end)
    total = launched.len()
    coverage = int(_covered(windows, launched).sum()) / total if total else 0.0
    if source == "user":
        rule = f"--unit {PERIOD_PREFIX}{op}: from one top-level {op} to the next; the last is open-ended"
    else:
        opens = (f"the top-level op {op} opens" if MARK_SEPARATOR not in op else
                 "the top-level ops " + " then ".join(op.split(MARK_SEPARATOR)) + " open")
        rule = (f"auto: no span or marker holds an iteration; {opens} a repeated forward: "
                f"{n} periods from one to the next hold the launches of {100 * coverage:.1f}% of the GPU "
                f"activities; the last is open-ended; --unit NAME to choose another")
    return Units("period", PERIOD_PREFIX + op, source, rule, windows, partial=(n,))


def _whole_trace(trace: Trace, gpu: pl.DataFrame) -> Units:
    """Rule d: one unit, number 0, over the CPU events (or the GPU work without any)."""
    cpu = pl.concat([trace.ops.select("pid", "tid", "ts", "end"),
                     trace.launches.select("pid", "tid", "ts", "end")])
    source = cpu if cpu.height else gpu.select("pid", "tid", "ts", "end")
    if source.height == 0:
        return Units("none", None, "auto", "no events", pl.DataFrame(schema=STEPS_SCHEMA))
    # The process that launched most (else has most CPU events) owns the window's dispatch time.
    owner = trace.launches if trace.launches.height else source
    pid = owner.group_by("pid").agg(n=pl.len()).sort(["n", "pid"], descending=[True, False])["pid"][0]
    tid = source.filter(pl.col("pid") == pid)["tid"][0] if source.filter(pl.col("pid") == pid).height else None
    ts, end = int(source["ts"].min()), int(source["end"].max())  # type: ignore[arg-type]
    windows = pl.DataFrame({"name": ["whole trace"], "number": [0], "ts": [ts], "dur": [end - ts],
                            "end": [end], "pid": [pid], "tid": [tid]}, schema=STEPS_SCHEMA)
    return Units("trace", None, "auto", "auto: no span repeats or holds an iteration; --unit NAME to choose one",
                 windows)
