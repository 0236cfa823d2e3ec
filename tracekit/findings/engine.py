"""The findings engine: what is wrong in a trace, the evidence, the price, and the fix.

Contract: :func:`analyze` takes the pipeline's bundle (:class:`tracekit.analyses.pipeline.Analyses`:
its trace with the unit windows as steps, its analyses, compile pre-ops and device ceilings) and returns a tuple of :class:`~tracekit.findings.model.Finding`, each priced on the
wall (:mod:`tracekit.findings.wall`: its wall saving, and the severity that follows it) — warnings
first, then by wall saving over the steady window (per step × steady steps; a one-time cost once;
largest first), then measured cost, then rule id. No finding without evidence:
every finding names the ops, kernels or launch calls it saw, with a first timestamp and counts,
enough to find it in Perfetto.

Rules are data: :data:`RULES` maps a rule id to its :class:`~tracekit.findings.model.Rule` (title,
severity, the evidence it reads, its thresholds and the one-line fix with the PyTorch knob), in the
order of :data:`tracekit.findings.detectors.RULE_MODULES`, one module per rule holding its row and
its detector — one function over frames (vectorised with Polars) that reads the :class:`Context`
built here once. Figures are per step, taken over the *steady* steps
(:func:`tracekit.analyses.steps.steady_steps`; all steps when none is steady), except
``cold_first_step``, which is about the steps that are not steady.

Compile findings read the compile analysis (:class:`tracekit.analyses.compilations.Compilations`,
``Analyses.compilation``) that :func:`analyze` is given as ``compilations``: ``recompile`` is
one finding per trace listing every frame recompilation (compile id, the unit it happened in, its
trigger and the dims that changed).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from tracekit.analyses import steps as steps_analysis
from tracekit.findings import wall
from tracekit.findings.detectors import RULE_MODULES
from tracekit.findings.model import SEVERITIES, Analysed, Context, Finding, Rule

#: Every rule by id, in table order.
RULES: dict[str, Rule] = {module.RULE.id: module.RULE for module in RULE_MODULES}
#: The detector of each rule in :data:`RULES` (same keys, same order).
DETECTORS: dict[str, Callable[[Context], list[Finding]]] = {module.RULE.id: module.detect
                                                            for module in RULE_MODULES}


def analyze(analyses: Analysed, *, step: int | None = None) -> tuple[Finding, ...]:
    """The findings of the bundle ``analyses`` over its steady units; ``step`` restricts the per-step
    rules to that unit."""
    trace = analyses.trace
    summary = analyses.steps
    if summary.height == 0:
        return ()
    steady = [step] if step is not None else steps_analysis.steady_steps(summary)
    attributed = analyses.attribution
    launches = steps_analysis.tag_steps(attributed.launches, trace.steps)
    gpu = attributed.gpu
    memcpys = gpu.filter(pl.col("kind") == "memcpy").with_columns(
        **{key: pl.col("decoded").str.json_path_match(f"$.{key}") for key in ("direction", "src", "dst")})
    context = Context(
        trace=trace, gpu=gpu, launches=launches, summary=summary, steady=steady,
        tensors=analyses.round_trips.tensors, traffic=analyses.round_trips.traffic,
        compile_preops=analyses.compile_preops, ceilings=analyses.ceilings,
        compilations=analyses.compilation, memory=analyses.memory,
        steady_gpu=gpu.filter(pl.col("step").is_in(steady)), memcpys=memcpys,
        decomposition=analyses.decomposition, tree_ops=analyses.ops)
    units = analyses.decomposition.units
    taken = units.filter(pl.col("step").is_in(steady))
    found: list[Finding] = []
    for detect in DETECTORS.values():
        found += [wall.price(f, taken, units) for f in detect(context) if f.evidence]
    # By what the whole window would gain: a per-step saving over every steady step, a one-time cost once.
    def over_window(f: Finding) -> float:
        return (f.saving_wall_ns or 0) * (1 if f.resource == "once" else len(steady))

    found.sort(key=lambda f: (SEVERITIES.index(f.severity), -over_window(f), -f.cost_ns_per_step, f.rule))
    return tuple(found)


def rule_ids() -> tuple[str, ...]:
    """Every rule id, in table order (what ``--fail-if finding:ID`` and ``no_finding`` accept)."""
    return tuple(RULES)


def parse_gate(text: str) -> str:
    """The rule id of a ``tracekit report --fail-if 'finding:ID'`` expression; :class:`UsageError`
    for anything else."""
    from tracekit.errors import UsageError

    kind, _, rule = text.strip().partition(":")
    rule = rule.strip()
    if kind.strip() != "finding" or rule not in RULES:
        raise UsageError(f"--fail-if {text!r}: expected finding:RULE with RULE one of {', '.join(RULES)}")
    return rule
