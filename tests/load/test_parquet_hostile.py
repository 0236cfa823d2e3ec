"""Tampered Parquet files from ``tracekit convert``: each is built here, small on disk, and each ends in
one line and exit 2 (``--max-inflated-size`` named) or, for a damaged stored report, in a fresh
analysis with one note on stderr — never a traceback, a renderer's crash or exit 1."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
from pathlib import Path

import click
import msgspec
import polars as pl
import pytest

from tracekit import boundary
from tracekit.load import parquet
from tracekit.load.parquet_size import column_bounds, logical_bytes
from tracekit.results import store as report_store

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "mlp_eager.json.gz"
#: The address-space limit the commands run under: a bomb that got through would die of it.
MEMORY_LIMIT = 3 << 30


def tracekit(*argv: object) -> tuple[int, str, str, int]:
    """(exit status, stdout, stderr, peak RSS in bytes) of ``tracekit ARGV`` in a child process under
    :data:`MEMORY_LIMIT`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, resource.getrlimit(resource.RLIMIT_AS)[1]))

    proc = subprocess.Popen([sys.executable, "-m", "tracekit", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, preexec_fn=limit, text=True)
    out, err = proc.communicate(timeout=300)
    # The child is reaped already; its peak RSS is the most of any child so far, an upper bound.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return proc.returncode, out, err, peak


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), err[-2000:]
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    """The mlp_eager sample's trace and report (no execution trace) and a converted copy."""
    import tracekit as tk

    session = tk.open(SAMPLE, execution_trace=None)
    return session.trace, session.report()


def _rewrite(src: Path, dst: Path, change) -> None:
    """``src``'s rows changed by ``change`` (a frame -> frame function), with its trace metadata."""
    kv = pl.read_parquet_metadata(src)
    keep = {k: v for k, v in kv.items() if k in ("tracekit.format", "tracekit.meta")}
    change(pl.read_parquet(src)).write_parquet(dst, metadata=keep, compression="zstd")


@pytest.fixture
def converted(tmp_path, eager):
    trace, _ = eager
    out = tmp_path / "t.parquet"
    parquet.write(trace, out)
    return out


# --- the trace's frames ------------------------------------------------------------------------


def test_one_long_name_on_every_row_is_refused_after_a_cheap_read(tmp_path, converted):
    """A 1 MiB name on each of the 93 ops rows, dictionary-encoded: the file stays small and its
    footer honest (one dictionary entry), the read keeps views of it (cheap); the names counted at
    their own length pass the cap, and the command refuses before any analysis copies them."""
    bomb = tmp_path / "bomb.parquet"
    _rewrite(converted, bomb, lambda df: df.with_columns(
        name=pl.when(pl.col("table") == "ops").then(pl.lit("n" * (1 << 20))).otherwise(pl.col("name"))))
    assert bomb.stat().st_size < 4 << 20
    assert sum(column_bounds(bomb).values()) < 8 << 20  # what the footer and pages tell
    logical = 93 << 20
    for argv in (["report", bomb, "--format", "json"], ["diff", bomb, SAMPLE, "--format", "md"],
                 ["convert", bomb, "-o", tmp_path / "again.parquet"]):
        code, out, err, peak = tracekit(*argv, "--max-inflated-size", "64M")
        line = one_error_line(err)
        assert code == 2 and out == ""
        assert "once its strings are counted, past 67,108,864" in line and "--max-inflated-size" in line
        assert str(bomb) in line
        assert peak < MEMORY_LIMIT
    assert not (tmp_path / "again.parquet").exists()
    # Under a cap that fits, the same file is read (the check refuses only what passes the cap).
    code, out, err, _ = tracekit("report", bomb, "--format", "json", "--max-inflated-size", f"{logical * 2}")
    assert code == 0, err[-600:]


