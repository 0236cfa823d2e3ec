"""SVG: the report's pictures as standalone files, and the Markdown that shows them (for pull requests
and a repository's docs).

What ``-o`` means with ``--format svg`` (read by :meth:`SvgRenderer.files_target` before any work):

* ``-o DIR/`` (a trailing slash, an existing directory, or any name not ending ``.svg``/``.md``):
  the directory (made when missing) receives every picture and a Markdown document that shows them
  by relative links — ``report.md`` for ``tracekit report``, ``diff.md`` for ``tracekit diff``;
* ``-o DIR/NAME.md``: the same, the Markdown named ``NAME.md``;
* ``-o FILE.svg``: one picture: the step timeline of ``tracekit report`` (the GPU time by class
  chart when the report has no timeline), the per-class bars of ``tracekit diff`` (a picture saying
  so when there is nothing to draw);
* no ``-o`` (or ``-o -``): exit 2 — pictures are files, not a stream.

The files of ``tracekit report`` (:data:`REPORT_FILES`; a picture the report has no data for is
left out, and so is its link): ``timeline.svg`` (the default step, drawn by
:func:`tracekit.render.timeline.draw`), ``gpu_time_by_class.svg``, ``roofline.svg``,
``memory.svg`` (only with memory events) — the charts of :mod:`tracekit.render.charts`. Of
``tracekit diff``: ``class_time_a_vs_b.svg``, ``timeline_a.svg`` and ``timeline_b.svg`` (A's and B's
last aligned pair of steps, drawn to one time scale). The Markdown is the ``md`` format's document with a
*Pictures* section after the findings and facts (saying so when there is nothing to draw). Same
trace, same bytes.

``check``, ``ranks`` and ``compare`` have no pictures: exit 2 with a line naming the formats that
have them.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tracekit.errors import UsageError
from tracekit.render.base import Renderer

if TYPE_CHECKING:
    from tracekit.diff.expect import CheckResult
    from tracekit.diff.gates import GateResult
    from tracekit.diff.result import Diff
    from tracekit.diff.side_by_side import Comparison
    from tracekit.ranks import RankReport
    from tracekit.report import Report

#: ``tracekit report``'s pictures in the order the Markdown shows them: file name and alt text.
REPORT_FILES: tuple[tuple[str, str], ...] = (
    ("timeline.svg", "step timeline"),
    ("gpu_time_by_class.svg", "GPU time by kernel class per step"),
    ("roofline.svg", "achieved throughput against the device's ceilings (roofline)"),
    ("memory.svg", "memory over time"),
)
DIFF_FILES: tuple[tuple[str, str], ...] = (("class_time_a_vs_b.svg", "GPU time per kernel class, A vs B"),
                                           ("timeline_a.svg", "step timeline of A"),
                                           ("timeline_b.svg", "step timeline of B"))
REPORT_INDEX, DIFF_INDEX = "report.md", "diff.md"
_NEEDS_FILES = ("--format svg writes files: give -o DIR/ (every picture and a Markdown page showing them) "
                "or -o FILE.svg (one picture)")


NOTHING_IN_REPORT = "Nothing to draw: this report has no step timeline and no GPU work."
NOTHING_IN_DIFF = "Nothing to draw: neither trace has GPU kernel time."


def nothing_drawn(sentence: str) -> str:
    """A small standalone SVG that says ``sentence`` (what ``-o FILE.svg`` gets when nothing can be drawn)."""
    from xml.sax.saxutils import escape

    return ('<svg xmlns="http://www.w3.org/2000/svg" class="tk-nothing" width="480" height="40" viewBox="0 0 480 40">'
            f'<text x="8" y="24" font-family="sans-serif" font-size="13" fill="#555555">{escape(sentence)}</text></svg>\n')


def timeline(report: Report) -> str | None:
    """The default step's timeline as SVG (:mod:`tracekit.render.timeline`), or None without one."""
    timelines = getattr(report, "timelines", None)
    if timelines is None or not timelines.steps:
        return None
    from tracekit.render import timeline as timeline_mod

    step = next((s for s in timelines.steps if s.number == timelines.default_step), timelines.steps[0])
    return timeline_mod.draw(step)


def report_pictures(report: Report) -> dict[str, str]:
    """``{file name: SVG}`` of the report's pictures (:data:`REPORT_FILES` order; those without data
    left out)."""
    from tracekit.render import charts

    draw: dict[str, Callable[[Report], str | None]] = {
        "timeline.svg": timeline, "gpu_time_by_class.svg": charts.gpu_time_by_class,
        "roofline.svg": charts.roofline, "memory.svg": charts.memory_timeline}
    drawn = {name: draw[name](report) for name, _ in REPORT_FILES}
    return {name: svg for name, svg in drawn.items() if svg is not None}


