"""``tracekit check TRACE --expect FILE.toml``: "guess first, then look" as a CI test.

A broken expectation raises :class:`~tracekit.errors.GateFailed` (exit 1) after the output is written.
"""

from __future__ import annotations

import click

from tracekit.commands import options
from tracekit.errors import GateFailed
from tracekit.output import refuse_inputs


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=True, path_type=str))
@click.option("--expect", "expect_path", required=True, metavar="FILE.toml",
              type=options.FilePath("an expectations file (TOML)"), help="The expectations to test.")
@options.unit
@options.no_execution_trace
@options.document_format
@options.document_output
@options.reading
def check(trace_path: str, expect_path: str, unit: str | None, no_et: bool, fmt: str | None,
          output: str | None) -> None:
    """Test TRACE against the expectations in FILE.toml; exit 1 if any is broken."""
    from tracekit.session import Session, read_expectations

    renderer = options.document_renderer(fmt, output, "check")
    session = Session(trace_path, execution_trace=options.execution_trace_choice(None, no_et), workers=None,
                      show_progress=True)
    refuse_inputs(output, [trace_path, expect_path, session.execution_trace_path])
    expectations = read_expectations(expect_path)
    result = session.check(expectations, unit=unit)
    options.write_result(output, lambda out: renderer.render(result, out, color=options.colour(output)))
    broken = [i for i in result.items if not i.met]
    if broken:
        from tracekit.render.views.check import expected_text

        raise GateFailed(f"{len(broken)} of {len(result.items)} expectations broken: "
                         + ", ".join(f"{i.key} {expected_text(i)}" for i in broken))
