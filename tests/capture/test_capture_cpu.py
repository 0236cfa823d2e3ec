"""The capture code path on CPU (``--device cpu``), so CI exercises it without a GPU.

Torch-dependent tests skip only when torch is missing; CI installs the CPU build, so they run there.
"""

from __future__ import annotations

import gzip
import json
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from capture.cli import capture_command

#: Left out by --fast (tests/conftest.py): runs torch: captures on the CPU (minutes).
pytestmark = pytest.mark.slow

SMALL = ["--device", "cpu", "--sizes", "16", "--linear-shape", "64,16,32", "--mlp-shape", "2,8,32,64",
         "--train-shape", "2,16", "--train-model", "1,32,2,64", "--bench-ms", "5"]


def _load_gz_json(path: Path) -> dict:
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b", f"{path.name} is not gzipped"
    return json.loads(gzip.decompress(raw))


@pytest.fixture(scope="module")
def cpu_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("capture")
    result = CliRunner().invoke(
        capture_command,
        [*SMALL, "--variant", "matmul_add,linear,mlp", "--mode", "eager", "--execution-trace", "--out", str(out)],
    )
    return out, result


def test_cpu_capture_writes_gzipped_traces(cpu_capture) -> None:
    out, result = cpu_capture
    assert result.exit_code == 0, result.output + repr(result.exception)
    expected = {"matmul_add_eager-16", "linear_eager", "mlp_eager"}
    for stem in expected:
        doc = _load_gz_json(out / f"{stem}.json.gz")
        names = [ev.get("name", "") for ev in doc["traceEvents"]]
        steps = [n for n in names if n.startswith("ProfilerStep#")]
        assert len(steps) == 3  # schedule(wait=1, warmup=1, active=3)
        assert doc["traceName"] == f"{stem}.json.gz"
    mlp_names = [ev.get("name") for ev in _load_gz_json(out / "mlp_eager.json.gz")["traceEvents"]]
    assert mlp_names.count("mlp_fwd") == 3
    assert "aten::gelu" in mlp_names and "aten::mul" in mlp_names
    linear_names = {ev.get("name") for ev in _load_gz_json(out / "linear_eager.json.gz")["traceEvents"]}
    assert "linear_fwd" in linear_names
    et = _load_gz_json(out / "mlp_eager.et.json.gz")
    assert et["schema"].startswith("1.") and any(n["name"] == "aten::gelu" for n in et["nodes"])


def test_cpu_capture_manifest(cpu_capture) -> None:
    out, _ = cpu_capture
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema"] == "tracekit.capture-manifest/1"
    assert manifest["device"]["type"] == "cpu"
    assert manifest["command"].startswith("tracekit capture --device cpu")
    for key in ("torch", "triton", "cuda", "kernels", "python"):
        assert key in manifest["versions"]
    assert manifest["settings"]["schedule"] == {"wait": 1, "warmup": 1, "active": 3}
    by_name = {f"{c['variant']}_{c['mode']}": c for c in manifest["captures"]}
    assert set(by_name) == {"matmul_add_eager-16", "linear_eager", "mlp_eager"}
    mlp = by_name["mlp_eager"]
    assert mlp["status"] == "ok" and mlp["label"] == "mlp_fwd" and mlp["dtype"] == "fp32"
    assert mlp["shapes"]["x"] == [2, 8, 32]
    assert mlp["trace_file"] == "mlp_eager.json.gz" and mlp["execution_trace_file"] == "mlp_eager.et.json.gz"
    t = mlp["timing"]
    assert t["unit"] == "us" and 0 < t["min"] <= t["median"] <= t["max"]
    assert mlp["correctness"]["rel_err_vs_fp64"] < 1e-5
    assert mlp["trace_summary"]["profiler_steps"] == 3


def test_cpu_capture_leaves_no_temp_files(cpu_capture) -> None:
    out, _ = cpu_capture
    names = sorted(p.name for p in out.iterdir())
    assert not [n for n in names if n.startswith(".")], names
    assert all(n == "manifest.json" or n.endswith(".json.gz") for n in names), names


