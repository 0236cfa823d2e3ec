"""tracekit diff on real public traces (tests/data/real): what A and B ran on is stated first, no
fusion is announced where none happened, host syncs and CUDA-graph launches are named.

Every asserted number was read from the raw JSON by hand (how: in the comment beside it).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from tracekit.analyses import pipeline, profile
from tracekit.analyses import units as units_mod
from tracekit.diff import pairwise
from tracekit.results import diff as result
from tracekit.load import load
from tracekit.render import renderer_for
from tracekit.render.json import diff as diff_json
from tracekit.render.views.verdict import plain, verdict_parts

#: Left out by --fast (tests/conftest.py): diffs of real traces.
pytestmark = pytest.mark.slow

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"
TUGOT = "tugot17__tokenomics-from-first-principles__rtx4090-tp2-llama-rank{}.json.gz"
NANO = "zhang-yuhui__nano-vllm__rtx4080l-decode-triton.json.gz"
B200 = "wbing520__ai-performance-engineering__b200-deepseekv3-train-step-memory.json.gz"
RESNET = "facebookresearch__param__resnet-2080ti-cudnn-train.json.gz"


@lru_cache(maxsize=None)
def prof(path: Path) -> profile.Profile:
    return profile.build(pipeline.run(load(path)))


def diff(a: Path, b: Path) -> result.Diff:
    return pairwise.diff(prof(a), prof(b))


def kinds(d: result.Diff) -> list[str]:
    return [f.kind for f in d.findings]


def test_two_dlrm_ranks_name_the_longer_stream_sync_and_no_fusion():
    d = diff(REAL / DLRM.format(0), REAL / DLRM.format(1))
    # Same devices (Tesla V100-SXM2-32GB), world size 8 in both distributedInfo: nothing to say first.
    assert not {"different_devices", "different_versions", "different_world_size"} & set(kinds(d))
    assert not (d.alignment.fusions or d.alignment.splits)
    # Raw JSON: the cudaStreamSynchronize events starting inside ProfilerStep#10 are 10 in each
    # file, their dur summing to 1142 µs (rank 0) and 6622 µs (rank 1); none lies inside an
    # aten::item / aten::_local_scalar_dense span of the same thread.
    (sync,) = [s for s in d.host_syncs if s.name == "cudaStreamSynchronize"]
    assert (sync.quantity.a, sync.quantity.b, sync.count_a, sync.count_b) == (1_142_000, 6_622_000, 10, 10)
    (finding,) = [f for f in d.findings if f.kind == "host_sync"]
    assert [s.name for s in finding.subjects] == ["cudaStreamSynchronize"]
    assert "host sync cudaStreamSynchronize 1,142.0 µs → 6,622.0 µs per step" in plain(verdict_parts(d))
    md = _render("md", d)
    assert "| `cudaStreamSynchronize` | 1,142.0 µs | 6,622.0 µs |" in md
    data = diff_json.data(d)
    assert data["a"]["setup"] == {"devices": ["Tesla V100-SXM2-32GB"], "versions": {}, "world_size": 8, "rank": 0}
    assert data["b"]["setup"]["rank"] == 1
    host = {h["name"]: h for h in data["host_syncs"]}
    assert (host["cudaStreamSynchronize"]["a"], host["cudaStreamSynchronize"]["b"]) == (1_142_000, 6_622_000)


def test_other_devices_and_world_sizes_come_first():
    d = diff(REAL / DLRM.format(0), REAL / TUGOT.format(0))
    # deviceProperties: "Tesla V100-SXM2-32GB" (×8) and "NVIDIA GeForce RTX 4090" (×2); the
    # kernels ran on device 0 of each. distributedInfo.world_size: 8 and 2.
    assert kinds(d)[:2] == ["different_devices", "different_world_size"]
    assert dict(d.findings[0].quantities) == {"a": "Tesla V100-SXM2-32GB", "b": "NVIDIA GeForce RTX 4090"}
    assert dict(d.findings[1].quantities) == {"a": 8, "b": 2}
    assert plain(verdict_parts(d)).startswith(
        "A: V100-SXM2-32GB, B: RTX 4090 — kernel times are not comparable across devices; "
        "A: world size 8, B: world size 2 — each rank's share of the work differs; ")
    for fmt in ("md", "term"):
        assert "A: V100-SXM2-32GB, B: RTX 4090 — kernel times are not comparable across devices" in _render(fmt, d)


def test_other_software_versions_are_stated():
    d = diff(REAL / NANO, REAL / B200)
    # Top level of the raw JSON: cuda_runtime_version 12080 / 12090, cupti_version 26 / 28,
    # cuda_driver_version 13000 in both; NCCL 2.27.3 only in nano-vllm's distributedInfo (B has
    # none, so it is not compared).
    (versions,) = [f for f in d.findings if f.kind == "different_versions"]
    assert [s.changes for s in versions.subjects] == [
        (("cuda_runtime_version", "12080", "12090"),), (("cupti_version", "26", "28"),)]
    assert kinds(d)[:2] == ["different_devices", "different_versions"]
    assert ("A: RTX 4080 Laptop GPU, B: B200 — kernel times are not comparable across devices; "
            "A: CUDA runtime 12.8, CUPTI 26; B: CUDA runtime 12.9, CUPTI 28 — other software versions") \
        in plain(verdict_parts(d))


def test_nccl_version_and_world_size_of_two_serving_runs():
    d = diff(REAL / TUGOT.format(0), REAL / NANO)
    # distributedInfo: nccl_version "2.20.5" / "2.27.3", world_size 2 / 1.
    assert kinds(d)[:3] == ["different_devices", "different_versions", "different_world_size"]
    (versions,) = [f for f in d.findings if f.kind == "different_versions"]
    assert [s.changes for s in versions.subjects] == [(("nccl_version", "2.20.5", "2.27.3"),)]


def test_same_setup_alone_is_no_change():
    d = diff(REAL / TUGOT.format(1), REAL / TUGOT.format(1))
    assert not d.findings and plain(verdict_parts(d)).startswith("No change")


def test_resnet_cut_at_another_point_of_the_iteration_announces_no_fusion(monkeypatch):
    """A: iterations from one DataLoader fetch to the next (the units rule's first marker); B: the
    same trace in iterations from one optimizer step to the next. Every unit runs the same kernels,
    rotated: before, the diff announced fusions (relu, add, fill, div + mean) and a split."""
    trace = load(REAL / RESNET)
    a = profile.build(pipeline.run(trace))
    monkeypatch.setattr(units_mod, "ITERATION_MARKERS", (("Optimizer.step#", "the optimizer step"),))
    b = profile.build(pipeline.run(trace))
    assert a.unit_kind.startswith("enumerate(DataLoader)") and b.unit_kind.startswith("Optimizer.step")
    d = pairwise.diff(a, b)
    al = d.alignment
    assert not (al.fusions or al.splits or al.changed or al.replaced or al.removed or al.added)
    assert al.moved > 0 and al.is_identical
    assert not d.cpu_ops_added and not d.cpu_ops_removed
    assert not any(f.kind in ("fusion", "split", "removed", "added") for f in d.findings)


def test_cuda_graph_launches_that_appear_and_vanish(sample):
    eager, graphs, compiled = (sample(name, execution_trace=None).profile()
                               for name in ("mlp_eager", "mlp_compile-cudagraphs", "mlp_compile"))
    # Raw JSON: one cudaGraphLaunch starts inside each of ProfilerStep#2, #3 and #4 of the
    # cudagraphs capture, none in the eager one.
    d = pairwise.diff(eager, graphs)
    (g,) = [f for f in d.findings if f.kind == "graph_launches"]
    assert dict(g.quantities) == {"a": 0, "b": 1}
    assert "CUDA-graph launches appeared (1 per step)" in plain(verdict_parts(d))
    assert diff_json.data(d)["graph_launches_per_step"]["values_b"] == [1, 1, 1]
    back = pairwise.diff(graphs, compiled)
    assert "CUDA-graph launches vanished (1 per step in A)" in plain(verdict_parts(back))


def test_host_sync_that_vanished(sample):
    # Raw JSON: train_eager's steps run aten::item (.item() on the loss); mlp_eager has no aten::item.
    d = pairwise.diff(*(sample(name, execution_trace=None).profile() for name in ("train_eager", "mlp_eager")))
    (f, *_) = [f for f in d.findings if f.kind == "host_sync"]
    assert [s.name for s in f.subjects] == ["aten::item"] and f.quantities["b"] == 0
    assert plain(verdict_parts(d)).count("the host sync aten::item (") == 1


def _render(fmt: str, d: result.Diff) -> str:
    import io

    out = io.StringIO()
    renderer_for(fmt).render(d, out, [])
    return out.getvalue()


@pytest.mark.parametrize("name", [DLRM.format(0), TUGOT.format(0), NANO])
def test_a_real_trace_against_itself_is_no_change(name):
    d = diff(REAL / name, REAL / name)
    assert d.alignment.is_identical and not d.findings
