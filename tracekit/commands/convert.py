"""``tracekit convert TRACE -o FILE.parquet``: the trace's frames and its report in one Parquet file."""

from __future__ import annotations

import os

import click

from tracekit.commands import options
from tracekit.output import refuse_inputs


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(path_type=str))
@click.option("-o", "--output", type=options.FilePath("a file to write (.parquet)"), required=True,
              help="Parquet file to write (e.g. trace.parquet).")
@options.reading
def convert(trace_path: str, output: str) -> None:
    """Save TRACE as one Parquet file that report/diff read without re-parsing JSON.

    The file stacks the trace's tables with a `table` column (ops, launches, gpu, …), so DuckDB or
    Spark can query it directly. It also stores TRACE's report, so `tracekit report FILE.parquet`
    (without --step/--ceiling/--hta) prints it at once instead of analysing again.
    """
    from tracekit.session import Session

    session = Session(trace_path, workers=None, show_progress=True)
    refuse_inputs(output, [trace_path, session.execution_trace_path])
    session.save(output)
    size = f"{os.path.getsize(output):,} bytes, " if os.path.isfile(output) else ""
    click.echo(f"wrote {output} ({size}{session.meta.event_count:,} events)", err=True)
