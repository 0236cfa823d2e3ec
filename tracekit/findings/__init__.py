"""The findings engine (its own room: it reads the analyses, renders nothing, and knows nothing of
the diff): :mod:`tracekit.findings.rules` holds the rule table, the detectors and
:class:`~tracekit.findings.rules.Finding`. :mod:`tracekit.analyses.pipeline` runs it once per
bundle (:func:`tracekit.analyses.pipeline.findings`)."""

from tracekit.findings.rules import RULES, Evidence, Finding, analyze, parse_gate, rule_ids

__all__ = ["RULES", "Evidence", "Finding", "analyze", "parse_gate", "rule_ids"]
