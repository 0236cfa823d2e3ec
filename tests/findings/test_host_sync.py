"""host_sync on hand-built loops: it prices the GPU idle a blocking call caused, not the time the host
was blocked. Family: a `.item()`/`.cpu()`/op-less synchronise mid-step that drains work queued ahead
of it (fires); near misses: the same synchronise waiting on a collective (the rank waits for its
peers, not for its host), and a `torch.cuda.synchronize()` that ends the step (a loop's delimiter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import make_kernel, make_launch, make_op, make_step, write_trace

import tracekit

STEP_US = 800.0
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _loop(tmp_path: Path, *, queued: str = GEMM, item: bool = True, final_sync: bool = False) -> Path:
    """Three steps of ``STEP_US``: a 400 µs kernel (``queued``) launched at +11 µs runs +20..+420; an
    ``aten::item`` (or, ``item=False``, an op-less ``cudaDeviceSynchronize``) at +50 blocks until it
    is done (its 2 µs DtoH copy runs +421..+423, the synchronise returns at +426); the host launches
    the next kernel at +481, which runs +485..+785. ``final_sync``: an op-less synchronise after the
    last launch, at +790."""
    events: list[dict] = []
    corr = 1
    for i in range(3):
        t0 = 10.0 + i * (STEP_US + 10.0)
        events.append(make_step(i, t0, STEP_US))
        events += [make_op("aten::mm", t0 + 10, 7), make_launch("cudaLaunchKernel", t0 + 11, 5, corr),
                   make_kernel(queued, t0 + 20, 400, corr)]
        if item:
            events += [make_op("aten::item", t0 + 50, 377), make_op("aten::_local_scalar_dense", t0 + 50.1, 376.8),
                       make_launch("cudaMemcpyAsync", t0 + 51, 5, corr + 1),
                       make_kernel("Memcpy DtoH (Device -> Pageable)", t0 + 421, 2, corr + 1, kind="memcpy", bytes=4),
                       make_launch("cudaStreamSynchronize", t0 + 56, 370, 90_000 + i)]
        else:
            events.append(make_launch("cudaDeviceSynchronize", t0 + 56, 370, 90_000 + i))
        events += [make_op("aten::relu", t0 + 480, 7), make_launch("cudaLaunchKernel", t0 + 481, 5, corr + 2),
                   make_kernel(GEMM, t0 + 485, 300, corr + 2)]
        if final_sync:
            events.append(make_launch("cudaDeviceSynchronize", t0 + 790, 3, 95_000 + i))
        corr += 3
    return write_trace(tmp_path / "t.json", events)


def _host_sync(path: Path):
    return next((f for f in tracekit.open(str(path)).report().findings if f.rule == "host_sync"), None)


def test_fires_on_an_item_that_drains_queued_work_priced_by_the_idle_it_caused(tmp_path):
    f = _host_sync(_loop(tmp_path))
    assert f is not None and f.severity == "warning" and f.resource == "wall"
    (e,) = f.evidence
    assert (e.name, e.role, e.count_per_step) == ("aten::item", "op", 1)
    # Blocked: the 5 µs copy call + the 370 µs synchronise.
    assert f.cost_ns_per_step == 375_000
    # The GPU idles, once the queued kernel and the copy are done, from +423 until the host's next
    # kernel at +485 (62 µs), 420 -> 421 (1 µs) and 785 -> the step's end at 800 (15 µs): 78 µs,
    # under the 371 µs lead the host lost (the GPU work it waited for).
    assert f.saving_ns_per_step == 78_000 and f.saving_wall_ns == 78_000
    assert "GPU idle 78.0 µs per step" in e.detail and "cudaMemcpyAsync (DtoH) + cudaStreamSynchronize" in e.detail


def test_an_op_less_synchronise_mid_step_is_the_rules(tmp_path):
    f = _host_sync(_loop(tmp_path, item=False))
    (e,) = f.evidence
    assert (e.name, e.role) == ("cudaDeviceSynchronize", "launch")
    # 420 -> 485 and 785 -> 800: the copy is gone.
    assert f.saving_ns_per_step == 80_000


def test_silent_when_the_synchronise_waits_on_a_collective(tmp_path):
    # The same wait behind an all-reduce: the rank waits for its peers; the host lost no lead.
    assert _host_sync(_loop(tmp_path, queued=ALLREDUCE)) is None


@pytest.mark.parametrize("item", [True, False])
def test_a_synchronise_that_ends_the_step_adds_nothing(tmp_path, item):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = _host_sync(_loop(tmp_path / "a", item=item))
    final = _host_sync(_loop(tmp_path / "b", item=item, final_sync=True))
    assert [e.name for e in final.evidence] == [e.name for e in base.evidence]
    assert final.saving_ns_per_step == base.saving_ns_per_step


def test_silent_with_only_a_step_final_synchronise(tmp_path):
    events = []
    for i in range(3):
        t0 = 10.0 + i * 810.0
        events += [make_step(i, t0, 800), make_op("aten::mm", t0 + 10, 7),
                   make_launch("cudaLaunchKernel", t0 + 11, 5, i + 1), make_kernel(GEMM, t0 + 20, 700, i + 1),
                   make_launch("cudaDeviceSynchronize", t0 + 30, 700, 90_000 + i)]
    assert _host_sync(write_trace(tmp_path / "t.json", events)) is None


@pytest.mark.parametrize(("planted", "rule"), [("host-sync", "host_sync"), ("h2d-pageable", "pageable_copy")])
def test_planted_wall_saving_is_within_2x_of_the_measured_difference_to_the_control(sample, planted, rule):
    """The H200 captures: the planted problem's wall saving against the median steady step of the
    capture less that of its control (antipatterns_healthy): host-sync 1.15 ms vs 1.18 ms measured,
    h2d-pageable 9.3 ms vs 10.1 ms."""
    def median_wall(name):
        units = sample(f"antipatterns/antipatterns_{name}").analyses().decomposition.units
        return units.filter("steady")["wall_ns"].median()

    (f,) = [f for f in sample(f"antipatterns/antipatterns_{planted}").report().findings if f.rule == rule]
    measured = median_wall(planted) - median_wall("healthy")
    assert f.severity == "warning" and measured / 2 <= f.saving_wall_ns <= 2 * measured


def test_the_cpu_item_control_is_silent(sample):
    # .item() of a CPU tensor: aten::item with no copy and no synchronise under it.
    assert not [f for f in sample("antipatterns/antipatterns_host-sync-cpu-item").report().findings
                if f.rule == "host_sync"]
