"""Writing output files safely: a regular file is replaced atomically, anything else written through,
and no input is ever an output; a format writing several files writes each so (:func:`write_files`).

Contract: :func:`atomic_path` yields the path a writer writes to. For a regular file (or a new
one) it is a temp file beside the target, renamed into place on success: a run that fails half-way
leaves the user's existing file untouched and no partial file behind; the replaced file keeps its
permissions (and owner, where this process may set it); a symbolic link is followed, so the link's
target is written and the link kept. Anything that is not a regular file — a device such as
``/dev/null``, a named pipe, ``-`` (standard output), a path under ``/dev`` or ``/proc`` such as
``/dev/stdout`` — is written through, never replaced (a rename would swap a device node for a
file). One mechanism serves every writer: reports, diffs, Parquet caches and the capture's traces
and manifest. :func:`refuse_inputs` stops a command before anything is written when its output is
one of its inputs — the same file by device and inode, through symbolic and hard links.

A write the machine refuses — a full file system, a file-size limit (``ulimit -f``, which raises
``EFBIG`` since the process ignores ``SIGXFSZ``), a quota, ``/dev/full`` — is a
:class:`~tracekit.errors.WriteError` naming the output (one line, exit 2), and the atomic write's
promise holds: the old file is untouched and no temp file is left. :func:`stdout_writes` does the
same for standard output (full, or closed), dropping what is still buffered for it so that the
interpreter's last flush cannot fail a second time at exit.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TextIO

from tracekit.errors import ReaderGone, UsageError, WriteError, os_reason

# mkstemp creates files 0600; new files get the permissions a plain open() would give them.
_UMASK = os.umask(0o022)
os.umask(_UMASK)

#: Paths written through even when they resolve to a regular file (``/dev/stdout`` redirected to
#: one: the shell holds that file open, and replacing it would leave the shell's copy behind).
_SPECIAL_ROOTS = ("/dev/", "/proc/")


def _writes_through(path: str) -> bool:
    """True when ``path`` is standard output or not a regular file (see the module docstring)."""
    if path == "-" or os.path.abspath(path).startswith(_SPECIAL_ROOTS):
        return True
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as err:
        raise UsageError(f"{path}: cannot write ({err.strerror or err})") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path}: is a directory, not an output file")
    return not stat.S_ISREG(mode)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, make_parents: bool = False) -> Iterator[Path]:
    """Yield the path to write ``path`` through: a temp file renamed into place on clean exit for a
    regular (or new) file, the path itself for anything else (see the module docstring).

    The parent directory must exist unless ``make_parents``; a missing or unwritable directory is a
    :class:`UsageError` (one line, exit 2). On any exception the temp file is removed.
    """
    text = os.fspath(path)
    if text == "-":
        with stdout_writes():
            if isinstance(sys.stdout, ClosedStdout):
                sys.stdout.write("")  # refused as closed, like every write to it
            yield Path("/dev/stdout")
        return
    if _writes_through(text):
        with _refused_writes(text):
            yield Path(text)
        return
    target = Path(os.path.realpath(text))  # through a symlink: write its target, keep the link
    directory = target.parent
    if make_parents:
        directory.mkdir(parents=True, exist_ok=True)
    elif not directory.is_dir():
        raise UsageError(f"{text}: output directory {Path(text).parent} does not exist")
    try:
        existing: os.stat_result | None = os.stat(target)
    except OSError:
        existing = None
    try:
        # The name's first 64 bytes only: a target named near the file system's limit (255 bytes)
        # must not make its temp file's name too long.
        stem = os.fsdecode(os.fsencode(target.name)[:64])
        fd, name = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise UsageError(f"{text}: cannot write ({err.strerror or err})") from None
    os.close(fd)
    tmp = Path(name)
    try:
        with _refused_writes(text):
            yield tmp
            if existing is not None:
                os.chmod(tmp, stat.S_IMODE(existing.st_mode))
                try:
                    os.chown(tmp, existing.st_uid, existing.st_gid)
                except OSError:
                    pass  # not ours to give away: the file becomes this user's, as any new file would
            else:
                os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def _refused_writes(shown: str) -> Iterator[None]:
    """Turn the machine's refusal of a write inside the block into a :class:`WriteError` naming
    ``shown`` (the path the user gave, never the temp file's)."""
    try:
        yield
    except BrokenPipeError:
        raise ReaderGone() from None  # a named pipe's reader went away: the boundary's silent exit
    except OSError as err:
        raise WriteError(f"{shown}: cannot write ({os_reason(err)})") from None


@contextmanager
def stdout_writes() -> Iterator[None]:
    """Turn a refused write to standard output inside the block (a full file system behind a
    redirection, ``/dev/full``, a closed stdout) into a :class:`WriteError`, and a broken pipe into
    :class:`ReaderGone`, after dropping what is still buffered for stdout (:func:`discard_stdout`)."""
    try:
        yield
    except BrokenPipeError:
        discard_stdout()
        raise ReaderGone() from None
    except OSError as err:
        discard_stdout()
        raise WriteError(f"standard output: cannot write ({os_reason(err)})") from None


class ClosedStdout(io.TextIOBase):
    """``sys.stdout`` of a process started with standard output closed (``>&-``; Python leaves
    ``None``, which every writer would trip over as a bug): every write fails as a closed
    descriptor's would, so a command writing there ends in one line and exit 2. Installed by the
    error boundary."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")

    def isatty(self) -> bool:
        return False


def discard_stdout() -> None:
    """Point standard output's descriptor at ``/dev/null``: what is still buffered for it then goes
    nowhere, and the interpreter's final flush succeeds silently (after a broken pipe or a refused
    write, when the output is lost anyway). Nothing happens where stdout has no descriptor."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A UTF-8 text stream whose file appears at ``path`` only when the block succeeds (written
    through for what is not a regular file, see :func:`atomic_path`)."""
    if os.fspath(path) == "-":
        yield sys.stdout
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as stream:
        yield stream


def open_output(path: str | None) -> AbstractContextManager[TextIO]:
    """stdout (``None`` or ``-``), or ``path`` written as :func:`atomic_text` writes it."""
    return atomic_text(path) if path and path != "-" else nullcontext(sys.stdout)


def refuse_inputs(output: str | os.PathLike[str] | None,
                  inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Raise :class:`UsageError` when ``output`` is the same file as one of ``inputs`` (same device
    and inode, so through symbolic and hard links), before anything is written. An output that does
    not exist yet, or is not a regular file, cannot be an input file."""
    if output is None or os.fspath(output) == "-":
        return
    try:
        out = os.stat(output)
    except OSError:
        return
    if not stat.S_ISREG(out.st_mode):
        return
    for item in inputs:
        if item is None:
            continue
        try:
            st = os.stat(item)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            raise UsageError(f"-o {os.fspath(output)} is the input {os.fspath(item)}: "
                             "refusing to overwrite an input (write the output elsewhere)")


def write_files(directory: str | os.PathLike[str], files: dict[str, str],
                inputs: Iterable[str | os.PathLike[str] | None]) -> None:
    """Write each ``{file name: text}`` of ``files`` into ``directory`` (made, with its parents, when
    missing), each file as :func:`atomic_text` writes one: a failure leaves every file already there
    untouched or wholly replaced. Before anything is written, :class:`UsageError` when ``directory``
    is not a directory or one of the files would be one of ``inputs`` (:func:`refuse_inputs`)."""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{os.fspath(directory)}: not a directory (the output of this format is a directory)")
    inputs = list(inputs)
    for name in files:
        refuse_inputs(root / name, inputs)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{os.fspath(directory)}: cannot create the directory ({err.strerror or err})") from None
    for name, text in files.items():
        with atomic_text(root / name) as out:
            out.write(text)
