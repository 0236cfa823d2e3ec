"""out_of_memory: [OutOfMemory] events, priced by the wall of the steps they hit (work lost or redone).

Family: any run whose caching allocator failed a request (the run raised, or a caller caught the
error and retried with a smaller batch).
"""

from __future__ import annotations

from factory import make_memory, make_oom
from test_findings import TF32, Loop, _each_step, found


def _body(oom: bool):
    def step(loop, i, t0):
        loop.call(["aten::mm"], t0 + 10, gpu=TF32, gpu_dur=500)
        loop.events.append(make_memory(t0 + 12, 0x1000 + i, 1 << 20, 1 << 30, 2 << 30))
        if oom and i == 1:
            loop.events.append(make_oom(t0 + 14, 1 << 40, 1 << 30, 2 << 30))
    return step


def test_fires_priced_by_the_step_it_hit(tmp_path):
    got = found(_each_step(Loop(), _body(True)).write(tmp_path, "a.json"))["out_of_memory"]
    assert got.severity == "warning" and got.steps == (1,) and got.resource == "once"
    assert got.evidence[0].bytes_per_step == 1 << 40 and got.quantities["events"] == 1
    assert got.saving_ns_per_step == 1_000_000  # step 1's wall: the lost work


def test_silent_without_an_oom_event(tmp_path):
    assert "out_of_memory" not in found(_each_step(Loop(), _body(False)).write(tmp_path, "b.json"))
