"""Terminal renderer: rich tables. Colour only when writing to a terminal (or asked for).

Without colour the console is 160 columns wide (or ``width``), so output written to a file or a
pipe does not depend on the terminal it was made in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from tracekit.render.base import Renderer

if TYPE_CHECKING:
    from rich.console import Console

    from tracekit.diff.compare import Diff
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.ranks import RankReport
    from tracekit.report import Report

#: Rich styles of the status cells of diff and check tables.
STATUS_STYLE = {"lower": "green", "higher": "red", "FAILED": "bold red", "BROKEN": "bold red",
                "met": "green", "within noise": "dim"}


def make_console(out: TextIO, *, color: bool, width: int | None = None) -> Console:
    """A rich console on ``out``: the terminal's width when colouring a terminal, else 160 columns."""
    from rich.console import Console

    return Console(file=out, force_terminal=color, no_color=not color, width=width or (None if color else 160),
                   highlight=False, soft_wrap=False)


def print_rows(console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
               style: Callable[[str], str] | None = None) -> None:
    """One titled table ("<title>: none" when empty); ``style`` picks a cell's rich style."""
    from rich.table import Table
    from rich.text import Text

    if not rows:
        console.print(Text(f"{title}: none", style="bold"))
        return
    table = Table(title=title, title_justify="left", title_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*[Text(str(cell), style=style(str(cell)) if style else "") for cell in row])
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

        from tracekit.render import sections

        console = make_console(out, color=color, width=width)
        facts = sections.facts_lines(report)
        console.print(Text(f"tracekit report: {facts[0][1]}", style="bold"))
        for label, value in facts[1:]:
            console.print(Text.assemble((f"  {label}: ", "bold"), value))
        for title, headers, rows in sections.all_tables(report):
            console.print()
            print_rows(console, title, headers, rows)
        rules = sections.notes(report)
        if rules:
            console.print()
            for line in rules:
                console.print(Text(f"note: {line}"))

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from rich.text import Text

        from tracekit.render import diff_sections as S

        console = make_console(out, color=color, width=width)
        console.print(Text(f"tracekit diff: {diff.a.label} → {diff.b.label}", style="bold"))
        console.print(Text.assemble(("Verdict: ", "bold"), S.plain(S.verdict_parts(diff))))
        headers, rows = S.quantity_rows(diff)
        _status_table(console, "Per step (median over steps)", headers, rows)
        missing = S.unavailable_line(diff)
        if missing:
            console.print(Text(missing, style="dim"))
        if gate_results:
            _status_table(console, *S.gate_rows(gate_results))
        for title, headers, rows in S.detail_tables(diff):
            _status_table(console, title, headers, rows)
        console.print()
        for line in S.method_lines(diff):
            console.print(Text(line, style="dim"))

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from rich.text import Text

        from tracekit.render import diff_sections as S

        console = make_console(out, color=color, width=width)
        console.print(Text(f"tracekit check: {S.check_title(result)}", style="bold"))
        if result.description:
            console.print(result.description)
        _status_table(console, *S.check_rows(result))
        for note in result.notes:
            console.print(Text(note, style="dim"))

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from rich.text import Text

        from tracekit.render import sections

        console = make_console(out, color=color, width=width)
        print_rows(console, *sections.ranks_table(rank_report))
        if rank_report.slowest:
            console.print(Text(f"slowest: {rank_report.slowest}", style="bold"))
