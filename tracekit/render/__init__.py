"""Renderers: the only code that knows terminal, Markdown and JSON. They word results, never compute.

One registry: :data:`RENDERERS` maps a format name to its :class:`~tracekit.render.base.Renderer`
(one module per format: :mod:`~tracekit.render.term`, :mod:`~tracekit.render.markdown`,
:mod:`~tracekit.render.json`, :mod:`~tracekit.render.html`, :mod:`~tracekit.render.svg`; the charts
both pictures formats draw are :mod:`~tracekit.render.charts`). :data:`FORMATS` lists the names
(``--format`` choices),
:func:`renderer_for` returns a format's renderer and :func:`format_for_path` picks the format of an
``-o`` file from the registry's extensions. A renderer module imports its heavy libraries (rich,
Polars, msgspec, vl-convert) only when it renders, so importing this registry stays cheap for ``--help``.
"""

from __future__ import annotations

from tracekit.errors import UsageError
from tracekit.render.base import Renderer
from tracekit.render.html import HtmlRenderer
from tracekit.render.json import JsonRenderer
from tracekit.render.markdown import MarkdownRenderer
from tracekit.render.svg import SvgRenderer
from tracekit.render.term import TermRenderer

#: Every format by name; the first is the default.
RENDERERS: dict[str, Renderer] = {r.name: r for r in (TermRenderer(), MarkdownRenderer(), JsonRenderer(),
                                                      HtmlRenderer(), SvgRenderer())}
#: The format names, in registry order.
FORMATS: tuple[str, ...] = tuple(RENDERERS)
_DEFAULT = FORMATS[0]


def renderer_for(fmt: str) -> Renderer:
    """The renderer of format ``fmt``; :class:`UsageError` for a name not in :data:`RENDERERS`."""
    try:
        return RENDERERS[fmt]
    except KeyError:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})") from None


def format_for_path(path: str | None, explicit: str | None) -> str:
    """The format to use: ``explicit`` if given, else the one whose extension ``path`` ends with,
    else ``term``."""
    if explicit:
        return explicit
    if path:
        lowered = path.lower()
        for renderer in RENDERERS.values():
            if lowered.endswith(renderer.extensions):
                return renderer.name
    return _DEFAULT
