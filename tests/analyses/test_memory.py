"""Memory from the trace (tracekit.analyses.memory): hand-built event lists, the H200 memory captures
against the caching allocator's own figures (sample_traces/memory/manifest.json), real public traces
with [memory] events, and the report's Memory section in every format."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analyses import memory
from tracekit.load import load
from tracekit.render import renderer_for
from tracekit.render.views.memory import HINT

from factory import CPU_PID, CPU_TID, make_annotation, make_memory, make_oom, make_op, make_step, span, write_trace

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces" / "memory"
REAL = Path(__file__).resolve().parents[1] / "data" / "real"
REAL_WITH_MEMORY = (
    "CodingPlatelets__SwitchTransformers__a100-80gb-moe-forward.json.gz",
    "wbing520__ai-performance-engineering__b200-deepseekv3-train-step-memory.json.gz",
    "zhang-yuhui__nano-vllm__rtx4080l-decode-triton.json.gz",
)
BACKWARD = "autograd::engine::evaluate_function: MulBackward0"
RESERVED = 2_097_152
AUTOGRAD_TID = 200


def _events() -> list[dict]:
    """Two steps on the main thread, a backward node on the autograd thread, a block allocated before
    the trace (addr 0xA, 1000 B: the trace begins with 1000 B allocated), an address reused, a second
    GPU, CPU allocations and an out-of-memory event. Totals are after each event, as Kineto writes them."""
    return [
        make_step(1, 0, 100), make_step(2, 100, 100),
        make_op("aten::linear", 10, 20), make_op("aten::mm", 12, 8),
        make_op("aten::mul", 40, 10),
        make_annotation("Optimizer.step#SGD.step", 85, 10), make_op("aten::add_", 86, 5),
        make_op("aten::gelu", 110, 10),
        span("cpu_op", BACKWARD, 60, 20, tid=AUTOGRAD_TID), span("cpu_op", "aten::mul", 62, 8, tid=AUTOGRAD_TID),
        make_memory(13, 0x10, 4096, 5096, RESERVED),                    # in aten::mm
        make_memory(14, 0x10, 100, 100, RESERVED, device_id=1),          # same addr, other GPU: never freed
        make_memory(41, 0x20, 2048, 7144, RESERVED),                    # in aten::mul
        make_memory(42, 0x99, 64, 64, 0, device_type=0, device_id=-1),  # CPU
        make_memory(44, 0x99, -64, 0, 0, device_type=0, device_id=-1),
        make_memory(45, 0x10, -4096, 3048, RESERVED),
        make_oom(46, 1 << 40, 3048, RESERVED),
        make_memory(63, 0x30, 8192, 11240, RESERVED, tid=AUTOGRAD_TID),  # the peak: backward aten::mul
        make_memory(65, 0xA, -1000, 10240, RESERVED, tid=AUTOGRAD_TID),  # a block from before the trace
        make_memory(75, 0x30, -8192, 2048, RESERVED, tid=AUTOGRAD_TID),  # in the backward node itself
        make_memory(88, 0x40, 256, 2304, RESERVED),                     # in the optimizer step
        make_memory(89, 0x40, -256, 2048, RESERVED),
        make_memory(111, 0x10, 512, 2560, RESERVED),                    # addr 0x10 reused, in aten::gelu
        make_memory(115, 0x10, -512, 2048, RESERVED),
    ]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> memory.MemoryReport:
    trace = load(write_trace(tmp_path_factory.mktemp("mem") / "t.json", _events()))
    return memory.analyze(trace)


def _device(report: memory.MemoryReport, device: str) -> dict:
    (row,) = report.devices.filter(pl.col("device") == device).to_dicts()
    return row


def test_loader_keeps_memory_and_out_of_memory_rows(tmp_path: Path) -> None:
    t = load(write_trace(tmp_path / "t.json", _events()))
    assert t.memory.height == 14
    (oom,) = t.memory.filter(pl.col("oom")).to_dicts()
    assert oom["addr"] is None
    assert (oom["bytes"], oom["total_allocated"], oom["device_type"], oom["device_id"]) == (1 << 40, 3048, 1, 0)
    assert t.memory.filter(pl.col("device_type") == 0)["bytes"].to_list() == [64, -64]


def test_peak_op_phase_and_what_holds_it(built: memory.MemoryReport) -> None:
    d = _device(built, "cuda:0")
    assert (d["peak_allocated"], d["peak_ts"] % 10**6, d["op"], d["top_op"], d["phase"]) == (
        11240, 63_000, "aten::mul", BACKWARD, "backward")
    assert (d["allocated_at_start"], d["allocated_at_end"], d["peak_step"], d["peak_offset_ns"]) == (1000, 2048, 1, 63_000)
    assert (d["allocations"], d["frees"], d["frees_before_trace"], d["bytes_freed_before_trace"]) == (5, 5, 1, 1000)
    assert d["fragmentation"] == RESERVED - 11240
    assert (d["total_memory"], d["headroom"]) == (150_000_000_000, 150_000_000_000 - RESERVED)
    # Alive at the peak: 0x20 (forward mul) and 0x30 (backward mul); 0x10 was freed at 45. The block
    # from before the trace (0xA) is freed only after the peak: it is the 1000 B held since before.
    assert built.live.filter(pl.col("device") == "cuda:0").select("op", "top_op", "phase", "blocks", "bytes").rows() == [
        ("aten::mul", BACKWARD, "backward", 1, 8192), ("aten::mul", "aten::mul", "forward", 1, 2048)]
    assert (d["live_bytes"], d["live_blocks"], d["before_trace_at_peak"]) == (10240, 2, 1000)
    assert d["live_bytes"] + d["before_trace_at_peak"] == d["peak_allocated"]
    assert d["out_of_memory"] == 1


def test_devices_apart(built: memory.MemoryReport) -> None:
    assert built.devices["device"].to_list() == ["cpu", "cuda:0", "cuda:1"]
    other = _device(built, "cuda:1")  # same address as cuda:0's 0x10: its own block, never freed
    assert (other["peak_allocated"], other["live_bytes"], other["allocations"], other["frees"]) == (100, 100, 1, 0)
    assert (other["total_memory"], other["headroom"]) == (None, None)  # not in deviceProperties
    cpu = _device(built, "cpu")
    assert (cpu["peak_allocated"], cpu["op"], cpu["fragmentation"], cpu["total_memory"]) == (64, "aten::mul", None, None)
    # The GPU peak per step never mixes the CPU allocator in.
    assert built.peak_per_step().rows() == [(1, 11240), (2, 2560)]


def test_per_step_peaks_and_growth(built: memory.MemoryReport) -> None:
    steps = built.steps.filter(pl.col("device") == "cuda:0")
    assert steps.select("step", "peak_allocated", "allocated_at_start", "allocated_at_end", "op", "phase").rows() == [
        (1, 11240, 1000, 2048, "aten::mul", "backward"), (2, 2560, 2048, 2048, "aten::gelu", "forward")]
    growth = built.growth.filter(pl.col("device") == "cuda:0")
    # aten::mul: 2048 + 8192 allocated, 4096 (0x10) + 1000 (0xA) freed inside mul ops.
    assert growth.select("step", "op", "net").rows() == [(1, "aten::mul", 5144), (1, "aten::mm", 4096)]
    (opt,) = built.events_frame.filter(pl.col("ts") % 10**6 == 88_000).to_dicts()
    assert (opt["op"], opt["annotation"], opt["phase"]) == ("aten::add_", "Optimizer.step#SGD.step", "optimizer")


def test_per_op_self_and_inclusive(built: memory.MemoryReport) -> None:
    ops = {r["op"]: r for r in built.ops.filter(pl.col("device") == "cuda:0").iter_rows(named=True)}
    mul = ops["aten::mul"]
    assert (mul["allocations"], mul["bytes_allocated"], mul["bytes_freed"], mul["net"], mul["largest"]) == (
        2, 10240, 5096, 5144, 8192)
    node = ops[BACKWARD]  # frees 0x30 itself; its child aten::mul allocated 0x30 and freed 0xA
    assert (node["allocations"], node["bytes_freed"], node["net"]) == (0, 8192, -8192)
    assert (node["incl_allocations"], node["incl_bytes_allocated"], node["incl_bytes_freed"], node["incl_net"],
            node["incl_largest"]) == (1, 8192, 9192, -1000, 8192)
    linear = ops["aten::linear"]
    assert (linear["allocations"], linear["incl_allocations"], linear["incl_bytes_allocated"]) == (0, 1, 4096)


def test_out_of_memory_rows(built: memory.MemoryReport) -> None:
    assert built.out_of_memory.select("device", "bytes", "allocated", "op").rows() == [
        ("cuda:0", 1 << 40, 3048, "aten::mul")]


def test_frees_only_and_no_events(tmp_path: Path) -> None:
    # A trace that only frees: every block is from before it, none is guessed an owner.
    t = load(write_trace(tmp_path / "f.json", [make_step(1, 0, 50), make_op("aten::empty", 5, 20),
                                                make_memory(10, 0x1, -512, 512, RESERVED),
                                                make_memory(11, 0x2, -512, 0, RESERVED)]))
    d = _device(memory.analyze(t), "cuda:0")
    assert (d["allocations"], d["frees_before_trace"], d["allocated_at_start"], d["peak_allocated"],
            d["live_bytes"], d["before_trace_at_peak"]) == (0, 2, 1024, 512, 0, 512)
    empty = memory.analyze(load(write_trace(tmp_path / "e.json", [make_step(1, 0, 50)])))
    assert empty.events == 0 and empty.devices.height == 0


# --- the H200 captures: the caching allocator's own figures --------------------------------------

def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _raw_peak(events: list[dict], device_type: int = 1) -> tuple[dict, int]:
    """Straight from the JSON: the first event with the largest Total Allocated on the device, and the
    bytes of blocks from before the trace (a free whose Addr had no allocation yet) freed before it."""
    mem = sorted(((e["ts"], i, e) for i, e in enumerate(events)
                  if e.get("name") == "[memory]" and e["args"]["Device Type"] == device_type), key=lambda x: x[:2])
    peak = max(mem, key=lambda x: (x[2]["args"]["Total Allocated"], -x[0], -x[1]))
    seen, before = set(), 0
    for ts, i, e in mem:
        a = e["args"]
        if a["Bytes"] > 0:
            seen.add(a["Addr"])
        elif a["Addr"] not in seen and (ts, i) < peak[:2]:
            before += -a["Bytes"]
    return peak[2], before


def _raw_innermost(events: list[dict], at: dict) -> str:
    """The shortest cpu_op of the event's thread whose [ts, ts + dur) holds it."""
    inside = [e for e in events if e.get("cat") == "cpu_op" and e["tid"] == at["tid"]
              and e["ts"] <= at["ts"] < e["ts"] + e["dur"]]
    return min(inside, key=lambda e: e["dur"])["name"]


