"""The documentation site builds strictly: ``mkdocs build --strict`` with every link, anchor, image and
nav entry validated (mkdocs.yml ``validation:``), the reference pages generated from the code and
every shown output checked against a real run (docs/hooks.py). Any warning fails, and so does a
reference page that cannot be generated or an output that is stale."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="the docs extra is not installed (pip install -e '.[docs]')")

from mkdocs.exceptions import PluginError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly_without_a_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    site = tmp_path / "site"
    # The generated reference is in the pages: every rule, every command, every contract.
    findings_page = (site / "reference" / "findings" / "index.html").read_text(encoding="utf-8")
    assert "PAGEABLE_COPY_MIN_BYTES" in findings_page and "out_of_memory" in findings_page
    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "tracekit annotate --help" in cli_page and "--fail-if" in cli_page
    json_page = (site / "reference" / "json" / "index.html").read_text(encoding="utf-8")
    assert all(f"tracekit.{name}/1" in json_page for name in ("report", "diff", "check", "compare", "ranks"))
    assert (site / "report.png").is_file()


def test_a_stale_block_stops_the_build():
    hooks = _hooks()
    page = "<!-- RULES-START -->\n| rule | at most |\n<!-- RULES-END -->\n"
    with pytest.raises(PluginError, match="RULES block is stale"):
        hooks.check_blocks(page, "reference/findings.md")
    with pytest.raises(PluginError, match="no producer"):
        hooks.check_blocks("<!-- NOPE-START -->\nx\n<!-- NOPE-END -->\n", "x.md")
    from doc_blocks import rules_table
    hooks.check_blocks(f"<!-- RULES-START -->\n{rules_table()}<!-- RULES-END -->\n", "reference/findings.md")


def test_a_reference_that_cannot_be_generated_stops_the_build(monkeypatch):
    hooks = _hooks()

    def broken() -> str:
        raise KeyError("RULES")

    monkeypatch.setitem(hooks.GENERATED, "findings", broken)
    with pytest.raises(PluginError, match="generating findings failed: KeyError"):
        hooks.fill("# Rules\n\n<!-- generated:findings -->\n", "reference/findings.md")
    with pytest.raises(PluginError, match="no generator"):
        hooks.fill("<!-- generated:nothing -->", "x.md")


def test_the_generated_reference_comes_from_the_code():
    from tracekit import findings
    from tracekit.classify import CLASSES, RULES

    hooks = _hooks()
    text = hooks.findings_reference()
    assert [line[5:-1] for line in text.splitlines() if line.startswith("### `")] == list(findings.RULES)
    # A threshold's reason is the comment above its constant in the rule's module.
    assert "| `POINTWISE_MAX_DISTANCE` | 3 | ... and its consumer at most this many kernels after" in text
    classes = hooks.kernel_classes_reference()
    assert [line[5:-1] for line in classes.splitlines() if line.startswith("### `")] == list(CLASSES)
    assert all(f"| `{rule.name}` |" in classes for rule in RULES)
    assert "tracekit check --help" in hooks.cli_reference()
