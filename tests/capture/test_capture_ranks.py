"""``tracekit capture --variant ranks`` for real: two processes, gloo, on the CPU, a planted delay.

The capture runs once per module (two spawned ranks of a small DDP model: about 15 s on two cores);
the tests read its folder: the traces, the manifest, and what ``tracekit report DIR`` makes of them.
Skipped without torch or without torch.distributed's gloo backend; CI installs the CPU build.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from capture.cli import capture_command

#: Left out by --fast (tests/conftest.py): spawns two torch processes.
pytestmark = pytest.mark.slow

#: Rank 1 sleeps 80 ms in backward on the middle profiled step: far above what two ranks sharing a
#: small machine with other work skew by on their own (a few ms), so the planted rank is the answer.
LATE_MS = 80


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch has no torch.distributed gloo backend")
    out = tmp_path_factory.mktemp("ranks")
    result = CliRunner().invoke(capture_command, [
        "--variant", "ranks", "--world-size", "2", "--late", f"1:backward:{LATE_MS}", "--ranks-shape", "8,64,2",
        "--out", str(out)])
    return out, result


def _trace(path: Path) -> dict:
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b", f"{path.name} is not gzipped"
    return json.loads(gzip.decompress(raw))


def test_each_rank_writes_a_trace_naming_its_rank(captured) -> None:
    out, result = captured
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "rank0.json.gz", "rank1.json.gz"]
    for rank in (0, 1):
        doc = _trace(out / f"rank{rank}.json.gz")
        info = doc["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)
        assert doc["traceName"] == f"rank{rank}.json.gz" and doc["host_name"] == "localhost"
        names = Counter(e.get("name") for e in doc["traceEvents"] if e.get("ph") == "X")
        assert sum(n for k, n in names.items() if str(k).startswith("ProfilerStep#")) == 3
        # Per step: the data span's all_gather, and one all_reduce per layer (2 buckets of one layer):
        # each enqueued by a c10d op on the calling thread and run as a gloo:<kind> span on a worker.
        assert names["data"] == 3
        assert names["c10d::allgather_"] == names["gloo:all_gather"] == 3
        assert names["c10d::allreduce_"] == names["gloo:all_reduce"] == 6
        # PyTorch 2.13's gloo records no record_param_comms op: no Seq, no process group name.
        assert names["record_param_comms"] == 0


def test_manifest_states_the_run_and_the_planted_delay(captured) -> None:
    out, _ = captured
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema"] == "tracekit.capture-manifest/1" and m["device"]["type"] == "cpu"
    assert m["command"].startswith("tracekit capture --variant ranks --world-size 2")
    assert m["versions"]["torch"].split("+")[0] and m["settings"]["schedule"] == {"wait": 1, "warmup": 1, "active": 3}
    r = m["ranks"]
    assert (r["world_size"], r["backend"], r["late_step"]) == (2, "gloo", 3)
    assert r["late"] == {"rank": 1, "phase": "backward", "ms": float(LATE_MS), "step": 3}
    assert r["model"]["layers"] == 2 and r["model"]["dim"] == 64 and r["model"]["batch"] == 8
    by_rank = {c["rank"]: c for c in m["captures"]}
    assert [c["status"] for c in m["captures"]] == ["ok", "ok"]
    assert by_rank[0]["slept_ms"] == {} and LATE_MS <= by_rank[1]["slept_ms"]["3"] < LATE_MS + 50
    for rank, c in by_rank.items():
        assert c["trace_file"] == f"rank{rank}.json.gz" and c["distributed_info"]["rank"] == rank
        assert len(c["step_wall_ms"]) == len(c["losses"]) == 5
    # The sleep is inside step 3 of rank 1, and rank 0 waited it out in the same step.
    assert by_rank[1]["step_wall_ms"][3] >= LATE_MS and by_rank[0]["step_wall_ms"][3] >= LATE_MS * 0.9


def test_report_dir_finds_the_late_rank_and_phase(captured) -> None:
    from tracekit import ranks

    out, _ = captured
    result = ranks.analyze(out, workers=1, cache=False)
    assert result.world_size == 2 and result.missing == ()
    cross = result.skew
    assert cross is not None and cross.match == "order" and cross.unmatched_share == 0.0
    assert cross.ranks["calls"].to_list() == [9, 9]
    assert set(cross.instances["kind"]) == {"all_gather", "all_reduce"}
    assert set(cross.instances["arrival"]) == {"host"}
    # Rank 1 slept LATE_MS in its middle layer's backward hook: rank 0 waited at least most of it.
    (step3,) = cross.culprits.filter(cross.culprits["step"] == 3).iter_rows(named=True)
    assert step3["rank"] == 1 and step3["lost_phase"] == "backward"
    assert step3["lost_ns"] >= 0.9 * LATE_MS * 1_000_000 and step3["caused_ns"] >= 0.8 * LATE_MS * 1_000_000
    assert result.culprit == 1
