"""`tracekit report DIR --engine ray`: the map step as Ray tasks on a real local Ray instance that
this module starts, giving the process pool's report byte for byte."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from factory import copy_as_rank
from tracekit.commands import main

ray = pytest.importorskip("ray", reason="Ray is not installed (the ray extra)")

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
REAL = os.environ.get("TRACEKIT_REAL_TRACES")
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"


@pytest.fixture(scope="module")
def local_ray():
    # A real instance of two CPUs, no dashboard; the engine finds it connected and leaves it running.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _report(directory: Path, capsys, *engine: str) -> bytes:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(directory), "--format", "json", "--no-cache", *engine])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0, captured.err
    return captured.out.encode()


def test_ray_and_the_pool_give_the_same_json_byte_for_byte(local_ray, tmp_path, capsys):
    where = tmp_path / "ranks"
    where.mkdir()
    copy_as_rank(SAMPLES / "mlp_eager.json.gz", where / "rank0.json.gz", 0, 2)
    copy_as_rank(SAMPLES / "mlp_compile.json.gz", where / "rank1.json.gz", 1, 2)
    (where / "rank1.et.json.gz").write_bytes(b"an execution trace: not a rank")
    pool = _report(where, capsys, "--engine", "pool")
    on_ray = _report(where, capsys, "--engine", "ray")
    assert on_ray == pool
    assert b'"file": "rank0.json.gz"' in pool and b'"file": "rank1.json.gz"' in pool


@pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES not set")
def test_the_dlrm_culprit_through_ray_is_the_pools(local_ray, tmp_path, capsys):
    where = tmp_path / "dlrm"
    where.mkdir()
    for r in range(8):
        (where / DLRM.format(r)).symlink_to(Path(REAL) / DLRM.format(r))
    pool = _report(where, capsys)  # the default engine
    on_ray = _report(where, capsys, "--engine", "ray")
    assert on_ray == pool
    assert json.loads(pool)["culprit"] == 7  # the rank the others waited for (tests/analyses/test_skew.py)


def test_ray_summaries_fill_the_cache_the_pool_then_reads(local_ray, tmp_path, monkeypatch):
    from tracekit import ranks
    from tracekit.ranks import summary

    where = tmp_path / "ranks"
    where.mkdir()
    copy_as_rank(SAMPLES / "mlp_eager.json.gz", where / "rank0.json.gz", 0, 2)
    copy_as_rank(SAMPLES / "mlp_compile.json.gz", where / "rank1.json.gz", 1, 2)
    first = ranks.analyze(where, engine="ray")
    from tracekit.ranks import cache

    assert len(list(cache.default_folder().glob("*.parquet"))) == 2

    def never(path: str) -> dict:
        raise AssertionError(f"{path} was read again")

    monkeypatch.setattr(summary, "summarize", never)
    again = ranks.analyze(where, workers=1)
    assert again.ranks.equals(first.ranks)


def test_a_ray_that_does_not_start_is_one_line(tmp_path, monkeypatch, capsys):
    # Ray raises a bare Exception when its local node times out starting (a loaded machine).
    where = tmp_path / "ranks"
    where.mkdir()
    copy_as_rank(SAMPLES / "mlp_eager.json.gz", where / "rank0.json.gz", 0, 1)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def timed_out(**kwargs):
        raise Exception("The current node timed out during startup. This could happen because some of\n"
                        "the raylet failed to startup or the GCS has become overloaded.")

    monkeypatch.setattr(ray, "init", timed_out)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(where), "--no-cache", "--engine", "ray"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("tracekit: error: --engine ray: could not start or reach a local Ray instance: "
                          "The current node timed out during startup. This could happen because some of the raylet")
