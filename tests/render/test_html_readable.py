"""The step timeline stays readable on real traces, checked in a real headless Chromium
(tests/browser.py): round-trip labels never overlap at any zoom the page offers, a ``with_stack``
trace's CPU lane is folded to its launching depth until expanded, the GPU utilisation strip shows
the step's busy fraction, and the axis is labelled in the unit of the span shown.

Pages are written by the ``tracekit`` command itself. ``train_eager`` is a shipped H200 trace
(ProfilerStep#4: 871 GPU activities, 677 memory round trips of which the timeline keeps 500); the
vLLM decode trace is a real public ``with_stack`` trace (TRACEKIT_REAL_TRACES; skipped without it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracekit.commands import main
from tracekit.analyses import timeline as analysis
from tracekit.render import timeline as drawing

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "sample_traces" / "train_eager.json.gz"
REAL = os.environ.get("TRACEKIT_REAL_TRACES")
VLLM = "Navi-AI-Lab__nvllm__vllm-gb10-flashinfer-cudagraph-decode.json.gz"
#: ProfilerStep#4 of train_eager, by hand from the raw JSON: the union of the kernels, memcpys and
#: memsets whose correlation is that of a cuda_runtime/cuda_driver call starting inside the
#: ProfilerStep#4 span (871 of them) is 15,383.499 µs; the window (the step's CPU span ∪ its GPU
#: work: 5427059758217.118 µs to 5427059826285.921 µs, rounded to ns by the loader) is 68,086,901 ns.
TRAIN_BUSY_NS, TRAIN_WINDOW_NS = 15_383_491, 68_086_901

CTRL = 2


def tracekit(*argv: object) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(a) for a in argv])
    assert exit_.value.code == 0, argv


@pytest.fixture(scope="module")
def train_page(chromium, tmp_path_factory):
    out = tmp_path_factory.mktemp("readable") / "train.html"
    tracekit("report", TRAIN, "-o", out)
    page = chromium.new_page()
    page.open(out.as_uri())
    return page


@pytest.fixture(scope="module")
def vllm_page(chromium, tmp_path_factory):
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES is not set")
    out = tmp_path_factory.mktemp("readable") / "vllm.html"
    tracekit("report", Path(REAL) / VLLM, "-o", out)
    page = chromium.new_page()
    page.open(out.as_uri())
    return page


#: The boxes of the round-trip labels shown, as the browser lays them out.
LABEL_BOXES = """[...document.querySelectorAll('.tk-view svg.tk-timeline text.tk-roundtrip-label')]
  .filter(t => t.getAttribute('display') !== 'none')
  .map(t => { const r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom, t.textContent]; })"""


def _overlapping(boxes: list) -> list:
    return [(a[4], b[4]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def _zoom(page, button: str) -> None:
    page.evaluate(f"document.querySelector('.tk-timelines button[data-zoom=\"{button}\"]').click()")


def test_round_trip_labels_never_overlap_at_any_zoom(train_page):
    arcs = train_page.evaluate("document.querySelectorAll('.tk-view path.tk-roundtrip').length")
    assert arcs == 384  # every round trip of the step, under the cap of 500 drawn
    for zoom in range(8):  # 1x, 2x, … 128x around the middle
        boxes = train_page.evaluate(LABEL_BOXES)
        # From 64x on, one round trip is left in view around the step's middle.
        assert len(boxes) >= (3 if zoom < 6 else 1), zoom
        assert _overlapping(boxes) == [], zoom
        _zoom(train_page, "in")
    # A pan at the deepest zoom, then back to the whole step: still none overlap.
    train_page.evaluate("""(() => { const v = document.querySelector('.tk-view'); const r = v.getBoundingClientRect();
        v.dispatchEvent(new WheelEvent('wheel', {deltaX: 300, clientX: r.left + 500, clientY: r.top + 100,
                                                  bubbles: true, cancelable: true})); })()""")
    assert _overlapping(train_page.evaluate(LABEL_BOXES)) == []
    _zoom(train_page, "reset")
    boxes = train_page.evaluate(LABEL_BOXES)
    assert _overlapping(boxes) == []
    # The hidden labels are counted on the shown ones: every drawn round trip is either shown or counted.
    counted = sum(int(b[4].split(" +")[1].split()[0].replace(",", "")) for b in boxes if " +" in b[4])
    assert len(boxes) + counted == arcs


def test_utilisation_strip_shows_the_steps_gpu_busy(train_page):
    _zoom(train_page, "reset")
    lane = train_page.evaluate("""(() => { const g = document.querySelector('.tk-view g.tk-lane[data-lane="busy:0"]');
        const bars = [...g.querySelectorAll('rect.tk-busy')];
        return [g.getAttribute('data-busy-ns'), g.getAttribute('data-window-ns'),
                bars.reduce((s, r) => s + Number(r.getAttribute('data-busy-ns')), 0), bars.length,
                Math.max(...bars.map(r => r.getBoundingClientRect().height)),
                g.querySelector('rect.tk-lane-bg').getBoundingClientRect().height,
                [...g.closest('svg').querySelectorAll('text.tk-lane-label')].map(t => t.textContent)]; })()""")
    busy, window, summed, bars, tallest, lane_height, labels = lane
    assert (int(busy), int(window), summed) == (TRAIN_BUSY_NS, TRAIN_WINDOW_NS, TRAIN_BUSY_NS)
    # (lane labels are moved into one pinned group by the page's script)
    at = labels.index("GPU 0 utilisation")
    assert labels[at + 1] == "busy 23% of the window"  # 15.38 / 68.09 ms = 22.6 %
    assert 100 < bars <= 600  # one bar per busy bin of the 600
    # A bin busy all the time is nearly the strip's height; the strip is readable, not a hairline.
    assert lane_height >= 24 and tallest <= lane_height
    # The stream lanes under it are as tall as the strip's room.
    gpu = train_page.evaluate("""document.querySelector('.tk-view g.tk-lane[data-lane="gpu:0:7"] rect.tk-lane-bg')
        .getBoundingClientRect().height""")
    assert gpu >= 24


def test_with_stack_cpu_lane_is_folded_until_expanded(vllm_page):
    def lane() -> list:
        return vllm_page.evaluate("""(() => { const g = document.querySelector('.tk-view g.tk-lane[data-lane="cpu:145"]');
            return [g.querySelector('rect.tk-lane-bg').getBoundingClientRect().height, g.getAttribute('data-rows'),
                    g.getAttribute('data-rows-full'), g.querySelectorAll('rect.tk-op').length,
                    g.querySelectorAll('rect.tk-launch').length,
                    g.closest('svg').getAttribute('data-cpu-depth')]; })()""")

    folded = lane()
    # Step #10's main thread: the step annotation, the top ops that launch GPU work, the launch
    # calls: 3 rows of the 34 its Python frames and nested ATen ops take.
    assert folded[1:3] == ["3", "34"] and folded[5] == "launch"
    assert folded[0] <= (analysis.FOLD_ANNOTATIONS + 3) * drawing.ROW
    vllm_page.evaluate("document.querySelector('.tk-timelines button.tk-depth').click()")
    full = lane()
    assert full[1:3] == ["34", "34"] and full[5] == "full"
    assert full[0] > 5 * folded[0]
    assert full[3] > folded[3] and full[4] == folded[4]  # every launch call is in both
    assert vllm_page.evaluate("document.querySelector('.tk-timelines button.tk-depth').getAttribute('aria-pressed')") == "true"
    vllm_page.evaluate("document.querySelector('.tk-timelines button.tk-depth').click()")
    assert lane() == folded
    assert vllm_page.errors() == []


def test_axis_is_labelled_in_the_unit_of_the_span_shown(vllm_page):
    """Step #10's window is 151.55 ms: ticks in ms; zoomed in to 1/256 of it (0.59 ms), in µs."""
    _zoom(vllm_page, "reset")
    ticks = "[...document.querySelectorAll('.tk-view svg.tk-timeline {} text[text-anchor=middle]')].map(t => t.textContent)"
    shown = vllm_page.evaluate(ticks.format("g.tk-axis"))
    assert shown[:3] == ["0 ms", "20 ms", "40 ms"] and all(t.endswith(" ms") for t in shown)
    for _ in range(8):
        _zoom(vllm_page, "in")
    zoomed = vllm_page.evaluate(ticks.format("g.tk-zoom-axis"))
    assert zoomed and all(t.endswith(" µs") for t in zoomed), zoomed
    _zoom(vllm_page, "reset")


