"""fp32_gemm: float32 GEMMs on SIMT/FFMA kernels (no TF32), priced on the GPU.

Family: fp32 training or inference with ``allow_tf32`` off (cuBLAS ``*_ffma_*``/cutlass ``simt_sgemm``
kernels). The saving is GPU time, so on a step the host paces it reaches the wall as ≈ 0 and the
finding is info; under the floor over the steady window it is not reported.
"""

from __future__ import annotations

from factory import make_launch
from test_findings import SIMT, Loop, _each_step, found


def _gemm(gemm_us: float, *, gpu_bound: bool):
    def body(loop, i, t0):
        loop.call(["aten::linear", "aten::mm"], t0 + 10, gpu=SIMT, gpu_dur=gemm_us, gpu_ts=t0 + 20)
        if gpu_bound:  # the host waits for the GEMM at the end of the step
            loop.events.append(make_launch("cudaDeviceSynchronize", t0 + 30, gemm_us, 90_000 + i))
    return body


def test_gpu_bound_fp32_gemm_is_a_warning_and_host_bound_is_info(tmp_path):
    bound = found(_each_step(Loop(), _gemm(800.0, gpu_bound=True)).write(tmp_path, "a.json"))["fp32_gemm"]
    assert bound.severity == "warning" and bound.resource == "gpu"
    assert bound.saving_ns_per_step == round(800_000 * (1 - 67 / 494.5))  # H200 fp32 vs tf32 peaks
    # Near miss: the same GEMM while the host is busy with Python the whole step: TF32 saves no wall.
    free = found(_each_step(Loop(), _gemm(800.0, gpu_bound=False)).write(tmp_path, "b.json"))["fp32_gemm"]
    assert free.severity == "info" and free.saving_wall_ns == 0


def test_a_small_fp32_gemm_under_the_floor_is_silent(tmp_path):
    # 15 µs of fp32 GEMM per 1 ms step saves 13 µs: under the 20 µs floor.
    assert "fp32_gemm" not in found(_each_step(Loop(), _gemm(15.0, gpu_bound=True)).write(tmp_path, "c.json"))


def test_planted_sample_is_priced_near_its_measured_cost(sample):
    got = {f.rule: f for f in sample("antipatterns/antipatterns_gemm-fp32").report().findings}["fp32_gemm"]
    assert got.severity == "warning" and "allow_tf32" in got.fix
    assert got.quantities["gemms_per_step"] == 23
    # Median steady step 33.21 ms against the TF32 control antipatterns_healthy's 7.00 ms: 26.2 ms;
    # priced 26.75 ms (30.95 ms of SIMT GEMM × (1 − 67 ÷ 494.5)).
    planted = sample("antipatterns/antipatterns_gemm-fp32").analyses().decomposition.units
    healthy = sample("antipatterns/antipatterns_healthy").analyses().decomposition.units
    measured = planted["wall_ns"].median() - healthy["wall_ns"].median()
    assert measured / 2 <= got.saving_wall_ns <= 2 * measured
    assert "fp32_gemm" not in {f.rule for f in sample("antipatterns/antipatterns_healthy").report().findings}
