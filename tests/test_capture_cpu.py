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
    assert err == ["tracekit: error: install the capture extra: pip install 'tracekit[capture]'"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--variant", "nope"], "unknown variant 'nope'"),
        (["--mode", "fast"], "unknown mode 'fast'"),
        (["--mlp-shape", "1,2"], "--mlp-shape: expected 4 positive integers"),
        (["--variant", "linear", "--mode", "liger"], "no mode liger exists for variant(s) linear"),
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
