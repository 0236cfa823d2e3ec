"""The README's findings section is what tracekit holds and prints today: its rule table is the engine's
(id, the most a rule says, what it looks for, its fix), and its examples are the opening of ``tracekit
report`` (the limit line and the findings) on a planted H200 capture and on a real public trace of the
input-bound family. Refresh them with ``pytest tests/findings/test_readme_findings.py --update-goldens``
and review the README diff."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import tracekit
from tracekit import findings
from tracekit.render import renderer_for

#: Left out by --fast (tests/conftest.py): the README's examples, run for real.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: The traces shown, as the README's commands name them.
EXAMPLES = ("sample_traces/antipatterns/antipatterns_host-sync.json.gz",
            "tests/data/real/facebookresearch__param__resnet-2080ti-cudnn-train.json.gz")
#: Terminal width the examples are rendered at (the README's code blocks wrap beyond it).
WIDTH = 110


def opening(path: str) -> str:
    """The report's terminal output up to the end of its findings (the first blank line after them)."""
    out = io.StringIO()
    renderer_for("term").render(tracekit.open(ROOT / path).report(), out, color=False, width=WIDTH)
    lines = out.getvalue().splitlines()
    start = lines.index("Findings")
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(line.rstrip() for line in lines[:end])


def expected_block() -> str:
    return "".join(f"```\n$ tracekit report {path}\n{opening(path)}\n```\n\n" for path in EXAMPLES)


def rules_table() -> str:
    """The rule table as Markdown, in table order."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| rule | at most | what it finds | fix |", "|---|---|---|---|"]
    rows += [f"| `{r.id}` | {r.severity} | {cell(r.title)} | {cell(r.fix)} |" for r in findings.RULES.values()]
    return "\n".join(rows) + "\n"


def check_block(request, name: str, expected: str) -> None:
    """The README's block between ``<!-- README-NAME-START -->`` and its end is ``expected`` (written
    there with ``--update-goldens``)."""
    start, end = f"<!-- README-{name}-START -->\n", f"<!-- README-{name}-END -->"
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(start, 1)
    shown, tail = rest.split(end, 1)
    if request.config.getoption("--update-goldens"):
        readme.write_text(head + start + expected + end + tail, encoding="utf-8")
        return
    assert shown == expected, f"README's {name.lower()} block is stale: run pytest --update-goldens and review it"


def test_readme_findings_examples_are_real_runs(request):
    check_block(request, "FINDINGS", expected_block())


def test_readme_rule_table_is_the_engines(request):
    check_block(request, "RULES", rules_table())
