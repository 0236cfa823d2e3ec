"""The ``json`` format: the versioned data contracts, sorted keys, byte-for-byte stable for the same input.

Five documents, each named by its ``schema`` (:mod:`tracekit.schemas`). Additive keys may appear
within a version; a breaking change bumps it (``tracekit.report/2``…). Times are integer
nanoseconds.

One module per schema writes its data from the result (never from a document: JSON is the data
contract, not a printout): :mod:`~tracekit.render.json.report` (``tracekit.report/1``),
:mod:`~tracekit.render.json.diff` (``tracekit.diff/1``), :mod:`~tracekit.render.json.check`
(``tracekit.check/1``), :mod:`~tracekit.render.json.compare` (``tracekit.compare/1``),
:mod:`~tracekit.render.json.ranks` (``tracekit.ranks/1``); each documents its keys.
:mod:`~tracekit.render.json.encode` writes the bytes (sorted keys, two-space indent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit.render.base import Renderer
from tracekit.render.json.encode import encode

if TYPE_CHECKING:
    from tracekit.results.comparison import Comparison
    from tracekit.results.diff import Diff
    from tracekit.results.check import CheckResult
    from tracekit.results.gates import GateResult
    from tracekit.results.ranks import RankReport
    from tracekit.results.report import Report


def _write(out: TextIO, data: Any) -> None:
    out.write(encode(data).decode())


class JsonRenderer(Renderer):
    """The JSON contracts (``color`` and ``width`` do not apply)."""

    name = "json"
    extensions = (".json",)

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render.json.report import report_data

        _write(out, report_data(report))

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        from tracekit.render.json.diff import diff_data

        _write(out, diff_data(diff, gate_results))

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        from tracekit.render.json.check import check_data

        _write(out, check_data(result))

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False,
              width: int | None = None) -> None:
        from tracekit.render.json.ranks import ranks_data

        _write(out, ranks_data(rank_report))

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        from tracekit.render.json.compare import compare_data

        _write(out, compare_data(comparison, gate_results))
