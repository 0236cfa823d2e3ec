"""The findings engine (its own room: it reads the analyses, renders nothing, and knows nothing of
the diff): :mod:`tracekit.findings.engine` runs the rules and holds the rule table,
:mod:`tracekit.findings.detectors` holds one module per rule (its row, thresholds and detector),
:mod:`tracekit.findings.model` the :class:`~tracekit.findings.model.Finding` and what rules read.
:mod:`tracekit.analyses.pipeline` runs it once per bundle (:func:`tracekit.analyses.pipeline.findings`)."""

from tracekit.findings.engine import RULES, analyze, parse_gate, rule_ids
from tracekit.findings.model import Evidence, Finding

__all__ = ["RULES", "Evidence", "Finding", "analyze", "parse_gate", "rule_ids"]
