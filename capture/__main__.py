"""``python -m capture ...``: the capture command without the rest of the tracekit CLI.

Runs on a GPU host that has torch but not the analyzer's dependencies (polars, msgspec). Same flags,
same error boundary semantics as ``tracekit capture``.
"""

from __future__ import annotations

import sys

import click

from capture.cli import capture_command
from tracekit.errors import TracekitError


def main(argv: list[str] | None = None) -> None:
    try:
        capture_command.main(args=argv, prog_name="python -m capture", standalone_mode=False)
    except TracekitError as err:
        click.echo(f"tracekit: error: {err}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(2 if err.exit_code == 2 else err.exit_code)
    sys.exit(0)


if __name__ == "__main__":
    main()
