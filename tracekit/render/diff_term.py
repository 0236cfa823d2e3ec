"""Terminal output of ``tracekit diff`` and ``tracekit check``: rich tables, colour only on a tty."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tracekit.render import diff_sections as S

_STATUS_STYLE = {"lower": "green", "higher": "red", "FAILED": "bold red", "BROKEN": "bold red",
                 "met": "green", "within noise": "dim"}


def _console(out: TextIO, color: bool, width: int | None) -> Console:
    return Console(file=out, force_terminal=color, no_color=not color, width=width or 160,
                   highlight=False, soft_wrap=False)


def _table(console: Console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    console.print()
    if not rows:
        console.print(Text(f"{title}: none", style="bold"))
        return
    table = Table(title=title, title_justify="left", title_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*[Text(str(c), style=_STATUS_STYLE.get(str(c), "")) for c in row])
    console.print(table)


def render(diff, out: TextIO, gate_results=None, *, color: bool = False, width: int | None = None) -> None:
    console = _console(out, color, width)
    console.print(Text(f"tracekit diff: {diff.a.label} → {diff.b.label}", style="bold"))
    console.print(Text.assemble(("Verdict: ", "bold"), S.plain(S.verdict_parts(diff))))
    headers, rows = S.quantity_rows(diff)
    _table(console, "Per step (median over steps)", headers, rows)
    missing = S.unavailable_line(diff)
    if missing:
        console.print(Text(missing, style="dim"))
    if gate_results:
        _table(console, *S.gate_rows(gate_results))
    for title, headers, rows in S.detail_tables(diff):
        _table(console, title, headers, rows)
    console.print()
    for line in S.method_lines(diff):
        console.print(Text(line, style="dim"))


def render_check(result, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
    console = _console(out, color, width)
    console.print(Text(f"tracekit check: {S.check_title(result)}", style="bold"))
    if result.description:
        console.print(result.description)
    _table(console, *S.check_rows(result))
    for note in result.notes:
        console.print(Text(note, style="dim"))
