"""``tracekit.check/1``: the JSON of ``tracekit check TRACE --expect FILE``, ``{schema, trace,
description, passed, items: [{key, expected, observed, met, unit, op, expected_value, steps,
steps_met, observed_min, observed_max, steps_present, example}], notes}``. ``expected``/``observed`` are the words the other formats show; the rest are the numbers
behind them (:class:`tracekit.diff.expect.Item`): ``unit`` count | bytes | ns | percent | bool |
names, ``op`` == | >= | <= | present | absent, ``expected_value`` (time limits in ns; the pattern for
names), ``steps``/``steps_met`` (units measured / meeting it), ``observed_min``/``observed_max``
(bounds; null without steps), ``steps_present`` and ``example`` (bool and names; else null).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracekit.render.views.check import expected_text, observed_text

if TYPE_CHECKING:
    from tracekit.results.check import CheckResult


#: The version string this contract's documents start with (``"schema"``): keys may be added
#: within a version; removing or changing the meaning of one bumps it (``/2``).
SCHEMA = "tracekit.check/1"


def data(result: CheckResult) -> dict[str, Any]:
    """A check result as plain data following the ``tracekit.check/1`` contract."""
    return {"schema": SCHEMA, "trace": result.trace, "description": result.description,
            "passed": result.passed,
            "items": [{"key": r.key, "expected": expected_text(r), "observed": observed_text(r), "met": r.met,
                       "unit": r.unit, "op": r.op, "expected_value": r.expected_value, "steps": r.steps,
                       "steps_met": r.steps_met, "observed_min": r.observed_min, "observed_max": r.observed_max,
                       "steps_present": r.steps_present, "example": r.example}
                      for r in result.items],
            "notes": list(result.notes)}