def test_a_column_whose_pages_inflate_past_the_cap_is_refused_before_reading(tmp_path, converted):
    """Distinct 10 kB names (no dictionary) compress to almost nothing: the pages' uncompressed
    sizes tell 20 MB before any is read."""
    bomb = tmp_path / "pages.parquet"

    def change(df: pl.DataFrame) -> pl.DataFrame:
        extra = pl.DataFrame({"table": ["threads"] * 2000, "kind": ["thread_name"] * 2000,
                              "pid": ["1"] * 2000, "tid": [str(i) for i in range(2000)],
                              "name": [("x" * 10_000) + str(i) for i in range(2000)]})
        return pl.concat([df, extra], how="diagonal_relaxed")

    _rewrite(converted, bomb, change)
    assert bomb.stat().st_size < 1 << 20
    assert column_bounds(bomb)["name"] > 20_000_000
    code, out, err, _ = tracekit("report", bomb, "--format", "md", "--max-inflated-size", "16M")
    line = one_error_line(err)
    assert code == 2 and "its trace would inflate to" in line and "once read, past 16,777,216" in line
    assert "--max-inflated-size" in line


def test_a_categorical_column_is_refused_before_its_cast_copies_it(tmp_path, converted):
    """An Enum with one 1 MiB category on 4,000 rows is a 1.4 MB file; cast to String it would be
    4 GB. The stored dtype is refused before the read."""
    bomb = tmp_path / "enum.parquet"
    category = "e" * (1 << 20)
    _rewrite(converted, bomb, lambda df: pl.concat([df, pl.DataFrame(
        {"table": pl.Series(["ops"] * 4000), "idx": pl.Series(range(10_000, 14_000), dtype=pl.UInt32)})],
        how="diagonal_relaxed").with_columns(name=pl.lit(category, dtype=pl.Enum([category]))))
    assert bomb.stat().st_size < 4 << 20
    code, _, err, peak = tracekit("report", bomb, "--format", "json")
    line = one_error_line(err)
    assert code == 2 and "column 'name' is stored as Enum" in line
    assert peak < 2 << 30


def test_a_footer_that_points_outside_the_file_is_one_line(tmp_path, converted):
    data = bytearray(converted.read_bytes())
    footer_len = int.from_bytes(data[-8:-4], "little")
    data[-8:-4] = (footer_len + 10**6).to_bytes(4, "little")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    code, _, err, _ = tracekit("report", bad, "--format", "md")
    assert code == 2
    one_error_line(err)


# --- the stored report -------------------------------------------------------------------------


def _save_raw(trace, skeleton: str, blobs: dict[str, bytes], out: Path, key: str) -> None:
    """What :func:`tracekit.results.store.save` writes, from a skeleton and blobs given as they are."""
    rows = pl.DataFrame({"table": [report_store.REPORT_TABLE] * len(blobs), "cache_part": list(blobs),
                         "cache_blob": list(blobs.values())},
                        schema={"table": pl.String, "cache_part": pl.String, "cache_blob": pl.Binary})
    parquet.write(trace, out, extra_rows=rows,
                  extra_metadata={"tracekit.report": skeleton, "tracekit.report_key": key})


def _damaged(eager):
    trace, report = eager
    kernels = report.kernels
    return {
        "null_count": dataclasses.replace(report, kernels=kernels.with_columns(
            count=pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("count")))),
        "nan_in_a_frame": dataclasses.replace(report, breakdown=dataclasses.replace(
            report.breakdown, shares=report.breakdown.shares.with_columns(
                median_unit_share=pl.lit(float("nan"))))),
        "wrong_dtype": dataclasses.replace(report, kernels=kernels.with_columns(pl.col("total_ns").cast(pl.String))),
        "null_scalar": dataclasses.replace(report, facts=dataclasses.replace(report.facts, event_count=None)),
        "nan_scalar": dataclasses.replace(report, facts=dataclasses.replace(report.facts, event_count=float("nan"))),
    }


