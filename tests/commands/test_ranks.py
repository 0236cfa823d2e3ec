"""`tracekit report DIR`: per-rank summaries in parallel processes, slowest rank named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory import copy_as_rank
from tracekit import ranks
from tracekit.commands import main
from tracekit.errors import UsageError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _as_rank(src: str, dest: Path, rank: int, world_size: int = 2) -> None:
    copy_as_rank(SAMPLES / src, dest, rank, world_size)


@pytest.fixture()
def rank_dir(tmp_path):
    _as_rank("mlp_eager.json.gz", tmp_path / "rank1.json.gz", 1)
    _as_rank("mlp_compile.json.gz", tmp_path / "rank0.json.gz", 0)
    (tmp_path / "rank1.et.json.gz").write_bytes(b"ignored: execution traces are not rank traces")
    return tmp_path


@pytest.mark.slow
def test_ranks_sorted_with_slowest_named(rank_dir):
    result = ranks.analyze(rank_dir, workers=2)
    assert (result.world_size, result.missing) == (2, ())
    rows = result.ranks.to_dicts()
    assert [(r["rank"], r["file"]) for r in rows] == [(0, "rank0.json.gz"), (1, "rank1.json.gz")]
    # Eager MLP steps take ~1.4 ms of CPU dispatch against ~0.5 ms compiled (see test_report_real).
    assert result.slowest == "rank1.json.gz"
    assert rows[1]["kernel_count"] == 15 and rows[0]["kernel_count"] == 12


def test_broken_rank_reported_others_kept(rank_dir):
    (rank_dir / "rank2.json").write_text("{not json")
    result = ranks.analyze(rank_dir, workers=1)
    broken = result.ranks.filter(result.ranks["file"] == "rank2.json").row(0, named=True)
    assert "not valid JSON" in broken["error"] or "not JSON" in broken["error"]
    assert result.ranks.height == 3 and result.slowest == "rank1.json.gz"


@pytest.mark.slow
def test_cli_directory_json(rank_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(rank_dir), "--format", "json"])
    assert exit_info.value.code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "tracekit.ranks/1" and data["slowest"] == "rank1.json.gz"


def test_cli_empty_directory_is_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no trace files" in capsys.readouterr().err


def _refused(directory: Path) -> str:
    """The one line refusing ``directory`` (read in this process: a pool's start costs seconds)."""
    with pytest.raises(UsageError) as refused:
        ranks.analyze(directory, workers=1)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{directory}: not a set of ranks: ")
    assert line.endswith(f"({ranks.SET_RULE})")
    return line


def test_the_command_refuses_a_directory_that_is_not_a_set_of_ranks_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ranks.parallel, "cores", lambda: 1)
    for name in ("mlp_eager.json.gz", "mlp_compile.json.gz"):
        (tmp_path / name).write_bytes((SAMPLES / name).read_bytes())
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path), "--format", "json"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and captured.out == ""
    assert captured.err == f"tracekit: error: {_refused(tmp_path)}\n"


def test_traces_without_a_rank_are_not_a_set_of_ranks(tmp_path):
    # The shipped samples are single-process traces: no distributedInfo at all.
    for name in ("mlp_eager.json.gz", "mlp_compile.json.gz"):
        (tmp_path / name).write_bytes((SAMPLES / name).read_bytes())
    line = _refused(tmp_path)
    assert "mlp_compile.json.gz, mlp_eager.json.gz name no distributedInfo.rank (2 of 2 traces)" in line


def test_one_rank_less_trace_among_ranks_is_named(rank_dir):
    (rank_dir / "other.json.gz").write_bytes((SAMPLES / "linear_eager.json.gz").read_bytes())
    assert "other.json.gz names no distributedInfo.rank (1 of 3 traces)" in _refused(rank_dir)


def test_two_traces_of_one_rank_are_refused(rank_dir):
    _as_rank("linear_eager.json.gz", rank_dir / "rank1-again.json.gz", 1)
    assert "rank1-again.json.gz and rank1.json.gz are both rank 1" in _refused(rank_dir)


def test_traces_of_runs_of_different_sizes_are_refused(rank_dir):
    _as_rank("linear_eager.json.gz", rank_dir / "rank2.json.gz", 2, world_size=4)
    line = _refused(rank_dir)
    assert "world_size differs (2 in rank0.json.gz, 4 in rank2.json.gz): traces of different runs" in line


def test_a_rank_outside_its_world_is_refused(tmp_path):
    _as_rank("mlp_eager.json.gz", tmp_path / "r.json.gz", 2, world_size=2)
    assert "r.json.gz is rank 2 of a world of 2" in _refused(tmp_path)


def test_gaps_are_allowed_and_named(tmp_path, capsys, monkeypatch):
    # Ranks 1 and 4 of 8 (a job profiling some ranks only): 0, 2-3 and 5-7 are not in the directory.
    monkeypatch.setattr(ranks.parallel, "cores", lambda: 1)  # in this process: a pool's start costs seconds
    _as_rank("mlp_eager.json.gz", tmp_path / "r1.json.gz", 1, world_size=8)
    _as_rank("mlp_compile.json.gz", tmp_path / "r4.json.gz", 4, world_size=8)
    result = ranks.analyze(tmp_path, workers=1)
    assert (result.world_size, result.missing) == (8, ((0, 0), (2, 3), (5, 7)))
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path), "--format", "md"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Not in this directory: ranks 0, 2–3, 5–7 of 8 (the slowest is the slowest of those here)." in out
    with pytest.raises(SystemExit):
        main(["report", str(tmp_path), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert (data["world_size"], data["missing_ranks"]) == (8, [[0, 0], [2, 3], [5, 7]])


def test_without_a_world_size_the_gaps_below_the_highest_rank_are_named():
    rows = [{"file": "a", "steps": 1, "named_rank": True, "rank": 0, "world_size": None},
            {"file": "b", "steps": 1, "named_rank": True, "rank": 3, "world_size": None},
            {"file": "c", "error": "not JSON"}]  # failed to load: takes no part
    assert ranks.check_set("d", rows) == (None, ((1, 2),))


def test_a_huge_world_is_named_in_runs_not_rank_by_rank():
    rows = [{"file": "a", "steps": 1, "named_rank": True, "rank": 5, "world_size": 2**31 - 1}]
    assert ranks.check_set("d", rows) == (2**31 - 1, ((0, 4), (6, 2**31 - 2)))
