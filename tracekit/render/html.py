"""HTML: every result as one self-contained page (``--format html``, or ``-o FILE.html``).

A page holds everything it shows: its stylesheet and script are inlined from
``tracekit/render/html_assets/`` (package data), the timelines and charts are inline SVG. Nothing is
fetched: no CDN, no font, no image by URL; the page's Content-Security-Policy allows no source at all
(``default-src 'none'``) but its own inline style, ``data:`` images and the one script whose SHA-256
it names, so a name that escaped its escaping still could not run or load anything.

Escaping: every piece of text passes through :func:`esc` (:func:`~tracekit.render.text.for_display`,
then HTML's five entities, quotes included, so the same function serves text and attribute values);
:func:`table` routes titles, headers and cells through it, a :class:`~tracekit.render.text.Code`
cell becoming ``<code>``. SVG comes from :mod:`tracekit.render.timeline` and
:mod:`tracekit.render.charts`, which escape their own names; :func:`inline_svg` only drops the XML
prolog and prefixes the SVG's ids so two charts on one page cannot share one.

Content is never written twice: the rows are the Markdown and terminal renderers' (``sections``,
``finding_sections``, ``diff_sections``, ``compile_sections``, ``memory_sections``); this module
changes their wording into tags. Layout of the report: findings, the step timeline (one per step,
the report's chosen step shown first, the others in ``<template>`` elements until selected), the
charts (each in ``<figure class="tk-chart" data-chart=NAME>``), the trace's facts, then the tables. The
diff: the verdict and per-step quantities, A's and B's timelines one above the other for each pair
of aligned steps (drawn to one time scale), per-class bars A vs B, then the detail tables.

What a big trace draws is capped by :mod:`tracekit.analyses.timeline` (each step's ``left_out``
says what was not drawn; the drawing states it in its ``g.tk-left-out`` note) and every table by
:data:`tracekit.render.sections.MAX_TABLE_ROWS` rows.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from tracekit.render.base import Renderer
from tracekit.render.text import Code, Table, for_display

if TYPE_CHECKING:
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff
    from tracekit.diff.side_by_side import Comparison
    from tracekit.ranks import RankReport
    from tracekit.report import Report

#: Width (user units and CSS pixels) a step timeline is drawn at; the longer of a diff's two steps
#: gets it, the shorter a share in proportion to its duration (one time scale for both).
TIMELINE_WIDTH = 1200
#: Narrowest a diff's shorter timeline is drawn (its lanes' labels need the room).
MIN_TIMELINE_WIDTH = 360
#: The charts of a report, in page order, with their captions (functions of :mod:`tracekit.render.charts`).
REPORT_CHARTS = (("gpu_time_by_class", "GPU time by kernel class per step"),
                 ("roofline", "Achieved throughput against the device's ceilings (one point per kernel)"),
                 ("memory_timeline", "Memory allocated over time"))
DIFF_CHARTS = (("class_time_a_vs_b", "GPU time per kernel class per step, A vs B"),)


@lru_cache(maxsize=None)
def asset(name: str) -> str:
    """The text of ``html_assets/NAME`` (package data, read once)."""
    from importlib import resources

    return resources.files("tracekit.render").joinpath("html_assets", name).read_text(encoding="utf-8")


def esc(value: object) -> str:
    """``value`` as HTML text or attribute value showing exactly it (see the module docstring)."""
    return html_lib.escape(for_display(value), quote=True)


def cell(value: object) -> str:
    """One cell or verdict piece: a :class:`Code` value in ``<code>``, anything else as text."""
    return f"<code>{esc(value)}</code>" if isinstance(value, Code) else esc(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *,
          status: Callable[[str], bool] | None = None) -> str:
    """An HTML table: headers and cells escaped (:func:`cell`); a cell for which ``status`` is true
    gets the class ``tk-status-<cell>`` (the diff's and check's higher/lower/met/BROKEN)."""
    def td(value: str) -> str:
        if status is not None and status(str(value)):
            return f'<td class="tk-status-{esc(str(value).replace(" ", "-"))}">{cell(value)}</td>'
        return f"<td>{cell(value)}</td>"

    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(td(c) for c in row) + "</tr>" for row in rows)
    return f'<div class="tk-scroll"><table class="tk-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def titled_table(t: Table, *, level: int = 3, status: Callable[[str], bool] | None = None) -> str:
    title, headers, rows = t
    body = table(headers, rows, status=status) if rows else '<p class="tk-none">none</p>'
    return f"<section><h{level}>{esc(title)}</h{level}>{body}</section>"


def bullets(lines: Iterable[str], cls: str = "tk-notes") -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"


_PROLOG = re.compile(r"\A\s*(?:<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*|<!--.*?-->\s*)*", re.S)
#: An id attribute (not ``data-id``) and the three ways SVG refers to one.
_ID = re.compile(r'(?<=\s)id="([^"]+)"')
_ID_REF = re.compile(r'((?<=\s)id=")([^"]+)(")|(url\(#)([^)\s]+)(\))|((?:xlink:)?href=")#([^"]+)(")')


def inline_svg(svg: str, prefix: str) -> str:
    """A standalone SVG document as an element of a page: the XML declaration, doctype and leading
    comments dropped, every id (and every reference to one) prefixed with ``prefix-``."""
    body = _PROLOG.sub("", svg, count=1)
    ids = set(_ID.findall(body))
    if not ids:
        return body

    def scoped(m: re.Match[str]) -> str:
        for start in (1, 4, 7):
            if m.group(start) is not None:
                name = m.group(start + 1)
                new = f"{prefix}-{name}" if name in ids else name
                return m.group(start) + ("" if start != 7 else "#") + new + m.group(start + 2)
        return m.group()

    return _ID_REF.sub(scoped, body)


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def page(title: str, heading: str, sections: Sequence[tuple[str, str, str]], *, kind: str) -> str:
    """One complete document: ``heading`` (HTML) in the header, a link per section, and each
    section ``(id, title, body HTML)`` under its ``<h2>``."""
    script = asset("page.js")
    nav = "".join(f'<a href="#{sid}">{esc(stitle)}</a>' for sid, stitle, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{esc(stitle)}</h2>{html}</section>' for sid, stitle, html in sections)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_csp(script)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="tracekit"><title>{esc(title)}</title>'
            f"<style>{asset('page.css')}</style></head>"
            f'<body class="tk-{kind}"><header class="tk-head"><h1>{heading}</h1><nav>{nav}</nav></header>'
            f"<main>{body}</main><script>{script}</script></body></html>\n")


# -- the pieces of a report ----------------------------------------------------------------------

def findings_html(findings: Sequence[Any]) -> str:
    """Each finding as a card: severity, rule and what in its heading, the other columns of
    :func:`~tracekit.render.finding_sections.findings_table` as labelled fields."""
    from tracekit.render import finding_sections

    _, headers, rows = finding_sections.findings_table(findings)
    if not rows:
        return '<p class="tk-none">none</p>'
    cards = []
    for f, row in zip(findings, rows):
        severity, rule, what, *rest = row
        fields = "".join(f"<dt>{esc(h)}</dt><dd>{cell(v)}</dd>" for h, v in zip(headers[3:], rest) if v)
        cards.append(f'<article class="tk-finding tk-sev-{esc(f.severity)}" data-rule="{esc(f.rule)}">'
                     f'<h3><span class="tk-badge">{esc(severity)}</span>{cell(rule)} {esc(what)}</h3>'
                     f'<dl class="tk-fields">{fields}</dl></article>')
    return "".join(cards)


def facts_html(report: Report) -> str:
    from tracekit.render import sections

    facts = sections.facts_lines(report)[1:]
    return '<dl class="tk-fields">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"


def _step_view(step: Any, width: int, prefix: str, side: str | None = None) -> str:
    """One step's drawing (:func:`tracekit.render.timeline.draw`) inlined, under its ``side`` label."""
    from tracekit.render import timeline

    out = f'<div class="tk-side">{esc(side)}</div>' if side else ""
    return out + inline_svg(timeline.draw(step, width=width), prefix)


