"""`tracekit convert`: a Trace survives the Parquet round trip exactly; foreign Parquet is refused."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit import parquet_cache
from tracekit.cli import main
from tracekit.errors import TraceError
from tracekit.load import load
from tracekit.source import open_trace

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@pytest.mark.parametrize("name", ["mlp_compile-cudagraphs", "train_eager"])
def test_round_trip_is_exact(tmp_path, name):
    trace = load(SAMPLES / f"{name}.json.gz")
    out = tmp_path / "t.parquet"
    parquet_cache.save(trace, out)
    back = open_trace(out)
    for frame in parquet_cache.FRAMES:
        assert getattr(back, frame).equals(getattr(trace, frame)), frame
    assert back.meta == trace.meta


def test_foreign_parquet_is_refused(tmp_path):
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    with pytest.raises(TraceError, match="not written by 'tracekit convert'"):
        open_trace(other)


def test_convert_cli_then_report_gives_identical_json(tmp_path, capsys):
    src = SAMPLES / "mlp_eager.json.gz"
    out = tmp_path / "mlp.parquet"
    for argv in (["convert", str(src), "-o", str(out)],
                 ["report", str(src), "--format", "json", "-o", str(tmp_path / "a.json")],
                 ["report", str(out), "--format", "json", "-o", str(tmp_path / "b.json")]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
