"""One view per result kind: each turns a result into an ordered :class:`~tracekit.render.document.Document`.

:mod:`~tracekit.render.views.report` (``tracekit report TRACE``), :mod:`~tracekit.render.views.diff`
(``tracekit diff``), :mod:`~tracekit.render.views.check` (``tracekit check``),
:mod:`~tracekit.render.views.ranks` (``tracekit report DIR``) and
:mod:`~tracekit.render.views.compare` (``tracekit compare``), each with one function ``document``.
The other modules are their parts: the report's tables (:mod:`~tracekit.render.views.tables`,
:mod:`~tracekit.render.views.compilation`, :mod:`~tracekit.render.views.memory`), the findings
(:mod:`~tracekit.render.views.findings`), the diff's verdict (:mod:`~tracekit.render.views.verdict`),
step names (:mod:`~tracekit.render.views.labels`).

:func:`document` finds a result's view by the result's ``kind`` (module ``views.<kind>``): a new
result kind is one new view module, nothing here changes. :func:`summary` finds the view's
``summary`` (the compact document a notebook shows, :mod:`tracekit.render.notebook`) the same way;
a view without one is summarised by its whole document.

A view words a result; it never computes a figure nor decides what counts (the analyses,
:mod:`tracekit.diff` and :mod:`tracekit.diff.side_by_side` do), and it knows no output format.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.render.document import Document
    from tracekit.results import Result
    from tracekit.results.gates import GateResult


def document(result: Result, gate_results: Sequence[GateResult] = ()) -> Document:
    """``result``'s document, built by its kind's view (``gate_results`` go to a view that shows gates)."""
    view = importlib.import_module(f"{__name__}.{result.kind}")
    return view.document(result, gate_results) if gate_results else view.document(result)


def summary(result: Result) -> Document:
    """``result``'s compact document (its view's ``summary``), else its whole document."""
    view = importlib.import_module(f"{__name__}.{result.kind}")
    return view.summary(result) if hasattr(view, "summary") else view.document(result)
