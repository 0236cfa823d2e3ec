"""`tracekit report DIR` as a map and a reduce: each rank trace mapped to a compact Parquet
summary, kept in a cache folder keyed by the file's state, and the cross-rank analysis reading only
summaries (tracekit/ranks/summary.py, cache.py)."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import polars as pl
import pytest

from factory import copy_as_rank
from tracekit import ranks
from tracekit.commands import main
from tracekit.errors import UsageError
from tracekit.ranks import cache, summary

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
REAL = os.environ.get("TRACEKIT_REAL_TRACES")
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"


@pytest.fixture()
def two_ranks(tmp_path):
    where = tmp_path / "ranks"
    where.mkdir()
    copy_as_rank(SAMPLES / "mlp_eager.json.gz", where / "rank0.json.gz", 0, 3)
    copy_as_rank(SAMPLES / "mlp_compile.json.gz", where / "rank1.json.gz", 1, 3)
    return where


@pytest.fixture()
def counted(monkeypatch):
    """The paths the map function reads, in this process (workers=1: no pool)."""
    seen: list[str] = []
    real = summary.summarize

    def counting(path: str) -> dict:
        seen.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(summary, "summarize", counting)
    return seen


def _json(result) -> str:
    import io

    from tracekit.render import renderer_for

    out = io.StringIO()
    renderer_for("json").render(result, out)
    return out.getvalue()


def _same(a: dict, b: dict) -> bool:
    if set(a) != set(b):
        return False
    for key, value in a.items():
        if isinstance(value, pl.DataFrame):
            if not (value.schema == b[key].schema and value.equals(b[key])):
                return False
        elif value != b[key]:
            return False
    return True


def test_a_summary_reads_back_equal_frames_dtypes_and_all(two_ranks):
    row = summary.summarize(str(two_ranks / "rank0.json.gz"))
    back = summary.decode(summary.encode(row))
    assert _same(row, back)
    assert back["rank"] == 0 and back["world_size"] == 3 and back["named_rank"] is True
    # A trace that failed to load keeps its file and error only: check_set tells it by the missing figures.
    failed = {"file": "x.json", "error": "not JSON: unexpected character at byte 1"}
    assert summary.decode(summary.encode(failed)) == failed


def test_class_shares_hold_every_kernel_microsecond_of_the_trace(two_ranks):
    # By hand from the raw JSON: the kernels' durations (integer µs in this trace), summed.
    raw = json.loads(gzip.decompress((two_ranks / "rank0.json.gz").read_bytes()))
    kernel_us = sum(e["dur"] for e in raw["traceEvents"] if e.get("cat") == "kernel")
    row = summary.summarize(str(two_ranks / "rank0.json.gz"))
    assert sum(ns for _, ns in row["classes"]) == round(kernel_us * 1000)
    classes = ranks.analyze(two_ranks, workers=1, cache=False).classes
    zero = classes.filter(pl.col("rank") == 0)
    assert zero["gpu_ns"].sum() == round(kernel_us * 1000)
    assert zero["share"].sum() == pytest.approx(1.0)
    assert zero["gpu_ns"].to_list() == sorted(zero["gpu_ns"].to_list(), reverse=True)


def test_a_rerun_reads_only_new_or_changed_ranks(two_ranks, counted):
    first = ranks.analyze(two_ranks, workers=1)
    assert sorted(counted) == ["rank0.json.gz", "rank1.json.gz"]
    store = cache.default_folder()  # the suite's own (tests/conftest.py), never DIR
    assert not list(two_ranks.glob('.*'))
    assert len(list(store.glob("*.parquet"))) == 2

    counted.clear()
    again = ranks.analyze(two_ranks, workers=1)
    assert counted == []  # the reduce read the two summaries and nothing else
    assert _json(again) == _json(first)

    # The directory grows by one rank: only that one is read.
    copy_as_rank(SAMPLES / "linear_eager.json.gz", two_ranks / "rank2.json.gz", 2, 3)
    grown = ranks.analyze(two_ranks, workers=1)
    assert counted == ["rank2.json.gz"]
    assert grown.ranks["rank"].to_list() == [0, 1, 2]

    # Rank 1 is rewritten (another trace, so another size and time): only rank 1 is read, and its old
    # summary is replaced, not kept beside the new one.
    counted.clear()
    copy_as_rank(SAMPLES / "linear_compile.json.gz", two_ranks / "rank1.json.gz", 1, 3)
    changed = ranks.analyze(two_ranks, workers=1)
    assert counted == ["rank1.json.gz"]
    assert len(list(store.glob("*.parquet"))) == 3
    fresh = ranks.analyze(two_ranks, workers=1, cache=False)
    assert _json(changed) == _json(fresh)


def test_a_damaged_summary_is_read_again(two_ranks, counted):
    ranks.analyze(two_ranks, workers=1)
    for entry in cache.default_folder().glob("*.parquet"):
        entry.write_bytes(entry.read_bytes()[:100])
    counted.clear()
    ranks.analyze(two_ranks, workers=1)
    assert sorted(counted) == ["rank0.json.gz", "rank1.json.gz"]


def test_no_cache_keeps_nothing_and_a_named_cache_folder_is_used(two_ranks, tmp_path, counted):
    ranks.analyze(two_ranks, workers=1, cache=False)
    assert not list(cache.default_folder().glob("*.parquet"))
    elsewhere = tmp_path / "summaries"
    ranks.analyze(two_ranks, workers=1, cache=elsewhere)
    assert len(list(elsewhere.glob("*.parquet"))) == 2 and not list(cache.default_folder().glob("*.parquet"))
    counted.clear()
    ranks.analyze(two_ranks, workers=1, cache=elsewhere)
    assert counted == []


def test_a_cache_folder_that_cannot_be_made_is_one_line(two_ranks, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(two_ranks), "--cache", str(blocker / "sub"), "--format", "json"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert f"--cache {blocker / 'sub'}: cannot make this folder" in err


@pytest.mark.parametrize("argv, says", [
    (["--engine", "pool"], "--engine, --cache and --no-cache apply to a directory of ranks, not to one trace"),
    (["--no-cache"], "--engine, --cache and --no-cache apply to a directory of ranks, not to one trace"),
])
def test_engine_and_cache_options_on_one_trace_are_refused(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(SAMPLES / "mlp_eager.json.gz"), *argv])
    assert exit_info.value.code == 2 and says in capsys.readouterr().err


def test_cache_and_no_cache_together_are_refused(two_ranks, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(two_ranks), "--cache", str(two_ranks / "c"), "--no-cache"])
    assert exit_info.value.code == 2 and "--cache and --no-cache contradict" in capsys.readouterr().err


def test_engine_ray_without_ray_names_the_extra(two_ranks, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UsageError, match=r"--engine ray needs Ray, which is not installed: "
                                         r"pip install 'tracekit-torch\[ray\]'"):
        ranks.analyze(two_ranks, engine="ray")


@pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES not set")
def test_dlrm_summaries_are_under_one_percent_of_the_json(tmp_path):
    for r in range(8):
        path = Path(REAL) / DLRM.format(r)
        size = len(summary.summary_of(str(path)))
        json_bytes = len(gzip.decompress(path.read_bytes()))
        # ~8.7 KB against ~900 KB of JSON (0.88-0.97 %); the gzip file itself is ~54 KB.
        assert size <= json_bytes / 100, (r, size, json_bytes)


class _Bar:
    def update(self, done: int, total: int) -> None:
        pass


def test_pool_workers_start_with_the_allocator_giving_memory_back_and_this_process_keeps_its_own():
    # The variable Polars' allocator reads as a worker imports Polars: this process's options (Polars
    # put its defaults there on import) followed by the release-at-once ones, which win (jemalloc keeps
    # the last of an option given twice). os.getenv runs in the workers: what each one started with.
    from tracekit import parallel
    from tracekit.ranks import engines

    var = parallel.ALLOCATOR_VAR
    mine = os.environ.get(var)
    assert mine and "dirty_decay_ms" in mine  # Polars is imported here: its defaults are set
    got = engines.run_pool([var, "HOME"], 2, _Bar(), summarise=os.getenv)
    assert got[var] == f"{mine},dirty_decay_ms:0,muzzy_decay_ms:0"
    assert got["HOME"] == os.environ.get("HOME")  # the rest of the environment is inherited as it was
    assert os.environ.get(var) == mine  # this process's is put back
    # A worker started again for a file whose process died gets it too (the one-process pool).
    with parallel.spawn_pool(1, env=parallel.releasing_env()) as pool:
        assert pool.submit(os.getenv, var).result() == got[var]
    with parallel.spawn_pool(1) as pool:  # a pool without env: this process's environment alone
        assert pool.submit(os.getenv, var).result() == mine
