"""MkDocs hooks of the documentation site (``hooks:`` in mkdocs.yml): what makes the site's
reference come from the code and its shown outputs come from real runs.

Contract:

* A page's placeholder ``<!-- generated:NAME -->`` is replaced by :data:`GENERATED` ``[NAME]()``: the
  command line's ``--help`` (``cli``), the finding rules from :data:`tracekit.findings.RULES`
  (``findings``), the kernel taxonomy from :data:`tracekit.classify.RULES` (``kernel-classes``), the
  JSON contracts from the docstrings of :mod:`tracekit.render.json`'s modules (``json``). A generator
  that fails, or a placeholder with no generator, stops the build (:class:`PluginError`).
* A page's checked block (``<!-- NAME-START -->`` … ``<!-- NAME-END -->``, tests/doc_blocks.py) must
  be what its producer prints today; a stale one stops the build with the command that refreshes it
  (``pytest --update-goldens``, the only way blocks change). The tests read the same producers, so
  the site and the suite hold one source.

Nothing here downloads anything or writes outside the build.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]


def _on_path() -> None:
    """This checkout's tracekit and the tests' block producers first on ``sys.path`` (MkDocs puts
    back the path it had after loading a hook, so this runs when the hooks run)."""
    for path in (str(ROOT / "tests"), str(ROOT)):
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)

PLACEHOLDER = re.compile(r"<!-- generated:([a-z-]+) -->")
#: Width the command line's help is rendered at (the site's code blocks hold it without wrapping).
HELP_WIDTH = 100


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


# ---- the command line ----------------------------------------------------------------------------

def cli_reference() -> str:
    """Every command's ``--help``, as ``tracekit NAME --help`` prints it."""
    import click

    from tracekit.commands import cli

    def context(command: click.Command, name: str, parent: click.Context | None = None) -> click.Context:
        return click.Context(command, info_name=name, parent=parent, terminal_width=HELP_WIDTH,
                             max_content_width=HELP_WIDTH)

    top = context(cli, "tracekit")
    parts = ["## tracekit", "", "```text", "$ tracekit --help", cli.get_help(top), "```", ""]
    for name in cli.list_commands(top):
        command = cli.get_command(top, name)
        if command is None:
            raise PluginError(f"tracekit {name}: listed but not found")
        parts += [f"## tracekit {name}", "", "```text", f"$ tracekit {name} --help",
                  command.get_help(context(command, name, top)), "```", ""]
    return "\n".join(parts)


# ---- the finding rules ---------------------------------------------------------------------------

