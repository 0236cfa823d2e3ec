"""Shared pytest options and fixtures, for every room's tests (tests/<room>/).

``--update-goldens`` rewrites the golden files under tests/golden/ from the current output instead
of comparing against them. It is the only way goldens change: review the diff of tests/golden/
like code afterwards.

``sample`` opens the shipped traces of sample_traces/ once per test run: their loading and
analyses are the suite's most repeated work, and a :class:`tracekit.Session` already computes each
result once per option set, so one session per trace serves every test that only reads it.

``--fast`` runs the fast subset: every test but those marked ``slow`` (``@pytest.mark.slow``, or a
module's ``pytestmark``), in under two minutes on a two-core machine — a first answer while
changing code; the whole suite stays the gate. A test is marked slow when it takes seconds
(``--durations``): real-trace corpora, captures that run torch, the hostile-input matrices, the
browser. Every room (tests/<room>/) keeps at least one test in the subset: a run of the whole
tree with ``--fast`` fails at collection when a room would be left with none.

The helpers beside this file (factory.py, hostile.py, browser.py) are imported by name
(``from factory import ...``) from every folder: pyproject.toml's ``pythonpath`` puts tests/ on
``sys.path`` (and the repository root, so that ``capture`` is the package, not tests/capture/).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest

if TYPE_CHECKING:
    import tracekit

TESTS = Path(__file__).resolve().parent
GOLDEN_DIR = TESTS / "golden"
SAMPLES = TESTS.parent / "sample_traces"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current output instead of comparing")
    parser.addoption("--fast", action="store_true", default=False,
                     help="run the fast subset: leave out the tests marked slow (tests/conftest.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes seconds; left out by --fast (tests/conftest.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--fast``: deselect the tests marked slow; a whole-tree run keeps every room in the subset."""
    if not config.getoption("--fast"):
        return
    kept = [item for item in items if item.get_closest_marker("slow") is None]
    left_out = [item for item in items if item.get_closest_marker("slow") is not None]
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        rooms = {_room(item) for item in items} - {_room(item) for item in kept}
        if rooms:
            raise pytest.UsageError(f"--fast leaves no test of {', '.join(sorted(rooms))}: "
                                    "keep at least one of each room unmarked")
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def _room(item: pytest.Item) -> str:
    """``tests/<room>/`` of a test (the folder under tests/ holding its file)."""
    parts = Path(str(item.path)).resolve().relative_to(TESTS).parts
    return f"tests/{parts[0]}/" if len(parts) > 1 else "tests/"


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden(name, text)``: compare ``text`` with tests/golden/NAME byte for byte, or write it
    there when pytest runs with ``--update-goldens``. A missing golden fails (never created
    silently)."""
    update = request.config.getoption("--update-goldens")

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if update:
            path.write_text(text, encoding="utf-8")
            return
        assert path.is_file(), f"missing golden {name}: run pytest with --update-goldens and review it"
        assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden"

    return check


@pytest.fixture(scope="session")
def sample() -> Callable[..., tracekit.Session]:
    """``sample(name, execution_trace="auto")``: the session of the shipped trace
    sample_traces/NAME.json.gz, opened once per test run and shared by every test that asks for it.

    ``name`` is the path under sample_traces/ without ``.json.gz`` (``"mlp_eager"``,
    ``"antipatterns/antipatterns_healthy"``; a trailing ``.json.gz`` is accepted too).
    ``execution_trace`` is :func:`tracekit.open`'s: ``"auto"`` uses the execution trace beside the
    trace, ``None`` none (as ``pipeline.run(load(path))`` and ``--no-execution-trace``). A trace with
    no execution trace beside it is one shared session either way.

    The session's trace, analyses and reports (per option set) are computed on first use and then
    shared: only read them. A test that mutates, monkeypatches what the analyses read, or checks
    that two fresh computations agree opens its own session with :func:`tracekit.open`.
    """
    import tracekit

    sessions: dict[tuple[Path, Path | None], tracekit.Session] = {}

    def open_sample(name: str, *, execution_trace: Literal["auto"] | None = "auto") -> tracekit.Session:
        path = SAMPLES / f"{name.removesuffix('.json.gz')}.json.gz"
        opened = tracekit.open(path, execution_trace=execution_trace)  # reads nothing yet: cheap
        return sessions.setdefault((path, opened.execution_trace_path), opened)

    return open_sample


@pytest.fixture(scope="module")
def chromium():
    """A real headless Chromium (tests/browser.py), one per test module; the test is skipped where
    none is installed (.ci/run installs Debian's)."""
    from browser import Browser, chromium_binary

    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    with Browser(binary) as browser:
        yield browser


@pytest.fixture(autouse=True)
def _rank_summary_cache(tmp_path, monkeypatch):
    """Each test keeps rank summaries (tracekit.ranks.cache) in a folder of its own: the suite never
    writes into the user's cache, and no test reads another's summaries."""
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "rank-summaries"))
