"""The charts (tracekit.render.charts) and the svg format (tracekit.render.svg): XML-valid standalone
SVG, the expected number of marks on shipped traces, names escaped, the directory output and its
Markdown links, and the command line's rules for ``-o``."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tracekit
from factory import make_annotation, make_kernel, make_launch, make_op, write_trace
from tracekit.commands import main
from tracekit.render import charts, format_for_path
from tracekit.render.text import for_display

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
EAGER = SAMPLES / "mlp_eager.json.gz"
COMPILE = SAMPLES / "mlp_compile.json.gz"
MEMORY = SAMPLES / "memory" / "train_eager-memory.json.gz"
SVG = "{http://www.w3.org/2000/svg}"


def marks(svg: str, mark: str, name: str | None = None) -> int:
    """Marks Vega drew: children of its ``g.mark-<mark>.role-mark`` groups (of the named layer)."""
    root = ET.fromstring(svg)
    count = 0
    for group in root.iter(f"{SVG}g"):
        classes = (group.get("class") or "").split()
        if f"mark-{mark}" in classes and "role-mark" in classes and (name is None or f"{name}_marks" in classes):
            count += len(list(group))
    return count


def texts(svg: str) -> list[str]:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]


@pytest.fixture
def eager(sample):
    return sample("mlp_eager").report()


@pytest.fixture
def memory_report(sample):
    return sample("memory/train_eager-memory").report()


# -- the charts on shipped traces (counts checked against the raw JSON by hand) ------------------------------

def test_gpu_time_by_class_has_one_segment_per_step_and_class(eager):
    # mlp_eager.json.gz by hand (gzip + json, plain Python): ProfilerStep#2..#4, each launching 3
    # nvjet GEMM kernels ("cat": "kernel"), 2 vectorized_elementwise kernels and 2 "gpu_memset"
    # events: 3 classes in each of 3 steps = 9 stacked segments.
    svg = charts.gpu_time_by_class(eager)
    assert marks(svg, "rect") == 9
    shown = texts(svg)
    assert {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "gemm", "elementwise", "memset"} <= set(shown)


def test_roofline_has_one_point_per_kernel_with_throughput_figures(eager):
    # By hand from the raw JSON: the 9 GEMM kernels are 2 problems (6 × nvjet 256x128 under
    # aten::mm [[8192, 768], [768, 3072]], 3 × nvjet 192x128 under aten::mm [[8192, 3072], [3072, 768]]);
    # the 6 elementwise kernels are aten::gelu ×3 and aten::mul ×3 on [64, 128, 3072]: 4 kernel
    # problems, each with FLOPs and bytes, so 4 points — the report's throughput rows, all of them.
    svg = charts.roofline(eager)
    assert eager.throughput.kernels.height == 4
    assert marks(svg, "symbol", "kernels") == 4
    # ceilings: the H200's HBM line and the bf16 compute line the points' dtype uses
    assert marks(svg, "line", "ceilings") == 2
    labels = [p.get("aria-label") or "" for p in ET.fromstring(svg).iter(f"{SVG}path")]
    assert sum(1 for s in labels if s.startswith("nvjet_sm90_tst_256x128")) == 1
    assert any("HBM 4.80 TB/s" in t for t in texts(svg)) and any("bf16 compute 990 TFLOP/s" in t for t in texts(svg))


def test_roofline_leaves_out_kernels_without_flops(memory_report):
    points, _, left_out = charts.roofline_data(memory_report)
    k = memory_report.throughput.kernels
    with_figures = k.filter((k["intensity"] > 0) & (k["achieved_flops_per_s"] > 0)).height
    assert len(points) == with_figures and left_out == k.height - with_figures > 0
    svg = charts.roofline(memory_report)
    assert marks(svg, "symbol", "kernels") == with_figures
    assert any(f"{left_out} not drawn (no FLOPs or traffic model" in t for t in texts(svg))


def test_roofline_keeps_the_kernels_with_the_most_time(eager, monkeypatch):
    monkeypatch.setattr(charts, "MAX_POINTS", 2)
    points, _, left_out = charts.roofline_data(eager)
    # throughput rows are sorted by total time: the two nvjet GEMMs (489.6 µs of the 689.6 µs)
    assert [p["kernel"][:22] for p in points] == ["nvjet_sm90_tst_256x128", "nvjet_sm90_tst_192x128"]
    assert left_out == 2 and marks(charts.roofline(eager), "symbol", "kernels") == 2


def test_roofline_without_known_ceilings_draws_the_points_alone(eager):
    from dataclasses import replace

    unknown = replace(eager, throughput=replace(eager.throughput, ceilings=None))
    svg = charts.roofline(unknown)
    assert marks(svg, "symbol", "kernels") == 4 and marks(svg, "line") == 0
    assert any("no ceilings known for this device: pass --ceiling" in t for t in texts(svg))


def test_memory_chart_only_with_memory_events(eager, memory_report):
    assert charts.memory_timeline(eager) is None  # mlp_eager was captured without profile_memory
    svg = charts.memory_timeline(memory_report)
    assert marks(svg, "line") == 2  # allocated and reserved of cuda:0 (the CPU device is left out)
    assert any("cuda:0" in t for t in texts(svg))


def test_class_bars_a_vs_b(sample):
    diff = sample("mlp_eager").diff(sample("mlp_compile"))
    svg = charts.class_time_a_vs_b(diff)
    # classes of either side: gemm, elementwise (A only), triton_fused (B only); one bar per side each
    assert marks(svg, "rect") == 6
    assert {"gemm", "elementwise", "triton_fused", "A: mlp_eager.json.gz", "B: mlp_compile.json.gz"} <= set(texts(svg))


def test_nothing_is_fetched_when_drawing():
    # The conversion is given no URL it may load: a specification naming one fails instead of fetching.
    with pytest.raises(ValueError, match="External data url not allowed"):
        charts.to_svg({"data": {"url": "https://example.com/x.json"}, "mark": "bar",
                       "encoding": {"x": {"field": "a", "type": "quantitative"}}})


@pytest.mark.slow
def test_same_report_same_bytes(eager):
    again = tracekit.open(EAGER).report()
    for chart in (charts.gpu_time_by_class, charts.roofline):
        assert chart(eager) == chart(again)


# -- escaping ----------------------------------------------------------------------------------------

UNIT = 'u<script>alert("x")</script> & \x1b[31m ]]> \u202e \'q\''
KERNEL = 'k<img src=x onerror=alert(1)>&"\''


@pytest.fixture()
def hostile(tmp_path) -> Path:
    events = [event for n in range(3) for event in (
        make_annotation(UNIT, 20.0 * n, 15), make_op("aten::mul", 20.0 * n + 1, 5),
        make_launch("cudaLaunchKernel", 20.0 * n + 2, 1, n + 1), make_kernel(KERNEL, 20.0 * n + 4, 1, n + 1))]
    return write_trace(tmp_path / "hostile <b>.json", events)


def test_hostile_names_are_text_in_every_picture(hostile, tmp_path):
    out = tmp_path / "pics"
    _cli(["report", str(hostile), "--format", "svg", "-o", f"{out}/"], 0)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["gpu_time_by_class.svg", "report.md", "timeline.svg"]
    for name in files[::2]:
        text = (out / name).read_text(encoding="utf-8")
        root = ET.fromstring(text)  # XML-valid: the escape character and "]]>" did not break it
        assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "img", "foreignObject")]
        assert "<script" not in text and "<img" not in text and "\x1b" not in text and "\u202e" not in text
    bars = (out / "gpu_time_by_class.svg").read_text(encoding="utf-8")
    # each unit's name, as text: made visible, cut in the middle so the step number still shows
    shown = [for_display(f"{UNIT}#{n}")[:19] + "…" + for_display(f"{UNIT}#{n}")[-8:] for n in (1, 2, 3)]
    assert shown[0] == 'u<script>alert("x")…2e \'q\'#1'
    assert set(shown) <= set(texts(bars))


@pytest.mark.slow
def test_hostile_trace_names_in_the_diff_pictures(hostile, tmp_path):
    other = tmp_path / "b\x1b]0;t\x07 <i>&.json"
    shutil.copyfile(hostile, other)
    out = tmp_path / "d"
    _cli(["diff", str(hostile), str(other), "--format", "svg", "-o", f"{out}/"], 0)
    bars = (out / "class_time_a_vs_b.svg").read_text(encoding="utf-8")
    ET.fromstring(bars)
    assert {"A: hostile <b>.json", "B: b\\x1b]0;t\\x07 <i>&.json"} <= set(texts(bars))
    assert "<i>" not in bars and "<b>" not in bars and "\x1b" not in bars


def test_an_xml_control_character_in_a_name_is_made_visible():
    assert charts.label("a\x00b\x1bc") == "a\\x00b\\x1bc"


# -- the svg format: -o rules, directory output, Markdown links ------------------------------------------

def _cli(argv: list[str], code: int) -> None:
    """``tracekit ARGV`` through the real entry point, ending with exit ``code``."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == code, argv


