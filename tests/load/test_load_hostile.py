"""What the loader does with damaged, odd and crafted input, number by number.

Every count asserted here is checked against the raw JSON: the mutations are made on
``sample_traces/mlp_eager.json.gz`` (a real H200 capture: 249 events, 15 of them ``kernel``, 87
``cpu_op``) and the expected figure follows from what was changed — e.g. one kernel's ``ts`` set to
NaN leaves 14 kernels and one event dropped for an unusable time.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import tracekit.execution_trace as et_mod
from tracekit import shapes
from tracekit.session import read_expectations
from tracekit.errors import TraceError, UsageError
from tracekit.load import load, read_options, source
from tracekit.load.read_options import ReadOptions

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "mlp_eager.json.gz"
RAW = gzip.decompress(SAMPLE.read_bytes())
KERNELS = 15  # events with "cat": "kernel" in the sample (counted in the JSON)
FIRST_KERNEL = 97  # traceEvents[97] is the first kernel (an nvjet GEMM)
OPS = 87


def doc() -> dict:
    return json.loads(RAW)


def write(tmp: Path, data: bytes | dict, name: str = "t.json") -> Path:
    path = tmp / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data, allow_nan=True).encode())
    return path


def with_value(field: str, text: str, index: int = FIRST_KERNEL) -> bytes:
    """The sample with ``traceEvents[index][field]`` replaced by the JSON text ``text``."""
    d = doc()
    d["traceEvents"][index][field] = "@@MARK@@"
    return json.dumps(d).replace('"@@MARK@@"', text).encode()


# --- numbers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,text", [
    ("ts", "NaN"), ("ts", "Infinity"), ("ts", "-Infinity"), ("ts", "1e300"), ("ts", str(2**63)),
    ("ts", str(2**64)), ("ts", str(2**70)), ("ts", '"soon"'), ("ts", "null"), ("ts", "[]"),
    ("dur", "NaN"), ("dur", "-3.5"), ("dur", "1e300"), ("dur", str(2**63)), ("dur", '{"a": 1}'),
])
def test_an_event_with_an_unusable_time_is_dropped_and_counted(tmp_path: Path, field: str, text: str) -> None:
    trace = load(write(tmp_path, with_value(field, text)))
    assert trace.kernels.height == KERNELS - 1
    assert trace.meta.dropped_events == {"unusable_time": 1}
    assert trace.meta.event_count == 249  # the entries of traceEvents, dropped ones included


def test_times_within_range_are_kept_exactly(tmp_path: Path) -> None:
    # A float where an int belongs, a missing dur, and an int µs that fits: kept, nothing dropped.
    d = doc()
    d["traceEvents"][FIRST_KERNEL]["dur"] = 7.0
    del d["traceEvents"][FIRST_KERNEL + 4]["dur"]
    trace = load(write(tmp_path, d))
    assert trace.meta.dropped_events == {}
    durs = sorted(trace.kernels["dur"].to_list())
    assert 7000 in durs and 0 in durs


def test_nan_in_a_field_that_is_not_a_time_is_a_missing_value(tmp_path: Path) -> None:
    # "est. achieved occupancy %" is not read; "correlation" is: the kernel stays, unlinked.
    d = doc()
    d["traceEvents"][FIRST_KERNEL]["args"]["est. achieved occupancy %"] = float("nan")
    d["traceEvents"][FIRST_KERNEL]["args"]["correlation"] = float("inf")
    trace = load(write(tmp_path, d))
    assert trace.kernels.height == KERNELS and trace.meta.dropped_events == {}
    assert trace.kernels["correlation"].null_count() == 1


def test_out_of_range_ids_become_missing_not_a_crash(tmp_path: Path) -> None:
    trace = load(write(tmp_path, with_value("pid", str(2**70))))
    assert trace.kernels.height == KERNELS
    assert str(2**70) in trace.kernels["pid"].to_list()  # ids are text: kept as written
    d = doc()
    d["traceEvents"][FIRST_KERNEL]["args"]["correlation"] = 2**64
    d["traceEvents"][FIRST_KERNEL]["args"]["External id"] = 3.5
    trace = load(write(tmp_path, d))
    first = trace.kernels.sort("idx").row(0, named=True)
    assert first["correlation"] is None and first["external_id"] == 3


# --- structure ---------------------------------------------------------------------------------------

def test_entries_that_are_not_events_are_skipped_and_counted(tmp_path: Path) -> None:
    d = doc()
    d["traceEvents"][3:3] = [5, "text", None, {"name": "no ph"}, {"ph": 7}]
    trace = load(write(tmp_path, d))
    assert trace.meta.dropped_events == {"not_an_event": 5}
    assert trace.kernels.height == KERNELS and trace.ops.filter(trace.ops["cat"] == "cpu_op").height == OPS
    with pytest.raises(TraceError, match="none of the 3 entries of traceEvents is an event"):
        load(write(tmp_path, {"traceEvents": [1, "x", {"name": "no ph"}]}))


def test_an_event_whose_args_are_not_an_object_keeps_everything_else(tmp_path: Path) -> None:
    trace = load(write(tmp_path, with_value("args", "5")))
    assert trace.kernels.height == KERNELS and trace.meta.dropped_events == {}


@pytest.fixture
def default_recursion_limit():
    """The interpreter's default recursion limit for the test: the decoder's nesting limit follows it,
    and torch.compile run earlier in the same process (the capture tests) lifts it to 2,000."""
    import sys

    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.parametrize("depth", [1000, 10_000, 100_000])
@pytest.mark.parametrize("where", ["args.Input Dims", "args.grid", "args.foo", "name", "top"])
def test_deep_nesting_is_one_line(tmp_path: Path, depth: int, where: str, default_recursion_limit) -> None:
    nest = "[" * depth + "]" * depth
    if where == "top":
        data = nest.encode()
    elif where.startswith("args."):
        d = doc()
        d["traceEvents"][FIRST_KERNEL]["args"][where[5:]] = "@@MARK@@"
        data = json.dumps(d).replace('"@@MARK@@"', nest).encode()
    else:
        data = with_value(where, nest)
    with pytest.raises(TraceError, match="nested deeper than the decoder's limit") as info:
        load(write(tmp_path, data))
    assert "\n" not in str(info.value)


def test_defined_outcomes_of_odd_shapes(tmp_path: Path) -> None:
    events = doc()["traceEvents"]
    assert load(write(tmp_path, json.dumps(events).encode())).kernels.height == KERNELS  # Chrome array
    assert load(write(tmp_path, {"traceEvents": []})).meta.event_count == 0
    with pytest.raises(TraceError, match="'traceEvents' is not a list"):
        load(write(tmp_path, {"traceEvents": {"0": events[0]}}))
    with pytest.raises(TraceError, match="no 'traceEvents' list"):
        load(write(tmp_path, {"events": events}))
    with pytest.raises(TraceError, match="trailing data after the JSON"):
        load(write(tmp_path, RAW + b"\n}junk"))
    # Duplicate keys: the last one wins, as in Python's json and msgspec.
    dup = RAW.replace(b'"traceEvents"', b'"traceEvents": [], "traceEvents"', 1)
    assert load(write(tmp_path, dup)).kernels.height == KERNELS
    dup_ph = RAW.replace(b'"ph": "X", "cat": "kernel"', b'"ph": "i", "ph": "X", "cat": "kernel"')
    assert load(write(tmp_path, dup_ph)).kernels.height == KERNELS


def test_an_execution_trace_passed_as_the_trace_gets_a_hint(tmp_path: Path) -> None:
    et = tmp_path / "x.et.json.gz"
    et.write_bytes((ROOT / "sample_traces" / "mlp_eager.et.json.gz").read_bytes())
    with pytest.raises(TraceError, match="execution trace, not a Kineto trace: pass it with --execution-trace"):
        load(et)


# --- metadata and vendors ------------------------------------------------------------------------------

def test_metadata_of_any_type_never_refuses_a_trace(tmp_path: Path) -> None:
    d = doc()
    d.update(roctracer_version=4.1, schemaVersion=1.5, cupti_version=[1, 2], deviceProperties={"a": 1},
             distributedInfo=[1], baseTimeNanoseconds="soon", traceName={"x": 1})
    trace = load(write(tmp_path, d))
    meta = trace.meta
    assert meta.versions["roctracer_version"] == "4.1" and meta.versions["schemaVersion"] == "1.5"
    assert meta.versions["cupti_version"] == "[1,2]"
    assert meta.devices == () and meta.distributed is None and meta.base_time_ns is None
    assert meta.trace_name == '{"x":1}'
    assert meta.vendor == "amd"  # roctracer_version says ROCm, whatever its type
    assert trace.kernels.height == KERNELS


def _device_trace(cat: str, n: int, launch_cat: str | None) -> dict:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 50.0}]
    if launch_cat:
        events.append({"ph": "X", "cat": launch_cat, "name": "launch", "pid": 1, "tid": 1, "ts": 2.0, "dur": 1.0,
                       "args": {"correlation": 1}})
    events += [{"ph": "X", "cat": cat, "name": f"op{i % 3}", "pid": 2, "tid": 3, "ts": 10.0 + i, "dur": 0.5}
               for i in range(n)]
    events.append({"ph": "s", "cat": cat, "name": "flow", "id": 1, "pid": 2, "tid": 3, "ts": 10.0})
    return {"schemaVersion": 1, "traceEvents": events}


def test_device_activity_tracekit_does_not_analyse_is_counted_and_named(tmp_path: Path) -> None:
    from tracekit.session import Session

    path = write(tmp_path, _device_trace("mtia_ccp_events", 25_814, "mtia_runtime"))
    trace = load(path)
    assert trace.meta.unanalysed_activity == {"mtia_ccp_events": 25_814}  # the flow is not an activity
    assert trace.meta.vendor == "mtia"
    report = Session(path, execution_trace=None).report()
    from tracekit.render import renderer_for
    import io

    md = io.StringIO()
    renderer_for("md").render(report, md)
    assert "25,814 MTIA device activities: not analysed" in md.getvalue()
    data = io.StringIO()
    renderer_for("json").render(report, data)
    assert json.loads(data.getvalue())["trace"]["unanalysed_activity"] == {"mtia_ccp_events": 25_814}


@pytest.mark.parametrize("cat,launch,vendor", [
    ("hpu_op", None, "habana"), ("kernel", "xpu_runtime", "intel"), ("kernel", "cuda_runtime", "nvidia"),
    ("mlu_memcpy", "mlu_runtime", "cambricon"), ("kernel", "privateuse1_runtime", "privateuse1"),
])
def test_the_vendor_comes_from_the_device_activity(tmp_path: Path, cat: str, launch: str | None, vendor: str) -> None:
    assert load(write(tmp_path, _device_trace(cat, 3, launch))).meta.vendor == vendor


# --- compression ---------------------------------------------------------------------------------------

def test_compressed_forms_by_magic_bytes(tmp_path: Path) -> None:
    plain = load(write(tmp_path, RAW))
    for name, data in (("b.json", bz2.compress(RAW)), ("x.json", lzma.compress(RAW)),
                       ("m.json", gzip.compress(RAW[:5000]) + gzip.compress(RAW[5000:]) + bytes(512)),
                       ("m2.json", bz2.compress(RAW[:5000]) + bz2.compress(RAW[5000:]))):
        got = load(write(tmp_path, data, name))
        assert got.kernels.equals(plain.kernels) and got.ops.equals(plain.ops), name
        assert got.meta.size_bytes == len(RAW) and got.meta.partial is None
    for magic, word in ((b"\x28\xb5\x2f\xfd", "zstd"), (b"\x04\x22\x4d\x18", "lz4"), (b"PK\x03\x04", "zip"),
                        (b"7z\xbc\xaf\x27\x1c", "7z")):
        with pytest.raises(TraceError, match=word):
            load(write(tmp_path, magic + bytes(300), "c.json"))
    with pytest.raises(TraceError, match="trailing data after the gzip data"):
        load(write(tmp_path, gzip.compress(RAW) + b"junk", "j.json"))


@pytest.mark.slow
def test_a_decompression_bomb_is_refused_at_the_cap(tmp_path: Path) -> None:
    member = gzip.compress(bytes(1 << 20), 9)  # 1 MiB of zeros in about 1 KB
    path = write(tmp_path, member * 200, "bomb.json")  # 200 MiB inflated
    with pytest.raises(TraceError, match="inflates past 10,485,760 bytes; refused"):
        load(path, options=ReadOptions(max_inflated_size=10 << 20))
    for data in (bz2.compress(bytes(200 << 20)), lzma.compress(bytes(50 << 20))):
        with pytest.raises(TraceError, match="inflates past 1,048,576 bytes"):
            load(write(tmp_path, data, "bomb2.json"), options=ReadOptions(max_inflated_size=1 << 20))


def test_the_default_cap_follows_free_memory(monkeypatch) -> None:
    monkeypatch.setattr(read_options, "available_memory", lambda: 8 << 30)
    assert read_options.default_max_inflated() == 2 << 30
    monkeypatch.setattr(read_options, "available_memory", lambda: 1 << 20)
    assert read_options.default_max_inflated() == read_options.MIN_DEFAULT_CAP
    monkeypatch.setenv(read_options.MAX_INFLATED_ENV, "500M")
    assert read_options.options().max_inflated_size == 500 << 20
    assert read_options.parse_size("8G") == 8 << 30 and read_options.parse_size("none") is None
    with pytest.raises(ValueError):
        read_options.parse_size("lots")


def _event_ends(text: bytes) -> list[int]:
    """Byte offset just past each event of a Kineto-layout trace, found with the standard library."""
    decoder = json.JSONDecoder()
    start = text.index(b"[", text.index(b'"traceEvents"')) + 1
    s = text.decode()
    pos, ends = len(text[:start].decode()), []
    while True:
        while s[pos] in " \n\r\t,":
            pos += 1
        if s[pos] == "]":
            return ends
        _, pos = decoder.raw_decode(s, pos)
        ends.append(len(s[:pos].encode()))


def test_a_truncated_gzip_is_an_error_and_partial_reads_the_events_before_the_cut(tmp_path: Path) -> None:
    gz = gzip.compress(RAW)
    path = write(tmp_path, gz[: len(gz) * 2 // 3], "cut.json.gz")
    with pytest.raises(TraceError, match=r"truncated gzip: .*bytes of incomplete JSON \(--partial"):
        load(path)
    trace = load(path, options=ReadOptions(max_inflated_size=None, partial=True))
    inflated = len(source.read_input(path, opts=ReadOptions(None, partial=True)).data)
    complete = sum(1 for end in _event_ends(RAW) if end <= inflated)
    assert 0 < complete < 249
    assert trace.meta.event_count == complete
    assert trace.meta.partial.startswith("truncated gzip") and "only the events before the cut" in trace.meta.partial


def test_partial_on_plain_json_cut_short(tmp_path: Path) -> None:
    cut = RAW[: len(RAW) // 2]
    path = write(tmp_path, cut)
    with pytest.raises(TraceError, match="truncated JSON"):
        load(path)
    trace = load(path, options=ReadOptions(None, partial=True))
    assert trace.meta.event_count == sum(1 for end in _event_ends(RAW) if end <= len(cut))
    assert trace.meta.partial.startswith("truncated JSON")


@pytest.mark.slow
def test_partial_is_marked_in_every_format(tmp_path: Path) -> None:
    gz = gzip.compress(RAW)
    path = write(tmp_path, gz[: len(gz) // 2], "cut.json.gz")
    outs = {}
    for fmt in ("term", "md", "json"):
        result = subprocess.run([sys.executable, "-m", "tracekit", "report", str(path), "--partial", "--format", fmt],
                                capture_output=True, text=True, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        outs[fmt] = result.stdout
    assert "PARTIAL" in outs["term"] and "**PARTIAL**" in outs["md"]
    assert json.loads(outs["json"])["trace"]["partial"].startswith("truncated gzip")


# --- streams and what is not a regular file -------------------------------------------------------------

@pytest.mark.slow
def test_streams_are_read(tmp_path: Path) -> None:
    expected = subprocess.run([sys.executable, "-m", "tracekit", "report", str(SAMPLE), "--format", "json",
                               "--no-execution-trace"], capture_output=True, cwd=ROOT, check=True).stdout
    members = gzip.compress(RAW[:7000]) + gzip.compress(RAW[7000:])
    for argv, data in ((["-"], SAMPLE.read_bytes()), (["/dev/stdin"], members), (["-"], RAW)):
        got = subprocess.run([sys.executable, "-m", "tracekit", "report", *argv, "--format", "json"],
                             input=data, capture_output=True, cwd=ROOT)
        assert got.returncode == 0, got.stderr
        a, b = json.loads(got.stdout), json.loads(expected)
        a["trace"].pop("path"), b["trace"].pop("path")
        a["trace"].pop("size_bytes"), b["trace"].pop("size_bytes")
        assert a == b
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m tracekit report <(cat {SAMPLE}) --format json"],
                           capture_output=True, cwd=ROOT)
    assert shell.returncode == 0 and json.loads(shell.stdout)["steps"] == json.loads(expected)["steps"]
    junk = subprocess.run([sys.executable, "-m", "tracekit", "report", "-"], input=RAW + b"xx",
                          capture_output=True, text=False, cwd=ROOT)
    assert junk.returncode == 2 and b"trailing data after the JSON" in junk.stderr


def test_inputs_that_are_not_regular_files_are_refused_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="is a named pipe, not a regular trace file"):
        load(fifo)  # would wait forever for a writer if it were opened
    with pytest.raises(TraceError, match="is a character device"):
        load("/dev/zero")
    with pytest.raises(TraceError, match="path too long for the operating system"):
        load(tmp_path / ("x" * 5000))
    with pytest.raises(TraceError, match="is a character device, not a regular execution trace file"):
        et_mod.load("/dev/zero")
    with pytest.raises(TraceError, match="named pipe"):
        et_mod.load(fifo)
    for bad in ("/dev/zero", fifo):
        with pytest.raises(UsageError, match="not a regular expectations file"):
            read_expectations(bad)


# --- execution traces ------------------------------------------------------------------------------------

V101_NODE = {"name": "aten::mm", "id": 7, "rf_id": 5, "parent": 2, "fw_parent": 0, "seq_id": -1, "scope": 0,
             "tid": 1, "fw_tid": 0, "op_schema": "aten::mm(Tensor self, Tensor mat2) -> Tensor",
             "inputs": [[3, 4, 0, 16, 4, "cuda:0"], [5, 6, 2, 8, 2, "cuda:0"]],
             "input_shapes": [[4, 4], [2, 4]], "input_types": ["Tensor(float)", "Tensor(c10::Half)"],
             "outputs": [[9, 10, 0, 8, 4, "cuda:0"]], "output_shapes": [[4, 2]], "output_types": ["Tensor(float)"]}


def test_execution_trace_schema_1_0_1_reads_list_shaped_inputs(tmp_path: Path) -> None:
    # The ExecutionGraphObserver era (torch 1.13-2.0): values, shapes and types side by side on the node.
    path = write(tmp_path, {"schema": "1.0.1", "pid": 1, "nodes": [
        {"name": "[pytorch|profiler|execution_graph|thread]", "id": 2, "rf_id": 0, "parent": 1},
        V101_NODE]}, "old.et.json")
    et = et_mod.load(path)
    node = et.by_rf_id[5]
    assert node.parent == 2 and et.children[2] == (7,)
    assert node.inputs[1] == et_mod.EtTensor(5, 6, 2, 8, 2, "cuda:0", "c10::Half")
    assert node.inputs[1].byte_range == (4, 20)
    assert node.input_shapes == ([4, 4], [2, 4]) and node.outputs[0].numel == 8


def test_malformed_execution_trace_nodes_are_skipped_or_read_as_absent(tmp_path: Path) -> None:
    nodes = [dict(V101_NODE, id="7"), dict(V101_NODE, id=None, rf_id=6), dict(V101_NODE, id=True, rf_id=8),
             {"name": "x", "id": 11, "attrs": {"rf_id": 9}, "inputs": "nope"},
             {"name": "y", "id": 12, "attrs": [{"name": "rf_id", "value": 10}, 5, {"value": 1}],
              "inputs": {"values": [[2**70, 1, 0, 2**62, 2**62, "cuda:0"]], "types": ["Tensor(float)"],
                         "shapes": [[2**62, 2**62]]}},
             {"name": "loop", "id": 13, "ctrl_deps": 14}, {"name": "loop2", "id": 14, "ctrl_deps": 13}]
    et = et_mod.load(write(tmp_path, {"schema": "1.1.0-chakra.0.0.4", "nodes": nodes}, "bad.et.json"))
    assert [n.id for n in et.nodes] == [7, 11, 12, 13, 14] and et.skipped_nodes == 2
    assert et.by_id[11].rf_id is None and et.by_id[11].inputs == ()
    assert et.by_rf_id[10].inputs == (None,) and et.by_rf_id[10].input_shapes == ([],)
    assert [n.id for n in et.descendants(13)] == [14]  # a cycle of parents ends
    assert not et.by_id[12].mutated_inputs()
    with pytest.raises(TraceError, match="nested deeper than the decoder's limit"):
        et_mod.load(write(tmp_path, b'{"nodes": [' + b"[" * 5000 + b"]" * 5000 + b"]}", "deep.et.json"))
    gz = gzip.compress(json.dumps({"nodes": nodes}).encode())
    with pytest.raises(TraceError, match="truncated gzip"):
        et_mod.load(write(tmp_path, gz[:-30], "cut.et.json"))


# --- expectations files --------------------------------------------------------------------------------

def test_hostile_expectations_files_are_one_line(tmp_path: Path) -> None:
    cases = {
        "nested.toml": (b"a = " + b"[" * 10_000 + b"]" * 10_000, "nested deeper than the parser goes"),
        "huge.toml": (b"[per_step]\nkernels_present = [" + b'"a",' * 1_000_000 + b"]", "is not an expectations file"),
        "many.toml": (b"[per_step]\nkernels_present = [" + b'"a",' * 5000 + b"]", "has 5,000 patterns"),
        "long_key.toml": (b"[per_step]\n" + b"k" * 100_000 + b" = 1", "unknown expectation"),
    }
    for name, (data, problem) in cases.items():
        with pytest.raises(UsageError, match=problem) as info:
            read_expectations(write(tmp_path, data, name))
        assert len(str(info.value)) < 600 and "\n" not in str(info.value), name
    loaded = read_expectations(write(tmp_path, b'description = "[bold red]x[/] \\u001b[2J"\n[per_step]\nkernels_min = 0\n',
                               "markup.toml"))
    assert loaded.description == "[bold red]x[/] \x1b[2J"  # kept as written; renderers escape it


# --- shapes ---------------------------------------------------------------------------------------------

def test_absurd_input_dims_are_unparsable() -> None:
    raw = json.dumps([[2, 3], [2**62, 2], [2**40, 2**40], [True], [1.5], [-1], ["a", 1.5, None], [[1, 2], [3]]])
    assert shapes.tensor_dims(raw) == [(2, 3), None, None, None, None, None, None, None]
    assert shapes.parse_dims(raw)[7] == ((1, 2), (3,))
    assert shapes.parse_dims("[" * 3000 + "]" * 3000) == ()


# --- report DIR ---------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_rank_directory_names_each_bad_file_and_reports_the_others(tmp_path: Path) -> None:
    from tracekit import ranks

    d = doc()
    d["distributedInfo"] = {"rank": 1, "world_size": 4}
    write(tmp_path, d, "rank1.json")
    d["distributedInfo"] = {"rank": 2**70}
    write(tmp_path, d, "rank_absurd.json")
    write(tmp_path, gzip.compress(RAW)[:300], "rank_cut.json.gz")
    write(tmp_path, b"[" * 100_000 + b"]" * 100_000, "rank_deep.json")
    fifo = tmp_path / "rank_fifo.json"
    os.mkfifo(fifo)  # not a regular file: not a rank file either
    result = ranks.analyze(tmp_path, workers=2)
    rows = {r["file"]: r for r in result.ranks.iter_rows(named=True)}
    assert set(rows) == {"rank1.json", "rank_absurd.json", "rank_cut.json.gz", "rank_deep.json"}
    assert rows["rank1.json"]["error"] is None and rows["rank1.json"]["rank"] == 1
    assert rows["rank1.json"]["kernel_count"] == KERNELS
    assert rows["rank_absurd.json"]["rank"] is None
    assert "rank 1180591620717411303424 is not a rank number" in rows["rank_absurd.json"]["error"]
    assert "truncated gzip" in rows["rank_cut.json.gz"]["error"]
    assert "nested deeper" in rows["rank_deep.json"]["error"]
    # The one file that can say which rank it is holds rank 1 of 4: ranks 0, 2 and 3 are not here.
    assert (result.world_size, result.missing) == (4, ((0, 0), (2, 3)))


def test_a_rank_file_that_crashes_its_process_is_named(tmp_path: Path, monkeypatch) -> None:
    from tracekit import ranks

    d = doc()
    d["distributedInfo"] = {"rank": 0, "world_size": 2}  # a set of ranks: b.json cannot say its own
    write(tmp_path, d, "a.json")
    write(tmp_path, RAW, "b.json")
    calls = []

    class Broken:
        def __init__(self, n, env=None):  # spawn_pool's signature: workers, their environment
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, path):
            from concurrent.futures import Future
            from concurrent.futures.process import BrokenProcessPool

            calls.append(path)
            future = Future()
            if path.endswith("b.json"):
                future.set_exception(BrokenProcessPool("a child died"))
            else:
                future.set_result(fn(path))
            return future

    monkeypatch.setattr(ranks.parallel, "spawn_pool", Broken)
    rows = {r["file"]: r for r in ranks.analyze(tmp_path, workers=2).ranks.iter_rows(named=True)}
    assert rows["a.json"]["error"] is None
    assert "the process reading it died" in rows["b.json"]["error"]
    assert sorted(Path(c).name for c in calls) == ["a.json", "b.json", "b.json"]  # b retried alone


# --- internal errors --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_internal_error_is_exit_3_with_one_line_and_a_traceback_only_when_debugging(tmp_path: Path) -> None:
    code = ("import sys, tracekit.results.report as r\n"
            "def boom(*a, **k): raise ZeroDivisionError('a bug')\n"
            "r.build = boom\n"
            "from tracekit import commands\n"
            "commands.main(sys.argv[1:])\n")
    argv = [sys.executable, "-c", code, "report", str(SAMPLE), "--no-execution-trace"]
    plain = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in plain.stderr.splitlines() if line.strip()]
    assert plain.returncode == 3 and len(lines) == 1, plain.stderr
    assert lines[0].startswith("tracekit: internal error: ZeroDivisionError: a bug — this is a bug in tracekit")
    assert "Traceback" not in plain.stderr
    debug = subprocess.run(argv[:3] + ["--debug"] + argv[3:], capture_output=True, text=True, cwd=ROOT)
    assert debug.returncode == 3 and "Traceback" in debug.stderr
    env = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "TRACEKIT_DEBUG": "1"})
    assert env.returncode == 3 and "Traceback" in env.stderr


def test_msgspec_stops_at_about_a_thousand_levels() -> None:
    # The fact the nesting rule relies on: msgspec raises RecursionError, it does not crash.
    with pytest.raises(RecursionError):
        msgspec.json.decode(b"[" * 2000 + b"]" * 2000)
    assert msgspec.json.decode(b"[" * 500 + b"]" * 500)


@pytest.mark.parametrize("text", ["9.5e15", "5e18", "-1", "1e300", "123456789012345678901234567890", "NaN"])
def test_unusable_durations_in_the_exact_2024_form_are_dropped(tmp_path: Path, text: str) -> None:
    # The absolute 3-decimal form is read through decimals: a duration past Int64 ns must not wrap
    # or turn into a missing (zero) duration. The fixture's last "X" event gets it.
    d = json.loads((ROOT / "tests" / "fixtures" / "kineto_2024_abs3.json").read_text())
    last = max(i for i, e in enumerate(d["traceEvents"]) if e.get("ph") == "X")
    d["traceEvents"][last]["dur"] = "@@MARK@@"
    trace = load(write(tmp_path, json.dumps(d).replace('"@@MARK@@"', text).encode()))
    assert trace.meta.time_format == "absolute-us3"
    assert trace.meta.dropped_events == {"unusable_time": 1}


def test_a_corrupt_gzip_keeps_what_inflates_before_the_damage_with_partial(tmp_path: Path) -> None:
    gz = gzip.compress(RAW)
    path = write(tmp_path, gz[:-8] + bytes(8), "crc.json.gz")  # CRC and size zeroed: the check fails
    with pytest.raises(TraceError, match=r"corrupt gzip data \(.*incorrect data check\)"):
        load(path)
    opts = ReadOptions(max_inflated_size=None, partial=True)
    prefix = bytes(source.read_input(path, opts=opts).data)
    assert 0 < len(prefix) <= len(RAW) and RAW.startswith(prefix)  # what was salvaged is the real text
    trace = load(path, options=opts)
    assert trace.meta.event_count == sum(1 for end in _event_ends(RAW) if end <= len(prefix))
    assert trace.meta.partial.startswith("corrupt gzip data")


def test_a_step_of_unanalysed_device_work_is_not_called_no_gpu(tmp_path: Path) -> None:
    """An MTIA step launched work tracekit cannot analyse: its verdict says so (never ``no-gpu``)."""
    from tracekit.session import Session

    d = _device_trace("mtia_ccp_events", 40, "mtia_runtime")
    d["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
                             "ts": 0.5, "dur": 100.0})
    gaps = Session(write(tmp_path, d), execution_trace=None).report().launch_gaps
    assert gaps.per_step.select("step", "activity_count", "verdict").rows() == [(1, 0, "not-analysed")]
    # The same step on a trace with no device activity at all is plainly no-gpu.
    plain = {"schemaVersion": 1, "traceEvents": [e for e in d["traceEvents"] if e["cat"] != "mtia_ccp_events"]}
    other = Session(write(tmp_path, plain), execution_trace=None).report().launch_gaps
    assert other.per_step["verdict"].to_list() == ["no-gpu"]
