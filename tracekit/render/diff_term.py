"""Terminal output of ``tracekit diff`` and ``tracekit check``: rich tables, colour only on a tty."""

from __future__ import annotations

from typing import TextIO

from rich.text import Text

from tracekit.render import diff_sections as S
from tracekit.render.term import make_console, print_rows

_STATUS_STYLE = {"lower": "green", "higher": "red", "FAILED": "bold red", "BROKEN": "bold red",
                 "met": "green", "within noise": "dim"}


def _table(console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    console.print()
    print_rows(console, title, headers, rows, style=lambda cell: _STATUS_STYLE.get(cell, ""))


def render(diff, out: TextIO, gate_results=None, *, color: bool = False, width: int | None = None) -> None:
    console = make_console(out, color=color, width=width)
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
    console = make_console(out, color=color, width=width)
    console.print(Text(f"tracekit check: {S.check_title(result)}", style="bold"))
    if result.description:
        console.print(result.description)
    _table(console, *S.check_rows(result))
    for note in result.notes:
        console.print(Text(note, style="dim"))