@pytest.mark.parametrize("stem, op, phase", [
    ("mlp_eager-memory", "aten::mul", "forward"),
    ("train_eager-memory", "aten::_log_softmax_backward_data", "backward"),
])
@pytest.mark.slow
def test_sample_peak_is_the_allocators(stem: str, op: str, phase: str, sample) -> None:
    manifest = json.loads((SAMPLES / "manifest.json").read_text())
    (capture,) = [c for c in manifest["captures"] if c["trace_file"] == f"{stem}.json.gz"]
    allocator = capture["allocator"]
    report = sample(f"memory/{stem}").report()
    d = _device(report.memory, "cuda:0")
    # Exact, not merely within the allocator's 512-byte granule: the totals are its own counters.
    assert d["peak_allocated"] == allocator["window"]["max_allocated"]
    assert d["peak_reserved"] == allocator["window"]["max_reserved"]
    assert d["allocated_at_start"] == allocator["window"]["allocated_before"]
    assert d["allocated_at_end"] == allocator["window"]["allocated_after"]
    assert d["allocations"] == allocator["window"]["allocations"]
    per_step = report.memory.steps.filter(pl.col("device") == "cuda:0")
    assert per_step["peak_allocated"].to_list() == [u["max_allocated"] for u in allocator["units"]]
    assert per_step["peak_reserved"].to_list() == [u["max_reserved"] for u in allocator["units"]]
    # The op at the peak, checked against the raw JSON (innermost cpu_op of the peak event's thread).
    raw = _raw(SAMPLES / f"{stem}.json.gz")
    peak, before_freed = _raw_peak(raw)
    assert d["op"] == op == _raw_innermost(raw, peak) and d["phase"] == phase
    # What holds the peak adds up to it; what the trace began with, less the pre-trace blocks freed
    # before the peak, is what the live blocks leave over.
    assert d["live_bytes"] + d["before_trace_at_peak"] == d["peak_allocated"]
    assert d["before_trace_at_peak"] == d["allocated_at_start"] - before_freed
    live = report.memory.live.filter(pl.col("device") == "cuda:0")
    assert live["bytes"].sum() == d["live_bytes"] and live["blocks"].sum() == d["live_blocks"]


