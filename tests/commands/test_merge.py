"""`tracekit merge DIR`: the ranks as one trace, each rank its own processes, on one clock."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from factory import ALL_REDUCE, write_two_ranks
from tracekit.commands import main
from tracekit.load import load

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"
@pytest.fixture()
def hand_set(tmp_path):
    return write_two_ranks(tmp_path / "ranks")


def _merge(directory: Path, output: Path, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["merge", str(directory), "-o", str(output)])
    return exit_info.value.code, capsys.readouterr().err


def _kernels(path: Path) -> int:
    trace = load(path)
    return trace.gpu.filter(trace.gpu["kind"] == "kernel").height


def test_hand_made_ranks_merge_onto_one_clock_with_their_own_pids_and_ids(hand_set, tmp_path, capsys):
    out = tmp_path / "merged.json"
    code, err = _merge(hand_set, out, capsys)
    assert code == 0
    assert err.startswith(f"wrote {out} (") and "2 ranks, 32 events" in err
    assert "largest offset +5.0 ms (rank 1)" in err
    data = json.loads(out.read_text())
    # The ends of both all-reduces differ by exactly the shift: 5,000,250 ns.
    assert data["tracekitMerge"]["offsets_ns"] == {"0": 0, "1": 5_000_250}
    assert "rank" not in data["distributedInfo"]
    events = data["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {100: "rank 0", 101: "rank 0 GPU 0", 200: "rank 1", 201: "rank 1 GPU 1"}
    gemm = {e["pid"]: e for e in events if e["name"] == "ampere_sgemm_128x64_nn"}
    # Rank 1's gemm: written at 5400.375 µs on its clock, minus the 5000.250 µs offset (base 0).
    assert gemm[201]["ts"] == 400.125 and gemm[101]["ts"] == 400
    assert gemm[201]["args"]["correlation"] == 10_000_000_002 and gemm[101]["args"]["correlation"] == 2
    flows = sorted(e["id"] for e in events if e["ph"] == "s")
    assert flows == [10, 11, 10_000_000_010, 10_000_000_011]

    merged = load(out)
    kernels = merged.gpu.filter(merged.gpu["kind"] == "kernel")
    assert kernels.height == 6 == sum(_kernels(p) for p in sorted(hand_set.iterdir()))
    assert sorted(kernels["pid"].unique().to_list()) == ["101", "201"]
    # The all-reduces now end together on one clock: 350 and 650 µs for both ranks.
    reduce = kernels.filter(kernels["name"] == ALL_REDUCE).sort("pid", "ts")
    ends = (reduce["ts"] + reduce["dur"]).to_list()
    assert ends == [350_000, 650_000, 350_000, 650_000]
    # Every kernel still finds its launch: ids stayed apart.
    launched = merged.launches.join(kernels, on="correlation", how="inner")
    assert launched.height == 6


@pytest.mark.slow
def test_two_dlrm_ranks_merge(tmp_path, capsys):
    directory = tmp_path / "dlrm"
    directory.mkdir()
    for rank in (0, 1):
        shutil.copy(REAL / DLRM.format(rank), directory)
    out = tmp_path / "merged.json.gz"
    code, err = _merge(directory, out, capsys)
    assert code == 0 and "2 ranks" in err
    data = json.loads(gzip.decompress(out.read_bytes()))
    offset = data["tracekitMerge"]["offsets_ns"]["1"]
    assert offset == -500  # the median of the 2 ranks' collective end differences, on one host
    base = data["baseTimeNanoseconds"]
    # By hand: rank 1's first kernel is at 1694128201422243 µs in its file.
    first = min((e for e in data["traceEvents"] if e.get("cat") == "kernel" and e["pid"] // 100 == 2),
                key=lambda e: e["ts"])
    assert base + round(first["ts"] * 1000) == 1694128201422243 * 1000 - offset
    merged = load(out)
    kernels = merged.gpu.filter(merged.gpu["kind"] == "kernel")
    assert kernels.height == 245 + 310 == sum(_kernels(p) for p in sorted(directory.iterdir()))
    pids = kernels.group_by("pid").len().sort("pid")
    assert pids["pid"].to_list() == ["101", "201"] and pids["len"].to_list() == [245, 310]


def test_refusals_are_one_line(hand_set, tmp_path, capsys):
    code, err = _merge(hand_set, hand_set / "rank0.json", capsys)
    assert code == 2 and "refusing to overwrite an input" in err and err.count("\n") == 1
    code, err = _merge(hand_set / "rank0.json", tmp_path / "m.json", capsys)
    assert code == 2 and "merge reads a directory of rank traces, not a file" in err
    code, err = _merge(hand_set, tmp_path / "m.txt", capsys)
    assert code == 2 and "written as .json or .json.gz" in err
    (hand_set / "rank0.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1}]}')
    code, err = _merge(hand_set, tmp_path / "m.json", capsys)
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "m.json").exists()
