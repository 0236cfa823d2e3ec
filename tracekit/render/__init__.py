"""Rendering: the only code that knows terminal, Markdown, HTML, SVG and JSON. It words results, never
computes.

Results become documents, documents become formats. One view per result kind
(:mod:`tracekit.render.views`) builds an ordered :class:`~tracekit.render.document.Document`; one
printer per text format prints any document (:mod:`~tracekit.render.term`,
:mod:`~tracekit.render.markdown`, :mod:`~tracekit.render.html`); :mod:`~tracekit.render.svg` writes
a document's pictures; :mod:`~tracekit.render.json` writes each result's versioned data contract.
No format module imports another: what two share lives in a neutral module (escaping and display
text :mod:`~tracekit.render.text`, Markdown :mod:`~tracekit.render.gfm`, the HTML page
:mod:`~tracekit.render.page`, the drawings :mod:`~tracekit.render.timeline` and
:mod:`~tracekit.render.charts`).

One registry: :data:`RENDERERS` maps a format name to its :class:`~tracekit.render.base.Renderer`.
:data:`FORMATS` lists the names (``--format`` choices),
:func:`renderer_for` returns a format's renderer and :func:`format_for_path` picks the format of an
``-o`` file from the registry's extensions. A renderer module imports its heavy libraries (rich,
Polars, msgspec, vl-convert) only when it renders, so importing this registry stays cheap for ``--help``.

Importing this package also makes results show as HTML in a notebook: it registers
:func:`tracekit.render.notebook.html` as the results' display hook (:mod:`tracekit.results.display`).

Beside the registry, :data:`ANNOTATED_TRACE` (:mod:`~tracekit.render.annotated`) writes a report into
its trace's own text (``tracekit annotate``): a :class:`~tracekit.render.base.TraceRenderer`, not a
result format (:mod:`tracekit.render.base` says why). What it shares with ``json`` (a finding as
data) lives in :mod:`~tracekit.render.findings_data`.
"""

from __future__ import annotations

import importlib
import os

from tracekit.errors import UsageError
from tracekit.render.annotated import AnnotatedTraceRenderer
from tracekit.render.base import Renderer, TraceRenderer
from tracekit.render.html import HtmlRenderer
from tracekit.render.json import JsonRenderer
from tracekit.render.markdown import MarkdownRenderer
from tracekit.render.svg import SvgRenderer
from tracekit.render.term import TermRenderer
from tracekit.results import display as _display

#: Every format by name; the first is the default.
RENDERERS: dict[str, Renderer] = {r.name: r for r in (TermRenderer(), MarkdownRenderer(), JsonRenderer(),
                                                      HtmlRenderer(), SvgRenderer())}
#: The format names, in registry order.
FORMATS: tuple[str, ...] = tuple(RENDERERS)
_DEFAULT = FORMATS[0]
#: The trace written again with a report on tracks of its own (``tracekit annotate``).
ANNOTATED_TRACE: TraceRenderer = AnnotatedTraceRenderer()


def _notebook_html(result: object) -> str:
    """The results' display hook: :func:`tracekit.render.notebook.html`, imported when first shown."""
    from tracekit.render import notebook

    return notebook.html(result)


_display.register_html(_notebook_html)

#: Modules of this package reached as attributes on first use (``tracekit.render.timeline.draw(step)``).
_LAZY = frozenset({"charts", "notebook", "timeline", "views"})


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def renderer_for(fmt: str) -> Renderer:
    """The renderer of format ``fmt``; :class:`UsageError` for a name not in :data:`RENDERERS`."""
    try:
        return RENDERERS[fmt]
    except KeyError:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})") from None


def format_for_path(path: str | None, explicit: str | None) -> str:
    """The format to use: ``explicit`` if given, else the one whose extension ``path`` ends with,
    else ``term`` for a path with no extension (``-``, ``/dev/stdout``, a directory for svg);
    :class:`UsageError` for an extension no format writes (``out.pdf``)."""
    if explicit:
        return explicit
    if path:
        lowered = path.lower()
        for renderer in RENDERERS.values():
            if lowered.endswith(renderer.extensions):
                return renderer.name
        suffix = os.path.splitext(os.path.basename(path))[1]
        if suffix:  # a file named for a format tracekit does not write (out.pdf): not terminal text in it
            known = " ".join(e for r in RENDERERS.values() for e in r.extensions)
            raise UsageError(f"-o {path}: tracekit writes no {suffix} file (extensions: {known}; or choose "
                             f"one with --format {{{','.join(FORMATS)}}})")
    return _DEFAULT
