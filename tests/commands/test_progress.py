"""Every long phase of a command shows a bar on stderr when stderr is a terminal, and nothing else.

stderr is a pseudo-terminal here (:mod:`pty`), read from its other end; ``TRACEKIT_PROGRESS_AFTER_S=0``
draws each bar at once (a sample trace's phases end well inside the one second a user waits before
a bar). The same commands with stderr in a pipe print only their one ``wrote`` line.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import sys
import termios
import threading
from pathlib import Path

import pytest

from factory import copy_as_rank
from tracekit import progress, ranks
from tracekit.commands import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
EAGER = SAMPLES / "mlp_eager.json.gz"
COMPILE = SAMPLES / "mlp_compile.json.gz"
EXPECT = Path(__file__).resolve().parents[2] / "expectations" / "mlp_eager.toml"


def _on_a_terminal(argv: list[str], monkeypatch) -> str:
    """Run ``tracekit ARGV`` with stderr on a pseudo-terminal (120 columns); what it drew, escapes out."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    drawn = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    terminal = open(slave, "w", encoding="utf-8", closefd=True)  # noqa: SIM115 - closed below
    monkeypatch.setenv(progress.AFTER_ENV, "0")
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
    finally:
        terminal.flush()
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        terminal.close()
        reader.join(timeout=10)
        os.close(master)
    assert exit_info.value.code == 0
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode("utf-8", "replace"))


@pytest.mark.parametrize("argv,phases", [
    (["report", str(EAGER), "--format", "md", "-o", "{out}/r.md"],
     ["loading mlp_eager.json.gz", "analysing mlp_eager.json.gz", "writing r.md"]),
    (["report", str(EAGER), "--format", "html", "-o", "{out}/r.html"],
     ["analysing mlp_eager.json.gz", "drawing the timelines of mlp_eager.json.gz", "writing r.html"]),
    (["diff", str(EAGER), str(COMPILE), "--format", "json", "-o", "{out}/d.json"],
     ["reading and analysing mlp_eager.json.gz and mlp_compile.json.gz", "writing d.json"]),
    (["compare", str(EAGER), str(COMPILE), "-o", "{out}/c.md"],
     ["reading and analysing 2 traces", "writing c.md"]),
    (["check", str(EAGER), "--expect", str(EXPECT), "-o", "{out}/k.md"],
     ["loading mlp_eager.json.gz", "analysing mlp_eager.json.gz", "writing k.md"]),
    (["convert", str(EAGER), "-o", "{out}/t.parquet"],
     ["loading mlp_eager.json.gz", "analysing mlp_eager.json.gz", "writing t.parquet"]),
    (["report", "{out}/ranks", "--format", "md", "-o", "{out}/ranks.md"],
     ["summarising 2 rank traces", "writing ranks.md"]),
], ids=["report", "report-html", "diff", "compare", "check", "convert", "report-dir"])
def test_each_long_phase_draws_a_bar_on_a_terminal(argv, phases, tmp_path, monkeypatch):
    monkeypatch.setattr(ranks.parallel, "cores", lambda: 1)  # rank files in this process: no pool to start
    (tmp_path / "ranks").mkdir()
    for rank, trace in enumerate((EAGER, COMPILE)):
        copy_as_rank(trace, tmp_path / "ranks" / f"rank{rank}.json.gz", rank, 2)
    drawn = _on_a_terminal([a.replace("{out}", str(tmp_path)) for a in argv], monkeypatch)
    at = [drawn.find(label) for label in phases]
    assert -1 not in at, (phases, drawn)
    assert at == sorted(at), "phases drawn out of order"
    # The elapsed time beside each bar, as the load bar always had (rich's 0:00:00).
    assert re.search(r"\d:\d\d:\d\d", drawn)
    # The one line saying what was written still comes, after the bars.
    assert "wrote " in drawn[at[-1]:]


def test_in_a_pipe_nothing_but_the_wrote_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(progress.AFTER_ENV, "0")
    with pytest.raises(SystemExit):
        main(["report", str(EAGER), "--format", "md", "-o", str(tmp_path / "r.md")])
    err = capsys.readouterr().err
    assert err == f"wrote {tmp_path / 'r.md'} ({(tmp_path / 'r.md').stat().st_size:,} bytes)\n"


def test_output_on_the_bars_terminal_ends_the_bar_first(monkeypatch):
    """The bar and a command's output may share one terminal: the output's first write takes the bar away."""
    monkeypatch.setenv(progress.AFTER_ENV, "0")
    monkeypatch.setattr(progress, "shown", lambda: True)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # rich draws into it; only the order matters here
    out = io.StringIO()
    with progress.phase("writing the output") as bar:
        assert bar._bar is not None  # drawn at once
        guarded = bar.guard(out)
        guarded.write("# report\n")
        assert bar._bar is None  # gone before the first byte
        guarded.write("more\n")
    assert out.getvalue() == "# report\nmore\n"


def test_a_label_cannot_drive_the_terminal():
    bar = progress.Phase("loading \x1b]0;owned\x07[bold]x{task}.json", shown=False)
    assert bar.label == "loading \ufffd]0;owned\ufffd[bold]x{task}.json"
