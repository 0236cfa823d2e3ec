"""GitHub Markdown for ``tracekit diff`` and ``tracekit check``: a PR comment.

Layout: a title, one verdict sentence, a compact table of per-step quantities (and the gates when
given), then each detail table in a collapsible ``<details>`` block. Names go in code spans (HTML
inside them is inert); a name holding a backtick falls back to escaped text; ``|`` is escaped in
table cells. Only trace basenames appear, so the output does not depend on where the files live.
"""

from __future__ import annotations

from typing import TextIO

from tracekit.render import diff_sections as S
from tracekit.render.text import md_escape


def md_code(text: str, *, in_table: bool) -> str:
    """``text`` as an inline code span safe in GFM (tables need ``\\|`` even inside code)."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if "`" in s or not s.strip():
        return md_escape(s)
    if in_table:
        s = s.replace("|", "\\|")
    return f"`{s}`"


def cell(value: str, *, in_table: bool = True) -> str:
    return md_code(value, in_table=in_table) if isinstance(value, S.Code) else md_escape(value)


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _details(title: str, body: str) -> list[str]:
    return ["", f"<details><summary>{md_escape(title)}</summary>", "", body, "", "</details>"]


def render(diff, out: TextIO, gate_results=None) -> None:
    """Write the diff as Markdown."""
    verdict = "".join(cell(p, in_table=False) for p in S.verdict_parts(diff))
    parts = [f"### tracekit diff: {md_code(diff.a.label, in_table=False)} → {md_code(diff.b.label, in_table=False)}",
             "", f"**Verdict:** {verdict}", ""]
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
        body = table(headers, rows) if rows else "_none_"
        parts += _details(title, body)
    parts += _details("How this was measured", "\n".join(f"- {md_escape(line)}" for line in S.method_lines(diff)))
    out.write("\n".join(parts) + "\n")


def render_check(result, out: TextIO) -> None:
    """Write a ``tracekit check`` result as Markdown."""
    parts = [f"### tracekit check: {md_escape(S.check_title(result))}", ""]
    if result.description:
        parts += [md_escape(result.description), ""]
    title, headers, rows = S.check_rows(result)
    parts.append(table(headers, rows))
    if result.notes:
        parts += [""] + [f"- {md_escape(n)}" for n in result.notes]
    out.write("\n".join(parts) + "\n")
