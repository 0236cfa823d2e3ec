"""A self-contained HTML page and the escaping of everything on it: the shell the ``html`` format
prints documents into.

A page holds everything it shows: its stylesheet and script are inlined from
``tracekit/render/html_assets/`` (package data), pictures are inline SVG. Nothing is fetched: no
CDN, no font, no image by URL; the page's Content-Security-Policy allows no source at all
(``default-src 'none'``) but its own inline style, ``data:`` images and the one script whose SHA-256
it names, so a name that escaped its escaping still could not run or load anything.

Escaping: every piece of text passes through :func:`esc` (:func:`~tracekit.render.text.for_display`,
then HTML's five entities, quotes included, so the same function serves text and attribute values);
:func:`table` routes headers and cells through it, a :class:`~tracekit.render.text.Code` cell
becoming ``<code>``. SVG comes from :mod:`tracekit.render.timeline` and
:mod:`tracekit.render.charts`, which escape their own names; :func:`inline_svg` only drops the XML
prolog and prefixes the SVG's ids so two pictures on one page cannot share one.
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from tracekit.render.text import Code, for_display


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


def none(sentence: str = "none") -> str:
    """What a page shows where there is nothing: ``sentence`` in a muted paragraph."""
    return f'<p class="tk-none">{esc(sentence)}</p>'


def titled(title: str, body: str, level: int = 3) -> str:
    """``body`` in a ``<section>`` under a heading of ``level``."""
    return f"<section><h{level}>{esc(title)}</h{level}>{body}</section>"


def bullets(lines: Iterable[str], cls: str = "tk-notes") -> str:
    """A list of sentences."""
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
