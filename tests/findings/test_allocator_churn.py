"""allocator_churn on hand-built loops. Family: the caching allocator returning memory and taking it
back every step (torch.cuda.empty_cache() in the loop, memory pressure): cudaMalloc and cudaFree in
the steady steps (fires, priced by their host time); near misses: cudaMalloc alone (the pool still
growing), and a single step's free (a one-time release)."""

from __future__ import annotations

from pathlib import Path

from factory import make_kernel, make_launch, make_op, make_step, write_trace

import tracekit

EVERY = (0, 1, 2)


def _loop(tmp_path: Path, *, mallocs: tuple[int, ...] = EVERY, frees: tuple[int, ...] = EVERY) -> Path:
    """Three 2 ms steps, each a 500 µs kernel; in the steps ``mallocs`` a 300 µs cudaMalloc under
    ``aten::empty``, in the steps ``frees`` a 200 µs cudaFree in no op."""
    events: list[dict] = []
    for i in range(3):
        t0 = 10.0 + i * 2010.0
        events += [make_step(i, t0, 2000), make_op("aten::relu", t0 + 10, 7),
                   make_launch("cudaLaunchKernel", t0 + 11, 5, i + 1),
                   make_kernel("void at::native::vectorized_elementwise_kernel<4>()", t0 + 20, 500, i + 1)]
        if i in mallocs:
            events += [make_op("aten::empty", t0 + 600, 302), make_launch("cudaMalloc", t0 + 601, 300, 100 + i)]
        if i in frees:
            events.append(make_launch("cudaFree", t0 + 1000, 200, 200 + i))
    return write_trace(tmp_path / "t.json", events)


def _finding(path: Path):
    return next((f for f in tracekit.open(str(path)).report().findings if f.rule == "allocator_churn"), None)


def test_fires_on_malloc_and_free_every_step(tmp_path):
    f = _finding(_loop(tmp_path))
    assert f is not None and f.severity == "warning" and f.resource == "host"
    assert {(e.name, e.count_per_step) for e in f.evidence} == {("cudaMalloc", 1), ("cudaFree", 1)}
    assert {e.detail for e in f.evidence} == {"under aten::empty", "under no op"}
    # 300 µs + 200 µs of host time per step; the step is host-bound (500 µs of GPU in 2 ms), so all of it.
    assert f.cost_ns_per_step == f.saving_ns_per_step == 500_000 and f.saving_wall_ns == 500_000


def test_silent_when_the_pool_only_grows(tmp_path):
    assert _finding(_loop(tmp_path, frees=())) is None


def test_silent_on_a_single_release(tmp_path):
    # cudaMalloc every step, cudaFree in one: released once (an out-of-memory retry), not a loop.
    assert _finding(_loop(tmp_path, frees=(2,))) is None
