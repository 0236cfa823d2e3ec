"""The findings engine (its own room: it reads the analyses and the diff's host-sync measure, and
renders nothing): :mod:`tracekit.findings.engine` runs the rules and holds the rule table,
:mod:`tracekit.findings.detectors` holds one module per rule (its row, thresholds and detector),
:mod:`tracekit.findings.model` the :class:`~tracekit.findings.model.Finding` and what rules read."""

from tracekit.findings.engine import RULES, analyze, parse_gate, rule_ids
from tracekit.findings.model import Evidence, Finding

__all__ = ["RULES", "Evidence", "Finding", "analyze", "parse_gate", "rule_ids"]
