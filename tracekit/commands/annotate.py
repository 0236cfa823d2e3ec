"""``tracekit annotate TRACE -o annotated.json.gz``: the trace with tracekit's analysis on tracks of its own."""

from __future__ import annotations

import gc
import os

import click

from tracekit.commands import options
from tracekit.errors import UsageError
from tracekit.output import refuse_inputs


@click.command()
@click.argument("trace_path", metavar="TRACE", type=options.FilePath("a trace file"))
@click.option("-o", "--output", type=options.FilePath("a file to write (.json or .json.gz)"), required=True,
              help="Trace to write: .json.gz (gzip) or .json.")
@options.unit
@click.option("--execution-trace", "et_path", type=options.FilePath("an execution trace file"), default=None,
              help="PyTorch execution trace for exact round-trip links (default: X.et.json.gz beside X.json.gz).")
@options.no_execution_trace
@options.max_inflated_size  # not --partial: a trace cut short cannot be copied whole
def annotate(trace_path: str, output: str, unit: str | None, et_path: str | None, no_et: bool) -> None:
    """Write TRACE again with tracekit's analysis on tracks of its own, for Perfetto or chrome://tracing.

    Every original event is kept as it was; the added tracks (process "tracekit") carry each step's
    verdict (overhead-bound / compute-bound), the GPU's idle gaps with their cause, round-trip
    arrows from producer to consumer kernel with their bytes, the findings as instant events with
    their evidence, and compile/recompile spans. `tracekit report` on the output gives the report
    of TRACE: the added events are set aside when it is read.
    """
    from tracekit.render import ANNOTATED_TRACE as annotated
    from tracekit.session import Session

    annotated.check_output(output)  # a wrong -o fails before the slow part
    session = Session(trace_path, execution_trace=options.execution_trace_choice(et_path, no_et),
                      workers=None, show_progress=True)
    source = session.source
    if source.is_stream:
        raise UsageError(f"{trace_path}: annotate reads the trace twice (to analyse it, then to copy it): "
                         "pass a file, not a stream")
    if session.is_parquet:
        raise UsageError(f"{trace_path}: a Parquet file holds no trace events to annotate: "
                         "pass the JSON trace it was converted from")
    refuse_inputs(output, [trace_path, session.execution_trace_path])
    if session.meta.partial:
        raise UsageError(f"{trace_path}: the trace is cut short ({session.meta.partial}): "
                         "annotate copies a whole trace")
    added = annotated.events(session.report(unit=unit), session.trace)
    event_count = session.meta.event_count
    del session
    gc.collect()  # the analysis' frames go before the copy starts
    annotated.write(added, source, output)
    kinds = ", ".join(f"{n:,} {kind.replace('_', ' ').removesuffix('s') if n == 1 else kind.replace('_', ' ')}"
                      for kind, n in added.counts.items() if n)
    size = f"{os.path.getsize(output):,} bytes, " if os.path.isfile(output) else ""
    click.echo(f"wrote {output} ({size}{event_count:,} events + {len(added.events):,} added: {kinds})", err=True)
