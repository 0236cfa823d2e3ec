"""Names are escaped in every format: a hostile kernel, op, annotation, thread or file name can
neither drive a terminal, nor become a link, image, HTML, mention or table cell in Markdown, nor be
altered in JSON.

One trace carries every string of :data:`HOSTILE` as an op name, a kernel name, an annotation name
(``ann <s>``), a zero-kernel op name (``quiet <s>``) and a thread name; its file name and a rank
file's name carry what a file name can. Every command (report, diff, check, report DIR) runs in
every format through :func:`tracekit.commands.main`, and each output is read back the way its
reader would: Markdown through a CommonMark/GFM parser (markdown-it-py with tables and linkify, as
GitHub links URLs and e-mail addresses), the terminal text character by character, JSON by
``json.loads``. Each check asserts the name's text is there, not only that something is absent.
"""

from __future__ import annotations

import io
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from factory import make_annotation, make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.classify.names import short_kernel_name
from tracekit.commands import main
from tracekit.render import FORMATS
from tracekit.render.text import DISPLAY_LIMIT, for_display

#: Left out by --fast (tests/conftest.py): every command in every format over hostile names.
pytestmark = pytest.mark.slow

#: Strings a trace's names may carry (each: what it would do if shown raw).
HOSTILE = [
    "[x](http://evil.example/a)",  # a live link in a PR comment
    "![](http://evil.example/i.png)",  # a remote image (a tracking pixel)
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "&lt;b&gt; &amp; &#x41; &#65;",  # entities that would decode
    "`code` and ``two``",  # code spans
    "a|b|c",  # table cells
    "# heading",
    "> quote",
    "- item",
    "1. item",
    "@octocat ping",  # a GitHub mention notifies a person
    "fixes #123 and owner/repo#7 and GH-9",  # issue links
    "see http://evil.example/x now",  # GFM autolinks
    "www.evil.example",
    "mail user@evil.example",
    "line1\nline2\r\nline3",
    "\x1b[31mred\x1b[0m",  # CSI colour
    "\x1b[2J\x1b[Hclear",  # CSI clear screen, cursor home
    "\x1b]0;pwned title\x07",  # OSC window title, BEL
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",  # OSC-8 hyperlink
    "\x9b31mC1 csi \x9d0;t\x9c \x85",  # C1 CSI, OSC, ST, NEL
    "bare\x1besc",
    "bell\x07 back\x08space del\x7f",
    "carriage\rreturn",
    "\u202eevil\u202c and \u2066isolate\u2069",  # bidi override / isolate (Trojan Source)
    "[bold red]markup[/bold red]",  # rich markup
    "[/]",  # a lone closing tag (rich raised MarkupError)
    ":smile: :+1:",  # emoji codes
    "*em* _em_ **strong** ~~strike~~",
    "$x^2$",  # GitHub math
    "[ref]: http://evil.example",  # a link reference definition
    "back\\slash \\| pipe",  # a backslash before a table pipe
    "<http://evil.example>",  # an autolink
    "nul\x00 unit\x1f",
    "---",  # a thematic break or setext underline
    "<!-- comment -->",
    "- [x] task",  # a task-list box
    "L" * 3000 + "<script>tail</script>",  # overlong: cut for display, whole in JSON
]
LONG = HOSTILE[-1]
#: What a file name can carry (no "/" nor NUL).
FILE_HOSTILE = ("t [x](http:evil) ![i](www.evil.example) <img src=x onerror=alert(1)> @octocat #12 `b` a|b "
                "[bold red]m :smile: \x1b[2J\x1b]0;t\x07 \u202eevil")

#: A repeating annotation that the report picks as its unit (no ProfilerStep): titles, facts and
#: step labels name it.
UNIT = "[bold red]@octocat <img src=x onerror=alert(1)> \x1b]0;t\x07 #12 www.evil.example [/] `u` a|b"

#: Characters no terminal output may hold (C0 but newline, DEL, C1, bidi controls, surrogates).
TERMINAL_FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                                "\ud800-\udfff]")
#: HTML elements our Markdown makes on purpose; anything else came from a name.
OUR_ELEMENTS = {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "table", "thead", "tbody", "tr",
                "th", "td", "details", "summary"}
