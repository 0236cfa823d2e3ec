"""The annotated trace: the trace with its analysis drawn on it, for Perfetto and ``chrome://tracing``
(``tracekit annotate``).

Contract: :class:`AnnotatedTraceRenderer` is the :class:`~tracekit.render.base.TraceRenderer` of
this format. :meth:`~AnnotatedTraceRenderer.events` turns a whole-trace
:class:`~tracekit.results.report.Report` (and its trace, for where each kernel sits) into Chrome trace events
on tracekit's own tracks (:mod:`tracekit.render.annotated.events`) — it computes nothing, every
figure is the report's — and :meth:`~AnnotatedTraceRenderer.write` copies the original file's text
through unchanged, adding those events at the end of its ``traceEvents``. Every original byte is
kept, the other top-level keys (``deviceProperties``, ``distributedInfo``, …) included, and the
original events keep their positions (so a report's ``idx`` still points at them). The text comes
from the session (``Session.source``, a :class:`~tracekit.render.base.TraceText`): this package reads
no file itself. It is streamed in pieces: a mapped file's pages are given back as they are copied,
so writing needs little memory beyond the analysis that came before it. The output is gzip for
``-o *.json.gz`` (ISA-L), plain for ``.json``, and replaced atomically (:mod:`tracekit.output`).

What is added, all of category ``tracekit.<track>``
(:data:`tracekit.trace.ANNOTATION_CATEGORY`, which the loader sets aside and counts as
``annotations``, so reloading the output gives the same report), on one process named
``tracekit`` sorted just above the first GPU (Kineto sorts devices from 5,000,000):

- ``verdict`` — one span per unit over its CPU span (its ``ProfilerStep#N``), named by the
  launch-gap verdict (``overhead-bound``, ``compute-bound``, ``mixed``, ``no-gpu``), the unit's
  per-step figures in ``args``;
- ``idle gaps (GPU d)`` — one span per idle gap of device ``d``, named by its cause (``cpu_bound``,
  ``sync``, ``profiler_overhead``, ``back_to_back``, ``other``);
- ``round trips`` — one flow arrow per round-trip tensor from the producer kernel to the consumer
  kernel: a ``ph: "s"`` event at the producer's start on its stream and a ``ph: "f"``, ``bp: "e"``
  event at the consumer's start on its stream, with one ``id`` and the same category and name (its
  bytes: ``round trip 48.00 MiB``); the start's ``args`` hold the tensor (bytes, shape, dtype,
  producer and consumer). These are version-1 flow events, which Perfetto binds to the enclosing
  slices by ``id`` + category + name, as it binds Kineto's own ``ac2g`` arrows; the version-2 form
  (``bind_id`` with ``flow_out``/``flow_in``) sits on the bound slices themselves, and the kernels'
  own events are never edited;
- ``findings`` — one thread-scoped instant (``ph: "i"``, ``s: "t"``) per finding at its first
  evidence (else the start of its first unit), the finding as ``tracekit.report/1`` words it in
  ``args``;
- ``compilation`` — one span per compile-work span (frame compilation or recompile, autotuning,
  CUDA-graph record, other run-time compile work), its compilation's figures in ``args``.

Spans that overlap on a track are spread over lanes (``verdict``, ``verdict (2)``, …): Chrome trace
viewers need a thread's complete events to nest. Times are written in the file's own unit and
form (µs with three decimals, or integer µs for a trace written so, on the trace's clock), exact to
the ns.

Polars and msgspec are imported when the events are made, never with the registry
(:mod:`tracekit.render`), so ``tracekit --help`` stays light.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from tracekit.errors import UsageError
from tracekit.render.base import AddedEvents, TraceRenderer, TraceText

if TYPE_CHECKING:
    from tracekit.results.report import Report
    from tracekit.trace import Trace

#: Added events joined into one write.
WRITE_EVENTS = 4096
#: gzip level of a ``.json.gz`` output (ISA-L's levels are 0-3; its 1 is faster than zlib's 1).
GZIP_LEVEL = 1
#: Between two events of the array, as the added events are written.
_SEPARATOR = b",\n  "


class AnnotatedTraceRenderer(TraceRenderer):
    """The trace with tracekit's tracks added (see the module docstring)."""

    name = "annotated"
    extensions = (".json.gz", ".json")

    def check_output(self, output: str) -> None:
        self.compressed(output)

    def compressed(self, output: str) -> bool:
        """Whether ``-o output`` is written gzip-compressed (``.json.gz``) or plain (``.json``, ``-``);
        :class:`UsageError` for any other name."""
        if output == "-":
            return False
        ending = next((e for e in self.extensions if output.lower().endswith(e)), None)
        if ending is None:
            raise UsageError(f"-o {output}: an annotated trace is written as .json or .json.gz")
        return ending.endswith(".gz")

    def events(self, report: Report, trace: Trace) -> AddedEvents:
        from tracekit.render.annotated.events import annotations

        return annotations(report, trace)

    def write(self, added: AddedEvents, source: TraceText, output: str) -> None:
        """Write ``source``'s text with ``added``'s events at the end of its event array to
        ``output`` (atomically, see :mod:`tracekit.output`; gzip for ``.json.gz``)."""
        from tracekit.output import atomic_path

        gz = self.compressed(output)
        with source.open() as text, atomic_path(output) as tmp, open(tmp, "wb") as raw:
            sink = _gzip(raw) if gz else raw
            try:
                text.copy_head(sink)
                events = added.events
                for lo in range(0, len(events), WRITE_EVENTS):  # few large writes: gzip compresses per call
                    first = _SEPARATOR if lo or text.has_events else b"\n  "
                    sink.write(first + _SEPARATOR.join(events[lo:lo + WRITE_EVENTS]))
                text.copy_tail(sink)
            finally:
                if sink is not raw:
                    sink.close()


def _gzip(raw: IO[bytes]) -> IO[bytes]:
    try:
        from isal import igzip

        return igzip.IGzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL)
    except ImportError:  # pragma: no cover - isal is a dependency
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL)