def timelines_html(choices: Sequence[tuple[str, str, Callable[[], str]]], *, default: str) -> str:
    """A step selector and a view: ``choices`` are ``(key, label, draw)``; the ``default`` key is
    drawn in the view, the others in ``<template>`` elements the script swaps in when chosen."""
    if not choices:
        return '<p class="tk-none">no steps to draw</p>'
    ordered = sorted(choices, key=lambda c: c[0] != default)  # the default first, then in step order
    options = "".join(f'<option value="{esc(k)}"{" selected" if k == default else ""}>{esc(label)}</option>'
                      for k, label, _ in ordered)
    controls = ('<div class="tk-controls"><label>Step <select class="tk-step-select" aria-label="step">'
                f"{options}</select></label>"
                '<button type="button" data-zoom="in" title="zoom in">+</button>'
                '<button type="button" data-zoom="out" title="zoom out">−</button>'
                '<button type="button" data-zoom="reset" title="whole step">reset</button>'
                '<span class="tk-hint">ctrl/⌘ + wheel or pinch: zoom · drag or shift + wheel: pan · double-click: reset'
                ' · hover a mark: details</span>'
                "</div>")
    parts = [f'<div class="tk-timelines">{controls}']
    for k, _, draw in ordered:
        if k == default:
            parts.append(f'<div class="tk-view" data-key="{esc(k)}">{draw()}</div>')
        else:
            parts.append(f'<template data-key="{esc(k)}">{draw()}</template>')
    parts.append("</div>")
    return "".join(parts)


