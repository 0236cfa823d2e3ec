"""``tracekit report TRACE`` as a document: the findings, the step timelines and charts, the trace's
facts, then every table, the memory hint and the rules behind the figures (the notes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.document import (Bullets, Chart, Charts, Document, Facts, Paragraph, Section, StepDrawing,
                                      TimelineChoice, Timelines, Title)
from tracekit.render.text import Code
from tracekit.render.views import decomposition, findings, memory, tables
from tracekit.render.views.blocks import table
from tracekit.render.views.labels import step_label

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: Width (user units and CSS pixels) a report's step timeline is drawn at.
TIMELINE_WIDTH = 1200


def document(report: Report) -> Document:
    """The report's document; its sections: what limits it, findings, timeline, charts, trace, tables."""
    facts = tables.facts_lines(report)
    name = facts[0][1]
    rest: list = [table(t) for t in tables.all_tables(report)]
    hint = memory.hint(report)
    if hint:
        rest.append(Paragraph((hint,), "Memory"))
    notes = tables.notes(report)
    if notes:
        rest.append(Bullets(tuple(notes), "Notes", marker="note: "))
    return Document("report", Title(f"tracekit report: {name}", ("tracekit report: ", name), 1,
                                      page_parts=("tracekit report: ", Code(name))), (
        *_limit(report),
        Section("findings", "Findings", (findings.findings(report.findings, _step_starts(report)),)),
        Section("timeline", "Step timeline", (timelines(report),)),
        Section("charts", "Charts", (charts(report),)),
        Section("trace", "Trace", (Facts(tuple(facts[1:])),)),
        Section("tables", "Tables", tuple(rest)),
    ), "page")


def _step_starts(report: Report) -> dict[int, int]:
    """Each unit's CPU start (ns), what evidence times are given from."""
    return dict(zip(report.steps["number"].to_list(), report.steps["start_ns"].to_list()))


def _limit(report: Report) -> tuple[Section, ...]:
    """What limits the trace: the line the report opens with, before the findings (none without steps)."""
    line = decomposition.limit_line(report)
    return (Section("limit", "What limits it", (Paragraph((line,)),)),) if line else ()


def timelines(report: Report) -> Timelines:
    """One timeline per step, the report's chosen step shown first."""
    found = report.timelines
    if found is None:
        return Timelines((), "", "no timeline (this report was built without timelines)")
    if not found.steps:
        return Timelines((), "", "no steps to draw")
    numbers = {s.number for s in found.steps}
    default = found.default_step if found.default_step in numbers else found.steps[0].number
    alt = "step timeline" + (f" ({step_label(report, found.default_step)})" if found.default_step is not None else "")
    return Timelines(tuple(
        TimelineChoice(str(s.number), (s.name or step_label(report, s.number)) + (" (shown first)" if s.number == default
                                                                                  else ""),
                       (StepDrawing(s, TIMELINE_WIDTH, f"tl{s.number}", "timeline", alt),))
        for s in found.steps), str(default), "no steps to draw")


def charts(report: Report) -> Charts:
    """GPU time by class per step, the roofline, memory over time (each drawn when it has data)."""
    return Charts((
        Chart("gpu_time_by_class", report, "gpu_time_by_class", "GPU time by kernel class per step",
              "GPU time by kernel class per step"),
        Chart("roofline", report, "roofline", "Achieved throughput against the device's ceilings (one point per kernel)",
              "achieved throughput against the device's ceilings (roofline)"),
        Chart("memory_timeline", report, "memory", "Memory allocated over time", "memory over time"),
    ))
