"""How steps (units) are named in every view: ``ProfilerStep#4``, ``mlp_fwd#2``, ``whole trace``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.results.report import Report


def step_label(report: Report, number: int | None) -> str:
    """The name of step (unit) ``number``: ``ProfilerStep#4``, ``mlp_fwd#2``, ``whole trace``."""
    names = dict(zip(report.steps["number"].to_list(), report.steps["name"].to_list()))
    return names.get(number) or f"ProfilerStep#{number}"
