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

PACKAGE = Path(__file__).resolve().parent.parent / "tracekit"


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
    for room in ("load", "render", "diff", "analyses", "classify", "commands"):
        assert _room(room), room


def test_the_loader_knows_no_analysis():
    assert _offences("load", ("tracekit.report", "tracekit.report_store", "tracekit.analyses",
                              "tracekit.diff", "tracekit.render", "tracekit.session",
                              "tracekit.commands")) == []


def test_diff_imports_nothing_from_render():
    assert _offences("diff", ("tracekit.render", "tracekit.commands")) == []


def test_render_imports_neither_the_loader_nor_the_diffs_machinery():
    # Renderers word results; they may name result types (under TYPE_CHECKING or as data classes)
    # but never load traces or run the diff's alignment/profiling.
    assert _offences("render", ("tracekit.load", "tracekit.session", "tracekit.diff.align",
                                "tracekit.analyses.profile", "tracekit.diff.pairwise",
                                "tracekit.commands")) == []


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def test_the_diff_rooms_modules_import_each_other_in_no_circle():
    # A circle (the Diff's builder and its verdict rules, once) means neither module can be read or
    # tested alone; every import counts, those under TYPE_CHECKING and inside functions too.
    modules = {_module_of(path) for path in _room("diff")}
    graph = {_module_of(path): {m for m in modules if m in _imports(path) and m != _module_of(path)}
             for path in _room("diff")}
    done: set[str] = set()

    def circle_from(module: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if module in path:
            return path[path.index(module):] + (module,)
        if module in done:
            return None
        found = next((c for m in sorted(graph[module]) if (c := circle_from(m, path + (module,)))), None)
        done.add(module)
        return found

    assert [c for m in sorted(graph) if (c := circle_from(m, ()))] == []
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


def test_analyses_render_nothing():
    assert _offences("analyses", ("tracekit.render", "tracekit.commands", "tracekit.diff",
                                  "rich", "click")) == []


def test_analyses_sit_below_report_findings_and_session():
    # The pipeline alone calls the findings engine (findings read the bundle the analyses make).
    forbidden = ("tracekit.report", "tracekit.report_store", "tracekit.findings", "tracekit.diff",
                 "tracekit.render", "tracekit.session", "tracekit.commands")
    offences = [o for o in _offences("analyses", forbidden)
                if not (o.startswith("tracekit/analyses/pipeline.py imports tracekit.findings"))]
    assert offences == []


def test_findings_know_nothing_of_diff_report_or_session():
    assert _offences("findings", ("tracekit.diff", "tracekit.report", "tracekit.render", "tracekit.session",
                                  "tracekit.commands")) == []


def test_diff_compares_results_never_traces():
    # Profiles, the bundle's types, findings (rule ids), the kernel taxonomy and errors: nothing that
    # reads a file or analyses a trace.
    allowed = ("tracekit.diff", "tracekit.analyses.profile", "tracekit.analyses.pipeline", "tracekit.findings",
               "tracekit.analyses.compilations", "tracekit.report", "tracekit.classify", "tracekit.errors")
    used = {name for path in _room("diff") for name in _imports(path) if name.startswith("tracekit")}
    assert sorted(n for n in used if not any(n == a or n.startswith(a + ".") for a in allowed)) == []


def test_no_import_circle_among_analyses_findings_report_and_session():
    rooms = [*_room("analyses"), *_room("findings"),
             *(PACKAGE / f"{m}.py" for m in ("report", "report_store", "session", "ranks", "hta_oracle"))]
    names = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in rooms}
    graph = {}
    for name, path in names.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:  # ``from tracekit.analyses import steps`` is the module steps
                    full = f"{node.module}.{alias.name}"
                    imported.add(full if full in names else node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        graph[name] = {m for m in imported if m in names and m != name}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a)) == []


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


def test_python_dash_m_tracekit_reports_a_sample_trace():
    done = subprocess.run([sys.executable, "-m", "tracekit", "report", "sample_traces/mlp_eager.json.gz",
                           "--format", "md"], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# tracekit report: mlp\\_eager.json.gz")
    assert "nvjet\\_sm90" in done.stdout


@pytest.mark.parametrize("users", [None, "", "narenas:2", "dirty_decay_ms:500,muzzy_decay_ms:1000"],
                         ids=["default", "empty", "user's own", "inherited from a parent's Polars"])
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
