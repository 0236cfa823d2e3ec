"""Renderers: the only code that knows terminal, Markdown and JSON. They format, never compute.

:func:`render_report` picks the renderer from ``fmt`` (``term`` | ``md`` | ``json``) and writes to
``out`` (a text stream). :func:`format_for_path` maps an ``-o`` file's extension to a format.
"""

from __future__ import annotations

from typing import TextIO

from tracekit.errors import UsageError

FORMATS = ("term", "md", "json")
_EXTENSIONS = {".md": "md", ".markdown": "md", ".json": "json", ".txt": "term"}


def format_for_path(path: str | None, explicit: str | None) -> str:
    """The format to use: ``explicit`` if given, else the ``-o`` file's extension, else ``term``."""
    if explicit:
        return explicit
    if path:
        for ext, fmt in _EXTENSIONS.items():
            if path.lower().endswith(ext):
                return fmt
    return "term"


def render_report(report, fmt: str, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
    """Write ``report`` (a :class:`tracekit.report.Report`) to ``out`` in ``fmt``."""
    if fmt == "json":
        from tracekit.render import json as renderer
        renderer.render(report, out)
    elif fmt == "md":
        from tracekit.render import markdown as renderer_md
        renderer_md.render(report, out)
    elif fmt == "term":
        from tracekit.render import term as renderer_term
        renderer_term.render(report, out, color=color, width=width)
    else:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def render_ranks(rank_report, fmt: str, out: TextIO, *, color: bool = False) -> None:
    """Write a :class:`tracekit.ranks.RankReport` (``tracekit report DIR``) in ``fmt``."""
    from tracekit.render import sections

    if fmt == "json":
        from tracekit.render.json import encode

        data = {
            "schema": "tracekit.ranks/1", "directory": rank_report.directory,
            "slowest": rank_report.slowest, "ranks": rank_report.ranks.to_dicts(),
        }
        out.write(encode(data).decode())
        return
    title, headers, rows = sections.ranks_table(rank_report)
    if fmt == "md":
        from tracekit.render.markdown import table
        from tracekit.render.text import md_escape

        out.write(f"## {md_escape(title)}\n\n{table(headers, rows)}\n")
        if rank_report.slowest:
            out.write(f"\nSlowest rank: {md_escape(rank_report.slowest)}\n")
        return
    if fmt != "term":
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    from tracekit.render.term import print_table

    print_table(title, headers, rows, out, color=color,
                footer=f"slowest: {rank_report.slowest}" if rank_report.slowest else None)
