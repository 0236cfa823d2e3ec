"""Rule-level tests of the op tree, GPU attribution, steps and dispatch analyses on tiny traces."""

from __future__ import annotations

import polars as pl
import pytest

import tracekit
from factory import (make_annotation, make_flow, make_kernel, make_launch, make_op, make_step, span,
                     write_trace)
from tracekit.results import report as report_mod
from tracekit.analyses import attribution, op_tree, pipeline
from tracekit.analyses import units as units_mod
from tracekit.errors import UsageError
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
    report = report_mod.build(pipeline.run(linear_trace))
    zero = {r["name"]: (r["count"], r["cpu_ns"]) for r in report.zero_kernel_ops.iter_rows(named=True)}
    assert zero == {"aten::t": (2, 20_000), "aten::transpose": (2, 16_000), "aten::as_strided": (2, 4_000)}


def test_step_table_counts_kernels_not_memsets(linear_trace):
    report = report_mod.build(pipeline.run(linear_trace))
    rows = report.steps.to_dicts()
    assert [r["number"] for r in rows] == [1, 2]
    assert all(r["kernel_count"] == 1 and r["gpu_activity_count"] == 2 for r in rows)
    assert rows[0]["gpu_busy_ns"] == 21_000  # memset 1 µs + GEMM 20 µs, disjoint
    assert rows[0]["dur_ns"] == 100_000


def test_path_table_shows_launch_with_memset(linear_trace):
    report = report_mod.build(pipeline.run(linear_trace))
    assert report.path_step == 2
    row = report.paths.row(0, named=True)
    assert (row["scope"], row["top_op"], row["cpu_op"], row["launch"]) == (
        "mlp_fwd", "aten::linear", "aten::mm", "cuLaunchKernelEx (+ memset)")


def test_step_filter_and_unknown_step(linear_trace):
    report = report_mod.build(pipeline.run(linear_trace), step=1)
    assert report.steps["number"].to_list() == [1]
    assert report.zero_kernel_ops.filter(pl.col("name") == "aten::t")["count"].to_list() == [1]
    with pytest.raises(Exception, match="step 7 is not in"):
        report_mod.build(pipeline.run(linear_trace), step=7)


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
    report = report_mod.build(pipeline.run(load(write_trace(tmp_path / "u.json", events))))
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
    report = report_mod.build(pipeline.run(load(write_trace(tmp_path / "c.json", events))))
    pre = report.compile_preops.to_dicts()
    assert [(r["kind"], r["cpu_ns"]) for r in pre] == [
        ("cache_lookup", 2000), ("compiled_region", 50_000), ("pregraph_bytecode", 1000),
        ("aot_prologue", 2000), ("call_compiled_graph", 30_000)]
    assert report.facts.graph_hashes == ["fabc123"]


# -- GPU work launched before the trace began --------------------------------------------------------

def test_work_without_a_launch_call_belongs_to_no_step(tmp_path):
    # Two kernels of correlation 3 and 4 finish inside ProfilerStep#1 but were launched before the
    # profiler started (no launch call, no flow); correlation 20 is missing from the launches too,
    # though later ones are recorded: its launch record was lost.
    events = [
        make_step(1, 0.0, 100),
        make_kernel("early_a_kernel", 2, 4, 3),
        make_kernel("early_b_kernel", 5, 4, 4),           # overlaps early_a by 1 µs
        make_op("aten::add", 10, 10),
        make_launch("cudaLaunchKernel", 11, 2, 10),
        make_kernel("own_kernel", 20, 5, 10),
        make_kernel("lost_kernel", 30, 2, 20),
        make_launch("cudaLaunchKernel", 40, 2, 30),
        make_kernel("late_kernel", 45, 3, 30),
    ]
    report = report_mod.build(pipeline.run(load(write_trace(tmp_path / "o.json", events))))
    # Only own_kernel and late_kernel were launched in the step: 5 + 3 µs busy, 2 kernels.
    step = report.steps.row(0, named=True)
    assert (step["kernel_count"], step["gpu_busy_ns"]) == (2, 8_000)
    assert report.orphans.select("reason", "kind", "count", "dur_ns", "busy_ns").rows() == [
        ("before_trace", "kernel", 2, 8_000, 7_000), ("launch_missing", "kernel", 1, 2_000, 2_000)]
    assert report.attribution.gpu.filter(pl.col("launch_idx").is_null())["step"].to_list() == [None] * 3


# -- units without ProfilerStep ---------------------------------------------------------------------

def _iteration(t0: float, corr: int, *, name: str = "mlp_fwd", tid: int = 100) -> list[dict]:
    """One annotated iteration: two kernels launched inside ``name``."""
    return [
        span("user_annotation", name, t0, 50, tid=tid),
        make_op("aten::mm", t0 + 1, 20, tid=tid),
        make_launch("cudaLaunchKernel", t0 + 2, 2, corr, tid=tid),
        make_kernel(NVJET, t0 + 5, 10, corr),
        make_op("aten::relu", t0 + 25, 20, tid=tid),
        make_launch("cudaLaunchKernel", t0 + 26, 2, corr + 1, tid=tid),
        make_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel>", t0 + 30, 5, corr + 1),
    ]


