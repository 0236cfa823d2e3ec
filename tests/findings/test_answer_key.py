"""The findings answer key (answer_key/ beside this file) against what tracekit emits today.

(a) Every finding on every keyed trace has its judged entry and every entry still fires: a rule change
that adds, removes or changes a judged finding fails here until the key is judged again. Sample traces
always; real traces from tests/data/real always, the rest of the real corpus when
``TRACEKIT_REAL_TRACES`` names its folder. (b) The key is consistent with itself. (c) Its precision and
recall figures are pinned: they move when a rule is fixed, and this test then moves with the key.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from answer_key import CORPORA, REAL_COPIES, SAMPLES, VERDICTS, Judged, KeyedTrace, Scores, finding_key, load_key, score, trace_path

import tracekit

KEY = load_key()
SAMPLE_TRACES = [t for t in KEY.traces.values() if t.corpus == "sample"]
REAL_TRACES = [t for t in KEY.traces.values() if t.corpus == "real"]
CORPUS = os.environ.get("TRACEKIT_REAL_TRACES")


def judged_identities(trace: KeyedTrace) -> Counter:
    return Counter(f.identity for f in KEY.findings if f.trace == trace.name)


def emitted_identities(trace: KeyedTrace, findings) -> Counter:
    return Counter(finding_key(trace.name, f) for f in findings)


@pytest.mark.parametrize("trace", SAMPLE_TRACES, ids=lambda t: t.name)
def test_sample_findings_match_the_key(sample, trace):
    findings = sample(trace.name).report().findings
    assert emitted_identities(trace, findings) == judged_identities(trace)


@pytest.mark.parametrize("trace", REAL_TRACES, ids=lambda t: t.name)
def test_real_findings_match_the_key(trace):
    path = trace_path(trace)
    if path is None:
        pytest.skip("not in tests/data/real: set TRACEKIT_REAL_TRACES to the real-trace corpus folder")
    findings = tracekit.open(path).report().findings
    assert emitted_identities(trace, findings) == judged_identities(trace)


def test_every_sample_trace_is_keyed():
    shipped = {str(p.relative_to(SAMPLES)).removesuffix(".json.gz") for p in SAMPLES.rglob("*.json.gz")
               if not p.name.endswith(".et.json.gz")}
    assert shipped == {t.name for t in SAMPLE_TRACES}


def test_every_real_trace_at_hand_is_keyed():
    folders = [REAL_COPIES] + ([Path(CORPUS)] if CORPUS else [])
    at_hand = {p.name.removesuffix(".json.gz") for folder in folders for p in folder.glob("*.json.gz")}
    assert at_hand and at_hand <= {t.name for t in REAL_TRACES}


def test_key_rows_are_complete():
    for trace in KEY.traces.values():
        assert trace.corpus in CORPORA, trace.name
        assert trace.family.strip(), trace.name
        assert (trace.caught is None) == (not trace.planted), trace.name
    for judged in KEY.findings:
        assert judged.trace in KEY.traces, judged.trace
        assert judged.verdict in VERDICTS, judged
        assert judged.severity in ("warning", "info"), judged
        assert judged.reason.strip() and judged.evidence.strip(), judged
    assert len({f.identity for f in KEY.findings}) == len(KEY.findings)


def test_healthy_traces_have_no_true_warning():
    for judged in KEY.findings:
        if KEY.traces[judged.trace].healthy and judged.severity == "warning":
            assert judged.verdict != "true", judged


def test_caught_means_a_finding_of_the_planted_rule_that_is_right():
    for trace in KEY.traces.values():
        if not trace.planted:
            continue
        right = [f for f in KEY.findings
                 if f.trace == trace.name and f.rule == trace.planted and f.verdict in ("true", "trivial")]
        assert bool(right) == trace.caught, trace.name


def test_scores_count_true_over_judged():
    # Hand-made rows (not today's key, which moves with every rule): one true warning, one trivial info.
    trace = "antipatterns/antipatterns_host-sync"
    judged = [Judged(trace, "host_sync", "warning", "aten::item", "true", "planted"),
              Judged(trace, "occupancy_query", "info", "aten::nonzero", "trivial", "5.7 µs")]
    scores = score(KEY, judged, "sample")
    assert (scores.warnings, scores.true_warnings, scores.findings, scores.true_findings) == (1, 1, 2, 1)
    assert scores.finding_precision == 0.5
    assert Scores(0, 0, 0, 0, 0, 0).warning_precision is None


def test_todays_figures():
    """Today's precision and recall, pinned: update with the key when a rule changes."""
    figures = {corpus: score(KEY, KEY.findings, corpus) for corpus in (None, "sample", "real")}
    assert figures[None] == Scores(warnings=62, true_warnings=62, findings=85, true_findings=75,
                                   planted=13, caught=13)
    assert figures["sample"] == Scores(warnings=35, true_warnings=35, findings=55, true_findings=47,
                                       planted=13, caught=13)
    assert figures["real"] == Scores(warnings=27, true_warnings=27, findings=30, true_findings=28,
                                     planted=0, caught=0)
    assert Counter(f.verdict for f in KEY.findings) == {'true': 75, 'trivial': 10}

def test_docs_state_the_keys_precision(request):
    """The precision table of docs/reference/findings.md is the key's (refresh with ``pytest
    --update-goldens``)."""
    from answer_key import precision_markdown
    from doc_blocks import check_block

    check_block(request, "PRECISION", precision_markdown(KEY))