def report_timelines(report: Report) -> str:
    from tracekit.render import sections

    found = report.timelines
    if found is None:
        return '<p class="tk-none">no timeline (this report was built without timelines)</p>'
    if not found.steps:
        return '<p class="tk-none">no steps to draw</p>'
    steps = {s.number: s for s in found.steps}
    default = found.default_step if found.default_step in steps else found.steps[0].number
    choices = [(str(s.number), (s.name or sections.step_label(report, s.number))
                + (" (shown first)" if s.number == default else ""),
                (lambda s=s: _step_view(s, TIMELINE_WIDTH, f"tl{s.number}"))) for s in found.steps]
    return timelines_html(choices, default=str(default))


def charts_html(names: Sequence[tuple[str, str]], subject: Any) -> str:
    """Each chart of :mod:`tracekit.render.charts` the subject has data for, in a figure."""
    from tracekit.render import charts

    figures = []
    for n, (name, caption) in enumerate(names):
        svg = getattr(charts, name)(subject)
        if svg:
            # The chart's own title names it; the label is for screen readers.
            figures.append(f'<figure class="tk-chart" data-chart="{esc(name)}" aria-label="{esc(caption)}">'
                           f'{inline_svg(svg, f"ch{n}")}</figure>')
    return f'<div class="tk-charts">{"".join(figures)}</div>' if figures else '<p class="tk-none">no charts</p>'


def _status(value: str) -> bool:
    from tracekit.render.term import STATUS_STYLE

    return value in STATUS_STYLE


def gates_html(t: Table, results: Sequence[Any]) -> str:
    """The ``--fail-if`` gates' table, its title saying how many failed."""
    title, headers, rows = t
    failed = sum(1 for r in results if r.failed)
    return titled_table((f"{title}: " + (f"{failed} failed" if failed else "all pass"), headers, rows),
                        status=_status)


def method_html(lines: Iterable[str]) -> str:
    return f"<section><h3>How this was measured</h3>{bullets(lines)}</section>"


# -- the diff's timelines ------------------------------------------------------------------------

def diff_step_width(dur: int, longest: int) -> int:
    """The width to draw a step of ``dur`` ns at, so that its time axis has the scale of the
    ``longest`` step's drawn at :data:`TIMELINE_WIDTH` (the lane labels' column is not time)."""
    from tracekit.render import timeline

    if longest <= 0:
        return TIMELINE_WIDTH
    fixed = timeline.LABEL_WIDTH + timeline.RIGHT_MARGIN
    return max(MIN_TIMELINE_WIDTH, round(fixed + (TIMELINE_WIDTH - fixed) * dur / longest))


def diff_timelines(diff: Diff) -> str:
    """A's and B's timelines of each aligned pair of steps, one above the other, on one time scale."""
    ta, tb = diff.a.timelines, diff.b.timelines
    if ta is None or tb is None:
        return '<p class="tk-none">no timelines (this diff was computed without them)</p>'
    steps_a, steps_b = {s.number: s for s in ta.steps}, {s.number: s for s in tb.steps}
    pairs = [(ua, ub) for ua, ub in diff.unit_pairs if ua in steps_a and ub in steps_b]
    if not pairs:
        return '<p class="tk-none">no aligned steps to draw</p>'

    def draw(n: int, ua: int, ub: int) -> str:
        a, b = steps_a[ua], steps_b[ub]
        dur_a, dur_b = a.end_ns - a.start_ns, b.end_ns - b.start_ns
        longest = max(dur_a, dur_b)
        return (_step_view(a, diff_step_width(dur_a, longest), f"a{n}", f"A: {diff.a.label} — {a.name}")
                + _step_view(b, diff_step_width(dur_b, longest), f"b{n}", f"B: {diff.b.label} — {b.name}"))

    choices = [(str(n), f"A {diff.a.unit_labels.get(ua, ua)} ↔ B {diff.b.unit_labels.get(ub, ub)}",
                (lambda n=n, ua=ua, ub=ub: draw(n, ua, ub))) for n, (ua, ub) in enumerate(pairs)]
    return timelines_html(choices, default=str(len(pairs) - 1))  # the last pair: the steadiest


