"""tracekit.load: every era and vendor of Kineto trace, bad files, and the msgspec facts it relies on.

The fixtures in tests/fixtures/ are small hand-made traces in each era's real layout (see the README
there for where each shape comes from). Tests on the real captures in sample_traces/ live elsewhere.
"""

from __future__ import annotations

import ast
import decimal
import gzip
import json
import shutil
from pathlib import Path

import msgspec
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit.load as load_mod
from tracekit.errors import TraceError
from tracekit.load import compressed, events, frames, layout, load
from tracekit.shapes import parse_dims, parse_types, tensor_dims
from tracekit.trace import (
    FLOWS_SCHEMA,
    GPU_SCHEMA,
    LAUNCHES_SCHEMA,
    MEMORY_SCHEMA,
    OPS_SCHEMA,
    OVERHEAD_SCHEMA,
    STEPS_SCHEMA,
    THREADS_SCHEMA,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"
ALL_FIXTURES = sorted(FIXTURES.glob("*.json"))
SCHEMAS = {
    "ops": OPS_SCHEMA, "launches": LAUNCHES_SCHEMA, "gpu": GPU_SCHEMA, "overhead": OVERHEAD_SCHEMA,
    "flows": FLOWS_SCHEMA, "memory": MEMORY_SCHEMA, "threads": THREADS_SCHEMA, "steps": STEPS_SCHEMA,
}


def row(df: pl.DataFrame, **where) -> dict:
    """The one row of ``df`` matching ``where`` (column == value), as a dict."""
    hit = df.filter(pl.all_horizontal([pl.col(k) == v for k, v in where.items()]))
    assert hit.height == 1, f"{where}: {hit.height} rows"
    return hit.row(0, named=True)


# --- every fixture: schemas, ordering, invariants ----------------------------------------------


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_frames_have_the_documented_schemas(path: Path) -> None:
    trace = load(path)
    for name, schema in SCHEMAS.items():
        frame = getattr(trace, name)
        assert dict(frame.schema) == schema, name


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_spans_end_at_ts_plus_dur_and_are_sorted(path: Path) -> None:
    trace = load(path)
    for name in ("ops", "launches", "gpu", "overhead"):
        frame = getattr(trace, name)
        assert (frame["end"] == frame["ts"] + frame["dur"]).all()
        assert frame.equals(frame.sort(["ts", "idx"]))
    idx = pl.concat([getattr(trace, n)["idx"] for n in ("ops", "launches", "gpu", "overhead",
                                                        "flows", "memory")])
    assert idx.n_unique() == idx.len()  # each event lands in one frame at most
    assert idx.max() < trace.meta.event_count


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_the_input_file_is_left_untouched(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    before = copy.read_bytes()
    load(copy)
    assert copy.read_bytes() == before


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_chunk_size_does_not_change_the_result(path: Path, tmp_path: Path, monkeypatch) -> None:
    """Tiny chunks and flushes, on the file as written and re-encoded without any whitespace
    (consecutive chunks then share their one-comma separator), give the same frames."""
    compact = tmp_path / "compact.json"
    compact.write_bytes(msgspec.json.encode(msgspec.json.decode(path.read_bytes())))
    references = {source: load(source) for source in (path, compact)}
    for chunk, flush in ((1, 1), (2, 3), (3, 7)):
        monkeypatch.setattr(layout, "CHUNK_EVENTS", chunk)
        monkeypatch.setattr(layout, "CHUNK_BYTES", 150 * chunk - 149)  # 1 byte: every event
        monkeypatch.setattr(frames, "FLUSH_ROWS", flush)
        for source, reference in references.items():
            got = load(source)
            for name in SCHEMAS:
                assert getattr(got, name).equals(getattr(reference, name)), (chunk, name, source)
    # Raw text keeps the file's spacing; numbers and names do not depend on it (except where
    # re-encoding a float changed the digits: the 2024 absolute form does not survive a float).
    if references[path].meta.time_format != "absolute-us3":
        assert references[compact].ops.drop("input_dims", "input_types").equals(
            references[path].ops.drop("input_dims", "input_types"))


# --- 2021: capitalised categories, integer absolute µs, string tids -----------------------------


def test_2021_categories_are_normalised() -> None:
    t = load(FIXTURES / "kineto_2021_cuda.json")
    assert set(t.ops["cat"]) == {"cpu_op"}
    assert set(t.launches["cat"]) == {"cuda_runtime"}
    assert sorted(t.gpu["kind"]) == ["kernel", "memcpy", "memset"]
    assert set(t.flows["cat"]) == {"ac2g"}  # 2021's "async"
    assert sorted(t.flows["ph"]) == ["f", "f", "f", "s", "s", "s"]


def test_2021_integer_microseconds_are_exact_nanoseconds() -> None:
    t = load(FIXTURES / "kineto_2021_cuda.json")
    step = row(t.ops, name="ProfilerStep#10")
    assert (step["ts"], step["dur"], step["end"]) == (1620000000123456000, 2460000, 1620000002583456000 - 2460000000 + 2460000)
    assert row(t.gpu, kind="memset")["dur"] == 0
    assert t.meta.time_format == "absolute-us-int"
    assert t.meta.base_time_ns is None


def test_2021_ids_and_links() -> None:
    t = load(FIXTURES / "kineto_2021_cuda.json")
    assert set(t.ops["tid"]) == {"31383"}  # written as a string
    kernel = row(t.gpu, kind="kernel")
    assert (kernel["pid"], kernel["tid"]) == ("0", "stream 7")
    assert (kernel["correlation"], kernel["external_id"], kernel["stream"], kernel["device"]) == (34, 19720, 7, 0)
    assert (kernel["grid"], kernel["block"], kernel["registers"], kernel["shared_memory"]) == ("[99, 1, 1]", "[128, 1, 1]", 16, 0)
    # Runtime events spell it "external id" and it names the launching op.
    assert t.launches["external_id"].to_list() == [19720, 19720, 19720]
    assert t.launches["cbid"].to_list() == [211, 41, 51]
    assert row(t.gpu, kind="memcpy")["bytes"] == 602112
    assert row(t.gpu, kind="memset")["bytes"] == 256  # with "memory bandwidth (GB/s)": "N/A"
    finish = t.flows.filter(pl.col("ph") == "f")
    assert set(finish["tid"]) == {"stream 7"} and set(finish["id"]) == {34, 35, 36}


def test_2021_memory_event_without_category() -> None:
    t = load(FIXTURES / "kineto_2021_cuda.json")
    assert t.memory.drop("idx").to_dicts() == [{
        "pid": "31383", "tid": "31383", "ts": 1620000000123510000, "addr": 140045846200320,
        "bytes": 25690112, "total_allocated": None, "total_reserved": None, "device_type": 1,
        "device_id": 0, "oom": False,
    }]


def test_2021_meta_and_steps() -> None:
    t = load(FIXTURES / "kineto_2021_cuda.json")
    (dev,) = t.meta.devices
    assert (dev.id, dev.name, dev.compute_capability, dev.num_sms, dev.total_global_mem) == (
        0, "Tesla V100-SXM2-16GB", "7.0", 80, 16945512448)
    assert t.meta.versions == {"schemaVersion": "1"}
    assert t.meta.vendor == "nvidia"
    assert t.meta.event_count == 23
    assert t.steps.to_dicts() == [{
        "name": "ProfilerStep#10", "number": 10, "ts": 1620000000123456000, "dur": 2460000,
        "end": 1620000000125916000, "pid": "31383", "tid": "31383",
    }]
    assert sorted(t.threads.rows()) == [
        ("process", "0", "0", "python"), ("process", "31383", "0", "python"),
        ("thread", "31383", "31383", "thread 31383 (python)"),
    ]


# --- 2022 (torch 1.13 - 2.2): lower-case categories, integer absolute µs ------------------------


def test_2022_layout() -> None:
    t = load(FIXTURES / "kineto_2022_cuda.json")
    assert t.meta.time_format == "absolute-us-int"
    assert t.meta.distributed == {"backend": "nccl", "rank": 1, "world_size": 2}
    assert t.meta.trace_name == "/tmp/rank1.1669161541.pt.trace.json"
    op = row(t.ops, name="aten::addmm")
    assert (op["ts"], op["dur"], op["external_id"], op["sequence_number"], op["record_function_id"]) == (
        1669161541370500000, 60000, 2, 77, 0)
    assert parse_dims(op["input_dims"]) == ((64,), (128, 32), (32, 64), (), ())
    assert parse_types(op["input_types"]) == ("float", "float", "float", "Scalar", "Scalar")
    kernel = row(t.gpu, kind="kernel")
    assert kernel["external_id"] == kernel["correlation"] == 5101  # pre-2.3: matches no op
    assert t.steps["number"].to_list() == [3]
    assert t.memory["bytes"].to_list() == [32768, -32768]  # negative = free
    assert t.memory["total_allocated"].to_list() == [33280, 512]
    assert t.memory["total_reserved"].to_list() == [2097152, 2097152]


# --- 2024 transitional: absolute µs with 3 decimals --------------------------------------------


def test_2024_absolute_three_decimal_times_are_exact() -> None:
    """1712345678901234.567 µs is not a float64; the loader reads the digits instead."""
    t = load(FIXTURES / "kineto_2024_abs3.json")
    step = row(t.ops, name="ProfilerStep#0")
    assert (step["ts"], step["dur"]) == (1712345678901234567, 1000001)
    assert row(t.ops, name="aten::mul")["ts"] == 1712345678901300999
    assert row(t.launches, name="cudaLaunchKernel")[ "ts"] == 1712345678901310001
    kernel = row(t.gpu, kind="kernel")
    assert (kernel["ts"], kernel["dur"]) == (1712345678901320333, 1536)
    assert t.flows.sort("ph")["ts"].to_list() == [1712345678901320333, 1712345678901310001]
    over = t.overhead.row(0, named=True)
    assert (over["pid"], over["tid"], over["ts"], over["dur"]) == ("-1", "0", 1712345678901000500, 12250)
    assert t.meta.time_format == "absolute-us3"


# --- 2025 (torch 2.4+, H200): relative 3-decimal µs ---------------------------------------------


def test_2025_relative_times_are_exact_past_float_precision() -> None:
    """5427059636377.903 µs (a real torch 2.11 magnitude) × 1000 as a float can be 1 ns off."""
    t = load(FIXTURES / "kineto_2025_h200.json")
    assert t.meta.time_format == "relative-ns3"
    assert t.meta.base_time_ns == 1790857026000000000
    step = row(t.ops, name="ProfilerStep#10")
    assert (step["ts"], step["dur"]) == (5427059636377903, 900250)
    linear = t.ops.filter(pl.col("name") == "aten::linear")["ts"].to_list()
    assert linear == [5427059636388028, 5427059637388028]
    triton = row(t.gpu, kind="kernel", correlation=1002)
    assert (triton["ts"], triton["dur"]) == (5427059636601403, 3104)
    # gpu_user_annotation is written 1 ns early and 2 ns long on purpose; kept as written.
    gpu_step = row(t.gpu, kind="annotation", name="ProfilerStep#10")
    assert (gpu_step["ts"], gpu_step["dur"], gpu_step["external_id"]) == (5427059636411902, 860002, 100)


def test_2025_frames() -> None:
    t = load(FIXTURES / "kineto_2025_h200.json")
    assert t.ops["cat"].value_counts().sort("cat").rows() == [
        ("cpu_op", 12), ("python_function", 2), ("user_annotation", 4)]
    assert t.launches.group_by("cat", "name").len().sort("name").rows() == [
        ("cuda_driver", "cuLaunchKernel", 2), ("cuda_driver", "cuLaunchKernelEx", 2),
        ("cuda_runtime", "cudaMemcpyAsync", 2), ("cuda_runtime", "cudaMemsetAsync", 2),
        ("cuda_runtime", "cudaStreamSynchronize", 2)]
    assert row(t.launches, correlation=1001)["cbid"] == 652
    assert t.gpu["kind"].value_counts().sort("kind").rows() == [
        ("annotation", 2), ("kernel", 4), ("memcpy", 2), ("memset", 2), ("sync", 2)]
    nvjet = row(t.gpu, correlation=1001)
    assert nvjet["name"].startswith("nvjet_sm90_tst_128x256")
    assert (nvjet["registers"], nvjet["shared_memory"], nvjet["grid"], nvjet["block"]) == (
        168, 213248, "[132, 1, 1]", "[384, 1, 1]")
    assert row(t.gpu, kind="memcpy", correlation=1003)["bytes"] == 4
    assert row(t.gpu, kind="memset", correlation=1000)["bytes"] == 512
    # The Triton cpu_op's own "grid" (a string) and "stream" do not leak into any frame.
    tri_op = row(t.ops, name="triton_poi_fused__unsafe_view_gelu_mul_0", external_id=105)
    assert tri_op["input_dims"] is None
    assert t.flows.group_by("cat", "ph").len().sort("cat", "ph").rows() == [
        ("ac2g", "f", 8), ("ac2g", "s", 8), ("fwdbwd", "f", 2), ("fwdbwd", "s", 2)]
    assert t.overhead.select("name", "pid", "tid").rows() == [("Activity Buffer Request", "-1", "0")]
    assert t.memory["bytes"].to_list() == [65536, -65536, 65536, -65536]
    assert t.memory["addr"].to_list()[:2] == [140234567892992, 140234567892992]
    assert t.steps.select("name", "number", "ts", "dur").rows() == [
        ("ProfilerStep#10", 10, 5427059636377903, 900250),
        ("ProfilerStep#11", 11, 5427059637377903, 900250)]
    assert ("thread", "0", "7", "stream 7 ") in t.threads.rows()


def test_2025_uneven_input_dims_are_kept_raw() -> None:
    t = load(FIXTURES / "kineto_2025_h200.json")
    cat = t.ops.filter(pl.col("name") == "aten::cat").row(0, named=True)
    assert cat["input_dims"] == "[[[8, 1024], [8, 1024]], []]"
    assert parse_dims(cat["input_dims"]) == (((8, 1024), (8, 1024)), ())
    assert tensor_dims(cat["input_dims"]) == [None, None]
    assert parse_types(cat["input_types"]) == ("TensorList", "Scalar")
    mm = row(t.ops, name="aten::mm", external_id=102)
    assert tensor_dims(mm["input_dims"]) == [(8, 1024), (1024, 4096)]
    assert row(t.ops, name="ProfilerStep#10")["input_dims"] is None


def test_2025_meta() -> None:
    t = load(FIXTURES / "kineto_2025_h200.json")
    (dev,) = t.meta.devices
    assert (dev.name, dev.compute_capability, dev.num_sms, dev.total_global_mem) == (
        "NVIDIA H200", "9.0", 132, 150109880320)
    assert t.meta.versions == {"schemaVersion": "1", "cuda_runtime_version": "13000",
                               "cuda_driver_version": "13000", "cupti_version": "28"}
    assert t.meta.vendor == "nvidia"
    assert t.meta.distributed["backend"] == "nccl" and t.meta.distributed["world_size"] == 1
    assert t.meta.event_count == 77
    assert t.meta.size_bytes == (FIXTURES / "kineto_2025_h200.json").stat().st_size
    assert t.meta.trace_name.endswith("train_eager.pt.trace.json")


# --- ROCm ---------------------------------------------------------------------------------------


def test_rocm_launches_string_bytes_and_string_pids() -> None:
    t = load(FIXTURES / "rocm_mi250.json")
    assert t.meta.vendor == "amd"
    assert t.meta.versions["roctracer_version"] == "4"
    assert t.launches.select("name", "correlation", "cbid", "external_id").rows() == [
        ("hipExtModuleLaunchKernel", 812, 137, 41), ("hipLaunchKernel", 813, 3, 42),
        ("hipMemcpyWithStream", 814, 52, 43)]
    assert set(t.launches["pid"]) == {"3120"}
    memcpy = row(t.gpu, kind="memcpy")
    assert (memcpy["bytes"], memcpy["device"], memcpy["stream"], memcpy["pid"], memcpy["tid"]) == (
        1048576, 2, 0, "2", "0")
    gemm = row(t.gpu, correlation=812)
    assert (gemm["kind"], gemm["grid"], gemm["block"], gemm["ts"], gemm["dur"]) == (
        "kernel", "[1024, 8, 1]", "[256, 1, 1]", 81270000, 25750)
    assert t.steps["number"].to_list() == [5]


def test_amd_is_recognised_by_launch_names_alone(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "rocm_mi250.json").read_text())
    del doc["roctracer_version"], doc["hip_runtime_version"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert load(path).meta.vendor == "amd"


# --- CPU only, no steps ------------------------------------------------------------------------


def test_cpu_only_trace_without_steps() -> None:
    t = load(FIXTURES / "cpu_only_no_steps.json")
    assert t.meta.vendor == "cpu"
    assert t.meta.devices == ()
    assert t.meta.versions == {"schemaVersion": "1"}
    assert t.steps.height == 0 and dict(t.steps.schema) == STEPS_SCHEMA
    assert t.gpu.height == t.launches.height == t.flows.height == t.memory.height == 0
    assert t.ops.select("cat", "name", "ts").rows() == [
        ("python_function", "train.py(12): main", 500000), ("user_annotation", "forward", 501250),
        ("cpu_op", "aten::linear", 502000), ("cpu_op", "aten::addmm", 510500),
        ("cpu_op", "aten::cat", 565000)]
    assert row(t.ops, name="aten::addmm")["dur"] == 40001


# --- containers and odd producers --------------------------------------------------------------


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_gzip_is_found_by_magic_bytes_not_suffix(path: Path, tmp_path: Path) -> None:
    plain = load(path)
    gz_named_json = tmp_path / "trace.json"
    gz_named_json.write_bytes(gzip.compress(path.read_bytes()))
    json_named_gz = tmp_path / "trace.json.gz"
    json_named_gz.write_bytes(path.read_bytes())
    for other in (gz_named_json, json_named_gz):
        got = load(other)
        for name in SCHEMAS:
            assert getattr(got, name).equals(getattr(plain, name)), (other.name, name)
        assert got.meta.size_bytes == plain.meta.size_bytes  # the JSON's size, not the file's


def test_gzip_larger_than_one_inflate_piece(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(compressed, "_INFLATE_STEP", 97)
    doc = json.loads((FIXTURES / "kineto_2025_h200.json").read_text())
    doc["traceEvents"] = doc["traceEvents"] * 40
    text = json.dumps(doc).encode()
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(text))
    assert load(path).meta.event_count == 77 * 40
    assert bytes(load_mod.read_bytes(path)) == text
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(path.read_bytes()[:-9])  # the stream ends early, however it is fed
    with pytest.raises(TraceError, match="truncated gzip"):
        load(cut)


def test_bare_chrome_array_loads(tmp_path: Path) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1,
         "args": {"correlation": 3}},
    ]))
    t = load(path)
    assert t.ops.select("ts", "dur").rows() == [(1500, 2000)]
    assert t.gpu.select("ts", "correlation").rows() == [(2000, 3)]
    assert t.meta.devices == () and t.meta.versions == {}


