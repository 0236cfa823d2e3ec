"""Results in a notebook: the compact HTML a Jupyter (or VS Code, IPython) output cell shows.

Contract: :func:`html` takes a result and returns an HTML fragment: its view's compact document
(:func:`tracekit.render.views.summary`: for a report what limits it, the first findings, the steps,
GPU time by class and kernels tables cut to their first rows; for a diff its verdict and per-step
quantities) printed by the ``html`` format as one ``<div>`` (:func:`tracekit.render.html.fragment`).
The words are the views', as in every other format; nothing here words a result.

:mod:`tracekit.render` registers :func:`html` as the results' display hook when it is imported
(:func:`tracekit.results.display.register_html`): the results sit below the renderers and cannot
call them, so a result's ``_repr_html_`` goes through the hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.html import fragment
from tracekit.render.views import summary

if TYPE_CHECKING:
    from tracekit.results import Result


def html(result: Result) -> str:
    """``result``'s notebook display: its compact document as an HTML fragment (module docstring)."""
    return fragment(summary(result))