def test_compiled_and_train_on_cpu(tmp_path: Path) -> None:
    """The compile path and the training step run too; CUDA-only modes are skipped, not failed."""
    pytest.importorskip("torch")
    result = CliRunner().invoke(
        capture_command, [*SMALL, "--variant", "linear,train", "--mode", "compile,eager", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    by_name = {f"{c['variant']}_{c['mode']}": c for c in manifest["captures"]}
    assert by_name["linear_compile"]["correctness"]["within_tolerance"] is True
    train = by_name["train_eager"]
    assert train["status"] == "ok" and train["label"] == "train_step"
    assert train["correctness"]["loss_decreased"] is True
    names = {ev.get("name") for ev in _load_gz_json(tmp_path / "train_eager.json.gz")["traceEvents"]}
    assert "train_step" in names and any(str(n).startswith("Optimizer.step#AdamW") for n in names)

    skipped = CliRunner().invoke(capture_command, [*SMALL, "--variant", "mlp", "--mode", "liger", "--out",
                                                   str(tmp_path / "s")])
    assert skipped.exit_code == 0
    entry = json.loads((tmp_path / "s" / "manifest.json").read_text())["captures"][0]
    assert entry["status"] == "skipped" and "CUDA" in entry["reason"]


def test_failing_variant_keeps_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from capture import variants

    def broken(spec, opts):
        raise RuntimeError("simulated build failure")

    monkeypatch.setitem(variants._BUILDERS, "linear", broken)
    result = CliRunner().invoke(
        capture_command, [*SMALL, "--variant", "matmul_add,linear,mlp", "--mode", "eager", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    status = {f"{c['variant']}_{c['mode']}": c["status"] for c in manifest["captures"]}
    assert status == {"matmul_add_eager-16": "ok", "linear_eager": "failed", "mlp_eager": "ok"}
    failed = next(c for c in manifest["captures"] if c["status"] == "failed")
    assert failed["error"] == "RuntimeError: simulated build failure"
    assert (tmp_path / "mlp_eager.json.gz").exists() and not (tmp_path / "linear_eager.json.gz").exists()


def _run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    from tracekit.commands import main

    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr().err.strip().splitlines()


def test_ranks_refuses_device_cuda_given_but_not_by_default(tmp_path: Path, capsys) -> None:
    code, err = _run_main(["capture", "--variant", "ranks", "--device", "cuda", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err == ["tracekit: error: --variant ranks does not take --device cuda (it runs a DDP loop "
                                 "on the CPU, gloo backend)"]
    assert not (tmp_path / "o").exists()


def test_no_cuda_without_device_cpu_is_one_line_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, err = _run_main(["capture", "--variant", "mlp", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err == ["tracekit: error: no CUDA device found; use --device cpu for a CPU-only capture"]
    assert not (tmp_path / "o").exists()


def test_missing_torch_is_one_line_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    code, err = _run_main(["capture", "--out", str(tmp_path)], capsys)
    assert code == 2
    assert err == ["tracekit: error: install the capture extra: pip install 'tracekit-torch[capture]'"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--variant", "nope"], "unknown variant 'nope'"),
        (["--mode", "fast"], "unknown mode 'fast'"),
        (["--mlp-shape", "1,2"], "--mlp-shape: expected 4 positive integers"),
        (["--variant", "linear", "--mode", "liger"], "no mode liger exists for variant(s) linear"),
        (["--variant", "mlp", "--shapes", "64x128"], "--shapes needs --from-first-call"),
        (["--variant", "train", "--from-first-call"], "--from-first-call records the mlp shape sweep"),
        (["--variant", "mlp", "--from-first-call", "--shapes", "64x"], "--shapes: expected BATCHxSEQ"),
        (["--variant", "mlp", "--from-first-call", "--shapes", "0x8"], "--shapes: expected BATCHxSEQ"),
        (["--variant", "mlp", "--from-first-call", "--calls-per-shape", "0"], "--calls-per-shape: expected 1 positive"),
        (["--variant", "antipatterns", "--antipattern-shape", "8,8,8"], "--antipattern-shape: expected 4"),
        (["--variant", "antipatterns", "--mode", "compile-static"], "no mode compile-static exists"),
        # all = the study's workloads (the command that made sample_traces/); antipatterns only by name
        (["--variant", "all", "--mode", "healthy"], "no mode healthy exists for variant(s) matmul_add, linear, mlp, train"),
        # ranks: several processes into a folder of their own, on the CPU
        (["--variant", "ranks,mlp"], "--variant ranks records a set of rank traces into a folder of its own"),
        (["--variant", "ranks", "--mode", "eager"], "--variant ranks does not take --mode"),
        (["--variant", "ranks", "--execution-trace"], "--variant ranks does not take --execution-trace"),
        (["--variant", "ranks", "--world-size", "1"], "--world-size: expected an integer from 2 to 64, got '1'"),
        (["--variant", "ranks", "--world-size", "four"], "--world-size: expected an integer from 2 to 64"),
        (["--variant", "ranks", "--world-size", "2", "--late", "2:data:5"], "--late: rank 2 is not a rank of a world of 2"),
        (["--variant", "ranks", "--late", "1:optimizer:5"], "--late: expected RANK:PHASE:MS with PHASE one of data"),
        (["--variant", "ranks", "--late", "1:data:0"], "--late: expected RANK:PHASE:MS"),
        (["--variant", "ranks", "--late", "1:data"], "--late: expected RANK:PHASE:MS"),
        (["--variant", "mlp", "--late", "1:data:5"], "--late is for --variant ranks"),
        (["--variant", "ranks", "--ranks-shape", "8,64"], "--ranks-shape: expected 3 positive integers"),
    ],
)
def test_bad_flags_are_one_line_exit_2(tmp_path: Path, capsys, args: list[str], message: str) -> None:
    code, err = _run_main(["capture", "--device", "cpu", "--out", str(tmp_path), *args], capsys)
    assert code == 2
    assert len(err) == 1 and message in err[0], err


# ---------------------------------------------------------------------------------- liger local kernels

_FAKE_LIGER = {
    "liger_kernel/__init__.py": "from liger_kernel import functional  # noqa\n",
    "liger_kernel/utils.py": "def infer_device():\n    return 'cpu'\n\ndef is_npu_available():\n    return False\n",
    "liger_kernel/ops/utils.py": "from liger_kernel.utils import infer_device\n\ndef calculate_settings(n):\n    return n, 4\n",
    "liger_kernel/ops/geglu.py": (
        "from liger_kernel.ops.utils import calculate_settings\nfrom liger_kernel.utils import is_npu_available\n\n"
        "def _geglu_tanh_forward_kernel():\n    pass\n\ndef geglu_forward(a, b):\n    return a, b, None\n\n"
        "def geglu_backward(a, b, dc):\n    return a, b\n\nclass LigerGELUMulFunction:\n    pass\n"
    ),
    "liger_kernel/transformers/geglu.py": (
        "from liger_kernel.ops import LigerGELUMulFunction\n\nclass LigerGEGLUMLP:\n"
        "    def __init__(self, config):\n        self.hidden_size = config.hidden_size\n"
    ),
    "liger_kernel-9.9.9.dist-info/METADATA": "Name: liger_kernel\nVersion: 9.9.9\n",
    "liger_kernel-9.9.9.dist-info/licenses/LICENSE": "BSD-2-Clause text\n",
}


def _fake_wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "liger_kernel-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in _FAKE_LIGER.items():
            zf.writestr(name, text)
    return wheel


def test_relativize_rewrites_absolute_imports() -> None:
    from capture.liger_local import BuildError, relativize

    src = "from liger_kernel.ops.utils import a\n    from liger_kernel.utils import b\nfrom liger_kernel import c\n"
    assert relativize(src, "ops/geglu.py") == "from ..ops.utils import a\n    from ..utils import b\nfrom .. import c\n"
    assert relativize("from liger_kernel.utils import b\n", "utils.py") == "from .utils import b\n"
    with pytest.raises(BuildError):
        relativize("import liger_kernel.ops\n", "x.py")


def test_liger_local_builds_a_kernels_repository(tmp_path: Path) -> None:
    from capture.liger_local import main

    out = tmp_path / "repo"
    assert main(["--wheel", str(_fake_wheel(tmp_path)), "--out", str(out)]) == 0
    for variant, backend in (("torch-cuda", "cuda"), ("torch-universal", "cpu")):
        vdir = out / "build" / variant
        meta = json.loads((vdir / "metadata.json").read_text())
        assert meta["name"] == "liger-kernels" and meta["version"] == 1 and meta["backend"] == {"type": backend}
        assert json.loads((vdir / "PROVENANCE.json").read_text())["liger_kernel_version"] == "9.9.9"
        for py in (vdir / "liger_kernels").rglob("*.py"):
            assert "liger_kernel." not in py.read_text(), py
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # staging folder swapped in


def test_local_repository_loads_through_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """get_kernel resolves the repo id to the local folder (no network) and the manifest says so."""
    pytest.importorskip("torch")
    pytest.importorskip("kernels")
    from capture.liger_local import main
    from capture.variants import LIGER_REPO, load_liger

    out = tmp_path / "repo"
    assert main(["--wheel", str(_fake_wheel(tmp_path)), "--out", str(out)]) == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LOCAL_KERNELS", "")  # restored (unset) after the test; load_liger overwrites it
    module, source = load_liger(str(out))
    assert module.layers.LigerGEGLUMLP(type("C", (), {"hidden_size": 8})()).hidden_size == 8
    assert hasattr(module.ops.geglu, "_geglu_tanh_forward_kernel")
    assert source["source"] == "local" and source["repo_id"] == LIGER_REPO
    assert source["provenance"]["liger_kernel_version"] == "9.9.9"
    assert "packaged as a local kernel and loaded through kernels" in source["description"]


# ------------------------------------------------------------------ sweep, antipatterns, memory (CPU path)


def _gz_events(path: Path) -> list[dict]:
    return _load_gz_json(path)["traceEvents"]


def _inside(e: dict, span: dict) -> bool:
    return span["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= span["ts"] + span["dur"]


def test_plan_names_sweep_and_memory_modes() -> None:
    from capture.variants import Options, plan

    sweep = plan(["mlp"], None, Options(from_first_call=True))
    assert [s.mode for s in sweep] == ["eager-sweep", "compile-sweep", "compile-static-sweep",
                                       "compile-dynamic-sweep", "compile-cudagraphs-sweep", "liger-sweep"]
    assert [s.needs_cuda for s in sweep] == [False, False, False, False, True, True]
    memory = plan(["mlp", "train"], ["eager"], Options(profile_memory=True))
    assert [f"{s.variant}_{s.mode}" for s in memory] == ["mlp_eager-memory", "train_eager-memory"]
    anti = plan(["antipatterns"], None, Options())
    assert anti[0].mode == "cold-first-step"  # first, so its first step is the process's first
    assert {s.mode for s in anti if s.needs_cuda} == {"h2d-pageable", "gemm-fp32", "overhead-bound-graphed"}


def test_antipattern_table_is_consistent() -> None:
    from capture.antipatterns import BY_MODE, TABLE, gemm_counts

    for ap in TABLE:
        if ap.planted:
            assert ap.control in BY_MODE and ap.planted in BY_MODE[ap.control].control_for, ap.mode
            assert ap.fix, ap.mode
        else:
            assert ap.control_for, ap.mode
    # batch 8192, 4 ReLU blocks of 1024 -> 4096 -> 1024: 8 Linears, 3 GEMMs each but the first (x needs
    # no gradient): 23 GEMMs, 2 * 8192 * 1024 * 4096 FLOP each.
    counts = gemm_counts(BY_MODE["healthy"].loop, 8192, 1024, 4096, 4)
    assert counts == {"gemms_per_step": 23, "gemm_flop_per_step": 23 * 2 * 8192 * 1024 * 4096}
    assert gemm_counts(BY_MODE["pointwise-unfused"].loop, 8, 2, 4, 2)["gemms_per_step"] == 3 * 6 - 2


def test_ground_truth_readers_without_cuda() -> None:
    from capture import ground_truth as gt
    from capture.sweep import summarize

    before = {"stats": {"unique_graphs": 2, "calls_captured": 5}, "frames": {"total": 2}}
    after = {"stats": {"unique_graphs": 3, "calls_captured": 5}, "frames": {"total": 3}, "inductor": {"x": 1}}
    assert gt.counters_delta(before, after) == {"frames": {"total": 1}, "inductor": {"x": 1},
                                                "stats": {"unique_graphs": 1}}
    assert gt.unique_graphs(after) == 3 and gt.unique_graphs({}) == 0
    assert gt._count_value(__import__("itertools").count(4)) == 4
    probe = gt.AllocatorProbe("cpu")
    probe.window_begin(), probe.unit_begin(), probe.unit_end("u"), probe.window_end()
    assert probe.result() == {"available": False, "reason": "no CUDA caching allocator on this device"}
    calls = [
        {"call": 0, "compiled": True, "wall_us": 9.0, "unique_graphs_before": 0, "unique_graphs_after": 1,
         "compilations": [{"compile_id": "0/0"}],
         "runtime_compilations": [{"compile_id": "0/0", "is_runtime": True, "runtime_triton_autotune_time_us": 5}],
         "cudagraph": {"path_state": "WARMUP"}},
        {"call": 1, "compiled": False, "wall_us": 1.0, "unique_graphs_before": 1, "unique_graphs_after": 1,
         "compilations": [], "runtime_compilations": [], "cudagraph": {"path_state": "RECORDING"}},
        {"call": 2, "compiled": False, "wall_us": 1.0, "unique_graphs_before": 1, "unique_graphs_after": 1,
         "compilations": [], "runtime_compilations": [], "cudagraph": {"path_state": "EXECUTION"}},
    ]
    gt_summary = summarize(calls, "compile-cudagraphs")
    assert gt_summary["compiled_calls"] == [0] and gt_summary["autotune_calls"] == [0]
    assert (gt_summary["cudagraph_warmup_calls"], gt_summary["cudagraph_record_calls"],
            gt_summary["cudagraph_replay_calls"]) == ([0], [1], [2])


@pytest.fixture(scope="module")
def sweep_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("sweep")
    # eager and compile only: each Inductor compile on CPU builds C++ (seconds on a small CI machine).
    result = CliRunner().invoke(capture_command, [
        "--device", "cpu", "--variant", "mlp", "--from-first-call", "--mode", "eager,compile,liger", "--shapes",
        "4x8,2x8", "--calls-per-shape", "2", "--mlp-shape", "4,8,32,64", "--bench-ms", "5", "--out", str(out)])
    return out, result


def test_sweep_on_cpu_records_compilations_inside_the_calls(sweep_capture) -> None:
    out, result = sweep_capture
    assert result.exit_code == 0, result.output + repr(result.exception)
    manifest = json.loads((out / "manifest.json").read_text())
    by_mode = {c["mode"]: c for c in manifest["captures"]}
    assert {m: c["status"] for m, c in by_mode.items()} == {
        "eager-sweep": "ok", "compile-sweep": "ok", "liger-sweep": "skipped"}
    # Shapes 4x8, 4x8, 2x8, 2x8: default dynamic handling compiles at call 0 and recompiles at call 2
    # (the batch changed).
    expected = {"eager-sweep": [], "compile-sweep": [0, 2]}
    for mode, compiled in expected.items():
        c = by_mode[mode]
        assert c["trace_file"] == f"mlp_{mode}.json.gz" and c["schedule"] is None
        assert [call["annotation"] for call in c["calls"]] == ["mlp_fwd#0 4x8", "mlp_fwd#1 4x8", "mlp_fwd#2 2x8",
                                                             "mlp_fwd#3 2x8"]
        assert all(call["wall_us"] > 0 for call in c["calls"])
        gt = c["ground_truth"]
        assert gt["compiled_calls"] == compiled and gt["compilations"] == len(compiled) == gt["unique_graphs"]
        assert gt["recompiles"] == max(len(compiled) - 1, 0)
        events = _gz_events(out / c["trace_file"])
        calls = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("mlp_fwd#")),
                       key=lambda e: e["ts"])
        assert [e["name"] for e in calls] == [call["annotation"] for call in c["calls"]]
        compiles = [e for e in events if e.get("name") == "_compile.compile_inner (dynamo_timed)"]
        assert sorted(i for e in compiles for i, a in enumerate(calls) if _inside(e, a)) == compiled
        if mode != "eager-sweep":
            assert c["correctness"]["within_tolerance"] is True and c["compilations_after_trace"] == 0
            assert c["compiler_prewarmed"] is True
    assert "size mismatch at index 0" in by_mode["compile-sweep"]["ground_truth"]["recompile_reasons"][0]
    assert "CUDA" in by_mode["liger-sweep"]["reason"]


@pytest.fixture(scope="module")
def antipattern_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("antipatterns")
    modes = "cold-first-step,healthy,overhead-bound,host-sync,host-sync-cpu-item,h2d-pageable,gemm-fp32," \
            "pointwise-unfused,extra-copies,optimizer-unfused,optimizer-foreach,zero-grad-fill"
    result = CliRunner().invoke(capture_command, [
        "--device", "cpu", "--variant", "antipatterns", "--mode", modes, "--antipattern-shape", "16,32,64,2",
        "--bench-ms", "5", "--out", str(out)])
    return out, result


def _ops_per_step(path: Path, name: str) -> list[int]:
    events = _gz_events(path)
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    return [sum(1 for e in events if e.get("name") == name and e.get("ph") == "X"
                and e.get("cat") in ("cpu_op", "user_annotation") and _inside(e, s)) for s in steps]


def test_antipatterns_on_cpu_plant_each_problem_at_its_op(antipattern_capture) -> None:
    out, result = antipattern_capture
    assert result.exit_code == 0, result.output + repr(result.exception)
    by_mode = {c["mode"]: c for c in json.loads((out / "manifest.json").read_text())["captures"]}
    assert by_mode["h2d-pageable"]["status"] == by_mode["gemm-fp32"]["status"] == "skipped"
    assert "CUDA" in by_mode["gemm-fp32"]["reason"]
    healthy = out / "antipatterns_healthy.json.gz"
    for mode, c in by_mode.items():
        if c["status"] == "skipped":
            continue
        assert c["status"] == "ok" and c["label"] == "train_step", mode
        assert c["sync_after_each_step"] is False and len(c["losses"]) == c["schedule"]["wait"] + \
            c["schedule"]["warmup"] + c["schedule"]["active"]
        assert c["trace_summary"]["profiler_steps"] == len(c["steps"])
        for ev in c["evidence"]:
            if "op" not in ev or ev.get("inside") or ev.get("outside") or mode == "overhead-bound":
                continue
            # Exact counts against the control are asserted on the GPU traces (tests/capture/test_capture_samples.py);
            # on CPU some ops dispatch differently (.to/.cpu on CPU tensors), so only presence is held here.
            planted = _ops_per_step(out / c["trace_file"], ev["op"])
            assert all(n >= ev["per_step"] for n in planted), (mode, ev["op"], planted)
    assert by_mode["cold-first-step"]["steps"][0] == "ProfilerStep#0"
    assert _ops_per_step(out / "antipatterns_host-sync.json.gz", "aten::nonzero") == [1, 1, 1]
    assert _ops_per_step(out / "antipatterns_host-sync-cpu-item.json.gz", "aten::item") == \
        [n + 1 for n in _ops_per_step(healthy, "aten::item")]
    assert _ops_per_step(healthy, "aten::nonzero") == [0, 0, 0]
    assert _ops_per_step(out / "antipatterns_extra-copies.json.gz", "aten::contiguous") == [1, 1, 1]
    assert _ops_per_step(out / "antipatterns_pointwise-unfused.json.gz", "aten::gelu") == [2, 2, 2]


def test_profile_memory_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(capture_command, [*SMALL, "--variant", "mlp", "--mode", "eager", "--profile-memory",
                                                  "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["settings"]["profile_memory"] is True
    entry = manifest["captures"][0]
    assert entry["mode"] == "eager-memory" and entry["trace_file"] == "mlp_eager-memory.json.gz"
    assert entry["allocator"] == {"available": False, "reason": "no CUDA caching allocator on this device"}
    memory = [e for e in _gz_events(tmp_path / entry["trace_file"]) if e.get("name") == "[memory]"]
    assert memory and entry["trace_summary"]["memory_events"] == len(memory)
    assert {"Addr", "Bytes", "Total Allocated", "Device Type"} <= set(memory[0]["args"])
