"""Results in a notebook: a one-line ``repr`` and a compact HTML summary (``_repr_html_``) of a
report and a diff of shipped H200 traces, checked as well-formed HTML holding the numbers counted
by hand in the raw trace, and in a real headless Chromium as a notebook shows it (the fragment
inside a page of its own: no console error, nothing styled outside it).

Hand counts on sample_traces/mlp_eager.json.gz (``gzip -dc … | python -c 'json.load …'``):
ProfilerStep#2..#4 last 1,497.108, 1,513.159 and 1,273.576 µs (``dur`` of the ``ProfilerStep#N``
events; the median, 1.50 ms, is the report's step time); 15 kernels, 5 per step: 6 of
``nvjet_sm90_tst_256x128_64x4…`` (335.84 µs in all), 3 of ``nvjet_sm90_tst_192x128_64x5…``
(153.792 µs), 6 ``vectorized_elementwise_kernel`` (199.936 µs), and 6 ``Memset (Device)`` (4.32
µs). The dispatch share, 76%, is (1,111,890 + 1,176,280 + 971,112) ns of dispatch over the three
steps' 4,283,843 ns of wall (the decomposition's frames, summed by hand). The diff's GPU time per
step is 231,104 ns → 205,440 ns (the README's session): -11.1%.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]

#: Elements HTML writes without an end tag, and SVG's self-closed ones (``<rect/>``).
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _WellFormed(HTMLParser):
    """Every start tag closed by its own end tag, in order (void and self-closed elements aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.problems: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}")
        else:
            self.open.pop()


def _checked(fragment: str) -> _WellFormed:
    parser = _WellFormed()
    parser.feed(fragment)
    parser.close()
    assert parser.problems == [] and parser.open == [], (parser.problems[:3], parser.open[-3:])
    return parser


def _text(fragment: str) -> str:
    """The fragment's text, tags and the stylesheet dropped, entities as written."""
    return re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", fragment, flags=re.S))


@pytest.fixture(scope="module")
def eager(sample):
    return sample("mlp_eager")


@pytest.fixture(scope="module")
def diff(eager):
    return eager.diff(ROOT / "sample_traces" / "mlp_compile.json.gz")


def test_a_report_repr_is_one_line_of_what_matters(eager):
    text = repr(eager.report())
    assert text == ("<Report mlp_eager.json.gz: 3 steps, median 1.50 ms, limit dispatch 76%, "
                    "1 finding: unfused_pointwise>")
    assert len(text) < 200
    assert repr(eager.report(step=4)) == ("<Report mlp_eager.json.gz: step 4, 1.27 ms, limit dispatch 76%, "
                                          "1 finding: unfused_pointwise>")


def test_a_diff_repr_is_one_line_of_what_changed(diff):
    text = repr(diff)
    assert text == ("<Diff mlp_eager.json.gz → mlp_compile.json.gz: 3 step pairs, GPU time -11.1%, "
                    "8 changes: fusion, gemms_unchanged, +6>")
    assert len(text) < 200


def test_a_diff_holds_its_per_step_table_as_a_frame(diff):
    frame = diff.per_step
    assert frame.columns == ["key", "label", "unit", "a", "b", "delta", "delta_pct", "noise", "within_noise",
                             "direction", "shape"]
    assert frame.height == len(diff.quantities) + len(diff.classes)  # one shape: no per-shape rows
    assert frame["shape"].null_count() == frame.height
    gpu = frame.row(0, named=True)
    assert (gpu["key"], gpu["a"], gpu["b"], gpu["delta"], gpu["delta_pct"], gpu["direction"]) == (
        "gpu_time", 231104.0, 205440.0, -25664.0, -11.1, "down")
    assert frame.filter(key="class:gemm")["direction"].item() == "within noise"


def test_timelines_repr_briefly(eager):
    timelines = eager.report(timelines=True).timelines
    assert repr(timelines) == "<Timelines: 3 steps (2, 3, 4), shown first 4>"
    assert repr(timelines[2]) == ("<StepTimeline ProfilerStep#4: window 1.274 ms, 39 CPU marks, "
                                  "7 GPU activities, 7 idle gaps>")


def test_the_report_html_is_a_compact_summary_of_its_numbers(eager):
    fragment = eager.report()._repr_html_()
    parser = _checked(fragment)
    assert fragment.startswith('<div class="tk-nb tk-report"><style>')
    assert "script" not in parser.tags and " id=" not in fragment  # nothing to run, no id to clash
    text = _text(fragment)
    assert "tracekit report:" in text and "mlp_eager.json.gz" in text
    # What limits it, then the one finding, then the steps, classes and kernels tables.
    assert re.findall(r'<section data-section="(\w+)"><h2>', fragment) == ["limit", "findings", "tables"]
    assert "dispatch-bound (overhead): 76.1% of the wall" in text
    assert fragment.count('class="tk-finding ') == 1 and 'data-rule="unfused_pointwise"' in fragment
    assert "50,331,648 B/step" in text  # the gelu output, 64 × 128 × 3072 bf16
    for wall in ("1,497.1 µs", "1,513.2 µs", "1,273.6 µs"):
        assert wall in text
    assert re.search(r"gemm\s+9\s+489\.6 µs", text)  # 6 + 3 GEMMs, 335.84 + 153.792 µs
    assert re.search(r"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT\s+cublasLt\s+6\s+335\.8 µs", text)
    assert re.search(r"Memset \(Device\)\s+cuda_runtime\s+6\s+4\.3 µs", text)
    # Not the page: no timeline without timelines, no charts, no notes.
    assert "<svg" not in fragment and "Notes" not in text


