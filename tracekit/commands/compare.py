"""``tracekit compare TRACE… [--baseline TRACE]``: compile or hand-tuned — compilations, recompiles,
graph records, JIT, steady cost per call and break-even across traces of one workload.

Errors pass through the one boundary: bad input is exit 2; a failed ``--fail-if`` gate raises
:class:`~tracekit.errors.GateFailed` (exit 1) after the full output has been written.
"""

from __future__ import annotations

import os

import click

from tracekit import progress
from tracekit.commands import options
from tracekit.errors import UsageError
from tracekit.output import refuse_inputs


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _fail_if_help() -> str:
    from tracekit.diff import gates

    return ("Exit 1 when any trace exceeds EXPR (repeatable), e.g. 'recompiles>0', 'compile_time>2s', "
            "'gpu_time>+5%' (against the baseline, which a % gate leaves out). "
            + gates.grammar_help(gates.COMPARE_GATES, "the baseline"))


@click.command()
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True,
                type=options.FilePath("a trace file"))
@click.option("--baseline", "baseline", default=None, metavar="TRACE", type=options.FilePath("a trace file"),
              help="The trace the others are measured against (break-even calls); one of TRACE… or another "
                   "(default: the first TRACE).")
@options.unit
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR", cls=options.LazyHelp,
              help_text=lambda: _fail_if_help())
@options.document_format
@options.document_output
@options.reading
def compare(traces: tuple[str, ...], baseline: str | None, unit: str | None, fail_if: tuple[str, ...],
            fmt: str | None, output: str | None) -> None:
    """Compare traces of one workload (eager, compiled, hand-tuned kernels): what each compiled, what it
    cost once, its steady GPU time and CPU dispatch per call, and after how many calls it pays off."""
    from tracekit.diff import gates, side_by_side
    from tracekit.session import Session

    parsed = [gates.parse(text, gates.COMPARE_GATES) for text in fail_if]  # a typo fails before the slow part
    renderer = options.document_renderer(fmt, output, "compare")
    paths = list(traces)
    index = 0
    if baseline is not None:
        found = [i for i, p in enumerate(paths) if _same_file(p, baseline)]
        if found:
            index = found[0]
        else:
            paths.insert(0, baseline)
    labels = [side_by_side.label_of(p) for p in paths]
    if len(set(labels)) != len(labels):
        labels = [os.path.basename(p) for p in paths]
    if len(set(labels)) != len(labels):
        raise UsageError("compare: two traces have the same file name; give each a distinct name")
    refuse_inputs(output, paths)
    reports = []
    with progress.phase(f"reading and analysing {len(paths)} traces") as bar:
        for label, p in zip(labels, paths):
            bar.update(len(reports), len(paths))
            reports.append((label, Session(p, execution_trace=None).report(unit=unit)))
    result = side_by_side.compare(reports, baseline=index)
    results = gates.evaluate_comparison(parsed, result)
    options.write_then_gate(output, lambda out: renderer.render(result, out, results, color=options.colour(output)),
                            results, lambda r: f"{r.gate.text} ({', '.join(r.traces)})")
