"""Terminal renderer: rich tables. Colour only when writing to a terminal (or asked for)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracekit.render import sections


def make_console(out: TextIO, *, color: bool, width: int | None = None) -> Console:
    """A rich console on ``out``: the terminal's width when colouring a terminal, else 160 columns."""
    return Console(file=out, force_terminal=color, no_color=not color, width=width or (None if color else 160),
                   highlight=False, soft_wrap=False)


def print_rows(console: Console, title: str, headers: list[str], rows: list[list[str]],
               style: Callable[[str], str] | None = None) -> None:
    """One titled table ("<title>: none" when empty); ``style`` picks a cell's rich style."""
    if not rows:
        console.print(Text(f"{title}: none", style="bold"))
        return
    table = Table(title=title, title_justify="left", title_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*[Text(str(cell), style=style(str(cell)) if style else "") for cell in row])
    console.print(table)


def render(report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
    """Write the report as rich tables to ``out``."""
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


def print_table(title: str, headers: list[str], rows: list[list[str]], out: TextIO, *,
                color: bool = False, footer: str | None = None) -> None:
    """One rich table (used by commands whose output is a single table)."""
    console = make_console(out, color=color)
    print_rows(console, title, headers, rows)
    if footer:
        console.print(Text(footer, style="bold"))