class HtmlRenderer(Renderer):
    """One self-contained HTML page per result (``.html``, ``.htm``)."""

    name = "html"
    extensions = (".html", ".htm")
    #: The report and the diff draw step timelines: the commands compute them for this format.
    needs_timelines: ClassVar[bool] = True

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import memory_sections, sections

        name = sections.facts_lines(report)[0][1]
        tables = "".join(titled_table(t) for t in sections.all_tables(report))
        memory = memory_sections.hint(report)
        if memory:
            tables += f"<section><h3>Memory</h3><p>{esc(memory)}</p></section>"
        rules = sections.notes(report)
        if rules:
            tables += f"<section><h3>Notes</h3>{bullets(rules)}</section>"
        out.write(page(f"tracekit report: {name}", f"tracekit report: <code>{esc(name)}</code>", [
            ("findings", "Findings", findings_html(report.findings)),
            ("timeline", "Step timeline", report_timelines(report)),
            ("charts", "Charts", charts_html(REPORT_CHARTS, report)),
            ("trace", "Trace", facts_html(report)),
            ("tables", "Tables", tables),
        ], kind="report"))

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        verdict = "".join(cell(p) for p in S.verdict_parts(diff))
        headers, rows = S.quantity_rows(diff)
        top = f'<p class="tk-verdict"><strong>Verdict:</strong> {verdict}</p>'
        top += titled_table(("Per step (median over steps)", headers, rows), status=_status)
        missing = S.unavailable_line(diff)
        if missing:
            top += f'<p class="tk-muted">{esc(missing)}</p>'
        if gate_results:
            top += gates_html(S.gate_rows(gate_results), gate_results)
        details = "".join(titled_table(t, status=_status) for t in S.detail_tables(diff))
        details += method_html(S.method_lines(diff))
        a, b = esc(diff.a.label), esc(diff.b.label)
        out.write(page(f"tracekit diff: {diff.a.label} → {diff.b.label}",
                       f"tracekit diff: <code>{a}</code> → <code>{b}</code>", [
                           ("verdict", "Verdict", top),
                           ("timeline", "Step timelines, A above B", diff_timelines(diff)),
                           ("charts", "Charts", charts_html(DIFF_CHARTS, diff)),
                           ("details", "Details", details),
                       ], kind="diff"))

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render import diff_sections as S

        body = ""
        if result.description:
            body += "".join(f"<p>{esc(line)}</p>" for line in result.description.splitlines())
        body += titled_table(S.check_rows(result), status=_status)
        if result.notes:
            body += bullets(result.notes)
        title = S.check_title(result)
        out.write(page(f"tracekit check: {title}", f"tracekit check: {esc(title)}",
                       [("expectations", "Expectations", body)], kind="check"))

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render import sections

        title, headers, rows = sections.ranks_table(rank_report)
        body = table(headers, rows) if rows else '<p class="tk-none">none</p>'
        if rank_report.slowest:
            body += f"<p>Slowest rank: <code>{esc(rank_report.slowest)}</code></p>"
        out.write(page(f"tracekit report: {title}", f"tracekit report: {esc(title)}",
                       [("ranks", "Ranks", body)], kind="ranks"))

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        from tracekit.render import compile_sections as C

        body = titled_table(C.compare_table(comparison))
        body += f"<section><h3>Verdict</h3>{bullets(C.verdict_lines(comparison))}</section>"
        if gate_results:
            body += gates_html(C.gate_rows(gate_results), gate_results)
        body += method_html(C.method_lines(comparison))
        n = len(comparison.rows)
        out.write(page(f"tracekit compare: {n} traces", f"tracekit compare: {n} traces",
                       [("compare", "Comparison", body)], kind="compare"))
