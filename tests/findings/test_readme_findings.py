"""The findings shown in the documentation are what tracekit holds and prints today: the rule table
(docs/reference/findings.md) is the engine's (id, the most a rule says, what it looks for, its fix),
and the examples (docs/guide/first-report.md) are the opening of ``tracekit report`` (the limit line
and the findings) on a planted H200 capture and on a real public trace of the input-bound family.
Their producers are tests/doc_blocks.py's; refresh the pages with ``pytest
tests/findings/test_readme_findings.py --update-goldens`` and review the diff."""

from __future__ import annotations

from doc_blocks import check_block, findings_examples, rules_table

import pytest
from tracekit import findings

#: Left out by --fast (tests/conftest.py): the docs' examples, run for real.
pytestmark = pytest.mark.slow


def test_findings_examples_are_real_runs(request):
    check_block(request, "FINDINGS")


def test_rule_table_is_the_engines(request):
    table = rules_table()
    assert table.count("\n| `") == len(findings.RULES)  # one row per rule of the engine, in its order
    assert [line.split("`")[1] for line in table.splitlines()[2:]] == list(findings.RULES)
    check_block(request, "RULES")


def test_findings_examples_show_both_traces_findings():
    shown = findings_examples()
    assert "WARNING host_sync:" in shown and "WARNING input_stall:" in shown