def test_mlp_forward_intermediates_by_op(sample) -> None:
    """Hand-checked in the raw JSON (a script listing each [memory] event with the shortest cpu_op of
    its thread holding its ts, and that op's Input Dims): per step, aten::mm [[8192, 768], [768, 3072]]
    (gate_proj), aten::gelu [[64, 128, 3072], []], aten::mm again (up_proj) and aten::mul
    [[64, 128, 3072], [64, 128, 3072]] each allocate one 50,331,648-byte block (8192 × 3072 × 2 B), then
    aten::mm [[8192, 3072], [3072, 768]] (down_proj) one 12,582,912-byte block; the peak (211,288,064)
    is at the mul, with gelu's, up_proj's and mul's blocks alive and the 60,293,120 B from before."""
    report = sample("memory/mlp_eager-memory").report().memory
    allocs = report.events_frame.filter(pl.col("bytes") > 0)
    assert allocs.select("op", "bytes").rows()[:5] == [
        ("aten::mm", 50_331_648), ("aten::gelu", 50_331_648), ("aten::mm", 50_331_648),
        ("aten::mul", 50_331_648), ("aten::mm", 12_582_912)]
    assert allocs.select("op", "bytes").rows() == allocs.select("op", "bytes").rows()[:5] * 3
    assert allocs["top_op"].to_list()[:5] == ["aten::linear", "aten::gelu", "aten::linear", "aten::mul", "aten::linear"]
    ops = {r["op"]: r for r in report.ops.iter_rows(named=True)}
    for name, n in (("aten::gelu", 3), ("aten::mul", 3)):
        assert (ops[name]["allocations"], ops[name]["bytes_allocated"], ops[name]["largest"]) == (n, n * 50_331_648,
                                                                                                 50_331_648)
    assert (ops["aten::mm"]["allocations"], ops["aten::mm"]["bytes_allocated"]) == (9, 6 * 50_331_648 + 3 * 12_582_912)
    assert ops["aten::linear"]["incl_bytes_allocated"] == ops["aten::mm"]["bytes_allocated"]
    assert report.live.select("op", "blocks", "bytes").sort("op").rows() == [
        ("aten::gelu", 1, 50_331_648), ("aten::mm", 1, 50_331_648), ("aten::mul", 1, 50_331_648)]
    d = _device(report, "cuda:0")
    assert (d["before_trace_at_peak"], d["total_memory"]) == (60_293_120, 150_109_880_320)