def _constant_docs() -> dict[str, str]:
    """Every ``#:`` comment above a module-level constant of the findings package, by name (the reason
    a threshold has its value, where the rule's module writes it)."""
    import pkgutil

    import tracekit.findings as package
    import tracekit.findings.detectors as detectors

    docs: dict[str, str] = {}
    modules = [f"tracekit.findings.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    modules += [f"tracekit.findings.detectors.{m.name}" for m in pkgutil.iter_modules(detectors.__path__)]
    for module in modules:
        lines = inspect.getsource(importlib.import_module(module)).splitlines()
        for node in ast.parse("\n".join(lines)).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                comment, row = [], node.lineno - 2
                while row >= 0 and lines[row].lstrip().startswith("#:"):
                    comment.insert(0, lines[row].lstrip()[2:].strip())
                    row -= 1
                for target in targets:
                    if isinstance(target, ast.Name) and comment:
                        docs.setdefault(target.id, " ".join(comment))
    return docs


def _value(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000 else str(value)


def findings_reference() -> str:
    """One section per rule of :data:`tracekit.findings.RULES`, in table order: what it finds, what it
    reads, its thresholds with their reasons, its fix."""
    from tracekit import findings

    reasons = _constant_docs()
    parts = []
    for rule in findings.RULES.values():
        parts += [f"### `{rule.id}`", "",
                  f"**Finds** {rule.title}. **At most** a {rule.severity}.", "",
                  f"**Reads** {rule.needs}.", ""]
        if rule.thresholds:
            parts += ["| threshold | value | why |", "|---|---|---|"]
            parts += [f"| `{name}` | {_value(value)} | {_cell(reasons.get(name, ''))} |"
                      for name, value in rule.thresholds.items()]
            parts.append("")
        parts += [f"**Fix** {rule.fix}", ""]
    if not parts:
        raise PluginError("tracekit.findings.RULES is empty")
    return "\n".join(parts)


# ---- the kernel taxonomy -------------------------------------------------------------------------

def kernel_classes_reference() -> str:
    """One table per kernel class (:data:`tracekit.classify.CLASSES` order) of the taxonomy's rules
    that give it, in the table's order (first match wins), each with its library and its reason."""
    from tracekit.classify import CLASSES, RULES

    parts = []
    for kernel_class in CLASSES:
        rules = [r for r in RULES if r.kernel_class == kernel_class]
        if not rules:
            continue
        parts += [f"### `{kernel_class}`", "", "| rule | activity | library | why |", "|---|---|---|---|"]
        for rule in rules:
            library = f"`{rule.library}`" if isinstance(rule.library, str) else "from the name or launch"
            kinds = ", ".join(sorted(rule.kinds))
            parts.append(f"| `{rule.name}` | {kinds} | {library} | {_cell(rule.why)} |")
        parts.append("")
    missing = set(CLASSES) - {r.kernel_class for r in RULES}
    if missing:
        raise PluginError(f"kernel classes with no rule: {sorted(missing)}")
    return "\n".join(parts)


# ---- the JSON contracts --------------------------------------------------------------------------

#: The contract modules, in the order of the commands.
CONTRACTS = ("report", "diff", "check", "compare", "ranks", "rank_diff")
_ROLE = re.compile(r":(?:mod|func|class|data|meth|attr):`~?([^`]+)`")


def _markdown(docstring: str) -> str:
    """A contract module's docstring (reStructuredText inline markup) as Markdown."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", inspect.cleandoc(docstring))
    return text.replace("``", "`")


def json_reference() -> str:
    """Each contract's schema name and its documented keys, from its module
    (:mod:`tracekit.render.json`: the one place that writes and documents it)."""
    parts = []
    for name in CONTRACTS:
        module = importlib.import_module(f"tracekit.render.json.{name}")
        if not module.__doc__:
            raise PluginError(f"tracekit.render.json.{name} documents no keys")
        parts += [f"## `{module.SCHEMA}`", "", _markdown(module.__doc__), ""]
    return "\n".join(parts)


GENERATED: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "findings": findings_reference,
    "kernel-classes": kernel_classes_reference,
    "json": json_reference,
}


def fill(markdown: str, where: str) -> str:
    """``markdown`` with every placeholder replaced by its generated text (module docstring)."""
    _on_path()
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATED:
            raise PluginError(f"{where}: no generator for <!-- generated:{name} -->")
        try:
            return GENERATED[name]()
        except PluginError:
            raise
        except Exception as error:  # any failure to generate stops the build, named
            raise PluginError(f"{where}: generating {name} failed: {type(error).__name__}: {error}") from error

    return PLACEHOLDER.sub(generate, markdown)


def check_blocks(markdown: str, where: str) -> None:
    """Stop the build when a checked block of this page is not what its producer prints today."""
    _on_path()
    import doc_blocks

    for name, shown in doc_blocks.blocks(markdown):
        producer = doc_blocks.PRODUCERS.get(name)
        if producer is None:
            raise PluginError(f"{where}: checked block {name} has no producer in tests/doc_blocks.py")
        if shown != producer():
            raise PluginError(f"{where}: the {name} block is stale: run `python -m pytest tests/docs "
                              "--update-goldens` and review the diff")


def on_config(config):
    _on_path()
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:
    where = page.file.src_uri
    check_blocks(markdown, where)
    return fill(markdown, where)
