"""The HTML pages in a real headless Chromium (tests/browser.py): the report and the diff of shipped
H200 traces, the check, ranks and compare pages, and a trace whose names are hostile HTML.

Every page is written by the ``tracekit`` command itself (``-o FILE.html``), opened from
``file://``, and read from the DOM: no console error, uncaught exception or error log entry (a
refused fetch or a Content-Security-Policy violation would be one), the timeline and the charts are
there, the default step's timeline holds as many kernel marks as that step ran (counted by hand in
the raw trace JSON), zoom and step selection change what is shown, and a screenshot is a PNG with
something drawn on it. Without a Chromium binary these tests skip and say why; ``.ci/run``
installs Debian's ``chromium`` so CI runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser import png_colours
from factory import copy_as_rank, make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.commands import main
from tracekit.render.text import for_display

#: Left out by --fast (tests/conftest.py): a real headless Chromium.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
#: ProfilerStep#0 is the cold first step (63 kernels); #1..#3 run 39 each; the report's default
#: step is the last, #3. Counted by hand in the raw JSON: the events of cat "kernel" whose
#: args.correlation is that of a cuda_runtime/cuda_driver event starting inside the
#: ProfilerStep#N span (gzip -dc FILE | python -c 'json.load …'), which gives 63, 39, 39, 39.
COLD = SAMPLES / "antipatterns" / "antipatterns_cold-first-step.json.gz"
COLD_KERNELS = {0: 63, 1: 39, 2: 39, 3: 39}
#: A diff: an unfused pointwise chain (66 kernels in each of ProfilerStep#2..#4, by the same count
#: in the raw JSON) against the fused one (51 in each).
UNFUSED = SAMPLES / "antipatterns" / "antipatterns_pointwise-unfused.json.gz"
FUSED = SAMPLES / "antipatterns" / "antipatterns_pointwise-fused.json.gz"
UNFUSED_KERNELS, FUSED_KERNELS = 66, 51

#: Names that would be markup, script or Markdown if a page wrote them raw.
HOSTILE = ['<script>alert("k")</script>', "<img src=x onerror=alert(2)>", "q\"uo'te & <b>bold</b>",
           "</svg><script>alert(3)</script>", "[md](http://evil.example) **x** `c` | # h"]


#: Input.dispatchMouseEvent modifier bits.
CTRL, SHIFT = 2, 8


def tracekit(*argv: object) -> None:
    """``tracekit ARGV`` through the real entry point (it exits 0 on success)."""
    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in argv])
    assert exit_.value.code == 0, argv


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pages")
    tracekit("report", COLD, "-o", root / "report.html")
    tracekit("diff", UNFUSED, FUSED, "--fail-if", "kernels>+0", "-o", root / "diff.html")  # 66 → 51: passes
    hostile = write_trace(root / "hostile.json", _hostile_events())
    tracekit("report", hostile, "-o", root / "hostile.html")
    tracekit("diff", hostile, COLD, "-o", root / "hostile-diff.html")
    expect = root / "expect.toml"
    expect.write_text('description = "kernels of the MLP"\n[per_step]\nkernels_min = 1\n')
    tracekit("check", SAMPLES / "mlp_eager.json.gz", "--expect", expect, "-o", root / "check.html")
    tracekit("compare", SAMPLES / "mlp_eager.json.gz", SAMPLES / "mlp_compile.json.gz", "-o", root / "compare.html")
    ranks = root / "ranks"
    ranks.mkdir()
    for n, name in enumerate(("mlp_eager", "mlp_compile")):
        copy_as_rank(SAMPLES / f"{name}.json.gz", ranks / f"rank{n}.json.gz", n, 2)
    tracekit("report", ranks, "-o", root / "ranks.html")
    return {p.stem: p for p in root.glob("*.html")}


def _hostile_events() -> list[dict]:
    events, t = [], 1.0
    for n, name in enumerate(HOSTILE, start=1):
        events += [make_op(name, t, 8), make_launch("cudaLaunchKernel", t + 1, 1, n), make_kernel(name, t + 3, 2, n)]
        t += 10
    return [make_step(1, 0.0, t + 1), *events]


def _open(chromium, path: Path):
    page = chromium.new_page()
    page.open(path.as_uri())
    return page


def _view_steps(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('#timeline .tk-view svg.tk-timeline')]"
                         ".map(s => s.getAttribute('data-step'))")


def _kernels(page) -> list[int]:
    return page.evaluate("[...document.querySelectorAll('#timeline .tk-view svg.tk-timeline')]"
                         ".map(s => s.querySelectorAll('rect.tk-kernel').length)")


def _view_box(page) -> list[float]:
    return [float(v) for v in page.evaluate(
        "document.querySelector('#timeline .tk-view svg.tk-timeline').getAttribute('viewBox')").split()]


def _centre(page, selector: str) -> tuple[float, float]:
    box = page.evaluate(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
                        " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    return box[0], box[1]


def test_report_page(chromium, pages, tmp_path):
    page = _open(chromium, pages["report"])
    assert page.errors() == []
    # The findings first, then the timeline, the charts, the trace's facts and the tables.
    assert page.evaluate("[...document.querySelectorAll('main > section')].map(s => s.id)") == [
        "limit", "findings", "timeline", "charts", "trace", "tables"]
    assert page.evaluate("document.querySelectorAll('#findings article.tk-finding').length") >= 1
    # The default step (the last) is shown, with one mark per kernel it ran; the others wait in templates.
    assert _view_steps(page) == ["3"]
    assert _kernels(page) == [COLD_KERNELS[3]]
    assert page.evaluate("document.querySelector('select.tk-step-select').value") == "3"
    assert page.evaluate("[...document.querySelectorAll('select.tk-step-select option')].map(o => o.value)") == [
        "3", "0", "1", "2"]
    charts = page.evaluate("[...document.querySelectorAll('figure.tk-chart')]"
                           ".map(f => [f.dataset.chart, f.querySelectorAll('svg').length > 0])")
    assert ["gpu_time_by_class", True] in charts and ["roofline", True] in charts
    # Tables follow: the Markdown report's, e.g. Steps with ProfilerStep#0's 63 kernels.
    assert page.evaluate("[...document.querySelectorAll('#tables h3')].map(h => h.textContent)"
                         ".some(t => t.startsWith('Steps'))")
    shot = page.screenshot(tmp_path / "report.png")
    width, height, colours = png_colours(shot)
    assert (width, height) == (chromium.width, chromium.height) and colours >= 16


def test_step_selection_switches_the_shown_step(chromium, pages):
    page = _open(chromium, pages["report"])
    select = "document.querySelector('select.tk-step-select')"
    page.evaluate(f"{select}.value = '0'; {select}.dispatchEvent(new Event('change'))")
    assert _view_steps(page) == ["0"] and _kernels(page) == [COLD_KERNELS[0]]
    page.evaluate(f"{select}.value = '3'; {select}.dispatchEvent(new Event('change'))")
    assert _view_steps(page) == ["3"] and _kernels(page) == [COLD_KERNELS[3]]
    # Step 0's drawing went back to a template, not lost: choosing it again shows it again.
    page.evaluate(f"{select}.value = '0'; {select}.dispatchEvent(new Event('change'))")
    assert _view_steps(page) == ["0"] and _kernels(page) == [COLD_KERNELS[0]]
    assert page.errors() == []


def test_zoom_rewrites_the_view_box_x_range(chromium, pages):
    page = _open(chromium, pages["report"])
    x0, y0, w0, h0 = _view_box(page)
    labels = ("[...document.querySelectorAll('#timeline .tk-view text.tk-lane-label')]"
              ".map(t => Math.round(t.getBoundingClientRect().left))")
    before = page.evaluate(labels)
    assert len(before) >= 2
    x, y = _centre(page, "button[data-zoom='in']")  # a real click on the + button
    page.mouse("mousePressed", x, y, button="left", clickCount=1)
    page.mouse("mouseReleased", x, y, button="left", clickCount=1)
    x1, y1, w1, h1 = _view_box(page)
    assert (y1, h1) == (y0, h0) and w1 == pytest.approx(w0 / 2) and x0 < x1 < x0 + w0 / 2 + 1e-6
    # The lane labels stay where they were; the time axis is redrawn for the window shown.
    assert page.evaluate(labels) == before
    ticks = page.evaluate("[...document.querySelectorAll('#timeline .tk-view g.tk-zoom-axis text')]"
                          ".map(t => t.textContent)")
    assert len(ticks) >= 2 and all(t.endswith(("ms", "µs", "ns")) for t in ticks)
    # Ctrl + wheel over the drawing zooms in further, around the pointer; a plain wheel leaves the
    # drawing alone (it scrolls the page); shift + wheel pans.
    cx, cy = _centre(page, "#timeline .tk-view svg.tk-timeline")
    page.mouse("mouseWheel", cx, cy, deltaX=0, deltaY=-120, modifiers=CTRL)
    x2, _, w2, h2 = _view_box(page)
    assert w2 < w1 and h2 == h0
    page.mouse("mouseWheel", cx, cy, deltaX=0, deltaY=-120)
    assert _view_box(page) == [x2, y0, w2, h0]
    cx, cy = _centre(page, "#timeline .tk-view svg.tk-timeline")  # the page may have scrolled
    page.mouse("mouseWheel", cx, cy, deltaX=0, deltaY=120, modifiers=SHIFT)
    x2b, _, w2b, _ = _view_box(page)
    assert x2b > x2 and w2b == pytest.approx(w2)
    x2 = x2b
    # A drag to the left pans to later times, keeping the width.
    page.mouse("mousePressed", cx, cy, button="left", clickCount=1)
    page.mouse("mouseMoved", cx - 200, cy, button="left")
    page.mouse("mouseReleased", cx - 200, cy, button="left", clickCount=1)
    x3, _, w3, _ = _view_box(page)
    assert x3 > x2 and w3 == pytest.approx(w2)
    # Reset shows the whole step again.
    x, y = _centre(page, "button[data-zoom='reset']")
    page.mouse("mousePressed", x, y, button="left", clickCount=1)
    page.mouse("mouseReleased", x, y, button="left", clickCount=1)
    assert _view_box(page) == pytest.approx([x0, y0, w0, h0])
    assert page.errors() == []


def test_hover_shows_the_mark_details(chromium, pages):
    page = _open(chromium, pages["report"])
    selector = "#timeline .tk-view rect.tk-kernel[data-class='gemm']"
    title = page.evaluate(f"document.querySelector({selector!r}).querySelector('title').textContent")
    page.evaluate(f"document.querySelector({selector!r}).scrollIntoView({{block: 'center'}})")
    x, y = _centre(page, selector)
    page.mouse("mouseMoved", x, y)
    tip = page.evaluate("[getComputedStyle(document.getElementById('tk-tip')).display,"
                        " document.getElementById('tk-tip').textContent]")
    assert title and tip == ["block", title]
    assert page.errors() == []


def test_diff_page(chromium, pages, tmp_path):
    page = _open(chromium, pages["diff"])
    assert page.errors() == []
    assert page.evaluate("[...document.querySelectorAll('main > section')].map(s => s.id)") == [
        "verdict", "timeline", "charts", "details"]
    assert page.evaluate("document.querySelector('.tk-verdict').textContent").startswith("Verdict:")
    assert page.evaluate("[...document.querySelectorAll('#verdict h3')].map(h => h.textContent)")[1].endswith(
        ": all pass")
    # The last pair of aligned steps by default: A's ProfilerStep#4 above B's, each with its kernels.
    assert _view_steps(page) == ["4", "4"] and _kernels(page) == [UNFUSED_KERNELS, FUSED_KERNELS]
    tops = page.evaluate("[...document.querySelectorAll('#timeline .tk-view svg.tk-timeline')]"
                         ".map(s => s.getBoundingClientRect().top)")
    assert tops[0] < tops[1]
    # One time scale: the faster B is drawn narrower than A (its step is shorter).
    widths = page.evaluate("[...document.querySelectorAll('#timeline .tk-view svg.tk-timeline')]"
                           ".map(s => Number(s.getAttribute('width')))")
    assert widths[0] >= widths[1]
    assert page.evaluate("document.querySelectorAll(\"figure.tk-chart[data-chart='class_time_a_vs_b'] svg\").length") == 1
    select = "document.querySelector('select.tk-step-select')"
    page.evaluate(f"{select}.value = '0'; {select}.dispatchEvent(new Event('change'))")
    assert _view_steps(page) == ["2", "2"] and _kernels(page) == [UNFUSED_KERNELS, FUSED_KERNELS]
    assert page.errors() == []
    _, _, colours = png_colours(page.screenshot(tmp_path / "diff.png"))
    assert colours >= 16


@pytest.mark.parametrize("name, heading", [("check", "tracekit check: mlp_eager.json.gz: 1 of 1 expectations met"),
                                           ("compare", "tracekit compare: 2 traces"),
                                           ("ranks", "tracekit report: Ranks in")])
def test_other_pages(chromium, pages, name, heading):
    page = _open(chromium, pages[name])
    assert page.errors() == []
    assert page.evaluate("document.querySelector('h1').textContent").startswith(heading)
    assert page.evaluate("document.querySelectorAll('table.tk-table tbody tr').length") >= 1


@pytest.mark.parametrize("name", ["hostile", "hostile-diff"])
def test_hostile_names_render_as_text(chromium, pages, name):
    page = _open(chromium, pages[name])
    assert page.errors() == [] and page.dialogs() == []
    # Our one script, no element made from a name, every name shown literally.
    assert page.evaluate("document.scripts.length") == 1
    assert page.evaluate("document.querySelectorAll('img, b, a[href^=\"http\"], iframe, object').length") == 0
    text = page.evaluate("document.body.textContent")
    for hostile in HOSTILE:
        assert for_display(hostile) in text, hostile
    if name == "hostile":  # the kernel marks' hover text names them too
        titles = page.evaluate("[...document.querySelectorAll('#timeline rect.tk-kernel title')]"
                               ".map(t => t.textContent).join('\\n')")
        for hostile in HOSTILE:
            assert for_display(hostile) in titles, hostile
