"""The README is the front door, not the manual: short, its links resolve, and its two commands are
what CI runs (.ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The most lines the README may have; what does not fit goes into docs/.
MAX_LINES = 250


def test_the_readme_is_short():
    assert len(README.splitlines()) <= MAX_LINES


def test_the_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not t.startswith(("http://", "https://", "mailto:"))]
    assert any(t.startswith("docs/") for t in local)
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


def test_the_readme_commands_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    quick_start = next(b for b in blocks if "tracekit report sample_traces/" in b and "pip install" in b)
    command = quick_start.split("&&", 1)[1].strip()
    assert command in ci  # the shipped sample CI reports on
    assert any(b.strip() == "python -m pytest" for b in blocks) and ci.rstrip().endswith("\npython -m pytest")
