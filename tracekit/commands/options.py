"""Options several commands share, declared once, and the small parsers behind them."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import click

from tracekit import progress
from tracekit.errors import GateFailed, UsageError
from tracekit.render import FORMATS, format_for_path, renderer_for
from tracekit.render.base import Renderer

output_format = click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                             help="Output format (default: from -o's extension, else term).")
output = click.option("-o", "--output", type=click.Path(path_type=str), default=None,
                      help="Write to this file instead of stdout (--format svg: a directory, DIR/NAME.md or "
                           "FILE.svg).")
#: The formats that write one document, not a set of pictures: what a command whose result has no
#: pictures (check, compare) writes.
DOCUMENT_FORMATS = tuple(name for name in FORMATS if not renderer_for(name).writes_files)


def pictures_only(fmt: str, command: str) -> str:
    """Why ``command`` cannot write format ``fmt`` (one that draws pictures)."""
    return (f"{fmt} draws the pictures of `tracekit report TRACE` and `tracekit diff` only; "
            f"`tracekit {command}` writes {', '.join(DOCUMENT_FORMATS)}")


class DocumentFormat(click.Choice):
    """``--format``'s choices for a command without pictures: :data:`DOCUMENT_FORMATS` (its
    ``--help`` offers only those). A picture format is still refused in click's usage error, but
    with why rather than only "not one of"."""

    def __init__(self) -> None:
        super().__init__(DOCUMENT_FORMATS)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in FORMATS and value not in self.choices:
            self.fail(pictures_only(value, ctx.info_name if ctx is not None else "this command"), param, ctx)
        return super().convert(value, param, ctx)


class FilePath(click.Path):
    """A path that must name a file, not a directory: a directory is refused in one line naming the
    parameter and what it expects (``--execution-trace: runs/ is a directory, expected an execution
    trace file``), where click's own refusal prints the command's usage text. Shown as ``FILE`` in
    ``--help``, as click's file-only path is."""

    def __init__(self, expected: str) -> None:
        super().__init__(dir_okay=True, path_type=str)
        self.name = "file"
        self.expected = expected

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if os.path.isdir(path):
            raise UsageError(f"{_parameter_name(param)}: {path} is a directory, expected {self.expected}")
        return path


def _parameter_name(param: click.Parameter | None) -> str:
    """How a message names ``param``: an option's long flag, an argument's metavar."""
    if isinstance(param, click.Option):
        return next((o for o in param.opts if o.startswith("--")), param.opts[0])
    if param is not None:
        return param.human_readable_name.removesuffix("...").removesuffix("…")
    return "a path"


#: ``--format`` and ``-o`` of a command without pictures (check, compare).
document_format = click.option("--format", "fmt", type=DocumentFormat(), default=None,
                               help="Output format (default: from -o's extension, else term).")
document_output = click.option("-o", "--output", type=click.Path(path_type=str), default=None,
                               help="Write to this file instead of stdout.")


def document_renderer(fmt: str | None, path: str | None, command: str) -> Renderer:
    """:func:`renderer` for a command without pictures: ``-o FILE.svg`` is refused before any work."""
    chosen = renderer(fmt, path)
    if chosen.writes_files:
        raise UsageError(f"-o {path}: {pictures_only(chosen.name, command)}")
    return chosen


