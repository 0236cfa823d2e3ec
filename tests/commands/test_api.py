"""The Python sessions shown in README.md and docs/python-api.md run as written: every line of their
output is real."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from doc_blocks import code_block

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("page", "block", "least"), [("README.md", "README-API", 5), ("docs/python-api.md", "API", 10)])
def test_python_session_runs_as_written(monkeypatch, page, block, least):
    monkeypatch.chdir(ROOT)  # the sessions name sample traces relative to the repository
    source = code_block(ROOT / page, block, "pycon")
    assert source.count(">>> ") >= least
    test = doctest.DocTestParser().get_doctest(source, {}, page, page, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test)
    assert result.attempted >= least
    assert result.failed == 0, f"the Python session of {page} no longer prints what it shows"


def test_open_names_a_missing_file_in_one_line(tmp_path):
    import tracekit
    from tracekit.errors import TraceError

    with pytest.raises(TraceError, match="no such file"):
        tracekit.open(tmp_path / "nope.json.gz").report()


def test_session_uses_the_stored_report_of_a_parquet_file(tmp_path, sample):
    import tracekit

    out = tmp_path / "mlp_eager.parquet"
    sample("mlp_eager").save(out)
    parquet = tracekit.open(out)
    assert parquet.stored_report() is not None
    report = parquet.report()
    assert report.attribution is None  # the stored report (a fresh analysis carries its attribution)
    assert "trace" not in vars(parquet)  # ... so the trace's frames were never loaded
    assert report.steps["kernel_count"].to_list() == [5, 5, 5]
    assert parquet.report(step=4).attribution is not None  # --step analyses afresh


def test_report_profile_and_timelines_read_one_bundle():
    """The findings are computed once, in the pipeline: the report, the profile (diff, check) and a
    ``--step`` report all come from the session's one bundle."""
    import tracekit
    from tracekit.analyses import pipeline

    session = tracekit.open(ROOT / "sample_traces" / "mlp_eager.json.gz")
    bundle = session.analyses()
    assert session.analyses() is bundle
    assert session.report().findings is bundle.findings and session.profile().findings is bundle.findings
    assert session.report().attribution is bundle.attribution
    assert session.report(step=4).findings == pipeline.findings(bundle, step=4)
    assert session.report(timelines=True).timelines.default_step == 4


def test_ceilings_reprice_the_findings_without_analysing_again():
    import tracekit
    from tracekit.errors import UsageError

    session = tracekit.open(ROOT / "sample_traces" / "mlp_eager.json.gz")
    plain = session.analyses()
    slow = session.analyses(ceilings={"hbm_gbps": 1})
    assert slow.attribution is plain.attribution and slow.round_trips is plain.round_trips
    assert slow.ceilings["hbm_bytes_per_s"] == 1e9 and plain.ceilings["hbm_bytes_per_s"] > 1e12
    assert session.report(ceilings={"hbm_gbps": 1}).throughput.ceilings == slow.ceilings
    with pytest.raises(UsageError, match="unknown ceiling override"):
        session.analyses(ceilings={"hbm_gbs": 1})


def test_report_example_is_a_real_run(request, sample):
    """docs/commands/report.md shows the report of the eager MLP's step 4 as the command prints it
    today (refresh with ``pytest tests/commands/test_api.py --update-goldens``, then review the diff);
    the command's output is the session's report rendered as Markdown."""
    import io

    from doc_blocks import REPORT_COMMAND, check_block, demoted, report_example

    from tracekit.render import renderer_for

    out = io.StringIO()
    renderer_for("md").render(sample("mlp_eager").report(step=4), out)
    shown = report_example()
    assert shown.startswith(f"```\n$ {REPORT_COMMAND}\n```\n\n#### tracekit report: mlp\\_eager.json.gz\n")
    assert demoted(out.getvalue()) in shown
    assert "| ProfilerStep#4 | 1,273.6 µs | 1,273.6 µs | 230.5 µs | 18.1% | 5 | 7 |" in shown
    check_block(request, "REPORT")


def test_the_timelines_session_runs_as_written():
    """docs/python-api.md's timelines session, in a fresh interpreter, as a reader runs it: nothing
    imported but ``tracekit`` (so ``tracekit.render`` is reached as an attribute, not because a test
    imported it before)."""
    import subprocess
    import sys

    source = code_block(ROOT / "docs/python-api.md", "TIMELINES", "pycon")
    code = ("import doctest, sys\n"
            f"test = doctest.DocTestParser().get_doctest({source!r}, {{}}, 'docs', 'docs', 0)\n"
            "result = doctest.DocTestRunner().run(test)\n"
            "sys.exit(1 if result.failed or result.attempted < 5 else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
