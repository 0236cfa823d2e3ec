"""The house rules of the code base, checked: which room may import which, and what the command
line imports before it needs it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tracekit"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from . import x`` resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _room(room: str) -> list[Path]:
    return sorted((PACKAGE / room).rglob("*.py"))


def _offences(room: str, forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for path in _room(room):
        for name in sorted(_imports(path)):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                out.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    return out


def test_every_room_exists():
    for room in ("load", "classify", "analyses", "findings", "results", "diff", "render", "commands"):
        assert _room(room), room


# -- the import graph, read from the code ---------------------------------------------------------

def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _arrows(path: Path) -> set[str]:
    """The tracekit modules ``path`` imports: ``from tracekit.x import y`` is module ``tracekit.x.y``
    when that is a module (and then not the package ``tracekit.x``, which Python only runs first),
    else ``tracekit.x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # ``tracekit.x.Name`` is module ``tracekit.x``
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    """``{module: the tracekit modules it imports}``. Every import is an arrow: those inside functions
    and under ``TYPE_CHECKING`` too (a lazy import still ties the two modules together)."""
    return {name: _arrows(path) - {name, "tracekit"} for name, path in MODULES.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_circle_finder_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


def test_the_import_graph_has_no_circle():
    assert _circles(_graph()) == []


#: Every module's floor, lowest first. A module imports its own floor and those below, never one
#: above; the longest matching name decides (``tracekit.analyses.pipeline`` is not ``tracekit.analyses``).
FLOORS: tuple[tuple[str, ...], ...] = (
    # 0 - leaves: errors, the Trace model, device tables, text shapes, processes, file writing, progress bars
    ("tracekit.errors", "tracekit.trace", "tracekit.devices", "tracekit.host_link", "tracekit.about",
     "tracekit.shapes", "tracekit.parallel", "tracekit.output", "tracekit.progress"),
    # 1 - bytes to a Trace; the kernel taxonomy
    ("tracekit.load", "tracekit.execution_trace", "tracekit.classify"),
    # 2 - one analysis per module, each from the Trace and lower analyses
    ("tracekit.analyses",),
    # 3 - the rule engine reads the analyses
    ("tracekit.findings",),
    # 4 - the one place analyses and findings run, into the bundle
    ("tracekit.analyses.pipeline",),
    # 5 - what reads the bundle: the per-unit profile and the timelines
    ("tracekit.analyses.profile", "tracekit.analyses.timeline"),
    # 6 - result classes
    ("tracekit.results",),
    # 7 - comparisons of results; the HTA oracle
    ("tracekit.diff", "tracekit.hta_oracle"),
    # 8 - what a command or a notebook opens; many ranks open many sessions
    ("tracekit.session", "tracekit.ranks", "tracekit.merge"),
    # 9 - words and pictures
    ("tracekit.render",),
    # 10 - the command line
    ("tracekit.commands", "tracekit.boundary", "tracekit.__main__"),
)


def _floor(module: str) -> int:
    best, floor = "", -1
    for level, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, floor = prefix, level
    return floor


def test_every_module_has_a_floor():
    assert sorted(m for m in MODULES if m != "tracekit" and _floor(m) < 0) == []


def test_no_module_imports_a_floor_above_its_own():
    upward = sorted(f"{m} (floor {_floor(m)}) imports {t} (floor {_floor(t)})"
                    for m, targets in _graph().items() if m != "tracekit"
                    for t in targets if _floor(t) > _floor(m))
    assert upward == []


def test_the_floor_rule_sees_an_upward_import():
    # An analysis that imported the report would break it: the rule can fail.
    assert _floor("tracekit.analyses.steps") < _floor("tracekit.results.report")
    assert _floor("tracekit.analyses.pipeline") > _floor("tracekit.findings.engine") > _floor("tracekit.analyses.steps")


# -- the house's "never"s, room by room (each also follows from the floors; named for the reader) -----

def _offences(room: str, forbidden: tuple[str, ...], *, except_: tuple[str, ...] = ()) -> list[str]:
    out = []
    for path in _room(room):
        module = _module_name(path)
        for name in sorted(_imports(path)):
            if any(name == f or name.startswith(f + ".") for f in forbidden) and module not in except_:
                out.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    return out


def test_the_loader_knows_no_analysis():
    assert _offences("load", ("tracekit.analyses", "tracekit.findings", "tracekit.results", "tracekit.diff",
                              "tracekit.render", "tracekit.session", "tracekit.commands")) == []


def test_analyses_import_no_report_findings_or_render():
    # The pipeline alone calls the findings engine (findings read what the analyses make); the
    # per-unit profile, which reads the bundle, names the findings' type.
    assert _offences("analyses", ("tracekit.results", "tracekit.findings", "tracekit.diff", "tracekit.render",
                                  "tracekit.session", "tracekit.commands", "rich", "click"),
                     except_=("tracekit.analyses.pipeline", "tracekit.analyses.profile")) == []
    assert _offences("analyses", ("tracekit.results", "tracekit.diff", "tracekit.render", "tracekit.session",
                                  "tracekit.commands", "rich", "click")) == []


def test_findings_import_no_diff():
    assert _offences("findings", ("tracekit.diff", "tracekit.results", "tracekit.render", "tracekit.session",
                                  "tracekit.commands")) == []


def test_diff_imports_no_load_and_no_trace():
    # The diff compares results (profiles, reports), never a trace or a file.
    assert _offences("diff", ("tracekit.load", "tracekit.trace", "tracekit.execution_trace", "tracekit.session",
                              "tracekit.render", "tracekit.commands", "tracekit.analyses.pipeline",
                              "tracekit.analyses.attribution")) == []


def test_renderers_never_load_nor_compute_a_comparison():
    # Renderers word results; they may name result types but never load traces or run the diff.
    assert _offences("render", ("tracekit.load", "tracekit.session", "tracekit.analyses.pipeline",
                                "tracekit.diff.align", "tracekit.diff.pairwise", "tracekit.commands")) == []


def test_nothing_below_the_commands_imports_capture():
    assert sorted(f"{m} imports {n}" for m, path in MODULES.items() if not m.startswith("tracekit.commands")
                  for n in _imports(path) if n == "capture" or n.startswith("capture.")) == []


#: The format modules of tracekit/render: each prints or writes one format, and none imports another
#: (what two share lives in a neutral module: text, gfm, page, timeline, charts, document, findings_data).
FORMAT_MODULES = ("tracekit.render.term", "tracekit.render.markdown", "tracekit.render.html",
                  "tracekit.render.svg", "tracekit.render.json", "tracekit.render.annotated")


def _format_files(module: str) -> list[Path]:
    path = PACKAGE.parent / Path(*module.split("."))
    return sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


def test_no_format_module_imports_another():
    offences = []
    for module in FORMAT_MODULES:
        siblings = tuple(m for m in FORMAT_MODULES if m != module)
        for path in _format_files(module):
            offences += [f"{path.relative_to(PACKAGE.parent)} imports {name}" for name in sorted(_imports(path))
                         if any(name == s or name.startswith(s + ".") for s in siblings)]
    assert offences == []


def test_the_annotated_trace_reads_no_file_itself():
    # It writes the trace's own text, which the session hands it (Session.source): every import,
    # those inside functions too, stays out of the loader, the session and the commands.
    files = _format_files("tracekit.render.annotated")
    assert [p.name for p in files] == ["__init__.py", "events.py"]
    forbidden = ("tracekit.load", "tracekit.session", "tracekit.commands", "tracekit.execution_trace")
    assert [f"{p.name} imports {name}" for p in files for name in sorted(_imports(p))
            if any(name == f or name.startswith(f + ".") for f in forbidden)] == []
    assert not (PACKAGE / "annotate.py").exists()  # the format lives in render, nowhere else


def test_views_know_no_format():
    # A view builds a document; printing it is the formats' (and JSON reads the views, never the reverse).
    assert _offences("render/views", FORMAT_MODULES) == []


def _modules_after(code: str) -> set[str]:
    """Module names loaded by a fresh interpreter after running ``code``."""
    # The module list goes to stderr after a marker: the command's own output is on stdout.
    probe = (f"import sys\n{code}\n"
             "sys.stderr.write('MODULES\\n' + '\\n'.join(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent)
    return set(done.stderr.split("MODULES\n", 1)[1].split())


RUN = ("from tracekit.commands import main\n"
       "try:\n    main({argv!r})\nexcept SystemExit:\n    pass")


@pytest.mark.parametrize("argv", [["--help"], ["report", "sample_traces/mlp_eager.json.gz", "--format", "md"]],
                         ids=["help", "report"])
@pytest.mark.slow
def test_the_command_line_imports_nothing_of_capture(argv):
    loaded = _modules_after(RUN.format(argv=argv))
    assert "tracekit.commands" in loaded
    assert sorted(m for m in loaded if m == "capture" or m.startswith("capture.")) == []
    assert "torch" not in loaded


def test_help_lists_capture_without_importing_it():
    done = subprocess.run([sys.executable, "-m", "tracekit", "--help"], capture_output=True, text=True,
                          timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0
    # click pads the names to the longest one (annotate): match any run of spaces after a name.
    assert re.search(r"\n  capture +Record PyTorch profiler traces of known workloads", done.stdout)
    for name in ("annotate", "check", "convert", "diff", "report"):
        assert f"\n  {name} " in done.stdout


@pytest.mark.slow
def test_python_dash_m_tracekit_reports_a_sample_trace():
    done = subprocess.run([sys.executable, "-m", "tracekit", "report", "sample_traces/mlp_eager.json.gz",
                           "--format", "md"], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# tracekit report: mlp\\_eager.json.gz")
    assert "nvjet\\_sm90" in done.stdout


@pytest.mark.parametrize("users", [None, "", "narenas:2", "dirty_decay_ms:500,muzzy_decay_ms:1000"],
                         ids=["default", "empty", "user's own", "inherited from a parent's Polars"])
@pytest.mark.slow
def test_the_command_sets_polars_allocator_before_polars_starts(users):
    """``keep_freed_memory``: Polars composes its allocator settings when imported, its own first
    and ours after (later ones win); a setting of the user's own is left as it is, the one a parent
    process's Polars left in the environment is not the user's."""
    code = ("import os, sys\nfrom tracekit.commands import main\nassert 'polars' not in sys.modules\n"
            "try:\n    main(['report', 'sample_traces/mlp_eager.json.gz', '--format', 'md'])\n"
            "except SystemExit:\n    pass\nprint(os.environ['_RJEM_MALLOC_CONF'])")
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if users is not None:
        env["_RJEM_MALLOC_CONF"] = users
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent, env=env)
    assert done.returncode == 0, done.stderr
    settings = done.stdout.strip().splitlines()[-1]
    ours = "narenas:2" if users == "narenas:2" else "dirty_decay_ms:5000,muzzy_decay_ms:5000"
    assert settings.endswith("," + ours) and len(settings) > len(ours) + 1  # Polars' own, then ours
