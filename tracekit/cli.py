"""The ``tracekit`` command line: a thin click group. Each command is load -> analyze -> render.

All user-caused errors pass through :func:`main`'s single error boundary, which prints one line on
stderr and exits with the error's code (2 = bad input or usage, 1 = a gate failed).
"""

from __future__ import annotations

import os
import sys

import click

from tracekit import __version__
from tracekit import boundary
from tracekit.errors import UsageError
from tracekit.output import open_output
from tracekit.render import FORMATS, format_for_path, renderer_for


@click.group()
@click.version_option(__version__, prog_name="tracekit")
def cli() -> None:
    """Turn PyTorch profiler (Kineto) traces into answers."""


@cli.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=True, path_type=str))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format (default: from -o's extension, else term).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Write to this file instead of stdout.")
@click.option("--step", type=int, default=None, help="Restrict every table to ProfilerStep#N.")
@click.option("--execution-trace", "et_path", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="PyTorch execution trace for exact round-trip links (default: X.et.json.gz beside X.json.gz).")
@click.option("--no-execution-trace", "no_et", is_flag=True,
              help="Ignore any execution trace; infer round trips from shapes and order.")
@click.option("--ceiling", "ceilings", multiple=True, metavar="KEY=VALUE",
              help="Override a device ceiling: hbm_gbps, bf16_tflops, fp16_tflops, fp32_tflops, "
                   "tf32_tflops, fp8_tflops (repeatable), e.g. --ceiling hbm_gbps=4300.")
@click.option("--hta", is_flag=True, help="Show HolisticTraceAnalysis' busy/idle figures beside ours "
              "(needs the hta extra).")
def report(trace_path: str, fmt: str | None, output: str | None, step: int | None, et_path: str | None,
           no_et: bool, ceilings: tuple[str, ...], hta: bool) -> None:
    """Classify kernels, attribute CPU ops and summarise steps of one trace.

    TRACE may also be a directory of per-rank traces: each is analysed in its own process and a
    per-rank table names the slowest rank.
    """
    from tracekit import execution_trace, report_store
    from tracekit import report as report_mod
    from tracekit.load import open_trace, parquet

    fmt = format_for_path(output, fmt)
    if os.path.isdir(trace_path):
        _report_directory(trace_path, fmt, output, step)
        return
    overrides = _parse_ceilings(ceilings)
    if no_et and et_path:
        raise UsageError("--execution-trace and --no-execution-trace contradict each other")
    # A Parquet input names the JSON it was converted from: its execution trace may lie beside it.
    kv = parquet.read_metadata(trace_path) if parquet.is_parquet(trace_path) else None
    original = parquet.stored_meta(trace_path, kv=kv).path if kv is not None else None
    et = None if no_et else execution_trace.locate(trace_path, original, explicit=et_path)
    result = None
    if kv is not None and step is None and overrides is None and not hta and (et is None or et.is_file()):
        # What convert stored, if it is still what this command would compute (same code, same ET).
        result = report_store.load_report(trace_path, report_store.cache_key(et), kv=kv)
    if result is None:
        trace = open_trace(trace_path, show_progress=True, workers=None)
        result = report_mod.build(trace, step=step, execution_trace=execution_trace.load(et) if et else None,
                                  ceilings_override=overrides, hta=hta)
    with open_output(output) as out:
        renderer_for(fmt).report(result, out, color=(output is None and sys.stdout.isatty()))


def _parse_ceilings(items: tuple[str, ...]) -> dict[str, float] | None:
    """``("hbm_gbps=4300", "bf16_tflops=790")`` -> ``{"hbm_gbps": 4300.0, "bf16_tflops": 790.0}``."""
    if not items:
        return None
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or number <= 0:
            raise UsageError(f"--ceiling {item!r}: expected KEY=POSITIVE_NUMBER, e.g. hbm_gbps=4300")
        out[key.strip()] = number
    return out


def _report_directory(directory: str, fmt: str, output: str | None, step: int | None) -> None:
    """``tracekit report DIR``: one summary per rank trace, computed in parallel processes."""
    from tracekit import ranks

    if step is not None:
        raise UsageError("--step applies to one trace, not to a directory of ranks")
    result = ranks.analyze(directory)
    with open_output(output) as out:
        renderer_for(fmt).ranks(result, out, color=(output is None and sys.stdout.isatty()))


@cli.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), required=True,
              help="Parquet file to write (e.g. trace.parquet).")
def convert(trace_path: str, output: str) -> None:
    """Save TRACE as one Parquet file that report/diff read without re-parsing JSON.

    The file stacks the trace's tables with a `table` column (ops, launches, gpu, …), so DuckDB or
    Spark can query it directly. It also stores TRACE's report, so `tracekit report FILE.parquet`
    (without --step/--ceiling/--hta) prints it at once instead of analysing again.
    """
    from tracekit import execution_trace, report_store
    from tracekit import report as report_mod
    from tracekit.load import open_trace

    trace = open_trace(trace_path, show_progress=True, workers=None)
    et = execution_trace.locate(trace_path, trace.meta.path)
    result = report_mod.build(trace, execution_trace=execution_trace.load(et) if et else None)
    report_store.save(trace, result, output, key=report_store.cache_key(et))
    click.echo(f"wrote {output} ({os.path.getsize(output):,} bytes, {trace.meta.event_count:,} events)",
               err=True)


def _register_capture() -> None:
    # capture/ imports torch lazily inside the command, so registering it costs nothing here.
    from capture.cli import capture_command

    cli.add_command(capture_command, name="capture")


_register_capture()
__import__("tracekit.cli_diff").cli_diff.register(cli)  # diff and check commands


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the click group behind the one error boundary."""
    boundary.run(cli, argv, "tracekit")
