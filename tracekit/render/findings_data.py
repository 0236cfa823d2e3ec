"""The findings (:mod:`tracekit.findings`) as plain data (JSON types): the ``findings`` list of
``tracekit.report/1``, the ``trace_findings`` of ``tracekit.diff/1`` (the same fields), and the
``args`` of an annotated trace's finding events. Neutral ground: the ``json`` format and the
annotated trace both write a finding so, and neither imports the other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def findings_data(findings: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``findings`` list of ``tracekit.report/1`` (documented in :mod:`tracekit.render.json.report`)."""
    return [{
        "rule": f.rule, "title": f.title, "severity": f.severity, "steps": list(f.steps),
        "evidence": [{"role": e.role, "name": e.name, "step": e.step, "ts_ns": e.ts_ns,
                      "count_per_step": e.count_per_step, "dur_ns_per_step": e.dur_ns_per_step,
                      "bytes_per_step": e.bytes_per_step, "detail": e.detail} for e in f.evidence],
        "cost_ns_per_step": f.cost_ns_per_step, "saving_ns_per_step": f.saving_ns_per_step,
        "saving_basis": f.saving_basis, "resource": f.resource, "saving_wall_ns": f.saving_wall_ns,
        "wall_basis": f.wall_basis, "fix": f.fix, "thresholds": dict(f.thresholds),
        "quantities": dict(f.quantities),
    } for f in findings]
