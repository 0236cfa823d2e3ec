"""tracekit: turn PyTorch profiler (Kineto) traces into answers.

The Python API starts at :func:`tracekit.open` (a :class:`tracekit.session.Session`: its
``report()``, ``diff(other)``, ``check(expectations)`` and the loaded ``trace``); the command line
is :mod:`tracekit.commands`. ``open`` and ``Session`` are imported on first use, so importing
tracekit (as the command line does for ``--help``) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Session", "__version__", "open"]

if TYPE_CHECKING:
    from tracekit.session import Session, open  # noqa: A004


def __getattr__(name: str) -> Any:
    if name in ("open", "Session"):
        from tracekit import session

        return getattr(session, name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
