"""Launch gaps: rule-level tests on tiny traces, then the H200 sample traces with hand-checked numbers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from factory import GPU_PID, make_kernel, make_launch, make_op, make_step, span, write_trace
from tracekit.analyses import launch_gaps, pipeline
from tracekit.load import load
from tracekit.render.json.report import launch_gaps_data

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def run(tmp_path, events, name="t.json") -> launch_gaps.LaunchGapsReport:
    trace = load(write_trace(tmp_path / name, events))
    return pipeline.run(trace).launch_gaps


def sync_row(name: str, ts: float, dur: float, correlation: int, stream=7) -> dict:
    return span("cuda_sync", name, ts, dur, pid=GPU_PID, tid=stream, device=0, stream=stream,
                correlation=correlation)


def overhead_row(ts: float, dur: float) -> dict:
    return span("overhead", "Activity Buffer Request", ts, dur, pid=-1, tid=0)


def gap_causes(report) -> list[tuple[int, str]]:
    return [(r["dur_ns"], r["cause"]) for r in report.gaps.iter_rows(named=True)]


# -- per activity --------------------------------------------------------------------------------

def test_queue_delay_floored_at_zero_and_null_without_launch(tmp_path):
    events = [
        make_step(1, 0.0, 100),
        make_launch("cudaLaunchKernel", 1, 10, 1),      # ends at 11
        make_kernel("early_kernel", 8, 2, 1),             # starts before its launch returns
        make_launch("cudaLaunchKernel", 20, 4, 2),      # ends at 24
        make_kernel("late_kernel", 30, 2, 2),             # 6 µs after
        make_kernel("orphan_kernel", 40, 2, 99),          # no launch call in the trace
    ]
    act = run(tmp_path, events).per_activity
    rows = {r["name"]: r for r in act.iter_rows(named=True)}
    assert rows["early_kernel"]["queue_delay_ns"] == 0
    assert rows["early_kernel"]["launch_dur_ns"] == 10_000
    assert rows["late_kernel"]["queue_delay_ns"] == 6_000
    assert rows["orphan_kernel"]["queue_delay_ns"] is None
    assert rows["orphan_kernel"]["launch_dur_ns"] is None
    assert list(act.schema) == list(launch_gaps.PER_ACTIVITY_SCHEMA)


def test_distributions_nearest_rank_per_class_and_api(tmp_path):
    events = [make_step(1, 0.0, 1000)]
    # Ten elementwise kernels launched with cudaLaunchKernel, queue delays 1..10 µs.
    for i in range(10):
        t0 = i * 50.0
        events += [make_launch("cudaLaunchKernel", t0, 2 + i, 100 + i),
                   make_kernel("void at::native::vectorized_elementwise_kernel<4, add>", t0 + 2 + i + (i + 1), 1, 100 + i)]
    report = run(tmp_path, events)
    row = report.distributions.filter((pl.col("group") == "launch_api") & (pl.col("key") == "cudaLaunchKernel")).row(0, named=True)
    assert row["count"] == 10
    assert (row["queue_delay_p50_ns"], row["queue_delay_p90_ns"], row["queue_delay_p99_ns"],
            row["queue_delay_max_ns"]) == (5_000, 9_000, 10_000, 10_000)
    assert (row["launch_dur_p50_ns"], row["launch_dur_max_ns"]) == (6_000, 11_000)
    assert report.queue_delay_ns == {"p50": 5_000, "p90": 9_000, "p99": 10_000, "max": 10_000}
    assert set(report.distributions["group"].to_list()) == {"class", "launch_api"}


# -- gaps and their causes -----------------------------------------------------------------------

def test_gap_cpu_bound_when_next_launch_returns_after_gpu_drained(tmp_path):
    events = [
        make_step(1, 0.0, 100),
        make_launch("cudaLaunchKernel", 1, 2, 1),
        make_kernel("a_kernel", 5, 5, 1),                 # GPU busy 5..10
        make_launch("cudaLaunchKernel", 20, 5, 2),      # issued after the GPU went idle
        make_kernel("b_kernel", 27, 3, 2),
    ]
    report = run(tmp_path, events)
    gap = report.gaps.row(0, named=True)
    assert (gap["start_ns"], gap["end_ns"], gap["dur_ns"], gap["cause"]) == (10_000, 27_000, 17_000, "cpu_bound")
    assert (gap["next_kernel"], gap["next_launch_api"], gap["step"]) == ("b_kernel", "cudaLaunchKernel", 1)
    assert gap["in_step_window"] is True


def test_gap_tolerance_two_microseconds(tmp_path):
    # Launch returns 1.5 µs before the GPU drains: within the 2 µs launch latency -> cpu_bound;
    # 2.5 µs before and the gap is long -> the CPU was in time -> other.
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 2, 1), make_kernel("a_kernel", 5, 5, 1),       # 5..10
        make_launch("cudaLaunchKernel", 5, 3.5, 2), make_kernel("b_kernel", 20, 5, 2),    # launch ends 8.5
        make_launch("cudaLaunchKernel", 10, 12.5, 3), make_kernel("c_kernel", 40, 5, 3),  # ends 22.5
    ]
    assert gap_causes(run(tmp_path, events)) == [(10_000, "cpu_bound"), (15_000, "other")]


def test_gap_back_to_back_and_other_when_work_was_queued(tmp_path):
    events = [
        make_step(1, 0.0, 100),
        make_launch("cudaLaunchKernel", 1, 1, 1),
        make_launch("cudaLaunchKernel", 3, 1, 2),
        make_launch("cudaLaunchKernel", 5, 1, 3),
        make_kernel("a_kernel", 10, 10, 1),               # 10..20
        make_kernel("b_kernel", 21, 10, 2),               # 1 µs gap, queued long before
        make_kernel("c_kernel", 50, 5, 3),                # 19 µs gap, queued long before
    ]
    assert gap_causes(run(tmp_path, events)) == [(1_000, "back_to_back"), (19_000, "other")]


def test_gap_sync_when_cpu_blocked_in_synchronize(tmp_path):
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 2, 1),
        make_kernel("a_kernel", 5, 50, 1),                # 5..55
        make_launch("cudaDeviceSynchronize", 4, 52, 2),   # host waits until 56
        make_launch("cudaLaunchKernel", 58, 3, 3),
        make_kernel("b_kernel", 63, 5, 3),
    ]
    assert gap_causes(run(tmp_path, events)) == [(8_000, "sync")]


def test_sync_overlapping_a_gap_with_queued_work_is_not_the_cause(tmp_path):
    # The real eager-4096 shape: the add kernel was queued long before cudaDeviceSynchronize began.
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 2, 1),
        make_launch("cudaLaunchKernel", 5, 2, 2),
        make_kernel("gemm_kernel", 10, 50, 1),            # 10..60
        make_launch("cudaDeviceSynchronize", 20, 60, 3),  # 20..80 overlaps the gap
        make_kernel("add_kernel", 61.5, 10, 2),
    ]
    assert gap_causes(run(tmp_path, events)) == [(1_500, "back_to_back")]


def test_gap_sync_from_cuda_sync_gpu_row(tmp_path):
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 2, 1),
        make_kernel("a_kernel", 5, 20, 1),                # 5..25
        sync_row("Stream Sync", 6, 21, 9),                # 6..27 on the GPU timeline
        make_launch("cudaLaunchKernel", 28, 2, 3),
        make_kernel("b_kernel", 31, 5, 3),
    ]
    assert gap_causes(run(tmp_path, events)) == [(6_000, "sync")]


def test_gap_profiler_overhead(tmp_path):
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 2, 1),
        make_kernel("a_kernel", 5, 5, 1),                 # 5..10
        overhead_row(8, 30),                              # Activity Buffer Request 8..38
        make_launch("cudaLaunchKernel", 39, 2, 2),
        make_kernel("b_kernel", 43, 5, 2),
    ]
    assert gap_causes(run(tmp_path, events)) == [(33_000, "profiler_overhead")]


def test_overlapping_streams_idle_only_when_every_stream_is_idle(tmp_path):
    events = [
        make_step(1, 0.0, 200),
        make_launch("cudaLaunchKernel", 1, 1, 1),
        make_launch("cudaLaunchKernel", 3, 1, 2),
        make_launch("cudaLaunchKernel", 5, 1, 3),
        make_kernel("s7_kernel", 10, 20, 1, stream=7),    # 10..30
        make_kernel("s8_kernel", 20, 20, 2, stream=8),    # 20..40 overlaps
        make_kernel("s7_late", 45, 5, 3, stream=7),       # 45..50
    ]
    report = run(tmp_path, events)
    step = report.per_step.row(0, named=True)
    assert step["gpu_busy_ns"] == 35_000                  # union 10..40 + 45..50, not 45 µs of durations
    assert step["gpu_window_ns"] == 40_000
    assert step["gpu_idle_ns"] == 5_000
    assert gap_causes(report) == [(5_000, "other")]       # 40..45; s7_late was queued at 5 µs
    device = report.per_device.row(0, named=True)
    assert (device["busy_ns"], device["idle_ns"], device["idle_other_ns"]) == (35_000, 5_000, 5_000)


# -- per step -------------------------------------------------------------------------------------

def _verdict(activity_count, busy, dispatch, frac) -> str:
    frame = pl.DataFrame({"activity_count": [activity_count], "gpu_busy_ns": [busy],
                          "cpu_dispatch_ns": [dispatch], "gpu_busy_frac": [frac]})
    return frame.with_columns(v=launch_gaps.verdict_expr())["v"].item()


@pytest.mark.parametrize(("count", "busy", "dispatch", "frac", "expected"), [
    (0, 0, 50, 0.0, "no-gpu"),
    (2, 100, 200, 0.30, "overhead-bound"),     # CPU exactly 2x GPU
    (2, 100, 199, 0.30, "mixed"),              # just under 2x
    (2, 100, 100, 0.30, "compute-bound"),      # GPU needs as long as the CPU: GPU sets the pace
    (2, 100, 101, 0.30, "mixed"),
    (2, 85, 90, 0.80, "compute-bound"),        # saturated in this run though CPU > GPU
    (2, 85, 90, 0.79, "mixed"),
])
def test_verdict_thresholds(count, busy, dispatch, frac, expected):
    assert _verdict(count, busy, dispatch, frac) == expected


def test_cpu_dispatch_is_union_of_ops_and_launches_minus_synchronize(tmp_path):
    events = [
        make_step(1, 0.0, 100),
        make_op("aten::mm", 10, 20),                       # 10..30
        make_launch("cudaLaunchKernel", 15, 5, 1),         # nested: no double count
        make_op("aten::add", 25, 15),                      # 25..40 overlaps mm (another thread's view)
        make_launch("cudaLaunchKernel", 35, 2, 2),
        make_launch("cudaDeviceSynchronize", 50, 30, 3),   # 50..80: waiting, not dispatch
        make_op("aten::item", 95, 10),                     # 95..105, clipped to the step end (100)
        make_kernel("a_kernel", 21, 2, 1),
        make_kernel("b_kernel", 38, 2, 2),
    ]
    step = run(tmp_path, events).per_step.row(0, named=True)
    assert step["cpu_dispatch_ns"] == 30_000 + 5_000       # 10..40 and 95..100; Python gaps excluded
    assert step["gpu_busy_ns"] == 4_000
    assert step["verdict"] == "overhead-bound"


def test_wall_is_the_slower_side_when_cpu_runs_ahead(tmp_path):
    events = [
        make_step(1, 0.0, 20),
        make_op("aten::mm", 1, 10),
        make_launch("cudaLaunchKernel", 2, 5, 1),
        make_kernel("long_gemm_kernel", 30, 200, 1),      # runs long after the CPU step ended
    ]
    step = run(tmp_path, events).per_step.row(0, named=True)
    assert (step["cpu_span_ns"], step["gpu_window_ns"], step["wall_ns"]) == (20_000, 200_000, 200_000)
    assert step["gpu_busy_frac"] == 1.0
    assert step["verdict"] == "compute-bound"


def _steps_with_walls(walls: list[float]) -> list[dict]:
    events, t0 = [], 0.0
    for n, wall in enumerate(walls, start=1):
        events += [make_step(n, t0, wall), make_launch("cudaLaunchKernel", t0 + 1, 1, n),
                   make_kernel("k_kernel", t0 + 3, 1, n)]
        t0 += wall + 10
    return events


@pytest.mark.parametrize(("walls", "cold"), [
    ([300, 100, 100, 120], True),
    ([200, 100, 90, 100], False),   # exactly 2x the median is not cold
    ([201, 100, 90, 100], True),
    ([100, 300, 100], False),       # only the first step can be cold
    ([300], False),                 # nothing to compare with
])
def test_cold_first_step(tmp_path, walls, cold):
    flags = run(tmp_path, _steps_with_walls(walls)).per_step["cold"].to_list()
    assert flags == [cold] + [False] * (len(walls) - 1)


@pytest.mark.parametrize(("walls", "warmup"), [
    # Cold: 1000 > 2x 200 (median of the others). The median of all five walls is 300: 900 > 600 is
    # warm-up, 300 is not and ends the run.
    ([1000, 900, 300, 100, 100], [False, True, False, False, False]),
    ([1000, 100, 900, 100, 100], [False, False, False, False, False]),  # only a leading run warms up
    ([150, 900, 900, 100, 100], [False, False, False, False, False]),   # no cold first step, no warm-up
])
def test_warm_up_steps_follow_a_cold_first_step(tmp_path, walls, warmup):
    per_step = run(tmp_path, _steps_with_walls(walls)).per_step
    assert per_step["warmup"].to_list() == warmup
    assert per_step["steady"].to_list() == [not (c or w) for c, w in zip(per_step["cold"].to_list(), warmup)]


def test_step_with_no_gpu_work(tmp_path):
    events = [make_step(1, 0.0, 50), make_op("aten::t", 1, 5),
              make_step(2, 60.0, 50), make_launch("cudaLaunchKernel", 61, 5, 1), make_kernel("k_kernel", 67, 2, 1)]
    rows = run(tmp_path, events).per_step.to_dicts()
    # Step 2: 5 µs of dispatch >= 2 x 2 µs of GPU busy, but 45 of its 50 µs are in no op: host-bound.
    assert [(r["step"], r["verdict"], r["gpu_busy_ns"], r["gpu_idle_ns"]) for r in rows] == [
        (1, "no-gpu", 0, 0), (2, "host-bound", 2_000, 0)]


def test_empty_and_cpu_only_traces(tmp_path):
    for name, events, gpu in (("empty.json", [], False), ("cpu.json", [make_step(1, 0.0, 10), make_op("aten::t", 1, 2)], False)):
        trace = load(write_trace(tmp_path / name, events, gpu=gpu))
        report = pipeline.run(trace).launch_gaps
        assert report.per_activity.height == 0 and report.gaps.height == 0 and report.per_device.height == 0
        assert report.queue_delay_ns == {"p50": None, "p90": None, "p99": None, "max": None}
        assert list(report.per_step.schema) == list(launch_gaps.PER_STEP_SCHEMA)
        assert list(report.gaps.schema) == list(launch_gaps.GAPS_SCHEMA)
        assert list(report.distributions.schema) == list(launch_gaps.DISTRIBUTIONS_SCHEMA)
        json.dumps(launch_gaps_data(report))
    assert report.per_step["verdict"].to_list() == ["no-gpu"]


def test_to_json_shape(tmp_path):
    report = run(tmp_path, _steps_with_walls([100, 100]))
    data = launch_gaps_data(report)
    assert set(data) == {"steps", "queue_delay_ns", "idle_by_cause_ns", "thresholds", "clock"}
    assert set(data["steps"][0]) >= {"step", "gpu_busy_ns", "gpu_idle_ns", "verdict"}
    assert set(data["idle_by_cause_ns"]) == set(launch_gaps.CAUSES)
    assert data["thresholds"]["cpu_bound_tolerance_ns"] == 2_000
    assert json.dumps(data, sort_keys=True) == json.dumps(launch_gaps_data(run(tmp_path, _steps_with_walls([100, 100]), "u.json")), sort_keys=True)


# -- clock skew ------------------------------------------------------------------------------------

def _skewed(offset_us: float, latencies_us: tuple[float, ...]) -> list[dict]:
    """Launches 100 µs apart (4 µs each), each kernel 10 µs long starting ``latency`` after its
    launch returned on the CPU's clock, written on a GPU clock ``offset_us`` ahead."""
    events = [make_step(1, 900, 1000)]
    for i, latency in enumerate(latencies_us):
        t = 1000 + 100 * i
        events += [make_launch("cudaLaunchKernel", t, 4, 10 + i),
                   make_kernel("k", t + 4 + latency + offset_us, 10, 10 + i)]
    return events


