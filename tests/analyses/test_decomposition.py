"""Step decomposition: hand-built traces for each part and each priority conflict (exact ns), the
H200 sample traces (parts sum exactly; one step checked by hand against the raw events), and the
public ResNet trace for the DataLoader family."""

from __future__ import annotations

import gzip
import json
import os
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from factory import make_annotation, make_kernel, make_launch, make_op, make_step, span, write_trace
from tracekit.analyses import decomposition, pipeline
from tracekit.analyses.steps import SUMMARY_SCHEMA
from tracekit.load import load

TESTS = Path(__file__).resolve().parent.parent
SAMPLES = TESTS.parent / "sample_traces"
SAMPLE_TRACES = sorted(p for p in SAMPLES.glob("*.json.gz") if ".et." not in p.name)
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
PARTS = ["blocked_ns", "data_ns", "dispatch_ns", "op_free_ns"]
IDLE_PARTS = ["idle_while_blocked_ns", "idle_while_data_ns", "idle_while_dispatch_ns", "idle_while_op_free_ns"]


def decompose(tmp_path, events, *, gpu=True) -> pipeline.Analyses:
    return pipeline.run(load(write_trace(tmp_path / "t.json", events, gpu=gpu)))


def unit(bundle: pipeline.Analyses, step: int) -> dict:
    return bundle.decomposition.units.filter(pl.col("step") == step).row(0, named=True)


def parts(row: dict, names: list[str]) -> list[int]:
    return [row[n] for n in names]


def memcpy_row(name: str, ts: float, dur: float, correlation: int) -> dict:
    return make_kernel(name, ts, dur, correlation, kind="memcpy", bytes=4)


# -- each part, and the GPU idle time by host state ---------------------------------------------------

def test_each_part_and_the_idle_time_by_host_state(tmp_path):
    # 0-10 op (dispatch), 30-60 loader with an op inside (data), 60-80 op (dispatch), 80-90 nothing,
    # 90-115 stream sync (blocked), 115-200 nothing. GPU: 10-30 and 100-110, idle 30-100 inside its
    # own window, and 0-10 before it (the lead: the first unit's window starts at its CPU start).
    bundle = decompose(tmp_path, [
        make_step(1, 0, 200),
        make_op("aten::mm", 0, 10), make_launch("cudaLaunchKernel", 2, 2, 1),
        make_annotation(LOADER, 30, 30), make_op("aten::stack", 35, 5),
        make_op("aten::mm", 60, 20), make_launch("cudaLaunchKernel", 62, 2, 2),
        make_launch("cudaStreamSynchronize", 90, 25, 3),
        make_kernel("k1", 10, 20, 1), make_kernel("k2", 100, 10, 2),
    ])
    row = unit(bundle, 1)
    assert parts(row, PARTS) == [25_000, 30_000, 30_000, 115_000]
    assert row["cpu_span_ns"] == 200_000
    summary = bundle.steps.row(0, named=True)
    assert (summary["gpu_busy_ns"], summary["gpu_idle_ns"]) == (30_000, 70_000)
    assert (row["gpu_busy_ns"], row["gpu_lead_ns"], row["gpu_idle_ns"]) == (30_000, 10_000, 80_000)
    # Idle 0-10 dispatch (the lead), 30-60 data, 60-80 dispatch, 80-90 op-free, 90-100 blocked.
    assert parts(row, IDLE_PARTS) == [10_000, 30_000, 30_000, 10_000]
    assert row["limit"] == "op_free"


def test_blocked_wins_over_data_and_data_over_dispatch(tmp_path):
    # A loader 0-50 holding an op 5-30 and a sync 10-20 (pinning that waits for the device).
    row = unit(decompose(tmp_path, [
        make_step(1, 0, 100), make_annotation(LOADER, 0, 50), make_op("aten::pin_memory", 5, 25),
        make_launch("cudaStreamSynchronize", 10, 10, 1), make_op("aten::add", 60, 10),
    ]), 1)
    assert parts(row, PARTS) == [10_000, 40_000, 10_000, 40_000]


def test_item_is_blocked_only_where_a_sync_or_blocking_copy_covers_it(tmp_path):
    row = unit(decompose(tmp_path, [
        make_step(1, 0, 100),
        # .item(): its copy lands in pinned memory (not blocking), its stream sync is.
        make_op("aten::item", 0, 30), make_op("aten::_local_scalar_dense", 2, 26),
        make_launch("cudaMemcpyAsync", 5, 5, 1), make_launch("cudaStreamSynchronize", 10, 15, 2),
        memcpy_row("Memcpy DtoH (Device -> Pinned)", 10, 1, 1),
        # An async copy to pageable memory blocks; a synchronous cudaMemcpy blocks by name.
        make_launch("cudaMemcpyAsync", 40, 20, 3), memcpy_row("Memcpy DtoH (Device -> Pageable)", 41, 1, 3),
        make_launch("cudaMemcpy", 70, 5, 4),
        # An async copy from pinned memory is dispatch.
        make_launch("cudaMemcpyAsync", 80, 5, 5), memcpy_row("Memcpy HtoD (Pinned -> Device)", 86, 1, 5),
    ]), 1)
    assert parts(row, PARTS) == [15_000 + 20_000 + 5_000, 0, 15_000 + 5_000, 40_000]