#: Elements whose text is one piece of our layout (a name lies inside one of them).
BLOCKS = {"h1", "h2", "h3", "p", "li", "th", "td", "summary"}


def test_hostile_list_covers_the_issue():
    assert len(HOSTILE) >= 25 and len(set(HOSTILE)) == len(HOSTILE)


# -- inputs -------------------------------------------------------------------------------------

def _hostile_events() -> list[dict]:
    events, t = [], 1.0
    for n, name in enumerate(HOSTILE, start=1):
        events += [make_annotation("ann " + name, t, 9), make_op(name, t + 1, 5),
                   make_launch("cudaLaunchKernel", t + 2, 1, n), make_kernel(name, t + 4, 1, n),
                   make_op("quiet " + name, t + 7, 1)]
        t += 10
    meta = [{"ph": "M", "name": key, "pid": 100, "tid": 100, "args": {"name": name}}
            for key, name in (("thread_name", HOSTILE[20]), ("process_name", HOSTILE[2]))]
    return [make_step(1, 0.0, t + 1), *events, *meta]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    hostile = write_trace(root / f"{FILE_HOSTILE}.json", _hostile_events())
    # No GPU work in B: every kernel of A is "removed", each named in its own row.
    plain = write_trace(root / "plain.json", [make_step(1, 0.0, 20), make_op("aten::mm", 1, 5)], gpu=False)
    units = write_trace(root / "units.json", [
        event for n in range(3) for event in (
            make_annotation(UNIT, 20.0 * n, 15), make_op("aten::mul", 20.0 * n + 1, 5),
            make_launch("cudaLaunchKernel", 20.0 * n + 2, 1, n + 1), make_kernel("k", 20.0 * n + 4, 1, n + 1))])
    ranks = root / "ranks"
    ranks.mkdir()
    write_trace(ranks / f"0 {FILE_HOSTILE}.json", _hostile_events(), rank=(0, 2))
    (ranks / f"1 {FILE_HOSTILE}.json").write_text('{"traceEvents": [')  # a broken rank: its error is shown
    expect = root / "expect.toml"
    expect.write_text("\n".join([
        f"description = {_toml(chr(10).join(HOSTILE[:-1]))}",
        "[per_step]",
        f"cpu_ops_present = [{', '.join(_toml(s) for s in HOSTILE[:-1])}]",
        'kernels_present = ["*"]',
        'cpu_ops_absent = ["*evil*"]',
    ]) + "\n", encoding="utf-8")
    return {"hostile": hostile, "plain": plain, "units": units, "ranks": ranks, "expect": expect}


def _toml(s: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; TOML also wants DEL escaped)."""
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _argv(command: str, inputs: dict[str, Path]) -> list[str]:
    return {
        "report": ["report", str(inputs["hostile"])],
        "diff": ["diff", str(inputs["hostile"]), str(inputs["plain"])],
        "check": ["check", str(inputs["hostile"]), "--expect", str(inputs["expect"])],
        "ranks": ["report", str(inputs["ranks"])],
        "units": ["report", str(inputs["units"])],
    }[command]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(argv: list[str], monkeypatch, *, tty: bool = False) -> str:
    """``tracekit ARGV`` through the real entry point; its stdout (exit 0, or 1 for a broken
    expectation: the output is written first)."""
    import tracekit.parallel

    monkeypatch.setattr(tracekit.parallel, "cores", lambda: 1)  # report DIR in this process
    out = _Tty() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code in (0, 1), argv
    return out.getvalue()


COMMANDS = ["report", "diff", "check", "ranks", "units"]


@pytest.fixture(scope="module")
def outputs(inputs) -> dict[tuple[str, str], str]:
    """Every command's output in every format (run once per module)."""
    with pytest.MonkeyPatch.context() as mp:
        return {(command, fmt): _run([*_argv(command, inputs), "--format", fmt], mp)
                for command in COMMANDS for fmt in FORMATS if fmt != "svg"}  # svg writes files: tests/render/test_svg.py


# -- what each command must show ---------------------------------------------------------------

def _report_json(outputs) -> dict:
    return json.loads(outputs["report", "json"])


