"""`--help` is all a pip user has: it offers only what works and carries the `--fail-if` grammar.

The metrics a `--fail-if` help lists are read back from the help text and held to the gate tables
the parser reads (:data:`tracekit.diff.gates.DIFF_GATES`, :data:`~tracekit.diff.gates.COMPARE_GATES`),
each under the heading of its unit; every example the help gives parses.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.commands import cli
from tracekit.diff import gates
from tracekit.findings import RULES

ROOT = Path(__file__).resolve().parents[2]
HEADINGS = {"Time metrics": "ns", "Size metrics": "bytes", "Count metrics": "count"}


def _help(command: str) -> str:
    """``tracekit COMMAND --help`` on one line per option's text (wrapping undone)."""
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=2000)
    assert result.exit_code == 0, result.output
    return result.output


def _option(text: str, name: str) -> str:
    """The help of option ``name`` (one line, at terminal width 2000)."""
    return next(line for line in text.splitlines() if line.strip().startswith(name)).strip()


@pytest.mark.parametrize("command,table,reference", [("diff", gates.DIFF_GATES, "A"),
                                                     ("compare", gates.COMPARE_GATES, "the baseline")])
def test_fail_if_help_lists_exactly_the_metrics_the_gate_accepts(command, table, reference):
    text = _option(_help(command), "--fail-if")
    listed = {heading: names.split(", ") for heading, names in re.findall(r"(\w+ metrics): ([a-z_, ]+)\.", text)}
    by_unit = {HEADINGS[heading]: names for heading, names in listed.items()}
    assert by_unit == {unit: [m.name for m in table.metrics if m.unit == unit]
                       for unit in HEADINGS.values() if any(m.unit == unit for m in table.metrics)}
    assert sorted(n for names in listed.values() for n in names) == sorted(table.names)
    # The grammar itself, not a pointer to a README a pip user does not have.
    assert "README" not in text
    assert "EXPR is METRIC OP VALUE, OP one of > >= < <=" in text and f"% (of {reference})" in text
    examples = re.findall(r"'([^']+)'", text)
    assert len(examples) >= 3
    for example in examples:
        assert gates.parse(example, table).metric in table.names


def test_diff_help_names_every_unit_the_parser_reads():
    text = _option(_help("diff"), "--fail-if")
    assert "a time (ns us µs ms s), a size (B KB MB GB KiB MiB GiB), nothing for a count" in text
    for value in ("20ns", "20us", "20µs", "20ms", "2s"):
        assert gates.parse(f"cpu_time>+{value}").value > 0
    for value in gates.BYTE_UNIT_NAMES:
        assert gates.parse(f"peak_memory>1{value}").value >= 1


def test_report_fail_if_help_lists_every_finding_rule():
    text = _option(_help("report"), "--fail-if")
    assert re.search(r"Rules: ([a-z0-9_, ]+)\.", text).group(1).split(", ") == list(RULES)


@pytest.mark.parametrize("command", ["check", "compare"])
def test_check_and_compare_offer_only_the_formats_they_write(command):
    text = _help(command)
    assert "--format [term|md|json|html] " in text
    assert "svg" not in text


@pytest.mark.parametrize("command", ["report", "diff"])
def test_report_and_diff_offer_svg(command):
    assert "--format [term|md|json|html|svg]" in _help(command)


def test_help_imports_no_polars():
    """The help text is made from tables whose modules import Polars only when shown: a command's
    run must start without Polars imported (the allocator setting, ``keep_freed_memory``)."""
    code = ("import sys\nfrom tracekit.commands import cli\nassert 'polars' not in sys.modules\n"
            "from tracekit.commands import main\ntry:\n    main(['diff', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('polars' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "Time metrics: gpu_time" in " ".join(done.stdout.split())
    assert done.stdout.strip().splitlines()[-1] == "True"  # shown: the table was read, lazily
