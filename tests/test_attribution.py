"""Rule-level tests of the op tree, GPU attribution, steps and dispatch analyses on tiny traces."""

from __future__ import annotations

import polars as pl
import pytest

from factory import (make_annotation, make_flow, make_kernel, make_launch, make_op, make_step,
                     write_trace)
from tracekit import report as report_mod
from tracekit.analyses import attribution, op_tree
from tracekit.load import load

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
GELU = "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"


def _linear_step(step: int, t0: float, corr: int) -> list[dict]:
    """One eager nn.Linear-like step: aten::linear -> aten::t (no kernel) + aten::matmul -> aten::mm
    with a memset before a cuLaunchKernelEx GEMM, all inside an ``mlp_fwd`` annotation."""
    return [
        make_step(step, t0, 100),
        make_annotation("mlp_fwd", t0 + 1, 90),
        make_op("aten::linear", t0 + 2, 80),
        make_op("aten::t", t0 + 3, 10),
        make_op("aten::transpose", t0 + 4, 8),
        make_op("aten::as_strided", t0 + 5, 2),
        make_op("aten::matmul", t0 + 20, 60),
        make_op("aten::mm", t0 + 21, 50),
        make_launch("cudaMemsetAsync", t0 + 22, 3, corr),
        make_launch("cuLaunchKernelEx", t0 + 30, 5, corr + 1, cat="cuda_driver"),
        make_kernel("Memset (Device)", t0 + 40, 1, corr, kind="memset"),
        make_kernel(NVJET, t0 + 42, 20, corr + 1),
    ]


@pytest.fixture()
def linear_trace(tmp_path):
    events = _linear_step(1, 1000.0, 10) + _linear_step(2, 2000.0, 20)
    return load(write_trace(tmp_path / "linear.json", events))


def test_launch_nested_in_innermost_cpu_op(linear_trace):
    tree = op_tree.build(linear_trace)
    launch = tree.launches.filter(pl.col("name") == "cuLaunchKernelEx").row(0, named=True)
    assert (launch["cpu_op"], launch["top_op"], launch["annotation"]) == ("aten::mm", "aten::linear", "mlp_fwd")
    as_strided = tree.ops.filter(pl.col("name") == "aten::as_strided").row(0, named=True)
    assert as_strided["depth"] == 5  # step > mlp_fwd > linear > t > transpose > as_strided
    assert as_strided["top_op"] == "aten::linear"


def test_gemm_attributed_with_hidden_memset(linear_trace):
    gpu = attribution.analyze(linear_trace).gpu
    gemm = gpu.filter((pl.col("name") == NVJET) & (pl.col("step") == 1)).row(0, named=True)
    assert gemm["launch_api"] == "cuLaunchKernelEx"
    assert gemm["cpu_op"] == "aten::mm"
    assert gemm["aux_before"] == "cudaMemsetAsync"
    assert gemm["kernel_class"] == "gemm" and gemm["library"] == "cublasLt"
    assert gemm["link"] == "correlation"


def test_zero_kernel_ops_listed_with_count_and_cpu_time(linear_trace):
    report = report_mod.build(linear_trace)
    zero = {r["name"]: (r["count"], r["cpu_ns"]) for r in report.zero_kernel_ops.iter_rows(named=True)}
    assert zero == {"aten::t": (2, 20_000), "aten::transpose": (2, 16_000), "aten::as_strided": (2, 4_000)}


def test_step_table_counts_kernels_not_memsets(linear_trace):
    report = report_mod.build(linear_trace)
    rows = report.steps.to_dicts()
    assert [r["number"] for r in rows] == [1, 2]
    assert all(r["kernel_count"] == 1 and r["gpu_activity_count"] == 2 for r in rows)
    assert rows[0]["gpu_busy_ns"] == 21_000  # memset 1 µs + GEMM 20 µs, disjoint
    assert rows[0]["dur_ns"] == 100_000


def test_path_table_shows_launch_with_memset(linear_trace):
    report = report_mod.build(linear_trace)
    assert report.path_step == 2
    row = report.paths.row(0, named=True)
    assert (row["scope"], row["top_op"], row["cpu_op"], row["launch"]) == (
        "mlp_fwd", "aten::linear", "aten::mm", "cuLaunchKernelEx (+ memset)")