def _kernel_shown(outputs) -> dict[str, str]:
    """Kernel name -> the short form the tables show (shortening is the taxonomy's, not ours)."""
    return {k["name"]: short_kernel_name(k["name"], k["decoded"]) for k in _report_json(outputs)["kernels"]}


def _expected(command: str, outputs) -> list[str]:
    """Names each command's text formats must show, before display escaping."""
    file_name = f"{FILE_HOSTILE}.json"
    if command == "report":
        shown = _kernel_shown(outputs)
        return ([file_name] + HOSTILE + ["ann " + s for s in HOSTILE] + ["quiet " + s for s in HOSTILE]
                + [shown[s] for s in HOSTILE])
    if command == "diff":  # every op and kernel of the hostile trace is gone in the plain one
        shown = _kernel_shown(outputs)
        return [file_name] + HOSTILE + ["quiet " + s for s in HOSTILE] + [shown[s] for s in HOSTILE]
    if command == "check":  # the description line by line, each pattern, the example op found
        return [file_name] + HOSTILE[:-1]
    if command == "units":
        return [UNIT, f"{UNIT}#1", f"{UNIT}#3"]
    return [f"0 {FILE_HOSTILE}.json", f"1 {FILE_HOSTILE}.json"]


# -- Markdown ------------------------------------------------------------------------------------

def _gfm():
    from markdown_it import MarkdownIt

    md = MarkdownIt("gfm-like")  # CommonMark + tables + strikethrough + linkify, raw HTML passed
    md.linkify.set({"fuzzy_link": False, "fuzzy_email": True})  # GitHub: schemes, www., e-mail
    return md


