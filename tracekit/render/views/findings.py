"""The findings (:mod:`tracekit.findings`) worded: the report's :class:`~tracekit.render.document.Findings`
block (:func:`findings`) and the diff's "new in B" / "resolved in B" rows (:func:`changes_table`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracekit.classify.names import short_kernel_name
from tracekit.render.document import Finding, Findings
from tracekit.render.text import Code, Rows, us

#: Evidence rows shown per finding (JSON has them all).
MAX_EVIDENCE_SHOWN = 3
#: What a finding's resource saving is a saving of (:data:`tracekit.findings.model.RESOURCES`).
RESOURCE_WORDS = {"gpu": "GPU time", "host": "host time", "wall": "wall time", "once": "one-time cost"}


def _count(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:g}" if value != int(value) else f"{int(value)}"


#: A demangled kernel name inside an evidence detail: ``void ns::kernel<…>(…)`` and the like, long
#: enough that the terminal should show its short form (JSON and HTML details keep it whole).
_LONG_KERNEL = re.compile(r"(?:void )?[A-Za-z_][\w:]*<[^;]{60,}?\)(?= via | \+ |$)")


def short_names(detail: str) -> str:
    """``detail`` with every long demangled kernel name in it shortened (``elementwise_kernel<…>``)."""
    return _LONG_KERNEL.sub(lambda m: short_kernel_name(m.group(0)), detail)


def evidence_line(e: Any, step_starts: Mapping[int, int] | None = None) -> str:
    """One evidence row in words: what, how often per step, its cost, where to find it — its time
    from the start of its step (``step_starts``: unit number → CPU start), the span one clicks in
    Perfetto to measure from, then its raw timestamp."""
    name = short_kernel_name(e.name) if e.role == "kernel" else e.name
    parts = [f"{name}"]
    if e.count_per_step is not None:
        parts.append(f"×{_count(e.count_per_step)}/step")
    if e.dur_ns_per_step:
        parts.append(us(e.dur_ns_per_step) + "/step")
    if e.bytes_per_step:
        parts.append(f"{e.bytes_per_step:,} B/step")
    where = f"first in step {e.step}" if e.step is not None else ""
    start = (step_starts or {}).get(e.step) if e.step is not None else None
    if e.ts_ns is not None and start is not None:
        where += f", {(e.ts_ns - start) / 1e6:+,.3f} ms from its start (ts {e.ts_ns:,} ns)"
    elif e.ts_ns is not None:
        where += f" at ts {e.ts_ns:,} ns"
    line = " ".join(parts) + (f" ({short_names(e.detail)})" if e.detail else "")
    return f"{line}; {where}" if where else line


def findings(found: Sequence[Any], step_starts: Mapping[int, int] | None = None) -> Findings:
    """The Findings block: per finding (warnings first, as :mod:`tracekit.findings` orders them) its
    table row and the terminal's heading and detail lines; evidence times from the start of their step
    (``step_starts``: unit number → CPU start ns) when given."""
    items = []
    for f in found:
        shown = [evidence_line(e, step_starts) for e in f.evidence[:MAX_EVIDENCE_SHOWN]]
        if len(f.evidence) > MAX_EVIDENCE_SHOWN:
            shown.append(f"… {len(f.evidence) - MAX_EVIDENCE_SHOWN} more")
        once = " once" if f.quantities.get("once") else ""
        per = once or "/step"
        saving = "–" if f.saving_ns_per_step is None else us(f.saving_ns_per_step) + per
        wall = "–" if f.saving_wall_ns is None else us(f.saving_wall_ns) + per
        thresholds = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in f.thresholds.items())
        resource = RESOURCE_WORDS.get(f.resource, f.resource)
        row = (f.severity, Code(f.rule), f.title, "; ".join(shown), us(f.cost_ns_per_step) + once,
               f"{wall} ({f.wall_basis})", f"{saving} of {resource} ({f.saving_basis})", f.fix, thresholds)
        # A saving measured on the wall (a stall, a sync's idle, a one-time cost) has one basis.
        direct = f.resource in ("wall", "once")
        heading = (f"{f.severity.upper()} {f.rule}: {f.title} — saves {wall} of wall time if fixed "
                   + (f"(costs {us(f.cost_ns_per_step)}{per})" if direct
                      else f"({saving} of {resource}; costs {us(f.cost_ns_per_step)}{per})"))
        lines = [f"evidence: {line}" for line in shown]
        lines += ([f"wall saving: {f.saving_basis}"] if direct
                  else [f"wall saving: {f.wall_basis}", f"{resource} saving: {f.saving_basis}"])
        lines += [f"fix: {f.fix}",
                  "thresholds: " + ", ".join(f"{k}={v}" for k, v in f.thresholds.items())]
        items.append(Finding(f.severity, f.rule, row, heading, tuple(lines)))
    return Findings("Findings", ("severity", "rule", "what", "evidence", "cost/step", "wall saving",
                                 "resource saving", "fix", "thresholds"), tuple(items))


def changes_table(changes: Sequence[tuple[str, Any]]) -> Rows:
    """The diff's findings that appear or vanish: ``(status, finding)`` rows."""
    rows = [[status, f.severity, Code(f.rule), f.title, us(f.cost_ns_per_step)] for status, f in changes]
    return ("Findings new / resolved in B", ["status", "severity", "rule", "what", "cost/step"], rows)
