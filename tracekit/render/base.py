"""The renderer contract: one object per output format, one entry for every kind of result.

A renderer words and draws results it is given; it never computes a figure nor decides what
counts (the analyses and :mod:`tracekit.diff` do). Its one entry, :meth:`Renderer.render`, writes
one complete output of any result to ``out`` (a text stream). ``color`` asks for terminal colour
and ``width`` for a line width; a format without either ignores them.

A result names its kind (``Report.kind == "report"``, :mod:`tracekit.results`); the kind names
the result's view (``tracekit.render.views.<kind>``, which builds its document) and its JSON
contract (``tracekit.render.json.<kind>``). So a new result kind adds one view and one JSON module,
and no format changes. Two kinds of format:

* a :class:`DocumentRenderer` (term, md, html) prints any document: :meth:`DocumentRenderer.render`
  turns the result into its document (:func:`tracekit.render.views.document`) and
  :meth:`DocumentRenderer.print` it. A new section is a change to one view; a new block kind one
  function per printer.
* any other format implements :meth:`Renderer.render` itself: ``json`` writes each result's
  versioned data contract (:mod:`tracekit.render.json`), ``svg`` the pictures of a document.

Adding a format is one module defining a subclass and one line in
:data:`tracekit.render.RENDERERS`; ``--format`` and the ``-o`` extension mapping follow from the
registry.

A format whose output is several files (``svg``: pictures plus the Markdown showing them) sets
``writes_files``; :meth:`Renderer.files_target` reads ``-o`` (a directory, or one file) before any
work is done, and the result comes as ``{file name: text}`` (:meth:`Renderer.files`), written by
:func:`tracekit.output.write_files`. Its :meth:`~Renderer.render` still writes the one document
``-o FILE`` asks for.

A third kind writes no document: a :class:`TraceRenderer` (``tracekit annotate``'s annotated trace)
writes the trace itself again, its own text copied through with a report drawn onto it as events
of its own. It is no entry of :data:`tracekit.render.RENDERERS`: its output needs one trace's text
(the other result kinds have none to write into), it is binary (gzip by suffix) where those write a
text stream, and ``.json`` already names the ``json`` contract. Render reads no file, so the text
comes as an argument, a :class:`TraceText` the session opens (``Session.source``); and the work
comes in two calls, so that the caller can let the analysis go between them:
:meth:`TraceRenderer.events` words the report, :meth:`TraceRenderer.write` copies the text with
those events added.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, ClassVar, Protocol, TextIO

if TYPE_CHECKING:
    from tracekit.render.document import Document
    from tracekit.results import Result
    from tracekit.results.gates import GateResult
    from tracekit.results.report import Report
    from tracekit.trace import Trace


class Renderer(abc.ABC):
    """One output format (see module docstring)."""

    #: The ``--format`` name.
    name: ClassVar[str]
    #: Lower-case file extensions (with the dot) that select this format for ``-o FILE``.
    extensions: ClassVar[tuple[str, ...]]
    #: Whether :meth:`render` draws step timelines (``Report.timelines``): the command computes them
    #: only for a renderer that says so (they cost time on a big trace).
    needs_timelines: ClassVar[bool] = False
    #: Whether the format writes several files into a directory (``svg``: the pictures and the Markdown
    #: that shows them) rather than one document to a stream. Such a format also implements
    #: :meth:`files_target` and :meth:`files` (module docstring).
    writes_files: ClassVar[bool] = False

    def files_target(self, output: str | None) -> tuple[str, str | None] | None:
        """For a ``writes_files`` format: ``(directory, index file name or None)`` that ``-o output``
        asks for, or None when ``output`` names one document the stream methods write; raise
        :class:`~tracekit.errors.UsageError` when ``output`` cannot be written by this format."""
        return None

    def files(self, result: Result, gate_results: Sequence[GateResult] = (), *,
              index: str | None = None) -> dict[str, str]:
        """For a ``writes_files`` format: ``result`` as ``{file name: text}`` (``index``: the name of
        the page showing the pictures; None: the format's default)."""
        raise NotImplementedError(f"{self.name} writes one document")

    @abc.abstractmethod
    def render(self, result: Result, out: TextIO, gate_results: Sequence[GateResult] = (), *,
               color: bool = False, width: int | None = None) -> None:
        """Write ``result`` (any result kind of :mod:`tracekit.results`; its ``kind`` names its view
        and its JSON contract) to ``out``, with the results of its ``--fail-if`` gates if any."""


class DocumentRenderer(Renderer):
    """A format that prints any :class:`~tracekit.render.document.Document`: every result goes
    through its view (:func:`tracekit.render.views.document`) and :meth:`print`."""

    @abc.abstractmethod
    def print(self, document: Document, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        """Write ``document`` to ``out``, complete."""

    def render(self, result: Result, out: TextIO, gate_results: Sequence[GateResult] = (), *,
               color: bool = False, width: int | None = None) -> None:
        from tracekit.render.views import document

        self.print(document(result, gate_results), out, color=color, width=width)


class SplitText(Protocol):
    """A trace's text split after its last event: :meth:`copy_head` writes it up to there,
    :meth:`copy_tail` the rest (the close of the event array and every key after it)."""

    #: Whether the event array holds any event (an added event then needs a comma before it).
    has_events: bool

    def copy_head(self, sink: IO[bytes]) -> None: ...

    def copy_tail(self, sink: IO[bytes]) -> None: ...


class TraceText(Protocol):
    """Where a trace's text can be read again (``Session.source``): :meth:`open` reads it, split as
    :class:`SplitText` says, for the ``with`` block; :class:`~tracekit.errors.TraceError` when the
    text has no event array to add events to."""

    def open(self) -> AbstractContextManager[SplitText]: ...


@dataclass(frozen=True)
class AddedEvents:
    """What :meth:`TraceRenderer.events` made: the events, each one JSON object's text, in the order
    they are written, and how many of each kind (the kinds a format's own; the command words them)."""

    events: tuple[bytes, ...]
    counts: dict[str, int] = field(default_factory=dict)


class TraceRenderer(abc.ABC):
    """A format whose output is the trace again, with a report added (see module docstring)."""

    #: The format's name.
    name: ClassVar[str]
    #: Lower-case endings (with the dot) an output of this format may have.
    extensions: ClassVar[tuple[str, ...]]

    @abc.abstractmethod
    def check_output(self, output: str) -> None:
        """Raise :class:`~tracekit.errors.UsageError` when this format cannot write ``-o output``:
        called before any work is done."""

    @abc.abstractmethod
    def events(self, report: Report, trace: Trace) -> AddedEvents:
        """The events that draw ``report``, a whole-trace report of ``trace`` (read for where each
        event it points at sits in the file)."""

    @abc.abstractmethod
    def write(self, added: AddedEvents, source: TraceText, output: str) -> None:
        """Write ``source``'s text with ``added``'s events to ``output``: every original byte kept."""
