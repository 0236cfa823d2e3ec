"""The outputs shown in README.md and docs/*.md are real runs: each sits between markers
``<!-- NAME-START -->`` and ``<!-- NAME-END -->`` in one file, and its producer here prints what
tracekit prints today.

Contract: :data:`PRODUCERS` maps a block's name to the function that makes its text and
:data:`PAGES` to the file (relative to the repository) that shows it. :func:`check_block` compares
the shown text with the producer's, or writes it there under ``pytest --update-goldens`` (the only
way a block changes: review the diff like code). The documentation's build (docs/hooks.py) reads
the same producers and fails on a stale block, so the suite and the site hold one source.
:data:`CODE_BLOCKS` are blocks of code the tests run instead (a doctest, the trace-collection
snippet): they have no producer.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Terminal width the findings examples are rendered at (their code blocks wrap beyond it).
WIDTH = 110
#: Traces whose report opening the findings example shows, as its commands name them.
FINDINGS_EXAMPLES = ("sample_traces/antipatterns/antipatterns_host-sync.json.gz",
                     "tests/data/real/facebookresearch__param__resnet-2080ti-cudnn-train.json.gz")
#: The shape sweep the compare example reads (sample_traces/compile_sweep/).
COMPARE_MODES = ("eager", "compile", "compile-static", "compile-dynamic", "compile-cudagraphs", "liger")
_BLOCK = re.compile(r"<!-- ([A-Z][A-Z0-9-]*)-START -->\n(.*?)<!-- \1-END -->", re.S)


def blocks(text: str) -> Iterator[tuple[str, str]]:
    """``(name, shown text)`` of every marked block in ``text`` but the :data:`CODE_BLOCKS`."""
    for match in _BLOCK.finditer(text):
        if match.group(1) not in CODE_BLOCKS:
            yield match.group(1), match.group(2)


def read_block(path: Path, name: str) -> tuple[str, str, str]:
    """``(head, shown, tail)`` of ``path`` around its block ``name`` (markers in head and tail)."""
    start, end = f"<!-- {name}-START -->\n", f"<!-- {name}-END -->"
    text = path.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise AssertionError(f"{path.relative_to(ROOT)} has no {name} block")
    head, rest = text.split(start, 1)
    shown, tail = rest.split(end, 1)
    return head + start, shown, end + tail


def code_block(path: Path, name: str, language: str) -> str:
    """The code of the fenced ``language`` block inside block ``name`` of ``path``."""
    shown = read_block(path, name)[1]
    return shown.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def check_block(request, name: str, expected: str | None = None, path: Path | None = None) -> None:
    """The block ``name`` of its page (:data:`PAGES`, or ``path``) is ``expected`` (by default its
    producer's text); with ``--update-goldens`` it is written there instead."""
    path = path or ROOT / PAGES[name]
    expected = PRODUCERS[name]() if expected is None else expected
    head, shown, tail = read_block(path, name)
    if request.config.getoption("--update-goldens"):
        path.write_text(head + expected + tail, encoding="utf-8")
        return
    assert shown == expected, (f"the {name} block of {path.relative_to(ROOT)} is stale: run pytest "
                               "--update-goldens and review the diff")


# ---- producers -------------------------------------------------------------------------------------

@contextlib.contextmanager
def _in_root(cwd: Path | None = None) -> Iterator[None]:
    """Run with the repository (or ``cwd``) as the working directory (the shown commands name paths
    from it)."""
    before = os.getcwd()
    os.chdir(cwd or ROOT)
    try:
        yield
    finally:
        os.chdir(before)


def _run(args: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    """``tracekit ARGS`` in this process, in the repository (or ``cwd``): exit status, stdout, stderr."""
    from tracekit.commands import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _in_root(cwd):
        try:
            main(args)
            code = 0
        except SystemExit as done:
            code = done.code or 0
    return code, out.getvalue(), err.getvalue()


def _opening(path: str) -> str:
    """The terminal report up to the end of its findings (the first blank line after them)."""
    import tracekit
    from tracekit.render import renderer_for

    out = io.StringIO()
    renderer_for("term").render(tracekit.open(ROOT / path).report(), out, color=False, width=WIDTH)
    lines = out.getvalue().splitlines()
    start = lines.index("Findings")
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(line.rstrip() for line in lines[:end])


@cache
def findings_examples() -> str:
    """The opening of ``tracekit report`` (limit line and findings) on a planted H200 capture and on
    a real public trace of the input-bound family."""
    return "".join(f"```\n$ tracekit report {path}\n{_opening(path)}\n```\n\n" for path in FINDINGS_EXAMPLES)


@cache
def readme_opening() -> str:
    """The README's taste of ``tracekit report``: the first lines of the host-sync capture's findings."""
    path = FINDINGS_EXAMPLES[0]
    lines = _opening(path).splitlines()[:6]
    return "```console\n$ tracekit report " + path + "\n" + "\n".join(lines) + "\n  …\n```\n"


def rules_table() -> str:
    """The finding rules as Markdown, in table order: id, the most it says, what it finds, its fix."""
    from tracekit import findings

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| rule | at most | what it finds | fix |", "|---|---|---|---|"]
    rows += [f"| `{r.id}` | {r.severity} | {cell(r.title)} | {cell(r.fix)} |" for r in findings.RULES.values()]
    return "\n".join(rows) + "\n"


def precision_table() -> str:
    """The answer key's precision and recall table (tests/answer_key.py)."""
    from answer_key import load_key, precision_markdown

    return precision_markdown(load_key())


def demoted(markdown: str) -> str:
    """Markdown with its headings moved down so that its first is a level-4 heading (the output sits
    under a page's sections)."""
    lines = markdown.splitlines()
    first = next((line for line in lines if line.startswith("#")), "####")
    shift = "#" * max(4 - (len(first) - len(first.lstrip("#"))), 0)
    return "\n".join(shift + line if line.startswith("#") else line for line in lines)


REPORT_COMMAND = "tracekit report sample_traces/mlp_eager.json.gz --step 4 --format md"


@cache
def report_example() -> str:
    """The Markdown report of the eager MLP's step 4, under the command that prints it."""
    code, out, err = _run(REPORT_COMMAND.split()[1:])
    assert code == 0, err
    return f"```\n$ {REPORT_COMMAND}\n```\n\n{demoted(out)}\n\n"


DIFF_COMMAND = "tracekit diff sample_traces/mlp_eager.json.gz sample_traces/mlp_compile.json.gz --format md"


@cache
def diff_example() -> str:
    """The Markdown diff of the eager and compiled MLP (what a PR comment shows)."""
    code, out, err = _run(DIFF_COMMAND.split()[1:])
    assert code == 0, err
    return f"```\n$ {DIFF_COMMAND}\n```\n\n{demoted(out)}\n\n"


CHECK_PASS = "tracekit check sample_traces/mlp_compile.json.gz --expect expectations/mlp_compile.toml --format md"
CHECK_FAIL = "tracekit check sample_traces/mlp_eager.json.gz --expect expectations/mlp_compile.toml"


@cache
def check_example() -> str:
    """``check`` met on its trace (Markdown), then broken on the eager trace (exit 1, its stderr line)."""
    code, out, err = _run(CHECK_PASS.split()[1:])
    assert code == 0, err
    failed, _, failure = _run(CHECK_FAIL.split()[1:])
    assert failed == 1, failure
    return (f"```\n$ {CHECK_PASS}\n```\n\n{demoted(out)}\n\n"
            f"```\n$ {CHECK_FAIL} > /dev/null; echo \"exit $?\"\n{failure}exit {failed}\n```\n\n")


COMPARE_COMMAND = ("cd sample_traces/compile_sweep && tracekit compare "
                   + " ".join(f"mlp_{m}-sweep.json.gz" for m in COMPARE_MODES) + " --format md")


@cache
def compare_example() -> str:
    """``tracekit compare`` of the shipped shape sweep, one trace per mode (Markdown)."""
    code, out, err = _run(["compare", *(f"sample_traces/compile_sweep/mlp_{m}-sweep.json.gz" for m in COMPARE_MODES),
                           "--format", "md"])
    assert code == 0, err
    return f"```\n$ {COMPARE_COMMAND}\n```\n\n{demoted(out)}\n\n"


COMPILATION_COMMAND = "tracekit report sample_traces/compile_sweep/mlp_compile-sweep.json.gz --format md"


@cache
def compilation_example() -> str:
    """The Compilation sections of the default-compile sweep's Markdown report."""
    code, out, err = _run(COMPILATION_COMMAND.split()[1:])
    assert code == 0, err
    kept, keep = [], False
    for line in demoted(out).splitlines():
        if line.startswith("#"):
            keep = line.lstrip("#").strip().startswith("Compilation")
        if keep:
            kept.append(line)
    assert kept, "the sweep's report has no Compilation section"
    return "\n".join(kept).strip() + "\n\n"


#: A written file's size depends on the compressor's and Parquet writer's versions: shown as "…".
_SIZE = re.compile(r"\(([0-9,]+) bytes, ")


def _wrote(args: list[str]) -> str:
    """The one line a writing command prints, run from the repository into a scratch folder."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "sample_traces").symlink_to(ROOT / "sample_traces")
        code, _, err = _run(args, cwd=Path(scratch))
    assert code == 0, err
    return _SIZE.sub("(… bytes, ", err)


CONVERT_COMMAND = "tracekit convert sample_traces/train_eager.json.gz -o train.parquet"
ANNOTATE_COMMAND = "tracekit annotate sample_traces/antipatterns/antipatterns_host-sync.json.gz -o hs.json.gz"


@cache
def convert_example() -> str:
    return f"```\n$ {CONVERT_COMMAND}\n{_wrote(CONVERT_COMMAND.split()[1:])}```\n"


@cache
def annotate_example() -> str:
    return f"```\n$ {ANNOTATE_COMMAND}\n{_wrote(ANNOTATE_COMMAND.split()[1:])}```\n"


RANKS_GLOO_COMMAND = "tracekit report sample_traces/ranks_gloo/late-backward --format md"


@cache
def ranks_gloo_example() -> str:
    """Who the others waited for, and how the collectives matched, on the shipped gloo ranks (rank 2
    late in backward), from the Markdown report of the directory."""
    code, out, err = _run([*RANKS_GLOO_COMMAND.split()[1:], "--no-cache"])
    assert code == 0, err
    steps = [line for line in out.splitlines() if line.startswith(("Step ", "Longest mean step"))]
    matching = [line for line in out.splitlines() if line.startswith(("- Matched ", "- Arrival", "- Clock offsets"))]
    assert len(steps) == 4 and len(matching) == 3, (steps, matching)
    # The report's own Markdown (its escapes render as the text), each culprit line a paragraph.
    return f"```\n$ {RANKS_GLOO_COMMAND}\n```\n\n" + "\n\n".join(steps) + "\n\n" + "\n".join(matching) + "\n\n"


#: The two ranks of a public tensor-parallel Llama run (tests/data/real), the set merge's example reads.
MERGE_RANKS = tuple(f"tests/data/real/tugot17__tokenomics-from-first-principles__rtx4090-tp2-llama-rank{r}.json.gz"
                    for r in (0, 1))
MERGE_COMMAND = "tracekit merge tp2 -o merged.json.gz"


@cache
def merge_example() -> str:
    """``tracekit merge`` of :data:`MERGE_RANKS`, linked into a folder ``tp2`` of a scratch folder
    (the summaries its analysis keeps go to a cache folder there, not the user's)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        ranks = Path(scratch) / "tp2"
        ranks.mkdir()
        for rank in MERGE_RANKS:
            (ranks / Path(rank).name).symlink_to(ROOT / rank)
        before = os.environ.get("TRACEKIT_CACHE_DIR")
        os.environ["TRACEKIT_CACHE_DIR"] = str(Path(scratch) / "cache")
        try:
            code, _, err = _run(MERGE_COMMAND.split()[1:], cwd=Path(scratch))
        finally:
            if before is None:
                del os.environ["TRACEKIT_CACHE_DIR"]
            else:
                os.environ["TRACEKIT_CACHE_DIR"] = before
    assert code == 0, err
    listing = "".join(f"{Path(rank).name}\n" for rank in MERGE_RANKS)
    return f"```\n$ ls tp2\n{listing}$ {MERGE_COMMAND}\n{_SIZE.sub('(… bytes, ', err)}```\n"


PRODUCERS: dict[str, Callable[[], str]] = {
    "RULES": rules_table,
    "PRECISION": precision_table,
    "FINDINGS": findings_examples,
    "README-FINDINGS": readme_opening,
    "REPORT": report_example,
    "DIFF": diff_example,
    "CHECK": check_example,
    "COMPARE": compare_example,
    "COMPILATION": compilation_example,
    "CONVERT": convert_example,
    "ANNOTATE": annotate_example,
    "RANKS-GLOO": ranks_gloo_example,
    "MERGE": merge_example,
}
PAGES: dict[str, str] = {
    "RULES": "docs/reference/findings.md",
    "PRECISION": "docs/reference/findings.md",
    "FINDINGS": "docs/guide/first-report.md",
    "README-FINDINGS": "README.md",
    "REPORT": "docs/commands/report.md",
    "DIFF": "docs/guide/regression.md",
    "CHECK": "docs/commands/check.md",
    "COMPARE": "docs/guide/compile.md",
    "COMPILATION": "docs/guide/compile.md",
    "CONVERT": "docs/commands/convert.md",
    "ANNOTATE": "docs/commands/annotate.md",
    "RANKS-GLOO": "docs/guide/ranks.md",
    "MERGE": "docs/commands/merge.md",
}
#: Blocks of code the tests run (tests/commands/test_api.py, tests/docs/test_collect_snippet.py).
CODE_BLOCKS = frozenset({"README-API", "API", "COLLECT", "TIMELINES"})
