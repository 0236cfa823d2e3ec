"""Text no renderer can take, in every picture and page: Unicode noncharacters, lone surrogates, NUL,
C1 controls, bidi overrides and isolates, and a name of 100,000 characters, in a trace's device
name, kernel, op and annotation names and its file name.

U+FFFE in a device name made vl-convert (the chart renderer's native code, which parses the text it
measures as XML) panic and abort the process — SIGABRT, nothing written — for every HTML and SVG
output; in a kernel name it made ``roofline.svg`` XML no parser takes. Every label now passes
through :func:`tracekit.render.text.for_display`. The commands run here in real child processes,
so an abort is seen as what it is (a signal), not as a crash of the test run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from browser import Browser, chromium_binary
from factory import make_annotation, make_kernel, make_launch, make_memory, make_op, make_step, write_trace
from tracekit.render import charts
from tracekit.render.text import DISPLAY_LIMIT, INVISIBLE, for_display

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"

#: Each class of character, as it appears in the names (the lone surrogate comes through the file
#: name and its own trace below: the loader's JSON decoder refuses a ``\\ud800`` escape).
CLASSES = {
    "nonchar": "\ufffe\uffff\ufdd0\ufdef\U0001fffe\U0010ffff",
    "nul": "\x00",
    "c1": "\x85\x9b",
    "bidi": "\u202e\u2066",
    "long": "x" * 100_000,
}
#: The same characters in a file name (no NUL and no 100,000 characters there: the OS refuses them;
#: ``\\udcff`` is how Python spells the byte 0xFF of a name that is not UTF-8).
FILE_CHARS = "\ufffe\ufdd0\U0010ffff \x01\x85\x9b \u202e\u2066 \udcff"
#: A device name no device table knows, so the trace's own name reaches the roofline's subtitle.
DEVICE = "Mystery GPU " + "".join(CLASSES[k] for k in ("nonchar", "nul", "c1", "bidi")) + " " + CLASSES["long"]
#: What may never appear raw in any output: every character of the classes but the long one's.
FORBIDDEN = re.compile("[\x00\x01\x85\x9b\u202e\u2066\ufffe\uffff\ufdd0\ufdef\U0001fffe\U0010ffff\ud800-\udfff]")
#: HTML elements without an end tag.
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source", "track", "embed", "param"}


# -- the one function, by hand ---------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "shown"), [
    ("a\ufffeb", "a\\ufffeb"), ("\uffff", "\\uffff"), ("\ufdd0|\ufdef|\ufdcf|\ufdf0", "\\ufdd0|\\ufdef|\ufdcf|\ufdf0"),
    ("\U0001fffe\U0010ffff\U0001fffd", "\\U0001fffe\\U0010ffff\U0001fffd"), ("a\ud800b", "a\\ud800b"),
    ("\x00", "\\x00"), ("\x85\x9b", "\\x85\\x9b"), ("\u202e\u2066\u2069", "\\u202e\\u2066\\u2069"),
    ("tab\tnl\n", "tab\\x09nl\\x0a"), ("é ü 中 😀", "é ü 中 😀"),
])
def test_for_display_escapes_each_class(raw, shown):
    # U+FDCF, U+FDF0 and U+1FFFD are just outside the noncharacter ranges: left as they are.
    assert for_display(raw) == shown
    assert for_display(shown) == shown  # applying it twice changes nothing more
    assert not INVISIBLE.search(shown)
    # what it returns is XML 1.0: any parser takes it as text and as an attribute value
    assert ET.fromstring(f'<t a="{escape(shown, {chr(34): "&quot;"})}">{escape(shown)}</t>').text == shown


def test_for_display_cuts_a_huge_name_with_a_count():
    # 1000 characters at most: 976 kept, then the marker (17 characters) counting the 99,024 cut.
    shown = for_display("x" * 100_000)
    assert shown == "x" * 976 + "… [+99,024 chars]" and len(shown) <= DISPLAY_LIMIT


def test_every_string_of_a_chart_specification_is_made_safe():
    spec = {"title": {"text": "t\ufffe", "subtitle": "s\x85"}, "width": 10,
            "data": {"values": [{"k\uffff": "v\u202e", "n": 1.5}]}, "axis": {"labelExpr": "datum.value > 1 && 'a'"}}
    assert charts._safe(spec) == {"title": {"text": "t\\ufffe", "subtitle": "s\\x85"}, "width": 10,
                                  "data": {"values": [{"k\\uffff": "v\\u202e", "n": 1.5}]},
                                  "axis": {"labelExpr": "datum.value > 1 && 'a'"}}


# -- the commands, in child processes ---------------------------------------------------------------------

def _events(shift: float) -> list[dict]:
    """One step per class: an annotation around an op around ``aten::mm`` (shapes, so its GEMM kernel
    has FLOPs and a roofline point), its launch and kernel, and a memory event; every name but
    ``aten::mm`` carries the class."""
    events, t = [], 0.0
    for n, (name, chars) in enumerate(CLASSES.items(), start=1):
        events += [make_step(n, t, 60), make_annotation(f"ann {name} {chars}", t + 1, 50),
                   make_op(f"op {name} {chars}", t + 2, 40),
                   make_op("aten::mm", t + 3, 30, **{"Input Dims": [[256, 256], [256, 256]],
                                                     "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
                   make_launch("cudaLaunchKernel", t + 4, 2, n),
                   make_kernel(f"sm90_xmma_gemm_bf16 {name} {chars}", t + 8, 10 + shift, n),
                   make_memory(t + 5, 4096 * n, 1 << 20, n << 20, 8 << 20)]
        t += 70
    return events


def _trace(path: Path, shift: float) -> Path:
    write_trace(path, _events(shift))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["deviceProperties"][0]["name"] = DEVICE
    path.write_text(json.dumps(data), encoding="utf-8")  # ASCII: every character as a JSON escape
    return path


def _named(directory: Path, stem: str) -> Path:
    """A path in ``directory`` whose name carries :data:`FILE_CHARS` (without the non-UTF-8 byte
    where the file system refuses it)."""
    for chars in (FILE_CHARS, FILE_CHARS.replace("\udcff", "")):
        path = directory / f"{stem} {chars}.json"
        try:
            path.touch()
            return path
        except (OSError, UnicodeEncodeError):
            continue
    return directory / f"{stem}.json"


def _tracekit(*argv: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, argv)], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=240)


def _ok(done: subprocess.CompletedProcess) -> None:
    """Exit 0: no signal (a negative return code), no traceback."""
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {err[:600]}"
    assert done.returncode == 0, f"exit {done.returncode}: {err[-800:]}"
    assert "Traceback" not in err and "panicked" not in err


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    """Every picture and page of ``report`` and ``diff`` of two hostile traces (paths by output)."""
    root = tmp_path_factory.mktemp("hostile-text")
    a, b = _trace(_named(root, "a"), 0.0), _trace(_named(root, "b"), 5.0)
    out = root / "out"
    out.mkdir()
    for argv in (("report", a, "--format", "html", "-o", out / "report.html"),
                 ("report", a, "--format", "svg", "-o", f"{out}/report/"),
                 ("diff", a, b, "--format", "html", "-o", out / "diff.html"),
                 ("diff", a, b, "--format", "svg", "-o", f"{out}/diff/")):
        _ok(_tracekit(*argv))
    return {p.relative_to(out).as_posix(): p for p in sorted(out.rglob("*")) if p.is_file()}


def test_every_picture_and_page_is_written(outputs):
    assert sorted(outputs) == ["diff.html", "diff/class_time_a_vs_b.svg", "diff/diff.md", "diff/timeline_a.svg",
                               "diff/timeline_b.svg", "report.html", "report/gpu_time_by_class.svg",
                               "report/memory.svg", "report/report.md", "report/roofline.svg",
                               "report/timeline.svg"]


def test_every_svg_is_xml_and_holds_no_raw_hostile_character(outputs):
    for name, path in outputs.items():
        text = path.read_bytes().decode("utf-8")  # strict: a lone surrogate could not have been written
        assert not FORBIDDEN.search(text), name
        assert "x" * (DISPLAY_LIMIT + 1) not in text, name  # the 100,000-character name was cut
        if name.endswith(".svg"):
            ET.fromstring(text)


def _svg_texts(path: Path) -> list[str]:
    root = ET.fromstring(path.read_text(encoding="utf-8"))
    return ["".join(t.itertext()) for t in root.iter() if t.tag in (f"{SVG}text", f"{SVG}title")] + [
        e.get("aria-label") for e in root.iter() if e.get("aria-label")]


def test_names_are_shown_escaped_in_the_pictures(outputs):
    roofline = "\n".join(_svg_texts(outputs["report/roofline.svg"]))
    # The device name in the subtitle (it aborted vl-convert): escaped, then cut to the chart's 80
    # characters (12 + 6 × 6 + 2 × 10 + 3 × 4 + 6 + 5 of the last escape, and "…").
    assert ("Mystery GPU \\ufffe\\uffff\\ufdd0\\ufdef\\U0001fffe\\U0010ffff\\x00\\x85\\x9b\\u202e\\u206…: "
            "one point per kernel and problem") in roofline
    # A point per kernel (5 classes), each kernel's name escaped in its hover text.
    assert roofline.count("sm90_xmma_gemm_bf16 ") >= 5
    for shown in ("nonchar \\ufffe\\uffff\\ufdd0", "nul \\x00", "c1 \\x85\\x9b", "bidi \\u202e\\u2066", "long xxxx"):
        assert f"sm90_xmma_gemm_bf16 {shown}" in roofline, shown
    timeline = "\n".join(_svg_texts(outputs["report/timeline.svg"]))
    # the last step (the long one) is drawn: its op and annotation names, cut with the count
    assert "op long " + "x" * 100 in timeline and "ann long " + "x" * 100 in timeline
    bars = "\n".join(_svg_texts(outputs["diff/class_time_a_vs_b.svg"]))
    assert "A: a \\ufffe\\ufdd0\\U0010ffff \\x01\\x85\\x9b \\u202e\\u2066" in bars


class _Balanced(HTMLParser):
    """Every element closed, in order (void ones excepted): what a name turned into markup would break."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.wrong: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.wrong.append(f"</{tag}> closes <{self.open[-1] if self.open else ''}>")
        else:
            self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.parametrize("name", ["report.html", "diff.html"])
