"""Progress on stderr for a command's long phases: reading a trace, analysing it, writing the output.

Contract: :func:`phase` is a context manager for one phase of a command. While it runs, a transient
rich bar on stderr says what runs (``analysing x.json.gz``), pulses — or, once the phase reports
its share done (:meth:`Phase.update`), fills with a percentage — and shows the elapsed time. It
shows only when stderr is a terminal (nothing in a pipe, a file or a CI log) and only once the
phase has run :data:`SHOW_AFTER_S` seconds (a quick phase stays silent); it is gone when the phase
ends. One style for every phase: the load bar (:func:`tracekit.load.open_trace`) is one of them.

The output of a command may go to the terminal the bar is drawn on: :meth:`Phase.guard` wraps that
stream so that its first write ends the bar, and the output never interleaves with it.

rich is imported only when a bar is drawn: a command in a pipe pays nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: A phase that takes longer than this (seconds) shows its bar. ``TRACEKIT_PROGRESS_AFTER_S``
#: overrides it (``0``: at once — what the tests of the bars use).
SHOW_AFTER_S = 1.0
AFTER_ENV = "TRACEKIT_PROGRESS_AFTER_S"
#: The longest label drawn (a bar needs the rest of the line).
LABEL_LIMIT = 80


def _after() -> float:
    try:
        return max(0.0, float(os.environ.get(AFTER_ENV, SHOW_AFTER_S)))
    except ValueError:
        return SHOW_AFTER_S


class Phase:
    """One phase's bar (see the module docstring); a phase that is not shown does nothing."""

    def __init__(self, label: str, shown: bool) -> None:
        # A file name may hold an escape sequence or rich markup: neither may reach the terminal.
        self.label = "".join(c if c.isprintable() else "\ufffd" for c in label)
        if len(self.label) > LABEL_LIMIT:
            self.label = self.label[:LABEL_LIMIT - 1] + "…"
        self.shown = shown
        self._lock = threading.Lock()
        self._done: tuple[int, int | None] = (0, None)
        self._bar: Any = None
        self._task: Any = None
        self._ended = False
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        if not self.shown:
            return
        delay = _after()
        if delay == 0:
            self._draw()
            return
        # A timer, not the first update: a phase that reports nothing (an analysis) shows too.
        self._timer = threading.Timer(delay, self._draw)
        self._timer.daemon = True
        self._timer.start()

    def update(self, done: int, total: int | None) -> None:
        """``done`` of ``total`` (units the phase chooses: events, files, traces); the bar fills."""
        with self._lock:
            self._done = (done, total)
            if self._bar is not None:
                self._bar.update(self._task, completed=done, total=total)

    def end(self) -> None:
        """Take the bar away (at once; also when it was never drawn)."""
        with self._lock:
            self._ended = True
            if self._timer is not None:
                self._timer.cancel()
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    def guard(self, stream: TextIO) -> TextIO:
        """``stream``, whose first write ends the bar (for output going to the bar's terminal)."""
        return _EndsOnWrite(stream, self) if self.shown else stream

    def _draw(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class Percent(ProgressColumn):
            """The share done, once the phase knows its total; nothing while it pulses."""

            def render(self, task: Any) -> Text:
                return Text("" if task.total is None else f"{task.percentage:>3.0f}%")

        with self._lock:
            if self._ended or self._bar is not None:
                return
            # No redirection of sys.stdout/stderr: the command's output stream stays the one it holds.
            bar = Progress(TextColumn(self.label.replace("{", "{{").replace("}", "}}"), markup=False), BarColumn(), Percent(), TimeElapsedColumn(),
                           console=Console(stderr=True), transient=True, redirect_stdout=False,
                           redirect_stderr=False)
            bar.start()
            done, total = self._done
            self._task = bar.add_task(self.label, total=total, completed=done)
            self._bar = bar


class _EndsOnWrite:
    """A text stream that ends a phase's bar before its first write (:meth:`Phase.guard`)."""

    def __init__(self, stream: TextIO, phase: Phase) -> None:
        self._stream = stream
        self._phase = phase

    def write(self, text: str) -> int:
        if self._phase is not None:
            self._phase.end()
            self._phase = None  # type: ignore[assignment]
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def shown() -> bool:
    """Whether bars are drawn: stderr is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def phase(label: str, *, enabled: bool = True) -> Iterator[Phase]:
    """A bar for the phase the ``with`` block runs, labelled ``label`` (module docstring);
    ``enabled=False`` (a caller that wants no progress, e.g. the Python API) draws nothing."""
    current = Phase(label, enabled and shown())
    current.start()
    try:
        yield current
    finally:
        current.end()


__all__ = ["AFTER_ENV", "SHOW_AFTER_S", "Phase", "phase", "shown"]
