"""Golden Markdown of the done-when diffs, compared byte for byte.

Refresh after an intended change with ``TRACEKIT_UPDATE_GOLDEN=1 pytest tests/test_diff_golden.py``
and review the diff of tests/golden/ like code. The outputs name traces by basename only, so they
do not depend on where the repository lives.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracekit.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("TRACEKIT_UPDATE_GOLDEN") == "1"

CASES = [
    ("mlp_eager", "mlp_compile", []),
    ("mlp_eager", "mlp_liger", []),
    ("linear_eager", "linear_compile", []),
    ("mlp_eager", "mlp_eager", ["--fail-if", "gpu_time>+5%", "--fail-if", "kernels>+0",
                                "--fail-if", "round_trip_bytes>+0"]),
    ("mlp_compile", "mlp_eager", ["--fail-if", "gpu_time>+5%", "--fail-if", "kernels>+0",
                                  "--fail-if", "round_trip_bytes>+0"]),
]


@pytest.mark.parametrize("a, b, gates", CASES, ids=[f"{a}__{b}" for a, b, _ in CASES])
def test_diff_markdown_matches_golden(a, b, gates, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # output must not depend on the working directory either
    out = tmp_path / "out.md"
    argv = ["diff", str(ROOT / "sample_traces" / f"{a}.json.gz"), str(ROOT / "sample_traces" / f"{b}.json.gz"),
            "-o", str(out), *gates]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    expected_code = 1 if (a, b) == ("mlp_compile", "mlp_eager") else 0
    assert exc.value.code == expected_code
    golden = GOLDEN / f"diff_{a}__{b}.md"
    text = out.read_text(encoding="utf-8")
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"missing {golden.name}: run with TRACEKIT_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("mode", ["mlp_eager", "mlp_compile", "mlp_liger"])
def test_check_markdown_matches_golden(mode, tmp_path):
    out = tmp_path / "out.md"
    with pytest.raises(SystemExit) as exc:
        main(["check", str(ROOT / "sample_traces" / f"{mode}.json.gz"), "--expect",
              str(ROOT / "expectations" / f"{mode}.toml"), "-o", str(out)])
    assert exc.value.code == 0
    golden = GOLDEN / f"check_{mode}.md"
    if UPDATE:
        golden.write_text(out.read_text(encoding="utf-8"), encoding="utf-8")
    assert out.read_text(encoding="utf-8") == golden.read_text(encoding="utf-8")
