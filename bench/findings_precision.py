"""How often tracekit's findings are right: precision of warnings and of all findings, and recall of
the planted problems, from the hand-judged answer key (tests/findings/answer_key/) and the
findings tracekit emits today.

    python bench/findings_precision.py                       # sample traces + tests/data/real copies
    TRACEKIT_REAL_TRACES=DIR python bench/findings_precision.py  # + the whole real corpus in DIR

Each keyed trace is opened and reported; each finding is matched to its judged entry by (trace, rule,
severity, first evidence name). Precision is ``true`` verdicts over judged findings (``false``,
``misdiagnosed`` and ``trivial`` count against it); recall is the planted problems caught with the right
fix over the planted problems. A finding with no entry is counted as *unjudged* and an entry that no
longer fires as *stale*: either means the key must be judged again before the figures mean anything.
Prints the figures per corpus (sample = the shipped H200 captures, real = public traces of other GPUs and
workloads), then the verdicts per rule and per trace family.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the key's reader, this checkout's tracekit

import tracekit  # noqa: E402
from answer_key import VERDICTS, Judged, finding_key, load_key, score, trace_path  # noqa: E402


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def judged_today() -> tuple[list[Judged], list[str], list[str], list[str]]:
    """Today's findings on every keyed trace at hand, as their judged entries; with the unjudged
    findings, the stale entries and the traces not at hand."""
    key = load_key()
    by_identity = {f.identity: f for f in key.findings}
    judged, unjudged, missing, seen = [], [], [], set()
    for trace in key.traces.values():
        path = trace_path(trace)
        if path is None:
            missing.append(trace.name)
            continue
        seen.add(trace.name)
        for finding in tracekit.open(path).report().findings:
            identity = finding_key(trace.name, finding)
            if identity in by_identity:
                judged.append(by_identity[identity])
            else:
                unjudged.append(" / ".join(identity))
    fired = {j.identity for j in judged}
    stale = [" / ".join(f.identity) for f in key.findings if f.trace in seen and f.identity not in fired]
    return judged, unjudged, stale, missing


def main() -> int:
    key = load_key()
    judged, unjudged, stale, missing = judged_today()
    rows = []
    for corpus in ("sample", "real", None):
        s = score(key, judged, corpus)
        traces = sum(1 for t in key.traces.values() if (corpus is None or t.corpus == corpus)
                     and t.name not in missing)
        rows.append([corpus or "all", traces, f"{s.true_warnings}/{s.warnings}", _pct(s.warning_precision),
                     f"{s.true_findings}/{s.findings}", _pct(s.finding_precision),
                     f"{s.caught}/{s.planted}" if s.planted else "–", _pct(s.recall)])
    print(_table(["corpus", "traces", "true warnings", "precision", "true findings", "precision",
                  "planted caught", "recall"], rows))

    for title, group in (("rule", lambda f: f.rule), ("family", lambda f: key.traces[f.trace].family)):
        counts: dict[str, Counter] = defaultdict(Counter)
        for f in judged:
            counts[group(f)][f.verdict] += 1
        body = [[name, *(c[v] for v in VERDICTS), sum(c.values()), _pct(c["true"] / sum(c.values()))]
                for name, c in sorted(counts.items(), key=lambda kv: (kv[1]["true"] / sum(kv[1].values()), kv[0]))]
        print(f"\nverdicts per {title}\n" + _table([title, *VERDICTS, "all", "precision"], body))

    if missing:
        print(f"\n{len(missing)} real traces not at hand (set TRACEKIT_REAL_TRACES to include them)")
    for label, items in (("unjudged findings (judge them in the key)", unjudged), ("stale key entries", stale)):
        if items:
            print(f"\n{label}:\n" + "\n".join(f"  {i}" for i in items))
    return 1 if unjudged or stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
