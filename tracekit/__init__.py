"""tracekit: turn PyTorch profiler (Kineto) traces into answers.

The Python API starts at :func:`tracekit.open` (a :class:`tracekit.session.Session`: its
``report()``, ``diff(other)``, ``check(expectations)`` and the loaded ``trace``); the command line
is :mod:`tracekit.commands`. ``open`` and ``Session`` are imported on first use, so importing
tracekit (as the command line does for ``--help``) stays cheap; with them come the renderers, which
make every result show as HTML in a notebook (:mod:`tracekit.results.display`). The subpackages
are reached the same way, on first use: ``tracekit.render.timeline.draw(step)`` needs no import
of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Session", "__version__", "open"]

if TYPE_CHECKING:
    from tracekit.session import Session, open  # noqa: A004


#: What ``tracekit.NAME`` imports on first use: the public subpackages and modules.
_SUBMODULES = frozenset({"analyses", "classify", "diff", "errors", "findings", "load", "render", "results",
                         "session", "trace"})


def __getattr__(name: str) -> Any:
    import importlib

    if name in ("open", "Session"):
        from tracekit import render, session  # noqa: F401 - render registers the notebook display

        return getattr(session, name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
