"""The ``json`` format: the versioned data contracts, sorted keys, byte-for-byte stable for the same input.

Six documents, each named by its ``schema`` (each contract module's ``SCHEMA``). Additive keys may appear
within a version; a breaking change bumps it (``tracekit.report/2``…). Times are integer
nanoseconds.

One module per schema writes its data from the result (never from a document: JSON is the data
contract, not a printout): :mod:`~tracekit.render.json.report` (``tracekit.report/1``),
:mod:`~tracekit.render.json.diff` (``tracekit.diff/1``), :mod:`~tracekit.render.json.check`
(``tracekit.check/1``), :mod:`~tracekit.render.json.compare` (``tracekit.compare/1``),
:mod:`~tracekit.render.json.ranks` (``tracekit.ranks/1``), :mod:`~tracekit.render.json.rank_diff`
(``tracekit.rank_diff/1``); each documents its keys and has one
function ``data(result[, gate_results])``. The renderer finds the module by the result's ``kind``.
:mod:`~tracekit.render.json.encode` writes the bytes (sorted keys, two-space indent).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit.render.base import Renderer
from tracekit.render.json.encode import encode

if TYPE_CHECKING:
    from tracekit.results import Result
    from tracekit.results.gates import GateResult


def _write(out: TextIO, data: Any) -> None:
    out.write(encode(data).decode())


class JsonRenderer(Renderer):
    """The JSON contracts (``color`` and ``width`` do not apply)."""

    name = "json"
    extensions = (".json",)

    def render(self, result: Result, out: TextIO, gate_results: Sequence[GateResult] = (), *,
               color: bool = False, width: int | None = None) -> None:
        contract = importlib.import_module(f"{__name__}.{result.kind}")
        _write(out, contract.data(result, gate_results) if gate_results else contract.data(result))