def test_empty_event_list_is_an_empty_trace(tmp_path: Path) -> None:
    path = tmp_path / "empty_events.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": []}')
    t = load(path)
    assert t.meta.time_format == "empty" and t.meta.vendor == "cpu" and t.meta.event_count == 0
    for name, schema in SCHEMAS.items():
        assert getattr(t, name).height == 0 and dict(getattr(t, name).schema) == schema


def test_unexpected_value_types_are_coerced_not_fatal(tmp_path: Path) -> None:
    """A producer that writes ids as strings, a numeric name or a list where an int belongs still
    loads: that chunk is decoded leniently and coerced column by column."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": 42, "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"External id": "17", "Sequence number": [1], "Input Dims": [[2, 3]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1.0, "tid": 1,
         "ts": 11, "dur": 1, "args": {"correlation": "0x10", "cbid": "n/a"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": 1,
         "args": {"correlation": 16, "device": "0", "stream": "7", "registers per thread": 32.0}},
    ]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = load(path)
    assert t.ops.select("name", "external_id", "sequence_number", "input_dims").rows() == [
        ("42", 17, None, "[[2, 3]]")]
    assert t.launches.select("pid", "correlation", "cbid").rows() == [("1", 16, None)]
    assert t.gpu.select("device", "stream", "registers").rows() == [(0, 7, 32)]


def test_progress_is_reported(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(layout, "CHUNK_EVENTS", 30)
    monkeypatch.setattr(layout, "CHUNK_BYTES", 4000)
    seen = []
    load(FIXTURES / "kineto_2025_h200.json", progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 2 and seen[-1] == (77, 77)  # totals are byte-based estimates until the end
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and all(d <= t for d, t in seen)
    compact = tmp_path / "compact.json"  # minified: planned in chunks too, byte-based estimates
    compact.write_bytes(msgspec.json.encode(msgspec.json.decode(
        (FIXTURES / "kineto_2025_h200.json").read_bytes())))
    seen.clear()
    load(compact, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 2 and seen[-1] == (77, 77)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and all(d <= t for d, t in seen)
    # An array after the events defeats the plan: the exact path counts exactly from the first call.
    data = msgspec.json.decode((FIXTURES / "kineto_2025_h200.json").read_bytes())
    data["logs"] = [1, 2]
    trailing = tmp_path / "trailing.json"
    trailing.write_bytes(msgspec.json.encode(data))
    seen.clear()
    load(trailing, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(30, 77), (60, 77), (77, 77)]


def _layout_used(monkeypatch, path: Path) -> bool:
    """Load ``path``; True when the Kineto-layout chunking produced the result."""
    calls = []
    real = layout.decode_top
    monkeypatch.setattr(layout, "decode_top", lambda *a: calls.append(1) or real(*a))
    load(path)
    return not calls


def test_the_planned_layout_is_used_for_kineto_files(monkeypatch) -> None:
    for path in ALL_FIXTURES:
        assert _layout_used(monkeypatch, path), path.name


@pytest.mark.parametrize("case, planned", [("trailing_array", False), ("nested_object_on_its_own_line", True),
                                           ("compact", True)])
def test_layout_guesses_that_fail_fall_back_to_the_exact_path(case: str, planned: bool, tmp_path: Path,
                                                              monkeypatch) -> None:
    # A minified file and a nested object on its own line are planned in chunks (the separator
    # "},{" is found whatever the white space, and a nested object is no separator); an array after
    # the events makes the guess of the array's end wrong, and the exact path reads it.
    monkeypatch.setattr(layout, "CHUNK_BYTES", 1)
    events = [
        '  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 1,'
        ' "args": {"Input Dims": [[1]]}}',
        '  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2.5, "dur": 1,'
        ' "args": {"x":\n  {"External id": 9}, "External id": 7}}',
        '  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1}',
    ]
    if case != "nested_object_on_its_own_line":
        events[1] = events[1].replace("\n  {", "{")
    text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]"
    text += ', "logs": [1, 2]}' if case == "trailing_array" else "}"
    if case == "compact":
        text = json.dumps(json.loads(text), separators=(",", ":"))
    path = tmp_path / f"{case}.json"
    path.write_text(text)
    assert _layout_used(monkeypatch, path) == planned
    t = load(path)
    assert t.ops.select("name", "ts", "external_id").rows() == [("a", 1500, None), ("b", 2500, 7)]
    assert t.gpu.select("name", "ts").rows() == [("k", 3000)]
    assert t.meta.event_count == 3 and t.meta.versions == {"schemaVersion": "1"}


# --- files that are not traces: one clear line, never a traceback ------------------------------


def _bad_files(tmp: Path) -> list[tuple[str, Path, str]]:
    good = (FIXTURES / "kineto_2025_h200.json").read_bytes()
    cases: list[tuple[str, bytes | None, str]] = [
        ("empty", b"", "empty file"),
        ("whitespace", b" \n\t\r\n  ", "only whitespace"),
        ("binary", bytes(range(256)) * 4, "not JSON"),
        ("array_of_numbers", b"[1, 2, 3]", "none of the 3 entries of traceEvents is an event"),
        ("array_of_objects", b'[{"name": "x"}]', "none of the 1 entries of traceEvents is an event"),
        ("object_without_events", b'{"schemaVersion": 1, "foo": []}', "no 'traceEvents'"),
        ("events_not_a_list", b'{"traceEvents": 5}', "'traceEvents' is not a list"),
        ("truncated_json", good[: len(good) // 2], "truncated JSON"),
        ("text", b"hello world\n", "not JSON"),
        ("bad_json", b'{"traceEvents": [{"ph": "X",, }]}', "not valid JSON"),
        ("truncated_gzip", gzip.compress(good)[:300], "truncated gzip"),
        ("gzip_of_garbage", gzip.compress(bytes(range(256))), "not JSON"),
        ("gzip_of_nothing", gzip.compress(b""), "empty file"),
        ("corrupt_gzip", b"\x1f\x8b" + bytes(range(200)), "corrupt gzip"),
        ("event_of_bad_shape", b'{"traceEvents": [{"ph": 5, "name": "x"}]}', "none of the 1 entries"),
    ]
    out = []
    for name, content, problem in cases:
        path = tmp / f"{name}.json"
        path.write_bytes(content)
        out.append((name, path, problem))
    (tmp / "a_directory").mkdir()
    out.append(("directory", tmp / "a_directory", "is a directory"))
    out.append(("missing", tmp / "no_such_trace.json", "no such file"))
    return out


def test_bad_files_raise_one_line_trace_errors(tmp_path: Path) -> None:
    for name, path, problem in _bad_files(tmp_path):
        with pytest.raises(TraceError) as info:
            load(path)
        message = str(info.value)
        assert message.startswith(f"{path}: "), name
        assert problem in message, (name, message)
        assert "\n" not in message, name
        assert len(message) < 300, (name, message)
        assert info.value.__cause__ is None, name  # raised "from None": no chained traceback
        assert info.value.__context__ is None or info.value.__suppress_context__, name


def test_bad_files_through_the_cli(tmp_path: Path, capsys) -> None:
    from tracekit import commands as cli
    for name, path, problem in _bad_files(tmp_path):
        if name == "directory":
            continue  # `report DIR` means "every rank trace in DIR"
        with pytest.raises(SystemExit) as info:
            cli.main(["report", str(path)])
        err = capsys.readouterr().err
        assert info.value.code == 2, (name, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and problem in lines[0] and "Traceback" not in err, (name, err)


# --- the msgspec and float facts the loader relies on ------------------------------------------


def test_msgspec_int_float_union_keeps_big_ints_exact() -> None:
    class E(msgspec.Struct):
        ts: int | float | None = None

    got = msgspec.json.Decoder(list[E]).decode(b'[{"ts": 1620000000123456}, {"ts": 9007199254740993},'
                                                b' {"ts": 123.456}]')
    assert [type(e.ts) for e in got] == [int, int, float]
    assert got[1].ts == 9007199254740993  # 2^53 + 1: not a float64


def test_msgspec_raw_is_a_view_into_the_buffer() -> None:
    """The loader's no-copy chunking depends on Raw pointing into the decoded buffer."""
    data = bytearray(b'{"traceEvents": [{"ph": "X"}, {"ph": "i", "name": "n"}]}')
    top = msgspec.json.decode(data, type=events.TopLevel)
    base, size = layout._address(data)
    for raw in top.traceEvents:
        addr, length = layout._address(raw)
        assert base <= addr and addr + length <= base + size
        assert bytes(data[addr - base: addr - base + length]) == bytes(raw)


