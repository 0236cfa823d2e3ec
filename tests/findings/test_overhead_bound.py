"""The ``overhead_bound`` rule: fires when dispatch dominates the step (many tiny launches: a hand-built
loop, the planted capture), priced at what CUDA graphs or compile take off the host (dispatch in
excess of GPU busy); silent with a handful of launches, when the step waits for data instead, and
never says "CUDA graphs" to a trace that already replays them."""

from __future__ import annotations

from factory import make_annotation, make_kernel, make_launch, make_op, make_step, write_trace

import tracekit
from tracekit.findings.detectors.overhead_bound import GRAPHED_FIX

KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
          "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")


def _loop(tmp_path, launches: int, *, loader_us: float = 0.0, graph: bool = False):
    """Three 1 ms steps (plus ``loader_us`` of DataLoader wait first), each with ``launches`` aten::add
    ops of 22 µs, each holding one 20 µs launch of a 1 µs kernel; ``graph``: one more op replays a CUDA
    graph (``cudaGraphLaunch``) of one kernel."""
    events, corr = [], 1
    for i in range(3):
        dur = 1000.0 + loader_us
        t0 = 10.0 + i * (dur + 10.0)
        events.append(make_step(i, t0, dur))
        if loader_us:
            events.append(make_annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 5,
                                          loader_us))
        base = t0 + loader_us + 10
        for k in range(launches):
            at = base + 30 * k
            events += [make_op("aten::add", at, 22), make_launch("cudaLaunchKernel", at + 0.1, 20, corr),
                       make_kernel(KERNEL, at + 30, 1, corr)]
            corr += 1
        if graph:
            at = base + 30 * launches
            events += [make_op("CUDAGraph::replay", at, 12), make_launch("cudaGraphLaunch", at + 1, 10, corr),
                       make_kernel(KERNEL, at + 12, 1, corr)]
            corr += 1
    return tracekit.open(str(write_trace(tmp_path / "t.json", events))).report().findings


def _over(findings):
    return next((f for f in findings if f.rule == "overhead_bound"), None)


def test_fires_on_many_tiny_launches_priced_at_dispatch_over_gpu_busy(tmp_path):
    over = _over(_loop(tmp_path, 30))
    # Per step: 30 ops of 22 µs = 660 µs of dispatch (340 µs op-free) against 30 µs of GPU busy:
    # a replayed graph takes the 630 µs in excess of the GPU's own work off the host.
    assert over is not None and over.severity == "warning" and over.resource == "host"
    assert over.quantities["launches_per_step"] == 30 and over.quantities["mean_launch_ns"] == 20_000
    assert over.quantities["cpu_dispatch_ns"] == 660_000 and over.quantities["gpu_busy_ns"] == 30_000
    assert over.saving_ns_per_step == 630_000 and over.saving_wall_ns == 630_000
    assert "CUDA graphs" in over.fix


def test_silent_with_a_handful_of_launches(tmp_path):
    # The same CPU-heavy shape with 5 launches (the Liger MLP's case) is not launch overhead.
    assert _over(_loop(tmp_path, 5)) is None


def test_silent_when_the_step_waits_for_data_instead(tmp_path):
    # 900 µs in a DataLoader before the same 30 launches: data, not dispatch, is the largest part of
    # the step (the input-stall rule's case), so no "use CUDA graphs".
    found = _loop(tmp_path, 30, loader_us=900)
    assert _over(found) is None
    assert any(f.rule == "input_stall" for f in found)


def test_a_trace_that_replays_cuda_graphs_is_not_told_to_use_them(tmp_path):
    over = _over(_loop(tmp_path, 30, graph=True))
    assert over is not None and over.fix == GRAPHED_FIX and "use CUDA graphs" not in over.fix


def test_the_planted_overhead_bound_loop_is_a_warning(sample):
    over = _over(sample("antipatterns/antipatterns_overhead-bound").report().findings)
    # Per steady step (ProfilerStep#2-4): dispatch 2.10/2.22/1.96 ms, GPU busy 116 µs, 59 launches.
    assert over.severity == "warning" and over.steps == (2, 3, 4)
    assert over.quantities["launches_per_step"] == 59
    assert 1.9e6 < over.saving_wall_ns < 2.1e6
