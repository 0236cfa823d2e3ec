"""The core report on the real H200 sample traces (captured with ``tracekit capture``).

Figures asserted here were checked by hand against the raw JSON (json.load, the ProfilerStep#4
span, launches inside it, their kernels by correlation id, union of [ts, ts+dur)).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit.results import report as report_mod

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture
def report_of(sample):
    """``report_of(name)``: the report of sample NAME without its execution trace (shared, computed once)."""
    return lambda name: sample(name, execution_trace=None).report()


def _step_kernels(report: report_mod.Report, step: int) -> pl.DataFrame:
    return report.paths.filter(pl.col("step") == step)


@pytest.fixture
def eager(report_of):
    return report_of("mlp_eager")


def test_eager_mlp_step_has_three_nvjet_gemms_and_two_elementwise(eager):
    assert eager.facts.step_numbers == [2, 3, 4]
    assert eager.steps["kernel_count"].to_list() == [5, 5, 5]
    paths = _step_kernels(eager, 4)
    assert paths["kernel_class"].to_list() == ["gemm", "elementwise", "gemm", "elementwise", "gemm"]
    gemms = eager.kernels.filter(pl.col("kernel_class") == "gemm")
    assert set(gemms["library"].to_list()) == {"cublasLt"}
    assert all(n.startswith("nvjet_sm90_tst_") for n in gemms["name"].to_list())
    assert sorted(eager.kernels.filter(pl.col("kernel_class") == "elementwise")["name"].str.extract(
        r"native::(\w+CUDAKernelImpl|binary_internal::MulFunctor)").to_list()) == [
        "GeluCUDAKernelImpl", "binary_internal::MulFunctor"]


def test_eager_mlp_step4_figures_match_hand_count(eager):
    step4 = eager.steps.filter(pl.col("number") == 4).row(0, named=True)
    assert step4["dur_ns"] == 1_273_576
    assert step4["gpu_busy_ns"] == 230_464  # 2 memsets + 5 kernels, no overlap
    assert step4["gpu_activity_count"] == 7


def test_eager_mlp_gemm_launch_path_shows_hidden_memset(eager):
    paths = _step_kernels(eager, 4)
    first = paths.row(0, named=True)
    assert (first["scope"], first["top_op"], first["cpu_op"]) == ("mlp_fwd", "aten::linear", "aten::mm")
    assert first["launch"] == "cuLaunchKernelEx (+ memset)"
    assert paths.row(1, named=True)["launch"] == "cudaLaunchKernel"


def test_compiled_mlp_fuses_gelu_and_mul_into_one_triton_kernel(report_of):
    report = report_of("mlp_compile")
    assert report.steps["kernel_count"].to_list() == [4, 4, 4]
    fused = report.kernels.filter(pl.col("kernel_class") == "triton_fused").row(0, named=True)
    assert fused["name"] == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert fused["library"] == "inductor" and fused["launch_api"] == "cuLaunchKernel"
    assert '"fused_ops":["_unsafe_view","gelu","mul"]' in fused["decoded"]
    assert report.kernels.filter(pl.col("kernel_class") == "elementwise").height == 0
    kinds = set(report.compile_preops["kind"].to_list())
    assert {"cache_lookup", "compiled_region", "pregraph_bytecode", "aot_prologue",
            "call_compiled_graph"} <= kinds
    assert len(report.facts.graph_hashes) == 1
    # The compiled graph's kernels still belong to the user's annotation, not to the wrapper.
    assert set(_step_kernels(report, 4)["scope"].to_list()) == {"mlp_fwd"}


def test_liger_kernel_is_hand_written_triton(report_of):
    report = report_of("mlp_liger")
    row = report.kernels.filter(pl.col("name") == "_geglu_tanh_forward_kernel").row(0, named=True)
    assert (row["kernel_class"], row["library"], row["cpu_op"]) == (
        "triton_custom", "triton", "LigerGELUMulFunction")
    assert report.steps["kernel_count"].to_list() == [4, 4, 4]


def test_cudagraph_replay_kernels_attributed_to_graph_launch(report_of):
    report = report_of("mlp_compile-cudagraphs")
    paths = _step_kernels(report, report.facts.step_numbers[-1])
    graph = paths.filter(pl.col("launch").str.starts_with("cudaGraphLaunch"))
    assert graph.height == 4
    assert set(graph["kernel_class"].to_list()) == {"gemm", "triton_fused"}


def test_aten_t_is_zero_kernel_in_eager_linear_and_absent_under_compile(report_of, sample):
    eager = report_of("linear_eager")
    zero = {r["name"]: r for r in eager.zero_kernel_ops.iter_rows(named=True)}
    assert zero["aten::t"]["count"] == 3  # once per profiled step
    assert {"aten::transpose", "aten::as_strided"} <= set(zero)
    assert eager.steps.filter(pl.col("number") == 4)["gpu_busy_ns"].to_list() == [2_688]
    compiled_trace = sample("linear_compile", execution_trace=None).trace
    assert compiled_trace.ops.filter(pl.col("name").is_in(["aten::t", "aten::transpose"])).height == 0
    compiled = report_of("linear_compile")
    assert compiled.kernels["name"].to_list() == eager.kernels["name"].to_list()


@pytest.mark.parametrize("path", sorted(p.name for p in SAMPLES.glob("*.json.gz") if ".et." not in p.name))
def test_every_sample_trace_reports(path, sample):
    report = sample(path, execution_trace=None).report()
    assert report.steps.height >= 1
    other = report.kernels.filter(pl.col("kernel_class") == "other")
    # Only CUB's sort/scan kernels (embedding backward in the train step) have no better class.
    assert set(other["library"].to_list()) <= {"cub"}
    unlinked = report.paths.filter(pl.col("launch").str.starts_with("(no launch"))
    assert unlinked.height == 0


def _json_report(argv: list[str], capsys) -> dict:
    import json

    from tracekit.commands import main

    with pytest.raises(SystemExit) as exit_info:
        main(["report", *argv, "--format", "json"])
    assert exit_info.value.code == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("name", "tensors"), [("mlp_eager", 4), ("mlp_compile", 3), ("mlp_liger", 3)])
def test_round_trip_tensors_per_step_in_report_json(name, tensors, capsys):
    data = _json_report([str(SAMPLES / f"{name}.json.gz")], capsys)
    trips = data["round_trips"]
    assert trips["method"] == "execution_trace"  # the .et.json.gz beside the trace was used
    assert [(r["step"], r["tensor_count"], r["round_trip_bytes"]) for r in trips["bytes_per_step"]] == [
        (s, tensors, tensors * 50_331_648) for s in (2, 3, 4)]
    assert {t["bytes"] for t in trips["tensors"]} == {50_331_648}


def test_round_trips_without_execution_trace_say_inferred(capsys):
    data = _json_report([str(SAMPLES / "mlp_eager.json.gz"), "--no-execution-trace", "--step", "3"], capsys)
    assert data["round_trips"]["method"] == "shape_inference"
    assert data["round_trips"]["bytes_per_step"] == [
        {"step": 3, "round_trip_bytes": 4 * 50_331_648, "tensor_count": 4, "unknown_kernels": 0}]


def test_throughput_against_h200_ceilings_and_override(capsys):
    data = _json_report([str(SAMPLES / "mlp_eager.json.gz"), "--step", "4"], capsys)
    tp = data["throughput"]
    assert tp["device"] == "NVIDIA H200" and tp["ceilings"]["source"] == "table"
    gemm = next(k for k in tp["kernels"] if k["name"].startswith("nvjet_sm90_tst_192x128"))
    # down_proj: 2·8192·768·3072 FLOP in 51.360 µs (ProfilerStep#4, read from the trace by hand).
    assert gemm["flops"] == 38_654_705_664
    assert gemm["achieved_tflops"] == pytest.approx(38_654_705_664 / 51.360e-6 / 1e12)
    assert gemm["headline"] == "flops" and gemm["bound"] == "compute"
    pointwise = [k for k in tp["kernels"] if k["class"] == "elementwise"]
    assert {k["headline"] for k in pointwise} == {"bytes"} and all(k["achieved_gbps"] > 1000 for k in pointwise)
    data = _json_report([str(SAMPLES / "mlp_eager.json.gz"), "--ceiling", "bf16_tflops=704"], capsys)
    gemm = next(k for k in data["throughput"]["kernels"] if k["name"].startswith("nvjet_sm90_tst_192x128"))
    assert data["throughput"]["ceilings"]["source"] == "flags"
    assert gemm["frac_flops"] == pytest.approx(gemm["achieved_flops_per_s"] / 704e12)


def test_verdicts_in_report_json(capsys):
    small = _json_report([str(SAMPLES / "matmul_add_eager-64.json.gz")], capsys)
    big = _json_report([str(SAMPLES / "matmul_add_eager-4096.json.gz")], capsys)
    assert {s["verdict"] for s in small["launch_gaps"]["steps"]} == {"overhead-bound"}
    assert {s["verdict"] for s in big["launch_gaps"]["steps"]} == {"compute-bound"}


@pytest.mark.slow
def test_hta_flag_shows_hta_beside_ours(capsys):
    pytest.importorskip("hta")
    data = _json_report([str(SAMPLES / "mlp_eager.json.gz"), "--hta"], capsys)
    steps = [r for r in data["hta"] if r["scope"] == "step"]
    assert [r["key"] for r in steps] == [2, 3]  # HTA drops the last step
    assert all(r["agree"] for r in data["hta"])


def _without_profiler_steps(name: str, tmp_path) -> Path:
    """The sample trace with its ProfilerStep#N spans removed, as an unscheduled profile writes it."""
    import gzip
    import json

    doc = json.loads(gzip.decompress((SAMPLES / f"{name}.json.gz").read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    out = tmp_path / f"{name}.json"
    out.write_text(json.dumps(doc))
    return out


def test_without_profiler_steps_every_section_works_on_the_annotation(tmp_path, capsys):
    import tracekit
    from tracekit.commands import main

    path = _without_profiler_steps("mlp_eager", tmp_path)
    report = tracekit.open(path, execution_trace=None).report()
    # The three mlp_fwd spans are the units: each holds the step's 5 kernels and 2 memsets, and the
    # same figures as ProfilerStep#2-4 (see test_eager_mlp_step4_figures_match_hand_count).
    assert (report.units.kind, report.units.name, report.units.source) == ("span", "mlp_fwd", "auto")
    assert report.steps["name"].to_list() == ["mlp_fwd#1", "mlp_fwd#2", "mlp_fwd#3"]
    assert report.steps["kernel_count"].to_list() == [5, 5, 5]
    assert report.steps["gpu_busy_ns"].to_list() == [232_320, 231_104, 230_464]
    assert report.launch_gaps.per_step["verdict"].to_list() == ["overhead-bound"] * 3
    assert report.round_trips.bytes_per_step.select("step", "tensor_count").rows() == [(1, 4), (2, 4), (3, 4)]
    assert report.paths.height == 5 and report.path_step == 3
    with pytest.raises(SystemExit):
        main(["report", str(path), "--format", "md", "--no-execution-trace"])
    text = capsys.readouterr().out
    for title in ("Steps", "Launch gaps and verdict per step", "Round-trip bytes per step"):
        section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
        assert "_none_" not in section, title
    assert "spans of mlp\\_fwd (3 units; auto:" in text


def test_without_profiler_steps_diff_finds_the_fusion_per_annotation(tmp_path):
    import tracekit

    eager = tracekit.open(_without_profiler_steps("mlp_eager", tmp_path), execution_trace=None)
    diff = eager.diff(tracekit.open(_without_profiler_steps("mlp_compile", tmp_path), execution_trace=None))
    assert (diff.a.unit_kind, diff.b.unit_kind) == ("mlp_fwd", "mlp_fwd")
    assert diff.alignment.fusions[0].after.name == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert "cpu_time" in diff.quantities and "idle_time" in diff.quantities
