"""The findings answer key (tests/findings/answer_key/: traces.toml and one file per rule): reading it, matching today's findings to
its entries, and scoring it.

Contract: :func:`load_key` reads the key into :class:`Key` (its ``[[trace]]`` and ``[[finding]]``
tables as frozen rows); :func:`finding_key` gives the identity a finding is judged under (trace, rule,
severity, first evidence name cut to :data:`EVIDENCE_CHARS`); :func:`trace_path` finds a keyed trace
on disk (sample traces always; real traces from tests/data/real, else from the corpus folder the
environment variable ``TRACEKIT_REAL_TRACES`` names, else None); :func:`score` turns judged findings
into the precision and recall figures the README states. Only the standard library and tracekit's
:class:`~tracekit.findings.model.Finding` are read: the tests and bench/findings_precision.py share it.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: The key's folder: ``traces.toml`` holds the ``[[trace]]`` rows, ``<rule>.toml`` the ``[[finding]]``
#: rows of one rule (so work on one rule re-judges one file).
KEY_DIR = TESTS / "findings" / "answer_key"
SAMPLES = ROOT / "sample_traces"
REAL_COPIES = TESTS / "data" / "real"
#: The four verdicts. ``true``: the claim and its fix are right; ``false``: the claim is wrong;
#: ``misdiagnosed``: something is wrong there but the stated cause or fix is not; ``trivial``: true
#: but it saves < 1 % of the step or < 20 µs per step.
VERDICTS = ("true", "false", "misdiagnosed", "trivial")
CORPORA = ("sample", "real")
#: The first evidence name is cut here: long enough to tell two findings of one rule apart, short
#: enough that a kernel's template arguments do not make the key unreadable.
EVIDENCE_CHARS = 80


@dataclass(frozen=True)
class KeyedTrace:
    """A ``[[trace]]`` row: ``name`` (path under sample_traces/ or the real file's stem, no
    ``.json.gz``), ``corpus``, ``family``, ``healthy`` (any warning on it is false), ``planted`` (the
    planted problem's rule, "" when none), ``caught`` (found with the right fix), ``note``, ``missed``."""

    name: str
    corpus: str
    family: str
    healthy: bool
    planted: str
    caught: bool | None
    note: str
    missed: str


@dataclass(frozen=True)
class Judged:
    """A ``[[finding]]`` row: the finding's identity (``trace``, ``rule``, ``severity``,
    ``evidence``) and the hand verdict with its ``reason``."""

    trace: str
    rule: str
    severity: str
    evidence: str
    verdict: str
    reason: str

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.trace, self.rule, self.severity, self.evidence)


@dataclass(frozen=True)
class Key:
    """The whole key: ``traces`` by name and the ``findings`` in file order."""

    traces: dict[str, KeyedTrace]
    findings: tuple[Judged, ...]


@dataclass(frozen=True)
class Scores:
    """Precision and recall of one set of judged findings. A precision is ``true`` findings over all
    judged findings of that kind (None when there are none); recall is the planted problems caught
    with the right fix over all planted problems."""

    warnings: int
    true_warnings: int
    findings: int
    true_findings: int
    planted: int
    caught: int

    @staticmethod
    def _ratio(num: int, den: int) -> float | None:
        return num / den if den else None

    @property
    def warning_precision(self) -> float | None:
        return self._ratio(self.true_warnings, self.warnings)

    @property
    def finding_precision(self) -> float | None:
        return self._ratio(self.true_findings, self.findings)

    @property
    def recall(self) -> float | None:
        return self._ratio(self.caught, self.planted)


def load_key(folder: Path = KEY_DIR) -> Key:
    """The key in ``folder`` (tests/findings/answer_key/ by default): the ``[[trace]]`` and
    ``[[finding]]`` rows of every ``*.toml`` in it, files in name order."""
    rows: dict[str, list[dict]] = {"trace": [], "finding": []}
    for path in sorted(folder.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for table, found in rows.items():
            found += data.get(table, [])
    traces = {t["name"]: KeyedTrace(name=t["name"], corpus=t["corpus"], family=t["family"],
                                    healthy=t["healthy"], planted=t["planted"], caught=t.get("caught"),
                                    note=t.get("note", ""), missed=t.get("missed", ""))
              for t in rows["trace"]}
    findings = tuple(Judged(**f) for f in rows["finding"])
    return Key(traces=traces, findings=findings)


def finding_key(trace: str, finding) -> tuple[str, str, str, str]:
    """The identity ``finding`` (a :class:`tracekit.findings.model.Finding`) is judged under on
    ``trace``: (trace, rule, severity, first evidence name cut to :data:`EVIDENCE_CHARS`)."""
    first = finding.evidence[0].name[:EVIDENCE_CHARS] if finding.evidence else ""
    return (trace, finding.rule, finding.severity, first)


def trace_path(trace: KeyedTrace) -> Path | None:
    """Where ``trace`` lies: sample_traces/NAME.json.gz; a real trace's copy in tests/data/real, else
    the corpus folder named by ``TRACEKIT_REAL_TRACES``; None when neither holds it."""
    file = f"{trace.name}.json.gz"
    if trace.corpus == "sample":
        return SAMPLES / file
    candidates = [REAL_COPIES / file]
    corpus = os.environ.get("TRACEKIT_REAL_TRACES")
    if corpus:
        candidates.append(Path(corpus) / file)
    return next((p for p in candidates if p.is_file()), None)


def score(key: Key, findings: Iterable[Judged], corpus: str | None = None) -> Scores:
    """The :class:`Scores` of ``findings`` (judged rows, e.g. ``key.findings``) and of the planted
    problems of ``key``'s traces, both limited to ``corpus`` ("sample" | "real") when given."""
    def wanted(name: str) -> bool:
        return corpus is None or key.traces[name].corpus == corpus

    rows = [f for f in findings if wanted(f.trace)]
    warnings = [f for f in rows if f.severity == "warning"]
    planted = [t for t in key.traces.values() if t.planted and wanted(t.name)]
    return Scores(warnings=len(warnings), true_warnings=sum(f.verdict == "true" for f in warnings),
                  findings=len(rows), true_findings=sum(f.verdict == "true" for f in rows),
                  planted=len(planted), caught=sum(bool(t.caught) for t in planted))


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def precision_markdown(key: Key) -> str:
    """The README's precision table: per corpus (sample, real, all) the keyed traces, warnings judged
    true over warnings, all findings judged true over all findings, and planted problems caught."""
    rows = ["| corpus | traces | true warnings | warning precision | true findings | finding precision "
            "| planted problems caught |", "|---|---:|---:|---:|---:|---:|---:|"]
    for corpus, label in (("sample", "sample_traces/ (H200, H100 and CPU captures)"), ("real", "real public traces"),
                          (None, "all")):
        s = score(key, key.findings, corpus)
        traces = sum(1 for t in key.traces.values() if corpus is None or t.corpus == corpus)
        planted = f"{s.caught}/{s.planted}" if s.planted else "–"
        rows.append(f"| {label} | {traces} | {s.true_warnings}/{s.warnings} | {_pct(s.warning_precision)} | "
                    f"{s.true_findings}/{s.findings} | {_pct(s.finding_precision)} | {planted} |")
    return "\n".join(rows) + "\n"
