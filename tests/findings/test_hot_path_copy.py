"""``hot_path_copy``: layout copies the model's code makes (``.contiguous()`` of a transposed view, a
``.clone()`` the model calls, a reshape's clone, AccumulateGrad's copy of a gradient in another layout)
— fires on them, stays silent under its floor and on copies of every other family."""

from __future__ import annotations

import pytest
from copy_loop import (CAST, CAT, COPY, COPY_RULES, FBGEMM_PERMUTE, FP8_CAST_TRANSPOSE, KV_WRITE, CopyLoop,
                       findings)

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE

LAYOUT = {
    "contiguous of a transposed weight": ["aten::contiguous", "aten::clone", "aten::copy_"],
    "a reshape that cannot stay a view": ["aten::matmul", "aten::reshape", "aten::clone", "aten::copy_"],
    "AccumulateGrad's copy of a gradient in another layout": [
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad",
        "aten::copy_"],
}


@pytest.mark.parametrize("family", sorted(LAYOUT))
def test_fires_on_layout_copies_with_the_keep_the_layout_fix(tmp_path, family):
    loop = CopyLoop()  # 500 µs GEMM per step: a 50 µs copy is 9 % of GPU busy
    for i in range(loop.steps):
        loop.copy(i, LAYOUT[family], COPY, 50.0)
    got = findings(loop.write(tmp_path))
    f = got["hot_path_copy"]
    # The GPU waits on nothing and the host waits for it: the copy's 50 µs GPU time reaches the wall.
    assert (f.cost_ns_per_step, f.saving_ns_per_step, f.resource) == (50_000, 50_000, "gpu")
    assert f.severity == "warning" and f.saving_wall_ns == 50_000 and f.steps == (0, 1, 2)
    (e,) = f.evidence
    assert e.name == LAYOUT[family][0].removeprefix("autograd::engine::evaluate_function: ")
    assert e.count_per_step == 1 and "keep the layout" in f.fix
    assert not set(got) & (set(COPY_RULES) - {"hot_path_copy"})


def test_silent_under_its_share_of_gpu_busy(tmp_path):
    loop = CopyLoop(gemm_us=1000.0)
    for i in range(loop.steps):  # 9 µs against 1009 µs of GPU busy: 0.9 % < 1 %
        loop.copy(i, LAYOUT["contiguous of a transposed weight"], COPY, 9.0)
    assert 9.0 / 1009.0 < COPY_MIN_BUSY_SHARE
    assert "hot_path_copy" not in findings(loop.write(tmp_path))


# Copies of other families, each 50 µs per step (well over the floor): never "drop the copy".
NOT_LAYOUT = {
    "dtype cast (dtype_cast's)": (["aten::linear", "aten::to", "aten::_to_copy", "aten::copy_"], CAST),
    "device move staged through a contiguous copy": (["aten::to", "aten::_to_copy", "aten::copy_",
                                                      "aten::contiguous", "aten::clone", "aten::copy_"], COPY),
    "paged KV-cache write": (["vllm::unified_kv_cache_update"], KV_WRITE),
    "fbgemm permute of sparse features": (["fbgemm::permute_2D_sparse_data"], FBGEMM_PERMUTE),
    "fp8 cast-transpose": (["aten::linear"], FP8_CAST_TRANSPOSE),
    "compiled graph's copy": ([("Torch-Compiled Region: 0/0", "user_annotation"), "aten::clone", "aten::copy_"],
                              COPY),
    "cudagraph tree input copy": ([("CUDAGraphTreeManager.run", "user_annotation"), "aten::copy_"], COPY),
    "collective's reassembly of shards": ([("Redistribute", "user_annotation"), "aten::cat"], CAT),
    "collective's unpacking": (["All2All_Pooled_WaitBackward", "aten::contiguous", "aten::clone", "aten::copy_"],
                               COPY),
    "clone inside an out-of-place op": (["aten::masked_fill", "aten::clone", "aten::copy_"], COPY),
}


@pytest.mark.parametrize("family", sorted(NOT_LAYOUT))
def test_silent_on_copies_of_other_families(tmp_path, family):
    chain, kernel = NOT_LAYOUT[family]
    loop = CopyLoop()
    for i in range(loop.steps):
        loop.copy(i, chain, kernel, 50.0)
    got = findings(loop.write(tmp_path))
    assert "hot_path_copy" not in got
    expected = {"dtype_cast"} if kernel == CAST else set()
    assert set(got) & set(COPY_RULES) == expected
