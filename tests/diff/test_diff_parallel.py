"""`tracekit diff` profiles big inputs in two processes: same output, same one-line errors."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tracekit.commands import diff as diff_command  # the module, not the click command
from tracekit.commands import main
from tracekit.errors import TraceError

#: Left out by --fast (tests/conftest.py): profiles in worker processes.
pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _diff(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", *argv])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_parallel_profiles_give_the_same_diff(monkeypatch, capsys):
    args = [str(SAMPLES / "mlp_eager.json.gz"), str(SAMPLES / "mlp_compile.json.gz"), "--format", "json"]
    sequential = _diff(args, capsys)
    monkeypatch.setattr(diff_command, "PARALLEL_MIN_BYTES", 0)
    parallel = _diff(args, capsys)
    assert sequential[0] == parallel[0] == 0
    assert parallel[1] == sequential[1]


def test_error_in_a_child_process_is_one_line(monkeypatch, tmp_path, capsys):
    bad = tmp_path / "cut.json"
    bad.write_text('{"traceEvents": [')
    monkeypatch.setattr(diff_command, "PARALLEL_MIN_BYTES", 0)
    code, _, err = _diff([str(SAMPLES / "mlp_eager.json.gz"), str(bad)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "cut.json" in err and "Traceback" not in err


def test_trace_error_survives_pickling():
    err = pickle.loads(pickle.dumps(TraceError("x.json", "empty file")))
    assert (str(err), err.path, err.problem) == ("x.json: empty file", "x.json", "empty file")
