"""Real public traces (other GPUs, PyTorch versions and workloads): every one loads, reports in every
format and diffs; units, per-class shares, orphans and the clock check are asserted on several; and
every step's kernel count equals the kernels whose launch call lies in that step.

The copies in tests/data/real always run (sources and licences in its README.md); the whole
development corpus runs too when the environment variable ``TRACEKIT_REAL_TRACES`` names its folder.

Numbers asserted here were checked by hand against the raw JSON with plain Python (json.load with
``parse_float=Decimal``, times converted to ns as round(µs × 1000), kernels joined to their launch call by
``args.correlation``, unions of [ts, ts + dur) by sweeping sorted intervals); the step-kernel test
does that same independent computation in code (:func:`kernels_per_step_by_hand`), never through
tracekit's frames.
"""

from __future__ import annotations

import bisect
import gzip
import io
import json
import os
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.render import FORMATS, renderer_for

#: Left out by --fast (tests/conftest.py): the real-trace corpus, every trace in every format.
pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
REAL = TESTS / "data" / "real"
SAMPLES = TESTS.parent / "sample_traces"
CORPUS = os.environ.get("TRACEKIT_REAL_TRACES")


def _traces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.name.endswith((".json", ".json.gz")) and ".et." not in p.name and p.name != "manifest.json")


LOCAL = _traces(REAL)
WHOLE = _traces(Path(CORPUS)) if CORPUS and Path(CORPUS).is_dir() else []
SAMPLE_TRACES = _traces(SAMPLES)
needs_corpus = pytest.mark.skipif(not WHOLE, reason="set TRACEKIT_REAL_TRACES to the real-trace corpus folder")


def real(name: str) -> Path:
    return REAL / f"{name}.json.gz"


DLRM0 = real("facebookresearch__param__dlrm-8rank-v100-nccl-rank0")
DLRM1 = real("facebookresearch__param__dlrm-8rank-v100-nccl-rank1")
RESNET = real("facebookresearch__param__resnet-2080ti-cudnn-train")
TUGOT0 = real("tugot17__tokenomics-from-first-principles__rtx4090-tp2-llama-rank0")
TUGOT1 = real("tugot17__tokenomics-from-first-principles__rtx4090-tp2-llama-rank1")
B200 = real("wbing520__ai-performance-engineering__b200-deepseekv3-train-step-memory")
NANO_VLLM = real("zhang-yuhui__nano-vllm__rtx4080l-decode-triton")
MEMCPY_2022 = real("pytorch__benchmark__a100x8-memcpy-only-2022")
NO_KERNELS = real("HazyResearch__zoology__a100-launches-no-kernel-activity")
#: Pairs of traces of one run (ranks) that diff against each other.
PAIRS = [(DLRM0, DLRM1), (TUGOT0, TUGOT1)]


# -- every trace: load, report in every format, diff --------------------------------------------

def _renders(path: Path) -> None:
    session = tracekit.open(path, execution_trace=None)
    report = session.report()
    for fmt in FORMATS:
        out = io.StringIO()
        renderer_for(fmt).render(report, out)
        assert out.getvalue().strip()
        if fmt == "json":
            data = json.loads(out.getvalue())
            assert data["units"]["count"] == report.steps.height
    diff = session.diff(session)
    for fmt in FORMATS:
        out = io.StringIO()
        renderer_for(fmt).render(diff, out)
        assert out.getvalue().strip()


@pytest.mark.parametrize("path", LOCAL, ids=lambda p: p.name)
def test_every_local_real_trace_loads_reports_and_diffs(path):
    _renders(path)


@needs_corpus
@pytest.mark.parametrize("path", WHOLE or [None], ids=lambda p: p.name if p else "corpus")
def test_every_corpus_trace_loads_reports_and_diffs(path):
    _renders(path)


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=lambda p: p.name[:30])
def test_ranks_of_one_run_diff_in_every_format(a, b):
    diff = tracekit.open(a, execution_trace=None).diff(b)
    for fmt in FORMATS:
        out = io.StringIO()
        renderer_for(fmt).render(diff, out)
        assert out.getvalue().strip()


def test_report_command_on_a_real_trace_in_every_format(tmp_path, capsys):
    from tracekit.commands import main

    for fmt in FORMATS:
        if fmt == "svg":  # pictures, written to files: tests/render/test_svg.py
            continue
        with pytest.raises(SystemExit) as exit_info:
            main(["report", str(B200), "--format", fmt])
        assert exit_info.value.code == 0
        assert "skew" in capsys.readouterr().out  # the clock-skew finding, in every format


# -- each step's kernel count = the kernels launched in it (computed by hand) ---------------------

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
_KERNEL_CATS = {"kernel", "Kernel"}


def _ns(value) -> int:
    """µs (int, or Decimal with up to 3 decimals) -> ns, exactly (KINETO.md: round(ts × 1000))."""
    return int((Decimal(value) * 1000).to_integral_value())


