"""The ``tracekit`` command line: one module per command, each a few lines (open → analyse → render).

Each module ``tracekit/commands/NAME.py`` defines the click command ``NAME`` and is registered by
being there (:func:`_commands`); :mod:`~tracekit.commands.options` holds what commands share.

Contract: :func:`main` runs the click group behind the one error boundary
(:mod:`tracekit.boundary`): a :class:`~tracekit.errors.TracekitError` becomes one line on stderr
and its exit code (2 = bad input or usage, 1 = a gate or expectation failed). ``capture`` is
registered lazily: ``tracekit --help`` and every other command import nothing of ``capture/``
(which knows the study's variants and, inside its command, torch).
"""

from __future__ import annotations

import importlib
import os
import pkgutil

import click

from tracekit import __version__, boundary

#: Commands imported only when run: name -> (module, attribute, the help line ``--help`` lists).
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "capture": ("capture.cli", "capture_command",
                "Record PyTorch profiler traces of known workloads (matmul_add, linear, mlp, train)."),
}


class _Group(click.Group):
    """A click group that lists :data:`LAZY_COMMANDS` without importing them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS and name not in self.commands:
            module, attribute, _ = LAZY_COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name=name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS and name not in self.commands:
                text = click.Command(name, help=LAZY_COMMANDS[name][2]).get_short_help_str(limit)
            else:
                text = self.commands[name].get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        os.environ[boundary.DEBUG_ENV] = "1"


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug,
              help="Print the traceback of an internal error (also: TRACEKIT_DEBUG=1).")
def cli() -> None:
    """Turn PyTorch profiler (Kineto) traces into answers."""


#: Modules of this package that hold no command.
NOT_COMMANDS = ("options",)


def _commands() -> list[click.Command]:
    """Every command module's command: module ``tracekit.commands.NAME`` defines the click command
    ``NAME`` (a new command is one new module here; nothing else registers it)."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name not in NOT_COMMANDS:
            found.append(getattr(importlib.import_module(f"{__name__}.{module.name}"), module.name))
    return found


for _command in _commands():
    cli.add_command(_command)


#: Polars' allocator (jemalloc) reads its settings from this variable when Polars is imported.
ALLOCATOR_ENV = "_RJEM_MALLOC_CONF"
#: What the command asks of it: keep freed memory 5 s before giving it back to the OS (Polars'
#: own default: 0.5 s, then 1 s more before it is gone).
KEEP_FREED_MEMORY = "dirty_decay_ms:5000,muzzy_decay_ms:5000"
#: What Polars writes into :data:`ALLOCATOR_ENV` when imported without a setting of the user's: found
#: in the environment, a parent process that imported Polars left it there, not the user.
POLARS_DEFAULT = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def keep_freed_memory() -> None:
    """Make the command's processes (this one and the workers it spawns, which inherit the
    environment) reuse the memory Polars frees instead of giving it back within a second.

    An analysis frees its temporaries and the next one allocates as much again; given back, those
    pages are fresh when touched again, and a fresh page costs a virtual machine like the
    benchmark's 3-4 us to fault in. A report of the 1 GB benchmark trace, 6 alternating runs:
    median 7.70 -> 7.41 s, 13 % fewer page faults, 0.45 s less system CPU, peak RSS 2.0 -> 2.2-2.3
    GB; a diff of two such traces (3 alternating runs): median 14.77 -> 13.53 s. Only the
    command does this — a notebook's process keeps Polars' defaults — and never over a setting of
    the user's own (Polars' default, inherited from a parent process that imported Polars, is not
    one). Must run before Polars is imported (``tracekit.commands`` imports no Polars).
    """
    if os.environ.get(ALLOCATOR_ENV, "") in ("", POLARS_DEFAULT):
        os.environ[ALLOCATOR_ENV] = KEEP_FREED_MEMORY


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``tracekit`` and ``python -m tracekit``."""
    keep_freed_memory()
    boundary.run(cli, argv, "tracekit")
