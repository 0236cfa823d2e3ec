"""Writing output files safely: a temp file beside the target, renamed into place on success.

A run that fails half-way leaves the user's existing file untouched and no partial file behind.
One mechanism (:func:`atomic_path`) serves every writer: reports, diffs, Parquet caches and the
capture's traces and manifest.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TextIO

from tracekit.errors import UsageError

# mkstemp creates files 0600; finished files get the permissions a plain open() would give them.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, make_parents: bool = False) -> Iterator[Path]:
    """Yield a temp path beside ``path`` to write to; rename it into place on clean exit.

    The parent directory must exist unless ``make_parents``; a missing or unwritable directory is a
    :class:`UsageError` (one line, exit 2). On any exception the temp file is removed.
    """
    target = Path(path)
    directory = target.parent
    if make_parents:
        directory.mkdir(parents=True, exist_ok=True)
    elif not directory.is_dir():
        raise UsageError(f"{target}: output directory {directory} does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise UsageError(f"{target}: cannot write ({err.strerror or err})") from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A UTF-8 text stream whose file appears at ``path`` only when the block succeeds."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as stream:
        yield stream


def open_output(path: str | None) -> AbstractContextManager[TextIO]:
    """stdout, or ``path`` written atomically (see :func:`atomic_text`)."""
    return atomic_text(path) if path else nullcontext(sys.stdout)
