"""The one error boundary every entry point runs behind (``tracekit`` and ``python -m capture``).

Contract: :func:`run` invokes a click command with ``argv`` and always ends the process with
``sys.exit``, so that CI can tell every outcome apart:

- 0 success;
- 1 a gate or expectation failed (:class:`~tracekit.errors.GateFailed`), and nothing else;
- 2 bad input or usage (any other :class:`TracekitError`, click's usage errors, running out of
  memory on an input too big for the machine, a native library's panic), and a write or read the
  machine refused (any ``OSError``: a full file system, a file-size limit, a closed or full
  standard output), one line on stderr;
- 3 an internal error: a bug in tracekit, never the user's fault. One line names the exception
  and asks for a report; the traceback is printed only with ``TRACEKIT_DEBUG=1`` (or ``--debug``);
- 130 Ctrl-C; 141 the reader of stdout went away (a broken pipe, as ``| head`` does).

No traceback reaches the user for anything they caused. Error lines name paths and values the user
gave, so they pass through :func:`tracekit.render.text.for_display` like every name tracekit prints:
a file name holding an escape sequence cannot retitle or clear the terminal. Imports only click, the
standard library, that one display helper and :mod:`tracekit.output` (standard library only), so
the capture entry point stays light.

A process started with standard output closed (``>&-``) gets a stand-in ``sys.stdout`` that refuses
every write as a closed descriptor would (Python leaves ``None``, which every writer would trip over
as a bug), and descriptor 1 is held on ``/dev/null`` meanwhile so that no file the command opens
takes its number. ``SIGXFSZ`` is ignored, as the interpreter already does, so that a file-size limit
makes a write fail (``EFBIG``) instead of killing the process.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

import click

from tracekit.errors import ReaderGone, TracekitError, is_native_panic, os_reason
from tracekit.output import ClosedStdout, discard_stdout, stdout_writes
from tracekit.render.text import for_display

#: Exit status of an internal error (a bug), distinct from a failed gate (1) and bad input (2).
INTERNAL_ERROR = 3
#: Exit status when stdout's reader went away (128 + SIGPIPE, as a shell reports it).
BROKEN_PIPE = 141
#: Set to 1 to see the traceback of an internal error.
DEBUG_ENV = "TRACEKIT_DEBUG"
#: Where the one line of an internal error asks the user to go.
REPORT_TO = ("this is a bug in tracekit: please open an issue in the tracekit repository's issue "
             "tracker with the command line and, if you can, the input")


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def run(command: click.Command, argv: list[str] | None, prog_name: str) -> None:
    """Run ``command`` and exit with the status described in the module docstring. The options a
    command passes to its worker processes through ``TRACEKIT_*`` environment variables are undone
    afterwards, so a command run in-process (a test, a notebook) leaves the environment as it was."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("TRACEKIT_")}
    stdout = sys.stdout
    _ignore_file_size_signal()
    if stdout is None:
        _hold_descriptor(1)
        sys.stdout = ClosedStdout()
    try:
        _run(command, argv, prog_name)
    finally:
        sys.stdout = stdout
        for key in [k for k in os.environ if k.startswith("TRACEKIT_")]:
            if key not in saved:
                del os.environ[key]
        os.environ.update(saved)


def _run(command: click.Command, argv: list[str] | None, prog_name: str) -> None:
    try:
        command.main(args=argv, prog_name=prog_name, standalone_mode=False)
        # Flushed here, not at exit: a reader that went away then meets the handler below (141)
        # instead of the interpreter's exit-time flush, which drops the error and exits 0; a full
        # file system behind stdout is one line and exit 2.
        with stdout_writes():
            sys.stdout.flush()
    except TracekitError as err:
        click.echo(f"tracekit: error: {for_display(err)}", err=True)
        sys.exit(err.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("tracekit: aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.message = for_display(err.message)
        err.show()
        sys.exit(err.exit_code)
    except (BrokenPipeError, ReaderGone):
        discard_stdout()
        sys.exit(BROKEN_PIPE)
    except OSError as err:  # a refusal not met where it happened: still the machine's, not a bug
        discard_stdout()
        where = f"{err.filename}: " if err.filename else ""
        click.echo(f"tracekit: error: {for_display(where + os_reason(err))}", err=True)
        sys.exit(2)
    except MemoryError:
        click.echo("tracekit: error: out of memory: the input is too large for this machine's "
                   "free memory", err=True)
        sys.exit(2)
    except SystemExit:
        raise
    except BaseException as err:  # noqa: BLE001 - the boundary: everything else is a bug
        panic = is_native_panic(err)
        if not panic and not isinstance(err, Exception):
            raise  # GeneratorExit and the like are the interpreter's, not ours to word
        if panic:
            if debugging():
                traceback.print_exc()
            detail = for_display((str(err).splitlines() or [""])[0], limit=200)
            click.echo(f"tracekit: error: a native library gave up on this input (panic: {detail or 'no message'}); "
                       "the input is likely damaged or hostile", err=True)
            sys.exit(2)
        if debugging():
            traceback.print_exc()
        name = type(err).__name__
        detail = for_display((str(err).splitlines() or [""])[0], limit=200)
        hint = "" if debugging() else f" (run with {DEBUG_ENV}=1 for the traceback)"
        click.echo(f"tracekit: internal error: {name}{': ' + detail if detail else ''} — "
                   f"{REPORT_TO}{hint}", err=True)
        sys.exit(INTERNAL_ERROR)
    sys.exit(0)




def _hold_descriptor(fd: int) -> None:
    """Open ``/dev/null`` at ``fd`` when ``fd`` is closed, so that no file opened later gets it."""
    try:
        os.fstat(fd)
        return
    except OSError:
        pass
    try:
        held = os.open(os.devnull, os.O_WRONLY)
        if held != fd:
            os.dup2(held, fd)
            os.close(held)
    except OSError:
        pass


def _ignore_file_size_signal() -> None:
    """Ignore ``SIGXFSZ`` (a write past ``ulimit -f``), whose default action kills the process
    without a word: ignored, the write raises ``EFBIG``, which is worded like any refused write."""
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    except (AttributeError, ValueError, OSError):
        pass  # no such signal on this platform, or not the main thread (a notebook's worker)