def test_threads_of_the_process_form_one_timeline(tmp_path):
    row = unit(decompose(tmp_path, [
        make_step(1, 0, 100), make_op("aten::mm", 10, 20),
        # autograd's thread overlaps the main thread's op: counted once (10-50, not 20 + 30).
        span("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 20, 30, tid=200),
        # a wait on that thread is the step's wait.
        span("cuda_runtime", "cudaStreamSynchronize", 60, 10, tid=200, correlation=1),
        # another process (a DataLoader worker) never counts.
        span("cpu_op", "aten::copy_", 70, 20, pid=300, tid=300),
    ]), 1)
    assert parts(row, PARTS) == [10_000, 0, 40_000, 50_000]


def test_spans_are_clipped_to_each_unit_and_labels_are_not_work(tmp_path):
    bundle = decompose(tmp_path, [
        make_step(1, 0, 100), make_step(2, 100, 100),
        make_annotation("forward", 0, 50),  # a label over nothing: op-free
        make_op("aten::mm", 90, 20),  # crosses the boundary: 10 in each unit
        make_annotation("data_loading", 150, 20),  # a user data annotation (DATA_ANNOTATIONS)
        span("python_function", "torch/utils/data/dataloader.py(733): __next__", 180, 10),
    ])
    assert parts(unit(bundle, 1), PARTS) == [0, 0, 10_000, 90_000]
    assert parts(unit(bundle, 2), PARTS) == [0, 30_000, 10_000, 60_000]


def test_limit_rule():
    frame = pl.DataFrame({
        "wall_ns": [100, 100, 100, 100, 0], "gpu_busy_ns": [90, 89, 10, 10, 0],
        "blocked_ns": [0, 30, 20, 10, 0], "data_ns": [0, 30, 20, 10, 0], "dispatch_ns": [0, 20, 50, 20, 0],
        "op_free_ns": [0, 20, 10, 60, 0],
    })
    assert frame.select(decomposition.limit_expr())["limit"].to_list() == [
        "gpu", "blocked", "dispatch", "op_free", "blocked"]


def test_without_units_and_without_gpu(tmp_path):
    trace = load(write_trace(tmp_path / "e.json", [make_op("aten::mm", 0, 10)]))
    empty = decomposition.analyze(trace, pipeline.run(trace).attribution.gpu, pl.DataFrame(schema=SUMMARY_SCHEMA))
    assert empty.units.height == empty.totals.height == 0 and empty.limit is None
    cpu_only = decompose(tmp_path, [make_step(1, 0, 100), make_annotation(LOADER, 0, 60)], gpu=False)
    row = unit(cpu_only, 1)
    assert parts(row, PARTS) == [0, 60_000, 0, 40_000] and parts(row, IDLE_PARTS) == [0, 0, 0, 0]
    assert (cpu_only.decomposition.limit, cpu_only.decomposition.limit_share) == ("data", 0.6)


# -- the H200 sample traces ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", SAMPLE_TRACES, ids=lambda p: p.name)
def test_sample_parts_sum_exactly(path):
    bundle = pipeline.run(load(path))
    units = bundle.decomposition.units
    assert units.height == bundle.steps.height > 0
    assert (units.select(pl.sum_horizontal(PARTS)).to_series() == units["cpu_span_ns"]).all()
    assert (units.select(pl.sum_horizontal(IDLE_PARTS)).to_series() == units["gpu_idle_ns"]).all()
    assert units.select(pl.min_horizontal(pl.col("^.*_ns$"))).to_series().min() >= 0
    summary = bundle.steps.select("step", "gpu_busy_ns", "wall_ns")
    assert units.select(summary.columns).equals(summary)
    assert (units["gpu_idle_ns"] == bundle.steps["gpu_idle_ns"] + units["gpu_lead_ns"]).all()


def test_mlp_eager_step_2_by_hand():
    # Checked against the raw events with plain Python (Decimal µs -> round(x1000) ns; unions by
    # sweeping): ProfilerStep#2 is 1 497 108 ns; its process's cpu_op and CUDA runtime/driver calls
    # cover 1 124 514 ns of it, of which cudaDeviceSynchronize 12 624 ns; its kernels' window is
    # 962 171 ns, busy 232 320, idle 729 851, of which the host was in an op or call 625 860 ns.
    # Before that window (the lead: the step's first unit starts it at its CPU start) the GPU waits
    # 391 630 ns for the first launch, the host in an op or call for 272 300 ns of it, in none for 119 330.
    row = unit(pipeline.run(load(SAMPLES / "mlp_eager.json.gz")), 2)
    assert parts(row, PARTS) == [12_624, 0, 1_111_890, 372_594]
    assert row["gpu_lead_ns"] == 391_630
    assert parts(row, IDLE_PARTS) == [0, 0, 625_860 + 272_300, 103_991 + 119_330]
    assert row["limit"] == "dispatch"


# -- a public trace: the DataLoader family -----------------------------------------------------------

def _resnet() -> Path | None:
    name = "facebookresearch__param__resnet-2080ti-cudnn-train.json.gz"
    corpus = os.environ.get("TRACEKIT_REAL_TRACES")
    for folder in ([Path(corpus)] if corpus else []) + [TESTS / "data" / "real"]:
        if (folder / name).is_file():
            return folder / name
    return None


RESNET = _resnet()


@pytest.mark.skipif(RESNET is None, reason="set TRACEKIT_REAL_TRACES to the real-trace corpus folder")
@pytest.mark.slow
def test_resnet_training_waits_for_its_dataloader():
    """The input-bound family: a training loop (ResNet, cuDNN, RTX 2080 Ti, PyTorch ~2.0, no
    ProfilerSteps: the units are found, one per ``enumerate(DataLoader)`` span) whose multiprocess
    DataLoader cannot keep up. By hand from the raw events: the 30 loader spans; spans 2-30 hold
    6 266 119 µs of the 11 407 304 µs from the second one's start to the main thread's last event
    (54.9 %)."""
    assert RESNET is not None
    events = json.loads(gzip.decompress(RESNET.read_bytes()), parse_float=Decimal)["traceEvents"]
    loader = sorted((int(round(e["ts"] * 1000)), int(round(e["dur"] * 1000))) for e in events
                    if e.get("ph") == "X" and str(e.get("name", "")).startswith("enumerate(DataLoader)"))
    by_hand = sum(dur for _, dur in loader[1:])
    assert by_hand == 6_266_119_000
    bundle = pipeline.run(load(RESNET))
    units = bundle.decomposition.units.filter(pl.col("step") >= 2)
    assert units["data_ns"].sum() == by_hand
    assert units["cpu_span_ns"].sum() == 11_407_304_000
    assert round(by_hand / units["cpu_span_ns"].sum(), 3) == 0.549
    # Over the steady units (2-29; unit 30 may be cut short) the loader holds 63 % of the span.
    decomposed = bundle.decomposition
    assert decomposed.limit == "data" and round(decomposed.limit_share, 3) == 0.632
    # Units whose loader waited long are data-limited; the others run at GPU speed (cuDNN busy >= 90 %).
    steady = decomposed.units.filter(pl.col("steady"))
    assert steady["step"].to_list() == list(range(2, 30))
    assert set(steady.filter(pl.col("data_ns") > 200_000_000)["limit"]) == {"data"}
    assert decomposed.units.filter(pl.col("step") == 2).row(0, named=True)["limit"] == "gpu"


@pytest.mark.skipif(RESNET is None, reason="set TRACEKIT_REAL_TRACES to the real-trace corpus folder")
@pytest.mark.slow
def test_resnet_verdicts_are_read_against_the_decomposition():
    """The same family: CPU dispatch alone calls every loader-starved step compute-bound (the
    multiprocess DataLoader's wait runs in no op, so dispatch stays under GPU busy); read against the
    decomposition, the 13 steps whose host mostly waits in the loader are input-bound."""
    assert RESNET is not None
    bundle = pipeline.run(load(RESNET))
    verdicts = bundle.steps.join(bundle.decomposition.units.select("step", "limit"), on="step")
    starved = verdicts.filter(pl.col("limit") == "data")
    assert starved.height == 13 and set(starved["verdict"]) == {"input-bound"}
    assert (starved["gpu_busy_frac"] < 0.8).all()
    assert set(verdicts.filter(pl.col("limit") != "data")["verdict"]) <= {"compute-bound", "overhead-bound"}


def test_refine_verdict_rule():
    from tracekit.analyses.steps import refine_verdict

    summary = pl.DataFrame({"step": [1, 2, 3, 4, 5, 6], "gpu_busy_frac": [0.3, 0.85, 0.3, 0.3, 0.3, 0.3],
                            "verdict": ["compute-bound", "compute-bound", "overhead-bound", "mixed",
                                        "overhead-bound", "compute-bound"]})
    limits = pl.DataFrame({"step": [1, 2, 3, 4, 5, 6], "limit": ["data", "data", "op_free", "blocked", "dispatch",
                                                                  "op_free"]})
    assert refine_verdict(summary, limits)["verdict"].to_list() == [
        "input-bound", "compute-bound", "host-bound", "mixed", "overhead-bound", "compute-bound"]
