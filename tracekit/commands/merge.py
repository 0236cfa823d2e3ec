"""``tracekit merge DIR -o merged.json.gz``: the ranks of a directory as one trace, on one clock."""

from __future__ import annotations

import os

import click

from tracekit.commands import options
from tracekit.errors import UsageError
from tracekit.output import refuse_inputs


@click.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=str))
@click.option("-o", "--output", type=options.FilePath("a file to write (.json or .json.gz)"), required=True,
              help="Trace to write: .json.gz (gzip) or .json.")
@options.max_inflated_size  # not --partial: a trace cut short cannot be copied whole
def merge(directory: str, output: str) -> None:
    """Write the rank traces of DIR as one trace for Perfetto or chrome://tracing.

    Each rank's processes get pids of their own, named "rank N" (its GPUs "rank N GPU d"); every
    rank's times are moved onto the lowest rank's clock by the offset estimated from the ends of
    their collectives; correlation, External id and flow ids are kept apart per rank
    (rank N's id i becomes N * 10^10 + i). The offsets are recorded in the file's `tracekitMerge`.
    """
    from tracekit import merge as merging
    from tracekit.ranks import find_traces
    from tracekit.render.text import duration

    merging.check_output(output)  # a wrong -o fails before the slow part
    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: merge reads a directory of rank traces, not a file"
                         if os.path.exists(directory) else f"{directory}: no such directory")
    refuse_inputs(output, find_traces(directory))
    done = merging.merge(directory, output, workers=None, show_progress=True)
    size = f"{os.path.getsize(output):,} bytes, " if os.path.isfile(output) else ""
    if done.matched:
        rank, far = max(done.offsets_ns.items(), key=lambda kv: (abs(kv[1]), -kv[0]))
        clock = (f"clocks aligned to rank {done.reference}'s, largest offset "
                 f"{'+' if far > 0 else ''}{duration(far)} (rank {rank})")
    else:
        clock = "no collective matched: clocks left as recorded"
    click.echo(f"wrote {output} ({size}{len(done.ranks)} ranks, {done.events:,} events; {clock})", err=True)
