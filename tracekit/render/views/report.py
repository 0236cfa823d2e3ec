"""``tracekit report TRACE`` as a document: the findings, the step timelines and charts, the trace's
facts, then every table, the memory hint and the rules behind the figures (the notes).

:func:`summary` is the same report cut to what a notebook shows under a cell
(:mod:`tracekit.render.notebook`): what limits it, the first findings, the default step's timeline
when the report has timelines, and the steps, GPU time by class and kernels tables, each cut to its
first rows, naming the frame that holds them all."""

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


#: Findings and table rows a summary shows at most (the report's frames hold them all).
SUMMARY_FINDINGS = 5
SUMMARY_ROWS = 10


def summary(report: Report) -> Document:
    """The report's compact document (module docstring): the same sections' words, fewer of them."""
    full = document(report)
    shown = report.findings[:SUMMARY_FINDINGS]
    found: list = [findings.findings(shown, _step_starts(report))]
    if len(report.findings) > len(shown):
        found.append(Paragraph((f"{len(report.findings) - len(shown)} more: Report.findings holds all "
                                f"{len(report.findings)}",), tone="muted"))
    picked = [_first_rows(tables.steps_table(report), "steps"),
              _first_rows(tables.shares_table(report, "class"), "breakdown.shares"),
              _first_rows(tables.kernels_table(report), "kernels")]
    sections = [*_limit(report), Section("findings", "Findings", tuple(found))]
    if report.timelines is not None and report.timelines.steps:
        sections.append(Section("timeline", "Step timeline", (timelines(report),)))
    sections.append(Section("tables", "Tables", tuple(table(t) for t in picked)))
    return Document("report", full.title, tuple(sections), "page")


def _first_rows(rows: tuple, frame: str) -> tuple:
    """A table cut to :data:`SUMMARY_ROWS` rows, its title naming the Report frame that has them all."""
    title, headers, cells = rows
    if len(cells) <= SUMMARY_ROWS:
        return rows
    return (f"{title} — first {SUMMARY_ROWS} of {len(cells)} rows (all: Report.{frame})", headers,
            cells[:SUMMARY_ROWS])


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
