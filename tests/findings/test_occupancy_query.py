"""occupancy_query: cudaOccupancy* calls only when they come from an op the user could replace, and cost
the floor over the steady window.

Family: CUB-sized ops (nonzero, unique, sort, masked_select, embedding backward) query occupancy on
every call; cuBLAS/cuDNN query it inside their own heuristics (the DLRM, ResNet, Switch-Transformer
and Llama real traces: 1-216 queries per step under aten::mm/addmm/bmm/conv), which no user code
can cache or avoid, so those are never reported.
"""

from __future__ import annotations

from test_findings import ELEMENTWISE, TF32, Loop, _each_step, found

QUERY = "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"


def _step(op: str, kernel: str, query_us: float):
    def body(loop, i, t0):
        loop.call([op], t0 + 10, gpu=kernel, gpu_dur=20, extra_launches=((QUERY, query_us),))
    return body


def test_fires_on_a_user_op_whose_queries_cost_the_floor(tmp_path):
    # 30 µs of queries per 1 ms step: above the 20 µs floor.
    got = found(_each_step(Loop(), _step("aten::nonzero", ELEMENTWISE, 30.0)).write(tmp_path, "a.json"))
    occ = got["occupancy_query"]
    assert occ.severity == "info" and occ.resource == "host"
    assert occ.evidence[0].name == "aten::nonzero" and occ.evidence[0].detail == QUERY
    assert occ.cost_ns_per_step == 30_000 and occ.quantities["queries_per_step"] == 1


def test_silent_inside_a_library_gemm_and_below_the_floor(tmp_path):
    # Near miss 1: the same 30 µs of queries made inside aten::mm, which launches a cuBLAS GEMM.
    assert "occupancy_query" not in found(_each_step(Loop(), _step("aten::mm", TF32, 30.0)).write(tmp_path, "b.json"))
    # Near miss 2: a user op's 3 µs query (antipatterns_host-sync's nonzero: 5.7 µs per 8 ms step).
    assert "occupancy_query" not in found(
        _each_step(Loop(), _step("aten::nonzero", ELEMENTWISE, 3.0)).write(tmp_path, "c.json"))


def test_silent_on_the_shipped_traces_whose_queries_are_trivial(sample):
    for name in ("antipatterns/antipatterns_host-sync", "train_eager"):
        assert "occupancy_query" not in {f.rule for f in sample(name).report().findings}