def test_gpu_clock_behind_the_cpu_is_found_and_not_shown_as_queue_delay(tmp_path):
    report = run(tmp_path, _skewed(-150, (1, 2, 3, 4)))
    clock = report.clock
    # Every kernel starts over 140 µs before its launch call starts (impossible on one clock): skewed.
    # Kernels 2-4 start on an idle GPU (the first has nothing before it in the trace); their delays
    # after their launch returned are -148, -147, -146 µs: the median, -147 µs, estimates the offset.
    assert (clock["skewed"], clock["early"], clock["linked"], clock["idle_starts"]) == (True, 4, 4, 3)
    assert clock["offset_ns"] == -147_000
    # Corrected queue delays: -149 and -148 + 147 -> 0 (floored), then 0 and +1 µs.
    assert report.per_activity["queue_delay_ns"].to_list() == [0, 0, 0, 1_000]


def test_gpu_clock_far_ahead_is_skew_not_a_300_ms_queue(tmp_path):
    report = run(tmp_path, _skewed(300_000, (2, 2, 2)))
    clock = report.clock
    assert clock["skewed"] and clock["early"] == 0 and clock["offset_ns"] == 300_002_000
    assert report.queue_delay_ns["max"] == 0  # never 300 ms of queue delay
    # The GPU waited 90 µs for each next launch: cpu_bound once the clocks are aligned (on the raw
    # clocks the launch "ended" 300 ms before the gap and the cause would be "other").
    assert gap_causes(report) == [(90_000, "cpu_bound"), (90_000, "cpu_bound")]