def test_msgspec_float_hook_gives_exact_decimals() -> None:
    got = events._EXACT_TIMES_DECODER.decode(b'[{"ts": 1712345678901234.567, "dur": 12}]')
    assert got[0].ts == decimal.Decimal("1712345678901234.567") and got[0].dur == 12


@settings(max_examples=300, deadline=None)
@given(whole=st.integers(min_value=0, max_value=2**43 - 1), frac=st.integers(0, 999))
@pytest.mark.slow
def test_three_decimal_microseconds_convert_exactly(whole: int, frac: int) -> None:
    text = f"{whole}.{frac:03d}"
    got = frames._Times().ns("ts", [float(text)]).to_list()
    assert got == [whole * 1000 + frac]


# --- the loader's boundary ------------------------------------------------------------------------

#: The tracekit modules the loader may import besides its own: it knows no analysis.
LOADER_MAY_IMPORT = ("tracekit.trace", "tracekit.errors", "tracekit.output", "tracekit.parallel", "tracekit.progress")


def _tracekit_imports(path: Path) -> set[str]:
    """The tracekit modules ``path`` imports anywhere (functions included), as absolute names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            # ``from tracekit import parallel`` imports a module; ``from tracekit.x import f`` a name.
            found.update(f"{node.module}.{alias.name}" if node.module == "tracekit" else node.module
                         for alias in node.names)
    return {name for name in found if name == "tracekit" or name.startswith("tracekit.")}


def test_the_loader_imports_no_analysis() -> None:
    package = Path(load_mod.__file__).parent
    files = sorted(package.rglob("*.py"))
    assert {p.name for p in files} >= {"__init__.py", "events.py", "layout.py", "frames.py", "shares.py",
                                       "parquet.py"}
    imported = {name: path.name for path in files for name in _tracekit_imports(path)}
    assert {"tracekit.trace", "tracekit.errors", "tracekit.parallel"} <= set(imported)  # the walk sees them
    own = {name for name in imported if name == "tracekit.load" or name.startswith("tracekit.load.")}
    outside = {name: where for name, where in imported.items()
               if name not in own and name not in LOADER_MAY_IMPORT}
    assert outside == {}
