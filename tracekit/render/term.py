"""The ``term`` format: any document as rich text and tables. Colour only when writing to a terminal
(or asked for).

Without colour the console is 160 columns wide (or ``width``), so output written to a file or a
pipe does not depend on the terminal it was made in.

Escaping: every piece of text reaches rich through :func:`text` — a ``rich.text.Text`` (never
markup) of :func:`~tracekit.render.text.for_display` (control characters, ANSI/OSC sequences, C1
and bidi controls shown as ``\\x1b``-style escapes, overlong text cut); titles, headers and cells
of :func:`print_rows` included. The console itself (:func:`make_console`) reads no markup, emoji
codes or highlighting in a plain ``str`` either, and, as a last guard, shows any control character
still inside the text it renders (a newline stays a line break), so a name can neither recolour,
retitle nor clear a terminal.

Layout: the title in bold, then the blocks one after the other, a blank line before each table and
each titled part (text that follows what precedes it, such as a table's note, follows it
directly). Pictures are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit.render.base import DocumentRenderer
from tracekit.render.document import (PICTURES, Bullets, Document, Facts, Findings, Paragraph, Table, Tone,
                                      Verdict)
from tracekit.render.text import INVISIBLE, for_display, visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

#: Rich styles of the status cells (:data:`~tracekit.render.document.STATUS_WORDS`).
STATUS_STYLE = {"lower": "green", "higher": "red", "FAILED": "bold red", "BROKEN": "bold red",
                "met": "green", "within noise": "dim"}
#: Rich style of a line of each tone.
TONE_STYLE: dict[Tone, str] = {"plain": "", "muted": "dim", "strong": "bold"}


def text(value: object, style: str = "") -> Text:
    """``value`` as rich text shown literally (no markup), with :func:`for_display` applied."""
    from rich.text import Text

    return Text(for_display(value), style=style)


def make_console(out: TextIO, *, color: bool, width: int | None = None) -> Console:
    """A rich console on ``out``: the terminal's width when colouring a terminal, else 160 columns.

    It reads no markup, emoji codes or highlighting, and renders no control character of the text
    it is given (see the module docstring)."""
    from rich.console import Console
    from rich.segment import Segment

    class _Console(Console):
        def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                if segment.control is None and INVISIBLE.search(segment.text.replace("\n", "")):
                    segment = Segment("\n".join(visible(part) for part in segment.text.split("\n")),
                                      segment.style)
                yield segment

        def on_broken_pipe(self) -> None:
            # Rich would exit 1 here, which reads as a failed gate; the boundary exits 141 for a
            # reader of stdout that went away, in every format (tracekit.boundary.BROKEN_PIPE).
            raise BrokenPipeError

    return _Console(file=out, force_terminal=color, no_color=not color, width=width or (None if color else 160),
                    highlight=False, markup=False, emoji=False, soft_wrap=False)


def print_rows(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
               style: Callable[[str], str] | None = None) -> None:
    """One titled table ("<title>: none" when empty); ``style`` picks a cell's rich style."""
    from rich.table import Table

    if not rows:
        console.print(text(f"{title}: none", style="bold"))
        return
    table = Table(title=text(title), title_justify="left", title_style="bold")
    for header in headers:
        table.add_column(text(header), overflow="fold")
    for row in rows:
        table.add_row(*[text(cell, style=style(str(cell)) if style else "") for cell in row])
    console.print(table)


def _findings(console: Console, block: Findings) -> None:
    console.print(text(block.title if block.items else f"{block.title}: none", style="bold"))
    for item in block.items:
        console.print(text(item.heading, style="bold red" if item.severity == "warning" else "bold"))
        for line in item.lines:
            console.print(text(f"  {line}"))


def _facts(console: Console, block: Facts) -> None:
    from rich.text import Text

    for label, value in block.pairs:
        console.print(Text.assemble(text(f"  {label}: ", "bold"), text(value)))


def _table(console: Console, block: Table) -> None:
    print_rows(console, block.title, block.headers, block.rows,
               style=(lambda cell: STATUS_STYLE.get(cell, "")) if block.status else None)


def _verdict(console: Console, block: Verdict) -> None:
    from rich.text import Text

    console.print(Text.assemble(text(f"{block.label}: ", "bold"), *[text(p) for p in block.parts]))


def _paragraph(console: Console, block: Paragraph) -> None:
    from rich.text import Text

    if block.terse is not None:
        console.print(text(block.terse, style=TONE_STYLE[block.tone]))
        return
    for line in block.lines:
        if block.title:
            console.print(Text.assemble(text(f"{block.title}: ", "bold"), text(line)))
        else:
            console.print(text(line, style=TONE_STYLE[block.tone]))


def _bullets(console: Console, block: Bullets) -> None:
    if block.title and block.title_in_term:
        console.print(text(f"{block.title}:", style="bold"))
    for line in block.lines:
        console.print(text(f"{block.marker}{line}", style=TONE_STYLE[block.tone]))


#: How each kind of block prints, and whether a blank line goes before it (pictures are left out).
_PRINT: dict[type, tuple[Callable[[Console, Any], None], Callable[[Any], bool]]] = {
    Findings: (_findings, lambda b: False), Facts: (_facts, lambda b: True), Table: (_table, lambda b: True),
    Verdict: (_verdict, lambda b: False), Paragraph: (_paragraph, lambda b: b.title is not None),
    Bullets: (_bullets, lambda b: b.title is not None),
}


class TermRenderer(DocumentRenderer):
    """Rich tables for a terminal (or plain text in a file)."""

    name = "term"
    extensions = (".txt",)

    def print(self, document: Document, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        console = make_console(out, color=color, width=width)
        printed = document.title.in_text
        if printed:
            console.print(text(document.title.text, style="bold"))
        for block in document.blocks():
            if isinstance(block, PICTURES):
                continue
            draw, spaced = _PRINT[type(block)]
            if printed and spaced(block):
                console.print()
            draw(console, block)
            printed = True
