"""The ranks × time picture of the collectives on `tracekit report DIR`'s page: the hand-made two
ranks (drawn, parsed), and the public 8-rank DLRM step in real headless Chromium."""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from browser import Browser, chromium_binary
from factory import write_two_ranks
from tracekit import ranks
from tracekit.commands import main
from tracekit.render import charts

SVG = "{http://www.w3.org/2000/svg}"
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"


def test_two_ranks_drawn_with_waits_and_last_arriver(tmp_path):
    result = ranks.analyze(write_two_ranks(tmp_path / "ranks"), workers=1)
    root = ET.fromstring(charts.rank_collectives(result))
    assert root.get("class") == "tk-rank-collectives"
    rows = {g.get("data-rank"): g for g in root.iter(f"{SVG}g") if g.get("class") == "tk-rank-row"}
    assert sorted(rows) == ["0", "1"]
    # Each rank is in both all-reduces: 150→350 and 550→650 µs for rank 0 on its clock.
    bars = [(r.get("data-instance"), r.get("data-ts"), r.get("data-dur"))
            for r in rows["0"].iter(f"{SVG}rect") if r.get("class") == "tk-collective"]
    assert [(i, int(d)) for i, _, d in bars] == [("0", 200_000), ("1", 100_000)]
    # Rank 0 waited 300 − 150 = 150 µs at #0 and 600 − 550 = 50 µs at #1 (rank 1's times less its
    # 5,000.25 µs offset); rank 1, last at both, waited at neither.
    waits = [int(r.get("data-wait-ns")) for r in rows["0"].iter(f"{SVG}rect") if r.get("class") == "tk-wait"]
    assert waits == [150_000, 50_000]
    assert not [r for r in rows["1"].iter(f"{SVG}rect") if r.get("class") == "tk-wait"]
    last = [(p.get("data-instance"), p.get("data-rank")) for p in root.iter(f"{SVG}path") if p.get("class") == "tk-last"]
    assert last == [("0", "1"), ("1", "1")]
    hover = next(r for r in rows["0"].iter(f"{SVG}rect") if r.get("class") == "tk-wait").find(f"{SVG}title").text
    assert hover.splitlines()[:2] == ["rank 0 · all_reduce #0 (step 1)",
                                      "arrived 0 ns after the first rank; waited 150.0 µs for rank 1"]


def test_no_picture_without_matched_collectives(tmp_path):
    result = ranks.analyze(write_two_ranks(tmp_path / "ranks"), workers=1)
    assert charts.rank_collectives(type(result)(directory="d", ranks=result.ranks, slowest=None)) is None


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TRACEKIT_REAL_TRACES"), reason="TRACEKIT_REAL_TRACES not set")
def test_dlrm_page_draws_eight_rows_and_rank_7_last_at_collective_0(tmp_path):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    directory = tmp_path / "dlrm"
    directory.mkdir()
    for rank in range(8):
        shutil.copy(Path(os.environ["TRACEKIT_REAL_TRACES"]) / DLRM.format(rank), directory)
    page_path = tmp_path / "ranks.html"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(directory), "-o", str(page_path)])
    assert exit_info.value.code == 0
    with Browser(binary) as browser:
        page = browser.new_page()
        page.open(page_path.as_uri())
        assert page.errors() == []
        picture = "document.querySelector('figure.tk-chart[data-chart=\"rank_collectives\"] svg.tk-rank-collectives')"
        rows = page.evaluate(f"[...{picture}.querySelectorAll('g.tk-rank-row')].map(g => g.dataset.rank)")
        assert rows == [str(r) for r in range(8)]
        # Every row is drawn with a visible height, one above the other.
        tops = page.evaluate(f"[...{picture}.querySelectorAll('g.tk-rank-row')]"
                             ".map(g => [g.getBoundingClientRect().top, g.getBoundingClientRect().height])")
        assert all(h > 5 for _, h in tops) and [t for t, _ in tops] == sorted(t for t, _ in tops)
        # Collective #0 (the first all_to_all): rank 7 arrived last; 8 bars, 7 shaded waits.
        assert page.evaluate(f"[...{picture}.querySelectorAll('path.tk-last[data-instance=\"0\"]')]"
                             ".map(p => p.dataset.rank)") == ["7"]
        assert page.evaluate(f"{picture}.querySelectorAll('rect.tk-collective[data-instance=\"0\"]').length") == 8
        assert page.evaluate(f"{picture}.querySelectorAll('rect.tk-wait[data-instance=\"0\"]').length") == 7
        # The marker sits in rank 7's row.
        assert page.evaluate(f"{picture}.querySelector('path.tk-last[data-instance=\"0\"]')"
                             ".closest('g.tk-rank-row').dataset.rank") == "7"
