"""The ``compile_preop_tax`` rule: the CPU time torch.compile's wrappers take around each compiled graph's
own call (guards, cache lookup, the compiled region's Python, AOTAutograd's runtime wrapper): info.

What is tax: the union, per thread, of the wrapper spans (every kind of
:data:`tracekit.analyses.compile_ops.COMPILE_PREOPS` but ``call_compiled_graph``) less the time
inside a ``## Call CompiledFxGraph … ##`` span — the graph's own ops and launches, which is the work
the user asked for, not overhead. The spans nest (``Torch-Compiled Region`` holds ``Pregraph
bytecode``, the AOT prologue and ``CompiledFunction``, which holds the graph's call), so adding their
durations counts the same instants two or three times: only the outermost wrapper of each nest is
counted, less the graph calls inside it. Each evidence row is one wrapper name with its own time
outside the graph calls (rows overlap: ``Pregraph bytecode`` is inside the region).
"""

from __future__ import annotations

import re

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.analyses.compile_ops import preop_kind
from tracekit.findings.evidence import as_evidence
from tracekit.findings.model import Context, Finding, Rule

#: Compile wrapper tax below this per step is not worth a line (always info: the fix is structural —
#: fewer, larger compiled regions — and when the host sets the pace ``overhead_bound`` is the warning).
PREOP_MIN_NS = 10_000
#: The span that is the compiled graph's own work, not tax: the ``## Call CompiledFxGraph … ##``
#: annotation, or — in traces with Python stacks from a torch that writes no such annotation — the
#: compiled graph's ``__call__`` frame (``torch/_inductor/output_code.py(581): __call__``).
GRAPH_CALL = "call_compiled_graph"
GRAPH_CALL_FRAME = r"^torch/_inductor/output_code\.py\(\d+\): __call__$"


RULE = Rule(
    id="compile_preop_tax",
    title="torch.compile's CPU wrappers (guards, cache lookup, runtime wrapper) cost host time on every call",
    severity="info",
    needs="torch.compile wrapper spans and the compiled graph's call inside them (tracekit.analyses.compile_ops)",
    thresholds={"PREOP_MIN_NS": PREOP_MIN_NS},
    fix=("fewer, larger compiled regions (compile the whole step, not many small modules; avoid graph "
         "breaks); torch.compiler.set_stance(skip_guard_eval_unsafe=True) once shapes are stable"),
)


def _inside_graph(spans: pl.DataFrame, graphs: pl.DataFrame) -> pl.Series:
    """Per row of ``spans`` (``tid``, ``ts``, ``end``), the ns of it covered by the graph-call spans of
    ``graphs`` on the same thread (which do not overlap each other): G(end) − G(ts), with G(t) the
    graph time on the thread before t, found by an as-of join on the calls' starts."""
    calls = (graphs.sort("tid", "ts")
             .with_columns(before=(pl.col("dur").cum_sum() - pl.col("dur")).over("tid"))
             .select("tid", pl.col("ts").alias("g_ts"), pl.col("dur").alias("g_dur"), "before"))

    def covered(at: str) -> pl.Expr:
        return pl.col("before") + (pl.col(at) - pl.col("g_ts")).clip(0, pl.col("g_dur"))

    out = spans.with_row_index("_row")
    for at in ("ts", "end"):
        found = out.sort(at).join_asof(calls.sort("g_ts"), left_on=at, right_on="g_ts", by="tid",
                                       strategy="backward", check_sortedness=False)
        out = found.with_columns(covered(at).fill_null(0).alias(f"covered_{at}")).drop("g_ts", "g_dur", "before")
    return out.sort("_row").select(pl.col("covered_end") - pl.col("covered_ts")).to_series()


def wrapper_spans(context: Context) -> pl.DataFrame:
    """The steady steps' wrapper spans: ``step``, ``tid``, ``name``, ``kind``, ``ts``, ``end``,
    ``outside_ns`` (the span's time outside graph calls) and ``outermost`` (no other wrapper on
    its thread holds it)."""
    ops = context.trace.ops
    names = ops.select(pl.col("name").unique()).drop_nulls()["name"].to_list()
    kinds = pl.DataFrame({"name": names, "kind": [GRAPH_CALL if re.match(GRAPH_CALL_FRAME, n) else preop_kind(n)
                                                  for n in names]}, schema={"name": pl.String, "kind": pl.String}
                         ).drop_nulls()
    if kinds.height == 0:
        return pl.DataFrame()
    spans = ops.join(kinds, on="name").select("tid", "name", "kind", "ts", "end", "dur")
    graphs = spans.filter(pl.col("kind") == GRAPH_CALL)
    wrappers = spans.filter(pl.col("kind") != GRAPH_CALL)
    if wrappers.height == 0:
        return pl.DataFrame()
    wrappers = wrappers.with_columns(
        outside_ns=pl.col("dur") - (_inside_graph(wrappers, graphs) if graphs.height else 0))
    # Spans on one thread nest: one is held by an earlier one when it ends by that one's end.
    wrappers = (wrappers.sort("tid", "ts", pl.col("end"), descending=[False, False, True])
                .with_columns(outermost=pl.col("end") > pl.col("end").cum_max().shift(1).over("tid").fill_null(-1)))
    tagged = steps_analysis.tag_steps(wrappers, context.trace.steps)
    return context.in_steady(tagged)


def detect(context: Context) -> list[Finding]:
    spans = wrapper_spans(context)
    if spans.height == 0:
        return []
    tax = float(spans.filter("outermost")["outside_ns"].sum()) / context.n
    if tax < PREOP_MIN_NS:
        return []
    n = context.n
    rows = (spans.sort("ts").group_by("name", "kind", maintain_order=True)
            .agg(steps=pl.col("step").unique().sort(), first_step=pl.col("step").first(), first_ts=pl.col("ts").min(),
                 per_step=pl.len() / n, ns_per_step=pl.col("outside_ns").sum() / n, inclusive=pl.col("dur").sum() / n)
            .sort(["ns_per_step", "name"], descending=[True, False])
            .with_columns(role=pl.lit("op"), bytes_per_step=pl.lit(None, pl.Float64),
                          detail=pl.when(pl.col("inclusive") > pl.col("ns_per_step"))
                          .then(pl.col("kind") + pl.lit(": ") + (pl.col("inclusive") / 1000).round(1).cast(pl.String)
                                + pl.lit(" µs per step inclusive, the rest inside the graph's call"))
                          .otherwise(pl.col("kind"))))
    steps = sorted(set(spans["step"].drop_nulls().to_list()))
    busy = float(context.in_steady(context.summary)["gpu_busy_ns"].median() or 0)
    return [RULE.finding(steps, as_evidence(rows.head(6)), tax, tax,
                         "at most the wrappers' own CPU time (their union, less the compiled graph's call "
                         "inside them): fewer, larger regions remove part of it, set_stance the guard part",
                         gpu_busy_ns=int(busy),
                         regions_per_step=round(spans.filter(pl.col("kind") == "compiled_region").height / n, 3),
                         resource="host")]
