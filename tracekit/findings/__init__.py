"""The findings engine (its own room: it reads the analyses and the diff's host-sync measure, and
renders nothing): :mod:`tracekit.findings.rules` holds the rule table, the detectors and
:class:`~tracekit.findings.rules.Finding`."""

from tracekit.findings.rules import RULES, Evidence, Finding, analyze, parse_gate, rule_ids

__all__ = ["RULES", "Evidence", "Finding", "analyze", "parse_gate", "rule_ids"]
