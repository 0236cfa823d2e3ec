"""Nothing ever writes to an input, and ``-o`` never replaces what is not a regular file.

Each command runs as the user runs it (a subprocess of ``python -m tracekit``) on copies of a
shipped trace in a temp directory. Device nodes are made there with ``os.mknod`` (root only: skipped
otherwise); the real ``/dev/null`` is never touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from factory import copy_as_rank

#: Left out by --fast (tests/conftest.py): a process per case.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


def tracekit(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *argv], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(SAMPLES / "mlp_eager.json.gz", tmp_path / "t.json.gz")
    shutil.copy(SAMPLES / "mlp_eager.et.json.gz", tmp_path / "t.et.json.gz")
    shutil.copy(SAMPLES / "mlp_compile.json.gz", tmp_path / "b.json.gz")
    shutil.copy(ROOT / "expectations" / "mlp_eager.toml", tmp_path / "e.toml")
    os.link(tmp_path / "t.json.gz", tmp_path / "hard.json.gz")
    os.symlink("t.json.gz", tmp_path / "sym.json.gz")
    (tmp_path / "ranks").mkdir()
    copy_as_rank(SAMPLES / "mlp_eager.json.gz", tmp_path / "ranks" / "r0.json.gz", 0, 1)
    os.link(tmp_path / "ranks" / "r0.json.gz", tmp_path / "rank_hard.json.gz")
    os.symlink("ranks/r0.json.gz", tmp_path / "rank_sym.json.gz")
    return tmp_path


# An output named like a trace or a TOML file has no format of its own (it would be refused for that):
# the format is given, so that what is refused is overwriting the input.
@pytest.mark.parametrize("argv,victim", [
    (["report", "--format", "md", "t.json.gz", "-o", "t.json.gz"], "t.json.gz"),
    (["report", "--format", "md", "t.json.gz", "-o", "hard.json.gz"], "t.json.gz"),  # a hard link: same inode
    (["report", "--format", "md", "t.json.gz", "-o", "sym.json.gz"], "t.json.gz"),  # through a symlink
    (["report", "--format", "md", "sym.json.gz", "-o", "t.json.gz"], "t.json.gz"),
    # the execution trace found beside
    (["report", "--format", "md", "t.json.gz", "-o", "t.et.json.gz"], "t.et.json.gz"),
    (["report", "--format", "md", "t.json.gz", "--execution-trace", "b.json.gz", "-o", "b.json.gz"], "b.json.gz"),
    (["convert", "t.json.gz", "-o", "t.et.json.gz"], "t.et.json.gz"),
    (["diff", "--format", "md", "t.json.gz", "b.json.gz", "-o", "b.json.gz"], "b.json.gz"),
    (["diff", "--format", "md", "t.json.gz", "b.json.gz", "-o", "t.et.json.gz"], "t.et.json.gz"),
    (["check", "--format", "md", "t.json.gz", "--expect", "e.toml", "-o", "e.toml"], "e.toml"),
    (["report", "--format", "md", "ranks", "-o", "ranks/r0.json.gz"], "ranks/r0.json.gz"),
    (["merge", "ranks", "-o", "ranks/r0.json.gz"], "ranks/r0.json.gz"),
    (["merge", "ranks", "-o", "rank_hard.json.gz"], "ranks/r0.json.gz"),  # a hard link to a rank
    (["merge", "ranks", "-o", "rank_sym.json.gz"], "ranks/r0.json.gz"),  # a symlink to a rank
])
def test_an_output_that_is_an_input_is_refused_before_anything_is_written(work: Path, argv, victim) -> None:
    before = digest(work / victim)
    result = tracekit(*argv, cwd=work)
    assert result.returncode == 2, result.stderr
    assert "refusing to overwrite an input" in result.stderr and len(result.stderr.splitlines()) == 1
    assert digest(work / victim) == before
    assert not [p for p in work.rglob(".*.tmp")]


def test_a_failing_run_leaves_an_existing_output_as_it_was(work: Path) -> None:
    out = work / "out.md"
    out.write_text("keep me\n")
    for argv in (["report", "missing.json", "-o", "out.md"], ["report", "t.json.gz", "--step", "99", "-o", "out.md"],
                 ["check", "t.json.gz", "--expect", "missing.toml", "-o", "out.md"]):
        result = tracekit(*argv, cwd=work)
        assert result.returncode == 2, (argv, result.stderr)
        assert out.read_text() == "keep me\n"
    assert not [p for p in work.glob(".*.tmp")]


def test_output_through_a_symlink_writes_the_target_and_keeps_the_link_and_permissions(work: Path) -> None:
    target = work / "target.md"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = work / "link.md"
    link.symlink_to("target.md")
    result = tracekit("report", "t.json.gz", "-o", "link.md", cwd=work)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == "target.md"
    assert target.read_text().startswith("# tracekit report: t.json.gz")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_an_existing_outputs_permissions_are_kept(work: Path) -> None:
    for name, argv in (("r.json", ["report", "t.json.gz", "-o", "r.json"]),
                       ("t.parquet", ["convert", "t.json.gz", "-o", "t.parquet"])):
        out = work / name
        out.write_text("x")
        os.chmod(out, 0o600)
        result = tracekit(*argv, cwd=work)
        assert result.returncode == 0, result.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_size > 1


def test_output_onto_a_named_pipe_is_written_through(work: Path) -> None:
    fifo = work / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    result = tracekit("report", "t.json.gz", "--format", "md", "-o", "pipe", cwd=work)
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still a pipe, not replaced by a file
    assert got and got[0].startswith(b"# tracekit report: t.json.gz")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_output_onto_a_device_node_is_written_through(work: Path) -> None:
    null = work / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a null device of our own, in the temp dir
    for argv in (["report", "t.json.gz", "--format", "md", "-o", "null"], ["convert", "t.json.gz", "-o", "null"],
                 ["diff", "t.json.gz", "b.json.gz", "-o", "null", "--format", "json"]):
        result = tracekit(*argv, cwd=work)
        assert result.returncode == 0, (argv, result.stderr)
        mode = null.lstat().st_mode
        assert stat.S_ISCHR(mode) and os.major(null.lstat().st_rdev) == 1, argv


def test_dash_is_standard_output(work: Path) -> None:
    result = tracekit("report", "t.json.gz", "--format", "md", "-o", "-", cwd=work)
    assert result.returncode == 0 and result.stdout.startswith("# tracekit report: t.json.gz")
    assert not (work / "-").exists()


def test_a_reader_that_goes_away_gets_the_documented_exit_in_the_terminal_format() -> None:
    # `tracekit report … | head -1`: the terminal format's output (111 kB here) meets the closed pipe,
    # and its library would exit 1 — a failed gate to a `pipefail` CI. It exits 141 as documented.
    trace = Path(__file__).resolve().parents[2] / "sample_traces" / "train_eager.json.gz"
    done = subprocess.run(f"{sys.executable} -m tracekit report {trace} | head -n 1 > /dev/null; "
                          "echo ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True, text=True,
                          timeout=300)
    assert done.stdout.strip() == "141", done.stderr[-500:]
    assert "Traceback" not in done.stderr


def test_a_broken_pipe_met_by_the_last_flush_exits_141(monkeypatch) -> None:
    # Output that waits in stdout's buffer until the end (the JSON and Markdown formats) meets a
    # reader that went away at that flush: 141 too, not the interpreter's silent 0 at exit.
    import io

    import click

    from tracekit import boundary

    class Gone(io.StringIO):
        def flush(self) -> None:
            raise BrokenPipeError

        def fileno(self) -> int:
            raise io.UnsupportedOperation

    monkeypatch.setattr(sys, "stdout", Gone())
    command = click.Command("write", callback=lambda: sys.stdout.write("{}\n"))
    with pytest.raises(SystemExit) as exited:
        boundary.run(command, [], "tracekit")
    assert exited.value.code == boundary.BROKEN_PIPE


def test_an_output_extension_no_format_writes_is_refused(work: Path) -> None:
    # `-o out.pdf` used to get terminal text in a .pdf; now one line, exit 2, nothing written.
    result = tracekit("report", "t.json.gz", "-o", "out.pdf", cwd=work)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "writes no .pdf file" in result.stderr and "--format" in result.stderr
    assert not (work / "out.pdf").exists()
    # With the format named, the file is written whatever its name, and one line says so.
    written = tracekit("report", "t.json.gz", "-o", "out.pdf", "--format", "md", cwd=work)
    assert written.returncode == 0 and written.stdout == ""
    assert (work / "out.pdf").read_text().startswith("# tracekit report")
    assert written.stderr == f"wrote out.pdf ({(work / 'out.pdf').stat().st_size:,} bytes)\n"