def _units(tmp_path, events, unit=None):
    trace = load(write_trace(tmp_path / "u.json", events))
    return units_mod.detect(trace, attribution.analyze(trace).gpu, unit)


def test_repeating_annotation_becomes_the_units(tmp_path):
    events = [e for i in range(4) for e in _iteration(100.0 * i, 10 * i + 1)]
    events += [make_annotation("log_metrics", 390, 5)]  # repeats never, covers nothing
    found = _units(tmp_path, events)
    assert (found.kind, found.name, found.source) == ("span", "mlp_fwd", "auto")
    assert found.windows["name"].to_list() == ["mlp_fwd#1", "mlp_fwd#2", "mlp_fwd#3", "mlp_fwd#4"]
    assert found.candidates.row(0, named=True)["coverage"] == 1.0
    report = report_mod.build(pipeline.run(load(write_trace(tmp_path / "r.json", events))))
    assert report.steps["kernel_count"].to_list() == [2, 2, 2, 2]
    assert report.launch_gaps.per_step.height == 4 and report.facts.step_numbers == [1, 2, 3, 4]


def test_an_enclosing_loop_wins_over_the_spans_inside_it(tmp_path):
    # "iteration" x2 each holding two "layer" spans: both cover every launch; the loop repeats less.
    events = []
    for i in range(2):
        t0 = 200.0 * i
        events += [make_annotation("iteration", t0, 150)]
        events += _iteration(t0 + 1, 10 * i + 1, name="layer") + _iteration(t0 + 70, 10 * i + 5, name="layer")
    assert _units(tmp_path, [make_annotation("benchmark", -1, 500)] + events).name == "iteration"


def test_an_aten_op_that_holds_most_kernels_is_not_an_iteration(tmp_path):
    # aten::mm repeats and holds half the launches, but is not a user annotation or a top-level op
    # that covers >= 80 %: nothing repeats enough, one top-level annotation holds everything.
    events = [make_annotation("forward", 0, 500)] + [e for i in range(4) for e in _iteration(100.0 * i + 1, 10 * i + 1,
                                                                                               name="block")]
    events = [e for e in events if e.get("name") != "block"]
    found = _units(tmp_path, events)
    assert (found.kind, found.name, found.windows.height) == ("span", "forward", 1)
    assert "one iteration" in found.rule


