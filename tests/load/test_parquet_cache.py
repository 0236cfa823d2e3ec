"""`tracekit convert`: a Trace survives the Parquet round trip exactly; foreign Parquet is refused."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tracekit.results import store as report_store
from tracekit.commands import main
from tracekit.errors import TraceError
from tracekit.load import open_trace, parquet

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.mark.parametrize("name", ["mlp_compile-cudagraphs", "train_eager"])
def test_round_trip_is_exact(tmp_path, name, sample):
    trace = sample(name).trace
    out = tmp_path / "t.parquet"
    parquet.write(trace, out)
    back = open_trace(out)
    for frame in parquet.FRAMES:
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


# --- the report stored by convert ---------------------------------------------------------------

ALL_SAMPLES = sorted(p.name[: -len(".json.gz")] for p in SAMPLES.glob("*.json.gz")
                     if not p.name.endswith(".et.json.gz"))


def _run(argv):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in argv])
    return exit_info.value.code


def test_every_sample_is_covered():
    assert len(ALL_SAMPLES) == 11


@pytest.mark.parametrize("name", ALL_SAMPLES)
@pytest.mark.slow
def test_stored_report_renders_exactly_as_a_fresh_analysis(tmp_path, name):
    """md, json and term from the stored report equal those of analysing the JSON trace, with the
    execution trace beside it (exact round-trip links) where the sample has one."""
    from tracekit import execution_trace

    src = SAMPLES / f"{name}.json.gz"
    out = tmp_path / "t.parquet"
    assert _run(["convert", src, "-o", out]) == 0
    # The stored report is the one used (not a silent re-analysis).
    et = execution_trace.locate(out, src)
    assert (et is not None) == (name != "train_eager")
    stored = report_store.load_report(out, report_store.cache_key(et))
    assert stored is not None and stored.attribution is None
    for fmt in ("md", "json", "term"):
        assert _run(["report", src, "--format", fmt, "-o", tmp_path / f"a.{fmt}"]) == 0
        assert _run(["report", out, "--format", fmt, "-o", tmp_path / f"b.{fmt}"]) == 0
        assert (tmp_path / f"a.{fmt}").read_bytes() == (tmp_path / f"b.{fmt}").read_bytes(), fmt


def test_stored_report_is_ignored_when_its_key_differs(tmp_path, sample):
    """A report stored by other code (another key) is not used: the trace is analysed afresh."""
    eager = sample("mlp_eager", execution_trace=None)
    trace, fresh = eager.trace, eager.report()
    out = tmp_path / "t.parquet"
    report_store.save(trace, fresh, out, key="made by another tracekit")
    assert report_store.load_report(out, report_store.cache_key(None)) is None
    assert report_store.load_report(out, "made by another tracekit") is not None


def test_stored_report_follows_the_execution_trace(tmp_path):
    """Stored with the execution trace beside the JSON; --no-execution-trace asks for the inferred
    analysis, which is then computed (method 'shapes'), not read from the file."""
    src = SAMPLES / "mlp_eager.json.gz"
    out = tmp_path / "t.parquet"
    assert _run(["convert", src, "-o", out]) == 0
    assert _run(["report", out, "--format", "json", "-o", tmp_path / "et.json"]) == 0
    assert _run(["report", out, "--no-execution-trace", "--format", "json", "-o", tmp_path / "no.json"]) == 0
    assert _run(["report", src, "--no-execution-trace", "--format", "json", "-o", tmp_path / "src.json"]) == 0
    import json
    et = json.loads((tmp_path / "et.json").read_text())
    no = json.loads((tmp_path / "no.json").read_text())
    assert et["round_trips"]["method"] == "execution_trace"
    assert no["round_trips"]["method"] != "execution_trace"
    assert (tmp_path / "no.json").read_bytes() == (tmp_path / "src.json").read_bytes()


def test_step_on_a_converted_trace_reanalyses_the_frames(tmp_path):
    src = SAMPLES / "mlp_eager.json.gz"
    out = tmp_path / "t.parquet"
    assert _run(["convert", src, "-o", out]) == 0
    assert _run(["report", out, "--step", "3", "--format", "md", "-o", tmp_path / "b.md"]) == 0
    assert _run(["report", src, "--step", "3", "--format", "md", "-o", tmp_path / "a.md"]) == 0
    assert (tmp_path / "a.md").read_bytes() == (tmp_path / "b.md").read_bytes()
    assert "ProfilerStep#3" in (tmp_path / "b.md").read_text()


def test_a_skeleton_naming_other_code_is_refused():
    evil = '{"format": "%s", "report": {"$class": "Popen", "fields": {"args": "true"}}}' % (
        report_store.SKELETON_FORMAT)
    with pytest.raises(report_store.CacheFormatError, match="unknown class 'Popen'"):
        report_store.decode(evil, {})


def test_trace_frames_ignore_the_stored_report(tmp_path, sample):
    """Loading the trace from a file with a stored report gives the same frames as without."""
    compiled = sample("mlp_compile", execution_trace=None)
    trace = compiled.trace
    out = tmp_path / "t.parquet"
    report_store.save(trace, compiled.report(), out, key="k")
    back = open_trace(out)
    for frame in parquet.FRAMES:
        assert getattr(back, frame).equals(getattr(trace, frame)), frame
    queried = pl.read_parquet(out).filter(pl.col("table") == "gpu")
    assert queried.height == trace.gpu.height
