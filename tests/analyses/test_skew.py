"""Collectives across ranks: the rank the others waited for, on the real 8-rank DLRM step (checked
against the raw NCCL kernels) and on delays injected into it (tests/delays.py) in forward, backward
and data loading."""

from __future__ import annotations

import gzip
import json
import os
import statistics
from pathlib import Path

import pytest

from delays import collectives, inject
from tracekit import ranks

REAL = os.environ.get("TRACEKIT_REAL_TRACES")
DLRM = "facebookresearch__param__dlrm-8rank-v100-nccl-rank{}.json.gz"
pytestmark = pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES not set")


def _raw() -> dict[int, dict]:
    return {r: json.loads(gzip.decompress((Path(REAL) / DLRM.format(r)).read_bytes())) for r in range(8)}


def _write(traces: dict[int, dict], where: Path) -> Path:
    where.mkdir()
    for r, t in traces.items():
        (where / DLRM.format(r)).write_bytes(gzip.compress(json.dumps(t).encode()))
    return where


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory):
    traces = _raw()
    return traces, ranks.analyze(_write(traces, tmp_path_factory.mktemp("dlrm") / "ranks"), workers=2)


def test_dlrm_culprit_is_rank_7_and_the_waits_add_up(dlrm):
    traces, result = dlrm
    cross = result.skew
    # By hand from the raw JSON (integer µs): each rank's 8 NCCL kernels in start order are the same
    # 8 collectives (order matching: this 2023 trace records no Seq); offsets are the median of the
    # kernel-end differences against rank 0; arrival = kernel start − offset.
    kernels = {r: collectives(t) for r, t in traces.items()}
    assert {len(k) for k in kernels.values()} == {8}
    offset = {r: statistics.median(k["ts"] + k["dur"] - (k0["ts"] + k0["dur"])
                                   for k, k0 in zip(kernels[r], kernels[0])) for r in range(8)}
    arrivals = [{r: kernels[r][i]["ts"] - offset[r] for r in range(8)} for i in range(8)]
    last = [max(range(8), key=lambda r: (a[r], -r)) for a in arrivals]
    waits_us = [sum(a[last[i]] - a[r] for r in range(8)) for i, a in enumerate(arrivals)]
    assert last == [7, 7, 7, 7, 7, 5, 5, 4]
    # The first all_to_all: rank 1 starts at 424306 µs, rank 7 at 431930 µs (offset −1.0 µs).
    assert kernels[1][0]["ts"] % 1_000_000 == 424306 and kernels[7][0]["ts"] % 1_000_000 == 431930
    assert waits_us[0] == pytest.approx(26436.5)
    assert cross.instances["last_rank"].to_list() == last
    assert cross.instances["wait_ns"].to_list() == [round(w * 1000) for w in waits_us]
    assert cross.offsets["offset_ns"].to_list() == [round(offset[r] * 1000) for r in range(8)]
    assert cross.match == "order" and cross.unmatched_share == 0.0
    (culprit,) = cross.culprits.iter_rows(named=True)
    assert culprit["step"] == 10 and culprit["rank"] == 7 and culprit["instances"] == 5
    assert culprit["caused_ns"] == round(1000 * sum(waits_us[:5])) == 35_559_500
    # Rank 7 reaches its first all_to_all 3.2 ms after its step starts, like the others (3.0-3.9 ms):
    # it began ProfilerStep#10 late, 4.52 ms after the other ranks' median.
    assert culprit["lost_phase"] == "before-step" and culprit["lost_ns"] == 4_523_000
    assert result.culprit == 7
    # The longest step is rank 1's, the rank that waited most: the old rule's "slowest".
    assert result.slowest == DLRM.format(1)
    waited = dict(zip(result.ranks["rank"], result.ranks["wait_ns"]))
    assert max(waited, key=waited.get) == 1 and waited[1] == 11_129_000


def test_dlrm_report_words_the_culprit(dlrm):
    from tracekit.render.views.ranks import culprit_lines, longest_line, ranks_text

    _, result = dlrm
    (line,) = culprit_lines(result)
    assert line.startswith("Step 10: rank 7 arrived last at all_to_all #0 (default group, forward), 7.6 ms after "
                           "the first rank; ranks 0–6 waited 26.4 ms in total there, and 35.6 ms over the 5 "
                           "collectives it arrived last at.")
    assert "before the step: it began the step 4.5 ms after the other ranks' median" in line
    assert "rank 1 (19,901.0 µs). It waited 11.1 ms" in longest_line(result)
    assert ranks_text([0, 1, 2, 4, 6]) == "ranks 0–2, 4, 6" and ranks_text([3]) == "rank 3"


