"""GitHub-flavoured Markdown: any document as GFM text (:func:`document_text`), and the escaping of
all user-controlled text in it, in two functions every piece of text passes through:
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
not depend on where the files live.

Layout: the blocks one after the other, a blank line between them. A ``page`` document (the report)
heads its parts one level under its title; a ``comment`` (the diff, check and compare: a pull-request
comment) labels them in bold and folds its detail tables and method in ``<details>`` blocks.
Pictures are links: the ``md`` format draws none; the ``svg`` format passes the files it wrote
(``links``), shown where the document's first picture is.

A neutral module: the ``md`` format prints with it and so does ``svg`` (its Markdown page), so
neither format module imports the other.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Sequence

from tracekit.render.document import (Bullets, Charts, Document, Facts, Findings, Paragraph, Table, Timelines,
                                      Title, Verdict)
from tracekit.render.text import Code, for_display

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


def _details(title: str, body: str) -> str:
    return f"<details><summary>{md_escape(title, html=True)}</summary>\n\n{body}\n\n</details>"


def _bullets(lines: Sequence[str]) -> str:
    return "\n".join(f"- {md_escape(line, line_start=True)}" for line in lines)


class _Printer:
    """Prints one document's blocks (one method per kind of block, each returning its text)."""

    def __init__(self, document: Document, links: Sequence[tuple[str, str]] | None) -> None:
        self.page = document.layout == "page"
        self.level = document.title.level
        self.links = links

    def heading(self, title: str, *, colon: bool = False) -> str:
        """A part's title: a heading one level under the document's, or a comment's bold label."""
        if self.page:
            return f"{'#' * (self.level + 1)} {md_escape(title)}"
        return f"**{md_escape(title)}{':' if colon else ''}**"

    def title(self, block: Title) -> str | None:
        if not block.in_text:
            return None
        return f"{'#' * block.level} " + "".join(cell(p, in_table=False) for p in block.parts)

    def findings(self, block: Findings) -> str:
        body = table(block.headers, [f.row for f in block.items]) if block.items else "_none_"
        return f"{self.heading(block.title)}\n\n{body}"

    def facts(self, block: Facts) -> str:
        return "\n".join(f"- **{md_escape(label)}**: {md_escape(value)}" for label, value in block.pairs)

    def table(self, block: Table) -> str:
        body = table(block.headers, block.rows) if block.rows else "_none_"
        if block.folded:
            return _details(block.title, body)
        if not block.headed:
            return body
        if block.tally is not None:
            return f"**{md_escape(block.title)}:** {block.tally}\n\n{body}"
        return f"{self.heading(block.title)}\n\n{body}"

    def verdict(self, block: Verdict) -> str:
        return f"**{md_escape(block.label)}:** " + "".join(cell(p, in_table=False) for p in block.parts)

    def paragraph(self, block: Paragraph) -> str:
        if block.tone == "muted":
            return "\n".join(f"_{md_escape(line)}_" for line in block.lines)
        text = "\n".join(md_escape(line, line_start=True) for line in block.lines)
        return f"{self.heading(block.title)}\n\n{text}" if block.title else text

    def bullets(self, block: Bullets) -> str:
        if block.title is None:
            return _bullets(block.lines)
        if block.folded:
            return _details(block.title, _bullets(block.lines))
        return f"{self.heading(block.title, colon=True)}\n\n{_bullets(block.lines)}"

    def pictures(self, block: Timelines | Charts) -> str | None:
        """The links to the pictures, once, where the first picture is (none without ``links``):
        ``(alt text, relative path)``; a pair without a path is a sentence (nothing drawn). Paths
        are file names this package chose (``timeline.svg``), alt text is escaped."""
        if not self.links:
            return None
        links, self.links = self.links, None
        lines = [self.heading("Pictures")]
        lines += [f"![{md_escape(alt)}]({path})" if path else f"_{md_escape(alt)}_" for alt, path in links]
        return "\n\n".join(lines)


#: How each kind of block prints.
_PRINT = {Findings: _Printer.findings, Facts: _Printer.facts, Table: _Printer.table, Verdict: _Printer.verdict,
          Paragraph: _Printer.paragraph, Bullets: _Printer.bullets, Timelines: _Printer.pictures,
          Charts: _Printer.pictures}


def document_text(document: Document, links: Sequence[tuple[str, str]] | None = None) -> str:
    """``document`` as GFM text (module docstring); ``links``: ``(alt text, relative path)`` of the
    pictures written beside it, shown where its first picture is."""
    printer = _Printer(document, links)
    parts = [printer.title(document.title)]
    parts += [_PRINT[type(block)](printer, block) for block in document.blocks()]
    return "\n\n".join(p for p in parts if p is not None) + "\n"
