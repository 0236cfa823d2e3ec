"""``tracekit check`` as a document: the trace's expectations, each met or broken, with what it asked
and what the units showed in words (the same words ``tracekit.check/1`` carries). Nothing here
computes a figure: an expectation's figures come from its check item (:mod:`tracekit.diff.expect`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracekit.render.document import Bullets, Document, Paragraph, Section, Title
from tracekit.render.text import Code, Rows
from tracekit.render.views.blocks import table

if TYPE_CHECKING:
    from tracekit.results.check import CheckResult, Item


def document(result: CheckResult) -> Document:
    """Title, the description's lines, the expectations' table, the notes."""
    title = check_title(result)
    blocks: list = []
    if result.description:
        blocks.append(Paragraph(tuple(result.description.splitlines())))
    blocks.append(table(check_rows(result), status=True, headed=False))
    if result.notes:
        blocks.append(Bullets(tuple(result.notes), tone="muted"))
    return Document("check", Title(f"tracekit check: {title}", ("tracekit check: ", title), 3),
                    (Section("expectations", "Expectations", tuple(blocks)),), "comment")


def check_rows(result: CheckResult) -> Rows:
    rows = [[r.key, Code(expected_text(r)), observed_text(r), "met" if r.met else "BROKEN"] for r in result.items]
    return ("Expectations", ["expectation", "expected", "observed", "result"], rows)


def check_title(result: CheckResult) -> str:
    broken = sum(1 for r in result.items if not r.met)
    return (f"{result.trace}: {len(result.items) - broken} of {len(result.items)} expectations met"
            + (f", {broken} broken" if broken else ""))


# -- an expectation's figures as words (every format shows the same text) -------------------------

def _us(ns: float) -> int | float:
    # The file's µs limit back from ns: an integer limit prints as one ("240", not "240.0").
    return int(ns) // 1000 if isinstance(ns, int) and ns % 1000 == 0 else ns / 1000


#: (unit, op) -> the expected value as words, for bounds.
_EXPECTED: dict[tuple[str, str], Callable[[Any], str]] = {
    ("count", "=="): lambda v: f"exactly {v}", ("count", ">="): lambda v: f"≥ {v}",
    ("count", "<="): lambda v: f"≤ {v:,}", ("bytes", "<="): lambda v: f"≤ {v:,}",
    ("percent", ">="): lambda v: f"≥ {v}%", ("ns", "<="): lambda v: f"≤ {_us(v):,} µs",
}
#: unit -> one observed value as words.
_OBSERVED: dict[str, Callable[[Any], str]] = {
    "count": lambda v: f"{int(v):,}", "bytes": lambda v: f"{int(v):,}",
    "percent": lambda v: f"{v:.1f}%", "ns": lambda v: f"{v / 1000:,.1f} µs",
}


def expected_text(item: Item) -> str:
    """What the expectation asks, in words: "exactly 4", "≤ 240 µs", "present", or the pattern."""
    if item.unit == "names":
        return str(item.expected_value)
    if item.unit == "bool":
        return "present" if item.expected_value else "absent"
    return _EXPECTED[item.unit, item.op](item.expected_value)


def observed_text(item: Item) -> str:
    """What the units showed, in words: "5 in every step", "4–5 across steps", "absent"…"""
    if item.unit == "names":
        if item.op == "present":
            return (f"{item.example} in every step" if item.met else
                    f"in {item.steps_present} of {item.steps} steps" if item.steps_present else "absent")
        return "absent" if item.met else f"{item.example} in {item.steps_present} of {item.steps} steps"
    if item.unit == "bool":
        return ("present in every step" if item.steps and item.steps_present == item.steps else
                "absent in every step" if not item.steps_present else
                f"present in {item.steps_present} of {item.steps} steps")
    if item.observed_min is None or item.observed_max is None:
        return "no steps"
    word = _OBSERVED[item.unit]
    if item.observed_min == item.observed_max:
        return f"{word(item.observed_min)} in every step"
    return f"{word(item.observed_min)}–{word(item.observed_max)} across steps"
