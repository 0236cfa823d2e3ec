"""GitHub-flavoured Markdown: the report as a document, the diff as a PR comment. All escaping of
user-controlled text happens here, in two functions every piece of text passes through:
:func:`md_escape` (text) and :func:`md_code` (names shown as code); :func:`table` and :func:`cell`
route every header and cell through them, so a new table is escaped without asking.

What a name can never become, and how (each choice is one GitHub's renderer treats as text):

* control characters, newlines, bidi controls: shown as ``\\x1b``-style escapes
  (:func:`~tracekit.render.text.for_display`, which also cuts overlong text with a marker);
* links, images, footnotes, task boxes, emphasis, strikethrough, math, code spans, table cells:
  ``\\`` ``[`` ``]`` ``*`` ``_`` ``~`` ``$`` ``|`` are backslash-escaped, a backtick is ``&#96;``;
* raw HTML and entities (``<script>``, ``<img onerror>``, ``&amp;``): ``&`` ``<`` ``>`` as entities;
* headings, quotes, lists, thematic breaks where text starts a block (``line_start``): its first
  marker (``#`` ``>`` ``-`` ``+`` ``=`` ``1.`` ``1)``) is backslash-escaped; a ``#`` after a space
  is always escaped (a heading's closing sequence);
* things GitHub links *after* Markdown, on the rendered text (``@mentions``, ``#123`` and
  ``owner/repo#123`` issue links, ``GH-123``, and the autolinked ``http://…``, ``www.…`` and e-mail
  addresses): a backslash cannot stop these, so a zero-width space (``&#8203;``) is put after
  ``@``, after ``:`` of ``://``, after ``www``, after ``#`` of an issue number and after ``GH``.
  The text reads the same; only a copy of it carries the invisible character.

Names (kernels, ops, gates: :class:`~tracekit.render.text.Code` cells) go in code spans, where
GitHub interprets nothing (HTML, links, mentions, emoji stay text); ``|`` is escaped in table cells
even inside code; a name holding a backtick or a backslash (which a table row would read as an
escape) falls back to escaped text. Text inside the ``<details>`` summaries is raw HTML to GitHub:
there it is HTML-escaped (``html=True``). Only trace basenames appear in a diff, so its output does
not depend on where the files live. The diff's layout: a title, one verdict sentence, a compact
table of per-step quantities (and the gates when given), then each detail table in a collapsible
``<details>`` block.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from tracekit.render.base import Renderer
from tracekit.render.text import Code, for_display

if TYPE_CHECKING:
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff
    from tracekit.diff.side_by_side import Comparison
    from tracekit.ranks import RankReport
    from tracekit.report import Report

#: Characters with inline meaning, backslash-escaped (``#`` only after a space or at the start).
_INLINE = re.compile(r"[\\\[\]*_~$|]|(?:^|(?<=\s))#")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;"}
_ENTITY = re.compile("[&<>`]")
#: A block marker at the start of a line: heading, quote, list item, setext or thematic break.
_BLOCK_START = re.compile(r"^(\s*)([>+=-]|\d{1,9}(?=[.)]))")
#: Where GitHub links rendered text: the point after which a zero-width space goes.
#: (``&`` excluded before ``#``: ``&#96;`` is an entity this module wrote.)
_LINKED = re.compile(r"@|(?<=:)(?=//)|(?i:www(?=\.))|(?i:\bGH(?=-\d))|(?<![\w.&-])#(?=\d)|(?<=/)[\w.-]+#(?=\d)")
ZWSP = "&#8203;"


def md_escape(text: object, *, line_start: bool = False, html: bool = False) -> str:
    """``text`` as Markdown that renders as exactly that text (see the module docstring).

    ``line_start``: the text begins a block (a paragraph, a list item's content), where a leading
    ``-``, ``>`` or ``1.`` would open a list or a quote. ``html``: the text sits inside raw HTML
    (``<summary>``), where Markdown escapes are not read.
    """
    s = for_display(text)
    if html:
        s = html_lib.escape(s, quote=False)
    else:
        s = _ENTITY.sub(lambda m: _ENTITIES[m.group()], _INLINE.sub(lambda m: "\\" + m.group(), s))
        if line_start:
            s = _BLOCK_START.sub(lambda m: m.group(1) + ("\\" + m.group(2) if not m.group(2).isdigit()
                                                       else m.group(2) + "\\"), s, count=1)
    return _LINKED.sub(lambda m: m.group() + ZWSP, s)


def md_code(text: str, *, in_table: bool) -> str:
    """``text`` as an inline code span safe in GFM (tables need ``\\|`` even inside code)."""
    s = for_display(text)
    if "`" in s or "\\" in s or not s.strip():
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
    return ["", f"<details><summary>{md_escape(title, html=True)}</summary>", "", body, "", "</details>"]


def _pictures(pictures: Sequence[tuple[str, str]], heading: str = "## Pictures") -> list[str]:
    """Image lines for ``(alt text, relative path)`` pairs; paths are file names this package chose
    (``timeline.svg``), alt text is escaped; a pair without a path is a sentence (nothing drawn)."""
    if not pictures:
        return []
    lines = ["", heading]
    for alt, path in pictures:
        lines += ["", f"![{md_escape(alt)}]({path})" if path else f"_{md_escape(alt)}_"]
    return lines


class MarkdownRenderer(Renderer):
    """GitHub Markdown (``.md``, ``.markdown``)."""

    name = "md"
    extensions = (".md", ".markdown")

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None,
               pictures: Sequence[tuple[str, str]] = ()) -> None:
        """``pictures``: ``(alt text, relative path)`` of images shown after the facts (the ``svg`` format)."""
        from tracekit.render import finding_sections, sections

        facts = sections.facts_lines(report)
        parts = [f"# tracekit report: {md_escape(facts[0][1])}", ""]
        title, headers, rows = finding_sections.findings_table(report.findings)
        parts += [f"## {md_escape(title)}", "", table(headers, rows) if rows else "_none_", ""]
        parts += [f"- **{md_escape(label)}**: {md_escape(value)}" for label, value in facts[1:]]
        parts += _pictures(pictures)
        for title, headers, rows in sections.all_tables(report):
            parts += ["", f"## {md_escape(title)}", ""]
            parts.append(table(headers, rows) if rows else "_none_")
        from tracekit.render.memory_sections import hint

        if hint(report):
            parts += ["", "## Memory", "", md_escape(hint(report), line_start=True)]
        rules = sections.notes(report)
        if rules:
            parts += ["", "## Notes", ""] + [f"- {md_escape(line, line_start=True)}" for line in rules]
        out.write("\n".join(parts) + "\n")

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None, pictures: Sequence[tuple[str, str]] = ()) -> None:
        """``pictures``: ``(alt text, relative path)`` of images shown before the details (``svg``)."""
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
        parts += _pictures(pictures, "**Pictures**")
        for title, headers, rows in S.detail_tables(diff):
            parts += _details(title, table(headers, rows) if rows else "_none_")
        parts += _details("How this was measured",
                          "\n".join(f"- {md_escape(line, line_start=True)}" for line in S.method_lines(diff)))
        out.write("\n".join(parts) + "\n")

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        parts = [f"### tracekit check: {md_escape(S.check_title(result))}", ""]
        if result.description:
            parts += [md_escape(line, line_start=True) for line in result.description.splitlines()] + [""]
        title, headers, rows = S.check_rows(result)
        parts.append(table(headers, rows))
        if result.notes:
            parts += [""] + [f"- {md_escape(n, line_start=True)}" for n in result.notes]
        out.write("\n".join(parts) + "\n")

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render import sections

        title, headers, rows = sections.ranks_table(rank_report)
        out.write(f"## {md_escape(title)}\n\n{table(headers, rows)}\n")
        if rank_report.slowest:
            out.write(f"\nSlowest rank: {md_escape(rank_report.slowest)}\n")

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        from tracekit.render import compile_sections as C

        title, headers, rows = C.compare_table(comparison)
        parts = [f"### tracekit compare: {len(comparison.rows)} traces", "", f"**{md_escape(title)}**", "",
                 table(headers, rows), "", "**Verdict:**", ""]
        parts += [f"- {md_escape(line, line_start=True)}" for line in C.verdict_lines(comparison)]
        if gate_results:
            title, headers, rows = C.gate_rows(gate_results)
            failed = sum(1 for r in gate_results if r.failed)
            parts += ["", f"**{md_escape(title)}:** " + (f"{failed} failed" if failed else "all pass"), "",
                      table(headers, rows)]
        parts += _details("How this was measured",
                          "\n".join(f"- {md_escape(line, line_start=True)}" for line in C.method_lines(comparison)))
        out.write("\n".join(parts) + "\n")
