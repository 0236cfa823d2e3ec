"""Terminal renderer: rich tables. Colour only when writing to a terminal (or asked for).

Without colour the console is 160 columns wide (or ``width``), so output written to a file or a
pipe does not depend on the terminal it was made in.

Escaping: every piece of text reaches rich through :func:`text` — a ``rich.text.Text`` (never
markup) of :func:`~tracekit.render.text.for_display` (control characters, ANSI/OSC sequences, C1
and bidi controls shown as ``\\x1b``-style escapes, overlong text cut); titles, headers and cells
of :func:`print_rows` included. The console itself (:func:`make_console`) reads no markup, emoji
codes or highlighting in a plain ``str`` either, and, as a last guard, shows any control character
still inside the text it renders (a newline stays a line break), so a name can neither recolour,
retitle nor clear a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit.render.base import Renderer
from tracekit.render.text import INVISIBLE, for_display, visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff
    from tracekit.diff.side_by_side import Comparison
    from tracekit.ranks import RankReport
    from tracekit.report import Report

#: Rich styles of the status cells of diff and check tables.
STATUS_STYLE = {"lower": "green", "higher": "red", "FAILED": "bold red", "BROKEN": "bold red",
                "met": "green", "within noise": "dim"}


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


def _status_table(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    console.print()
    print_rows(console, title, headers, rows, style=lambda cell: STATUS_STYLE.get(cell, ""))


class TermRenderer(Renderer):
    """Rich tables for a terminal (or plain text in a file)."""

    name = "term"
    extensions = (".txt",)

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from rich.text import Text

        from tracekit.render import finding_sections, sections

        console = make_console(out, color=color, width=width)
        facts = sections.facts_lines(report)
        console.print(text(f"tracekit report: {facts[0][1]}", style="bold"))
        blocks = finding_sections.finding_blocks(report.findings)
        console.print(text("Findings" if blocks else "Findings: none", style="bold"))
        for head, lines in blocks:
            console.print(text(head, style="bold red" if head.startswith("WARNING") else "bold"))
            for line in lines:
                console.print(text(f"  {line}"))
        console.print()
        for label, value in facts[1:]:
            console.print(Text.assemble(text(f"  {label}: ", "bold"), text(value)))
        for title, headers, rows in sections.all_tables(report):
            console.print()
            print_rows(console, title, headers, rows)
        from tracekit.render.memory_sections import hint

        if hint(report):
            console.print()
            console.print(Text.assemble(text("Memory: ", "bold"), text(hint(report))))
        rules = sections.notes(report)
        if rules:
            console.print()
            for line in rules:
                console.print(text(f"note: {line}"))

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from rich.text import Text

        from tracekit.render import diff_sections as S

        console = make_console(out, color=color, width=width)
        console.print(text(f"tracekit diff: {diff.a.label} → {diff.b.label}", style="bold"))
        console.print(Text.assemble(text("Verdict: ", "bold"), *[text(p) for p in S.verdict_parts(diff)]))
        headers, rows = S.quantity_rows(diff)
        _status_table(console, "Per step (median over steps)", headers, rows)
        missing = S.unavailable_line(diff)
        if missing:
            console.print(text(missing, style="dim"))
        if gate_results:
            _status_table(console, *S.gate_rows(gate_results))
        for title, headers, rows in S.detail_tables(diff):
            _status_table(console, title, headers, rows)
        console.print()
        for line in S.method_lines(diff):
            console.print(text(line, style="dim"))

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        console = make_console(out, color=color, width=width)
        console.print(text(f"tracekit check: {S.check_title(result)}", style="bold"))
        if result.description:
            for line in result.description.splitlines():
                console.print(text(line))
        _status_table(console, *S.check_rows(result))
        for note in result.notes:
            console.print(text(note, style="dim"))

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render import sections

        console = make_console(out, color=color, width=width)
        print_rows(console, *sections.ranks_table(rank_report))
        if rank_report.slowest:
            console.print(text(f"slowest: {rank_report.slowest}", style="bold"))

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        from tracekit.render import compile_sections as C

        console = make_console(out, color=color, width=width)
        console.print(text(f"tracekit compare: {len(comparison.rows)} traces", style="bold"))
        console.print()
        print_rows(console, *C.compare_table(comparison))
        console.print()
        console.print(text("Verdict:", style="bold"))
        for line in C.verdict_lines(comparison):
            console.print(text(f"  {line}"))
        if gate_results:
            _status_table(console, *C.gate_rows(gate_results))
        console.print()
        for line in C.method_lines(comparison):
            console.print(text(line, style="dim"))
