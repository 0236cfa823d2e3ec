"""The one error boundary every entry point runs behind (``tracekit`` and ``python -m capture``).

Contract: :func:`run` invokes a click command with ``argv`` and always ends the process with
``sys.exit``: 0 on success, the error's ``exit_code`` for a :class:`TracekitError` (2 = bad input
or usage, 1 = a gate or expectation failed) with its one line on stderr, click's own code for
usage errors, 130 on Ctrl-C. No traceback reaches the user for anything they caused.
Imports only click and the standard library, so the capture entry point stays light.
"""

from __future__ import annotations

import sys

import click

from tracekit.errors import TracekitError


def run(command: click.Command, argv: list[str] | None, prog_name: str) -> None:
    """Run ``command`` and exit with the status described in the module docstring."""
    try:
        command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except TracekitError as err:
        click.echo(f"tracekit: error: {err}", err=True)
        sys.exit(err.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    sys.exit(0)
