"""The report's serving section: a serving or generation loop's phases, tokens and cost per token
(:mod:`tracekit.analyses.serving`), as one table and the notes that say where the figures came from.
Words only: every figure is the analysis'."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from tracekit.render.text import Rows, us

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: Kernel classes named per phase (the JSON has them all).
TOP_CLASSES = 3
#: Where each source's counts come from, in words.
SOURCES = {
    "vllm": "vLLM's iteration annotations (execute_context_N(ctx)_generation_M(gen))",
    "sglang": "SGLang's step annotations (step[MODE bs=N toks=T])",
    "tensorrt-llm": "TensorRT-LLM's _forward_step ranges (request counts only)",
    "shapes": "the input shape of each forward's aten::embedding ([batch, seq]: seq > 1 a prefill, 1 a decode step)",
}


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def _per_token(ns: float | None) -> str:
    return "unknown" if ns is None else us(ns)


def table(report: Report) -> Rows | None:
    """Per phase over all iterations and over the steady-state window; None without a serving loop."""
    found = report.serving
    if found is None:
        return None
    classes: dict[str, list[str]] = {}
    for r in found.classes.iter_rows(named=True):
        if len(classes.setdefault(r["phase"], [])) < TOP_CLASSES:
            classes[r["phase"]].append(f"{r['kernel_class']} {100 * r['share']:.0f}%")
    rows = []
    for scope, frame in (("all", found.phases), ("steady", found.window_phases)):
        for r in frame.iter_rows(named=True):
            rows.append([r["phase"], scope, f"{r['iterations']:,}", _count(r["requests"]), _count(r["tokens"]),
                         us(r["wall_ns"]), us(r["cpu_span_ns"]), us(r["gpu_busy_ns"]), us(r["gpu_idle_ns"]),
                         _per_token(r["ns_per_token"]), _per_token(r["gpu_ns_per_token"]),
                         ", ".join(classes.get(r["phase"], [])) if scope == "all" else ""])
    window = found.window
    span = (f"units {window['first']}–{window['last']}" if window.get("first") is not None else "no unit")
    return (f"Serving loop by phase (steady: {span}, {window.get('iterations', 0)} iterations)",
            ["phase", "iterations of", "iterations", "requests", "tokens", "wall", "host (CPU span)", "GPU busy",
             "GPU idle", "wall per token", "GPU busy per token", "kernel classes (GPU time)"], rows)


def notes(report: Report) -> list[str]:
    """Where the phases and tokens came from, what the steady window is, and the per-token rule."""
    found = report.serving
    if found is None:
        return []
    window = found.window
    after = (f"after unit {window['after']}, the last to warm up (cold, warm-up, compile or CUDA-graph capture)"
             if window.get("after") is not None else "no unit warmed up")
    unknown = found.iterations.filter(pl.col("phase") == "unknown").height
    out = [f"Serving: phases, requests and tokens from {SOURCES.get(found.source, found.source)}"
           + (f"; {unknown} iteration{'s' if unknown != 1 else ''} carry none (phase unknown)" if unknown else "")
           + f". Steady window: {after}, without a last iteration the trace may have cut. Per token: the "
             "phase's wall (and GPU busy) over its tokens; unknown when an iteration's tokens are not known."]
    return out


def candidates_note(report: Report) -> str | None:
    """The period candidates found for a loop without annotations (``--unit from:OP``), with their coverage."""
    units = report.units
    if units is None or units.source != "auto" or units.candidates.height == 0:
        return None
    offered = units.candidates.filter(pl.col("name").str.starts_with("from:"))
    if offered.height == 0:
        return None
    parts = [f"{r['name']} ({r['occurrences']} periods, {100 * r['coverage']:.1f}% of the launches, "
             f"{r['alike']} alike)" for r in offered.iter_rows(named=True)]
    return "Unit candidates of a loop without annotations (--unit NAME): " + "; ".join(parts) + "."