class _Html(HTMLParser):
    """Element names, the text of each block element (entities decoded), and the text outside
    code spans (where GitHub links mentions, issue numbers and URLs)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.blocks: list[str] = []
        self.outside_code: list[str] = []
        self._open: list[list[str]] = []
        self._in_code = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_code += tag == "code"
        if tag in BLOCKS:
            self._open.append([])

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        self._in_code -= tag == "code"
        if tag in BLOCKS and self._open:
            self.blocks.append("".join(self._open.pop()))

    def handle_data(self, data):
        for piece in self._open:
            piece.append(data)
        if not self._in_code:
            self.outside_code.append(data)

    def handle_comment(self, data):
        self.tags.append("!--")


def _rendered(markdown: str) -> _Html:
    page = _Html()
    page.feed(_gfm().render(markdown))
    page.close()
    return page


@pytest.mark.parametrize("command", COMMANDS)
def test_markdown_names_render_as_text(outputs, command):
    markdown = outputs[command, "md"]
    page = _rendered(markdown)
    made = set(page.tags) - OUR_ELEMENTS
    assert not made, f"elements made from names: {made}"  # no a, img, script, del, blockquote, hr, …
    # What GitHub links in rendered text outside code must not stand bare (a zero-width space
    # breaks it): mentions, issue numbers, URLs.
    text = "".join(page.outside_code)
    assert not re.search(r"@\w", text), "a bare @mention"
    assert not re.search(r"(?:^|[^\w])#\d|/[\w.-]+#\d|GH-\d", text), "a bare issue link"
    assert not re.search(r"(?i)\bwww\.", text), "a bare www. autolink"
    assert "http://" not in text, "a bare URL"
    blocks = [b.replace("\u200b", "") for b in page.blocks]
    for name in _expected(command, outputs):
        shown = for_display(name)
        assert any(shown in b for b in blocks), f"{name[:60]!r} not shown as text"


def test_markdown_shows_each_name_as_it_is():
    """Spot checks of the escaping itself, each read back through the parser."""
    from tracekit.render.gfm import md_code, md_escape

    def text_of(markdown: str) -> str:  # the last block: the paragraph, the body cell, the summary
        return _rendered(markdown).blocks[-1].replace("\u200b", "")

    assert md_escape("[x](http://e.example)") == "\\[x\\](http:&#8203;//e.example)"
    assert md_escape("@octocat #12") == "@&#8203;octocat \\#&#8203;12"
    assert md_escape("<b>&amp;</b>") == "&lt;b&gt;&amp;amp;&lt;/b&gt;"
    assert md_escape("- item", line_start=True) == "\\- item"
    assert md_escape("12. item", line_start=True) == "12\\. item"
    assert md_escape("a_b", html=True) == "a_b" and md_escape("<i>", html=True) == "&lt;i&gt;"
    assert md_code("a|b<script>", in_table=True) == "`a\\|b<script>`"
    for name in HOSTILE[:-1]:
        assert text_of(md_escape(name, line_start=True)) == for_display(name)
        assert text_of(f"| h |\n|---|\n| {md_code(name, in_table=True)} |") == for_display(name).strip()
        assert text_of(f"<details><summary>{md_escape(name, html=True)}</summary>\n\n</details>") == \
            for_display(name)
    # Markdown that would be live without the escaping: the parser makes links and HTML of it.
    assert "<a " in _gfm().render("[x](http://e.example) www.e.example")
    assert "<script>" in _gfm().render("<script>alert(1)</script>")


# -- terminal ------------------------------------------------------------------------------------

def _columns(text: str) -> list[str]:
    """The terminal output as pieces of text, whitespace removed: each table column's cells joined
    top to bottom (a long name folds over several lines), and each run of other lines joined."""
    pieces: list[str] = []
    columns: list[list[str]] = []
    loose: list[str] = []
    for line in text.splitlines() + [""]:
        parts = re.split("[│┃]", line)[1:-1]  # a table row: "│ a │ b │"
        if loose and parts:
            pieces.append("".join(loose))
            loose = []
        if columns and len(columns) != len(parts):
            pieces += ["".join(c) for c in columns]
            columns = []
        if parts:
            columns = columns or [[] for _ in parts]
            for column, part in zip(columns, parts):
                column.append(part)
        else:
            loose.append(line)
    pieces.append("".join(loose))
    return ["".join(p.split()) for p in pieces]


@pytest.mark.parametrize("command", COMMANDS)
def test_terminal_output_holds_no_control_character(outputs, command):
    text = outputs[command, "term"]
    bad = TERMINAL_FORBIDDEN.search(text)
    assert bad is None, f"{bad.group()!r} at {bad.start()}: {text[max(0, bad.start() - 40):bad.start() + 20]!r}"
    pieces = _columns(text)
    for name in _expected(command, outputs):
        shown = "".join(for_display(name).split())
        assert any(shown in p for p in pieces), f"{name[:60]!r} not shown"


@pytest.mark.parametrize("command", COMMANDS)
def test_terminal_colour_is_the_only_escape_sequence(inputs, monkeypatch, command):
    """With colour on (stdout a terminal) the only sequences are rich's own SGR colours."""
    text = _run(_argv(command, inputs), monkeypatch, tty=True)
    assert "\x1b[" in text  # colour was on
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    bad = TERMINAL_FORBIDDEN.search(plain)
    assert bad is None, f"{bad.group()!r}: {plain[max(0, bad.start() - 40):bad.start() + 20]!r}"
    # The names are shown escaped (a narrow table cell may wrap them: compare without the wrapping).
    joined = re.sub(r"[\s│┃|]", "", plain)
    assert "\\x1b]0;" in joined or "\\x1b]8;;" in joined or "\\x1b[2J" in joined


def test_terminal_check_description_with_a_lone_closing_tag(tmp_path, inputs, monkeypatch):
    """rich markup in a description is shown as written (it used to raise MarkupError)."""
    expect = tmp_path / "e.toml"
    expect.write_text('description = "[/] [bold red]x[/bold red] :smile:"\n[per_step]\nkernels_min = 1\n')
    text = _run(["check", str(inputs["plain"]), "--expect", str(expect)], monkeypatch)
    assert "[/] [bold red]x[/bold red] :smile:" in text.splitlines()[1]


# -- HTML ----------------------------------------------------------------------------------------