@pytest.mark.parametrize("name", REAL_WITH_MEMORY)
@pytest.mark.slow
def test_real_traces_with_memory_events(name: str) -> None:
    raw = _raw(REAL / name)
    report = tracekit.open(REAL / name).report().memory
    n = sum(1 for e in raw if e.get("name") == "[memory]")
    assert report.events == n > 0
    d = _device(report, "cuda:0")
    peak, before_freed = _raw_peak(raw)
    assert d["peak_allocated"] == peak["args"]["Total Allocated"]
    assert d["live_bytes"] + d["before_trace_at_peak"] == d["peak_allocated"]
    assert d["before_trace_at_peak"] == d["allocated_at_start"] - before_freed
    assert d["op"] is not None


# --- the Memory section -------------------------------------------------------------------------

def _render(report, fmt: str) -> str:
    out = io.StringIO()
    renderer_for(fmt).render(report, out)
    return out.getvalue()


def test_memory_section_in_every_format(sample) -> None:
    report = sample("memory/mlp_eager-memory").report()
    term, md = _render(report, "term"), _render(report, "md")
    for text in (term, md):
        assert "Memory — peak per device" in text and "Memory — what holds the peak" in text
        assert "201.50 MiB" in text  # 211,288,064 B
        assert HINT not in text
    data = json.loads(_render(report, "json"))["memory"]
    assert data["events"] == 30 and data["note"] is None
    (dev,) = data["devices"]
    assert (dev["device"], dev["peak_allocated"], dev["op"]) == ("cuda:0", 211_288_064, "aten::mul")
    assert len(data["timeline"]) <= memory.TIMELINE_POINTS and data["live"] and data["ops"]


