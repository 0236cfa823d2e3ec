"""The HTML pages as documents (no browser; tests/render/test_html_browser.py opens them in Chromium):
self-contained, escaped, and saying what a capped drawing left out."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import tracekit
from tracekit.render import renderer_for
from tracekit.render.html import HtmlRenderer
from tracekit.render.page import esc, inline_svg

ROOT = Path(__file__).resolve().parents[2]
COLD = ROOT / "sample_traces" / "antipatterns" / "antipatterns_cold-first-step.json.gz"


@pytest.fixture(scope="module")
def report_page(sample) -> str:
    out = io.StringIO()
    HtmlRenderer().render(sample("antipatterns/antipatterns_cold-first-step").report(timelines=True), out)
    return out.getvalue()


class _Refs(HTMLParser):
    """Every URL-bearing attribute and every element of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "srcset", "poster", "data") and value:
                self.refs.append((tag, name, value))


def test_the_page_holds_everything_it_shows(report_page):
    parser = _Refs()
    parser.feed(report_page)
    # Links only within the page (the section links, references between an SVG's own parts).
    assert parser.refs and all(value.startswith("#") for _, _, value in parser.refs), parser.refs[:5]
    assert parser.tags.count("script") == 1 and "link" not in parser.tags and "img" not in parser.tags
    assert not re.search(r"url\((?!#)|@import|https?://(?!www\.w3\.org/)", report_page)
    # The policy allows no source at all but the page's own style and its one script, by hash.
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', report_page).group(1)
    assert policy.startswith("default-src 'none';") and "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]


def test_sections_come_in_the_issue_order(report_page):
    ids = re.findall(r'<section id="([a-z]+)"><h2>', report_page)
    assert ids == ["limit", "findings", "timeline", "charts", "trace", "tables"]
    # One drawing per step: the default (ProfilerStep#3) in the view, steps 0-2 in templates.
    assert re.findall(r'<(div class="tk-view"|template) data-key="(\d)"', report_page) == [
        ('div class="tk-view"', "3"), ("template", "0"), ("template", "1"), ("template", "2")]


def test_esc_makes_text_of_markup_and_quotes():
    assert esc('<script>alert("x")</script> & \'q\'') == \
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;q&#x27;"
    assert esc("bell\x07 \u202eevil") == "bell\\x07 \\u202eevil"  # made visible, as in every format


def test_inline_svg_drops_the_prolog_and_scopes_ids():
    svg = ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE svg>\n<svg><defs><clipPath id="c1"/></defs>'
           '<rect data-id="7" clip-path="url(#c1)"/><use xlink:href="#c1"/><use href="#elsewhere"/></svg>')
    assert inline_svg(svg, "ch0") == ('<svg><defs><clipPath id="ch0-c1"/></defs><rect data-id="7" '
                                      'clip-path="url(#ch0-c1)"/><use xlink:href="#ch0-c1"/>'
                                      '<use href="#elsewhere"/></svg>')


def test_a_capped_step_says_what_was_left_out(monkeypatch):
    """With caps below what the step ran (39 kernels in ProfilerStep#3), the page states the marks
    not drawn, from the analysis' left_out."""
    from tracekit.analyses import timeline

    monkeypatch.setitem(timeline.CAPS, "gpu", 10)
    report = tracekit.open(COLD).report(timelines=True)
    shown = next(s for s in report.timelines.steps if s.number == 3)
    assert shown.left_out.get("kernel", 0) > 0
    out = io.StringIO()
    renderer_for("html").render(report, out)
    view = out.getvalue().split('<div class="tk-view" data-key="3">')[1].split("</div>")[0]
    assert view.count('class="tk-kernel"') <= 10
    note = re.search(r'<g class="tk-left-out".*?</g>', view, re.S).group()
    assert f"{shown.left_out['kernel']:,} kernel" in re.sub(r"<[^>]+>", "", note)
