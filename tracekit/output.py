"""Writing output files safely: a temp file beside the target, renamed into place on success.

A run that fails half-way leaves the user's existing file untouched and no partial file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO

from tracekit.errors import UsageError


class AtomicOutput:
    """Context manager yielding a text stream; the file appears at ``path`` only on clean exit."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._tmp: str | None = None
        self._stream: TextIO | None = None

    def __enter__(self) -> TextIO:
        directory = self.path.parent if str(self.path.parent) else Path(".")
        if not directory.is_dir():
            raise UsageError(f"{self.path}: output directory {directory} does not exist")
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError as err:
            raise UsageError(f"{self.path}: cannot write ({err.strerror or err})") from None
        self._stream = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        return self._stream

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._stream is not None and self._tmp is not None
        self._stream.close()
        if exc_type is None:
            os.replace(self._tmp, self.path)
        else:
            os.unlink(self._tmp)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temp path beside ``path`` to write to; rename it into place on clean exit."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"{target}: output directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
