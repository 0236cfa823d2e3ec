"""The one scan of a frame's names for every word of the table (``rules.classify_many``, Polars'
Aho-Corasick) answers exactly as each word's own substring test does: ``classify_frame`` and
``classify_kernel`` agree on every real name, on names where one word of the table lies inside
another or overlaps it, and on long distinct names; and the scan finds each word wherever it is."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from tracekit.classify import _scan, classify_frame, classify_kernel
from tracekit.classify.rules import _TABLE_WORDS, RULES, Words, _classify

DATA = Path(__file__).resolve().parents[1] / "data"


def _names() -> list[tuple[str, str | None, str | None]]:
    rows = json.loads((DATA / "real_kernel_names.json").read_text())["cases"]
    return [(r["name"], r.get("launch_api"), r.get("cpu_op")) for r in rows]


def _single(name: str, launch_api: str | None, cpu_op: str | None) -> tuple[str, str, str]:
    info = classify_kernel(name, launch_api=launch_api, cpu_op=cpu_op)
    return info.kernel_class, info.library, info.rule


def _batch(rows: list[tuple[str, str | None, str | None]]) -> list[tuple[str, str, str]]:
    frame = pl.DataFrame({"name": [r[0] for r in rows], "kind": ["kernel"] * len(rows),
                          "launch_api": [r[1] for r in rows], "cpu_op": [r[2] for r in rows]},
                         schema={"name": pl.String, "kind": pl.String, "launch_api": pl.String, "cpu_op": pl.String})
    out = classify_frame(frame)
    return list(zip(out["kernel_class"], out["library"], out["rule"]))


def test_every_words_matcher_of_the_table_is_scanned() -> None:
    def walk(matcher) -> list[Words]:
        found = [matcher] if isinstance(matcher, Words) else []
        for part in getattr(matcher, "parts", ()):
            found += walk(part)
        return found

    matchers = [w for rule in RULES for m in (rule.pattern, rule.when) if m is not None for w in walk(m)]
    assert len(matchers) > 50
    for matcher in matchers:
        assert set(matcher.words) <= _TABLE_WORDS[0 if matcher.fold else 1], matcher


def test_the_scan_finds_nested_and_overlapping_words() -> None:
    words = ["mm", "gemm", "sgemm", "gemm_", "emm_x", "a"]
    assert _scan(["xsgemm_x", "", "bbb", "aa"], words) == [
        frozenset({"mm", "gemm", "sgemm", "gemm_", "emm_x"}), frozenset(), frozenset(), frozenset({"a"})]
    assert _scan([], words) == []
    assert _scan(["abc"], []) == [frozenset()]


def test_frame_and_single_answers_agree_on_real_names() -> None:
    rows = _names()
    _classify.cache_clear()
    single = [_single(*row) for row in rows]
    _classify.cache_clear()
    assert _batch(rows) == single


@pytest.mark.parametrize("seed", [0, 1])
def test_frame_and_single_answers_agree_on_spliced_and_long_names(seed: int) -> None:
    # Real names with words of the table spliced in at random places (one inside another, across a
    # name's parts) and long random template arguments: the scan must see every word the loop sees.
    rng = random.Random(seed)
    base = _names()
    words = sorted(_TABLE_WORDS[0] | _TABLE_WORDS[1])
    rows = []
    for i in range(400):
        name, api, op = base[rng.randrange(len(base))]
        cut = rng.randrange(len(name) + 1)
        spliced = "".join(rng.choice(words) for _ in range(rng.randrange(4)))
        tail = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_:<>0123456789") for _ in range(rng.choice((0, 50, 2000))))
        rows.append((f"{name[:cut]}{spliced}{name[cut:]}{tail}{i}", api, op))
    _classify.cache_clear()
    single = [_single(*row) for row in rows]
    _classify.cache_clear()
    assert _batch(rows) == single
