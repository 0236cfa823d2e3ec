"""`tracekit report DIR`: per-rank summaries in parallel processes, slowest rank named."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracekit import ranks
from tracekit.commands import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _as_rank(src: str, dest: Path, rank: int) -> None:
    data = json.loads(gzip.decompress((SAMPLES / src).read_bytes()))
    data["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    dest.write_bytes(gzip.compress(json.dumps(data).encode()))


@pytest.fixture()
def rank_dir(tmp_path):
    _as_rank("mlp_eager.json.gz", tmp_path / "rank1.json.gz", 1)
    _as_rank("mlp_compile.json.gz", tmp_path / "rank0.json.gz", 0)
    (tmp_path / "rank1.et.json.gz").write_bytes(b"ignored: execution traces are not rank traces")
    return tmp_path


def test_ranks_sorted_with_slowest_named(rank_dir):
    result = ranks.analyze(rank_dir, workers=2)
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
