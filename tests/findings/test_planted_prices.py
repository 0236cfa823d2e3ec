"""Each planted problem's wall price against what fixing it measurably saves.

The antipattern study (sample_traces/antipatterns, H200) timed every variant outside the profiler
(``timing.median``: triton.testing.do_bench, 28 repetitions, manifest.json) beside its control: the
variant with that one problem fixed. The planted finding must be a warning whose ``saving_wall_ns`` is
within 2× of the measured difference (planted − control). Two planted problems are priced otherwise:
a cold first step is a one-time cost read from the trace itself (its first step against the median of
the others; a warm benchmark cannot time it), and the overhead-bound loop has no fixed twin in the
study (its control there is the healthy loop, a different model): its twin — the same tiny loop
replayed as one CUDA graph per step — was captured beside it on one H100 (sample_traces/overhead_twin),
and that pair is held to the same 2×; the H200 capture's price is checked against what its trace bounds
it by (the step's wall less its GPU busy time).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import tracekit

ANTI = Path(__file__).resolve().parents[2] / "sample_traces" / "antipatterns"
TWIN = ANTI.parent / "overhead_twin"
MANIFEST = json.loads((ANTI / "manifest.json").read_text())["captures"]
TWIN_MANIFEST = {c["mode"]: c for c in json.loads((TWIN / "manifest.json").read_text())["captures"]}
BY_MODE = {c["mode"]: c for c in MANIFEST}
#: How far a price may be from the measured saving: a factor, either way.
WITHIN = 2.0
PRICED_BY_CONTROL = [c for c in MANIFEST if c.get("planted") and c["planted"] not in ("cold_first_step", "overhead_bound")]


def _planted(capture: dict, folder: Path = ANTI):
    findings = tracekit.open(folder / capture["trace_file"]).report().findings
    found = [f for f in findings if f.rule == capture["planted"]]
    assert len(found) == 1, [f.rule for f in findings]
    return found[0]


@pytest.mark.parametrize("capture", PRICED_BY_CONTROL, ids=lambda c: c["mode"])
def test_wall_price_is_within_2x_of_the_measured_saving(capture):
    control = BY_MODE[capture["control"]]
    measured_ns = (capture["timing"]["median"] - control["timing"]["median"]) * 1000
    assert measured_ns > 0, "the planted variant must be slower than its control"
    finding = _planted(capture)
    assert finding.severity == "warning"
    assert measured_ns / WITHIN <= finding.saving_wall_ns <= measured_ns * WITHIN, (
        finding.saving_wall_ns, measured_ns)


def test_cold_first_step_is_priced_once_from_the_trace():
    # ProfilerStep#0 against the median of ProfilerStep#1-3 (the steps' wall in the summary).
    capture = BY_MODE["cold-first-step"]
    finding = _planted(capture)
    steps = tracekit.open(ANTI / capture["trace_file"]).report().decomposition.units
    first = steps.filter(pl.col("step") == 0)["wall_ns"].item()
    rest = steps.filter(pl.col("step") > 0)["wall_ns"].median()
    assert finding.severity == "warning" and finding.resource == "once"
    assert finding.saving_wall_ns == pytest.approx(first - rest, rel=0.01)


def test_overhead_bound_price_stays_under_the_steps_gpu_idle_time():
    finding = _planted(BY_MODE["overhead-bound"])
    units = tracekit.open(ANTI / BY_MODE["overhead-bound"]["trace_file"]).report().decomposition.units
    steady = units.filter(pl.col("steady"))
    idle = float((steady["wall_ns"] - steady["gpu_busy_ns"]).mean())
    assert finding.severity == "warning" and 0 < finding.saving_wall_ns <= idle


def test_overhead_bound_price_is_within_2x_of_what_cuda_graphs_saved():
    planted, twin = TWIN_MANIFEST["overhead-bound"], TWIN_MANIFEST["overhead-bound-graphed"]
    measured_ns = (planted["timing"]["median"] - twin["timing"]["median"]) * 1000  # 1,296 µs on the H100
    finding = _planted(planted, TWIN)
    assert finding.severity == "warning" and "CUDA graphs" in finding.fix
    assert measured_ns / WITHIN <= finding.saving_wall_ns <= measured_ns * WITHIN, (finding.saving_wall_ns, measured_ns)
    twin_findings = tracekit.open(TWIN / twin["trace_file"]).report().findings
    assert not [f for f in twin_findings if f.severity == "warning"]
