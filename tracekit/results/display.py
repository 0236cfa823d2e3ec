"""How a result shows itself in a notebook: a short ``repr`` and, through a hook, rich HTML.

Contract: :class:`Displayed` is the base of the results a notebook shows (:class:`~tracekit.results.report.Report`,
:class:`~tracekit.results.diff.Diff`). Its ``_repr_html_`` (the method Jupyter, VS Code and IPython
call for ``text/html``) hands the result to the printer :func:`register_html` installed, and returns
None while none is installed (the notebook then shows the short ``repr``).

Why a hook: an HTML summary is wording, and wording lives in :mod:`tracekit.render`, a floor above
the results (docs/architecture.md), which the results may not import. The renderers register their
notebook printer (:mod:`tracekit.render.notebook`) when :mod:`tracekit.render` is imported, and
``tracekit.open`` imports it: a result reached through the public API always has its HTML.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_html: Callable[[Any], str] | None = None


def register_html(printer: Callable[[Any], str]) -> None:
    """Make ``printer(result) -> HTML fragment`` what every :class:`Displayed` result shows in a notebook."""
    global _html
    _html = printer


class Displayed:
    """A result a notebook shows as HTML (see the module docstring)."""

    __slots__ = ()

    def _repr_html_(self) -> str | None:
        return _html(self) if _html is not None else None


def short_list(names: list[str], room: int = 2) -> str:
    """Up to ``room`` names, then how many more (``"a, b, +3"``): what a one-line ``repr`` names."""
    shown = ", ".join(names[:room])
    return shown + (f", +{len(names) - room}" if len(names) > room else "")


def short_name(name: str, limit: int = 60) -> str:
    """``name`` cut to ``limit`` characters, its end kept (the part that tells files apart)."""
    return name if len(name) <= limit else "…" + name[-(limit - 1):]