def kernels_per_step_by_hand(path: Path) -> dict[int, int]:
    """{step number: kernels whose launch call starts inside that ProfilerStep's CPU span}, from the
    raw JSON in plain Python: no tracekit code."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    steps = []
    launches: dict[int, int] = {}
    kernels = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args") or {}
        match = _STEP.match(str(e.get("name", "")))
        if match and cat != "gpu_user_annotation":
            start = _ns(e["ts"])
            steps.append((start, start + _ns(e["dur"]), int(match.group(1))))
        elif cat in _LAUNCH_CATS and "correlation" in args:
            launches.setdefault(args["correlation"], _ns(e["ts"]))
        elif cat in _KERNEL_CATS:
            kernels.append(args.get("correlation"))
    steps.sort()
    starts = [s for s, _, _ in steps]
    counts = {number: 0 for _, _, number in steps}
    for correlation in kernels:
        when = launches.get(correlation)
        if when is None:
            continue  # launched before the trace began: in no step
        i = bisect.bisect_right(starts, when) - 1
        if i >= 0 and when < steps[i][1]:
            counts[steps[i][2]] += 1
    return counts


def _with_steps(paths: list[Path]) -> list[Path]:
    out = []
    for p in paths:
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rb") as f:
            if re.search(rb'"name":\s*"ProfilerStep#\d+"', f.read()):
                out.append(p)
    return out


def _step_counts_match(path: Path) -> None:
    report = tracekit.open(path, execution_trace=None).report()
    ours = dict(zip(report.steps["number"].to_list(), report.steps["kernel_count"].to_list()))
    assert ours == kernels_per_step_by_hand(path)


@pytest.mark.parametrize("path", SAMPLE_TRACES + _with_steps(LOCAL), ids=lambda p: p.name)
def test_step_kernel_count_is_the_kernels_launched_in_the_step(path):
    _step_counts_match(path)


@needs_corpus
@pytest.mark.parametrize("path", _with_steps(WHOLE) or [None], ids=lambda p: p.name if p else "corpus")
def test_corpus_step_kernel_count_is_the_kernels_launched_in_the_step(path):
    _step_counts_match(path)


def test_the_hand_count_sees_the_work_launched_before_the_trace():
    # dlrm rank 1: 310 kernels in the file, 64 of them with a correlation id (41180-41570) below every
    # launch call's (from 41615): launched before profiling began, in no step. ProfilerStep#10 holds
    # the other 246 — the count the report printed as 310 before.
    assert kernels_per_step_by_hand(DLRM1) == {10: 246}


# -- orphans: GPU work launched before the trace began ---------------------------------------------

def test_orphans_are_reported_on_their_own_and_kept_out_of_the_step():
    report = tracekit.open(DLRM1, execution_trace=None).report()
    # By hand: the 64 kernels above (54 vectorized_elementwise_kernel<4, …>, 10 unrolled add kernels on
    # stream 7), 203 µs in all, none overlapping: busy 203 µs.
    assert report.orphans.rows() == [("before_trace", "kernel", 64, 203_000, 203_000, 1694128201422243000,
                                      1694128201422539000)]
    step = report.steps.row(0, named=True)
    # The step's busy time is HTA's for this rank (12,118 µs, test_hta_oracle), not 12,321 µs.
    assert (step["kernel_count"], step["gpu_busy_ns"]) == (246, 12_118_000)
    from tracekit.render.views import tables

    assert tables.orphan_lines(report) == ["64 kernels, 203.0 µs GPU time, launched before the trace began"]


@pytest.mark.parametrize("path", [DLRM0, TUGOT0, B200, RESNET], ids=lambda p: p.name[:30])
def test_traces_whose_launches_are_all_recorded_have_no_orphans(path):
    assert tracekit.open(path, execution_trace=None).report().orphans.height == 0


# -- units without ProfilerStep ---------------------------------------------------------------------

def test_resnet_training_iterations_are_delimited_by_the_dataloader_fetch():
    report = tracekit.open(RESNET, execution_trace=None).report()
    units = report.units
    # 30 'enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__' annotations, one per iteration;
    # no annotation encloses an iteration, and 'Optimizer.step#SGD.step' (also 30) comes second.
    assert (units.kind, units.source, units.name) == (
        "period", "auto", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
    assert units.partial == (30,)
    # By hand: kernels whose launch call starts between consecutive fetches: 319 in the first
    # iteration, 321 in each other.
    assert report.steps["kernel_count"].to_list() == [319] + [321] * 29
    flags = report.launch_gaps.per_step
    assert flags.filter(~pl.col("steady"))["step"].to_list() == [1, 30]  # cold first, cut-short last


def test_a_single_forward_is_one_unit_named_after_its_annotation():
    report = tracekit.open(TUGOT0, execution_trace=None).report()
    assert (report.units.kind, report.units.name, report.steps["name"].to_list()) == (
        "span", "Model_Forward", ["Model_Forward#1"])
    assert report.steps["kernel_count"].to_list() == [156]  # every kernel of the file
    # 551 ms of AllGather/ReduceScatter with no compute beside them against 23 ms of compute:
    # the exposed communication is far more than half the GPU busy time (was "compute-bound").
    assert report.launch_gaps.per_step["verdict"].to_list() == ["communication-bound"]


def test_training_step_annotation_and_whole_trace_fallback():
    b200 = tracekit.open(B200, execution_trace=None).report()
    assert (b200.units.kind, b200.units.name) == ("span", "training_step")
    # nano-vllm's decode step has no user annotation and no repeating top-level op: the whole trace.
    nano = tracekit.open(NANO_VLLM, execution_trace=None).report()
    assert (nano.units.kind, nano.steps["name"].to_list(), nano.steps["kernel_count"].to_list()) == (
        "trace", ["whole trace"], [17])


def test_a_trace_whose_launches_have_no_kernels_is_one_no_gpu_unit():
    report = tracekit.open(NO_KERNELS, execution_trace=None).report()
    assert report.units.kind == "trace"
    assert report.launch_gaps.per_step["verdict"].to_list() == ["no-gpu"]


def test_unit_option_overrides_the_detection():
    report = tracekit.open(TUGOT0, execution_trace=None).report(unit="Attention")
    assert (report.units.source, report.steps.height) == ("user", 4)


# -- per-class shares, streams and communication overlap -------------------------------------------

def test_dlrm_class_shares_streams_and_overlap():
    found = tracekit.open(DLRM0, execution_trace=None).report().breakdown
    trace = found.shares.filter((pl.col("scope") == "trace") & (pl.col("group") == "class"))
    comm = trace.filter(pl.col("key") == "communication").row(0, named=True)
    # By hand: 8 nccl* kernels, 5,798 µs; the union of every kernel and memcpy is 6,590 µs.
    assert (comm["count"], comm["gpu_ns"]) == (8, 5_798_000)
    assert comm["busy_share"] == pytest.approx(5_798 / 6_590)
    nccl_stream = found.streams.filter((pl.col("scope") == "trace") & (pl.col("stream") == 84)).row(0, named=True)
    assert (nccl_stream["count"], nccl_stream["busy_ns"]) == (8, 5_798_000)
    overlap = found.overlap.filter(pl.col("scope") == "trace").row(0, named=True)
    # HTA's get_comm_comp_overlap gives 4.5 % for this rank (test_hta_oracle runs it).
    assert (overlap["comm_ns"], overlap["overlapped_ns"]) == (5_798_000, 261_000)


def test_tensor_parallel_llama_communication_is_not_overlapped():
    found = tracekit.open(TUGOT0, execution_trace=None).report().breakdown
    comm = found.shares.filter((pl.col("scope") == "trace") & (pl.col("key") == "communication")).row(0, named=True)
    # By hand: 19 ncclDevKernel_* kernels, 550,777.907 µs of the file's 573,949.742 µs of kernel time.
    assert (comm["count"], comm["gpu_ns"]) == (19, 550_777_907)
    assert found.overlap.filter(pl.col("scope") == "trace")["overlap_frac"].to_list() == [0.0]


# -- clock skew ---------------------------------------------------------------------------------------

def test_b200_gpu_clock_skew_is_found_and_not_shown_as_queue_delay():
    report = tracekit.open(B200, execution_trace=None).report()
    clock = report.launch_gaps.clock
    # By hand: 113 of the 179 kernels start over 5 µs before their launch call starts (up to 199.9 µs);
    # the 106 that start on an idle GPU do so a median 158.53 µs before their launch call returned.
    assert (clock["skewed"], clock["early"], clock["linked"], clock["idle_starts"]) == (True, 113, 179, 106)
    assert clock["offset_ns"] == -158_530
    assert report.launch_gaps.queue_delay_ns["p50"] > 0  # corrected: no longer floored at 0


@pytest.mark.parametrize("path", [DLRM0, TUGOT0, RESNET, MEMCPY_2022, NANO_VLLM], ids=lambda p: p.name[:30])
def test_traces_on_one_clock_are_not_called_skewed(path):
    assert tracekit.open(path, execution_trace=None).report().launch_gaps.clock["skewed"] is False


def test_report_dir_summarises_ranks_without_steps_per_unit(tmp_path):
    from tracekit import ranks

    for path in (TUGOT0, TUGOT1):  # their own distributedInfo: ranks 0 and 1 of a world of 2
        (tmp_path / path.name).write_bytes(path.read_bytes())
    result = ranks.analyze(tmp_path, workers=1)
    # Each rank's Model_Forward is its one unit, holding all 156 kernels of the file.
    assert result.ranks.select("rank", "steps", "kernel_count").rows() == [(0, 1, 156), (1, 1, 156)]
    assert (result.world_size, result.missing) == (2, ())
