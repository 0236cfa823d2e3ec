"""Errors a user can cause. The CLI turns each into one line on stderr and an exit code."""

import errno


class TracekitError(Exception):
    """Base class: ``str(err)`` is the one line shown to the user; ``exit_code`` the process status."""

    exit_code = 2


class TraceError(TracekitError):
    """The trace file cannot be read as a Kineto/Chrome trace (missing, empty, not JSON, truncated...)."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{shown_path(path)}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):
        # Rebuild from both fields, so the error survives a trip between processes.
        return (type(self), (self.path, self.problem))


def shown_path(path: object, limit: int = 160) -> str:
    """A path as one line shows it: a path longer than ``limit`` characters keeps its start and end."""
    text = str(path)
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return f"{text[:keep]}…{text[-keep:]}"


class UsageError(TracekitError):
    """A flag or argument combination that cannot be honoured."""


class WriteError(TracekitError):
    """An output could not be written: a full file system, a file-size limit (``ulimit -f``), a
    quota, a read-only mount, a closed or full standard output. The machine's refusal, not a bug."""


#: What a few refusals of a write mean, beyond the system's own words.
_WRITE_HINTS = {errno.EFBIG: "a file-size limit, ulimit -f", errno.EDQUOT: "a disk quota"}


def os_reason(err: OSError) -> str:
    """The system's words for ``err`` (``No space left on device``), with a hint where one helps."""
    reason = err.strerror or str(err) or type(err).__name__
    hint = _WRITE_HINTS.get(err.errno or 0)
    return f"{reason}: {hint}" if hint else reason


class ReaderGone(Exception):
    """Standard output's reader went away (a broken pipe, as ``| head`` does): no error, the
    boundary's silent exit 141. Not an ``OSError``, so that click's own handling of a broken pipe
    (exit 1) never takes it."""


class GateFailed(TracekitError):
    """A regression gate or expectation was broken (exit code 1)."""

    exit_code = 1


def is_native_panic(err: BaseException) -> bool:
    """True for a panic of a native (Rust) library raised through pyo3 — Polars' ``PanicException``.
    It derives from ``BaseException``, not ``Exception``, so no ``except Exception`` stops it; it is
    what a crafted Parquet file or a value past a native limit ends in. Matched by name, so that this
    module imports no Polars."""
    return any(cls.__name__ == "PanicException" for cls in type(err).__mro__)
