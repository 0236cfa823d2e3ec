"""The project builds a wheel that installs under its distribution name (``tracekit-torch``, not the
unrelated ``tracekit`` on the package index) and runs from where it was installed.

The wheel is built from this checkout (pip builds it as the package index would, in an isolated
build environment with the setuptools pyproject.toml asks for) and installed, without its
dependencies, into a fresh virtual environment that sees this interpreter's site-packages for them
(polars, click…). The installed copy must be the one that runs — its files under the new environment, its
``tracekit`` command reporting a shipped sample trace — and its metadata must name the distribution
and declare the dependencies pyproject.toml does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tracekit.about import DISTRIBUTION

#: Left out by --fast (tests/conftest.py): builds and installs a wheel.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path) -> str:
    # Without PYTHONPATH: a checkout put on the path by the caller must not stand in for the wheel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_wheel_installs_as_its_distribution_and_runs(tmp_path):
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist",
        ROOT, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("*.whl"))
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    with zipfile.ZipFile(wheel) as z:
        metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(metadata).decode()
    assert f"Name: {DISTRIBUTION}\n" in text
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    required = [line.removeprefix("Requires-Dist: ") for line in text.splitlines()
                if line.startswith("Requires-Dist: ")]
    assert all(any(r.replace(" ", "").startswith(d.split(";")[0].replace(" ", "")) for r in required) for d in declared)

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    shown = run(python, "-m", "pip", "show", DISTRIBUTION, cwd=tmp_path)
    assert f"Name: {DISTRIBUTION}" in shown
    # Run outside the checkout, so the checkout's own package cannot be the one imported.
    where = run(python, "-c", "import tracekit, sys; sys.stdout.write(tracekit.__file__)", cwd=tmp_path)
    assert Path(where).resolve().is_relative_to(venv.resolve())
    out = run(venv / "bin" / "tracekit", "report", ROOT / "sample_traces" / "mlp_eager.json.gz", cwd=tmp_path)
    assert out.startswith("tracekit report: mlp_eager.json.gz")