@pytest.mark.parametrize(("rank", "collective", "phase"), [
    (2, 0, "data"),      # the DataLoader span that opens the step, before the first all_to_all
    (4, 1, "forward"),   # an aten op on the main thread between the first two all_to_alls
    (2, 5, "backward"),  # a backward node before the all_to_all of backward, after an all_reduce
])
def test_injected_delay_names_rank_and_phase(tmp_path, rank, collective, phase):
    delay_us = 20_000.0
    traces, done = inject(_raw(), rank, collective, phase, delay_us)
    result = ranks.analyze(_write(traces, tmp_path / "ranks"), workers=2)
    cross = result.skew
    at = cross.instances.row(collective, named=True)
    assert at["last_rank"] == rank and at["phase"] == cross.instances.row(collective, named=True)["phase"]
    (culprit,) = cross.culprits.iter_rows(named=True)
    assert culprit["rank"] == rank and culprit["worst_instance"] == collective
    assert culprit["lost_phase"] == phase
    # The extra host time found in that phase is the delay plus what the rank already spent there
    # beyond the other ranks' median in that window before the injection: rank 2's DataLoader span
    # is 1283 µs against the others' median 1101 µs (+182 µs, raw JSON); rank 4 spends 2.659 ms more
    # forward host time between its first two all_to_all launches (what its cpu_op and user_annotation
    # spans but ProfilerStep#10 cover there, less the evaluate_function, DataLoader and optimizer
    # spans: 6543 µs against the others' median 3884 µs, a short script over the raw JSON); rank 2
    # 21 µs less backward time between the all_reduce and the backward all_to_all.
    before = {"data": 182_000, "forward": 2_659_000, "backward": -21_000}[phase]
    assert culprit["lost_ns"] == 1000 * delay_us + before
    assert result.culprit == rank
    if phase == "backward":
        # Every rank's step grew by the delay (the others waited it out in NCCL): the longest step is
        # still rank 1's, so a step-length rule would not name the late rank.
        assert result.slowest == DLRM.format(1) and rank != 1
    assert done["op"]


def _calls(rank: int, rows: list[tuple]) -> "pl.DataFrame":
    """Calls of one rank: (seq, pg, ts, end) in µs, all_reduce of 1 MiB over 2 ranks."""
    import polars as pl

    from tracekit.analyses.collectives import CALLS_SCHEMA

    frame = pl.DataFrame([{"call": i, "kernels": 1, "step": 1, "stream": 7, "launch_ts": ts * 1000 - 5000,
                           "ts": ts * 1000, "end": end * 1000, "dur": (end - ts) * 1000, "kind": "all_reduce",
                           "collective": "allreduce", "pg": pg, "group_size": 2, "seq": seq, "dtype": "Float",
                           "bytes": 1 << 20, "bytes_from": "metadata", "algbw_gbps": None, "busbw_gbps": None,
                           "phase": "backward"} for i, (seq, pg, ts, end) in enumerate(rows)], schema=CALLS_SCHEMA)
    return frame.with_columns(rank=pl.lit(rank, pl.Int64))


def test_seq_matching_is_exact_and_clock_offsets_apply():
    # Hand-built: rank 1's clock runs 1000 µs ahead; rank 1 skipped seq 2 (not profiled), so order
    # matching would pair its seq 3 with rank 0's seq 2. Seq matching pairs 1↔1, 3↔3 and leaves
    # rank 0's seq 2 unmatched. Ends are simultaneous on the common clock (500, 900).
    import polars as pl

    from tracekit.analyses import skew

    calls = pl.concat([_calls(0, [(1, "0", 100, 500), (2, "0", 600, 700), (3, "0", 800, 900)]),
                       _calls(1, [(1, "0", 1300, 1500), (3, "0", 1850, 1900)])])
    starts = pl.DataFrame({"rank": [0, 1], "step": [1, 1], "cpu_start_ns": [0, 1_000_000]})
    phases = pl.DataFrame(schema={"phase": pl.String, "ts": pl.Int64, "end": pl.Int64, "rank": pl.Int64})
    found = skew.analyze(calls, phases, starts)
    assert found.match == "seq" and found.unmatched_share == pytest.approx(1 / 5)
    assert found.offsets.rows() == [(0, 0, 0, 2), (1, 1_000_000, 0, 2)]
    # Seq 1: rank 0 arrives at 100, rank 1 at 1300 − 1000 = 300: rank 1 last, rank 0 waits 200 µs.
    # Seq 3: rank 0 at 800, rank 1 at 850: rank 1 last, rank 0 waits 50 µs.
    assert found.instances.select("position", "last_rank", "wait_ns", "transfer_ns").rows() == [
        (1, 1, 200_000, 200_000), (3, 1, 50_000, 50_000)]
    # Bus bandwidth over the last arriver's kernel: 1 MiB / 200 µs × 2(n−1)/n = 5.24 GB/s for n = 2.
    assert found.instances["busbw_gbps"][0] == pytest.approx((1 << 20) / 200_000 * 1.0)
    (culprit,) = found.culprits.iter_rows(named=True)
    assert culprit["rank"] == 1 and culprit["caused_ns"] == 250_000 and culprit["instances"] == 2
    assert found.ranks.select("rank", "calls", "unmatched", "wait_ns").rows() == [(0, 3, 1, 250_000), (1, 2, 0, 0)]
