"""Step timelines: the data (:mod:`tracekit.analyses.timeline`) and its SVG
(:mod:`tracekit.render.timeline`), on the H200 samples with hand-checked numbers, on tiny traces for
the caps and for hostile names, and on traces without GPU work or without steps."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest

import tracekit
from factory import make_kernel, make_launch, make_op, make_step, span, write_trace
from tracekit.analyses import timeline
from tracekit.render import timeline as draw_mod
from tracekit.render.base import Renderer

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode())


def marks(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in (e.get("class") or "").split()]


def title(el: ET.Element) -> str:
    found = el.find(SVG + "title")
    return "" if found is None else (found.text or "")


@pytest.fixture
def eager(sample):
    session = sample("mlp_eager")
    return session, session.report(timelines=True)


# -- the H200 eager MLP, step 4, checked against the raw trace JSON --------------------------------
# Checked with json.load on sample_traces/mlp_eager.json.gz: ProfilerStep#4 (user_annotation) spans
# ts 5427043548185.508 µs for 1273.576 µs; the cuda_runtime/cuda_driver calls whose ts lies in it
# are 8, and the GPU rows whose correlation matches one of them are 5 `kernel` (3 nvjet GEMMs, 2
# vectorized_elementwise_kernel) and 2 `gpu_memset` from 7 distinct launch calls (one launch call
# launches nothing); cpu_op/user_annotation/python_function spans starting in the step: 31.

def test_eager_step_data_matches_the_raw_trace(eager):
    _, report = eager
    tl = report.timelines
    assert [s.number for s in tl.steps] == [2, 3, 4]
    assert tl.default_step == report.path_step == 4
    step = tl.step(4)
    assert step.name == "ProfilerStep#4"
    assert step.gpu.group_by("kind").len().sort("kind").rows() == [("kernel", 5), ("memset", 2)]
    assert step.cpu.group_by("kind").len().sort("kind").rows() == [("launch", 8), ("op", 31)]
    assert step.links.height == 7
    assert step.left_out == {}
    # The window holds the CPU span and the work it launched (the last GEMM ends at 5427043549322.702 µs).
    assert step.start_ns <= 5427043548185508 and step.end_ns >= 5427043549322702
    # Depth comes from the op tree: the step span is the outermost mark, launch calls sit below ops.
    main = step.cpu.filter(pl.col("name") == "ProfilerStep#4")
    assert main["depth"].to_list() == [0]
    assert step.cpu.filter(pl.col("kind") == "launch")["depth"].min() >= 1


def test_eager_step_svg_counts(eager):
    _, report = eager
    step = report.timelines.step(4)
    root = parse(draw_mod.draw(step, full=True))
    assert root.get("class") == "tk-timeline" and root.get("data-step") == "4"
    assert int(root.get("data-start-ns")) == step.start_ns and int(root.get("data-end-ns")) == step.end_ns
    kernels = marks(root, "rect", "tk-kernel")
    assert len(kernels) == 5
    assert sorted(k.get("data-class") for k in kernels) == ["elementwise", "elementwise", "gemm", "gemm", "gemm"]
    assert len(marks(root, "rect", "tk-memset")) == 2
    assert len(marks(root, "rect", "tk-op")) == 31
    assert len(marks(root, "rect", "tk-launch")) == 8
    # One link per launch call with work in the step (7 of the 8 calls launch something).
    links = marks(root, "path", "tk-link")
    assert len(links) == 7
    assert {int(p.get("data-id")) for p in links} == set(step.gpu["id"].to_list())
    # Every mark has its hover text and its time in ns.
    for el in kernels + links + marks(root, "rect", "tk-op"):
        assert title(el) and el.get("data-ts") is not None and el.get("data-dur") is not None
    lanes = {g.get("data-lane") for g in marks(root, "g", "tk-lane")}
    assert lanes == set(step.cpu["lane"].to_list()) | {"gpu:0:7", "host", "busy:0"}
    # Folded (the default drawing): the ops the analysis gives a fold depth, every launch call.
    folded = parse(draw_mod.draw(step))
    shown = step.cpu.filter((pl.col("kind") == "op") & pl.col("fold_depth").is_not_null()).height
    assert 0 < shown < 31 and len(marks(folded, "rect", "tk-op")) == shown
    assert len(marks(folded, "rect", "tk-launch")) == 8 and len(marks(folded, "path", "tk-link")) == 7
    # The host-state lane: the step's CPU span (op-free under everything), its ops and calls
    # (dispatch) and its cudaDeviceSynchronize (blocked, 12.6 µs in step 2: test_decomposition).
    host = marks(root, "rect", "tk-host")
    assert {r.get("data-state") for r in host} == {"op_free", "dispatch", "blocked"}
    assert [int(r.get("data-dur")) for r in host if r.get("data-state") == "blocked"] == [
        int(v) for v in step.host.filter(pl.col("state") == "blocked")["end"] - step.host.filter(
            pl.col("state") == "blocked")["ts"]]
    assert marks(root, "g", "tk-legend") and marks(root, "g", "tk-axis")
    assert not marks(root, "g", "tk-left-out")


def test_eager_round_trips_match_the_round_trip_report(eager):
    session, report = eager
    step = report.timelines.step(4)
    tensors = report.round_trips.tensors.filter(pl.col("step") == 4)
    # Each is one [8192, 3072] bf16 activation: 8192 * 3072 * 2 = 50,331,648 bytes.
    assert tensors["bytes"].to_list() == [50_331_648] * 4
    root = parse(draw_mod.draw(step))
    arcs = marks(root, "path", "tk-roundtrip")
    assert sorted(int(a.get("data-bytes")) for a in arcs) == sorted(tensors["bytes"].to_list())
    # Drawn between the kernels the report names: producer and consumer names, in the same pairs.
    names = dict(zip(step.gpu["id"].to_list(), step.gpu["name"].to_list()))
    drawn = sorted((names[int(a.get("data-producer"))], names[int(a.get("data-consumer"))]) for a in arcs)
    assert drawn == sorted(zip(tensors["producer"].to_list(), tensors["consumer"].to_list()))
    assert all("48.00 MiB" in title(a) for a in arcs)


def test_same_trace_same_bytes(eager):
    _, report = eager
    again = tracekit.open(SAMPLES / "mlp_eager.json.gz").report(timelines=True)
    for a, b in zip(report.timelines.steps, again.timelines.steps):
        assert draw_mod.draw(a) == draw_mod.draw(b)


def test_timelines_only_when_asked(eager):
    session, report = eager
    assert session.report().timelines is None
    assert report.timelines is not None
    assert Renderer.needs_timelines is False
    from tracekit.render import RENDERERS

    assert not any(RENDERERS[name].needs_timelines for name in ("term", "md", "json") if name in RENDERERS)


def test_compile_spans_and_graph_records(sample):
    # mlp_compile-cudagraphs-sweep: unit 0 holds the frame compilation (_compile.compile_inner) and
    # the first CUDA-graph record; the report's compilation work table says which units have them.
    session = sample("compile_sweep/mlp_compile-cudagraphs-sweep")
    report = session.report(timelines=True)
    work = report.compilation.work
    for step in report.timelines.steps:
        expected = work.filter(pl.col("step") == step.number).height
        assert step.compile_spans.height == min(expected, timeline.CAPS["compile"])
    first = report.timelines.step(0)
    assert "compile" in first.compile_spans["kind"].to_list()
    root = parse(draw_mod.draw(first))
    assert len(marks(root, "rect", "tk-compile")) == first.compile_spans.height
    assert {r.get("data-kind") for r in marks(root, "rect", "tk-compile")} == set(first.compile_spans["kind"])


def test_gaps_carry_the_launch_gap_causes(eager):
    _, report = eager
    step = report.timelines.step(4)
    gaps = report.launch_gaps.gaps.filter(pl.col("step") == 4)
    assert sorted(step.gaps["cause"].to_list()) == sorted(gaps["cause"].to_list())
    root = parse(draw_mod.draw(step))
    assert sorted(r.get("data-cause") for r in marks(root, "rect", "tk-gap")) == sorted(gaps["cause"].to_list())


# -- caps --------------------------------------------------------------------------------------------

def capped_trace(tmp_path, n: int) -> Path:
    """One step with ``n`` ops, op i lasting i+1 µs and launching one kernel lasting (i+1)/2 µs."""
    events = [make_step(1, 0.0, 100_000.0)]
    t = 10.0
    for i in range(n):
        events.append(make_op(f"aten::op{i}", t, i + 1.0))
        events.append(make_launch("cudaLaunchKernel", t + 0.1, 0.5, correlation=1000 + i))
        events.append(make_kernel(f"kernel{i}", 50_000.0 + 60 * i, (i + 1) / 2, correlation=1000 + i))
        t += i + 2.0
    return write_trace(tmp_path / "capped.json", events)


def test_round_trips_past_the_cap_are_counted_left_out(monkeypatch):
    # train_eager's ProfilerStep#3 has 384 round trips; capped at 100, the largest are drawn (the
    # 100th largest is an [8, 512, 768] fp32 activation, 12,582,912 B, as are many after it: ties go
    # by time) and the other 284 are counted.
    monkeypatch.setitem(timeline.CAPS, "round_trips", 100)
    step = tracekit.open(SAMPLES / "train_eager.json.gz").report(timelines=True).timelines.step(3)
    all_bytes = tracekit.open(SAMPLES / "train_eager.json.gz").analyses().round_trips.tensors.filter(
        pl.col("step") == 3)["bytes"].sort(descending=True)
    assert all_bytes.len() == 384
    assert step.round_trips.height == 100 and step.left_out["round_trip"] == 284
    assert step.round_trips["bytes"].min() == all_bytes[99]


def test_caps_keep_the_longest_and_say_what_was_left_out(tmp_path, monkeypatch):
    monkeypatch.setitem(timeline.CAPS, "cpu", 100)
    monkeypatch.setitem(timeline.CAPS, "gpu", 30)
    report = tracekit.open(capped_trace(tmp_path, 120)).report(timelines=True)
    step = report.timelines.step(1)
    # CPU: the step span, then op/launch pairs by the op's length: 49 pairs and op 70 fill 100.
    ops = step.cpu.filter(pl.col("kind") == "op")["name"].to_list()
    assert len(ops) == 51 and "ProfilerStep#1" in ops and "aten::op70" in ops and "aten::op69" not in ops
    assert step.cpu.filter(pl.col("kind") == "launch").height == 49
    # GPU: the 30 longest kernels (89..119); all of their launch calls are drawn, so 30 links.
    assert sorted(step.gpu["name"].to_list()) == sorted(f"kernel{i}" for i in range(90, 120))
    assert step.links.height == 30
    assert step.left_out == {"kernel": 90, "launch": 71, "link": 90, "op": 70}
    # What was left out is drawn as runs: ops 0..69 (1 µs apart, under the window's 100 ms / 1,200),
    # their launch calls one level down, kernels 0..89 (15-60 µs apart).
    assert step.merged.select("group", "depth", "count").sort("group", "depth").rows() == [
        ("cpu", 1, 70), ("cpu", 2, 71), ("gpu", 0, 90)]
    root = parse(draw_mod.draw(step, full=True))
    assert len(marks(root, "rect", "tk-kernel")) == 30
    assert sorted(int(r.get("data-count")) for r in marks(root, "rect", "tk-merged")) == [70, 71, 90]
    # Folded to the launching depth, the CPU runs below the outermost row are not drawn.
    folded = parse(draw_mod.draw(step))
    assert sorted(int(r.get("data-count")) for r in marks(folded, "rect", "tk-merged")) == [90]
    note = marks(root, "g", "tk-left-out")
    assert len(note) == 1
    text = "".join(note[0].itertext())
    assert "90 kernel" in text and "71 launch" in text and "70 op" in text


def test_other_units_share_the_total_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline, "TOTAL_MARKS", 80)
    monkeypatch.setattr(timeline, "MIN_MARKS_PER_UNIT", 5)
    events = []
    for s in range(3):
        base = s * 1000.0
        events.append(make_step(s, base, 900.0))
        for i in range(20):
            events.append(make_op(f"op{i}", base + 10 + 40 * i, 30.0))
    report = tracekit.open(write_trace(tmp_path / "three.json", events, gpu=False)).report(timelines=True)
    tl = report.timelines
    assert tl.default_step == 2
    # The default unit keeps all 21 marks; the two others share 80 // (4 * 2) = 10 each.
    assert tl.step(2).cpu.height == 21 and tl.step(2).left_out == {}
    assert tl.step(0).cpu.height == 10
    # Equal lengths: the earliest are kept (the step span, op0..op8). Runs get four shares (cap 40)
    # and merge marks closer than the window / (40 // 4) = 90 µs: the 11 ops left out, 10 µs
    # apart, are one run.
    assert tl.step(0).cpu.filter(pl.col("kind") == "op")["name"].to_list()[1:] == [f"op{i}" for i in range(9)]
    assert tl.step(0).merged["count"].to_list() == [11]
    # The host-state lane has its own share too: the span and 20 ops' dispatch rows, 10 kept.
    assert tl.step(0).left_out == {"host_state": 11, "op": 11}


# -- hostile names -----------------------------------------------------------------------------------

HOSTILE = 'evil<script>alert("x")</script> ]]> \'q\' & <!-- \x1b[31m \ufffe'


def test_hostile_names_stay_text(tmp_path):
    events = [make_step(1, 0.0, 1000.0), make_op(HOSTILE, 10.0, 500.0),
              make_launch("cudaLaunchKernel", 20.0, 5.0, correlation=7),
              make_kernel(HOSTILE, 40.0, 300.0, correlation=7),
              span("cpu_op", "aten::on_a_thread_named_by_an_attacker", 30.0, 50.0, tid='t"><script>x</script>')]
    report = tracekit.open(write_trace(tmp_path / "hostile.json", events)).report(timelines=True)
    svg = draw_mod.draw(report.timelines.step(1))
    assert "<script" not in svg and "]]>" not in svg and "\x1b" not in svg and "\ufffe" not in svg
    root = parse(svg)  # XML-valid
    assert not list(root.iter(SVG + "script"))
    shown = HOSTILE.replace("\x1b", "\\x1b").replace("\ufffe", "\\ufffe")
    (kernel,) = marks(root, "rect", "tk-kernel")
    assert title(kernel).splitlines()[0] == shown
    op = [o for o in marks(root, "rect", "tk-op") if title(o).startswith("evil")]
    assert title(op[0]).splitlines()[0] == shown
    assert 'cpu:t"><script>x</script>' in {g.get("data-lane") for g in marks(root, "g", "tk-lane")}


# -- traces without GPU work or without steps -----------------------------------------------------------

def test_cpu_only_trace_without_steps():
    report = tracekit.open(FIXTURES / "cpu_only_no_steps.json").report(timelines=True)
    tl = report.timelines
    for step in tl.steps:
        assert step.gpu.height == 0
        root = parse(draw_mod.draw(step))
        assert not marks(root, "rect", "tk-kernel")


def test_empty_step_draws():
    step = timeline.StepTimeline(number=0, name="empty", start_ns=0, end_ns=0)
    root = parse(draw_mod.draw(step, width=400))
    assert root.get("data-step") == "0" and not marks(root, "g", "tk-lane")


# -- the report command computes timelines only for a renderer that draws them ---------------------

@pytest.mark.parametrize(("fmt", "calls"), [("md", 0), ("json", 0), ("html", 1)])
@pytest.mark.slow
def test_report_command_asks_its_renderer(tmp_path, monkeypatch, fmt, calls):
    from click.testing import CliRunner

    from tracekit.commands import report as report_command

    seen = []
    real = timeline.analyze
    monkeypatch.setattr(timeline, "analyze", lambda *a, **k: seen.append(1) or real(*a, **k))
    out = tmp_path / f"r.{fmt}"
    result = CliRunner().invoke(report_command.report, [str(SAMPLES / "mlp_eager.json.gz"), "--format", fmt,
                                                        "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(seen) == calls
    if fmt == "html":
        # steps 2, 3, 4, each folded to its launching depth and in full (the CPU depth control)
        assert out.read_text(encoding="utf-8").count('class="tk-timeline"') == 6


def test_multi_stream_nccl_trace():
    # Checked with json.load on tests/data/real/facebookresearch__param__dlrm-8rank-v100-nccl-rank0:
    # ProfilerStep#10 spans ts 1694128201426674 µs for 14455 µs; GPU rows whose correlation matches a
    # cuda_runtime call in it: 245 `kernel` + 16 `gpu_memcpy`, on streams 7 (225), 24 (23), 84 (8,
    # the nccl kernels) and 22 (5), from 261 distinct launch calls.
    path = Path(__file__).resolve().parents[1] / "data" / "real" / "facebookresearch__param__dlrm-8rank-v100-nccl-rank0.json.gz"
    step = tracekit.open(path).report(timelines=True).timelines.step(10)
    root = parse(draw_mod.draw(step))
    lanes = [g.get("data-lane") for g in marks(root, "g", "tk-lane") if g.get("data-lane").startswith("gpu:")]
    assert lanes == ["gpu:0:7", "gpu:0:22", "gpu:0:24", "gpu:0:84"]
    per_lane = {g.get("data-lane"): len([r for r in g if (r.get("class") or "") in ("tk-kernel", "tk-memcpy")])
                for g in marks(root, "g", "tk-lane")}
    assert [per_lane[lane] for lane in lanes] == [225, 5, 23, 8]
    assert len(marks(root, "rect", "tk-kernel")) == 245 and len(marks(root, "rect", "tk-memcpy")) == 16
    assert len(marks(root, "path", "tk-link")) == 261
    nccl = [r for r in marks(root, "rect", "tk-kernel") if "nccl" in title(r).lower()]
    assert len(nccl) == 8 and {r.get("data-class") for r in nccl} == {"communication"}


def test_busy_bins_add_up_to_each_steps_gpu_busy_and_folds_are_bounded(eager):
    """The utilisation strip's bins (one device here) sum to the summary's gpu_busy_ns in every
    step, tile the window, and no bin is busier than it is long; a folded lane has few rows."""
    _, report = eager
    busy = dict(zip(report.steps["number"].to_list(), report.steps["gpu_busy_ns"].to_list()))
    for step in report.timelines.steps:
        bins = step.busy
        assert bins["busy_ns"].sum() == busy[step.number]
        assert (bins["busy_ns"] <= bins["end"] - bins["ts"]).all()
        assert bins["ts"].min() >= step.start_ns and bins["end"].max() <= step.end_ns
        assert bins.height <= timeline.BUSY_BINS
        folded = step.cpu["fold_depth"].drop_nulls()
        assert folded.max() < timeline.FOLD_ANNOTATIONS + 3
