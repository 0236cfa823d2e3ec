"""The committed H200 sample traces match their manifest and hold what the analyzer's tests rely on.

Needs neither torch nor a GPU: it reads sample_traces/ only.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
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
    files = [p for p in SAMPLES.iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 10 * 1024 * 1024
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
