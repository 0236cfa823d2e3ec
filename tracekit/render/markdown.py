"""GitHub-flavoured Markdown: the report as a document, the diff as a PR comment. All escaping of
user-controlled text happens here.

Names (kernels, ops, gates: :class:`~tracekit.render.text.Code` cells) go in code spans, where HTML
is inert; a name holding a backtick falls back to escaped text; ``|`` is escaped in table cells even
inside code. Every other cell is escaped (:func:`~tracekit.render.text.md_escape`). Only trace
basenames appear in a diff, so its output does not depend on where the files live. The diff's
layout: a title, one verdict sentence, a compact table of per-step quantities (and the gates when
given), then each detail table in a collapsible ``<details>`` block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from tracekit.render.base import Renderer
from tracekit.render.text import Code, md_escape

if TYPE_CHECKING:
    from tracekit.diff.compare import Diff
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.ranks import RankReport
    from tracekit.report import Report


def md_code(text: str, *, in_table: bool) -> str:
    """``text`` as an inline code span safe in GFM (tables need ``\\|`` even inside code)."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if "`" in s or not s.strip():
        return md_escape(s)
    if in_table:
        s = s.replace("|", "\\|")
    return f"`{s}`"


def cell(value: str, *, in_table: bool = True) -> str:
    """One cell or verdict segment: a :class:`Code` value as code, anything else escaped."""
    return md_code(value, in_table=in_table) if isinstance(value, Code) else md_escape(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GFM table: headers escaped, cells by :func:`cell`."""
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _details(title: str, body: str) -> list[str]:
    return ["", f"<details><summary>{md_escape(title)}</summary>", "", body, "", "</details>"]


class MarkdownRenderer(Renderer):
    """GitHub Markdown (``.md``, ``.markdown``)."""

    name = "md"
    extensions = (".md", ".markdown")

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import sections

        facts = sections.facts_lines(report)
        parts = [f"# tracekit report: {md_escape(facts[0][1])}", ""]
        parts += [f"- **{md_escape(label)}**: {md_escape(value)}" for label, value in facts[1:]]
        for title, headers, rows in sections.all_tables(report):
            parts += ["", f"## {md_escape(title)}", ""]
            parts.append(table(headers, rows) if rows else "_none_")
        rules = sections.notes(report)
        if rules:
            parts += ["", "## Notes", ""] + [f"- {md_escape(line)}" for line in rules]
        out.write("\n".join(parts) + "\n")

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        verdict = "".join(cell(p, in_table=False) for p in S.verdict_parts(diff))
        parts = [f"### tracekit diff: {md_code(diff.a.label, in_table=False)} → "
                 f"{md_code(diff.b.label, in_table=False)}", "", f"**Verdict:** {verdict}", ""]
        headers, rows = S.quantity_rows(diff)
        parts.append(table(headers, rows))
        missing = S.unavailable_line(diff)
        if missing:
            parts += ["", f"_{md_escape(missing)}_"]
        if gate_results:
            title, headers, rows = S.gate_rows(gate_results)
            failed = sum(1 for r in gate_results if r.failed)
            parts += ["", f"**{md_escape(title)}:** " + (f"{failed} failed" if failed else "all pass"), "",
                      table(headers, rows)]
        for title, headers, rows in S.detail_tables(diff):
            parts += _details(title, table(headers, rows) if rows else "_none_")
        parts += _details("How this was measured",
                          "\n".join(f"- {md_escape(line)}" for line in S.method_lines(diff)))
        out.write("\n".join(parts) + "\n")

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        parts = [f"### tracekit check: {md_escape(S.check_title(result))}", ""]
        if result.description:
            parts += [md_escape(result.description), ""]
        title, headers, rows = S.check_rows(result)
        parts.append(table(headers, rows))
        if result.notes:
            parts += [""] + [f"- {md_escape(n)}" for n in result.notes]
        out.write("\n".join(parts) + "\n")

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render import sections

        title, headers, rows = sections.ranks_table(rank_report)
        out.write(f"## {md_escape(title)}\n\n{table(headers, rows)}\n")
        if rank_report.slowest:
            out.write(f"\nSlowest rank: {md_escape(rank_report.slowest)}\n")