class _Page(HTMLParser):
    """A page's elements, its script count, its comments and its text nodes (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.links: list[str] = []
        self.texts: list[str] = []
        self.comments = 0
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("href", "src", "xlink:href")]
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._skip:
            self.texts.append(data)

    def handle_comment(self, data):
        self.comments += 1


@pytest.mark.parametrize("command", COMMANDS)
def test_html_names_render_as_text(outputs, command):
    """Read as a browser's parser reads it: no element, link or comment made from a name, and every
    name in one text node exactly as the other formats show it (tests/render/test_html_browser.py also
    opens hostile pages in Chromium)."""
    page = _Page()
    page.feed(outputs[command, "html"])
    page.close()
    assert page.tags.count("script") == 1 and page.comments == 0
    assert not {"img", "iframe", "object", "embed", "b", "i", "base", "link"} & set(page.tags)
    assert page.tags.count("meta") == 4  # charset, CSP, viewport, generator: none from a name
    assert all(link.startswith("#") for link in page.links), page.links[:5]
    for name in _expected(command, outputs):
        shown = for_display(name)
        assert any(shown in t for t in page.texts), f"{name[:60]!r} not shown as text"


# -- JSON ----------------------------------------------------------------------------------------

def _strings(data) -> set[str]:
    if isinstance(data, str):
        return {data}
    if isinstance(data, dict):
        return set().union(*map(_strings, data.keys()), *map(_strings, data.values())) if data else set()
    if isinstance(data, list):
        return set().union(*map(_strings, data)) if data else set()
    return set()


def test_json_keeps_every_name_exact(outputs):
    report = _report_json(outputs)
    assert sorted(k["name"] for k in report["kernels"]) == sorted(HOSTILE)
    assert sorted(o["name"] for o in report["zero_kernel_ops"]) == sorted("quiet " + s for s in HOSTILE)
    assert {r["scope"] for r in report["paths"]["rows"]} == {"ann " + s for s in HOSTILE}
    assert report["trace"]["path"].endswith(f"{FILE_HOSTILE}.json")
    assert LONG in _strings(report) and len(LONG) == 3021  # never cut

    diff = json.loads(outputs["diff", "json"])
    assert diff["a"]["trace"] == f"{FILE_HOSTILE}.json"
    assert sorted(k["name"] for k in diff["kernels"]["removed"]) == sorted(HOSTILE)
    assert {o["name"] for o in diff["cpu_ops"]["removed"]} == set(HOSTILE) | {"quiet " + s for s in HOSTILE}

    check = json.loads(outputs["check", "json"])
    assert check["description"] == "\n".join(HOSTILE[:-1])
    assert [i["expected_value"] for i in check["items"] if i["key"] == "cpu_ops_present"] == HOSTILE[:-1]
    assert [i["example"] for i in check["items"] if i["key"] == "cpu_ops_absent"][0] in HOSTILE

    units = json.loads(outputs["units", "json"])["units"]
    assert (units["name"], units["source"], units["count"]) == (UNIT, "auto", 3)
    assert [s["name"] for s in json.loads(outputs["units", "json"])["steps"]] == [f"{UNIT}#{n}" for n in (1, 2, 3)]

    ranks = json.loads(outputs["ranks", "json"])
    assert [r["file"] for r in ranks["ranks"]] == [f"0 {FILE_HOSTILE}.json", f"1 {FILE_HOSTILE}.json"]
    assert ranks["ranks"][1]["error"] and ranks["ranks"][0]["error"] is None


def test_json_of_a_file_name_that_is_not_utf8(tmp_path, inputs, monkeypatch):
    """A non-UTF-8 file name reaches Python as lone surrogates: JSON writes U+FFFD, the terminal
    and Markdown show the escape, and nothing raises."""
    name = "bad\udcff\x1b[31m.json"
    try:
        path = tmp_path / name
        path.write_bytes(inputs["plain"].read_bytes())
    except (UnicodeEncodeError, OSError):
        pytest.skip("the file system refuses a non-UTF-8 name")
    data = json.loads(_run(["report", str(path), "--format", "json"], monkeypatch))
    assert data["trace"]["path"].endswith("bad\ufffd\x1b[31m.json")
    assert "tracekit report: bad\\udcff\\x1b[31m.json" in _run(["report", str(path)], monkeypatch)
    assert "bad\\\\udcff\\\\x1b\\[31m.json" in _run(["report", str(path), "--format", "md"], monkeypatch)


# -- overlong names ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["term", "md"])
def test_overlong_names_are_cut_for_display(outputs, fmt):
    text = outputs["report", fmt]
    cut = f"… [+{len(LONG) - DISPLAY_LIMIT + 24:,} chars]"  # the marker takes 24 of the limit
    assert for_display(LONG) == "L" * (DISPLAY_LIMIT - 24) + cut
    if fmt == "md":
        assert "L" * (DISPLAY_LIMIT - 24) + "… \\[+2,045 chars\\]" in text
        assert "L" * DISPLAY_LIMIT not in text and "L&lt;script" not in text
    else:  # folded over lines in its table column
        assert any("L" * (DISPLAY_LIMIT - 24) + "…[+2,045chars]" in p for p in _columns(text))
        assert "L" * DISPLAY_LIMIT not in "".join(_columns(text)).replace("LL…", "")
        assert "L<script" not in "".join(_columns(text))


def test_for_display():
    assert for_display("plain") == "plain"
    assert for_display("a\x1bb\u202ec\nd\x9b") == "a\\x1bb\\u202ec\\x0ad\\x9b"
    shown = for_display("\x1b" * 5000)  # escapes count towards the limit
    assert len(shown) <= DISPLAY_LIMIT and shown.endswith("… [+4,756 chars]") and shown.startswith("\\x1b" * 244)
    assert for_display(shown) == shown  # applying it again changes nothing
    assert for_display(None) == ""


def test_terminal_console_guards_text_that_skipped_the_choke_point():
    """A section that prints a raw str or Text (not through term.text) still cannot drive the
    terminal: the console reads no markup or emoji and shows control characters."""
    from rich.table import Table
    from rich.text import Text

    from tracekit.render.term import make_console

    out = io.StringIO()
    console = make_console(out, color=True, width=200)
    console.print("[/] [bold]x[/bold] :smile: \x1b]0;t\x07")
    console.print(Text("a\x1b[2Jb\u202ec", style="red"))
    table = Table("col \x9b1m")
    table.add_row("cell\x1b[31m")
    console.print(table)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # rich's own colours
    assert TERMINAL_FORBIDDEN.search(plain) is None
    # rich drops BEL itself; a table sized its columns before the guard, so a cell may be cut there
    # (term.text escapes before measuring): the guard keeps the terminal safe, not the layout.
    assert "[/] [bold]x[/bold] :smile: \\x1b]0;t" in plain
    assert "a\\x1b[2Jb\\u202ec" in plain and "col \\x9b" in plain and "cell\\x1b" in plain


@pytest.mark.parametrize("damage", [(b'"name": "zz_op"', b'"name": "zz \\ud800 op"'),  # a lone surrogate escape
                                    (b'"name": "zz_op"', b'"name": "zz \xff\xfe op"')])  # bytes not UTF-8
def test_json_of_a_name_that_is_not_unicode(tmp_path, capsys, damage):
    """Such a name never crashes the JSON writer: the loader refuses the trace with one line (exit 2,
    its rule today) or the report is valid JSON."""
    path = write_trace(tmp_path / "t.json", [make_step(1, 0.0, 20), make_op("zz_op", 1, 5)], gpu=False)
    path.write_bytes(path.read_bytes().replace(*damage))
    assert damage[1] in path.read_bytes()
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    if exit_.value.code == 2:
        assert err.count("\n") == 1 and err.startswith("tracekit: error: ") and out == ""
    else:
        assert exit_.value.code == 0 and json.loads(out)["schema"] == "tracekit.report/1"


@pytest.mark.parametrize("argv", [
    ["report", "no\x1b]0;pwned\x07such\x1b[2J.json"],
    ["report", "sample_traces/mlp_eager.json.gz", "-o", "no\x9b31mdir/x.md"],
    ["diff", "a\x1b[31m.json", "b.json"],
])
def test_error_lines_show_control_characters_as_text(argv, capsys):
    """The error boundary's one line names what the user typed; an escape sequence in it is shown,
    never sent to the terminal (OSC title, clear-screen, C1 CSI)."""
    import os

    from tracekit.commands import main

    root = Path(__file__).resolve().parents[2]
    here = os.getcwd()
    os.chdir(root)
    try:
        with pytest.raises(SystemExit) as done:
            main(argv)
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) <= 0x9F for c in err), repr(err)
    assert "\\x1b" in err or "\\x9b" in err