def test_every_page_parses(outputs, name):
    parser = _Balanced()
    parser.feed(outputs[name].read_text(encoding="utf-8"))
    parser.close()
    assert parser.wrong == [] and parser.open == []
    text = "".join(parser.text)
    # the trace's file name in the heading, escaped
    assert "a \\ufffe\\ufdd0\\U0010ffff \\x01\\x85\\x9b \\u202e\\u2066 " in text
    if name == "report.html":  # the device name in the facts; the long kernel name in the tables, cut with its count
        assert "Mystery GPU \\ufffe\\uffff\\ufdd0" in text
        assert re.search(r"sm90_xmma_gemm_bf16 long x+… \[\+\d{2},\d{3} chars\]", text)


def test_a_lone_surrogate_escape_in_the_json(tmp_path):
    """``\\ud800`` in a name: the loader refuses the trace with one line (exit 2, its rule today), or
    the report is drawn — never a signal."""
    path = write_trace(tmp_path / "s.json", [make_step(1, 0, 30), make_op("zz_op", 1, 20),
                                             make_launch("cudaLaunchKernel", 2, 1, 1), make_kernel("zz_k", 4, 5, 1)])
    path.write_bytes(path.read_bytes().replace(b'"zz_op"', b'"zz \\ud800 op"').replace(b'"zz_k"', b'"k \\udfff"'))
    done = _tracekit("report", path, "--format", "svg", "-o", f"{tmp_path}/out/")
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode in (0, 2), f"exit {done.returncode}: {err[-800:]}"
    if done.returncode == 2:
        assert err.startswith("tracekit: error: ") and err.count("\n") == 1 and not (tmp_path / "out").exists()
    else:
        for svg in (tmp_path / "out").glob("*.svg"):
            ET.fromstring(svg.read_text(encoding="utf-8"))


def test_chromium_shows_the_page_and_the_roofline_without_error(outputs):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    with Browser(binary) as browser:
        page = browser.new_page()
        page.open(outputs["report.html"].as_uri())
        assert page.errors() == []
        assert page.evaluate("document.querySelectorAll('figure.tk-chart svg').length") >= 3
        assert "Mystery GPU \\ufffe" in page.evaluate("document.body.textContent")
        # A standalone SVG is read by the browser's XML parser: a bad character would show its error page.
        page.open(outputs["report/roofline.svg"].as_uri())
        assert page.errors() == []
        assert page.evaluate("document.getElementsByTagName('parsererror').length") == 0
        assert page.evaluate("document.documentElement.localName") == "svg"