@pytest.mark.parametrize("damage", ["null_count", "nan_in_a_frame", "wrong_dtype", "null_scalar", "nan_scalar"])
def test_a_damaged_stored_report_is_ignored_and_the_trace_analysed_again(tmp_path, eager, damage):
    trace, _ = eager
    out = tmp_path / "t.parquet"
    report_store.save(trace, _damaged(eager)[damage], out, key=report_store.cache_key(None))
    notes: list[str] = []
    assert report_store.load_report(out, report_store.cache_key(None), on_ignored=notes.append) is None
    assert len(notes) == 1
    code, fresh, err, _ = tracekit("report", SAMPLE, "--no-execution-trace", "--format", "md")
    assert code == 0, err
    for fmt in ("md", "json", "term"):
        code, out_text, err, _ = tracekit("report", out, "--no-execution-trace", "--format", fmt)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 0, err[-1000:]
        assert len(lines) == 1, lines
        assert lines[0].startswith("tracekit: stored report ignored (report.")
        assert lines[0].endswith("): analysing the trace again")
        if fmt == "md":
            assert out_text == fresh


def test_the_undamaged_stored_report_is_used_without_a_note(tmp_path, eager):
    trace, report = eager
    out = tmp_path / "t.parquet"
    report_store.save(trace, report, out, key=report_store.cache_key(None))
    assert report_store.load_report(out, report_store.cache_key(None), on_ignored=pytest.fail) is not None
    code, _, err, _ = tracekit("report", out, "--no-execution-trace", "--format", "md")
    assert code == 0 and err == ""


def test_a_stored_report_naming_one_frame_many_times_is_refused(tmp_path, eager):
    """A file under 1 MB whose skeleton names the kernels frame 20,000 times: 20,000 reads of it. The
    frames' footers are weighed before any is read, and the sum passes the cap."""
    trace, report = eager
    skeleton, blobs = report_store.encode(report)
    top = msgspec.json.decode(skeleton)
    top["report"]["fields"]["extra"] = {"$tuple": [{"$frame": "report.kernels"}] * 20_000}
    out = tmp_path / "t.parquet"
    _save_raw(trace, msgspec.json.encode(top).decode(), blobs, out, report_store.cache_key(None))
    assert out.stat().st_size < 1 << 20
    one = sum(column_bounds(blobs["report.kernels"]).values())
    assert 20_000 * one > 8 << 20
    code, stdout, err, peak = tracekit("report", out, "--no-execution-trace", "--format", "md",
                                       "--max-inflated-size", "8M")
    line = one_error_line(err)
    assert code == 2 and stdout == ""
    assert "its stored report would inflate to" in line and "--max-inflated-size" in line
    assert peak < 2 << 30


def test_a_stored_report_frame_of_long_strings_is_refused_once_read(tmp_path, eager):
    """One stored frame whose names are one 1 MiB string on 64 rows: cheap to read, 64 MiB counted."""
    trace, report = eager
    skeleton, blobs = report_store.encode(report)
    import io

    buf = io.BytesIO()
    pl.DataFrame({"name": ["k" * (1 << 20)] * 64}).write_parquet(buf, compression="zstd")
    blobs["report.kernels"] = buf.getvalue()
    assert logical_bytes(pl.read_parquet(io.BytesIO(blobs["report.kernels"]))) > 64 << 20
    out = tmp_path / "t.parquet"
    _save_raw(trace, skeleton, blobs, out, report_store.cache_key(None))
    code, _, err, _ = tracekit("report", out, "--no-execution-trace", "--format", "md", "--max-inflated-size", "32M")
    line = one_error_line(err)
    assert code == 2 and "its stored report holds" in line and "once its strings are counted" in line


# --- native panics -----------------------------------------------------------------------------


def test_a_native_panic_is_one_line_and_exit_2(capsys):
    """pyo3's PanicException derives from BaseException: the boundary words it, exit 2, not 1."""
    from polars.exceptions import PanicException

    @click.command()
    def explode() -> None:
        raise PanicException("capacity overflow")

    with pytest.raises(SystemExit) as exit_info:
        boundary.run(explode, [], "tracekit")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    line = one_error_line(err)
    assert "panic: capacity overflow" in line
