"""kernel_time_varies: a spread between steps is claimed only within one shape.

Family: shape sweeps (the compile sweeps, serving loops over batch sizes, size benchmarks) launch the
same kernel with a new grid and new input dims every few steps; its time follows the shape, which
is not contention. Only the same kernel at the same grid/block and input dims may be called varying.
"""

from __future__ import annotations

import pytest
from test_findings import TF32, Loop, _each_step, found

from tracekit.findings.detectors import kernel_time_varies


def _gemm(durs, grids):
    def body(loop, i, t0):
        loop.call(["aten::mm"], t0 + 10, gpu=TF32, gpu_dur=durs[i], grid=grids[i], block=[128, 1, 1])
    return body


def test_fires_when_one_shape_slows_down(tmp_path):
    same = [[132, 1, 1]] * 3
    got = found(_each_step(Loop(), _gemm([300.0, 300.0, 600.0], same)).write(tmp_path, "a.json"))
    varies = got["kernel_time_varies"]
    assert varies.severity == "info" and varies.evidence[0].step == 2
    assert varies.cost_ns_per_step == 300_000  # the slow step's 600 µs against the 300 µs median
    assert "grid [132, 1, 1]" in varies.evidence[0].detail


def test_silent_on_a_shape_sweep(tmp_path):
    # Near miss: the same times, but the slow step launches a grid twice as large (a new shape).
    grids = [[132, 1, 1], [132, 1, 1], [264, 1, 1]]
    assert "kernel_time_varies" not in found(
        _each_step(Loop(), _gemm([300.0, 300.0, 600.0], grids)).write(tmp_path, "b.json"))
    # ... and on steady kernels.
    assert "kernel_time_varies" not in found(
        _each_step(Loop(), _gemm([300.0, 310.0, 300.0], [[132, 1, 1]] * 3)).write(tmp_path, "c.json"))


def test_silent_when_the_trace_records_no_shape(tmp_path):
    def body(loop, i, t0):
        loop.call(["aten::mm"], t0 + 10, gpu=TF32, gpu_dur=[300.0, 300.0, 600.0][i])
    assert "kernel_time_varies" not in found(_each_step(Loop(), body).write(tmp_path, "d.json"))


@pytest.mark.parametrize("name", ["compile_sweep/mlp_eager-sweep", "compile_sweep/mlp_compile-sweep",
                                  "compile_sweep/mlp_liger-sweep"])
def test_the_shipped_shape_sweeps_are_silent(name, sample):
    # mlp_eager-sweep's BinaryFunctor mul took 18-70 µs per step: [32|48|64, 128|256, 3072] inputs,
    # grids 12288-49152; within one shape its steps agree within a few µs.
    assert kernel_time_varies.VARIANCE_MIN_STEPS == 3
    assert "kernel_time_varies" not in {f.rule for f in sample(name).report().findings}
