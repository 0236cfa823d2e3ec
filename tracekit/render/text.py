"""Display formatting shared by the renderers: durations, percentages, code spans, Markdown escaping.

Kernel-name shortening and decoding live with the taxonomy (:mod:`tracekit.classify.names`).
"""

from __future__ import annotations


class Code(str):
    """A name (kernel, op, gate) shown as a code span in Markdown and plain elsewhere."""


#: A titled table of display cells: ``(title, headers, rows)``; a cell is a ``str`` or :class:`Code`.
Table = tuple[str, list[str], list[list[str]]]


def us(ns: int | float | None) -> str:
    """Nanoseconds as microseconds with one decimal ("241.3 µs"); "–" for missing."""
    if ns is None:
        return "–"
    return f"{ns / 1000:,.1f} µs"


def pct(part: float, whole: float) -> str:
    """``part/whole`` as a percentage with one decimal; "–" when ``whole`` is 0."""
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


def md_escape(text: object) -> str:
    """Make ``text`` safe inside a GitHub Markdown table cell (pipes, backticks, HTML)."""
    if text is None:
        return ""
    s = str(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("|", "\\|").replace("`", "&#96;").replace("*", "\\*").replace("_", "\\_")
    return s.replace("\r", " ").replace("\n", " ")
