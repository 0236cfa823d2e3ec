"""Shared pytest options.

``--update-goldens`` rewrites the golden files under tests/golden/ from the current output instead
of comparing against them. It is the only way goldens change: review the diff of tests/golden/
like code afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current output instead of comparing")


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
