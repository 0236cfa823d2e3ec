"""`tracekit report DIR` on real gloo ranks (sample_traces/ranks_gloo/late-backward: 4 CPU ranks, rank 2
30 ms late in backward on step 3) in every text format: the culprit worded, arrivals said to be
gloo's worker-thread starts, not kernels. The figures are tests/analyses/test_skew_gloo.py's."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tracekit.commands import main

LATE_BACKWARD = Path(__file__).resolve().parents[2] / "sample_traces" / "ranks_gloo" / "late-backward"
STEP3 = ("Step 3: rank 2 arrived last at all_reduce #8 (default group, backward), 28.9 ms after the first "
         "rank; ranks 0, 1, 3 waited 85.5 ms in total there, and 96.3 ms over the 3 collectives it arrived "
         "last at. It lost the time in backward: 31.7 ms more host time there than the other ranks' median.")
GLOO_ARRIVAL = ("Arrival: each rank's start of the collective's work on its backend's worker thread (gloo: no "
                "kernel); wait: the last arrival minus the rank's own. Bus bandwidth over the last arriver's "
                "work span (it waited for no one)")


def _report(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(LATE_BACKWARD), "--no-cache", *args])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0, captured.err
    return captured.out


def test_markdown_names_rank_2_and_says_how_it_arrived(capsys):
    # Read as text: Markdown escapes `_` and `#` (a zero-width space keeps `#8` from being a heading).
    out = _report(capsys, "--format", "md").replace("\\_", "_").replace("\\#&#8203;", "#")
    assert STEP3 in out
    # Steps 2 and 4 had a late rank too (4 ranks share 2 cores): listed, smaller.
    assert "Step 2: rank 3 arrived last at all_reduce #1" in out and "Step 4: rank 3 arrived last" in out
    assert GLOO_ARRIVAL in out and "kernel start" not in out and "(a late GPU)" not in out
    assert "Matched by process group and order within it (the traces record no Seq): 60 of 60 collective " \
           "calls matched, 0 unmatched (0.0%)." in out
    assert "Longest mean step: rank 2 (44,293.1 µs); the others waited 116.2 ms for it." in out
    assert re.search(r"\| 2 \| rank2\.json\.gz \(waited for\) \| 3 \|", out)


def test_terminal_shows_the_costliest_step(capsys):
    out = " ".join(_report(capsys, "--format", "term").split())
    assert " ".join(STEP3.split()) in out
    assert "(2 other steps had a late rank too: the Markdown or HTML report lists each.)" in out


def test_json_contract(capsys):
    data = json.loads(_report(capsys, "--format", "json"))
    assert data["schema"] == "tracekit.ranks/1" and data["culprit"] == 2 and data["world_size"] == 4
    cross = data["collectives"]
    assert cross["match"] == "order" and cross["unmatched_share"] == 0.0
    assert {i["arrival"] for i in cross["instances"]} == {"host"}
    step3 = next(c for c in cross["culprits"] if c["step"] == 3)
    assert (step3["rank"], step3["lost_phase"], step3["worst_instance"]) == (2, "backward", 8)


def test_html_page_draws_four_ranks_and_rank_2_last_at_8_and_9(tmp_path, capsys):
    page = tmp_path / "ranks.html"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(LATE_BACKWARD), "--no-cache", "-o", str(page)])
    assert exit_info.value.code == 0, capsys.readouterr().err
    html = page.read_text()
    assert "rank 2 arrived last at all_reduce #8" in html and "gloo: no kernel" in html
    svg = html[re.search(r'<svg[^>]* class="tk-rank-collectives"', html).start():]
    root = ET.fromstring(svg[:svg.index("</svg>") + len("</svg>")])
    ns = "{http://www.w3.org/2000/svg}"
    rows = [g.get("data-rank") for g in root.iter(f"{ns}g") if g.get("class") == "tk-rank-row"]
    assert rows == ["0", "1", "2", "3"]
    last = {(p.get("data-instance"), p.get("data-rank")) for p in root.iter(f"{ns}path") if p.get("class") == "tk-last"}
    assert {("8", "2"), ("9", "2")} <= last