def test_memory_section_without_events_is_one_line(sample) -> None:
    report = sample("mlp_eager").report()
    term, md = _render(report, "term"), _render(report, "md")
    assert "Memory —" not in term and "Memory —" not in md
    assert term.count("profile_memory=True") == 1 and md.count("profile\\_memory=True") == 1
    assert "\n## Memory\n\nno \\[memory\\] events in this trace" in md  # Markdown-escaped
    data = json.loads(_render(report, "json"))["memory"]
    assert data["events"] == 0 and data["note"] == HINT and data["devices"] == []


def test_op_names_are_escaped(tmp_path: Path) -> None:
    # An op name holding a terminal escape and Markdown is shown as text in the Memory tables.
    name = "evil\x1b]0;title\x07|op*"
    trace = write_trace(tmp_path / "x.json", [make_step(1, 0, 50), make_op(name, 5, 20),
                                               make_memory(10, 0x1, 512, 512, RESERVED)])
    report = tracekit.open(trace).report()
    term, md = _render(report, "term"), _render(report, "md")
    assert "\x1b" not in term and "\x07" not in term and "\x1b" not in md and "\x07" not in md
    assert "evil" in term and "evil" in md


# --- diff and check -----------------------------------------------------------------------------

def _main(argv: list[str]) -> int:
    from tracekit.commands import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