def test_work_queued_behind_a_busy_gpu_is_queue_delay_not_skew(tmp_path):
    # One 10 ms kernel, then two launched while it runs: they wait ~10 ms, but none starts on an idle
    # GPU with a long delay, so this is a real queue.
    events = [make_step(1, 0, 20_000), make_launch("cudaLaunchKernel", 10, 4, 1), make_kernel("long", 16, 10_000, 1),
              make_launch("cudaLaunchKernel", 30, 4, 2), make_kernel("a", 10_016, 10, 2),
              make_launch("cudaLaunchKernel", 40, 4, 3), make_kernel("b", 10_026, 10, 3)]
    report = run(tmp_path, events)
    assert not report.clock["skewed"] and report.clock["offset_ns"] is None
    assert report.queue_delay_ns["max"] == 10_026_000 - 44_000


# -- the H200 sample traces ------------------------------------------------------------------------

@pytest.fixture
def gaps(sample):
    """``gaps(name)``: the launch gaps of sample_traces/NAME (shared: opened once per run)."""

    def of(name: str) -> launch_gaps.LaunchGapsReport:
        if not (SAMPLES / name).exists():
            pytest.skip(f"{name} not captured yet")
        return sample(name, execution_trace=None).analyses().launch_gaps

    return of


def test_matmul_add_64_is_overhead_bound(gaps):
    report = gaps("matmul_add_eager-64.json.gz")
    steps = report.per_step
    assert steps["verdict"].to_list() == ["overhead-bound"] * 3
    # Step 3 by hand: nvjet 64x64 GEMM 1.888 µs + elementwise add 1.760 µs, disjoint.
    row = steps.filter(pl.col("step") == 3).row(0, named=True)
    assert row["gpu_busy_ns"] == 3_648
    assert row["cpu_dispatch_ns"] > 30 * row["gpu_busy_ns"]
    # The first profiled step is 2.2x the median of the others: a cold start.
    assert steps["cold"].to_list() == [True, False, False]


