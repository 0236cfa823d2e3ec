"""Every renderer over an empty trace, a CPU-only trace and a small GPU trace; JSON contract;
Markdown escaping; CLI behaviour for output files and bad input."""

from __future__ import annotations

import io
import json
from html import escape as html_escape

import pytest

from factory import make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.results import report as report_mod
from tracekit.analyses import pipeline
from tracekit.commands import main
from tracekit.load import load
from tracekit.classify.names import short_kernel_name
from tracekit.render import FORMATS, renderer_for
from tracekit.render.gfm import md_escape


def render_report(report, fmt, out):
    renderer_for(fmt).render(report, out)


def _cpu_only(tmp_path):
    events = [make_step(1, 0.0, 50), make_op("aten::add", 1, 10), make_op("aten::view", 20, 2)]
    return write_trace(tmp_path / "cpu.json", events, gpu=False)


def _empty(tmp_path):
    return write_trace(tmp_path / "empty.json", [], gpu=False)


def _gpu(tmp_path):
    events = [make_step(1, 0.0, 50), make_op("aten::mul", 1, 10),
              make_launch("cudaLaunchKernel", 2, 2, 9),
              make_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)", 5, 3, 9)]
    return write_trace(tmp_path / "gpu.json.gz", events, gz=True)


#: What each shape's report must show, per format: (term text, Markdown text, JSON check).
SHAPE_CONTENT = {
    "_empty": ("tracekit report: empty.json", "Steps: none", "## Steps\n\n_none_",
               lambda d: d["trace"]["path"].endswith("empty.json") and d["steps"] == [] and d["kernels"] == []),
    "_cpu_only": ("tracekit report: cpu.json", "aten::add", "| aten::add | 1 | 10.0 µs |",
                  lambda d: [(o["name"], o["cpu_ns"]) for o in d["zero_kernel_ops"]] == [("aten::add", 10_000),
                                                                                      ("aten::view", 2_000)]),
    "_gpu": ("tracekit report: gpu.json.gz", "vectorized_elementwise_kernel<4, MulFunctor>",
             "| elementwise | vectorized\\_elementwise\\_kernel&lt;4, MulFunctor&gt; | aten | 1 | 3.0 µs | 3.0 µs |",
             lambda d: [(k["class"], k["total_ns"], k["decoded"]["functor"]) for k in d["kernels"]] == [
                 ("elementwise", 3_000, "MulFunctor")]),
}


@pytest.mark.parametrize("make", [_empty, _cpu_only, _gpu])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_renderer_on_every_shape(tmp_path, make, fmt):
    report = report_mod.build(pipeline.run(load(make(tmp_path))))
    out = io.StringIO()
    render_report(report, fmt, out)
    text = out.getvalue()
    assert text.strip()
    title, term_text, md_text, json_check = SHAPE_CONTENT[make.__name__]
    if fmt == "json":
        data = json.loads(text)
        assert data["schema"] == "tracekit.report/1"
        assert {"steps", "kernels", "zero_kernel_ops", "paths", "compile_preops", "trace"} <= set(data)
        assert json_check(data)
    elif fmt == "md":
        assert text.startswith("# " + md_escape(title)) and md_text in text
    elif fmt == "svg":  # one picture, XML-valid; tests/render/test_svg.py checks the pictures themselves
        import xml.etree.ElementTree as ET

        root = ET.fromstring(text)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        # built without timelines: the class chart for the GPU trace, else a sentence saying nothing was drawn
        assert ("GPU time by kernel class per step" in text) if make is _gpu else ("Nothing to draw" in text)
    elif fmt == "html":  # tests/render/test_html_browser.py reads pages in a browser
        shown = {"_empty": '<h3>Steps</h3><p class="tk-none">none</p>', "_cpu_only": "<td>aten::add</td><td>1</td>",
                 "_gpu": "<td>vectorized_elementwise_kernel&lt;4, MulFunctor&gt;</td>"}[make.__name__]
        assert text.startswith("<!DOCTYPE html>") and f"<title>{html_escape(title)}</title>" in text and shown in text
    else:
        assert text.startswith(title) and term_text in text


# --- the registry -----------------------------------------------------------------------------

def test_formats_come_from_the_registry():
    from tracekit.render import RENDERERS
    from tracekit.render.base import Renderer

    assert FORMATS[:4] == tuple(RENDERERS)[:4] == ("term", "md", "json", "html")
    for name, renderer in RENDERERS.items():
        assert isinstance(renderer, Renderer) and renderer.name == name and renderer_for(name) is renderer


