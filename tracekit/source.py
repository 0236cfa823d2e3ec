"""Open any input tracekit accepts: a Kineto JSON/gzip trace or a Parquet file from ``convert``.

Contract: :func:`open_trace` detects the format by magic bytes and returns a :class:`Trace`; with
``show_progress`` a rich progress bar goes to stderr, only when stderr is a terminal and only once
the load has taken over a second (quick loads stay silent).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from tracekit.load import load
from tracekit.parquet_cache import is_parquet, load_parquet
from tracekit.trace import Trace

PROGRESS_AFTER_S = 1.0


def open_trace(path: str | os.PathLike[str], *, show_progress: bool = False,
               workers: int | None = 1) -> Trace:
    """Load ``path`` (Kineto JSON, gzip, or tracekit Parquet); ``workers`` as in
    :func:`tracekit.load.load` (the commands pass None: one process per core for a big trace)."""
    if is_parquet(path):
        return load_parquet(path)
    if not (show_progress and sys.stderr.isatty()):
        return load(path, workers=workers)
    callback, finish = _progress_bar(os.path.basename(os.fspath(path)))
    try:
        return load(path, progress=callback, workers=workers)
    finally:
        finish()


def _progress_bar(label: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A callback that starts a rich progress bar on stderr once loading passes one second."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    started = time.monotonic()
    state: dict[str, object] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if time.monotonic() - started < PROGRESS_AFTER_S:
                return
            bar = Progress(TextColumn(f"loading {label}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                           TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"] = bar
            state["task"] = bar.add_task("load", total=total)
        bar = state["bar"]
        bar.update(state["task"], completed=done, total=total)  # type: ignore[attr-defined]

    def finish() -> None:
        if "bar" in state:
            state["bar"].stop()  # type: ignore[attr-defined]

    return update, finish
