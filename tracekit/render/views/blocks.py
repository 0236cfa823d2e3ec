"""Blocks several views build alike: a table from a row builder's ``(title, headers, rows)``, and the
``--fail-if`` gates' table with its tally."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracekit.render.document import Table
from tracekit.render.text import Rows


def table(rows: Rows, **options: Any) -> Table:
    """The :class:`~tracekit.render.document.Table` of a row builder's ``(title, headers, rows)``;
    ``options``: its flags (``status``, ``headed``, ``folded``…)."""
    title, headers, cells = rows
    return Table(title, tuple(headers), tuple(tuple(row) for row in cells), **options)


def gates_table(rows: Rows, results: Sequence[Any]) -> Table:
    """The ``--fail-if`` gates (``results``: each with ``failed``), its tally saying how many failed."""
    failed = sum(1 for r in results if r.failed)
    return table(rows, status=True, tally=f"{failed} failed" if failed else "all pass")