@pytest.mark.parametrize("path, explicit, fmt", [
    ("r.md", None, "md"), ("R.MARKDOWN", None, "md"), ("out/r.json", None, "json"), ("r.txt", None, "term"),
    ("r.html", None, "html"), ("R.HTM", None, "html"), ("r.pdf", "md", "md"), ("out", None, "term"),
    (None, None, "term"), ("r.md", "json", "json"), (None, "md", "md"),
])
def test_format_for_path(path, explicit, fmt):
    from tracekit.render import format_for_path

    assert format_for_path(path, explicit) == fmt


def test_format_for_an_extension_no_format_writes_is_an_error():
    from tracekit.errors import UsageError
    from tracekit.render import format_for_path

    with pytest.raises(UsageError, match=r"writes no \.pdf file"):
        format_for_path("r.pdf", None)


def test_unknown_format_is_a_usage_error():
    from tracekit.errors import UsageError

    with pytest.raises(UsageError, match="unknown format 'pdf' \\(choose from term, md, json, html"):
        renderer_for("pdf")


def test_a_new_format_plugs_in_with_one_registry_entry(monkeypatch):
    from tracekit import render
    from tracekit.render.markdown import MarkdownRenderer

    class Rst(MarkdownRenderer):  # a stand-in: any Renderer with a name and extensions
        name = "rst"
        extensions = (".rst", ".rest")

    monkeypatch.setitem(render.RENDERERS, "rst", Rst())
    assert render.format_for_path("page.REST", None) == "rst"
    assert render.renderer_for("rst").name == "rst"


def test_a_renderer_must_cover_every_result_kind():
    from tracekit.render.base import Renderer

    class ReportOnly(Renderer):
        name, extensions = "partial", (".p",)

        def report(self, report, out, *, color=False, width=None):
            out.write("x")

    with pytest.raises(TypeError, match="abstract"):
        ReportOnly()  # type: ignore[abstract]


def test_idle_by_cause_is_data_the_renderers_only_word(sample):
    from tracekit.analyses.launch_gaps import CAUSES

    report = sample("mlp_eager", execution_trace=None).report()
    frame = report.launch_gaps.idle_by_cause
    gaps = report.launch_gaps.gaps
    assert sorted(frame["cause"].to_list()) == sorted(CAUSES)
    assert frame["dur_ns"].sum() == gaps["dur_ns"].sum() and frame["gaps"].sum() == gaps.height
    occurred = frame.filter(frame["gaps"] > 0)
    assert 2 <= occurred.height < len(CAUSES)  # the table shows some causes, the JSON every one
    assert occurred["dur_ns"].to_list() == sorted(occurred["dur_ns"].to_list(), reverse=True)
    md, js = io.StringIO(), io.StringIO()
    render_report(report, "md", md)
    render_report(report, "json", js)
    from tracekit.render.text import us

    table = md.getvalue().split("## GPU idle gaps by cause (")[1].split("\n\n")[1].splitlines()[2:]
    assert table == [f"| {md_escape(r['cause'])} | {r['gaps']} | {us(r['dur_ns'])} |"
                     for r in occurred.iter_rows(named=True)]
    data = json.loads(js.getvalue())["launch_gaps"]
    assert data["idle_by_cause_ns"] == dict(zip(frame["cause"], frame["dur_ns"]))
    assert set(data["idle_by_cause_ns"]) == set(CAUSES)
    assert data["idle_by_cause"] == frame.to_dicts()


def test_cpu_only_trace_lists_zero_kernel_ops(tmp_path):
    report = report_mod.build(pipeline.run(load(_cpu_only(tmp_path))))
    assert report.facts.vendor == "cpu"
    assert report.steps.to_dicts()[0]["gpu_busy_ns"] == 0
    assert sorted(report.zero_kernel_ops["name"].to_list()) == ["aten::add", "aten::view"]


def test_json_is_sorted_and_deterministic(tmp_path):
    path = _gpu(tmp_path)
    outs = []
    for _ in range(2):
        buf = io.StringIO()
        render_report(report_mod.build(pipeline.run(load(path))), "json", buf)
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]
    data = json.loads(outs[0])
    assert list(data) == sorted(data)
    kernel = data["kernels"][0]
    assert list(kernel) == sorted(kernel)
    assert kernel["class"] == "elementwise" and kernel["count"] == 1 and kernel["total_ns"] == 3000
    assert data["steps"][0]["kernel_count"] == 1


def test_markdown_escapes_pipes_backticks_and_html():
    assert md_escape("a|b`c<d>&") == "a\\|b&#96;c&lt;d&gt;&amp;"
    assert "\n" not in md_escape("x\ny")


def test_short_kernel_name_keeps_functor():
    name = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#2}::operator()() const, std::array<char*, 2ul> >(int)")
    assert short_kernel_name(name, {"vector_width": 8, "functor": "GeluCUDAKernelImpl"}) == \
        "vectorized_elementwise_kernel<8, GeluCUDAKernelImpl>"