def test_matmul_add_4096_is_compute_bound(gaps):
    report = gaps("matmul_add_eager-4096.json.gz")
    steps = report.per_step
    assert steps["verdict"].to_list() == ["compute-bound"] * 3
    row = steps.filter(pl.col("step") == 3).row(0, named=True)
    # By hand from the trace: memset 0.704 + nvjet 174.654 + add 42.304 µs, back to back.
    assert row["gpu_busy_ns"] == 704 + 174_654 + 42_304
    # aten::matmul 68.452 + aten::add 82.995 µs; cudaDeviceSynchronize (82.115 µs) is waiting.
    assert row["cpu_dispatch_ns"] == 68_452 + 82_995
    assert row["cpu_span_ns"] == 308_590
    # The capture syncs after every step, so the busy fraction stays under 80 % ...
    assert 0.5 < row["gpu_busy_frac"] < 0.8
    # ... while the unprofiled loop (do_bench median in the manifest) runs at GPU speed.
    manifest = json.loads((SAMPLES / "manifest.json").read_text())
    timing = next(c["timing"]["median"] for c in manifest["captures"]
                  if c["trace_file"] == "matmul_add_eager-4096.json.gz")
    assert abs(timing * 1000 - row["gpu_busy_ns"]) / row["gpu_busy_ns"] < 0.05


