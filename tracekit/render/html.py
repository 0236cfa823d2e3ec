"""The ``html`` format: any document as one self-contained page (``--format html``, or ``-o FILE.html``).

The page's shell and its escaping are :mod:`tracekit.render.page`'s; this module prints a document's
blocks into it: each :class:`~tracekit.render.document.Section` a ``<section>`` under its ``<h2>``
(with a link in the header), each block as the tags below. Findings are cards; tables sit under an
``<h3>`` of their title (a status cell gets the class ``tk-status-<cell>``); step timelines are one
inline drawing per step (the default step in the view, the others in ``<template>`` elements the
page's script swaps in when chosen, :mod:`tracekit.render.timeline`); charts are figures
(``<figure class="tk-chart" data-chart=NAME>``, :mod:`tracekit.render.charts`).

:func:`fragment` prints a document as one ``<div class="tk-nb">`` instead, for a notebook's output
cell (:mod:`tracekit.render.notebook`): the same blocks, under a stylesheet scoped to that div
(``html_assets/notebook.css``), with no script (a notebook runs none it did not write) and so the
timeline drawn for its default step only, without controls; nothing in it has an ``id`` but the
drawing's own, prefixed by a hash of the drawing (two cells showing one report may share them).

What a big trace draws is capped by :mod:`tracekit.analyses.timeline` (each step's ``left_out``
says what was not drawn; the drawing states it in its ``g.tk-left-out`` note) and every table by
:data:`tracekit.render.views.tables.MAX_TABLE_ROWS` rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TextIO

from tracekit.render.base import DocumentRenderer
from tracekit.render.document import (STATUS_WORDS, Bullets, Charts, Document, Facts, Findings, Paragraph,
                                      StepDrawing, Table, Timelines, Verdict)
from tracekit.render.page import asset, bullets, cell, esc, inline_svg, none, page, table, titled


def _findings(block: Findings) -> str:
    """Each finding as a card: severity, rule and what in its heading, the other cells of its row as
    labelled fields."""
    if not block.items:
        return none()
    cards = []
    for f in block.items:
        severity, rule, what, *rest = f.row
        fields = "".join(f"<dt>{esc(h)}</dt><dd>{cell(v)}</dd>" for h, v in zip(block.headers[3:], rest) if v)
        cards.append(f'<article class="tk-finding tk-sev-{esc(f.severity)}" data-rule="{esc(f.rule)}">'
                     f'<h3><span class="tk-badge">{esc(severity)}</span>{cell(rule)} {esc(what)}</h3>'
                     f'<dl class="tk-fields">{fields}</dl></article>')
    return "".join(cards)


def _facts(block: Facts) -> str:
    return '<dl class="tk-fields">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in block.pairs) + "</dl>"


def _table(block: Table) -> str:
    title = block.title + (f": {block.tally}" if block.tally is not None else "")
    status = (lambda value: value in STATUS_WORDS) if block.status else None
    return titled(title, table(block.headers, block.rows, status=status) if block.rows else none())


def _verdict(block: Verdict) -> str:
    return (f'<p class="tk-verdict"><strong>{esc(block.label)}:</strong> '
            + "".join(cell(p) for p in block.parts) + "</p>")


def _paragraph(block: Paragraph) -> str:
    attr = ' class="tk-muted"' if block.tone == "muted" else ""
    body = "".join(f"<p{attr}>{esc(line)}</p>" for line in block.lines)
    return titled(block.title, body) if block.title else body


def _bullets(block: Bullets) -> str:
    return titled(block.title, bullets(block.lines)) if block.title else bullets(block.lines)


def _drawing(drawing: StepDrawing) -> str:
    """One step's drawing inlined, under its side label. Where folding its CPU lanes hides marks,
    the folded drawing is shown in a ``div.tk-fold`` (``data-cpu-depth="launch"``) and the full one
    waits in the ``template`` after it (``data-cpu-depth="full"``), which the page's CPU depth
    control swaps in."""
    from tracekit.render import timeline

    out = f'<div class="tk-side">{esc(drawing.side)}</div>' if drawing.side else ""
    folded = inline_svg(timeline.draw(drawing.step, width=drawing.width), drawing.prefix)
    if not timeline.foldable(drawing.step):
        return out + folded
    full = inline_svg(timeline.draw(drawing.step, width=drawing.width, full=True), f"{drawing.prefix}-full")
    return (out + f'<div class="tk-fold" data-cpu-depth="launch">{folded}</div>'
            f'<template class="tk-fold-other" data-cpu-depth="full">{full}</template>')


def _timelines(block: Timelines) -> str:
    """A step selector and a view: the default choice drawn in the view, the others in
    ``<template>`` elements the script swaps in when chosen."""
    from tracekit.render import timeline

    if not block.choices:
        return none(block.empty)
    ordered = sorted(block.choices, key=lambda c: c.key != block.default)  # the default first, then in order
    options = "".join(f'<option value="{esc(c.key)}"{" selected" if c.key == block.default else ""}>'
                      f"{esc(c.label)}</option>" for c in ordered)
    controls = ('<div class="tk-controls"><label>Step <select class="tk-step-select" aria-label="step">'
                f"{options}</select></label>"
                '<button type="button" data-zoom="in" title="zoom in">+</button>'
                '<button type="button" data-zoom="out" title="zoom out">−</button>'
                '<button type="button" data-zoom="reset" title="whole step">reset</button>'
                + ('<button type="button" class="tk-depth" aria-pressed="false" title="CPU lanes: only the ops '
                   'that launch GPU work (their outermost op and annotations) or every nesting depth">'
                   "CPU: all depths</button>" if any(timeline.foldable(d.step) for c in block.choices
                                                       for d in c.drawings) else "") +
                '<span class="tk-hint">ctrl/⌘ + wheel or pinch: zoom · drag or shift + wheel: pan · double-click: reset'
                ' · hover a mark: details</span>'
                "</div>")
    parts = [f'<div class="tk-timelines">{controls}']
    for c in ordered:
        drawn = "".join(_drawing(d) for d in c.drawings)
        tag = ("div", ' class="tk-view"') if c.key == block.default else ("template", "")
        parts.append(f'<{tag[0]}{tag[1]} data-key="{esc(c.key)}">{drawn}</{tag[0]}>')
    parts.append("</div>")
    return "".join(parts)


def _charts(block: Charts) -> str:
    """Each chart its subject has data for, in a figure."""
    from tracekit.render import charts

    figures = []
    for n, chart in enumerate(block.charts):
        svg = getattr(charts, chart.chart)(chart.subject)
        if svg:
            # The chart's own title names it; the label is for screen readers.
            figures.append(f'<figure class="tk-chart" data-chart="{esc(chart.chart)}" aria-label="{esc(chart.caption)}">'
                           f'{inline_svg(svg, f"ch{n}")}</figure>')
    return f'<div class="tk-charts">{"".join(figures)}</div>' if figures else none("no charts")


#: How each kind of block prints.
_PRINT: dict[type, Callable[[Any], str]] = {
    Findings: _findings, Facts: _facts, Table: _table, Verdict: _verdict, Paragraph: _paragraph,
    Bullets: _bullets, Timelines: _timelines, Charts: _charts,
}


class HtmlRenderer(DocumentRenderer):
    """One self-contained HTML page per result (``.html``, ``.htm``)."""

    name = "html"
    extensions = (".html", ".htm")
    #: The report and the diff draw step timelines: the commands compute them for this format.
    needs_timelines: ClassVar[bool] = True

    def print(self, document: Document, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        sections = [(s.id, s.title, "".join(_PRINT[type(b)](b) for b in s.blocks)) for s in document.sections]
        heading = "".join(cell(p) for p in document.title.page_parts or document.title.parts)
        out.write(page(document.title.text, heading, sections, kind=document.kind))


def _still_timeline(block: Timelines) -> str:
    """The default step's drawing alone (a notebook cell runs no script to switch steps or zoom)."""
    import hashlib

    from tracekit.render import timeline

    chosen = next((c for c in block.choices if c.key == block.default), None)
    if chosen is None:
        return none(block.empty)
    parts = []
    for d in chosen.drawings:
        svg = timeline.draw(d.step, width=d.width)
        side = f'<div class="tk-side">{esc(d.side)}</div>' if d.side else ""
        parts.append(side + inline_svg(svg, "nb" + hashlib.sha256(svg.encode("utf-8")).hexdigest()[:10]))
    return f'<p class="tk-muted">{esc(chosen.label)}</p><div class="tk-view">{"".join(parts)}</div>'


def fragment(document: Document) -> str:
    """``document`` as one self-styled ``<div>`` for a notebook output cell (module docstring)."""
    printers = {**_PRINT, Timelines: _still_timeline}
    heading = "".join(cell(p) for p in document.title.page_parts or document.title.parts)
    body = "".join(f'<section data-section="{esc(s.id)}"><h2>{esc(s.title)}</h2>'
                   + "".join(printers[type(b)](b) for b in s.blocks) + "</section>" for s in document.sections)
    return (f'<div class="tk-nb tk-{esc(document.kind)}"><style>{asset("notebook.css")}</style>'
            f'<div class="tk-nb-title">{heading}</div>{body}</div>')