@pytest.mark.slow
def test_peak_memory_gate_and_expectation(tmp_path: Path, capsys) -> None:
    mlp, train = str(SAMPLES / "mlp_eager-memory.json.gz"), str(SAMPLES / "train_eager-memory.json.gz")
    gates = [f"peak_memory{op}{v}" for op in (">", ">=", "<", "<=") for v in ("+0", "+0%", "+0B")]
    assert _main(["diff", train, train, "--format", "json", *sum((["--fail-if", g] for g in gates), [])]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["peak_memory_per_step"]["a"] == data["peak_memory_per_step"]["b"] == 6_089_210_880
    # 211,288,064 -> 6,089,210,880 B per step: +2781.9 %, far outside the (zero) step-to-step spread.
    assert _main(["diff", mlp, train, "--fail-if", "peak_memory>+5%"]) == 1
    assert _main(["diff", mlp, train, "--fail-if", "peak_memory>+6GiB"]) == 0
    capsys.readouterr()
    plain = str(ROOT / "sample_traces" / "mlp_eager.json.gz")
    assert _main(["diff", plain, mlp, "--fail-if", "peak_memory>+5%"]) == 2
    assert "profile_memory=True" in capsys.readouterr().err
    for limit, code in (('"201MiB"', 1), ("211288064", 0), ('"0.2 GiB"', 0)):
        (tmp_path / "e.toml").write_text(f"[per_step]\npeak_memory_max = {limit}\n")
        assert _main(["check", mlp, "--expect", str(tmp_path / "e.toml")]) == code, limit
    assert _main(["check", plain, "--expect", str(tmp_path / "e.toml")]) == 2
    (tmp_path / "e.toml").write_text('[per_step]\npeak_memory_max = "lots"\n')
    assert _main(["check", mlp, "--expect", str(tmp_path / "e.toml")]) == 2


def test_out_of_memory_is_a_finding(tmp_path: Path, sample) -> None:
    report = tracekit.open(write_trace(tmp_path / "t.json", _events())).report()
    (oom,) = [f for f in report.findings if f.rule == "out_of_memory"]
    assert oom.severity == "warning" and oom.steps == (1,)
    (ev,) = oom.evidence
    assert (ev.name, ev.step, ev.bytes_per_step) == ("aten::mul", 1, 1 << 40)
    assert oom.quantities["largest_request_bytes"] == 1 << 40
    plain = sample("memory/mlp_eager-memory").report()
    assert not [f for f in plain.findings if f.rule == "out_of_memory"]


# --- PyTorch 1.8-era [memory] events: no address, no totals ---------------------------------------

def _pre_1_9_memory(ts: float, nbytes: int, *, device_type: int = 1, device_id: int = 0) -> dict:
    """A ``[memory]`` instant as PyTorch 1.8's Kineto wrote it: no category, no ``Addr``, no totals."""
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": CPU_TID, "ts": ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes}}


def _pre_1_9_events() -> list[dict]:
    return [make_step(1, 0, 100), make_op("aten::linear", 10, 20), make_op("aten::mm", 12, 8),
            make_op("aten::relu", 40, 10),
            _pre_1_9_memory(13, 4096), _pre_1_9_memory(41, 1024), _pre_1_9_memory(45, -4096),
            _pre_1_9_memory(60, 512)]  # outside every op: counted under the step


def test_memory_events_without_addresses_are_not_out_of_memory(tmp_path: Path) -> None:
    # Family: traces of PyTorch 1.8 (Kineto's first releases), whose [memory] events carry neither
    # Addr nor totals. Taking every address-less row for an [OutOfMemory] made one false OOM per
    # event and crashed the analysis; now: running-sum totals and per-op bytes, no blocks, said so.
    t = load(write_trace(tmp_path / "t.json", _pre_1_9_events()))
    assert t.memory.height == 4 and not t.memory["oom"].any()
    built = memory.analyze(t)
    assert built.out_of_memory.height == 0
    d = _device(built, "cuda:0")
    # Running sum from the trace's start: 4096, 5120, 1024, 1536.
    assert (d["totals"], d["addressed"], d["peak_allocated"], d["allocated_at_end"], d["allocations"],
            d["frees"], d["out_of_memory"]) == ("summed", False, 5120, 1536, 3, 1, 0)
    assert (d["live_bytes"], d["live_blocks"], d["before_trace_at_peak"], d["frees_before_trace"]) == (
        None, None, None, None)
    assert built.live.height == 0
    ops = {r["op"]: r for r in built.ops.iter_rows(named=True)}
    assert (ops["aten::mm"]["bytes_allocated"], ops["aten::linear"]["incl_bytes_allocated"],
            ops["aten::relu"]["bytes_freed"]) == (4096, 4096, 4096)
    report = tracekit.open(tmp_path / "t.json").report()
    assert not [f for f in report.findings if f.rule == "out_of_memory"]
    out = io.StringIO()
    renderer_for("md").render(report, out)
    assert "carry no block address" in out.getvalue()


def test_inclusive_never_below_self_outside_every_op(tmp_path: Path) -> None:
    # An allocation outside every cpu_op is counted under its annotation; when a cpu_op elsewhere has
    # the same name, the row's inclusive figures must still hold its own (self) bytes.
    events = [make_step(1, 0, 100), make_annotation("forward", 5, 40), make_op("forward", 60, 20),
              make_op("aten::mm", 62, 8),
              make_memory(10, 0x10, 1000, 1000, RESERVED),   # in the annotation, outside every op
              make_memory(63, 0x20, 300, 1300, RESERVED)]    # in the cpu_op "forward" > aten::mm
    built = memory.analyze(load(write_trace(tmp_path / "t.json", events)))
    (row,) = built.ops.filter(pl.col("op") == "forward").to_dicts()
    assert (row["bytes_allocated"], row["incl_bytes_allocated"], row["allocations"], row["incl_allocations"]) == (
        1000, 1300, 1, 2)
    every = built.ops
    assert (every["incl_bytes_allocated"] >= every["bytes_allocated"]).all()
    assert (every["incl_allocations"] >= every["allocations"]).all()
