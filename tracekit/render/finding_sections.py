"""The findings (:mod:`tracekit.findings`) as display rows and as JSON data.

:func:`findings_table` gives the report's first section, ``(title, headers, rows)`` like
:mod:`tracekit.render.sections`, shared by the terminal and Markdown renderers (which escape every
cell through their own choke points); :func:`findings_data` the ``findings`` list of
``tracekit.report/1``; :func:`changes_table` the diff's "new in B" / "resolved in B" rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracekit.classify.names import short_kernel_name
from tracekit.render.text import Code, Table, us

#: Evidence rows shown per finding in the terminal and Markdown (JSON has them all).
MAX_EVIDENCE_SHOWN = 3


def _count(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:g}" if value != int(value) else f"{int(value)}"


def evidence_line(e: Any) -> str:
    """One evidence row in words: what, how often per step, its cost, where to find it."""
    name = short_kernel_name(e.name) if e.role == "kernel" else e.name
    parts = [f"{name}"]
    if e.count_per_step is not None:
        parts.append(f"×{_count(e.count_per_step)}/step")
    if e.dur_ns_per_step:
        parts.append(us(e.dur_ns_per_step) + "/step")
    if e.bytes_per_step:
        parts.append(f"{e.bytes_per_step:,} B/step")
    where = f"first in step {e.step}" if e.step is not None else ""
    if e.ts_ns is not None:
        where += f" at ts {e.ts_ns:,} ns"
    line = " ".join(parts) + (f" ({e.detail})" if e.detail else "")
    return f"{line}; {where}" if where else line


def findings_table(findings: Sequence[Any]) -> Table:
    """The Findings section: one row per finding, warnings first."""
    rows = []
    for f in findings:
        shown = [evidence_line(e) for e in f.evidence[:MAX_EVIDENCE_SHOWN]]
        if len(f.evidence) > MAX_EVIDENCE_SHOWN:
            shown.append(f"… {len(f.evidence) - MAX_EVIDENCE_SHOWN} more")
        per = " once" if f.quantities.get("once") else ""
        saving = "–" if f.saving_ns_per_step is None else us(f.saving_ns_per_step) + per
        thresholds = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in f.thresholds.items())
        rows.append([f.severity, Code(f.rule), f.title, "; ".join(shown), us(f.cost_ns_per_step) + per,
                     f"{saving} ({f.saving_basis})", f.fix, thresholds])
    return ("Findings", ["severity", "rule", "what", "evidence", "cost/step", "saving/step", "fix",
                         "thresholds"], rows)


def finding_blocks(findings: Sequence[Any]) -> list[tuple[str, list[str]]]:
    """Each finding as a heading line and its detail lines (the terminal's layout)."""
    blocks = []
    for f in findings:
        per = " once" if f.quantities.get("once") else "/step"
        saving = "–" if f.saving_ns_per_step is None else us(f.saving_ns_per_step)
        head = (f"{f.severity.upper()} {f.rule}: {f.title} — costs {us(f.cost_ns_per_step)}{per}, "
                f"saves {saving}{per} if fixed")
        lines = [f"evidence: {evidence_line(e)}" for e in f.evidence[:MAX_EVIDENCE_SHOWN]]
        if len(f.evidence) > MAX_EVIDENCE_SHOWN:
            lines.append(f"evidence: … {len(f.evidence) - MAX_EVIDENCE_SHOWN} more")
        lines += [f"saving: {f.saving_basis}", f"fix: {f.fix}",
                  "thresholds: " + ", ".join(f"{k}={v}" for k, v in f.thresholds.items())]
        blocks.append((head, lines))
    return blocks


def findings_data(findings: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``findings`` list of ``tracekit.report/1`` (documented in :mod:`tracekit.render.json`)."""
    return [{
        "rule": f.rule, "title": f.title, "severity": f.severity, "steps": list(f.steps),
        "evidence": [{"role": e.role, "name": e.name, "step": e.step, "ts_ns": e.ts_ns,
                      "count_per_step": e.count_per_step, "dur_ns_per_step": e.dur_ns_per_step,
                      "bytes_per_step": e.bytes_per_step, "detail": e.detail} for e in f.evidence],
        "cost_ns_per_step": f.cost_ns_per_step, "saving_ns_per_step": f.saving_ns_per_step,
        "saving_basis": f.saving_basis, "fix": f.fix, "thresholds": dict(f.thresholds),
        "quantities": dict(f.quantities),
    } for f in findings]


def changes_table(changes: Sequence[tuple[str, Any]]) -> Table:
    """The diff's findings that appear or vanish: ``(status, finding)`` rows."""
    rows = [[status, f.severity, Code(f.rule), f.title, us(f.cost_ns_per_step)] for status, f in changes]
    return ("Findings new / resolved in B", ["status", "severity", "rule", "what", "cost/step"], rows)
