"""The ranks × time picture of the matched collectives (``tracekit report DIR``, on its HTML page):
who arrived when, who waited, who was last.

Contract: :func:`draw` takes a :class:`~tracekit.analyses.skew.Skew` and returns one standalone
``<svg>`` document, or None when no collective matched. One row per rank (lowest first), time on x
on the common clock (the offsets applied, :mod:`tracekit.analyses.skew`), from the first arrival
to the last end of the collectives drawn. Each rank's part of a collective is a bar from its
arrival to its end; the part before the last arriver arrived — the rank's wait — is shaded over it;
the last arriver's bar carries a marker at its arrival. It words and lays out the analysis'
figures; it decides nothing but how many collectives fit (:data:`MAX_INSTANCES` and
:data:`MAX_BARS`, the first ones, and the note says how many were left out).

DOM (read by tests): root ``<svg class="tk-rank-collectives" viewBox="0 0 W H">``;
``g.tk-rank-row`` per rank (``data-rank``) holding its label (``text.tk-lane-label``) and marks,
each with a ``<title>`` (hover text) and ``data-instance``: ``rect.tk-collective`` (``data-kind``,
``data-ts``/``data-dur`` in ns), ``rect.tk-wait`` (``data-wait-ns``), ``path.tk-last`` (the last
arriver's marker); ``g.tk-axis``, ``g.tk-legend``, ``g.tk-left-out`` when collectives were left out.

Escaping and the axis: the step timeline's (:mod:`tracekit.render.timeline`: every name through
:func:`~tracekit.render.text.for_display` then XML's entities; ticks 1-2-5 apart in the unit the
span holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.timeline import _num, _tick_label, _tick_step, _xml, duration

if TYPE_CHECKING:
    from tracekit.analyses.skew import Skew

#: Collectives drawn (the first by arrival): enough for a few steps of a DDP or FSDP run…
MAX_INSTANCES = 400
#: …and at most this many bars in all (128 ranks: the first 156 collectives), so a page stays light.
MAX_BARS = 20_000
WIDTH = 1200
LABEL_WIDTH = 70
RIGHT_MARGIN = 14
TOP = 40          # title and axis above the rows
ROW = 22
BAR = 14
LEGEND = 34
#: Colours: a collective's bar, the wait shaded over it, the last arriver's marker.
COLLECTIVE_COLOUR = "#4e79a7"
WAIT_COLOUR = "#f28e2b"
LAST_COLOUR = "#c0392b"
FONT = 'font-family="ui-sans-serif,system-ui,sans-serif"'


def draw(cross: Skew) -> str | None:
    """The picture (module docstring); None without a matched collective."""
    if cross.instances.height == 0:
        return None
    width = max(1, cross.waits["rank"].n_unique())
    shown = cross.instances.sort("instance").head(max(1, min(MAX_INSTANCES, MAX_BARS // width)))
    kept = set(shown["instance"].to_list())
    waits = cross.waits.filter(cross.waits["instance"].is_in(list(kept))).sort("instance", "rank")
    ranks = sorted(set(waits["rank"].to_list()))
    start = int(waits["arrival_ns"].min())
    end = max(int(waits["end_ns"].max()), start + 1)
    x0, x1 = float(LABEL_WIDTH), float(WIDTH - RIGHT_MARGIN)
    scale = (x1 - x0) / (end - start)

    def x(ns: int) -> float:
        return x0 + (ns - start) * scale

    row_of = {rank: TOP + i * ROW for i, rank in enumerate(ranks)}
    about = {i["instance"]: i for i in shown.iter_rows(named=True)}
    rows: dict[int, list[str]] = {rank: [] for rank in ranks}
    for w in waits.iter_rows(named=True):
        inst = about[w["instance"]]
        y = row_of[w["rank"]] + (ROW - BAR) / 2
        a, b = x(w["arrival_ns"]), x(max(w["end_ns"], w["arrival_ns"]))
        name = f"{inst['kind']} #{inst['instance']}"
        step = "" if inst["step"] is None else f" (step {inst['step']})"
        last = w["rank"] == inst["last_rank"]
        told = (f"rank {w['rank']} · {name}{step}",
                f"arrived {duration(w['arrival_ns'] - inst['first_arrival_ns'])} after the first rank"
                + (", last" if last else f"; waited {duration(w['wait_ns'])} for rank {inst['last_rank']}"),
                f"in the collective {duration(w['end_ns'] - w['arrival_ns'])}")
        hover = "\n".join(_xml(line) for line in told)
        marks = rows[w["rank"]]
        marks.append(f'<rect class="tk-collective" x="{_num(a)}" y="{_num(y)}" width="{_num(max(b - a, 0.6))}" '
                     f'height="{BAR}" fill="{COLLECTIVE_COLOUR}" data-instance="{inst["instance"]}" '
                     f'data-kind="{_xml(inst["kind"])}" data-ts="{w["arrival_ns"]}" '
                     f'data-dur="{w["end_ns"] - w["arrival_ns"]}"><title>{hover}</title></rect>')
        if w["wait_ns"] > 0:
            marks.append(f'<rect class="tk-wait" x="{_num(a)}" y="{_num(y)}" '
                         f'width="{_num(max(x(w["arrival_ns"] + w["wait_ns"]) - a, 0.6))}" height="{BAR}" '
                         f'fill="{WAIT_COLOUR}" fill-opacity="0.75" data-instance="{inst["instance"]}" '
                         f'data-wait-ns="{w["wait_ns"]}"><title>{hover}</title></rect>')
        if last:
            top = row_of[w["rank"]] + 1
            marks.append(f'<path class="tk-last" d="M{_num(a - 4)},{_num(top)}h8l-4,6z" fill="{LAST_COLOUR}" '
                         f'data-instance="{inst["instance"]}" data-rank="{w["rank"]}"><title>{hover}</title></path>')

    height = TOP + len(ranks) * ROW + LEGEND
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="tk-rank-collectives" width="{WIDTH}" '
             f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-label="Collectives per rank over time">',
             f'<text x="8" y="16" {FONT} font-size="13" font-weight="bold">Collectives per rank over time '
             f'(on rank {cross.reference}&apos;s clock)</text>',
             _axis(start, end, x0, x1, TOP - 4, TOP + len(ranks) * ROW)]
    for rank in ranks:
        y = row_of[rank]
        parts.append(f'<g class="tk-rank-row" data-rank="{rank}">'
                     f'<text class="tk-lane-label" x="8" y="{_num(y + ROW / 2 + 4)}" {FONT} font-size="11">'
                     f'rank {rank}</text>{"".join(rows[rank])}</g>')
    legend_y = TOP + len(ranks) * ROW + 18
    parts.append(f'<g class="tk-legend" {FONT} font-size="11">'
                 f'<rect x="{LABEL_WIDTH}" y="{legend_y - 9}" width="14" height="10" fill="{COLLECTIVE_COLOUR}"/>'
                 f'<text x="{LABEL_WIDTH + 18}" y="{legend_y}">in the collective (arrival → end)</text>'
                 f'<rect x="{LABEL_WIDTH + 230}" y="{legend_y - 9}" width="14" height="10" fill="{WAIT_COLOUR}"/>'
                 f'<text x="{LABEL_WIDTH + 248}" y="{legend_y}">waiting for the last arriver</text>'
                 f'<path d="M{LABEL_WIDTH + 446},{legend_y - 9}h8l-4,6z" fill="{LAST_COLOUR}"/>'
                 f'<text x="{LABEL_WIDTH + 458}" y="{legend_y}">last arriver</text></g>')
    left_out = cross.instances.height - shown.height
    if left_out:
        parts.append(f'<g class="tk-left-out"><text x="{LABEL_WIDTH + 560}" y="{legend_y}" {FONT} font-size="11" '
                     f'fill="#555555">the first {shown.height:,} collectives drawn; {left_out:,} more not drawn'
                     '</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _axis(start: int, end: int, x0: float, x1: float, y: float, bottom: float) -> str:
    """Ticks over the rows, labelled from the first arrival (``0 ms``, ``5 ms``, …)."""
    span = end - start
    step = _tick_step(span, x1 - x0)
    out = [f'<g class="tk-axis" {FONT} font-size="10" fill="#555555">']
    t = 0.0
    while t <= span:
        at = x0 + t * (x1 - x0) / span
        out.append(f'<line x1="{_num(at)}" y1="{_num(y)}" x2="{_num(at)}" y2="{_num(bottom)}" stroke="#dddddd"/>')
        if at + 44 <= WIDTH:  # a label that would be cut at the right edge is left out
            out.append(f'<text x="{_num(at + 2)}" y="{_num(y - 2)}">{_xml(_tick_label(t, step, span))}</text>')
        t += step
    out.append("</g>")
    return "".join(out)