def test_cli_writes_output_by_extension_and_atomically(tmp_path, capsys):
    src = _gpu(tmp_path)
    target = tmp_path / "r.md"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(src), "-o", str(target)])
    assert exit_info.value.code == 0
    assert target.read_text().startswith("# tracekit report: gpu.json.gz")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_cli_bad_input_is_one_line_exit_2_and_keeps_existing_output(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"traceEvents\": [")
    target = tmp_path / "keep.json"
    target.write_text("precious")
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(bad), "-o", str(target)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "Traceback" not in err
    assert target.read_text() == "precious"


def test_cli_missing_output_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(_gpu(tmp_path)), "-o", str(tmp_path / "nope" / "r.json")])
    assert exit_info.value.code == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_unknown_option_is_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--bogus"])
    assert exit_info.value.code == 2


def test_long_tables_are_capped_in_markdown_but_complete_in_json(sample):
    from tracekit.render.views.tables import MAX_TABLE_ROWS

    report = sample("train_eager", execution_trace=None).report(step=4)
    md, js = io.StringIO(), io.StringIO()
    render_report(report, "md", md)
    render_report(report, "json", js)
    kernels_in_step = report.paths.height
    assert kernels_in_step > MAX_TABLE_ROWS
    assert f"first {MAX_TABLE_ROWS} of {kernels_in_step} rows" in md.getvalue()
    assert len(json.loads(js.getvalue())["paths"]["rows"]) == kernels_in_step


# -- the document model: every printer prints every kind of block --------------------------------

def _every_block_document():
    from tracekit.render.document import (Bullets, Charts, Document, Facts, Finding, Findings, Paragraph, Section,
                                          Table, Timelines, Title, Verdict)
    from tracekit.render.text import Code

    return Document("report", Title("tracekit report: t.json", ("tracekit report: ", "t.json"), 1), (
        Section("one", "One", (
            Findings("Findings", ("severity", "rule", "what"),
                     (Finding("warning", "host_sync", ("warning", Code("host_sync"), "a sync"), "WARNING host_sync",
                              ("fix: drop it",)),)),
            Timelines((), "", "no steps to draw"), Charts(()),
            Facts((("device", "H200"),)),
            Table("Kernels", ("kernel", "status"), ((Code("gemm_k"), "higher"),), status=True),
            Table("Empty", ("a",), ()),
            Verdict("Verdict", ("fused ", Code("k1"), ".")),
            Paragraph(("memory hint",), "Memory"),
            Paragraph(("quiet aside",), tone="muted"),
            Bullets(("rule one",), "Notes", marker="note: "),
        )),), "page")


@pytest.mark.parametrize("fmt", ["term", "md", "html"])
def test_every_printer_prints_every_kind_of_block(fmt):
    """Each text format prints any document: every block's words are there, in the document's order."""
    out = io.StringIO()
    renderer_for(fmt).print(_every_block_document(), out)
    text = out.getvalue()
    words = ["t.json", "host_sync", "H200", "gemm_k", "Empty", "fused", "memory hint", "quiet aside", "rule one"]
    positions = [text.find(w) for w in words]
    assert all(p >= 0 for p in positions), dict(zip(words, positions))
    assert positions == sorted(positions)
    if fmt == "html":  # the pictures' empty sentence, the status cell's class
        assert "no steps to draw" in text and 'class="tk-status-higher"' in text
    else:  # the text formats leave pictures out
        assert "no steps to draw" not in text


def test_evidence_details_show_short_kernel_names_and_times_from_the_step():
    from types import SimpleNamespace

    from tracekit.render.views.findings import evidence_line, short_names

    kernel = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
              "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(at::TensorIteratorBase&)>"
              "(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&))")
    assert short_names(f"{kernel} via aten::copy_ + {kernel} via aten::clone") == (
        "elementwise_kernel<…> via aten::copy_ + elementwise_kernel<…> via aten::clone")
    assert short_names("blocks in cudaStreamSynchronize") == "blocks in cudaStreamSynchronize"
    e = SimpleNamespace(role="op", name="aten::contiguous", step=2, ts_ns=5_001_250_000, count_per_step=3.0,
                        dur_ns_per_step=9_500, bytes_per_step=None, detail=f"{kernel} via aten::copy_")
    assert evidence_line(e, {2: 5_000_000_000}) == (
        "aten::contiguous ×3/step 9.5 µs/step (elementwise_kernel<…> via aten::copy_); first in step 2, "
        "+1.250 ms from its start (ts 5,001,250,000 ns)")
