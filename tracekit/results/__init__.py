"""The results wing: what every command returns and every renderer words, as typed frozen data.

One module per result kind — :mod:`~tracekit.results.report` (``tracekit report``: the
:class:`~tracekit.results.report.Report`, a selection over the pipeline's bundle, and its Parquet
store :mod:`~tracekit.results.store`), :mod:`~tracekit.results.diff` (``tracekit diff``: the
:class:`~tracekit.results.diff.Diff` with its noise-aware quantities and the kernel
:mod:`~tracekit.results.alignment`), :mod:`~tracekit.results.check` (``tracekit check``),
:mod:`~tracekit.results.comparison` (``tracekit compare``), :mod:`~tracekit.results.ranks`
(``tracekit report DIR``) — plus the vocabulary diff and compare share: their verdict
(:mod:`~tracekit.results.verdict`) and their ``--fail-if`` gates (:mod:`~tracekit.results.gates`).

Results sit above the analyses and the findings and below everything that computes a comparison
(:mod:`tracekit.diff`), the session and the renderers: they import neither (the architecture tests
hold it).
"""

from __future__ import annotations

from typing import ClassVar, Protocol


class Result(Protocol):
    """What every result is to a renderer: its ``kind`` (``"report"``, ``"diff"``, ``"check"``,
    ``"compare"``, ``"ranks"``), which names its view and its JSON contract."""

    kind: ClassVar[str]
