"""``tracekit.compare/1`` (``tracekit compare TRACE…``, :mod:`tracekit.diff.side_by_side`): ``{schema, baseline
(label), rows: [{label, path, is_baseline, shapes, units, steady_units, set_aside: {state: units},
compilations, recompiles, dynamic_promotions, shape_changes, compile_ns, recompile_ns, graph_records,
graph_replays, record_ns, jit_ns, one_off_ns, set_aside_count, set_aside_gpu_ns, gpu_ns,
cpu_dispatch_ns, wall_ns, break_even: null | {reason ("pays_off" | "immediately" | "slower" |
"overtaken" | "unmeasured"), calls, extra_ns, saving_ns}}], verdict: [sentences], findings: [{kind
("compiled" | "jit" | "none" | "fastest" | "cpu_bound"), subject, quantities: {…}}], rules: {steady,
break_even}, gates: [{expr, metric, op, value, relative, observed, traces, failed}]}``; ``gpu_ns``,
``cpu_dispatch_ns`` and ``wall_ns`` are the steady state per call (null without units).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracekit.render.json.encode import finite
from tracekit.render.views.compare import verdict_lines

if TYPE_CHECKING:
    from tracekit.results.gates import GateResult
    from tracekit.results.comparison import Comparison


#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.compare/1"


def data(comparison: Comparison, gate_results: Sequence[GateResult] = ()) -> dict[str, Any]:
    """A comparison (and its gates) as plain data following the ``tracekit.compare/1`` contract."""
    import dataclasses

    from tracekit.diff.side_by_side import BREAK_EVEN_RULE, STEADY_RULE

    def row(r: Any) -> dict[str, Any]:
        data = dataclasses.asdict(r)
        data["one_off_ns"] = r.one_off_ns
        return data

    return {
        "schema": SCHEMA, "baseline": comparison.baseline_label,
        "rows": [row(r) for r in comparison.rows],
        "verdict": verdict_lines(comparison),
        "findings": [{"kind": f.kind, "subject": f.subject, "quantities": dict(f.quantities)}
                     for f in comparison.findings],
        "rules": {"steady": STEADY_RULE, "break_even": BREAK_EVEN_RULE},
        "gates": [{"expr": g.gate.text, "metric": g.gate.metric, "op": g.gate.op, "value": g.gate.value,
                   "relative": g.gate.relative, "observed": finite(g.observed), "traces": list(g.traces),
                   "failed": g.failed} for g in gate_results],
    }
