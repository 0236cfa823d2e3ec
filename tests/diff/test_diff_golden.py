"""Golden Markdown of the done-when diffs, compared byte for byte.

Refresh after an intended change with ``pytest tests/diff/test_diff_golden.py --update-goldens`` and
review the diff of tests/golden/ like code. The outputs name traces by basename only, so they
do not depend on where the repository lives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracekit.commands import main

ROOT = Path(__file__).resolve().parents[2]

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
def test_diff_markdown_matches_golden(a, b, gates, tmp_path, monkeypatch, golden):
    monkeypatch.chdir(tmp_path)  # output must not depend on the working directory either
    out = tmp_path / "out.md"
    argv = ["diff", str(ROOT / "sample_traces" / f"{a}.json.gz"), str(ROOT / "sample_traces" / f"{b}.json.gz"),
            "-o", str(out), *gates]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    expected_code = 1 if (a, b) == ("mlp_compile", "mlp_eager") else 0
    assert exc.value.code == expected_code
    golden(f"diff_{a}__{b}.md", out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("mode", ["mlp_eager", "mlp_compile", "mlp_liger"])
def test_check_markdown_matches_golden(mode, tmp_path, golden):
    out = tmp_path / "out.md"
    with pytest.raises(SystemExit) as exc:
        main(["check", str(ROOT / "sample_traces" / f"{mode}.json.gz"), "--expect",
              str(ROOT / "expectations" / f"{mode}.toml"), "-o", str(out)])
    assert exc.value.code == 0
    golden(f"check_{mode}.md", out.read_text(encoding="utf-8"))


def test_missing_golden_fails_instead_of_being_written(golden, tmp_path, monkeypatch):
    import conftest

    monkeypatch.setattr(conftest, "GOLDEN_DIR", tmp_path)
    with pytest.raises(AssertionError, match="missing golden"):
        golden("never_written.md", "text")
    assert not (tmp_path / "never_written.md").exists()
