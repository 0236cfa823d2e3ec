"""The document model between results and formats: what a view says, in order; never how it looks.

A view (:mod:`tracekit.render.views`) turns one result into a :class:`Document`: a :class:`Title`
and its :class:`Section` s, each an ordered tuple of blocks. A printer (term, Markdown, HTML) prints
any document block by block; it words nothing itself. The ``svg`` format writes a document's
pictures (:class:`Timelines`, :class:`Charts`); JSON is not a printer (it writes the versioned data
contract from the result, :mod:`tracekit.render.json`).

Text in blocks is display text, not markup. A cell or an inline segment is a ``str``, or a
:class:`~tracekit.render.text.Code` for a name (kernel, op, gate) that Markdown and HTML show as
code; every printer escapes every piece for its own syntax. A :data:`Inline` is a sequence of such
segments read as one sentence.

The blocks and what each printer does with them:

* :class:`Title` — the document's heading (terminal: a bold line; Markdown: a heading of
  ``level``; HTML: the page's ``<title>`` and ``<h1>``);
* :class:`Findings` — the report's findings (terminal: a heading line and detail lines per
  finding; Markdown: a table; HTML: a card per finding);
* :class:`Facts` — label/value pairs;
* :class:`Table` — a titled table, "none" when empty, status cells styled when ``status``;
* :class:`Verdict` — one labelled sentence;
* :class:`Paragraph` — lines of text, under a title or following what precedes them;
* :class:`Bullets` — a list of sentences, under a title or following what precedes them;
* :class:`Timelines` and :class:`Charts` — pictures, as data the drawing modules draw
  (:mod:`tracekit.render.timeline`, :mod:`tracekit.render.charts`); the text formats leave them out.

A :class:`Document`'s ``layout`` says how the text formats head its parts: ``page`` (a report:
Markdown headings one level under the title) or ``comment`` (a pull-request comment: bold labels,
detail tables folded in ``<details>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tracekit.analyses.timeline import StepTimeline

#: A sentence as segments: ``str``, or :class:`~tracekit.render.text.Code` for a name.
Inline = tuple[str, ...]
#: Cells whose words are a status (of a diff's quantity, a gate, an expectation): styled by the
#: terminal (colour) and HTML (a ``tk-status-*`` class) in a table whose ``status`` is set.
STATUS_WORDS = frozenset({"lower", "higher", "FAILED", "BROKEN", "met", "within noise"})
#: How a text line is toned: ``muted`` (terminal dim, Markdown italic, HTML ``tk-muted``) or
#: ``strong`` (terminal bold).
Tone = Literal["plain", "muted", "strong"]


@dataclass(frozen=True)
class Title:
    """The document's heading: ``text`` whole (the terminal's line, the page's ``<title>``) and as
    ``parts`` (Markdown's and the page's heading, names as code); ``level``: its Markdown heading
    level; ``in_text``: False when only a page shows it (the ranks' table title heads their text);
    ``page_parts``: the page's heading when it differs from Markdown's (a report's trace name is
    code on the page, text in Markdown's heading)."""

    text: str
    parts: Inline
    level: int
    in_text: bool = True
    page_parts: Inline | None = None


@dataclass(frozen=True)
class Finding:
    """One finding: its ``severity`` and ``rule``, its ``row`` of the findings table, and the
    terminal's ``heading`` line and detail ``lines``."""

    severity: str
    rule: str
    row: Inline
    heading: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Findings:
    """The findings, warnings first; ``headers`` name the cells of each finding's ``row``."""

    title: str
    headers: tuple[str, ...]
    items: tuple[Finding, ...]


@dataclass(frozen=True)
class Facts:
    """Label/value pairs describing what was analysed."""

    pairs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Table:
    """A titled table ("none" when it has no rows).

    ``status``: cells in :data:`STATUS_WORDS` are styled. ``headed``: the Markdown heads the table
    with its title (False where the table follows the text that introduces it: a diff's quantities
    after the verdict, a check's expectations after its title). ``tally``: a summary the title
    carries in Markdown and HTML ("2 failed"; the terminal's rows say it). ``folded``: Markdown
    folds the table in ``<details>`` under its title (a comment's detail tables).
    """

    title: str
    headers: tuple[str, ...]
    rows: tuple[Inline, ...]
    status: bool = False
    headed: bool = True
    tally: str | None = None
    folded: bool = False


@dataclass(frozen=True)
class Verdict:
    """One sentence under a label ("Verdict: fused … into one Triton kernel.")."""

    label: str
    parts: Inline


@dataclass(frozen=True)
class Paragraph:
    """Lines of text: under ``title`` (the terminal: "Title: line"; Markdown and HTML: a heading), or
    following what precedes them when ``title`` is None. ``terse``: the terminal's shorter wording
    of the whole paragraph, when it has one."""

    lines: tuple[str, ...]
    title: str | None = None
    tone: Tone = "plain"
    terse: str | None = None


@dataclass(frozen=True)
class Bullets:
    """Sentences as a list: under ``title``, or following what precedes them when ``title`` is None.

    ``folded``: Markdown folds them in ``<details>`` under the title. The terminal shows the title
    line only when ``title_in_term``, starts each line with ``marker`` and tones them ``tone``.
    """

    lines: tuple[str, ...]
    title: str | None = None
    folded: bool = False
    tone: Tone = "plain"
    marker: str = ""
    title_in_term: bool = False


@dataclass(frozen=True)
class StepDrawing:
    """One step's timeline to draw ``width`` units wide, under a ``side`` label (a diff's "A: …"),
    its ids prefixed ``prefix`` on a page; ``name`` and ``alt``: the picture's file stem and
    alternative text where it is written as a file."""

    step: StepTimeline
    width: int
    prefix: str
    name: str
    alt: str
    side: str | None = None


@dataclass(frozen=True)
class TimelineChoice:
    """One entry of a step selector: its ``key``, its ``label`` and the drawings it shows."""

    key: str
    label: str
    drawings: tuple[StepDrawing, ...]


@dataclass(frozen=True)
class Timelines:
    """Step timelines to choose from, ``default`` shown first; ``empty``: the sentence when there
    are none."""

    choices: tuple[TimelineChoice, ...]
    default: str
    empty: str

    def shown(self) -> TimelineChoice | None:
        """The choice shown first (None without choices)."""
        return next((c for c in self.choices if c.key == self.default), None)


@dataclass(frozen=True)
class Chart:
    """One chart of :mod:`tracekit.render.charts`: the function ``chart`` draws it from ``subject``
    (a report or a diff); ``caption`` names it for screen readers on a page; ``name`` and ``alt``:
    the picture's file stem and alternative text where it is written as a file."""

    chart: str
    subject: object
    name: str
    caption: str
    alt: str


@dataclass(frozen=True)
class Charts:
    """Charts, in order; those their subject has no data for are left out when drawn."""

    charts: tuple[Chart, ...]


#: Every kind of block a section holds.
Block = Findings | Facts | Table | Verdict | Paragraph | Bullets | Timelines | Charts
#: Blocks that are pictures (the text formats leave them out).
PICTURES = (Timelines, Charts)


@dataclass(frozen=True)
class Section:
    """A part of the document: ``id`` and ``title`` (a page's sections and its links), its blocks."""

    id: str
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Document:
    """One result, worded: ``kind`` (report, diff, check, ranks, compare), its title, its sections
    in order, and its ``layout`` (module docstring)."""

    kind: str
    title: Title
    sections: tuple[Section, ...]
    layout: Literal["page", "comment"]

    def blocks(self) -> list[Block]:
        """Every block, in order (the text formats print them one after the other)."""
        return [block for section in self.sections for block in section.blocks]
