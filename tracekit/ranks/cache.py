"""Where rank summaries are kept between runs, so a grown directory re-reads only what changed.

Contract: a :class:`Cache` is a folder of summary files (:mod:`tracekit.ranks.summary`), one per
trace. An entry is named ``<path key>-<state key>.parquet``: the path key hashes the trace's
resolved path; the state key hashes its size, its modification time (ns), the summary
:data:`~tracekit.ranks.summary.FORMAT` and tracekit's version (a fixed analysis changes a summary
without changing its layout). :meth:`Cache.get` returns an entry's bytes only when both keys match
the file as it is now; :meth:`Cache.put` writes one atomically (a temporary file renamed into
place: a reader never sees half an entry) and removes that trace's older entries, so a folder
shared by several directories holds one entry per trace, never a pile.

:func:`default_for` is the folder ``report DIR`` uses unless told: the user's cache folder
(``$TRACEKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracekit/rank-summaries``, else
``~/.cache/tracekit/rank-summaries``), never the directory of traces — a user's folder of traces is
not written into (it may be read-only, shared, or under version control) — or None when that folder
cannot be made (then nothing is kept). Entries are keyed by the trace's resolved path, so one folder
serves every directory. A trace rewritten within one clock tick at its old size keeps its stale
entry; file systems of this century stamp nanoseconds.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from tracekit import __version__
from tracekit.errors import UsageError
from tracekit.ranks.summary import FORMAT

#: The environment variable naming the cache folder (tests point it at a temporary folder).
ENV = "TRACEKIT_CACHE_DIR"


def default_folder() -> Path:
    """The user's cache folder for rank summaries (module docstring)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracekit" / "rank-summaries"


def _hash(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:20]


class Cache:
    """A folder of summaries (module docstring); ``folder`` is made on the first :meth:`put`."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def _names(self, trace: str | os.PathLike[str]) -> tuple[str, str]:
        """``(the trace's path key, its entry's file name)`` as the file is now."""
        path = Path(trace).resolve()
        stat = path.stat()
        where = _hash(path)
        return where, f"{where}-{_hash(stat.st_size, stat.st_mtime_ns, FORMAT, __version__)}.parquet"

    def get(self, trace: str | os.PathLike[str]) -> bytes | None:
        """The summary of ``trace`` as it is now, or None (never summarised, changed since, or gone)."""
        try:
            return (self.folder / self._names(trace)[1]).read_bytes()
        except OSError:
            return None

    def put(self, trace: str | os.PathLike[str], summary: bytes) -> None:
        """Keep ``summary`` as the entry of ``trace``; its older entries go."""
        where, name = self._names(trace)
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(summary)
            os.replace(temporary, self.folder / name)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        for old in self.folder.glob(f"{where}-*.parquet"):
            if old.name != name:
                old.unlink(missing_ok=True)


def default_for(directory: str | os.PathLike[str]) -> Cache | None:
    """The user's cache folder (:func:`default_folder`) when it exists or can be made and written,
    else None; ``directory`` is not written into."""
    folder = default_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return Cache(folder) if os.access(folder, os.W_OK) else None


def chosen(folder: str | os.PathLike[str]) -> Cache:
    """The cache a user named (``--cache DIR``): made now, so a folder that cannot be written is
    one line and exit 2 before any trace is read.

    Raises
    ------
    tracekit.errors.UsageError
        When ``folder`` cannot be made or written.
    """
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--cache {folder}: cannot make this folder ({err.strerror or err})") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"--cache {folder}: this folder cannot be written")
    return Cache(path)