def test_step_filter_and_unknown_step(linear_trace):
    report = report_mod.build(linear_trace, step=1)
    assert report.steps["number"].to_list() == [1]
    assert report.zero_kernel_ops.filter(pl.col("name") == "aten::t")["count"].to_list() == [1]
    with pytest.raises(Exception, match="step 7 is not in"):
        report_mod.build(linear_trace, step=7)


def test_cuda_graph_replay_attributed_to_graph_launch(tmp_path):
    events = [
        make_step(5, 0.0, 100),
        make_op("aten::_foreach_copy_", 1, 5),
        make_launch("cudaLaunchKernel", 2, 2, 1),
        make_kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<>", 10, 1, 1),
        make_op("CUDAGraphNode.replay", 10, 20),
        make_launch("cudaGraphLaunch", 11, 8, 2),
        make_kernel(NVJET, 20, 10, 2),
        make_kernel("triton_poi_fused__unsafe_view_gelu_mul_0", 31, 5, 2),
        make_kernel(NVJET, 37, 10, 2),
    ]
    gpu = attribution.analyze(load(write_trace(tmp_path / "g.json", events))).gpu
    replay = gpu.filter(pl.col("launch_api") == "cudaGraphLaunch")
    assert replay.height == 3
    assert set(replay["cpu_op"].to_list()) == {"CUDAGraphNode.replay"}
    assert replay["step"].to_list() == [5, 5, 5]


def test_flow_fallback_when_correlation_missing(tmp_path):
    # 2021-era shape: the kernel has no correlation arg; only the ac2g flow links it.
    events = [
        make_op("aten::add", 0.0, 20),
        make_launch("cudaLaunchKernel", 5, 3, 42),
        make_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >", 30, 2, None),
        *make_flow(42, 5, 30),
    ]
    gpu = attribution.analyze(load(write_trace(tmp_path / "f.json", events))).gpu
    row = gpu.row(0, named=True)
    assert (row["link"], row["launch_api"], row["cpu_op"]) == ("flow", "cudaLaunchKernel", "aten::add")


def test_occupancy_query_flagged_on_following_launch(tmp_path):
    events = [
        make_op("aten::mm", 0.0, 50),
        make_launch("cudaOccupancyMaxActiveBlocksPerMultiprocessor", 1, 1, 7),
        make_launch("cudaLaunchKernel", 5, 3, 8),
        make_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", 10, 5, 8),
    ]
    gpu = attribution.analyze(load(write_trace(tmp_path / "o.json", events))).gpu
    row = gpu.row(0, named=True)
    assert row["occupancy_query"] is True
    assert row["aux_before"] == "cudaOccupancyMaxActiveBlocksPerMultiprocessor"


def test_overlapping_streams_busy_is_union(tmp_path):
    events = [
        make_step(1, 0.0, 100),
        make_op("aten::add", 1, 10),
        make_launch("cudaLaunchKernel", 2, 1, 1),
        make_launch("cudaLaunchKernel", 4, 1, 2),
        make_kernel("k1_kernel", 10, 10, 1, stream=7),
        make_kernel("k2_kernel", 15, 10, 2, stream=8),  # overlaps k1 by 5 µs
    ]
    report = report_mod.build(load(write_trace(tmp_path / "u.json", events)))
    assert report.steps["gpu_busy_ns"].to_list() == [15_000]


def test_compile_preops_per_step_with_hash(tmp_path):
    events = [
        make_step(3, 0.0, 100),
        make_op("TorchDynamo Cache Lookup", 1, 2),
        make_annotation("Torch-Compiled Region: 0/0", 4, 50),
        make_op("Pregraph bytecode", 5, 1),
        make_op("AOTDispatcher Runtime Wrapper Prologue", 7, 2),
        make_annotation("## Call CompiledFxGraph fabc123 ##", 10, 30),
    ]
    report = report_mod.build(load(write_trace(tmp_path / "c.json", events)))
    pre = report.compile_preops.to_dicts()
    assert [(r["kind"], r["cpu_ns"]) for r in pre] == [
        ("cache_lookup", 2000), ("compiled_region", 50_000), ("pregraph_bytecode", 1000),
        ("aot_prologue", 2000), ("call_compiled_graph", 30_000)]
    assert report.facts.graph_hashes == ["fabc123"]
