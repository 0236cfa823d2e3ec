"""``tracekit diff DIR_A DIR_B`` as a document: per rank, the median step, GPU busy time, exposed
communication and wait in A and B; per collective (paired by kind, group and order), the bus
bandwidth in A and B.

What changed is said rank by rank: a rank made late grows its own step, and the ranks that waited
for it grow their waits (their steps grow too, by the wait): the wait column tells the two apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.document import Bullets, Document, Paragraph, Section, Title
from tracekit.render.text import Rows, duration, size
from tracekit.render.views.blocks import table

if TYPE_CHECKING:
    from tracekit.results.rank_diff import RankDiff

#: Rows of the collectives table: the pairs whose bandwidth changed most (the rest are counted).
COLLECTIVE_ROWS = 20
#: The figures of the ranks table: (column stem, heading).
_FIGURES = (("step", "median step"), ("busy", "GPU busy"), ("exposed", "exposed comm"), ("wait", "waited"))


def document(result: RankDiff) -> Document:
    """Title (on a page only), the ranks table, what changed most, the collectives table and how
    they were paired."""
    a, b = result.a.directory, result.b.directory
    blocks: list = [table(ranks_table(result))]
    lines = tuple(change_lines(result))
    if lines:
        blocks.append(Paragraph(lines, title="What changed", tone="strong", terse=lines[0]))
    sections = [Section("ranks", "Ranks", tuple(blocks))]
    if result.collectives.height:
        sections.append(Section("collectives", "Collectives", (
            table(collectives_table(result)),
            Bullets(tuple(pairing_lines(result)), title="How they were paired"))))
    else:
        sections.append(Section("collectives", "Collectives", (Paragraph(
            ("No collective matched across the ranks of either directory: no bandwidth to compare.",),
            tone="muted"),)))
    title = f"{a} → {b}"
    return Document("rank_diff", Title(f"tracekit diff: {title}", ("tracekit diff: ", title), 1, in_text=False),
                    tuple(sections), "page")


def _signed(ns: int | None) -> str:
    if ns is None:
        return "–"
    return ("+" if ns > 0 else "") + duration(ns) if ns else "0"


def ranks_table(result: RankDiff) -> Rows:
    """One row per rank: each figure's median in A, in B and the change."""
    heads = ["rank", "steps A/B"]
    for _, name in _FIGURES:
        heads += [f"{name} A", f"{name} B", "Δ"]
    rows = []
    for r in result.ranks.iter_rows(named=True):
        row = [str(r["rank"]), f"{r['steps_a'] if r['steps_a'] is not None else '–'}/"
                               f"{r['steps_b'] if r['steps_b'] is not None else '–'}"]
        for stem, _ in _FIGURES:
            row += [duration(r[f"{stem}_a_ns"]), duration(r[f"{stem}_b_ns"]), _signed(r[f"{stem}_delta_ns"])]
        rows.append(row)
    return (f"Per-rank medians: {result.a.directory} (A) → {result.b.directory} (B)", heads, rows)


def change_lines(result: RankDiff) -> list[str]:
    """The rank whose step grew most and the ranks whose waits grew, said as late rank and victims."""
    ranks = result.ranks.filter(result.ranks["step_delta_ns"].is_not_null())
    if ranks.height == 0:
        return []
    lines = []
    top = ranks.sort("step_delta_ns", "rank", descending=[True, False]).row(0, named=True)
    lines.append(f"Median step changed most on rank {top['rank']}: {_signed(top['step_delta_ns'])} "
                 f"({duration(top['step_a_ns'])} → {duration(top['step_b_ns'])}).")
    waited = ranks.filter(ranks["wait_delta_ns"].is_not_null() & (ranks["wait_delta_ns"] > 0))
    if waited.height:
        from tracekit.render.views.ranks import ranks_text

        most = waited.sort("wait_delta_ns", "rank", descending=[True, False]).row(0, named=True)
        lines.append(f"Waits at collectives grew on {ranks_text(waited['rank'].to_list())} "
                     f"(most on rank {most['rank']}: {_signed(most['wait_delta_ns'])}): "
                     "they waited longer for a later rank.")
    culprits = (result.a.culprit, result.b.culprit)
    if culprits[1] is not None and culprits[0] != culprits[1]:
        before = f"rank {culprits[0]}" if culprits[0] is not None else "no rank"
        lines.append(f"The rank the others waited for most: {before} in A, rank {culprits[1]} in B.")
    return lines


def collectives_table(result: RankDiff) -> Rows:
    """The paired collectives whose bus bandwidth changed most (:data:`COLLECTIVE_ROWS`), in A's order."""
    pairs = result.collectives
    shown = (pairs.with_columns(_change=(pairs["busbw_ratio"] - 1).abs().fill_null(float("inf")))
             .sort("_change", descending=True).head(COLLECTIVE_ROWS)) if pairs.height > COLLECTIVE_ROWS else pairs
    rows = []
    for c in shown.iter_rows(named=True):
        rows.append([c["kind"], c["pg"] or "default", str(c["order"]),
                     "–" if c["instance_a"] is None else str(c["instance_a"]),
                     "–" if c["instance_b"] is None else str(c["instance_b"]),
                     size(c["bytes_a"]), size(c["bytes_b"]),
                     "–" if c["busbw_a_gbps"] is None else f"{c['busbw_a_gbps']:,.2f}",
                     "–" if c["busbw_b_gbps"] is None else f"{c['busbw_b_gbps']:,.2f}",
                     "–" if c["busbw_ratio"] is None else f"×{c['busbw_ratio']:,.2f}"])
    more = pairs.height - shown.height
    title = "Collectives paired by kind, group and order" + (
        f" (the {shown.height} whose bandwidth changed most; {more} more)" if more else "")
    return (title, ["kind", "group", "order", "# A", "# B", "bytes A", "bytes B", "busbw A GB/s", "busbw B GB/s",
                    "B/A"], rows)


def pairing_lines(result: RankDiff) -> list[str]:
    """How the collectives were paired, and what was left unpaired."""
    pairs = result.collectives
    both = pairs.filter(pairs["instance_a"].is_not_null() & pairs["instance_b"].is_not_null()).height
    only_a = pairs.filter(pairs["instance_b"].is_null()).height
    only_b = pairs.filter(pairs["instance_a"].is_null()).height
    return [f"The n-th collective of a kind and process group in A is paired with the n-th of that kind and "
            f"group in B (each side's collectives matched across its ranks first): {both:,} paired, "
            f"{only_a:,} in A only, {only_b:,} in B only.",
            "Bus bandwidth: bytes over the last arriver's kernel time (it waited for no one), nccl-tests "
            "factors; medians per rank over its steps."]