def diff_timelines(diff: Diff) -> tuple[Any, Any] | None:
    """A's and B's step timelines of the last aligned pair of steps (the steadiest), or None."""
    ta, tb = getattr(diff.a, "timelines", None), getattr(diff.b, "timelines", None)
    if ta is None or tb is None:
        return None
    steps_a, steps_b = {s.number: s for s in ta.steps}, {s.number: s for s in tb.steps}
    pairs = [(steps_a[ua], steps_b[ub]) for ua, ub in diff.unit_pairs if ua in steps_a and ub in steps_b]
    return pairs[-1] if pairs else None


def diff_pictures(diff: Diff) -> dict[str, str]:
    """``{file name: SVG}`` of the diff's pictures (:data:`DIFF_FILES` order; those without data left
    out): the per-class bars, and A's and B's timelines of one aligned step pair on one time scale."""
    from tracekit.render import charts

    drawn = {"class_time_a_vs_b.svg": charts.class_time_a_vs_b(diff)}
    pair = diff_timelines(diff)
    if pair is not None:
        from tracekit.render import timeline as timeline_mod
        from tracekit.render.html import diff_step_width  # the html diff's scale rule: one rule for both

        longest = max(s.end_ns - s.start_ns for s in pair)
        for name, step in zip(("timeline_a.svg", "timeline_b.svg"), pair):
            drawn[name] = timeline_mod.draw(step, width=diff_step_width(step.end_ns - step.start_ns, longest))
    return {name: svg for name, svg in drawn.items() if svg is not None}


def _alt(report: Report, name: str, alt: str) -> str:
    if name == "timeline.svg" and report.timelines is not None and report.timelines.default_step is not None:
        from tracekit.render.sections import step_label

        return f"{alt} ({step_label(report, report.timelines.default_step)})"
    return alt


class SvgRenderer(Renderer):
    """Standalone SVG pictures (``.svg``), written to a directory with their Markdown (module docstring)."""

    name = "svg"
    extensions = (".svg",)
    needs_timelines = True
    writes_files = True

    def files_target(self, output: str | None) -> tuple[str, str | None] | None:
        if output is None or output == "-":
            raise UsageError(_NEEDS_FILES)
        lowered = output.lower()
        if output.endswith(("/", os.sep)) or os.path.isdir(output):
            return output, None
        if lowered.endswith(".svg"):
            return None
        if lowered.endswith((".md", ".markdown")):
            return os.path.dirname(output) or ".", os.path.basename(output)
        return output, None

    def report_files(self, report: Report, *, index: str | None = None) -> dict[str, str]:
        from tracekit.render.markdown import MarkdownRenderer

        pictures = report_pictures(report)
        links = [(_alt(report, name, alt), name) for name, alt in REPORT_FILES if name in pictures]
        text = io.StringIO()
        MarkdownRenderer().report(report, text, pictures=links or [(NOTHING_IN_REPORT, "")])
        return {**pictures, index or REPORT_INDEX: text.getvalue()}

    def diff_files(self, diff: Diff, gate_results: Sequence[GateResult] = (), *,
                   index: str | None = None) -> dict[str, str]:
        from tracekit.render.markdown import MarkdownRenderer

        pictures = diff_pictures(diff)
        pair = diff_timelines(diff)
        steps = {} if pair is None else {"timeline_a.svg": f" ({diff.a.label}, {pair[0].name})",
                                          "timeline_b.svg": f" ({diff.b.label}, {pair[1].name})"}
        links = [(alt + steps.get(name, ""), name) for name, alt in DIFF_FILES if name in pictures]
        text = io.StringIO()
        MarkdownRenderer().diff(diff, text, gate_results, pictures=links or [(NOTHING_IN_DIFF, "")])
        return {**pictures, index or DIFF_INDEX: text.getvalue()}

    def report(self, report: Report, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        pictures = report_pictures(report)
        out.write(next(iter(pictures.values())) if pictures else nothing_drawn(NOTHING_IN_REPORT))

    def diff(self, diff: Diff, out: TextIO, gate_results: Sequence[GateResult] = (), *, color: bool = False,
             width: int | None = None) -> None:
        pictures = diff_pictures(diff)
        out.write(next(iter(pictures.values())) if pictures else nothing_drawn(NOTHING_IN_DIFF))

    def check(self, result: CheckResult, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        _no_pictures("check")

    def ranks(self, rank_report: RankReport, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        _no_pictures("report DIR")

    def compare(self, comparison: Comparison, out: TextIO, gate_results: Sequence[GateResult] = (), *,
                color: bool = False, width: int | None = None) -> None:
        _no_pictures("compare")


def _no_pictures(command: str) -> Any:
    raise UsageError(f"--format svg draws `tracekit report TRACE` and `tracekit diff`; for `tracekit {command}` "
                     "use --format md, html, json or term")