class LazyHelp(click.Option):
    """An option whose help text is written only when ``--help`` shows it (``help_text()``): text
    made from tables whose modules import Polars, which a command must not import before it runs
    (:func:`tracekit.commands.keep_freed_memory`)."""

    def __init__(self, *args: Any, help_text: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help_text = help_text

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if self.help is None:
            self.help = self.help_text()
        return super().get_help_record(ctx)


unit = click.option("--unit", default=None, metavar="NAME",
                    help="Use each span of this name (e.g. mlp_fwd) as a step, instead of the ProfilerSteps "
                         "or, without them, the iteration units found automatically.")
no_execution_trace = click.option("--no-execution-trace", "no_et", is_flag=True,
                                  help="Ignore X.et.json.gz beside a trace; infer round trips from shapes and order.")


graph_companion = click.option(
    "--graph-companion", "graph_companion", type=click.Path(dir_okay=False, path_type=str), default=None,
    help="A trace of the CUDA-graph capture phase, or of the same code run eagerly: CUDA-graph replays "
         "are attributed to its ops (by graph node id or launch order, else by kernel names with a match score).")


def execution_trace_choice(explicit: str | None, ignore: bool) -> str | None:
    """``Session``'s ``execution_trace`` argument from ``--execution-trace`` / ``--no-execution-trace``."""
    if explicit and ignore:
        raise UsageError("--execution-trace and --no-execution-trace contradict each other")
    return None if ignore else (explicit or "auto")


def renderer(fmt: str | None, path: str | None) -> Renderer:
    """The renderer for ``--format`` or, without it, for the ``-o`` file's extension."""
    return renderer_for(format_for_path(path, fmt))


def write_result(output: str | None, stream: Callable[[TextIO], None], *,
                 target: tuple[str, str | None] | None = None, inputs: Sequence[str | None] = (),
                 files: Callable[[str | None], dict[str, str]] | None = None) -> None:
    """Write a result: ``stream(out)`` to ``output`` (stdout when None) or, for a format that writes
    files, ``files(index)`` into ``target``'s directory (``target``: the renderer's
    :meth:`~tracekit.render.base.Renderer.files_target`, asked before the slow part; no file that
    is one of ``inputs`` is written). A progress bar shows while it renders
    (:mod:`tracekit.progress`: a terminal on stderr only; on stdout, until the first byte)."""
    from tracekit.output import open_output, stdout_writes, write_files

    if target is not None and files is not None:
        directory, index = target
        with progress.phase(f"writing {directory}"):
            written = files(index)
            write_files(directory, written, inputs)
        click.echo(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} into {directory}: "
                   + ", ".join(sorted(written)), err=True)
        return
    to_file = output is not None and output != "-"
    with progress.phase(f"writing {os.path.basename(output) if to_file else 'the output'}") as bar, \
            open_output(output) as out:
        if to_file:
            stream(out)
        else:
            with stdout_writes():  # a full or closed stdout: one line, exit 2
                # On stdout the output may share the bar's terminal: its first byte ends the bar.
                stream(bar.guard(out))
    wrote(output)


def wrote(output: str | None) -> None:
    """The one line on stderr that says a file was written (``wrote out.md (12,345 bytes)``); none for
    stdout."""
    if output is None or output == "-":
        return
    size = f" ({os.path.getsize(output):,} bytes)" if os.path.isfile(output) else ""
    click.echo(f"wrote {output}{size}", err=True)


def write_then_gate(output: str | None, write: Callable[[TextIO], None], results: Sequence[Any],
                    name: Callable[[Any], str] = lambda r: r.gate.text, *,
                    target: tuple[str, str | None] | None = None, inputs: Sequence[str | None] = (),
                    files: Callable[[str | None], dict[str, str]] | None = None) -> None:
    """Write the whole output (``write(out)``, or ``files`` into ``target``: :func:`write_result`), then
    raise :class:`GateFailed` (exit 1) naming each ``--fail-if`` result that failed (``name``)."""
    write_result(output, write, target=target, inputs=inputs, files=files)
    failed = [r for r in results if r.failed]
    if failed:
        raise GateFailed(f"{len(failed)} of {len(results)} gates failed: " + ", ".join(name(r) for r in failed))


def colour(path: str | None, stream: TextIO | None = None) -> bool:
    """Colour only when writing to a terminal."""
    return path is None and (stream or sys.stdout).isatty()


def parse_ceilings(items: tuple[str, ...]) -> dict[str, float] | None:
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
        if not sep or not (number > 0 and math.isfinite(number)):
            raise UsageError(f"--ceiling {item!r}: expected KEY=POSITIVE_NUMBER, e.g. hbm_gbps=4300")
        out[key.strip()] = number
    return out


def _set_partial(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from tracekit.load import read_options

        read_options.configure(partial=True)


def _set_max_inflated(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        from tracekit.load import read_options

        try:
            read_options.configure(max_inflated_size=value)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None


def max_inflated_size(command):
    """``--max-inflated-size``: the cap on a compressed input's JSON (see :mod:`tracekit.load.read_options`)."""
    return click.option(
        "--max-inflated-size", metavar="SIZE", default=None, expose_value=False, callback=_set_max_inflated,
        help="Refuse a compressed trace (or a stream) whose JSON passes SIZE bytes, or a Parquet file whose "
             "data would (e.g. 8G, 500M; "
             "'none': no cap). Default: a quarter of the free memory.")(command)


def reading(command):
    """``--partial`` and ``--max-inflated-size``: how inputs are read (set for this process and the
    workers it starts, see :mod:`tracekit.load.read_options`)."""
    command = max_inflated_size(command)
    return click.option(
        "--partial", is_flag=True, expose_value=False, callback=_set_partial,
        help="Report the events of a truncated or corrupt trace up to the damage (the output says it "
             "is partial) instead of refusing it.")(command)
