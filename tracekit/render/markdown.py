"""GitHub-flavoured Markdown renderer. All escaping of user-controlled text happens here."""

from __future__ import annotations

from typing import TextIO

from tracekit.render import sections
from tracekit.render.text import md_escape


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A GFM table; every cell escaped."""
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render(report, out: TextIO) -> None:
    """Write the report as Markdown."""
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
