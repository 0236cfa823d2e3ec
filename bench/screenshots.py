"""Screenshots of the HTML report's step timeline in a real headless Chromium, for the docs.

    python bench/screenshots.py [--real-traces DIR] [--out docs/images]

Writes ``report-1000-kernels.png`` (the shipped ``sample_traces/train_eager.json.gz``: ProfilerStep#4,
871 GPU activities and 500 memory round trips drawn) and, given the public real traces (``--real-traces``
or ``TRACEKIT_REAL_TRACES``), ``report-with-stack.png`` (the vLLM decode trace recorded with
``with_stack``: step #10, 1,471 GPU activities, its CPU lane folded to the launching depth). Each
report is written by the ``tracekit`` command, opened from ``file://`` in Chromium
(``tests/browser.py``), and the timeline's box is captured at 1,400 px wide.
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import Browser, chromium_binary  # noqa: E402

VLLM = "Navi-AI-Lab__nvllm__vllm-gb10-flashinfer-cudagraph-decode.json.gz"


def shoot(trace: Path, out: Path, work: Path) -> None:
    """The report of ``trace`` as HTML, and a PNG of its step timeline's box at ``out``."""
    page_path = work / (out.stem + ".html")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "tracekit", "report", str(trace), "-o", str(page_path)],
                   check=True, env=env)
    binary = chromium_binary()
    if binary is None:
        raise SystemExit("no chromium binary on PATH")
    with Browser(binary, width=1400, height=900) as browser:
        page = browser.new_page()
        page.open(page_path.resolve().as_uri())
        # The page's sticky header would cover the top of the box in a capture of the whole page.
        box = page.evaluate("""(() => { document.querySelector('header.tk-head').style.position = 'static';
            const e = document.querySelector('.tk-timelines'); e.scrollIntoView();
            const r = e.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()""")
        shot = browser.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1}}, session=page.session)
        errors = page.errors()
    if errors:
        raise SystemExit(f"{page_path}: {errors}")
    out.write_bytes(base64.b64decode(shot["data"]))
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real-traces", type=Path, default=os.environ.get("TRACEKIT_REAL_TRACES"))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        shoot(ROOT / "sample_traces" / "train_eager.json.gz", args.out / "report-1000-kernels.png", Path(work))
        if args.real_traces:
            shoot(Path(args.real_traces) / VLLM, args.out / "report-with-stack.png", Path(work))
        else:
            print("no --real-traces: report-with-stack.png not made", file=sys.stderr)


if __name__ == "__main__":
    main()
