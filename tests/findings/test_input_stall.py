"""The ``input_stall`` rule: fires on GPU idle while the host is in the DataLoader (hand-built loops, the
public ResNet training trace), silent when the previous step's kernels cover the wait, silent on a
GPU gap before the first launch that no data span explains (the compiled MLP's guards and prologue),
and silent where there is no GPU at all (CPU-only traces: the gloo ranks of sample_traces/ranks_gloo)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from answer_key import REAL_COPIES
from factory import make_annotation, make_kernel, make_launch, make_op, make_step, write_trace

import tracekit
from tracekit.findings.detectors.host_wait import covered_ns

LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
STEP_US = 1000.0


def _loop(tmp_path, loader_us: list[float], kernel_at: float | None, kernel_us: float, name: str = LOADER):
    """Steps of 1 ms: a data span of ``loader_us[i]`` µs at 5 µs, then one GEMM launched 10 µs after it;
    the GEMM runs ``kernel_us`` from ``kernel_at`` µs into its step (default: right after its launch)."""
    events = []
    for i, loader in enumerate(loader_us):
        t0 = 10.0 + i * (STEP_US + 10.0)
        events.append(make_step(i, t0, STEP_US))
        if name:
            events.append(make_annotation(name, t0 + 5, loader))
        at = t0 + 5 + loader + 10
        events += [make_op("aten::mm", at, 10), make_launch("cudaLaunchKernel", at + 1, 5, i + 1),
                   make_kernel(GEMM, t0 + kernel_at if kernel_at is not None else at + 5, kernel_us, i + 1)]
    return tracekit.open(str(write_trace(tmp_path / "t.json", events))).report().findings


def _stall(findings):
    return next((f for f in findings if f.rule == "input_stall"), None)


def test_fires_on_the_gpu_idle_while_the_host_waits_for_data(tmp_path):
    # Steps 1 and 2 wait 600 µs for the loader with the GPU idle (the previous step's 200 µs GEMM ended
    # long before); steps 0 and 3 wait 5 µs. Over the 4 steady steps: (5 + 600 + 600 + 5) / 4 µs.
    stall = _stall(_loop(tmp_path, [5, 600, 600, 5], None, 200))
    assert stall is not None and stall.severity == "warning" and stall.resource == "wall"
    assert stall.steps == (1, 2)
    assert stall.saving_ns_per_step == 302_500 and stall.saving_wall_ns == 302_500
    assert stall.evidence[0].name == LOADER and stall.evidence[0].count_per_step == 0.5
    assert "num_workers" in stall.fix


def test_silent_when_the_previous_steps_kernels_cover_the_wait(tmp_path):
    # Each step's GEMM runs 700-1700 µs into its step: the next step's 600 µs loader wait (1015-1615 µs
    # after this step's start) has the GPU busy throughout, so the loader costs the step nothing.
    assert _stall(_loop(tmp_path, [5, 600, 600, 600], 700, 1000)) is None


def test_silent_on_a_gap_before_the_first_launch_without_a_data_span(tmp_path):
    # The compiled MLP's family: the GPU idles 600 µs before each step's first launch while the host
    # runs Python (guards, prologue), in no data span: not an input stall.
    assert _stall(_loop(tmp_path, [600, 600, 600, 600], None, 200, name="")) is None
    # ... and a user annotation that is not a data-loading name does not count either.
    assert _stall(_loop(tmp_path, [600, 600, 600, 600], None, 200, name="forward")) is None


def test_silent_on_a_trace_without_a_device(tmp_path):
    # The same 600 µs loader waits with nothing launched, no kernel: a CPU-only trace has no GPU to
    # sit idle, whatever the data span holds.
    events = []
    for i, loader in enumerate([5, 600, 600, 5]):
        t0 = 10.0 + i * (STEP_US + 10.0)
        events += [make_step(i, t0, STEP_US), make_annotation(LOADER, t0 + 5, loader),
                   make_op("aten::mm", t0 + 5 + loader + 10, 10)]
    assert _stall(tracekit.open(str(write_trace(tmp_path / "t.json", events))).report().findings) is None


def test_silent_on_real_gloo_ranks_waiting_in_their_data_span(sample):
    # sample_traces/ranks_gloo/late-data: rank 0's data span holds its all_gather, where it waited
    # 31.1 ms for rank 1 on step 3 (32.5 ms of data state in that step): CPU ranks, no GPU, no stall.
    assert _stall(sample("ranks_gloo/late-data/rank0").report().findings) is None


@pytest.mark.slow
def test_the_resnet_loader_stall_is_found_with_the_dataloader_fix():
    path = REAL_COPIES / "facebookresearch__param__resnet-2080ti-cudnn-train.json.gz"
    if not path.is_file():
        pytest.skip("the public ResNet trace is not in tests/data/real")
    stall = _stall(tracekit.open(str(path)).report().findings)
    # Recounted from the raw events: 13 of the 28 steady units idle the GPU 93-644 ms inside
    # enumerate(DataLoader)#...__next__, 4.26 s in all.
    assert stall is not None and stall.severity == "warning"
    assert stall.steps == (10, 11, 14, 15, 16, 18, 19, 20, 22, 23, 24, 26, 27)
    assert 151e6 < stall.saving_ns_per_step < 153e6
    assert stall.evidence[0].name == LOADER and "DataLoader(num_workers" in stall.fix


def test_the_compiled_mlp_has_no_input_stall(sample):
    assert _stall(sample("mlp_compile").report().findings) is None


def test_covered_ns_measures_each_segment_against_the_union_of_the_cover():
    # Cover [10, 20) ∪ [15, 30) ∪ [50, 60) = [10, 30) ∪ [50, 60).
    cover = pl.DataFrame({"ts": [10, 15, 50], "end": [20, 30, 60]})
    ts, end = np.array([0, 25, 30, 40, 0]), np.array([5, 55, 50, 45, 100])
    assert covered_ns(ts, end, cover).tolist() == [0, 10, 0, 0, 30]
    assert covered_ns(ts, end, cover.clear()).tolist() == [0, 0, 0, 0, 0]
