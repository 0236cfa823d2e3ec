"""The renderer contract: one object per output format, one entry per kind of result.

A renderer words and draws results it is given; it never computes a figure nor decides what
counts (the analyses and :mod:`tracekit.diff` do). Each entry (:meth:`Renderer.report`,
:meth:`~Renderer.diff`, :meth:`~Renderer.check`, :meth:`~Renderer.ranks`, :meth:`~Renderer.compare`)
writes one complete output to ``out`` (a text stream). ``color`` asks for terminal colour and
``width`` for a line width; a format without either ignores them.

Two kinds of format:

* a :class:`DocumentRenderer` (term, md, html) prints any document: its entries turn the result
  into its document through the result kind's view (:mod:`tracekit.render.views`) and
  :meth:`DocumentRenderer.print` it. A new section is a change to one view; a new block kind one
  function per printer.
* any other format implements the entries itself: ``json`` writes each result's versioned data
  contract (:mod:`tracekit.render.json`), ``svg`` the pictures of a document.

Adding a format is one module defining a subclass and one line in
:data:`tracekit.render.RENDERERS`; ``--format`` and the ``-o`` extension mapping follow from the
registry. A subclass that leaves an entry out cannot be instantiated (``abc``), so a format covers
every result kind or fails at import.

A format whose output is several files (``svg``: pictures plus the Markdown showing them) sets
``writes_files``; :meth:`Renderer.files_target` reads ``-o`` (a directory, or one file) before any
work is done, and the result comes as ``{file name: text}`` (:meth:`Renderer.report_files`,
:meth:`Renderer.diff_files`), written by :func:`tracekit.output.write_files`. Its stream entries
still write the one document ``-o FILE`` asks for.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, TextIO

if TYPE_CHECKING:
    from tracekit.results.check import CheckResult
    from tracekit.results.gates import GateResult
    from tracekit.results.diff import Diff
    from tracekit.results.comparison import Comparison
    from tracekit.results.ranks import RankReport
    from tracekit.render.document import Document
    from tracekit.results.report import Report


class Renderer(abc.ABC):
    """One output format (see module docstring)."""

    #: The ``--format`` name.
    name: ClassVar[str]
    #: Lower-case file extensions (with the dot) that select this format for ``-o FILE``.
    extensions: ClassVar[tuple[str, ...]]
    #: Whether :meth:`report` draws step timelines (``Report.timelines``): the command computes them
    #: only for a renderer that says so (they cost time on a big trace).
    needs_timelines: ClassVar[bool] = False
    #: Whether the format writes several files into a directory (``svg``: the pictures and the Markdown
    #: that shows them) rather than one document to a stream. Such a format also implements
    #: :meth:`files_target`, :meth:`report_files` and :meth:`diff_files` (module docstring).
    writes_files: ClassVar[bool] = False

    def files_target(self, output: str | None) -> tuple[str, str | None] | None:
        """For a ``writes_files`` format: ``(directory, index file name or None)`` that ``-o output``
        asks for, or None when ``output`` names one document the stream methods write; raise
        :class:`~tracekit.errors.UsageError` when ``output`` cannot be written by this format."""
        return None

    def report_files(self, report: Report, *, index: str | None = None) -> dict[str, str]:
        """For a ``writes_files`` format: ``tracekit report`` as ``{file name: text}``."""
        raise NotImplementedError(f"{self.name} writes one document")

    def diff_files(self, diff: Diff, gate_results: Sequence[GateResult] = (), *,
                   index: str | None = None) -> dict[str, str]:
        """For a ``writes_files`` format: ``tracekit diff`` as ``{file name: text}``."""
        raise NotImplementedError(f"{self.name} writes one document")

    @abc.abstractmethod
    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        """``tracekit report TRACE``."""

    @abc.abstractmethod
    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        """``tracekit diff A B``, with the results of its ``--fail-if`` gates (if any)."""

    @abc.abstractmethod
    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        """``tracekit check TRACE --expect FILE``."""

    @abc.abstractmethod
    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        """``tracekit report DIR``: one summary row per rank trace."""

    @abc.abstractmethod
    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        """``tracekit compare TRACE…``: the traces side by side, the verdict, and its ``--fail-if`` gates."""


class DocumentRenderer(Renderer):
    """A format that prints any :class:`~tracekit.render.document.Document`: every result goes
    through its view and :meth:`print`."""

    @abc.abstractmethod
    def print(self, document: Document, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        """Write ``document`` to ``out``, complete."""

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render.views import report as view

        self.print(view.document(report), out, color=color, width=width)

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from tracekit.render.views import diff as view

        self.print(view.document(diff, gate_results), out, color=color, width=width)

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render.views import check as view

        self.print(view.document(result), out, color=color, width=width)

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render.views import ranks as view

        self.print(view.document(rank_report), out, color=color, width=width)

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        from tracekit.render.views import compare as view

        self.print(view.document(comparison, gate_results), out, color=color, width=width)
