"""SVG: the report's pictures as standalone files, and the Markdown that shows them (for pull requests
and a repository's docs).

What ``-o`` means with ``--format svg`` (read by :meth:`SvgRenderer.files_target` before any work):

* ``-o DIR/`` (a trailing slash, an existing directory, or any name not ending ``.svg``/``.md``):
  the directory (made when missing) receives every picture and a Markdown document that shows them
  by relative links — ``report.md`` for ``tracekit report``, ``diff.md`` for ``tracekit diff``;
* ``-o DIR/NAME.md``: the same, the Markdown named ``NAME.md``;
* ``-o FILE.svg``: one picture: the step timeline of ``tracekit report`` (the GPU time by class
  chart when the report has no timeline), the per-class bars of ``tracekit diff`` (a picture saying
  so when there is nothing to draw);
* no ``-o`` (or ``-o -``): exit 2 — pictures are files, not a stream.

The pictures are the document's (its :class:`~tracekit.render.document.Timelines` and
:class:`~tracekit.render.document.Charts`, as the view of the result words them): of a timeline, the
drawings of the step shown first; each named by its picture's ``name``, in :data:`REPORT_FILES` or
:data:`DIFF_FILES` order. A picture the result has no data for is left out, and so is its link. The
files of ``tracekit report``: ``timeline.svg`` (the default step, drawn by
:func:`tracekit.render.timeline.draw`), ``gpu_time_by_class.svg``, ``roofline.svg``,
``memory.svg`` (only with memory events) — the charts of :mod:`tracekit.render.charts`. Of
``tracekit diff``: ``class_time_a_vs_b.svg``, ``timeline_a.svg`` and ``timeline_b.svg`` (A's and B's
last aligned pair of steps, drawn to one time scale). The Markdown is the document as
:mod:`tracekit.render.gfm` prints it, with a *Pictures* part where the document's pictures are
(saying so when there is nothing to draw). Same trace, same bytes.

``check``, ``ranks`` and ``compare`` have no pictures: exit 2 with a line naming the formats that
have them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

from tracekit.errors import UsageError
from tracekit.render.base import Renderer
from tracekit.render.document import Charts, Document, Timelines
from tracekit.render.gfm import document_text
from tracekit.render.views import document

if TYPE_CHECKING:
    from tracekit.results import Result
    from tracekit.results.gates import GateResult

#: The pictures of ``tracekit report`` (by name) in the order the Markdown shows them.
REPORT_FILES: tuple[str, ...] = ("timeline", "gpu_time_by_class", "roofline", "memory")
#: The pictures of ``tracekit diff``; the first is what ``-o FILE.svg`` gets.
DIFF_FILES: tuple[str, ...] = ("class_time_a_vs_b", "timeline_a", "timeline_b")
REPORT_INDEX, DIFF_INDEX = "report.md", "diff.md"
_NEEDS_FILES = ("--format svg writes files: give -o DIR/ (every picture and a Markdown page showing them) "
                "or -o FILE.svg (one picture)")


NOTHING_IN_REPORT = "Nothing to draw: this report has no step timeline and no GPU work."
NOTHING_IN_DIFF = "Nothing to draw: neither trace has GPU kernel time."
#: The result kinds with pictures: their pictures in order, the page showing them, and what
#: ``-o FILE.svg`` says when nothing can be drawn.
PICTURES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "report": (REPORT_FILES, REPORT_INDEX, NOTHING_IN_REPORT),
    "diff": (DIFF_FILES, DIFF_INDEX, NOTHING_IN_DIFF),
}
#: How the refusal names the command of a result kind without pictures (default: the kind).
COMMANDS = {"ranks": "report DIR"}


def nothing_drawn(sentence: str) -> str:
    """A small standalone SVG that says ``sentence`` (what ``-o FILE.svg`` gets when nothing can be drawn)."""
    from xml.sax.saxutils import escape

    from tracekit.render.text import for_display

    return ('<svg xmlns="http://www.w3.org/2000/svg" class="tk-nothing" width="480" height="40" viewBox="0 0 480 40">'
            f'<text x="8" y="24" font-family="sans-serif" font-size="13" fill="#555555">{escape(for_display(sentence))}'
            '</text></svg>\n')


def pictures(document: Document, order: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{file name: (alt text, SVG)}`` of the document's pictures, in ``order`` (by picture name);
    those without data left out."""
    from tracekit.render import charts, timeline

    drawn: dict[str, tuple[str, str]] = {}
    for block in document.blocks():
        if isinstance(block, Timelines) and (shown := block.shown()) is not None:
            for d in shown.drawings:
                drawn[d.name] = (d.alt, timeline.draw(d.step, width=d.width))
        elif isinstance(block, Charts):
            for chart in block.charts:
                svg = getattr(charts, chart.chart)(chart.subject)
                if svg is not None:
                    drawn[chart.name] = (chart.alt, svg)
    return {f"{name}.svg": drawn[name] for name in order if name in drawn}


def _files(document: Document, order: Sequence[str], index: str, nothing: str) -> dict[str, str]:
    """The pictures and the Markdown showing them, ``{file name: text}``."""
    drawn = pictures(document, order)
    links = [(alt, name) for name, (alt, _) in drawn.items()] or [(nothing, "")]
    return {**{name: svg for name, (_, svg) in drawn.items()}, index: document_text(document, links)}


def _first(document: Document, order: Sequence[str], nothing: str) -> str:
    """The first picture (``-o FILE.svg``), or a picture saying there is nothing to draw."""
    drawn = pictures(document, order)
    return next(iter(drawn.values()))[1] if drawn else nothing_drawn(nothing)


class SvgRenderer(Renderer):
    """Standalone SVG pictures (``.svg``), written to a directory with their Markdown (module docstring)."""

    name = "svg"
    extensions = (".svg",)
    needs_timelines = True
    writes_files = True

    def files_target(self, output: str | None) -> tuple[str, str | None] | None:
        if output is None or output == "-":
            raise UsageError(_NEEDS_FILES)
        lowered = output.lower()
        if output.endswith(("/", os.sep)) or os.path.isdir(output):
            return output, None
        if lowered.endswith(".svg"):
            return None
        if lowered.endswith((".md", ".markdown")):
            return os.path.dirname(output) or ".", os.path.basename(output)
        return output, None

    def files(self, result: Result, gate_results: Sequence[GateResult] = (), *,
              index: str | None = None) -> dict[str, str]:
        order, default_index, nothing = _drawn(result)
        return _files(document(result, gate_results), order, index or default_index, nothing)

    def render(self, result: Result, out: TextIO, gate_results: Sequence[GateResult] = (), *,
               color: bool = False, width: int | None = None) -> None:
        order, _, nothing = _drawn(result)
        out.write(_first(document(result, gate_results), order, nothing))


def _drawn(result: Result) -> tuple[tuple[str, ...], str, str]:
    """``(picture names in order, index file name, what to say when nothing is drawn)`` of a result
    kind with pictures; :class:`UsageError` for another."""
    if result.kind not in PICTURES:
        _no_pictures(COMMANDS.get(result.kind, result.kind))
    return PICTURES[result.kind]


def _no_pictures(command: str) -> NoReturn:
    raise UsageError(f"--format svg draws `tracekit report TRACE` and `tracekit diff`; for `tracekit {command}` "
                     "use --format md, html, json or term")
