"""Errors a user can cause. The CLI turns each into one line on stderr and an exit code."""


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


class GateFailed(TracekitError):
    """A regression gate or expectation was broken (exit code 1)."""

    exit_code = 1


def is_native_panic(err: BaseException) -> bool:
    """True for a panic of a native (Rust) library raised through pyo3 — Polars' ``PanicException``.
    It derives from ``BaseException``, not ``Exception``, so no ``except Exception`` stops it; it is
    what a crafted Parquet file or a value past a native limit ends in. Matched by name, so that this
    module imports no Polars."""
    return any(cls.__name__ == "PanicException" for cls in type(err).__mro__)
