"""Hostile input never breaks any command: every case of the fixed corpus and hypothesis mutations
of real traces, through report, convert (and the Parquet back), diff, check, compare, annotate and
merge (and the merged trace back) in every format, ends in a report (exit 0), a broken expectation
(check: exit 1) or one line and exit 2 — never a traceback, an internal error, a hang, an exhausted
machine or a change to a file of the case.

The cases run in a child process (``tests/hostile.py serve``) under an address-space limit, and
each answer must come within a time limit: a case that hangs, or a decompression bomb that would
exhaust memory, fails its test instead of the machine. The corpus and the mutations are in
``tests/hostile.py``; ``bench/fuzz.py`` runs the same checks for longer.

Failing writes are a family of their own: every writer (report in every format, diff, check,
compare, annotate, convert) against a full or closed standard output, ``/dev/full``, a file-size
limit (``RLIMIT_FSIZE`` in the child), a full file system and a read-only directory (a tmpfs in a
user namespace, where the system allows one) ends in one line and exit 2, the output that was there before unchanged and no
temp file left.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hostile

#: Left out by --fast (tests/conftest.py): every command and format over the generated hostile corpus
#: and mutated real traces.
pytestmark = pytest.mark.slow

#: The child's address-space limit: a loader that honours its caps stays far below it.
MEMORY = 4 << 30
#: Seconds one case's whole matrix may take (they take well under 10 s; a hang fails here).
CASE_TIMEOUT = 60


class Child:
    """A bounded child process that runs matrices (restarted when a case kills it)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(hostile.ROOT)}
        env.pop("TRACEKIT_MAX_INFLATED_SIZE", None)
        env.pop("TRACEKIT_PARTIAL", None)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(hostile.__file__)), "serve", str(MEMORY)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)

    def run(self, request: dict) -> list[dict] | str:
        """The results of ``request``, or why there are none (a hang, a dead child)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_TIMEOUT)
        if not ready:
            self.stop()
            return f"no answer within {CASE_TIMEOUT} s (a hang)"
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.proc = None
            return f"the child died (exit {code}): an abort, or memory past the limit"
        return json.loads(line)["results"]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


CASES = {case.name: case for case in hostile.corpus()}
#: Children that run the corpus side by side (one per core CI has).
CHILDREN = 2


@pytest.fixture(scope="module")
def corpus_results(tmp_path_factory) -> dict[str, list[dict] | str]:
    """Every corpus case run once, by :data:`CHILDREN` children side by side."""
    root = tmp_path_factory.mktemp("hostile")
    children = [Child() for _ in range(CHILDREN)]
    names = sorted(CASES)
    results: dict[str, list[dict] | str] = {}

    def work(k: int) -> None:
        for i, name in enumerate(names):
            if i % CHILDREN == k:
                results[name] = children[k].run({"case": name, "dir": str(root / f"case{i}")})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(CHILDREN)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for child in children:
        child.stop()
    return results


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_command_and_format_ends_in_a_defined_outcome(name: str, corpus_results) -> None:
    results = corpus_results[name]
    assert not isinstance(results, str), f"{name}: {results}"
    assert results, name
    problems = hostile.check_outcomes(CASES[name], results)
    assert not problems, "\n".join(problems)


def test_the_corpus_covers_every_axis() -> None:
    axes = {name.split("/")[0] for name in CASES}
    assert axes == {"numbers", "nesting", "structure", "compression", "inputs", "execution_trace", "parquet",
                    "expectations", "ranks"}
    for depth in (1000, 10_000, 100_000):
        assert {f"nesting/{where}_{depth}" for where in ("args", "input_dims", "grid", "event_field", "top")} <= set(CASES)


# --- mutations of real traces -----------------------------------------------------------------------

_values = st.one_of(st.sampled_from(hostile.VALUES), st.integers(min_value=-(2**72), max_value=2**72),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_event_mutation = st.tuples(st.sampled_from(("set", "set", "delete", "drop", "repeat", "insert")),
                            st.integers(0, 400), st.sampled_from(hostile.FIELDS), _values)
_top_mutation = st.tuples(st.just("top"), st.just(0), st.sampled_from(hostile.TOP_FIELDS), _values)
_mutations = st.lists(st.one_of(_event_mutation, _event_mutation, _top_mutation), min_size=1, max_size=6)


@pytest.fixture(scope="module")
def child():
    runner = Child()
    yield runner
    runner.stop()


@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations=_mutations, seed=st.sampled_from(sorted(hostile.SEEDS)))
def test_mutated_real_traces_end_in_a_defined_outcome(mutations, seed, child: Child, tmp_path: Path) -> None:
    workdir = tmp_path / f"m{abs(hash(repr(mutations))) % 10**12}"
    results = child.run({"mutations": mutations, "seed": seed, "dir": str(workdir), "quick": True})
    assert not isinstance(results, str), f"mutations {mutations!r} of {seed}: {results}"
    problems = hostile.check_outcomes(hostile.Case("mutation"), results)
    assert not problems, f"mutations {mutations!r} of {seed}:\n" + "\n".join(problems)


def test_the_checks_can_fail() -> None:
    case = hostile.Case("probe")
    bad = [
        {"command": "report", "argv": ["report", "t.json"], "code": 3, "stdout_len": 0, "json_ok": None,
         "stderr": "tracekit: internal error: KeyError"},
        {"command": "report", "argv": ["report", "t.json"], "code": 1, "stdout_len": 0, "json_ok": None,
         "stderr": "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"},
        {"command": "diff", "argv": ["diff", "t.json"], "code": 2, "stdout_len": 0, "json_ok": None,
         "stderr": "tracekit: error: one\ntracekit: error: two\n"},
        {"command": "check", "argv": ["check", "t.json"], "code": 0, "stdout_len": 5, "json_ok": False, "stderr": ""},
        {"command": "report", "argv": ["report", "t.json"], "code": 0, "stdout_len": 0, "json_ok": None, "stderr": ""},
        {"command": "merge", "argv": ["merge", "r"], "code": 2, "stdout_len": 0, "json_ok": None,
         "stderr": "tracekit: error: refused\n", "inputs_changed": ["r/rank0.json"]},
    ]
    assert len(hostile.check_outcomes(case, bad)) == len(bad)
    strict = hostile.Case("probe", expect={"report": {2}})
    assert hostile.check_outcomes(strict, [{"command": "report", "argv": ["report"], "code": 0, "stdout_len": 9,
                                            "json_ok": None, "stderr": ""}])


# --- failing writes -------------------------------------------------------------------------------

WRITE_CASES = {case.name: case for case in hostile.write_failures()}
FULL_DISK = hostile.full_disk_available()


@pytest.mark.parametrize("name", sorted(WRITE_CASES))
def test_a_write_the_machine_refuses_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    case = WRITE_CASES[name]
    if case.sink == "dev_full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    if case.sink in hostile.NAMESPACE_SINKS and not FULL_DISK:
        pytest.skip("no tmpfs in a user namespace here (unshare -rm); the file-size limit covers the file writers")
    result = hostile.run_write_case(case, tmp_path)
    problems = hostile.check_write_outcome(case, result)
    assert not problems, "\n".join(problems) + f"\nstderr: {result['stderr'][-600:]}"
    if case.sink in ("file_size", "full_disk", "read_only"):
        assert "cannot write" in result["stderr"], result["stderr"]


def test_the_write_family_covers_every_writer_and_sink() -> None:
    commands = {case.argv[0] for case in WRITE_CASES.values()}
    assert commands == {"report", "diff", "check", "compare", "annotate", "convert", "merge"}
    formats = {case.argv[case.argv.index("--format") + 1] for case in WRITE_CASES.values() if "--format" in case.argv}
    assert {"term", "md", "json", "html", "svg"} <= formats
    assert {case.sink for case in WRITE_CASES.values()} == {*hostile.STDOUT_SINKS, *hostile.FILE_SINKS}


def test_the_write_checks_can_fail() -> None:
    case = hostile.WriteCase("probe", ["report"], "file_size", "out.md")
    good = {"code": 2, "stderr": "tracekit: error: out.md: cannot write (File too large)\n",
            "before": {"out.md": "old"}, "after": {"out.md": "old"}, "left": []}
    assert hostile.check_write_outcome(case, good) == []
    for change in ({"code": 3}, {"code": 0}, {"stderr": "tracekit: internal error: OSError\n"},
                   {"stderr": "tracekit: error: a\ntracekit: error: b\n"}, {"after": {"out.md": "new"}},
                   {"after": {}}, {"left": [".out.md.x.tmp"]}):
        assert hostile.check_write_outcome(case, {**good, **change}), change
