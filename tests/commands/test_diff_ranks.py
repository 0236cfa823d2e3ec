"""`tracekit diff DIR_A DIR_B`: two sets of ranks compared, per-rank medians and per-collective
bandwidth, on the public DLRM ranks against the same ranks with a delay injected (tests/delays.py)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from delays import inject
from tracekit.commands import main

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"
DELAY_US = 20_000.0


def _write(traces: dict[int, dict], where: Path) -> Path:
    where.mkdir()
    for r, t in traces.items():
        (where / DLRM.format(r)).write_bytes(gzip.compress(json.dumps(t).encode()))
    return where


def _diff(a: Path, b: Path, capsys, *more: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", str(a), str(b), *more])
    got = capsys.readouterr()
    return exit_info.value.code, got.out, got.err


def _sets(tmp_path: Path, where: Path, count: int) -> tuple[Path, Path]:
    raw = {r: json.loads(gzip.decompress((where / DLRM.format(r)).read_bytes())) for r in range(count)}
    # Rank 1 spends 20 ms longer in a forward op before its second collective.
    delayed, _ = inject(raw, 1, 1, "forward", DELAY_US)
    return _write(raw, tmp_path / "a"), _write(delayed, tmp_path / "b")


@pytest.mark.slow
def test_a_delayed_rank_grows_its_step_and_the_others_waits(tmp_path, capsys):
    a, b = _sets(tmp_path, REAL, 2)
    code, out, _ = _diff(a, b, capsys, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "tracekit.rank_diff/1"
    ranks = {r["rank"]: r for r in data["ranks"]}
    assert sorted(ranks) == [0, 1] and ranks[0]["steps_a"] == ranks[0]["steps_b"] == 1
    # Both steps last the delay longer (the fleet leaves the collective together, 20 ms later)…
    assert ranks[1]["step_delta_ns"] == ranks[0]["step_delta_ns"] == 20_000_000
    # …but only rank 0 waited it out inside NCCL; rank 1, late, waited no longer than before.
    assert ranks[0]["wait_delta_ns"] >= 19_000_000 >= ranks[1]["wait_delta_ns"]
    assert data["b"]["culprit"] == 1
    # The same 8 collectives on both sides (2 ranks matched by order), paired one to one.
    pairs = data["collectives"]
    assert len(pairs) == 8 and all(p["instance_a"] is not None and p["instance_b"] is not None for p in pairs)
    assert {(p["kind"], p["order"]) for p in pairs} >= {("all_to_all", 0), ("all_reduce", 0)}
    # Bus bandwidth is measured over the last arriver's kernel, which the delay does not lengthen.
    moved = [p for p in pairs if p["busbw_ratio"] is not None and abs(p["busbw_ratio"] - 1) > 0.01]
    assert moved == []

    code, out, _ = _diff(a, b, capsys, "--format", "md")
    assert code == 0
    assert "Median step changed most on rank" in out
    assert "Waits at collectives grew on rank 0 (most on rank 0: +" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TRACEKIT_REAL_TRACES"), reason="TRACEKIT_REAL_TRACES not set")
def test_eight_dlrm_ranks_one_delayed(tmp_path, capsys):
    a, b = _sets(tmp_path, Path(os.environ["TRACEKIT_REAL_TRACES"]), 8)
    code, out, _ = _diff(a, b, capsys, "--format", "json")
    assert code == 0
    ranks = {r["rank"]: r for r in json.loads(out)["ranks"]}
    assert all(ranks[r]["step_delta_ns"] == 20_000_000 for r in range(8))
    others = [ranks[r]["wait_delta_ns"] for r in range(8) if r != 1]
    assert min(others) >= 15_000_000 and ranks[1]["wait_delta_ns"] < min(others)


def test_a_directory_and_a_file_are_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    f = tmp_path / "t.json"
    f.write_text("{}")
    for args in ((tmp_path / "d", f), (f, tmp_path / "d")):
        code, _, err = _diff(*args, capsys)
        assert code == 2 and err.count("\n") == 1
        assert "diff compares two traces or two directories of ranks" in err
