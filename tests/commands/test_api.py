"""The README's Python API session runs as written: every line of its output is real."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _readme_session() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- README-API-START -->", 1)[1].split("<!-- README-API-END -->", 1)[0]
    return block.split("```pycon\n", 1)[1].split("```", 1)[0]


def test_readme_python_session_runs_as_written(monkeypatch):
    monkeypatch.chdir(ROOT)  # the session names sample traces relative to the repository
    source = _readme_session()
    assert source.count(">>> ") >= 10
    test = doctest.DocTestParser().get_doctest(source, {}, "README.md", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test)
    assert result.attempted >= 10
    assert result.failed == 0, "the README's Python session no longer prints what it shows"


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


def _demoted(markdown: str) -> str:
    """The report's Markdown with headings three levels down (it sits under README sections)."""
    return "\n".join("###" + line if line.startswith("#") else line for line in markdown.splitlines())


def test_readme_report_example_is_a_real_run(request, sample):
    """The README's report example is what the command prints today (refresh it with
    ``pytest tests/commands/test_api.py --update-goldens``, then review the README diff)."""
    import io

    from tracekit.render import renderer_for

    start, end = "<!-- README-REPORT-START -->\n", "<!-- README-REPORT-END -->"
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(start, 1)
    shown, tail = rest.split(end, 1)
    command = "$ tracekit report sample_traces/mlp_eager.json.gz --step 4 --format md"
    assert shown.startswith(f"```\n{command}\n```\n\n")
    out = io.StringIO()
    report = sample("mlp_eager").report(step=4)
    renderer_for("md").render(report, out)
    expected = f"```\n{command}\n```\n\n{_demoted(out.getvalue())}\n\n"
    if request.config.getoption("--update-goldens"):
        readme.write_text(head + start + expected + end + tail, encoding="utf-8")
        return
    assert shown == expected, "README's report example is stale: run pytest --update-goldens and review it"


#: The README's step-timelines paragraph, as a session: ``s.report(timelines=True).timelines`` holds
#: one ``StepTimeline`` per step and ``tracekit.render.timeline.draw(step)`` draws one as SVG.
TIMELINES_SESSION = '''
>>> import tracekit
>>> s = tracekit.open("sample_traces/mlp_eager.json.gz")
>>> timelines = s.report(timelines=True).timelines
>>> [(step.name, step.gpu.height, step.left_out) for step in timelines]
[('ProfilerStep#2', 7, {}), ('ProfilerStep#3', 7, {}), ('ProfilerStep#4', 7, {})]
>>> svg = tracekit.render.timeline.draw(timelines[-1])
>>> svg.count('class="tk-kernel"'), 'data-step="4"' in svg
(5, True)
'''


def test_the_readme_timelines_example_runs_as_written():
    """In a fresh interpreter, as a reader runs it: nothing imported but ``tracekit`` (so
    ``tracekit.render`` is reached as an attribute, not because a test imported it before)."""
    import subprocess
    import sys

    code = ("import doctest, sys\n"
            f"test = doctest.DocTestParser().get_doctest({TIMELINES_SESSION!r}, {{}}, 'README', 'README', 0)\n"
            "result = doctest.DocTestRunner().run(test)\n"
            "sys.exit(1 if result.failed or result.attempted < 5 else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