def test_report_directory_holds_the_pictures_and_the_markdown_linking_them(tmp_path):
    out = tmp_path / "pr"
    _cli(["report", str(EAGER), "--format", "svg", "-o", f"{out}/"], 0)
    # no memory.svg: mlp_eager has no memory events
    assert sorted(p.name for p in out.iterdir()) == ["gpu_time_by_class.svg", "report.md", "roofline.svg",
                                                     "timeline.svg"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# tracekit report: mlp\\_eager.json.gz")
    links = re.findall(r"!\[([^\]]*)\]\(([^)]*)\)", md)
    assert [path for _, path in links] == ["timeline.svg", "gpu_time_by_class.svg", "roofline.svg"]
    assert links[0][0] == "step timeline (ProfilerStep#4)"
    assert md.index("## Pictures") < md.index("## GPU time by class")
    timeline = ET.parse(out / "timeline.svg").getroot()
    assert timeline.get("class") == "tk-timeline" and timeline.get("data-step") == "4"
    # 5 kernels in ProfilerStep#4 (tests/analyses/test_timeline.py checks them against the raw JSON)
    assert sum(1 for e in timeline.iter(f"{SVG}rect") if "tk-kernel" in (e.get("class") or "").split()) == 5
    for name in ("gpu_time_by_class.svg", "roofline.svg"):
        ET.parse(out / name)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    _cli(["report", str(EAGER), "--format", "svg", "-o", str(out)], 0)  # an existing directory, no slash
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # same trace, same bytes


@pytest.mark.slow
def test_markdown_named_by_o_and_memory_picture(tmp_path):
    target = tmp_path / "docs" / "memory-report.md"
    _cli(["report", str(MEMORY), "--format", "svg", "-o", str(target)], 0)
    names = sorted(p.name for p in target.parent.iterdir())
    assert names == ["gpu_time_by_class.svg", "memory-report.md", "memory.svg", "roofline.svg", "timeline.svg"]
    assert "![memory over time](memory.svg)" in target.read_text(encoding="utf-8")


def test_one_svg_file_is_the_timeline(tmp_path):
    target = tmp_path / "step.svg"
    _cli(["report", str(EAGER), "-o", str(target)], 0)  # the format from the extension
    assert ET.parse(target).getroot().get("class") == "tk-timeline"
    assert list(tmp_path.iterdir()) == [target]


def test_diff_directory(tmp_path):
    out = tmp_path / "d"
    _cli(["diff", str(EAGER), str(COMPILE), "--format", "svg", "-o", f"{out}/"], 0)
    assert sorted(p.name for p in out.iterdir()) == ["class_time_a_vs_b.svg", "diff.md", "timeline_a.svg",
                                                     "timeline_b.svg"]
    md = (out / "diff.md").read_text(encoding="utf-8")
    assert re.findall(r"!\[([^\]]*)\]\(([^)]*)\)", md) == [
        ("GPU time per kernel class, A vs B", "class_time_a_vs_b.svg"),
        ("step timeline of A (mlp\\_eager.json.gz, ProfilerStep#4)", "timeline_a.svg"),
        ("step timeline of B (mlp\\_compile.json.gz, ProfilerStep#4)", "timeline_b.svg")]
    assert md.index("**Verdict:**") < md.index("class_time_a_vs_b.svg") < md.index("<details>")
    # one time scale: B's step is shorter, so its drawing is narrower
    a, b = (ET.parse(out / f"timeline_{s}.svg").getroot() for s in "ab")
    assert a.get("data-step") == b.get("data-step") == "4"
    assert float(b.get("viewBox").split()[2]) < float(a.get("viewBox").split()[2])


def test_svg_without_a_file_or_directory_is_exit_2(capsys):
    _cli(["report", str(EAGER), "--format", "svg"], 2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--format svg writes files: give -o DIR/" in err
    _cli(["diff", str(EAGER), str(COMPILE), "--format", "svg", "-o", "-"], 2)
    assert "--format svg writes files" in capsys.readouterr().err


def test_svg_has_no_picture_for_check_or_compare(tmp_path, capsys, monkeypatch):
    """check and compare do not offer svg (their --help lists term|md|json|html): asked for it, by
    --format (click's usage error) or by -o FILE.svg, they say why, exit 2, before any work."""
    from tracekit.session import Session

    monkeypatch.setattr(Session, "trace", property(lambda self: pytest.fail("a trace was loaded")))
    expect = Path(__file__).resolve().parents[2] / "expectations" / "mlp_eager.toml"
    for command, argv in (("compare", ["compare", str(EAGER), str(COMPILE)]),
                          ("check", ["check", str(EAGER), "--expect", str(expect)])):
        why = (f"svg draws the pictures of `tracekit report TRACE` and `tracekit diff` only; "
               f"`tracekit {command}` writes term, md, json, html")
        _cli([*argv, "--format", "svg", "-o", str(tmp_path / "c.svg")], 2)
        err = capsys.readouterr().err
        assert f"Error: Invalid value for '--format': {why}\n" in err, err
        _cli([*argv, "-o", str(tmp_path / "c.svg")], 2)
        assert capsys.readouterr().err == f"tracekit: error: -o {tmp_path / 'c.svg'}: {why}\n"
    assert not list(tmp_path.iterdir())


def test_svg_of_a_directory_of_ranks_is_exit_2_before_any_work(tmp_path, capsys, monkeypatch):
    from tracekit import ranks

    monkeypatch.setattr(ranks, "analyze", lambda *a, **k: pytest.fail("analysed"))
    _cli(["report", str(tmp_path), "--format", "svg", "-o", str(tmp_path / "pics")], 2)
    assert "draws one trace's report, not a directory of ranks" in capsys.readouterr().err


def test_never_writes_over_an_input(tmp_path, capsys):
    out = tmp_path / "pics"
    out.mkdir()
    trace = out / "roofline.svg"  # a trace that happens to bear a picture's name
    shutil.copyfile(EAGER, trace)
    _cli(["report", str(trace), "--format", "svg", "-o", f"{out}/"], 2)
    assert "refusing to overwrite an input" in capsys.readouterr().err
    assert trace.read_bytes() == EAGER.read_bytes() and sorted(p.name for p in out.iterdir()) == ["roofline.svg"]


def test_a_file_where_the_directory_should_be_is_exit_2(tmp_path, capsys):
    blocker = tmp_path / "pics"
    blocker.write_text("not a directory")
    _cli(["report", str(EAGER), "--format", "svg", "-o", f"{blocker}/"], 2)
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_every_real_trace_gives_valid_pictures(tmp_path):
    """Layer 3: the public traces of other GPUs and workloads (``TRACEKIT_REAL_TRACES``)."""
    import os

    folder = os.environ.get("TRACEKIT_REAL_TRACES")
    if not folder:
        pytest.skip("set TRACEKIT_REAL_TRACES to the real-trace corpus folder")
    traces = sorted(Path(folder).glob("*.json.gz"))
    assert traces
    for trace in traces:
        out = tmp_path / trace.name
        _cli(["report", str(trace), "--format", "svg", "-o", f"{out}/"], 0)
        md = (out / "report.md").read_text(encoding="utf-8")
        linked = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", md)
        assert sorted(linked) == sorted(p.name for p in out.glob("*.svg")), trace.name
        for picture in out.glob("*.svg"):
            ET.parse(picture)


def test_svg_extension_selects_the_format():
    assert format_for_path("out/step.SVG", None) == "svg"


def test_every_chart_mark_has_its_figures_as_hover_text(eager):
    """A browser shows an SVG element's ``<title>`` on hover: each roofline point carries its label."""
    root = ET.fromstring(charts.roofline(eager))
    points = [p for g in root.iter(f"{SVG}g") if "kernels_marks" in (g.get("class") or "").split() for p in g]
    assert len(points) == 4
    for point in points:
        title = point.find(f"{SVG}title")
        assert title is not None and title.text == point.get("aria-label") and "TFLOP/s" in title.text


@pytest.mark.slow
def test_under_an_address_space_limit_the_charts_are_a_note_not_a_crash(tmp_path):
    """vl-convert's V8 aborts the process under any RLIMIT_AS; the pictures say why they are missing."""
    import subprocess
    import sys

    html, pictures = tmp_path / "r.html", tmp_path / "pictures"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY)); "
            "from tracekit.commands import main; main()")
    for args in (["report", str(EAGER), "-o", str(html)],
                 ["report", str(EAGER), "--format", "svg", "-o", f"{pictures}/"]):
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    page = html.read_text()
    assert page.count('class="tk-not-drawn"') == 2  # the class chart and the roofline
    assert "not drawn: this process runs under an address-space limit (ulimit -v)" in page
    chart = (pictures / "gpu_time_by_class.svg").read_text()
    assert 'class="tk-not-drawn"' in chart and ET.fromstring(chart) is not None
    assert "<svg" in (pictures / "timeline.svg").read_text()  # the timeline is tracekit's own drawing