def test_matmul_add_4096_gap_causes(gaps):
    report = gaps("matmul_add_eager-4096.json.gz")
    gaps = report.gaps.filter(pl.col("step") == 3)
    # Step 2's add -> step 3's memset: the CPU sat in step 2's cudaDeviceSynchronize while the GPU
    # drained, then issued step 3 -> sync (outside step 3's GPU window).
    # Memset -> GEMM: the GEMM's cuLaunchKernelEx returned 75.764 µs into the step, after the
    # memset ended at 69.394 µs -> the GPU waited for the CPU.
    # GEMM -> add: the add was queued at 134.8 µs; 1.3 µs gap while the CPU sat in
    # cudaDeviceSynchronize -> back_to_back, not sync.
    assert gaps["cause"].to_list() == ["sync", "cpu_bound", "back_to_back"]
    assert gaps["in_step_window"].to_list() == [False, True, True]


@pytest.mark.parametrize("name", ["mlp_eager.json.gz", "mlp_liger.json.gz", "train_eager.json.gz"])
def test_eager_mlp_and_training_are_overhead_bound_under_the_profiler(name, gaps):
    report = gaps(name)
    assert set(report.per_step["verdict"].to_list()) == {"overhead-bound"}


def test_sample_queue_delay_on_idle_gpu_is_within_tolerance(gaps):
    # The 2 µs cpu_bound tolerance is the idle-GPU launch latency seen on the H200.
    report = gaps("matmul_add_eager-64.json.gz")
    assert report.queue_delay_ns["p90"] <= launch_gaps.CPU_BOUND_TOLERANCE_NS + 500


def test_gzip_sample_is_read_not_modified():
    path = SAMPLES / "matmul_add_eager-64.json.gz"
    if not path.exists():
        pytest.skip("not captured yet")
    before = path.read_bytes()
    load(path)
    assert path.read_bytes() == before and gzip.decompress(before)


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.json.gz") if ".et." not in p.name))
def test_sample_clocks_agree(name, gaps):
    # On the H200 captures work that starts on an idle GPU does so at most 2.2 µs after its launch
    # call returned (median per trace; a CUDA-graph replay's first kernel even starts while the
    # long cudaGraphLaunch call is still open, -12.5 µs), never before its launch call starts.
    report = gaps(name)
    assert report.clock["skewed"] is False and report.clock["early"] == 0
    assert report.clock["idle_start_delay_p50_ns"] < 3_000