def test_iteration_markers_delimit_units_when_no_span_holds_one(tmp_path):
    events = []
    for i in range(3):
        t0 = 100.0 * i
        events += [make_annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0, 3)]
        events += [e for e in _iteration(t0 + 5, 10 * i + 1) if e.get("name") != "mlp_fwd"]
        events += [make_annotation("Optimizer.step#SGD.step", t0 + 60, 5)]
    found = _units(tmp_path, events)
    assert (found.kind, found.name, found.partial) == ("period", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", (3,))
    assert found.windows.select("name", "ts", "end").rows() == [
        ("iteration#1", 0, 100_000), ("iteration#2", 100_000, 200_000), ("iteration#3", 200_000, 265_000)]


def test_whole_trace_when_nothing_repeats_or_covers(tmp_path):
    events = [e for i in range(2) for e in _iteration(100.0 * i, 10 * i + 1)]
    events = [e for e in events if e.get("name") != "mlp_fwd"]
    found = _units(tmp_path, events)
    # From the first CPU event (aten::mm at 1 µs) to the last one's end (relu, 125 + 20 µs).
    assert (found.kind, found.windows["number"].to_list(), found.windows["name"].to_list()) == (
        "trace", [0], ["whole trace"])
    assert found.windows.row(0, named=True)["ts"] == 1_000 and found.windows.row(0, named=True)["end"] == 145_000


def test_unit_option_and_profiler_steps_and_busiest_thread(tmp_path):
    events = [make_step(1, 0, 1000)] + [e for i in range(3) for e in _iteration(100.0 * i + 1, 10 * i + 1)]
    assert _units(tmp_path, events).kind == "ProfilerStep"
    found = _units(tmp_path, events, "mlp_fwd")
    assert (found.kind, found.source, found.windows.height) == ("span", "user", 3)
    with pytest.raises(UsageError, match="no span named 'nope'"):
        _units(tmp_path, events, "nope")
    # The same name on a second thread overlapping the first's spans: the busier thread's are used.
    other = [span("user_annotation", "mlp_fwd", 10, 30, tid=200)]
    assert _units(tmp_path, events + other, "mlp_fwd").windows["tid"].unique().to_list() == ["100"]


def test_same_units_for_report_diff_and_check(tmp_path):
    events = [e for i in range(3) for e in _iteration(100.0 * i, 10 * i + 1)]
    path = write_trace(tmp_path / "s.json", events)
    session = tracekit.open(path, execution_trace=None)
    p = session.profile()
    assert (p.unit_kind, p.units) == ("mlp_fwd", [1, 2, 3])
    assert p.per_unit["kernels"].to_list() == session.report().steps["kernel_count"].cast(pl.Int64).to_list()
    assert not p.unavailable  # dispatch, idle and round trips per unit too


def test_compiling_and_cold_units_are_flagged_and_left_out_of_diff_medians(tmp_path):
    events = []
    for i in range(4):
        events += _iteration(100.0 * i, 10 * i + 1)
    # Unit 1 compiles (a Dynamo phase span inside it).
    events += [make_op("_compile.compile_inner (dynamo_timed)", 2, 10)]
    session = tracekit.open(write_trace(tmp_path / "c.json", events), execution_trace=None)
    flags = session.report().launch_gaps.per_step
    assert flags.filter(pl.col("compile"))["step"].to_list() == [1]
    assert flags["steady"].to_list() == [False, True, True, True]
    p = session.profile()
    assert p.units == [2, 3, 4] and p.excluded == {1: "compiling"}


# -- GPU time by class, library and stream ----------------------------------------------------------

def test_class_and_stream_shares_of_busy_time_and_overlap(tmp_path):
    events = [
        make_step(1, 0, 200),
        make_op("aten::mm", 1, 5), make_launch("cudaLaunchKernel", 2, 1, 1),
        make_op("nccl:all_reduce", 10, 5), make_launch("cudaLaunchKernel", 11, 1, 2),
        make_kernel(NVJET, 20, 40, 1, stream=7),                                       # 20..60
        make_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 50, 30, 2,
                    stream=9),                                                      # 50..80
    ]
    found = report_mod.build(pipeline.run(load(write_trace(tmp_path / "b.json", events)))).breakdown
    shares = {(r["group"], r["key"]): r for r in found.shares.filter(pl.col("scope") == "trace").iter_rows(named=True)}
    # Busy = union 20..80 = 60 µs; the GEMM 40 µs = 2/3, NCCL 30 µs = 1/2 (shares overlap: sum > 1).
    assert shares[("class", "gemm")]["busy_share"] == pytest.approx(40 / 60)
    assert shares[("class", "communication")]["busy_share"] == pytest.approx(30 / 60)
    assert shares[("library", "nccl")]["gpu_ns"] == 30_000
    assert found.streams.filter(pl.col("scope") == "trace").select("stream", "busy_ns").rows() == [(7, 40_000), (9, 30_000)]
    # Communication 50..80 overlaps compute 20..60 for 10 µs: 1/3.
    overlap = found.overlap.filter(pl.col("scope") == "trace").row(0, named=True)
    assert (overlap["overlapped_ns"], overlap["overlap_frac"]) == (10_000, pytest.approx(1 / 3))
    assert found.shares.filter(pl.col("scope") == "unit")["unit"].unique().to_list() == [1]


def test_rocm_collective_kernels_are_rccl_whether_or_not_their_launch_is_in_the_trace(tmp_path):
    """Family: NCCL-named kernels on ROCm. RCCL keeps NCCL's kernel names; a ROCm trace (roctracer metadata, an
    MI300X in deviceProperties, HIP launch calls) often opens with a collective launched before profiling began
    (no launch call, no correlation match) and then the same kernel launched by hipExtLaunchKernel. Both are
    RCCL's: the library table must not split one library in two."""
    import json

    rccl = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
    events = [
        make_kernel(rccl, 1, 20, 3, stream=0),                      # launched before the trace: no launch call
        make_step(1, 30, 100),
        make_op("record_param_comms", 31, 10), make_launch("hipExtLaunchKernel", 32, 2, 7),
        make_kernel(rccl, 40, 30, 7, stream=0),
        make_op("aten::mm", 50, 5), make_launch("hipExtModuleLaunchKernel", 51, 2, 8),
        make_kernel("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_GRVW8", 60, 15, 8, stream=1),
    ]
    top = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000, "roctracer_version": 4.1,
           "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4,
                                 "numSms": 304, "totalGlobalMem": 205_822_885_888}],
           "traceEvents": events}
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps(top))
    trace = load(path)
    assert trace.meta.vendor == "amd"
    gpu = attribution.analyze(trace).gpu
    comm = gpu.filter(pl.col("kernel_class") == "communication")
    # one kernel without a launch call, one launched by hipExtLaunchKernel — one library
    assert comm.select("launch_api", "library").rows() == [(None, "rccl"), ("hipExtLaunchKernel", "rccl")]
    found = report_mod.build(pipeline.run(trace)).breakdown
    libraries = dict(found.shares.filter((pl.col("scope") == "trace") & (pl.col("group") == "library"))
                     .select("key", "gpu_ns").rows())
    assert libraries == {"rccl": 50_000, "rocblas": 15_000}
