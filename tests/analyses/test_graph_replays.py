"""CUDA-graph replays tied to the ops that captured them (tracekit.analyses.graph_replays).

Numbers checked by hand against the raw events of the shipped traces (sample_traces/graphs/ holds
H100 captures, the compile traces are the H200 ones) and of the public vLLM decode trace.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analyses import attribution
from tracekit.load import load, parquet

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
GRAPHS = SAMPLES / "graphs"
VLLM = "Navi-AI-Lab__nvllm__vllm-gb10-flashinfer-cudagraph-decode.json.gz"
MLP_TRIP = 50_331_648  # one [64, 128, 3072] bf16 tensor


def _graphs(path: Path, companion: Path | None = None):
    trace = load(path)
    other = attribution.companion_of(load(companion), str(companion)) if companion else None
    return attribution.analyze(trace, companion=other)


def test_capture_in_the_trace_ties_each_replayed_activity_to_its_op():
    found = _graphs(GRAPHS / "mlp_graph-capture.json.gz")
    table = found.graphs.graphs
    assert table.select("graph", "source", "match", "score", "replays", "activities_per_replay").row(0) == (
        "graph #1", "capture", "replay order", 1.0, 4, 7)
    assert found.graphs.captures == 1 and found.graphs.attributed_share == 1.0
    first = found.gpu.filter(pl.col("graph").is_not_null()).sort("ts").head(7)
    # capture#0's launch calls: mm (memset + GEMM), gelu, mm (memset + GEMM), mul, mm.
    assert first["cpu_op"].to_list() == ["aten::mm", "aten::mm", "aten::gelu", "aten::mm", "aten::mm",
                                         "aten::mul", "aten::mm"]
    assert set(first["annotation"].to_list()) == {"capture#0"}
    assert set(first["launch_api"].to_list()) == {"cudaGraphLaunch"}  # the launch stays the replay's


def test_replayed_round_trips_equal_the_eager_twins():
    graphed = tracekit.open(GRAPHS / "mlp_graph-capture.json.gz").analyses().round_trips.bytes_per_step
    eager = tracekit.open(GRAPHS / "mlp_graph-eager.json.gz").analyses().round_trips.bytes_per_step
    for table in (graphed, eager):
        steps = table.filter(pl.col("step").is_not_null())
        assert steps["tensor_count"].to_list() == [4, 4, 4, 4]
        assert steps["round_trip_bytes"].to_list() == [4 * MLP_TRIP] * 4
        assert steps["unknown_kernels"].to_list() == [0, 0, 0, 0]


def test_eager_companion_gives_the_compiled_graph_its_round_trips():
    session = tracekit.open(SAMPLES / "mlp_compile-cudagraphs.json.gz",
                            graph_companion=SAMPLES / "mlp_compile.json.gz")
    bundle = session.analyses()
    row = bundle.attribution.graphs.graphs.row(0, named=True)
    assert (row["source"], row["match"], row["score"], row["replays"], row["activities_per_replay"]) == (
        "companion", "kernel names", 1.0, 3, 6)
    trips = bundle.round_trips
    # Exactly the plain compile trace's: gate and up GEMM outputs into the fused kernel, its output
    # into the down GEMM — three [8192, 3072] bf16 tensors (8192 · 3072 · 2 B each) a step.
    assert MLP_TRIP == 8192 * 3072 * 2
    assert trips.bytes_per_step.select("tensor_count", "round_trip_bytes", "unknown_kernels").rows() == [
        (3, 3 * MLP_TRIP, 0)] * 3
    plain = tracekit.open(SAMPLES / "mlp_compile.json.gz").analyses().round_trips.bytes_per_step
    assert plain.select("tensor_count", "round_trip_bytes", "unknown_kernels").rows() == [(3, 3 * MLP_TRIP, 0)] * 3
    # The graph's input copy, before each replay: aten::_foreach_copy_ of one [64, 128, 768] tensor,
    # bf16 as its kernel's name says (Copy<c10::BFloat16, c10::BFloat16>): its traffic is known and
    # it is no round trip (the GEMMs reading x read a staged input, not an intermediate).
    assert trips.unknown_ops.height == 0
    copies = trips.traffic.filter(pl.col("op") == "aten::_foreach_copy_")
    assert copies.select("step", "model", "dtype", "bytes_read", "bytes_written").rows() == [
        (s, "graph_input_copy", "bf16", 64 * 128 * 768 * 2, 12_582_912) for s in (2, 3, 4)]
    assert "aten::_foreach_copy_" not in trips.tensors["producer_op"].to_list() + trips.tensors["consumer_op"].to_list()
    assert trips.method == "shape_inference" and "companion trace" in trips.notes[0]
    step4 = trips.tensors.filter(pl.col("step") == 4)
    assert sorted(step4["producer_op"].to_list()) == ["aten::mm", "aten::mm", "triton_poi_fused__unsafe_view_gelu_mul_0"]
    # Without the companion the same trace's replays stay on the graph launch, and the bytes unknown.
    alone = tracekit.open(SAMPLES / "mlp_compile-cudagraphs.json.gz").analyses()
    assert alone.attribution.graphs.attributed_share == 0.0
    assert alone.round_trips.bytes_per_step["tensor_count"].to_list() == [0, 0, 0]
    assert alone.round_trips.bytes_per_step["unknown_kernels"].to_list() == [4, 4, 4]


def test_round_trip_bytes_are_unknown_never_zero_when_kernels_lack_a_model():
    plain = tracekit.open(SAMPLES / "mlp_compile-cudagraphs.json.gz").report()
    from tracekit.render.views.tables import round_trip_steps_table

    _, _, rows = round_trip_steps_table(plain)
    assert rows[0] == ["2", "0", "unknown", "4"]
    paired = tracekit.open(SAMPLES / "mlp_compile-cudagraphs.json.gz",
                           graph_companion=SAMPLES / "mlp_compile.json.gz").report()
    _, _, rows = round_trip_steps_table(paired)
    assert rows[0] == ["2", "3", "150,994,944", "0"]
    # Every text format states the bytes exactly (no "≥" floor) and the input copy for what it is.
    from tracekit.render import RENDERERS

    for fmt in ("term", "md", "html"):
        out = io.StringIO()
        RENDERERS[fmt].render(paired, out)
        text = out.getvalue()
        assert "≥" not in text and "150,994,944" in text, fmt
        flat = " ".join(text.split())
        assert "CUDA-graph input copies" in flat and "37,748,736 B read and 37,748,736 B written" in flat, fmt


def test_no_round_trip_is_linked_across_a_kernel_without_a_model():
    """With the EAGER MLP as companion, the replay's names match only part of the graph: the gate
    GEMM, the fused Triton kernel (eager has gelu and mul instead) stay unknown. The up GEMM's output
    [8192, 3072] and the down GEMM's input [8192, 3072] agree in shape, but in the raw trace the down
    GEMM reads what the fused kernel wrote (Inductor's in_out_ptr0, the plain compile trace's
    execution trace says so): a link across the unknown kernel would be a false pair."""
    trips = tracekit.open(SAMPLES / "mlp_compile-cudagraphs.json.gz",
                          graph_companion=SAMPLES / "mlp_eager.json.gz").analyses().round_trips
    assert trips.tensors.height == 0
    assert trips.bytes_per_step.select("tensor_count", "round_trip_bytes", "unknown_kernels").rows() == [
        (0, 0, 2)] * 3
    assert trips.unknown_ops.rows() == [("cudaGraphLaunch", 6)]
    # One read a step (the down GEMM's [8192, 3072] input) had only such a match; the report says so.
    assert trips.notes[1].startswith(f"3 reads ({3 * MLP_TRIP:,} B) matched only values written before a kernel")
    from tracekit.render.views.tables import round_trip_steps_table

    _, _, rows = round_trip_steps_table(tracekit.open(
        SAMPLES / "mlp_compile-cudagraphs.json.gz", graph_companion=SAMPLES / "mlp_eager.json.gz").report())
    assert rows[0] == ["2", "0", "unknown", "2"]


def test_graphs_of_several_shapes_are_told_apart_by_their_capture():
    bundle = tracekit.open(SAMPLES / "compile_sweep" / "mlp_compile-cudagraphs-sweep.json.gz").analyses()
    table = bundle.attribution.graphs.graphs
    # One cudagraph-tree record per shape (64x128, 32x128, 48x128, 64x256), each replayed 3 times.
    assert table["source"].to_list() == ["capture"] * 4 and table["replays"].to_list() == [3, 3, 3, 3]
    assert table["activities_per_replay"].to_list() == [6, 6, 6, 7]
    gemms = bundle.attribution.gpu.filter(pl.col("name").str.starts_with("nvjet_sm90_tst_256x128")
                                          & pl.col("step").is_in([3, 7]))
    dims = gemms.join(bundle.trace.ops.select(pl.col("idx").alias("op_idx"), "input_dims"), on="op_idx")
    by_step = dict(zip(dims["step"].to_list(), dims["input_dims"].to_list()))
    assert by_step[3].startswith("[[8192, 768]") and by_step[7].startswith("[[4096, 768]")


SWEEP = SAMPLES / "compile_sweep" / "mlp_compile-cudagraphs-sweep.json.gz"


def _sweep_calls(tmp_path: Path, calls: set[int], name: str) -> Path:
    """The reduce-overhead sweep cut to ``calls`` (``mlp_fwd#<call>``): the events from each call's
    span start to the next call's, plus those without a time (metadata)."""
    data = json.loads(gzip.open(SWEEP).read())
    events = data["traceEvents"]
    starts = sorted((e["ts"], int(e["name"].split()[0][len("mlp_fwd#"):])) for e in events
                    if e.get("ph") == "X" and e.get("name", "").startswith("mlp_fwd#"))
    windows = [(ts, starts[i + 1][0] if i + 1 < len(starts) else float("inf"))
               for i, (ts, call) in enumerate(starts) if call in calls]
    data["traceEvents"] = [e for e in events if "ts" not in e
                           or any(lo <= float(e["ts"]) < hi for lo, hi in windows)]
    path = tmp_path / f"{name}.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


@pytest.mark.parametrize(("calls", "m", "grid"), [((2, 3), 8192, 24576), ((6, 7), 4096, 12288),
                                                  ((10, 11), 6144, 18432)], ids=["64x128", "32x128", "48x128"])
def test_companion_capture_of_several_shapes_is_chosen_by_its_warm_up(tmp_path, calls, m, grid):
    """No shipped capture-phase companion holds several shapes, so one is built from a real trace:
    the reduce-overhead sweep records one graph per shape (64x128, 32x128, 48x128 agree in kinds:
    six activities, the same Triton kernel), each after a warm-up call that runs the same kernels
    eagerly. The replay trace is the same sweep cut to one shape's two replays (no capture left in
    it); the companion is the whole sweep. Raw events: the fused Triton kernel's grid is
    [M · 3072 / 1024, 1, 1] (24576, 12288, 18432 for M = 64·128, 32·128, 48·128), in the replay
    and in that shape's warm-up only; the capture's mm ops carry Input Dims [[M, 768], …]."""
    replay = _sweep_calls(tmp_path, set(calls), "replays")
    bundle = tracekit.open(replay, graph_companion=SWEEP).analyses()
    row = bundle.attribution.graphs.graphs.row(0, named=True)
    assert (row["source"], row["score"], row["replays"], row["activities_per_replay"]) == (
        "companion capture", 1.0, 2, 6)
    gpu = bundle.attribution.gpu.filter(pl.col("graph").is_not_null())
    assert f"[{grid}, 1, 1]" in gpu["grid"].to_list()
    dims = gpu.join(bundle.attribution.graphs.foreign_ops.select(pl.col("idx").alias("op_idx"), "input_dims"),
                    on="op_idx").filter(pl.col("cpu_op") == "aten::mm")["input_dims"].to_list()
    assert dims[:2] == [f"[[{m}, 768], [768, 3072], [{m}, 3072]]"] * 2
    # Round trips of that shape: gate and up outputs into the fused kernel, its output into the down
    # GEMM, each [M, 3072] bf16; the input copy before each replay is traffic, not a round trip.
    trips = bundle.round_trips.bytes_per_step
    assert trips.select("tensor_count", "round_trip_bytes", "unknown_kernels").rows() == [
        (3, 3 * m * 3072 * 2, 0)] * 2


def test_a_real_capture_phase_of_three_shapes_gives_the_replay_its_own_shape():
    """Family: a serving engine's capture phase (one graph per batch size, each after warm-up runs),
    profiled apart from the replays. graphs/multishape_capture captures a pointwise gelu(x)*x+1 and
    the MLP at 1024, 2048 and 4096 rows; multishape_replay replays only the 2048-row graphs. The
    pointwise graph's three kernels (GeLU, mul, add) bear the same names at every size; their grids
    differ, in the warm-up before each capture and in the replay alike. Raw events: the replayed
    GeLU kernel's grid is the 2048-row warm-up's; the capture's aten::gelu has Input Dims
    [[2048, 3072], []]."""
    bundle = tracekit.open(GRAPHS / "multishape_replay.json.gz",
                           graph_companion=GRAPHS / "multishape_capture.json.gz").analyses()
    graphs = bundle.attribution.graphs.graphs
    assert graphs.select("source", "score", "replays", "activities_per_replay").rows() == [
        ("companion capture", 1.0, 4, 3), ("companion capture", 1.0, 4, 5)]
    gpu = bundle.attribution.gpu.filter(pl.col("graph").is_not_null())
    dims = gpu.join(bundle.attribution.graphs.foreign_ops.select(pl.col("idx").alias("op_idx"), "input_dims"),
                    on="op_idx")
    assert set(dims.filter(pl.col("cpu_op") == "aten::gelu")["input_dims"]) == {"[[2048, 3072], []]"}
    assert set(dims.filter(pl.col("cpu_op") == "aten::mm")["input_dims"].str.slice(0, 12)) == {"[[2048, 768]",
                                                                                                "[[2048, 3072"}


def test_companion_capture_without_a_telling_warm_up_states_its_ambiguity(tmp_path):
    """The same companion without its warm-up calls (0, 4, 8, 12: only the recording calls and the
    replays remain): three captures agree in kinds and no warm-up tells them apart, so the latest is
    taken and the score says one in three."""
    replay = _sweep_calls(tmp_path, {2, 3}, "replays")
    companion = _sweep_calls(tmp_path, set(range(16)) - {0, 4, 8, 12}, "no-warm-up")
    row = tracekit.open(replay, graph_companion=companion).analyses().attribution.graphs.graphs.row(0, named=True)
    assert (row["source"], row["score"]) == ("companion capture", pytest.approx(1 / 3))


def test_in_window_decode_graph_and_reduce_overhead_are_attributed():
    for name, per_replay in (("decode_graphs", 39), ("decode_reduce-overhead", 26)):
        found = _graphs(GRAPHS / f"{name}.json.gz").graphs
        assert found.attributed_share == 1.0, name
        assert found.graphs.select("replays", "activities_per_replay").row(0) == (16, per_replay), name


def _rewritten(tmp_path: Path, *, keep_capture: bool = True) -> Path:
    """decode_graphs as CUPTI 13.2 and PyTorch's annotation script would leave it: each replayed
    activity with ``graph id`` 9 and ``graph node id`` (9 << 32 | its capture order), an annotation
    ``name`` (layer 0 for the first half of the nodes, layer 1 after), and moved to the script's
    lanes (7, and 60 for the nodes annotated with a stream)."""
    data = json.loads(gzip.open(GRAPHS / "decode_graphs.json.gz").read())
    events = data["traceEvents"]
    graph_corr = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    replays: dict[int, list[dict]] = {}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and e["args"].get("correlation") in graph_corr:
            replays.setdefault(e["args"]["correlation"], []).append(e)
    for acts in replays.values():
        acts.sort(key=lambda e: e["ts"])
        for k, e in enumerate(acts):
            lane = 60 if k >= 20 else 7
            e["args"].update({"graph id": 9, "graph node id": (9 << 32) | k,
                              "name": "layer 1" if k >= 20 else "layer 0", "stream": lane})
            e["tid"] = lane
    if not keep_capture:
        data["traceEvents"] = [e for e in events if e.get("name") != "cudaStreamBeginCapture"]
    path = tmp_path / "rewritten.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


def test_trace_rewritten_by_the_annotation_script_is_recognised(tmp_path):
    found = _graphs(_rewritten(tmp_path))
    graphs = found.graphs
    assert graphs.rewritten and graphs.lanes == (7, 60)
    assert graphs.annotated_ns == graphs.replayed_ns and graphs.attributed_share == 1.0
    assert graphs.graphs.select("graph", "graph_id", "match").row(0) == ("graph 9", 9, "graph node id")
    replayed = found.gpu.filter(pl.col("graph").is_not_null())
    assert replayed["annotation"].value_counts().sort("annotation").rows() == [("layer 0", 320), ("layer 1", 304)]
    assert "not CUDA streams" in graphs.notes[0]
    # Without the capture the annotations are all there is: stated, and no op is claimed.
    bare = _graphs(_rewritten(tmp_path, keep_capture=False))
    assert bare.graphs.attributed_share == 0.0 and bare.graphs.annotated_ns == bare.graphs.replayed_ns
    assert set(bare.gpu.filter(pl.col("graph").is_not_null())["graph_source"].to_list()) == {"annotation"}


def test_graph_columns_survive_parquet_and_older_files_read_them_as_null(tmp_path):
    trace = load(_rewritten(tmp_path))
    stored = tmp_path / "t.parquet"
    parquet.write(trace, stored)
    back = parquet.load_parquet(stored)
    assert back.gpu.select("graph_id", "graph_node_id", "graph_annotation").equals(
        trace.gpu.select("graph_id", "graph_node_id", "graph_annotation"))
    # A file written before the columns existed: the same file without them.
    kv = pl.read_parquet_metadata(stored)
    older = tmp_path / "older.parquet"
    pl.read_parquet(stored).drop("graph_id", "graph_node_id", "graph_annotation").write_parquet(older, metadata=kv)
    old = parquet.load_parquet(older)
    assert old.gpu["graph_node_id"].null_count() == old.gpu.height and old.gpu.height == trace.gpu.height


@pytest.mark.skipif(not os.environ.get("TRACEKIT_REAL_TRACES"), reason="set TRACEKIT_REAL_TRACES")
def test_vllm_decode_replays_are_counted_and_their_unattributed_share_stated():
    path = Path(os.environ["TRACEKIT_REAL_TRACES"]) / VLLM
    found = _graphs(path)
    gpu = found.gpu
    # CUPTI's ids: graph 587's 10 replays hold 100 activities on nodes (587 << 32) | 0..9.
    g587 = gpu.filter(pl.col("graph_id") == 587)
    assert g587.height == 100
    assert sorted((g587["graph_node_id"] - (587 << 32)).unique().to_list()) == list(range(10))
    graphs = found.graphs
    assert graphs.graphs.height == 65 and set(graphs.graphs["replays"].to_list()) == {10}
    assert round(graphs.replayed_ns / graphs.gpu_ns, 3) == 0.832  # the 83 %
    assert graphs.attributed_ns == 0 and graphs.captures == 0
    notes = tracekit.open(path).report()
    from tracekit.render.views.graphs import notes as graph_notes

    assert "0.0% of it is attributed" in graph_notes(notes)[0]


def test_bad_companion_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "tracekit", "report", str(GRAPHS / "decode_graphs.json.gz"),
                          "--graph-companion", str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "missing.json" in run.stderr
    three = subprocess.run([sys.executable, "-m", "tracekit", "diff", str(GRAPHS / "decode_eager.json.gz"),
                            str(GRAPHS / "decode_graphs.json.gz"), *["--graph-companion", "x"] * 3],
                           capture_output=True, text=True)
    assert three.returncode == 2 and "once (both traces) or twice" in three.stderr
