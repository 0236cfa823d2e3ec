"""The committed H200 sample traces match their manifests and hold what the analyzer's tests rely on.

Needs neither torch nor a GPU: it reads sample_traces/ only. The top folder holds the study's captures
(profiled after warm-up); compile_sweep/, antipatterns/ and memory/ each hold one capture command's
traces and manifest, whose ground truth (Dynamo's counters, CUDA-graph state, planted problems, the
caching allocator's figures) is held here against the raw trace JSON. Every number asserted was
counted in the raw JSON with a short script and cross-checked against the manifest.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
MANIFEST = SAMPLES / "manifest.json"
EXPECTED = {
    "matmul_add_eager-64", "matmul_add_compile-64", "matmul_add_eager-4096", "matmul_add_compile-4096",
    "linear_eager", "linear_compile",
    "mlp_eager", "mlp_compile", "mlp_compile-cudagraphs", "mlp_liger",
    "train_eager",
}

pytestmark = pytest.mark.skipif(not MANIFEST.exists(), reason="sample_traces/ not captured yet")


def _manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _events(stem: str) -> list[dict]:
    return json.loads(gzip.decompress((SAMPLES / f"{stem}.json.gz").read_bytes()))["traceEvents"]


def test_manifest_lists_every_variant_and_mode_ok() -> None:
    m = _manifest()
    assert m["schema"] == "tracekit.capture-manifest/1"
    assert m["device"]["name"] == "NVIDIA H200" and m["device"]["compute_capability"] == "9.0"
    assert m["device"]["sm_count"] == 132
    assert {"d2d_copy", "matmul_bf16_8192"} <= set(m["device"]["ceilings"])
    captures = {f"{c['variant']}_{c['mode']}": c for c in m["captures"]}
    assert set(captures) == EXPECTED
    for name, c in captures.items():
        assert c["status"] == "ok", name
        assert c["trace_file"] == f"{name}.json.gz" and (SAMPLES / c["trace_file"]).exists()
        assert c["timing"]["min"] <= c["timing"]["median"] <= c["timing"]["max"]
        if c["variant"] == "mlp":
            assert (SAMPLES / c["execution_trace_file"]).exists()
        if "within_tolerance" in c.get("correctness", {}):
            assert c["correctness"]["within_tolerance"] is True, name


def test_folder_is_small_and_holds_only_known_files() -> None:
    everything = [p for p in SAMPLES.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in everything) < 10 * 1024 * 1024
    files = [p for p in SAMPLES.iterdir() if p.is_file()]
    listed = {"manifest.json", "README.md"}
    for c in _manifest()["captures"]:
        listed.add(c["trace_file"])
        if c.get("execution_trace_file"):
            listed.add(c["execution_trace_file"])
    assert {p.name for p in files} == listed


def _kernels_per_step(stem: str) -> Counter[str]:
    events = _events(stem)
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    assert len(steps) == 3, stem
    return Counter(e["name"] for e in events if e.get("cat") == "kernel")


def test_mlp_traces_hold_the_expected_kernels() -> None:
    eager = _kernels_per_step("mlp_eager")
    assert sum(n for k, n in eager.items() if k.startswith("nvjet_sm90_")) == 9
    assert sum(n for k, n in eager.items() if "GeluCUDAKernelImpl" in k) == 3
    assert sum(n for k, n in eager.items() if "MulFunctor" in k) == 3
    assert _kernels_per_step("mlp_compile")["triton_poi_fused__unsafe_view_gelu_mul_0"] == 3
    assert _kernels_per_step("mlp_liger")["_geglu_tanh_forward_kernel"] == 3
    graphs = [e for e in _events("mlp_compile-cudagraphs") if e.get("name") == "cudaGraphLaunch"]
    assert len(graphs) == 3


def test_liger_source_is_stated_honestly() -> None:
    liger = next(c for c in _manifest()["captures"] if c["mode"] == "liger")
    src = liger["kernel_source"]
    assert src["repo_id"] == "kernels-community/liger-kernels" and src["loaded_through"] == "kernels.get_kernel"
    if src["source"] == "local":
        assert "packaged as a local kernel" in src["description"]
        assert src["provenance"]["liger_kernel_version"]


# ------------------------------------------------------------------------ compile_sweep / antipatterns / memory

SUBFOLDERS = {
    "compile_sweep": {f"mlp_{k}-sweep" for k in ("eager", "compile", "compile-static", "compile-dynamic",
                                                   "compile-cudagraphs", "liger")},
    "antipatterns": {f"antipatterns_{m}" for m in (
        "cold-first-step", "healthy", "overhead-bound", "host-sync", "host-sync-cpu-item", "h2d-pageable",
        "gemm-fp32", "pointwise-unfused", "pointwise-fused", "extra-copies", "optimizer-unfused",
        "optimizer-foreach", "zero-grad-fill")},
    "memory": {"mlp_eager-memory", "train_eager-memory"},
}
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _sub_manifest(folder: str) -> dict:
    return json.loads((SAMPLES / folder / "manifest.json").read_text())


def _captures(folder: str) -> dict[str, dict]:
    return {f"{c['variant']}_{c['mode']}": c for c in _sub_manifest(folder)["captures"]}


@functools.cache
def _sub_events(folder: str, stem: str) -> list[dict]:
    return json.loads(gzip.decompress((SAMPLES / folder / f"{stem}.json.gz").read_bytes()))["traceEvents"]


def _inside(e: dict, span: dict) -> bool:
    return span["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= span["ts"] + span["dur"]


def _spans(events: list[dict], name: str, cat: str = "cpu_op") -> list[dict]:
    return sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == cat and e.get("name") == name),
                  key=lambda e: e["ts"])


@pytest.mark.parametrize("folder", sorted(SUBFOLDERS))
def test_each_capture_folder_matches_its_manifest_and_loads(folder: str, sample) -> None:
    m = _sub_manifest(folder)
    assert m["schema"] == "tracekit.capture-manifest/1"
    assert m["device"]["name"] == "NVIDIA H200" and m["device"]["sm_count"] == 132
    assert m["versions"]["torch"].startswith("2.11.") and m["versions"]["triton"] == "3.6.0"
    assert m["command"].startswith("tracekit capture ") and m["command"].endswith(f"--out sample_traces/{folder}")
    captures = _captures(folder)
    assert set(captures) == SUBFOLDERS[folder]
    listed = {"manifest.json"}
    for name, c in captures.items():
        assert c["status"] == "ok", name
        assert c["trace_file"] == f"{name}.json.gz"
        listed.add(c["trace_file"])
        trace = sample(f"{folder}/{c['trace_file']}").trace
        assert trace.ops.height > 0 and trace.gpu.height > 0, name
    assert {p.name for p in (SAMPLES / folder).iterdir()} == listed


# compile_sweep: calls 0-3 are 64x128, 4-7 32x128, 8-11 48x128, 12-15 64x256 (4 calls per shape).
# Frame compilations, read from the trace's `_compile.compile_inner (dynamo_timed)` spans and held against
# Dynamo's counters: default dynamic handling compiles at 0, recompiles at 4 (batch changes: automatic
# dynamic batch) and at 12 (seq changes); dynamic=False at every new shape; dynamic=True once.
SWEEP_COMPILED = {
    "mlp_eager-sweep": [], "mlp_liger-sweep": [], "mlp_compile-sweep": [0, 4, 12],
    "mlp_compile-static-sweep": [0, 4, 8, 12], "mlp_compile-dynamic-sweep": [0],
    "mlp_compile-cudagraphs-sweep": [0, 4, 12],
}


def _call_of(e: dict, calls: list[dict]) -> int:
    owners = [int(a["name"].split("#")[1].split()[0]) for a in calls if _inside(e, a)]
    assert len(owners) == 1, e["name"]
    return owners[0]


def _sweep(stem: str) -> tuple[dict, list[dict], list[dict]]:
    events = _sub_events("compile_sweep", stem)
    calls = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("mlp_fwd#")),
                   key=lambda e: e["ts"])
    return _captures("compile_sweep")[stem], events, calls


@pytest.mark.parametrize("stem", sorted(SWEEP_COMPILED))
@pytest.mark.slow
def test_sweep_calls_are_annotated_units_profiled_from_the_first_call(stem: str) -> None:
    c, events, calls = _sweep(stem)
    expected = [f"mlp_fwd#{i} {b}x{s}" for i, (b, s) in enumerate(
        [(64, 128)] * 4 + [(32, 128)] * 4 + [(48, 128)] * 4 + [(64, 256)] * 4)]
    assert [a["name"] for a in calls] == expected == [call["annotation"] for call in c["calls"]]
    assert c["sweep"]["shapes"] == [[64, 128], [32, 128], [48, 128], [64, 256]] and c["sweep"]["calls_per_shape"] == 4
    assert c["schedule"] is None and c["profiled_from_first_call"] is True
    assert not [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    if stem != "mlp_eager-sweep":  # eager is the reference
        assert c["correctness"]["within_tolerance"] is True
    assert set(c["steady_timing"]) == {"64x128", "32x128", "48x128", "64x256"}


@pytest.mark.parametrize("stem", sorted(SWEEP_COMPILED))
def test_sweep_compilations_in_the_trace_match_dynamo(stem: str) -> None:
    c, events, calls = _sweep(stem)
    gt = c["ground_truth"]
    compiles = _spans(events, "_compile.compile_inner (dynamo_timed)")
    in_calls = [_call_of(e, calls) for e in compiles]
    assert in_calls == gt["compiled_calls"] == SWEEP_COMPILED[stem]
    assert len(compiles) == gt["compilations"] == gt["unique_graphs"] == len(gt["compile_ids"])
    assert [call["call"] for call in c["calls"] if call["unique_graphs_after"] > call["unique_graphs_before"]] == in_calls
    regions = {e["name"] for e in events if str(e.get("name", "")).startswith("Torch-Compiled Region: ")}
    assert regions == {f"Torch-Compiled Region: {cid}" for cid in gt["compile_ids"]}
    assert gt["recompiles"] == max(len(in_calls) - 1, 0)
    assert c["compilations_after_trace"] == 0
    # Inductor autotunes its Triton kernel the first time each new graph runs (a runtime compile record
    # under the graph's compile id), inside the same call.
    autotunes = _spans(events, "CachingAutotuner.benchmark_all_configs (dynamo_timed)")
    assert [_call_of(e, calls) for e in autotunes] == gt["autotune_calls"] == SWEEP_COMPILED[stem]


def test_sweep_recompile_reasons_name_the_dimension() -> None:
    gt = _captures("compile_sweep")["mlp_compile-sweep"]["ground_truth"]
    assert gt["recompile_reasons"] == ["0/0: tensor 'x' size mismatch at index 0. expected 64, actual 32",
                                       "0/1: tensor 'x' size mismatch at index 1. expected 128, actual 256"]


def test_sweep_cudagraph_records_and_replays() -> None:
    c, events, calls = _sweep("mlp_compile-cudagraphs-sweep")
    gt = c["ground_truth"]
    # Per shape: warm-up (with the compile or a new shape), record, then two replays.
    assert gt["cudagraph_warmup_calls"] == [0, 4, 8, 12]
    assert gt["cudagraph_record_calls"] == [1, 5, 9, 13]
    assert gt["cudagraph_replay_calls"] == [2, 3, 6, 7, 10, 11, 14, 15]
    assert gt["cudagraph_graphs_recorded"] == 4
    records = [_call_of(e, calls) for e in _spans(events, "CUDAGraphNode.record (dynamo_timed)")]
    assert records == gt["cudagraph_record_calls"]
    # A recording call replays the graph it just recorded, so every call from a record on launches it.
    launches = [_call_of(e, calls) for e in events if e.get("name") == "cudaGraphLaunch"]
    assert launches == sorted(gt["cudagraph_record_calls"] + gt["cudagraph_replay_calls"])
    assert not [e for e in events if e.get("name") == "cudaGraphLaunch" and e["ts"] < calls[1]["ts"]]


def test_sweep_liger_jits_its_kernel_on_the_first_call_only() -> None:
    c, events, calls = _sweep("mlp_liger-sweep")
    gt = c["ground_truth"]
    assert gt["first_call_jit"] is True and gt["jit_calls"] == [0] and gt["compiled_calls"] == []
    assert not _spans(events, "_compile.compile_inner (dynamo_timed)")
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"] == "_geglu_tanh_forward_kernel"]
    assert len(kernels) == 16
    walls = [call["wall_us"] for call in c["calls"]]
    assert walls[0] > 300_000 and max(walls[1:]) < 2_000  # 340.9 ms (JIT) vs at most 1.1 ms
    assert c["kernel_source"]["provenance"]["liger_kernel_version"] == "0.8.5"


def test_sweep_eager_first_call_is_cold_not_compiled() -> None:
    c, events, _ = _sweep("mlp_eager-sweep")
    assert c["ground_truth"]["compiled_calls"] == [] and c["ground_truth"]["unique_graphs"] == 0
    walls = [call["wall_us"] for call in c["calls"]]
    # 102.6 ms (cuBLAS start-up); a new shape's first call is slower too (0.7, 4.5, 1.3 ms: new GEMM
    # kernels), the other calls at most 0.6 ms.
    assert walls[0] > 50_000 and walls[8] > 2_000
    assert max(w for i, w in enumerate(walls) if i % 4) < 1_000


# memory: the caching allocator's own figures for the profiled window (manifest) against the trace's
# [memory] events on the GPU (Device Type 1): equal exactly, byte for byte and event for event.
@pytest.mark.parametrize("stem", sorted(SUBFOLDERS["memory"]))
def test_memory_trace_matches_the_allocator(stem: str) -> None:
    c = _captures("memory")[stem]
    window = c["allocator"]["window"]
    events = sorted((e for e in _sub_events("memory", stem) if e.get("name") == "[memory]"
                     and e["args"]["Device Type"] == 1), key=lambda e: e["ts"])
    assert c["trace_summary"]["memory_events"] >= len(events) > 0
    args = [e["args"] for e in events]
    assert max(a["Total Allocated"] for a in args) == window["max_allocated"]
    assert max(a["Total Reserved"] for a in args) == window["max_reserved"]
    allocs, frees = [a for a in args if a["Bytes"] > 0], [a for a in args if a["Bytes"] < 0]
    assert (len(allocs), len(frees)) == (window["allocations"], window["frees"])
    assert sum(a["Bytes"] for a in allocs) == window["bytes_allocated"]
    assert -sum(a["Bytes"] for a in frees) == window["bytes_freed"]
    assert args[0]["Total Allocated"] - args[0]["Bytes"] == window["allocated_before"]
    assert args[-1]["Total Allocated"] == window["allocated_after"]
    assert [u["unit"] for u in c["allocator"]["units"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert window["max_allocated"] == max(u["max_allocated"] for u in c["allocator"]["units"])


def test_memory_mlp_forward_allocations() -> None:
    c = _captures("memory")["mlp_eager-memory"]
    sizes = Counter(e["args"]["Bytes"] for e in _sub_events("memory", "mlp_eager-memory")
                    if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0)
    # Per step: four [8192, 3072] bf16 intermediates (gate, gelu, up, product) and the [64, 128, 768] output.
    assert sizes == {50_331_648: 12, 12_582_912: 3}
    assert c["allocator"]["window"]["max_allocated"] == 211_288_064
    assert c["allocator"]["window"]["allocated_before"] == 60_293_120


# antipatterns: one planted problem per trace; counts per active step (all steps agree).
def _loop(mode: str) -> tuple[dict, list[dict], list[dict]]:
    events = _sub_events("antipatterns", f"antipatterns_{mode}")
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    return _captures("antipatterns")[f"antipatterns_{mode}"], events, steps


@functools.cache
def _per_step(mode: str) -> list[dict]:
    """Per active step: op counts (cpu_op and user annotations by name), runtime calls, GPU activity
    launched in the step (by correlation), CPU span and GPU busy time (µs)."""
    c, events, steps = _loop(mode)
    gpu = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    out = []
    for s in steps:
        inside = [e for e in events if e.get("ph") == "X" and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        runtime = [e for e in inside if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        launched = [gpu[r["args"]["correlation"]] for r in runtime if r["args"].get("correlation") in gpu]
        out.append({
            "ops": Counter(e["name"] for e in inside if e.get("cat") in ("cpu_op", "user_annotation")),
            "runtime": Counter(e["name"] for e in runtime),
            "kernels": [k["name"] for k in launched if k["cat"] == "kernel"],
            "memcpy": [(k["name"], k["args"].get("bytes")) for k in launched if k["cat"] == "gpu_memcpy"],
            "cpu_us": s["dur"], "gpu_busy_us": sum(k["dur"] for k in launched), "events": inside,
            "runtime_events": runtime,
        })
    return out


def _kernels_inside(step: dict, name: str) -> int:
    spans = [e for e in step["events"] if e.get("cat") == "user_annotation" and e["name"] == name]
    return sum(1 for sp in spans for r in step["runtime_events"]
               if r["tid"] == sp["tid"] and _inside(r, sp) and r["name"] in ("cudaLaunchKernel", "cuLaunchKernel",
                                                                              "cuLaunchKernelEx", "cudaLaunchKernelExC"))


def test_antipatterns_manifest_names_what_was_planted_and_its_control() -> None:
    captures = {c["mode"]: c for c in _sub_manifest("antipatterns")["captures"]}
    planted = {m: c["planted"] for m, c in captures.items() if c["planted"]}
    assert planted == {
        "cold-first-step": "cold_first_step", "overhead-bound": "overhead_bound", "host-sync": "host_sync",
        "h2d-pageable": "pageable_copy", "gemm-fp32": "fp32_gemm", "pointwise-unfused": "unfused_pointwise",
        "extra-copies": "hot_path_copy", "optimizer-unfused": "optimizer_unfused", "zero-grad-fill": "zero_grad_fill"}
    for mode, problem in planted.items():
        c = captures[mode]
        assert c["control"] in captures and problem in captures[c["control"]]["control_for"], mode
        assert c["evidence"] and c["fix"], mode
        assert c["sync_after_each_step"] is False
    for mode, c in captures.items():
        _, _, steps = _loop(mode)
        assert [s["name"] for s in steps] == c["steps"], mode
    assert captures["cold-first-step"]["steps"] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def test_healthy_control_has_none_of_the_planted_signatures() -> None:
    for step in _per_step("healthy"):
        assert not [n for n in step["runtime"] if n in SYNC_CALLS]
        assert step["memcpy"] == [("Memcpy HtoD (Pinned -> Device)", 33_554_432)] * 2
        gemms = [k for k in step["kernels"] if "gemm" in k]
        assert len(gemms) == 23 and all("tf32" in k for k in gemms)
        assert not step["ops"]["aten::contiguous"] and not step["ops"]["aten::clone"] and not step["ops"]["aten::item"]
        assert _kernels_inside(step, "Optimizer.step#AdamW.step") == 3  # fused AdamW
        assert _kernels_inside(step, "Optimizer.zero_grad#AdamW.zero_grad") == 0
        assert step["gpu_busy_us"] > 1.4 * step["cpu_us"]  # 6.9 ms of GPU work per 3.9-4.5 ms of CPU


def test_overhead_bound_steps() -> None:
    for step in _per_step("overhead-bound"):
        assert step["cpu_us"] > 20 * step["gpu_busy_us"]  # 2.8-3.1 ms of CPU for 116 µs of GPU work
        assert len(step["kernels"]) == 57


def test_cold_first_step() -> None:
    cpu = [s["cpu_us"] for s in _per_step("cold-first-step")]
    assert cpu[0] > 150_000 and max(cpu[1:]) < 10_000  # 218.5 ms, then 4.5, 4.1, 3.0 ms
    assert _captures("antipatterns")["antipatterns_cold-first-step"]["cold_step"] == "ProfilerStep#0"


def test_host_sync_on_device_tensors_but_not_on_a_cpu_tensor() -> None:
    for step in _per_step("host-sync"):
        assert (step["ops"]["aten::item"], step["ops"]["aten::nonzero"], step["ops"]["aten::to"]) == (1, 1, 3)
        assert step["runtime"]["cudaStreamSynchronize"] == 3
        assert sorted(n for n, _ in step["memcpy"] if "DtoH" in n) == [
            "Memcpy DtoH (Device -> Pageable)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoH (Device -> Pinned)"]
    for step in _per_step("host-sync-cpu-item"):
        assert step["ops"]["aten::item"] == 1
        assert not [n for n in step["runtime"] if n in SYNC_CALLS]
        assert not [n for n, _ in step["memcpy"] if "DtoH" in n]


def test_pageable_host_to_device_copies() -> None:
    c = _captures("antipatterns")["antipatterns_h2d-pageable"]
    assert c["evidence"][0]["bytes_each"] == 33_554_432 == c["shapes"]["x"][0] * c["shapes"]["x"][1] * 4
    for step in _per_step("h2d-pageable"):
        assert step["memcpy"] == [("Memcpy HtoD (Pageable -> Device)", 33_554_432)] * 2
        assert step["runtime"]["cudaStreamSynchronize"] == 2  # a pageable copy waits for the stream


def test_fp32_gemms_without_tf32() -> None:
    c = _captures("antipatterns")["antipatterns_gemm-fp32"]
    for step in _per_step("gemm-fp32"):
        gemms = [k for k in step["kernels"] if "gemm" in k]
        assert len(gemms) == step["ops"]["aten::mm"] == c["gemms_per_step"] == 23
        assert all("tf32" not in k and ("simt_sgemm" in k or "_ffma_" in k) for k in gemms)


def test_unfused_pointwise_chain_and_its_compiled_near_miss() -> None:
    for step in _per_step("pointwise-unfused"):
        assert (step["ops"]["aten::gelu"], step["ops"]["aten::mul"], step["ops"]["aten::gelu_backward"]) == (4, 12, 4)
        assert sum("GeluCUDAKernelImpl" in k for k in step["kernels"]) == 4
    incidental = _captures("antipatterns")["antipatterns_pointwise-fused"]["incidental"]
    assert [(i["problem"], i["op"], i["per_step"]) for i in incidental] == [("hot_path_copy", "aten::addmm", 3)]
    for step in _per_step("pointwise-fused"):
        assert not step["ops"]["aten::gelu"] and not step["ops"]["aten::mul"]
        assert step["kernels"].count("triton_poi_fused_gelu_mul_0") == 4
        assert step["kernels"].count("triton_poi_fused_gelu_gelu_backward_mul_0") == 4
        assert step["memcpy"].count(("Memcpy DtoD (Device -> Device)", 33_554_432)) == 3  # addmm seeding


def test_extra_copies_in_the_hot_path() -> None:
    for step in _per_step("extra-copies"):
        ops = [e for e in step["events"] if e.get("cat") == "cpu_op"]
        contiguous = [e for e in ops if e["name"] == "aten::contiguous"]
        assert [e["args"]["Input Dims"] for e in contiguous] == [[[1024, 4096], []]]
        direct_clones = [e for e in ops if e["name"] == "aten::clone"
                         and not any(_inside(e, p) and p["tid"] == e["tid"] for p in contiguous)]
        assert [e["args"]["Input Dims"] for e in direct_clones] == [[[8192, 4096], []]]
        grads = [e for e in ops if e["name"] == "torch::autograd::AccumulateGrad"]
        copies = [e for e in ops if e["name"] == "aten::copy_" and any(_inside(e, g) and g["tid"] == e["tid"] for g in grads)]
        assert [e["args"]["Input Dims"] for e in copies] == [[[4096, 1024], [4096, 1024], []]]
        assert step["memcpy"].count(("Memcpy DtoD (Device -> Device)", 134_217_728)) == 1  # the clone


def test_optimizer_without_foreach_and_zero_grad_filling() -> None:
    # Kernels launched inside Optimizer.step per step: fused 3 (healthy), foreach 16, for-loop 64 (8 per
    # parameter, 8 parameters); zero_grad(set_to_none=False) launches 2, set_to_none launches none.
    assert [_kernels_inside(s, "Optimizer.step#AdamW.step") for s in _per_step("optimizer-unfused")] == [64] * 3
    assert [_kernels_inside(s, "Optimizer.step#AdamW.step") for s in _per_step("optimizer-foreach")] == [16] * 3
    fill = _per_step("zero-grad-fill")
    assert [_kernels_inside(s, "Optimizer.zero_grad#AdamW.zero_grad") for s in fill] == [2] * 3
    assert _captures("antipatterns")["antipatterns_optimizer-unfused"]["params"] == 8


# ------------------------------------------------------------------------ overhead_twin (H100)
# The overhead-bound loop and its fixed twin, captured together on one H100 (the antipatterns folder's
# H200 run has no twin for it: its control there is the healthy loop, a different model).

def test_overhead_twin_pairs_the_planted_loop_with_its_graphed_twin(sample) -> None:
    m = _sub_manifest("overhead_twin")
    assert m["device"]["name"] == "NVIDIA H100 80GB HBM3" and m["versions"]["torch"].startswith("2.11.")
    assert m["command"].endswith("--out sample_traces/overhead_twin")
    captures = {c["mode"]: c for c in m["captures"]}
    assert set(captures) == {"overhead-bound", "overhead-bound-graphed"}
    planted, twin = captures["overhead-bound"], captures["overhead-bound-graphed"]
    assert planted["control"] == "overhead-bound-graphed" and twin["control_for"] == ["overhead_bound"]
    assert planted["shapes"] == twin["shapes"] and planted["loop"]["size"] == twin["loop"]["size"] == "tiny"
    # Timed outside the profiler on the same card: 1,465.7 µs a step against 169.5 µs replayed.
    assert (planted["timing"]["median"], twin["timing"]["median"]) == (1465.696, 169.52)
    events = {mode: _sub_events("overhead_twin", c["trace_file"].removesuffix(".json.gz")) for mode, c in captures.items()}
    # Counted in the raw JSON: both run the same 171 kernels over their 3 steps (57 a step); the eager
    # loop launches them through 102 cudaLaunchKernel(ExC) calls, the twin through one cudaGraphLaunch
    # a step and no kernel launch of its own.
    launches = {mode: Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime") for mode, ev in events.items()}
    kernels = {mode: sum(e.get("cat") == "kernel" for e in ev) for mode, ev in events.items()}
    assert kernels == {"overhead-bound": 171, "overhead-bound-graphed": 171}
    assert launches["overhead-bound"]["cudaLaunchKernel"] + launches["overhead-bound"]["cudaLaunchKernelExC"] == 102
    assert launches["overhead-bound-graphed"]["cudaGraphLaunch"] == 3
    assert launches["overhead-bound-graphed"]["cudaLaunchKernel"] == launches["overhead-bound-graphed"]["cudaLaunchKernelExC"] == 0
    assert {p.name for p in (SAMPLES / "overhead_twin").iterdir()} == {
        "manifest.json", planted["trace_file"], twin["trace_file"]}


@pytest.mark.parametrize("name", ["late-backward", "late-data", "late-forward"])
def test_ranks_gloo_sets_match_their_manifests(name: str) -> None:
    """sample_traces/ranks_gloo/: four rank traces per set, each naming its rank in distributedInfo as
    the manifest says, with the planted delay slept by the late rank alone (``--variant ranks``)."""
    folder = SAMPLES / "ranks_gloo" / name
    m = json.loads((folder / "manifest.json").read_text())
    assert {p.name for p in folder.iterdir()} == {"manifest.json", *(f"rank{r}.json.gz" for r in range(4))}
    assert m["versions"]["torch"] == "2.13.0+cpu" and m["device"]["type"] == "cpu"
    assert (m["ranks"]["world_size"], m["ranks"]["backend"], m["ranks"]["late_step"]) == (4, "gloo", 3)
    late = m["ranks"]["late"]
    assert m["command"] == (f"tracekit capture --variant ranks --world-size 4 --late {late['rank']}:{late['phase']}:30 "
                            f"--out sample_traces/ranks_gloo/{name}")
    for c in m["captures"]:
        doc = json.loads(gzip.decompress((folder / c["trace_file"]).read_bytes()))
        assert c["status"] == "ok" and doc["distributedInfo"] == c["distributed_info"]
        assert (doc["distributedInfo"]["rank"], doc["distributedInfo"]["world_size"]) == (c["rank"], 4)
        assert bool(c["slept_ms"]) == (c["rank"] == late["rank"])
    slept = next(c["slept_ms"]["3"] for c in m["captures"] if c["rank"] == late["rank"])
    assert 30.0 <= slept < 31.0  # 30.08 ms measured around time.sleep(0.030)
    assert sum(p.stat().st_size for p in (SAMPLES / "ranks_gloo").rglob("*") if p.is_file()) < 1_000_000
