"""The ``tracekit`` command line: a thin click group. Each command is load -> analyze -> render.

All user-caused errors pass through :func:`main`'s single error boundary, which prints one line on
stderr and exits with the error's code (2 = bad input or usage, 1 = a gate failed).
"""

from __future__ import annotations

import sys

import click

from tracekit import __version__
from tracekit.errors import TracekitError


@click.group()
@click.version_option(__version__, prog_name="tracekit")
def cli() -> None:
    """Turn PyTorch profiler (Kineto) traces into answers."""


def _register_capture() -> None:
    # capture/ imports torch lazily inside the command, so registering it costs nothing here.
    from capture.cli import capture_command

    cli.add_command(capture_command, name="capture")


_register_capture()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the click group behind the one error boundary."""
    try:
        cli.main(args=argv, prog_name="tracekit", standalone_mode=False)
    except TracekitError as err:
        click.echo(f"tracekit: error: {err}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(2 if err.exit_code == 2 else err.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    sys.exit(0)
