"""``tracekit diff A B`` and ``tracekit check TRACE --expect FILE``: load → report → compare → render.

Registered on the group in :mod:`tracekit.cli` by :func:`register`. Errors pass through the CLI's
one boundary: bad input raises :class:`UsageError`/``TraceError`` (exit 2); a failed gate or broken
expectation raises :class:`GateFailed` (exit 1) *after* the full output has been written.
"""

from __future__ import annotations

import sys

import click

from tracekit.errors import GateFailed
from tracekit.output import open_output
from tracekit.render import FORMATS, format_for_path, renderer_for


def _profile(path: str, unit: str | None, use_et: bool = True, workers: int | None = None):
    """Load (Parquet cache or JSON), build the report with the execution trace beside the file when
    there is one (exact round-trip links, as ``tracekit report`` does), and profile it per unit.
    ``workers``: load processes (1 when A and B are already profiled side by side)."""
    from tracekit import execution_trace
    from tracekit import report as report_mod
    from tracekit.diff import profile
    from tracekit.load import open_trace

    trace = open_trace(path, workers=workers)
    et = execution_trace.for_trace(path, trace.meta.path) if use_et else None
    # Only the whole-trace analyses: the report's tables (paths, throughput…) are not compared.
    return profile.build(trace, report_mod.analyse(trace, execution_trace=et), unit=unit)


#: Inputs at least this large (bytes, both together) are profiled in two processes at once.
PARALLEL_MIN_BYTES = 64 * 1024 * 1024


def _profiles(a_path: str, b_path: str, unit: str | None, use_et: bool):
    """Profiles of A and B; big inputs in two spawned processes (each trace's load and analyses are
    independent, and a machine with two cores then takes about the time of one report)."""
    import os

    from tracekit import parallel

    sizes = [os.path.getsize(p) if os.path.isfile(p) else 0 for p in (a_path, b_path)]
    if sum(sizes) < PARALLEL_MIN_BYTES or parallel.cores() < 2:
        return _profile(a_path, unit, use_et), _profile(b_path, unit, use_et)
    with parallel.spawn_pool(2) as pool:
        a = pool.submit(_profile, a_path, unit, use_et, 1)
        b = pool.submit(_profile, b_path, unit, use_et, 1)
        return a.result(), b.result()


_format = click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                       help="Output format (default: from -o's extension, else term).")
_output = click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), default=None,
                       help="Write to this file instead of stdout.")
_unit = click.option("--unit", default=None, metavar="NAME",
                     help="Compare per span of this annotation (e.g. mlp_fwd) instead of per ProfilerStep.")
_no_et = click.option("--no-execution-trace", "no_et", is_flag=True,
                      help="Ignore X.et.json.gz beside a trace; infer round trips from shapes and order.")


@click.command("diff")
@click.argument("a_path", metavar="A", type=click.Path(dir_okay=True, path_type=str))
@click.argument("b_path", metavar="B", type=click.Path(dir_okay=True, path_type=str))
@_unit
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR",
              help="Exit 1 when the change exceeds EXPR, e.g. 'gpu_time>+5%', 'kernels>+0', "
                   "'round_trip_bytes>+0' (repeatable; grammar in the README).")
@_no_et
@_format
@_output
def diff_command(a_path: str, b_path: str, unit: str | None, fail_if: tuple[str, ...], no_et: bool,
                 fmt: str | None, output: str | None) -> None:
    """Compare trace A (before) with trace B (after): fusions, kernel changes, per-step deltas."""
    from tracekit.diff import compare, gates

    parsed = [gates.parse(text) for text in fail_if]  # a typo fails before the slow part
    result = compare.compare(*_profiles(a_path, b_path, unit, not no_et))
    results = gates.evaluate(parsed, result)
    fmt = format_for_path(output, fmt)
    with open_output(output) as out:
        renderer_for(fmt).diff(result, out, results, color=(output is None and sys.stdout.isatty()))
    failed = [r for r in results if r.failed]
    if failed:
        raise GateFailed(f"{len(failed)} of {len(results)} gates failed: "
                         + ", ".join(r.gate.text for r in failed))


@click.command("check")
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=True, path_type=str))
@click.option("--expect", "expect_path", required=True, metavar="FILE.toml",
              type=click.Path(dir_okay=False, path_type=str), help="The expectations to test.")
@_unit
@_no_et
@_format
@_output
def check_command(trace_path: str, expect_path: str, unit: str | None, no_et: bool, fmt: str | None,
                  output: str | None) -> None:
    """Test TRACE against the expectations in FILE.toml; exit 1 if any is broken."""
    from tracekit.diff import expect

    expectations = expect.load(expect_path)
    result = expect.check(_profile(trace_path, unit or expectations.unit, not no_et), expectations)
    fmt = format_for_path(output, fmt)
    with open_output(output) as out:
        renderer_for(fmt).check(result, out, color=(output is None and sys.stdout.isatty()))
    broken = [i for i in result.items if not i.met]
    if broken:
        from tracekit.render.diff_sections import expected_text

        raise GateFailed(f"{len(broken)} of {len(result.items)} expectations broken: "
                         + ", ".join(f"{i.key} {expected_text(i)}" for i in broken))


def register(group: click.Group) -> None:
    """Add ``diff`` and ``check`` to the ``tracekit`` group."""
    group.add_command(diff_command, name="diff")
    group.add_command(check_command, name="check")
