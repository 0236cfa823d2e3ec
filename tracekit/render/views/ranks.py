"""``tracekit report DIR`` as a document: one row per rank, the rank the others waited for per step,
the matched collectives, and the clock offsets the waits were measured on.

The culprit is worded as the rank the others waited for ("rank 7 arrived last at …; ranks 0–6
waited X ms in total"), never as the rank with the longest step: a rank waiting inside NCCL for a
late peer is GPU-busy and has the longest step, so the longest step names a victim. Arrival is worded
as what it was: a kernel's start, or a host backend's work starting on its worker thread (gloo).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.document import Bullets, Chart, Charts, Document, Paragraph, Section, Title
from tracekit.render.text import Rows, duration, size, us
from tracekit.render.views.blocks import table

if TYPE_CHECKING:
    from tracekit.analyses.skew import Skew
    from tracekit.results.ranks import RankReport

#: Rows of the collectives table: the instances with the longest waits (the rest are counted).
COLLECTIVE_ROWS = 20
#: How a lost phase reads after "it lost the time …".
_PHASE_WORDS = {
    "before-step": "before the step: it began the step {lost} after the other ranks' median",
    "data": "in data loading: {lost} more host time there than the other ranks' median",
    "forward": "in forward: {lost} more host time there than the other ranks' median",
    "backward": "in backward: {lost} more host time there than the other ranks' median",
    "optimizer": "in the optimizer: {lost} more host time there than the other ranks' median",
}


def document(rank_report: RankReport) -> Document:
    """Title (on a page only: the table's title heads the text), the ranks' table, the culprit per
    step, the longest step named as what it is, the ranks of the run the directory lacks, the chart,
    the collectives (on a page: the ranks × time picture first) and how they matched."""
    rows = ranks_table(rank_report)
    title = rows[0]
    blocks: list = [table(rows)]
    cross = rank_report.skew
    if cross is not None and cross.culprits.height:
        lines = tuple(culprit_lines(rank_report))
        blocks.append(Paragraph(lines, title="Who the others waited for", tone="strong",
                                terse=terse_culprit_line(rank_report, lines)))
    longest = longest_line(rank_report)
    if longest:
        blocks.append(Paragraph((longest,), terse=longest))
    blocks.append(Charts((Chart("rank_step_times", rank_report, "rank_step_times", "step time per rank",
                                "Mean and longest step time of each rank, the rank the others waited for "
                                "in red"),)))
    if rank_report.missing:
        blocks.append(Paragraph((missing_line(rank_report),), tone="muted"))
    sections = [Section("ranks", "Ranks", tuple(blocks))]
    if cross is not None and cross.instances.height:
        sections.append(Section("collectives", "Collectives", (
            Charts((Chart("rank_collectives", rank_report, "rank_collectives", "collectives per rank over time",
                          "Each rank's collectives from its arrival to its end, the wait for the last arriver "
                          "shaded, the last arriver marked"),)),
            table(collectives_table(cross)),
                                                                Bullets(tuple(matching_lines(cross)),
                                                                        title="How they were matched"))))
    return Document("ranks", Title(f"tracekit report: {title}", ("tracekit report: ", title), 1, in_text=False),
                    tuple(sections), "page")


def ranks_table(rank_report: RankReport) -> Rows:
    """One row per rank trace of a directory, the rank the others waited for marked."""
    culprit = rank_report.culprit
    rows = []
    for r in rank_report.ranks.iter_rows(named=True):
        mark = " (waited for)" if culprit is not None and r["rank"] == culprit else ""
        ok = not r["error"]
        rows.append([
            "" if r["rank"] is None else str(r["rank"]), r["file"] + mark,
            str(r["steps"]) if ok else "", us(r["mean_step_ns"]) if ok else "",
            us(r["gpu_busy_ns"]) if ok else "", us(r["exposed_comm_ns"]) if ok else "",
            us(r["wait_ns"]) if ok and r["wait_ns"] is not None else "",
            us(r["caused_ns"]) if ok and r["caused_ns"] is not None else "",
            (r["verdict"] or "") if ok else "", r["error"] or "",
        ])
    return (f"Ranks in {rank_report.directory}",
            ["rank", "file", "steps", "mean step", "GPU busy (all steps)", "exposed comm", "waited",
             "others waited for it", "verdict", "error"],
            rows)


def missing_line(rank_report: RankReport) -> str:
    """``Not in this directory: ranks 2–5, 7 of 8 (the slowest is the slowest of those here).``"""
    runs = [str(a) if a == b else f"{a}–{b}" for a, b in rank_report.missing]
    count = sum(b - a + 1 for a, b in rank_report.missing)
    of = f" of {rank_report.world_size:,}" if rank_report.world_size is not None else ""
    shown = ", ".join(runs[:8]) + (f" and {len(runs) - 8} more runs" if len(runs) > 8 else "")
    return (f"Not in this directory: {'rank' if count == 1 else 'ranks'} {shown}{of} "
            "(the slowest is the slowest of those here).")


def ranks_text(ranks: list[int]) -> str:
    """``ranks 0–6``, ``ranks 0, 2–4``, ``rank 3``: consecutive runs as ranges."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def culprit_lines(rank_report: RankReport) -> list[str]:
    """Per step: the rank the others waited for, at which collective, how long, and where it lost
    the time."""
    cross = rank_report.skew
    assert cross is not None
    lines = []
    for c in cross.culprits.iter_rows(named=True):
        worst = cross.instances.filter(cross.instances["instance"] == c["worst_instance"]).row(0, named=True)
        waited = cross.waits.filter((cross.waits["instance"] == c["worst_instance"]) & (cross.waits["rank"] != c["rank"])
                                    & (cross.waits["wait_ns"] > 0))
        where = _PHASE_WORDS.get(c["lost_phase"], "in {phase}").format(lost=duration(c["lost_ns"]), phase=c["lost_phase"])
        if c["lost_ns"] == 0:
            gpu = " (a late GPU)" if worst["arrival"] == "kernel" else ""
            where = (f"no phase of its host shows the extra time{gpu}; the collective was launched in "
                     f"{c['lost_phase']}")
        lines.append(
            f"Step {c['step']}: rank {c['rank']} arrived last at {worst['kind']} #{worst['instance']} "
            f"({_group(worst['pg'])}, {worst['phase']}), {duration(worst['skew_ns'])} after the first rank; "
            f"{ranks_text(waited['rank'].to_list())} waited "
            f"{duration(worst['wait_ns'])} in total there, and {duration(c['caused_ns'])} over the "
            f"{c['instances']} collective{'s' if c['instances'] != 1 else ''} it arrived last at. "
            f"It lost the time {where}.")
    return lines


def terse_culprit_line(rank_report: RankReport, lines: tuple[str, ...]) -> str:
    """The terminal's one line of the culprits: the step whose late rank cost the others the most
    (ties: the earliest), and how many other steps had a late rank."""
    cross = rank_report.skew
    assert cross is not None
    costs = cross.culprits["caused_ns"].to_list()
    worst = max(range(len(costs)), key=lambda i: (costs[i], -i))
    others = len(lines) - 1
    more = (f" ({others} other step{'s' if others != 1 else ''} had a late rank too: "
            "the Markdown or HTML report lists each.)") if others else ""
    return lines[worst] + more


def longest_line(rank_report: RankReport) -> str | None:
    """The rank with the longest mean step, said for what it is: with collectives matched, whether
    it waited (a victim) or others waited for it."""
    if rank_report.slowest is None:
        return None
    row = rank_report.ranks.filter(rank_report.ranks["file"] == rank_report.slowest).row(0, named=True)
    who = f"rank {row['rank']}" if row["rank"] is not None else rank_report.slowest
    text = f"Longest mean step: {who} ({us(row['mean_step_ns'])})"
    if rank_report.skew is None or row["wait_ns"] is None:
        return text + "; no collectives were matched across ranks, so who waited for whom is not known."
    if row["wait_ns"] > (row["caused_ns"] or 0):
        return (text + f". It waited {duration(row['wait_ns'])} in collectives for later ranks: a long step "
                "there is time spent waiting, not the cause.")
    return text + f"; the others waited {duration(row['caused_ns'])} for it."


#: How an instance's arrival reads (:data:`tracekit.analyses.skew.ARRIVALS`), and its transfer's span.
_ARRIVAL_WORDS = {
    "kernel": "collective kernel start",
    "host": "start of the collective's work on its backend's worker thread (gloo: no kernel)",
}
_TRANSFER_WORDS = {"kernel": "kernel", "host": "work span"}


def _group(pg: str | None) -> str:
    return f"group {pg}" if pg else "default group"


def collectives_table(cross: Skew) -> Rows:
    """The matched collectives with the longest waits (:data:`COLLECTIVE_ROWS`), in time order."""
    shown = cross.instances.sort("wait_ns", "instance", descending=[True, False]).head(COLLECTIVE_ROWS).sort("instance")
    rows = []
    for i in shown.iter_rows(named=True):
        rows.append([str(i["instance"]), i["kind"], i["pg"] or "default", "" if i["step"] is None else str(i["step"]),
                     str(i["ranks"]), size(i["bytes"]),
                     "–" if i["busbw_gbps"] is None else f"{i['busbw_gbps']:,.2f}",
                     us(i["skew_ns"]), us(i["wait_ns"]), str(i["last_rank"]), i["phase"]])
    more = cross.instances.height - shown.height
    title = "Collectives matched across ranks" + (f" (the {shown.height} with the longest waits; {more} more)"
                                                  if more else "")
    return (title, ["#", "kind", "group", "step", "ranks", "bytes", "busbw GB/s", "skew", "waits", "last arriver",
                    "phase"], rows)


def matching_lines(cross: Skew) -> list[str]:
    """How calls were matched, how many were not, and the clock offsets the waits are measured on."""
    how = {"seq": "by process group and sequence number (Seq), exactly",
           "order": "by process group and order within it (the traces record no Seq)",
           "mixed": "by Seq where recorded, else by order within the process group"}.get(cross.match or "", "—")
    total = int(cross.ranks["calls"].sum())
    unmatched = int(cross.ranks["unmatched"].sum())
    share = f"{100 * (cross.unmatched_share or 0):.1f}%"
    arrivals = set(cross.instances["arrival"].to_list())
    starts = [words for kind, words in _ARRIVAL_WORDS.items() if kind in arrivals]
    spans = " or ".join(span for kind, span in _TRANSFER_WORDS.items() if kind in arrivals)
    lines = [f"Matched {how}: {total - unmatched:,} of {total:,} collective calls matched, "
             f"{unmatched:,} unmatched ({share}).",
             f"Arrival: each rank's {'; or its '.join(starts)}; wait: the last arrival minus the rank's own. "
             f"Bus bandwidth over the last arriver's {spans} (it waited for no one), nccl-tests factors: "
             "all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce 1."]
    offsets = [f"rank {o['rank']} {o['offset_ns'] / 1000:+,.1f} µs (±{o['spread_ns'] / 1000:,.1f})"
               for o in cross.offsets.iter_rows(named=True) if o["rank"] != cross.reference]
    lines.append(f"Clock offsets against rank {cross.reference}, estimated as the median difference of "
                 "collective end times (ends of one collective are nearly simultaneous on every rank) and "
                 "subtracted before arrivals are compared: " + ("; ".join(offsets) or "none") + ".")
    return lines
