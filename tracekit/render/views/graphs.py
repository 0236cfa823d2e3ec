"""The report's CUDA-graph section: each replayed graph, where its activities' ops came from
(:mod:`tracekit.analyses.graph_replays`), and the notes that state the attributed share."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.text import Rows, duration, pct, us

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: How each source is worded in the table.
SOURCES = {
    "capture": "capture in this trace", "companion capture": "capture in the companion",
    "companion": "companion run eagerly", "annotation": "annotation script",
}


def table(report: Report) -> Rows | None:
    """One row per replayed graph; None when the trace replays none."""
    found = report.graphs
    if found is None or found.graphs.height == 0:
        return None
    rows = []
    for r in found.graphs.iter_rows(named=True):
        source = SOURCES.get(r["source"], "not attributed") if r["source"] else "not attributed"
        match = "" if r["match"] is None else r["match"] + (
            f" ({r['score']:.0%})" if r["score"] is not None and r["score"] < 1 else "")
        saved = ("" if r["eager_launch_ns"] is None or r["launch_ns_median"] is None
                 else us(r["eager_launch_ns"] - r["launch_ns_median"]))
        rows.append([r["graph"], str(r["replays"]), str(r["activities_per_replay"]), us(r["replay_ns_median"]),
                     f"{us(r['replay_ns_min'])} – {us(r['replay_ns_max'])}", us(r["gpu_ns"]),
                     pct(r["attributed_ns"], r["gpu_ns"]), source, match,
                     us(r["launch_ns_median"]) if r["launch_ns_median"] is not None else "", saved])
    return ("CUDA graphs: replays and the ops that captured them",
            ["graph", "replays", "activities/replay", "replay (median)", "replay (min – max)", "GPU time",
             "attributed", "ops from", "matched by", "launch call", "launch time saved vs eager"], rows)


def notes(report: Report) -> list[str]:
    """The attributed share of replayed GPU time, the companion, a rewritten trace's lanes."""
    found = report.graphs
    if found is None or (found.replayed_ns == 0 and not found.rewritten):
        return []
    out = []
    if found.replayed_ns:
        unattributed = found.replayed_ns - found.attributed_ns
        text = (f"CUDA graphs: {duration(found.replayed_ns)} of GPU time "
                f"({pct(found.replayed_ns, found.gpu_ns)} of all) was replayed from graphs; "
                f"{pct(found.attributed_ns, found.replayed_ns)} of it is attributed to the ops that launched "
                "it at capture")
        if unattributed:
            text += (f", {duration(unattributed)} ({pct(unattributed, found.replayed_ns)}) is not and stays "
                     "charged to the graph launch "
                     "(profile the capture too, or pass --graph-companion with a trace of the capture phase "
                     "or of the same code run eagerly)")
        text += f"; captures in this trace: {found.captures}"
        if found.companion:
            text += f"; companion: {found.companion}"
        out.append(text + ".")
        scored = found.graphs.filter(found.graphs["score"] < 1)
        if scored.height:
            out.append(f"CUDA graphs: {scored.height} graph(s) matched below 100%: by kernel names, only the "
                       "activities whose names equal the companion's are attributed; by a companion capture, "
                       "the score is one over the captures that agree with the replay when their warm-up "
                       "kernels (names, grids, blocks) single none out (their shapes may differ).")
    if found.annotated_ns:
        out.append(f"CUDA graphs: {duration(found.annotated_ns)} of replayed GPU time carries kernel annotations "
                   "(mark_kernels), shown as their annotation.")
    out += [f"CUDA graphs: {n}." for n in found.notes]
    return out
