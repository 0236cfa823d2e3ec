"""``tracekit diff A B``: what changed between two traces, with ``--fail-if`` gates.

Errors pass through the one boundary: bad input is exit 2; a failed gate raises
:class:`~tracekit.errors.GateFailed` (exit 1) *after* the full output has been written.
"""

from __future__ import annotations

import os

import click

from tracekit import progress
from tracekit.commands import options
from tracekit.output import refuse_inputs

#: Inputs at least this large (bytes, both together) are profiled in two processes at once.
PARALLEL_MIN_BYTES = 64 * 1024 * 1024


def profiles(a_path: str, b_path: str, unit: str | None, execution_trace: str | None, timelines: bool = False,
             companions: tuple[str | None, str | None] = (None, None)):
    """Profiles of A and B (with every unit's timeline when ``timelines``); big inputs in two spawned
    processes (each trace's load and analyses are independent, and a machine with two cores then
    takes about the time of one report)."""
    from tracekit import parallel
    from tracekit.session import profile_of

    sizes = [os.path.getsize(p) if os.path.isfile(p) else 0 for p in (a_path, b_path)]
    if sum(sizes) < PARALLEL_MIN_BYTES or parallel.cores() < 2:
        return (profile_of(a_path, unit, execution_trace, None, timelines, companions[0]),
                profile_of(b_path, unit, execution_trace, None, timelines, companions[1]))
    with parallel.spawn_pool(2) as pool:  # one process per trace, each loading with one
        a = pool.submit(profile_of, a_path, unit, execution_trace, 1, timelines, companions[0])
        b = pool.submit(profile_of, b_path, unit, execution_trace, 1, timelines, companions[1])
        return a.result(), b.result()


def _fail_if_help() -> str:
    from tracekit.diff import gates

    return ("Exit 1 when the change B - A per step exceeds EXPR (repeatable), e.g. 'gpu_time>+5%', "
            "'kernels>+0', 'round_trip_bytes>+0', 'cpu_time>+20us'; a change within the step-to-step noise "
            "never fails. " + gates.grammar_help(gates.DIFF_GATES, "A"))


@click.command()
@click.argument("a_path", metavar="A", type=click.Path(dir_okay=True, path_type=str))
@click.argument("b_path", metavar="B", type=click.Path(dir_okay=True, path_type=str))
@options.unit
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR", cls=options.LazyHelp,
              help_text=lambda: _fail_if_help())
@options.no_execution_trace
@click.option("--graph-companion", "graph_companions", multiple=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=str),
              help="A trace of the CUDA-graph capture phase, or of the same code run eagerly, that graph "
                   "replays are attributed from: once for both A and B, or twice (A's, then B's).")
@options.output_format
@options.output
@options.reading
def diff(a_path: str, b_path: str, unit: str | None, fail_if: tuple[str, ...], no_et: bool,
         fmt: str | None, output: str | None, graph_companions: tuple[str, ...] = ()) -> None:
    """Compare trace A (before) with trace B (after): fusions, kernel changes, per-step deltas.

    A and B may also be two directories of rank traces: per-rank medians (step, GPU busy, exposed
    communication, wait at collectives) and each collective's bus bandwidth, A against B.
    """
    from tracekit.errors import UsageError
    from tracekit.diff import gates, pairwise
    from tracekit.session import Session

    if os.path.isdir(a_path) or os.path.isdir(b_path):
        _diff_ranks(a_path, b_path, unit, fail_if, graph_companions, fmt, output)
        return
    parsed = [gates.parse(text) for text in fail_if]  # a typo fails before the slow part
    if len(graph_companions) > 2:
        raise UsageError("--graph-companion is given once (both traces) or twice (A's, then B's)")
    companions = ((graph_companions[0], graph_companions[-1]) if graph_companions else (None, None))
    et_choice = options.execution_trace_choice(None, no_et)
    renderer = options.renderer(fmt, output)
    target = renderer.files_target(output)  # a format writing files: where, checked before the slow part
    inputs = [a_path, b_path, *(Session(p, execution_trace=et_choice).execution_trace_path for p in (a_path, b_path)),
              *graph_companions]
    if target is None:
        refuse_inputs(output, inputs)
    names = " and ".join(os.path.basename(p) for p in (a_path, b_path))
    with progress.phase(f"reading and analysing {names}"):
        result = pairwise.diff(*profiles(a_path, b_path, unit, et_choice, renderer.needs_timelines, companions))
    results = gates.evaluate(parsed, result)
    options.write_then_gate(output, lambda out: renderer.render(result, out, results, color=options.colour(output)),
                            results, target=target, inputs=inputs,
                            files=lambda index: renderer.files(result, results, index=index))


def _diff_ranks(a_path: str, b_path: str, unit: str | None, fail_if: tuple[str, ...],
                graph_companions: tuple[str, ...], fmt: str | None, output: str | None) -> None:
    """``diff DIR_A DIR_B``: two sets of ranks, each analysed as ``report DIR`` does, compared."""
    from tracekit import ranks
    from tracekit.diff.ranks import diff as diff_ranks
    from tracekit.errors import UsageError

    for one, other in ((a_path, b_path), (b_path, a_path)):
        if os.path.isdir(one) and not os.path.isdir(other):
            raise UsageError(f"diff compares two traces or two directories of ranks: {one} is a directory, "
                             f"{other} is not")
    if unit is not None or fail_if or graph_companions:
        raise UsageError("--unit, --fail-if and --graph-companion apply to two traces, not to two directories of ranks")
    renderer = options.renderer(fmt, output)
    if renderer.writes_files:
        raise UsageError(f"--format {renderer.name} draws one trace's pictures, not directories of ranks; "
                         "use --format md, html, json or term")
    refuse_inputs(output, [*ranks.find_traces(a_path), *ranks.find_traces(b_path)])
    result = diff_ranks(ranks.analyze(a_path, show_progress=True), ranks.analyze(b_path, show_progress=True))
    options.write_result(output, lambda out: renderer.render(result, out, color=options.colour(output)))
