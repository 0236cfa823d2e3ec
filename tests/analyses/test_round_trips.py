"""Round trips and traffic models: rule-level tests on tiny traces, then the H200 sample traces.

Real-trace figures were checked by hand: 50,331,648 = 8192 × 3072 × 2 bytes (bf16); the eager GeGLU
MLP writes gate and up (two mm outputs), the GeLU output and the product, and reads each back once;
compiled (Inductor) and Liger never write the GeLU output, so three remain.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from factory import make_kernel, make_launch, make_op, make_step, write_trace
from tracekit import execution_trace as et_mod
from tracekit.analyses import attribution, round_trips, traffic
from tracekit.analyses.traffic import TensorSpec
from tracekit.load import load

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
BF16 = "c10::BFloat16"
GATE_BYTES = 8192 * 3072 * 2


def op_kernel(name: str, ts: float, corr: int, dims: list, types: list, kernel: str, *, rf: int | None = None,
              kernel_ts: float | None = None) -> list[dict]:
    """A cpu_op with shapes, its launch and its kernel (the kernel 50 µs later unless given)."""
    args = {"Input Dims": dims, "Input type": types, "External id": corr}
    if rf is not None:
        args["Record function id"] = rf
    return [
        make_op(name, ts, 10, **args),
        make_launch("cudaLaunchKernel", ts + 1, 2, corr),
        make_kernel(kernel, kernel_ts if kernel_ts is not None else ts + 50, 5, corr),
    ]


def run(tmp_path, events, et=None) -> round_trips.RoundTripReport:
    trace = load(write_trace(tmp_path / "t.json", events))
    return round_trips.analyze(trace, attribution.analyze(trace), execution_trace=et)


def traffic_row(report, kernel: str) -> dict:
    return report.traffic.filter(pl.col("name") == kernel).row(0, named=True)


# -- per-op models -------------------------------------------------------------------------------

def test_broadcasting_binary_reads_each_operand_at_its_size_and_writes_the_broadcast_shape(tmp_path):
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::mm", 10, 1, [[4, 16], [16, 8]], [BF16, BF16], "gemm_k"),
              *op_kernel("aten::add", 100, 2, [[4, 8], [8], []], [BF16, BF16, "Scalar"], "add_k")]
    report = run(tmp_path, events)
    add = traffic_row(report, "add_k")
    assert (add["model"], add["bytes_read"], add["bytes_written"], add["flops"]) == (
        "elementwise_binary", (32 + 8) * 2, 32 * 2, 32)
    mm = traffic_row(report, "gemm_k")
    assert (mm["bytes_read"], mm["bytes_written"], mm["flops"]) == ((64 + 128) * 2, 64, 2 * 4 * 8 * 16)
    # The mm output is read back by the add; the [8] bias was never written by a kernel of the step.
    assert report.tensors.select("producer_op", "consumer_op", "shape", "dtype", "bytes").rows() == [
        ("aten::mm", "aten::add", "[4, 8]", "bf16", 64)]
    assert report.bytes_per_step.rows() == [(1, 64, 1, 0)]
    assert report.method == "shape_inference"


def test_broadcast_shapes_and_type_promotion():
    t = traffic.model("aten::mul", [TensorSpec((2, 1, 8), BF16), TensorSpec((3, 1), "float")])
    assert t.writes[0].tensor == TensorSpec((2, 3, 8), "float")
    assert (t.bytes_read, t.bytes_written) == (16 * 2 + 3 * 4, 48 * 4)
    eq = traffic.model("aten::eq", [TensorSpec((4,), BF16), TensorSpec((4,), BF16)])
    assert eq.writes[0].tensor.dtype == "bool" and eq.bytes_written == 4
    assert traffic.model("aten::add", [TensorSpec((3,), BF16), TensorSpec((4,), BF16)]) is None


def test_inplace_elementwise_writes_its_first_argument():
    t = traffic.model("aten::add_", [TensorSpec((4, 8), BF16), TensorSpec((8,), BF16), None])
    assert t.writes[0].arg == 0 and t.writes[0].output is None
    assert (t.bytes_read, t.bytes_written) == ((32 + 8) * 2, 64)


def test_copy_reads_src_writes_self_and_clone_keeps_shape(tmp_path):
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::copy_", 10, 1, [[4, 8], [4, 8], []], [BF16, "float", "Scalar"], "copy_k")]
    row = traffic_row(run(tmp_path, events), "copy_k")
    assert (row["model"], row["bytes_read"], row["bytes_written"], row["dtype"]) == ("copy", 128, 64, "bf16")
    clone = traffic.model("aten::clone", [TensorSpec((5, 5), "float"), None])
    assert (clone.bytes_read, clone.bytes_written) == (100, 100)
    fill = traffic.model("aten::fill_", [TensorSpec((10,), BF16), None])
    assert (fill.bytes_read, fill.bytes_written) == (0, 20)


def test_addmm_reads_bias_and_writes_out_argument_when_given(tmp_path):
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::addmm", 10, 1, [[8], [4, 16], [16, 8], [], []],
                         [BF16, BF16, BF16, "Scalar", "Scalar"], "addmm_k")]
    row = traffic_row(run(tmp_path, events), "addmm_k")
    assert (row["model"], row["bytes_read"], row["bytes_written"], row["flops"]) == (
        "addmm", (8 + 64 + 128) * 2, 32 * 2, 2 * 4 * 8 * 16)
    # Inductor's addmm.out: the sixth argument is the output buffer, written and not read.
    out = traffic.model("aten::addmm", traffic.args_from_kineto(
        json.dumps([[8], [4, 16], [16, 8], [], [], [4, 8]]),
        json.dumps([BF16, BF16, BF16, "Scalar", "Scalar", BF16])))
    assert out.bytes_read == (8 + 64 + 128) * 2 and out.writes[0].arg == 5


def test_gemm_flops_for_linear_matmul_and_bmm():
    lin = traffic.model("aten::linear", [TensorSpec((64, 128, 768), BF16), TensorSpec((3072, 768), BF16), None])
    assert lin.flops == 2 * 8192 * 3072 * 768 and lin.writes[0].tensor.shape == (64, 128, 3072)
    bmm = traffic.model("aten::bmm", [TensorSpec((4, 64, 32), BF16), TensorSpec((4, 32, 16), BF16)])
    assert bmm.flops == 2 * 4 * 64 * 16 * 32 and bmm.writes[0].tensor.shape == (4, 64, 16)
    mm = traffic.model("aten::matmul", [TensorSpec((2, 1, 64, 32), BF16), TensorSpec((3, 32, 16), BF16)])
    assert mm.writes[0].tensor.shape == (2, 3, 64, 16) and mm.flops == 2 * 6 * 64 * 16 * 32
    assert traffic.model("aten::mm", [TensorSpec((4, 5), BF16), TensorSpec((6, 7), BF16)]) is None


def test_unknown_op_is_counted_unknown_not_guessed(tmp_path):
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::mm", 10, 1, [[4, 16], [16, 8]], [BF16, BF16], "gemm_k"),
              *op_kernel("aten::frobnicate", 100, 2, [[4, 8]], [BF16], "mystery_k"),
              *op_kernel("aten::frobnicate", 200, 3, [[4, 8]], [BF16], "mystery_k")]
    report = run(tmp_path, events)
    rows = report.traffic.filter(pl.col("name") == "mystery_k")
    assert rows["model"].to_list() == ["unknown", "unknown"]
    assert rows["bytes_read"].null_count() == 2 and rows["flops"].null_count() == 2
    assert report.unknown_ops.rows() == [("aten::frobnicate", 2)]
    assert report.bytes_per_step.rows() == [(1, 0, 0, 2)]


def test_inductor_pointwise_writes_first_arg_in_place_or_last_arg_out(tmp_path):
    types = [BF16, BF16, "Scalar"]
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::mm", 10, 1, [[4, 16], [16, 8]], [BF16, BF16], "gemm_a"),
              *op_kernel("aten::mm", 100, 2, [[4, 16], [16, 8]], [BF16, BF16], "gemm_b"),
              # both arguments live: in_out_ptr0 + in_ptr0 → reads 2, writes 1
              *op_kernel("triton_poi_fused_mul_0", 200, 3, [[4, 8], [4, 8], []], types, "triton_poi_fused_mul_0"),
              # last argument holds nothing of this step: out_ptr0, write-only
              *op_kernel("triton_poi_fused_relu_1", 300, 4, [[4, 8], [4, 8], []], [BF16, "float", "Scalar"],
                         "triton_poi_fused_relu_1")]
    report = run(tmp_path, events)
    fused = traffic_row(report, "triton_poi_fused_mul_0")
    assert (fused["model"], fused["bytes_read"], fused["bytes_written"]) == ("inductor_pointwise", 128, 64)
    relu = traffic_row(report, "triton_poi_fused_relu_1")
    assert (relu["bytes_read"], relu["bytes_written"]) == (64, 128)
    assert report.bytes_per_step["tensor_count"].to_list() == [3]
    assert traffic.model("triton_red_fused_sum_0", [TensorSpec((4, 8), BF16)]) is None


def test_cuda_graph_replay_kernels_are_unknown_and_flagged(tmp_path):
    events = [make_step(1, 0, 1000),
              make_op("Torch-Compiled Region: 0/0", 5, 100),
              make_launch("cudaGraphLaunch", 10, 5, 7),
              make_kernel("nvjet_sm90_tst_x", 50, 5, 7),
              make_kernel("triton_poi_fused_y", 60, 5, 7)]
    report = run(tmp_path, events)
    assert report.traffic["op"].to_list() == ["cudaGraphLaunch", "cudaGraphLaunch"]
    assert report.traffic["model"].to_list() == ["unknown", "unknown"]
    assert report.unknown_ops.rows() == [("cudaGraphLaunch", 2)]
    assert report.bytes_per_step.rows() == [(1, 0, 0, 2)]


def test_multi_kernel_op_reads_at_first_kernel_and_writes_at_last(tmp_path):
    events = [make_step(1, 0, 1000),
              make_op("aten::gelu", 10, 20, **{"Input Dims": [[4, 8], []], "Input type": [BF16, ""]}),
              make_launch("cudaLaunchKernel", 11, 2, 1), make_kernel("part_a", 50, 5, 1),
              make_launch("cudaLaunchKernel", 14, 2, 2), make_kernel("part_b", 60, 5, 2),
              make_launch("cudaLaunchKernel", 17, 2, 3), make_kernel("part_c", 70, 5, 3)]
    t = run(tmp_path, events).traffic
    assert t.select("model", "bytes_read", "bytes_written").rows() == [
        ("elementwise_unary/split", 64, 0), ("unknown", None, None), ("elementwise_unary/split", 0, 64)]


# -- exact links through an execution trace ----------------------------------------------------------

def _tensor(tid, sid, numel, itemsize=2):
    return [tid, sid, 0, numel, itemsize, "cuda:0"]


def _node(nid, name, rf, inputs, outputs=(), schema="", parent=1):
    return {"id": nid, "name": name, "ctrl_deps": parent,
            "inputs": {"values": [v for v, _, _ in inputs], "shapes": [s for _, s, _ in inputs],
                       "types": [t for _, _, t in inputs]},
            "outputs": {"values": [v for v, _, _ in outputs], "shapes": [s for _, s, _ in outputs],
                        "types": [t for _, _, t in outputs]},
            "attrs": [{"name": "rf_id", "type": "uint64", "value": rf},
                      {"name": "op_schema", "type": "string", "value": schema}]}


def test_execution_trace_follows_storage_reuse_where_shapes_cannot(tmp_path):
    """a = relu(x); b = relu(a) [a freed]; c = relu(y) reuses a's storage; d = b * c.

    Shapes alone cannot tell b's input (a) from c's storage reuse; the storage versions can: the mul
    reads b (written by the second relu) and c (third relu, in the reused storage 20)."""
    tt = "Tensor(c10::BFloat16)"
    events = [make_step(1, 0, 1000),
              *op_kernel("aten::relu", 10, 1, [[8]], [BF16], "relu_1", rf=11),
              *op_kernel("aten::relu", 100, 2, [[8]], [BF16], "relu_2", rf=12),
              *op_kernel("aten::relu", 200, 3, [[8]], [BF16], "relu_3", rf=13),
              *op_kernel("aten::mul", 300, 4, [[8], [8]], [BF16, BF16], "mul_4", rf=14)]
    nodes = [
        _node(2, "aten::relu", 11, [(_tensor(1, 10, 8), [8], tt)], [(_tensor(2, 20, 8), [8], tt)]),
        _node(3, "aten::relu", 12, [(_tensor(2, 20, 8), [8], tt)], [(_tensor(3, 30, 8), [8], tt)]),
        _node(4, "aten::relu", 13, [(_tensor(4, 40, 8), [8], tt)], [(_tensor(5, 20, 8), [8], tt)]),
        _node(5, "aten::mul", 14, [(_tensor(3, 30, 8), [8], tt), (_tensor(5, 20, 8), [8], tt)],
              [(_tensor(6, 60, 8), [8], tt)]),
    ]
    et = et_mod.from_data({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes})
    exact = run(tmp_path, events, et)
    assert exact.method == "execution_trace"
    assert exact.tensors.select("producer", "consumer").rows() == [
        ("relu_1", "relu_2"), ("relu_2", "mul_4"), ("relu_3", "mul_4")]
    # Shapes are identical everywhere, so inference links relu_3's input (y, never written in the
    # step) to relu_2's output too: the false link the exact method avoids.
    inferred = run(tmp_path, events)
    assert inferred.method == "shape_inference"
    assert inferred.tensors.select("producer", "consumer").rows() == [
        ("relu_1", "relu_2"), ("relu_2", "relu_3"), ("relu_3", "mul_4"), ("relu_2", "mul_4")]


def test_execution_trace_that_joins_nothing_falls_back_with_a_note(tmp_path):
    events = [make_step(1, 0, 1000), *op_kernel("aten::relu", 10, 1, [[8]], [BF16], "relu_1", rf=11)]
    et = et_mod.from_data({"schema": "x", "nodes": [_node(2, "aten::relu", 999, [])]})
    report = run(tmp_path, events, et)
    assert report.method == "shape_inference" and report.notes and "joins no op" in report.notes[0]


def test_empty_and_cpu_only_traces(tmp_path):
    report = run(tmp_path, [make_op("aten::relu", 0, 10)])
    assert report.traffic.height == 0 and report.tensors.height == 0
    assert list(report.traffic.schema) == list(round_trips.TRAFFIC_SCHEMA)
    assert list(report.tensors.schema) == list(round_trips.TENSORS_SCHEMA)
    assert report.bytes_per_step.height == 0 and report.unknown_ops.height == 0


# -- the H200 sample traces ------------------------------------------------------------------------

@pytest.fixture
def trips(sample):
    """``trips(name, use_et)``: the round trips of sample NAME (trace and execution trace loaded once
    per run), linked through its execution trace or inferred from shapes."""

    def of(name: str, use_et: bool) -> round_trips.RoundTripReport:
        session = sample(name)
        et = session.execution_trace if use_et else None
        assert et is not None or not use_et, session
        return round_trips.analyze(session.trace, attribution.analyze(session.trace), execution_trace=et)

    return of


@pytest.mark.parametrize("use_et", [True, False], ids=["execution_trace", "shape_inference"])
@pytest.mark.parametrize(("name", "count"), [("mlp_eager", 4), ("mlp_compile", 3), ("mlp_liger", 3)])
def test_geglu_mlp_round_trip_tensors_per_step(name, count, use_et, trips):
    report = trips(name, use_et)
    assert report.method == ("execution_trace" if use_et else "shape_inference")
    assert report.bytes_per_step.rows() == [(s, count * GATE_BYTES, count, 0) for s in (2, 3, 4)]
    assert set(report.tensors["bytes"].to_list()) == {GATE_BYTES}
    assert set(report.tensors["dtype"].to_list()) == {"bf16"}
    assert report.unknown_ops.height == 0


@pytest.mark.parametrize("use_et", [True, False], ids=["execution_trace", "shape_inference"])
def test_eager_links_are_gate_up_gelu_and_product(use_et, trips):
    rows = trips("mlp_eager", use_et).tensors.filter(pl.col("step") == 4)
    pairs = rows.select("producer_op", "consumer_op").rows()
    assert pairs == [("aten::mm", "aten::gelu"), ("aten::gelu", "aten::mul"), ("aten::mm", "aten::mul"),
                     ("aten::mul", "aten::mm")]
    assert rows["consumer"][3].startswith("nvjet_sm90_tst_192x128")  # down_proj reads the product


@pytest.mark.parametrize("use_et", [True, False], ids=["execution_trace", "shape_inference"])
def test_fused_variants_never_write_the_gelu_output(use_et, trips):
    for name, fused_op in (("mlp_compile", "triton_poi_fused__unsafe_view_gelu_mul_0"),
                           ("mlp_liger", "LigerGELUMulFunction")):
        rows = trips(name, use_et).tensors.filter(pl.col("step") == 4)
        assert rows.select("producer_op", "consumer_op").rows() == [
            ("aten::mm", fused_op), ("aten::mm", fused_op), (fused_op, "aten::mm")]


@pytest.mark.parametrize("use_et", [True, False], ids=["execution_trace", "shape_inference"])
def test_cudagraph_replay_hides_its_round_trips(use_et, trips):
    """The graph's four kernels carry only cudaGraphLaunch's correlation; neither Kineto nor the
    execution trace records their ops or tensors, so no link is claimed and the step says so."""
    report = trips("mlp_compile-cudagraphs", use_et)
    assert report.bytes_per_step.rows() == [(s, 0, 0, 4) for s in (2, 3, 4)]
    assert report.unknown_ops.rows() == [("cudaGraphLaunch", 12)]
    # The static-input copy right before each replay: the ET gives the TensorList's dtype, Kineto
    # none, but its kernel's name does (Copy<c10::BFloat16, c10::BFloat16>).
    copy = report.traffic.filter(pl.col("op") == "aten::_foreach_copy_")
    assert copy.select("model", "bytes_read", "bytes_written").rows() == [
        ("graph_input_copy", 64 * 128 * 768 * 2, 64 * 128 * 768 * 2)] * 3


def test_unfused_bias_add_is_a_round_trip_and_addmm_is_not(trips):
    eager = trips("matmul_add_eager-4096", True)
    assert eager.bytes_per_step["round_trip_bytes"].to_list() == [4096 * 4096 * 2] * 3
    assert trips("matmul_add_compile-4096", True).tensors.height == 0


def test_mlp_gemm_bytes_and_flops(trips):
    t = trips("mlp_eager", True).traffic
    gate = t.filter((pl.col("step") == 4) & (pl.col("kernel_class") == "gemm")).row(0, named=True)
    assert gate["flops"] == 2 * 8192 * 3072 * 768 == 38_654_705_664
    assert gate["bytes_read"] == (8192 * 768 + 768 * 3072) * 2 == 17_301_504
    assert gate["bytes_written"] == GATE_BYTES


@pytest.mark.slow
def test_every_sample_trace_analyses(sample):
    for path in sorted(SAMPLES.glob("*.json.gz")):
        if ".et." in path.name:
            continue
        trace = sample(path.name).trace
        report = round_trips.analyze(trace, attribution.analyze(trace))
        assert report.traffic.height == attribution.analyze(trace).gpu.filter(
            pl.col("kind").is_in(["kernel", "memcpy", "memset"])).height


def test_layer_norm_and_softmax_backward_models():
    ln = traffic.model("aten::native_layer_norm", traffic.args_from_kineto(
        "[[8, 512, 768], [], [768], [768], []]", '["float", "ScalarList", "float", "float", "Scalar"]'))
    n = 8 * 512 * 768
    assert ln.model == "layer_norm"
    assert ln.bytes_read == (n + 768 + 768) * 4
    assert ln.bytes_written == n * 4 + 2 * 8 * 512 * 4  # y, then fp32 mean and rstd [8, 512, 1]
    no_weight = traffic.args_from_kineto("[[8, 768], [], [], [], []]", '["float", "ScalarList", "", "", "Scalar"]')
    assert traffic.model("aten::native_layer_norm", no_weight) is None
    sb = traffic.model("aten::_log_softmax_backward_data", traffic.args_from_kineto(
        "[[4096, 50304], [4096, 50304], [], []]", '["float", "float", "Scalar", "Scalar"]'))
    assert (sb.bytes_read, sb.bytes_written) == (2 * 4096 * 50304 * 4, 4096 * 50304 * 4)
    # A dtype conversion's output dtype is not in Input Dims: _to_copy stays unknown.
    assert traffic.model("aten::_to_copy", [TensorSpec((4,), "float")]) is None


def test_trace_without_steps_links_within_one_null_step(tmp_path):
    events = [*op_kernel("aten::mm", 10, 1, [[4, 16], [16, 8]], [BF16, BF16], "gemm_k"),
              *op_kernel("aten::relu", 100, 2, [[4, 8]], [BF16], "relu_k")]
    report = run(tmp_path, events)
    assert report.bytes_per_step.rows() == [(None, 64, 1, 0)]
    assert report.tensors["step"].to_list() == [None]


def _copy(ts: float, corr: int, name: str, dims: list) -> list[dict]:
    """An ``aten::copy_`` whose GPU activity is a memcpy (``name``), not a kernel."""
    return [make_op("aten::copy_", ts, 10, **{"Input Dims": [dims, dims, []], "Input type": [BF16, BF16, "Scalar"],
                                              "External id": corr}),
            make_launch("cudaMemcpyAsync", ts + 1, 2, corr),
            make_kernel(name, ts + 50, 5, corr, kind="memcpy", bytes=2 * dims[0] * dims[1])]


def test_only_kernels_make_round_trips_not_copies(tmp_path):
    events = [make_step(1, 0, 2000),
              *op_kernel("aten::mm", 10, 1, [[4, 16], [16, 8]], [BF16, BF16], "gemm_k"),  # writes [4, 8]
              *_copy(100, 2, "Memcpy DtoH (Device -> Pinned)", [4, 8]),   # a copy reads it: no round trip
              *op_kernel("aten::relu", 200, 3, [[4, 8]], [BF16], "relu_k"),  # a kernel reads it: a round trip
              *_copy(300, 4, "Memcpy HtoD (Pinned -> Device)", [2, 2]),   # input data arrives by copy
              *op_kernel("aten::neg", 400, 5, [[2, 2]], [BF16], "neg_k")]    # reading it is no round trip
    report = run(tmp_path, events)
    # By hand: one [4, 8] bf16 tensor = 64 B, written by the GEMM and read back by relu; the DtoH copy
    # that read it first and the HtoD copy that wrote neg's input are not kernels.
    assert report.tensors.select("producer", "consumer", "bytes").rows() == [("gemm_k", "relu_k", 64)]
    assert report.bytes_per_step.rows() == [(1, 64, 1, 0)]


def test_memsets_beside_an_ops_kernels_are_their_own_rows_and_the_last_kernel_produces(tmp_path):
    """An op launching memset, kernel, memset: the kernel is the call, both memsets stand alone,
    and the consumer's link names the kernel (not the trailing memset) as producer."""
    events = [make_step(1, 0, 1000),
              make_op("aten::mm", 10, 20, **{"Input Dims": [[4, 16], [16, 8]], "Input type": [BF16, BF16],
                                              "External id": 1}),
              make_launch("cudaMemsetAsync", 11, 2, 1), make_kernel("Memset (Device)", 40, 1, 1, kind="memset",
                                                                  bytes=32),
              make_launch("cudaLaunchKernel", 14, 2, 2), make_kernel("gemm_k", 50, 5, 2),
              make_launch("cudaMemsetAsync", 17, 2, 3), make_kernel("Memset (Device)", 60, 1, 3, kind="memset",
                                                                  bytes=16),
              *op_kernel("aten::relu", 100, 4, [[4, 8]], [BF16], "relu_k")]
    report = run(tmp_path, events)
    assert report.traffic.select("name", "op", "model", "bytes_read", "bytes_written").rows() == [
        ("Memset (Device)", "aten::mm", "memset", 0, 32), ("gemm_k", "aten::mm", "mm", 384, 64),
        ("Memset (Device)", "aten::mm", "memset", 0, 16), ("relu_k", "aten::relu", "elementwise_unary", 64, 64)]
    assert report.tensors.select("producer", "consumer", "bytes").rows() == [("gemm_k", "relu_k", 64)]