@pytest.mark.parametrize(("span", "step", "ns", "label"), [
    (200e6, 20e6, 140e6, "140 ms"), (2.412e9, 200e6, 1.4e9, "1.4 s"), (900e3, 100e3, 300e3, "300 µs"),
    (3.1e6, 500e3, 1.5e6, "1.5 ms"), (800.0, 100.0, 300.0, "300 ns")])
def test_tick_labels_use_the_spans_unit(span, step, ns, label):
    assert drawing._tick_label(ns, step, span) == label


def test_rank_directory_page_draws_step_time_per_rank(chromium, tmp_path):
    """The eight DLRM ranks (one ProfilerStep each; rank 1's is the longest, 19,901 µs, by the
    table's figures from each file's ProfilerStep#12 dur, but rank 1 waited: the others waited for
    rank 7, 12,509 µs): one bar per rank, rank 7's red."""
    if not REAL:
        pytest.skip("TRACEKIT_REAL_TRACES is not set")
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for n in range(8):
        name = f"facebookresearch__param__dlrm-8rank-v100-nccl-rank{n}.json.gz"
        (ranks / name).write_bytes((Path(REAL) / name).read_bytes())
    tracekit("report", ranks, "--format", "html", "-o", tmp_path / "ranks.html")
    page = chromium.new_page()
    page.open((tmp_path / "ranks.html").as_uri())
    bars = page.evaluate("""[...document.querySelectorAll('figure[data-chart="rank_step_times"] g.mark-rect path')]
        .map(p => [p.getAttribute('aria-label') || '', p.getAttribute('fill')])""")
    # Vega draws the ticks as rects too (#1d232b): the bars are the others.
    bars = [b for b in bars if b[1] != "#1d232b"]
    assert len(bars) == 8
    red = [label for label, fill in bars if fill == "#c0392b"]
    assert len(red) == 1 and "rank 7: mean step 12,509.0 µs" in red[0]
    axis = page.evaluate("""[...document.querySelectorAll('figure[data-chart="rank_step_times"] text')]
        .map(t => t.textContent)""")
    assert "step time (ms)" in axis and "rank 7 (waited for)" in axis and "rank 1" in axis
    assert page.errors() == []
