"""``tracekit report DIR`` as a document: one summary row per rank trace, the slowest named."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.document import Chart, Charts, Document, Paragraph, Section, Title
from tracekit.render.text import Rows, us
from tracekit.render.views.blocks import table

if TYPE_CHECKING:
    from tracekit.results.ranks import RankReport


def document(rank_report: RankReport) -> Document:
    """Title (on a page only: the table's title heads the text), the ranks' table, the slowest rank,
    and the ranks of the run the directory lacks."""
    rows = ranks_table(rank_report)
    title = rows[0]
    blocks: list = [table(rows)]
    if rank_report.slowest:
        blocks.append(Paragraph((f"Slowest rank: {rank_report.slowest}",), tone="strong",
                                terse=f"slowest: {rank_report.slowest}"))
    blocks.append(Charts((Chart("rank_step_times", rank_report, "rank_step_times", "step time per rank",
                                "Mean and longest step time of each rank, the slowest in red"),)))
    if rank_report.missing:
        blocks.append(Paragraph((missing_line(rank_report),), tone="muted"))
    return Document("ranks", Title(f"tracekit report: {title}", ("tracekit report: ", title), 1, in_text=False),
                    (Section("ranks", "Ranks", tuple(blocks)),), "page")


def ranks_table(rank_report: RankReport) -> Rows:
    """One row per rank trace of a directory, the slowest marked."""
    rows = []
    for r in rank_report.ranks.iter_rows(named=True):
        mark = " (slowest)" if r["file"] == rank_report.slowest else ""
        rows.append([
            "" if r["rank"] is None else str(r["rank"]), r["file"] + mark,
            "" if r["error"] else str(r["steps"]), us(r["mean_step_ns"]) if not r["error"] else "",
            us(r["max_step_ns"]) if not r["error"] else "",
            us(r["gpu_busy_ns"]) if not r["error"] else "",
            "" if r["error"] else str(r["kernel_count"]), r["error"] or "",
        ])
    return (f"Ranks in {rank_report.directory}",
            ["rank", "file", "steps", "mean step", "max step", "GPU busy (all steps)", "kernels", "error"],
            rows)


def missing_line(rank_report: RankReport) -> str:
    """``Not in this directory: ranks 2–5, 7 of 8 (the slowest is the slowest of those here).``"""
    runs = [str(a) if a == b else f"{a}–{b}" for a, b in rank_report.missing]
    count = sum(b - a + 1 for a, b in rank_report.missing)
    of = f" of {rank_report.world_size:,}" if rank_report.world_size is not None else ""
    shown = ", ".join(runs[:8]) + (f" and {len(runs) - 8} more runs" if len(runs) > 8 else "")
    return (f"Not in this directory: {'rank' if count == 1 else 'ranks'} {shown}{of} "
            "(the slowest is the slowest of those here).")
