"""zero_grad_fill: zero_grad(set_to_none=False), priced by its fills and the AccumulateGrad adds they cause.

Family: training loops that zero gradients in place — ``Optimizer.zero_grad`` launches fill kernels
(``_foreach_zero_``/``zero_``), and the next backward's ``AccumulateGrad`` then adds each new
gradient to the zeros (an ``add_`` kernel per parameter) where a None gradient would be taken as is.
"""

from __future__ import annotations

from factory import make_annotation, make_launch
from test_findings import ELEMENTWISE, MULTI_TENSOR, TF32, Loop, _each_step, found

ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def _body(fill_us: float | None, adds: int = 0):
    def step(loop, i, t0):
        loop.events.append(make_annotation("Optimizer.zero_grad#AdamW.zero_grad", t0 + 10, 40))
        if fill_us is not None:
            loop.call(["aten::zero_"], t0 + 12, gpu=MULTI_TENSOR, gpu_dur=fill_us, gpu_ts=t0 + 20)
        loop.call(["aten::mm"], t0 + 100, gpu=TF32, gpu_dur=500, gpu_ts=t0 + 110)
        for k in range(adds):
            loop.call([ACCUMULATE, "torch::autograd::AccumulateGrad", "aten::add_"], t0 + 300 + 20 * k,
                      gpu=ELEMENTWISE, gpu_dur=10, gpu_ts=t0 + 650 + 15 * k)
        # GPU-bound: the host waits for the GPU at the end of the step (what a GPU saving shortens).
        loop.events.append(make_launch("cudaDeviceSynchronize", t0 + 400, 580, 90_000 + i))
    return step


def test_fires_with_the_fills_and_the_one_accumulating_add_per_zeroed_tensor(tmp_path):
    # One zero_ over one tensor: 15 µs of fill plus the first AccumulateGrad add_ (10 µs); the
    # second add_ of the step would happen with None gradients too (gradient accumulation).
    got = found(_each_step(Loop(), _body(15.0, adds=2)).write(tmp_path, "a.json"))
    fill = got["zero_grad_fill"]
    assert fill.evidence[0].name == "aten::zero_" and fill.resource == "gpu"
    assert fill.saving_ns_per_step == 25_000 and fill.quantities["accumulate_adds_per_step"] == 1
    assert fill.evidence[1].name == "aten::add_"


def test_silent_when_zero_grad_launches_nothing_or_too_little(tmp_path):
    # set_to_none=True: no kernel inside zero_grad.
    assert "zero_grad_fill" not in found(_each_step(Loop(), _body(None, adds=0)).write(tmp_path, "b.json"))
    # Near miss: an 8 µs fill and no adds: under the 20 µs floor over the window.
    assert "zero_grad_fill" not in found(_each_step(Loop(), _body(8.0)).write(tmp_path, "c.json"))


def test_planted_sample_is_a_warning_priced_near_its_measured_cost(sample):
    # Steps 2-4, by op: aten::_foreach_zero_ 2 kernels (36.5 µs) inside Optimizer.zero_grad#AdamW.zero_grad
    # over 8 weight grads, then 8 AccumulateGrad aten::add_ kernels (97.7 µs); the healthy control
    # (set_to_none) launches neither — its GPU busy is 139 µs lower.
    got = {f.rule: f for f in sample("antipatterns/antipatterns_zero-grad-fill").report().findings}
    fill = got["zero_grad_fill"]
    assert fill.severity == "warning" and fill.fix.startswith("optimizer.zero_grad(set_to_none=True)")
    assert (fill.quantities["kernels_per_step"], fill.quantities["accumulate_adds_per_step"]) == (2, 8)
    assert fill.quantities["fill_ns_per_step"] == 36_458 and fill.quantities["add_ns_per_step"] == 97_739
    # Measured: median steady step 7.157 ms against antipatterns_healthy's 6.998 ms (set_to_none):
    # 159 µs; the wall price (134 µs) is within 2× of it.
    healthy = sample("antipatterns/antipatterns_healthy").analyses().decomposition.units
    planted = sample("antipatterns/antipatterns_zero-grad-fill").analyses().decomposition.units
    measured = planted["wall_ns"].median() - healthy["wall_ns"].median()
    assert measured / 2 <= fill.saving_wall_ns <= measured * 2
    assert "zero_grad_fill" not in {f.rule for f in sample("antipatterns/antipatterns_healthy").report().findings}