def test_the_stylesheet_styles_only_the_fragment(eager):
    css = re.search(r"<style>(.*?)</style>", eager.report()._repr_html_(), re.S).group(1)
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{", rules) for s in block.split(",")]
    assert selectors and all(s.startswith(".tk-nb") for s in selectors), selectors


def test_a_report_with_timelines_shows_its_default_step(eager):
    fragment = eager.report(timelines=True)._repr_html_()
    _checked(fragment)
    assert re.findall(r'<section data-section="(\w+)"><h2>', fragment) == ["limit", "findings", "timeline", "tables"]
    assert fragment.count("<svg") == 1 and 'data-step="4"' in fragment
    assert fragment.count('class="tk-kernel"') == 5  # ProfilerStep#4's five kernels
    assert "<select" not in fragment and "<template" not in fragment  # no script to switch them


def test_long_tables_and_many_findings_are_cut_naming_the_frame(sample):
    report = sample("antipatterns/antipatterns_cold-first-step").report()
    text = _text(report._repr_html_())
    kernels = report.kernels.height
    assert kernels > 10
    assert f"first 10 of {kernels} rows (all: Report.kernels)" in text


def test_the_diff_html_is_its_verdict(diff):
    fragment = diff._repr_html_()
    _checked(fragment)
    assert fragment.startswith('<div class="tk-nb tk-diff">')
    text = _text(fragment)
    assert "Fused gelu + mul (2 kernels) into one Inductor Triton kernel" in text
    assert re.search(r"GPU time \(busy\)\s+231\.1 µs\s+205\.4 µs\s+-25\.7 µs \(-11\.1%\)", text)
    assert re.search(r"new in B\s+info\s+compile_preop_tax", text)
    assert re.search(r"resolved in B\s+warning\s+unfused_pointwise", text)
    assert "<svg" not in fragment  # the timelines and the chart are the page's


def test_tracekit_open_alone_gives_results_their_html():
    """In a fresh interpreter (a notebook's kernel) nothing but ``tracekit.open`` is imported: the
    display hook is registered all the same."""
    code = ("import tracekit\nr = tracekit.open('sample_traces/mlp_eager.json.gz').report()\n"
            "print(r._repr_html_()[:31])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '<div class="tk-nb tk-report"><s'


def test_without_the_renderers_a_result_has_no_html(eager, monkeypatch):
    from tracekit.results import display

    monkeypatch.setattr(display, "_html", None)
    assert eager.report()._repr_html_() is None  # the notebook then shows the short repr


def test_the_fragments_render_in_chromium_as_a_notebook_shows_them(chromium, eager, diff, tmp_path):
    # As an output cell: the fragments inside a page that is not theirs, beside an element of its own.
    page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>notebook</title></head><body>'
            '<h2 class="outside">a notebook heading</h2>'
            f'<div class="cell">{eager.report(timelines=True)._repr_html_()}</div>'
            f'<div class="cell">{diff._repr_html_()}</div></body></html>')
    path = tmp_path / "notebook.html"
    path.write_text(page, encoding="utf-8")
    tab = chromium.new_page()
    tab.open(path.as_uri())
    assert tab.errors() == []
    counts = tab.evaluate("""[document.querySelectorAll('.tk-nb').length,
        document.querySelectorAll('.tk-report .tk-finding').length,
        document.querySelectorAll('.tk-report table.tk-table').length,
        document.querySelectorAll('.tk-report svg.tk-timeline rect.tk-kernel').length,
        document.querySelectorAll('.tk-diff .tk-verdict').length,
        document.querySelectorAll('.tk-diff table.tk-table').length]""")
    assert counts == [2, 1, 3, 5, 1, 2]
    # The fragment's look is its own: the notebook's heading keeps the browser's 24 px, the
    # fragment's headings are 14 px, its finding card has its border.
    sizes = tab.evaluate("""[getComputedStyle(document.querySelector('h2.outside')).fontSize,
        getComputedStyle(document.querySelector('.tk-nb h2')).fontSize,
        getComputedStyle(document.querySelector('.tk-nb .tk-finding')).borderLeftWidth]""")
    assert sizes == ["24px", "14px", "5px"]
    # The timeline is drawn with a size (not collapsed) inside its cell.
    width = tab.evaluate("document.querySelector('.tk-nb svg.tk-timeline').getBoundingClientRect().width")
    assert width > 600
