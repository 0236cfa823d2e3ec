"""tracekit check: the shipped expectations pass on their traces, broken expectations name the
observed value and exit 1, malformed files are one-line usage errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracekit.commands import main
from tracekit.diff import expect
from tracekit.results.check import CheckResult
from tracekit.errors import UsageError
from tracekit.render.views.check import expected_text, observed_text
from tracekit.session import read_expectations

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
EXPECTATIONS = sorted((ROOT / "expectations").glob("*.toml"))


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def _result(sample, trace: str, exp: expect.Expectations) -> CheckResult:
    return expect.check(sample(trace, execution_trace=None).profile(exp.unit), exp)


def test_an_expectations_file_ships_for_every_mlp_mode():
    modes = {p.name.removesuffix(".json.gz") for p in SAMPLES.glob("mlp_*.json.gz") if ".et." not in p.name}
    assert modes == {"mlp_eager", "mlp_compile", "mlp_compile-cudagraphs", "mlp_liger"}
    assert {p.stem for p in EXPECTATIONS} >= modes


@pytest.mark.parametrize("path", EXPECTATIONS, ids=[p.stem for p in EXPECTATIONS])
def test_shipped_expectations_pass(path, capsys, sample):
    result = _result(sample, path.stem, read_expectations(path))
    assert result.passed, [i for i in result.items if not i.met]
    assert len(result.items) >= 8
    assert _exit(["check", str(SAMPLES / f"{path.stem}.json.gz"), "--expect", str(path)]) == 0
    assert "expectations met" in capsys.readouterr().out


def test_compile_expectations_are_broken_by_the_eager_trace(capsys, sample):
    result = _result(sample, "mlp_eager", read_expectations(ROOT / "expectations" / "mlp_compile.toml"))
    broken = {(i.key, expected_text(i)): observed_text(i) for i in result.items if not i.met}
    assert broken[("kernels", "exactly 4")] == "5 in every step"
    assert broken[("classes_absent", "elementwise")] == "elementwise in 3 of 3 steps"
    assert broken[("round_trip_bytes_max", "≤ 150,994,944")] == "201,326,592 in every step"
    assert broken[("compile_preops", "present")] == "absent in every step"
    code = _exit(["check", str(SAMPLES / "mlp_eager.json.gz"), "--expect",
                  str(ROOT / "expectations" / "mlp_compile.toml"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1
    data = json.loads(out)
    assert data["schema"] == "tracekit.check/1" and data["passed"] is False
    assert err.startswith("tracekit: error: 11 of 13 expectations broken: kernels exactly 4")


def test_busy_fraction_and_time_bounds(tmp_path, sample):
    f = tmp_path / "e.toml"
    f.write_text('[per_step]\ngpu_busy_min_pct = 5\ngpu_time_max_us = 240\ncpu_time_max_us = 1\n')
    result = _result(sample, "mlp_eager", read_expectations(f))
    met = {i.key: i.met for i in result.items}
    assert met == {"gpu_busy_min_pct": True, "gpu_time_max_us": True, "cpu_time_max_us": False}


def test_unit_from_the_file(tmp_path, sample):
    f = tmp_path / "e.toml"
    f.write_text('unit = "mlp_fwd"\n[per_step]\nkernels = 5\n')
    result = _result(sample, "mlp_eager", read_expectations(f))
    assert result.passed and "mlp_fwd" in result.notes[-1]


@pytest.mark.parametrize("content, message", [
    ("[per_step\nkernels = 4", "not valid TOML"),
    ("[per_step]\nkernel = 4\n", "unknown expectation 'kernel'"),
    ("colour = 1\n[per_step]\nkernels = 4\n", "unknown key 'colour'"),
    ("[per_step]\nkernels = \"four\"\n", "kernels must be a non-negative integer"),
    ("[per_step]\nclasses_absent = \"elementwise\"\n", "must be a list of strings"),
    ("description = \"nothing\"\n", "needs a [per_step] table"),
])
def test_malformed_files_are_one_line_usage_errors(tmp_path, content, message, capsys):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        read_expectations(f)
    assert _exit(["check", str(SAMPLES / "mlp_eager.json.gz"), "--expect", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracekit: error: bad.toml:")


def test_missing_file_is_a_usage_error_and_round_trips_are_measured_per_unit(tmp_path, capsys):
    assert _exit(["check", str(SAMPLES / "mlp_eager.json.gz"), "--expect", str(tmp_path / "no.toml")]) == 2
    f = tmp_path / "rt.toml"
    f.write_text('[per_step]\nround_trip_bytes_max = 0\n')
    # Round trips are measured per --unit span too: each mlp_fwd holds the step's four
    # 50,331,648-byte intermediates (the same as ProfilerStep, see test_report_real).
    assert _exit(["check", str(SAMPLES / "mlp_eager.json.gz"), "--expect", str(f), "--unit", "mlp_fwd"]) == 1
    assert "201,326,592 in every step" in capsys.readouterr().out