def _two_op_step(number: int, t0: float, corr: int, relu_kernel: str) -> list[dict]:
    return [make_step(number, t0, 1000),
            *op_kernel("aten::mm", t0 + 10, corr, [[4, 16], [16, 8]], [BF16, BF16], "gemm_k"),
            *op_kernel("aten::relu", t0 + 100, corr + 1, [[4, 8]], [BF16], relu_kernel)]


def test_repeated_steps_link_alike_and_a_changed_step_is_linked_afresh(tmp_path):
    """Steps 1 and 2 are the same calls (step 2 reuses step 1's links); step 3 differs only in a
    kernel's name, which must show in its own links."""
    events = [*_two_op_step(1, 0, 1, "relu_k"), *_two_op_step(2, 2000, 10, "relu_k"),
              *_two_op_step(3, 4000, 20, "relu_other")]
    report = run(tmp_path, events)
    assert report.tensors.select("step", "producer", "consumer", "consumer_op", "shape").rows() == [
        (1, "gemm_k", "relu_k", "aten::relu", "[4, 8]"), (2, "gemm_k", "relu_k", "aten::relu", "[4, 8]"),
        (3, "gemm_k", "relu_other", "aten::relu", "[4, 8]")]
    assert report.bytes_per_step.rows() == [(1, 64, 1, 0), (2, 64, 1, 0), (3, 64, 1, 0)]
