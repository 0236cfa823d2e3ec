"""tracekit.load.shares: a trace decoded in shares by several processes equals the one-process load.

The shares are real spawned processes. Small files get small chunks (``CHUNK_BYTES`` is patched in
this process, which plans the spans the workers decode) so that every share holds several chunks.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import replace
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from tracekit import parallel
from tracekit.errors import TraceError
from tracekit.load import compressed, inflated, layout, load, shares, source, streamed

#: Left out by --fast (tests/conftest.py): decodes in worker processes.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
FRAMES = ("ops", "launches", "gpu", "overhead", "flows", "memory", "threads", "steps")


def _assert_same(a, b) -> None:
    for name in FRAMES:
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.meta == b.meta


@pytest.fixture(scope="module")
def train_json(tmp_path_factory) -> Path:
    """The shipped training capture, uncompressed (only a mapped file is decoded in shares)."""
    path = tmp_path_factory.mktemp("train") / "train_eager.json"
    path.write_bytes(gzip.decompress((ROOT / "sample_traces" / "train_eager.json.gz").read_bytes()))
    return path


@pytest.mark.parametrize("workers", [2, 3])
def test_shares_give_the_one_process_frames(train_json: Path, monkeypatch, workers: int) -> None:
    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    one = load(train_json, workers=1)
    many = load(train_json, workers=workers)
    _assert_same(one, many)
    assert one.meta.event_count == 32_651 and one.ops.height == 18_300


@pytest.mark.parametrize("form", ["minified", "keys_after_events", "bare_array"])
def test_any_layout_decodes_in_shares(train_json: Path, tmp_path: Path, monkeypatch, form: str) -> None:
    """Minified JSON (one line, as tools re-save traces), metadata after the events and a bare Chrome
    array are planned at the separators between events and decoded in shares too."""
    import msgspec

    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    monkeypatch.setattr(layout, "EXACT_BOUNDS_MIN_BYTES", 0)  # small file, big-file rules
    top = msgspec.json.decode(train_json.read_bytes())
    if form == "keys_after_events":  # the events first, then metadata that holds arrays
        top = {"traceEvents": top.pop("traceEvents"), **top, "logs": [[1, 2], [3]]}
    data = top["traceEvents"] if form == "bare_array" else top
    path = tmp_path / f"{form}.json"
    path.write_bytes(msgspec.json.encode(data))
    planned = layout.plan_spans(bytearray(path.read_bytes()), path.read_bytes()[:1])
    assert planned is not None and len(planned[1]) > 10  # cut at separators, not one span
    calls = []
    real = layout.decode_top
    monkeypatch.setattr(layout, "decode_top", lambda *a: calls.append(1) or real(*a))
    many = load(path, workers=2)
    assert calls == []  # never the exact (one-process) path
    monkeypatch.undo()
    one = load(path, workers=1)
    _assert_same(one, many)
    assert many.meta.event_count == 32_651 and many.ops.height == 18_300


def test_exact_absolute_times_survive_the_shares(monkeypatch) -> None:
    """The 2024 absolute 3-decimal form: the first chunk decides the decimal path for every share."""
    monkeypatch.setattr(layout, "CHUNK_BYTES", 200)
    path = FIXTURES / "kineto_2024_abs3.json"
    one = load(path, workers=1)
    many = load(path, workers=2)
    assert many.meta.time_format == "absolute-us3"
    _assert_same(one, many)


def test_a_broken_event_in_a_worker_share_is_the_same_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(layout, "CHUNK_BYTES", 300)
    text = (FIXTURES / "kineto_2025_h200.json").read_text()
    cut = text.rindex('"ph": "X"')  # an event in the last share
    broken = tmp_path / "broken.json"
    broken.write_text(text[:cut] + '"ph": "X", "ts": [1, ' + text[cut + len('"ph": "X"'):])
    with pytest.raises(TraceError) as serial:
        load(broken, workers=1)
    with pytest.raises(TraceError) as shared:
        load(broken, workers=2)
    assert str(shared.value) == str(serial.value)


def test_a_pool_that_cannot_run_falls_back_to_one_process(train_json: Path, monkeypatch) -> None:
    tried = []

    class BrokenPool:
        def __init__(self, max_workers):
            tried.append(("pool", max_workers))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args, **kwargs):
            tried.append(("submit", fn.__name__))
            raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    monkeypatch.setattr(parallel, "spawn_pool", BrokenPool)
    one = load(train_json, workers=1)
    assert tried == []
    _assert_same(one, load(train_json, workers=2))
    assert tried == [("pool", 1), ("submit", "_decode_share")]  # the pool was tried, then not used


def test_share_count_rules(train_json: Path, monkeypatch) -> None:
    import mmap

    spans = [(i * 10, i * 10 + 9) for i in range(20)]
    with open(train_json, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        assert shares.share_count(None, bytearray(b"x"), spans) == 1  # gzip: inflated here
        assert shares.share_count(3, mapped, spans) == 3
        assert shares.share_count(1, mapped, spans) == 1
        assert shares.share_count(None, mapped, spans) == 1  # 200 bytes: not worth a process
        monkeypatch.setattr(shares, "SHARE_MIN_BYTES", 50)
        monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
        assert shares.share_count(None, mapped, spans) == 3  # 199 bytes // 50
    finally:
        mapped.close()


def test_split_keeps_order_and_balances_bytes() -> None:
    spans = [(i * 100, i * 100 + 98) for i in range(10)]
    runs = shares.split(spans, 3)
    assert [s for run in runs for s in run] == spans
    assert [len(run) for run in runs] == [4, 3, 3]
    # The first share (this process) weighs 1.15 against each worker's 1: 53.5 % of the bytes of two.
    assert [len(run) for run in shares.split(spans, 2)] == [6, 4]


def test_scratch_space_goes_to_disk_when_shared_memory_is_small(monkeypatch) -> None:
    class Stat:
        f_bavail, f_frsize = 16, 4096  # 64 KiB free

    monkeypatch.setattr(parallel.os, "statvfs", lambda _: Stat())
    monkeypatch.setattr(parallel.os.path, "isdir", lambda _: True)
    monkeypatch.setattr(parallel.os, "access", lambda *_: True)
    assert parallel.shared_memory_dir(65_536) == "/dev/shm"
    assert parallel.shared_memory_dir(65_537) is None


def test_what_the_shares_leave_out_is_counted_as_in_one_process(train_json: Path, tmp_path: Path,
                                                                monkeypatch) -> None:
    """Events dropped for unusable times and device activity not analysed, spread over the shares,
    add up to the one-process counts: two events of each kind edited, one early and the last one."""
    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    edited = bytearray(train_json.read_bytes())
    dur, cpu_op = b'"dur": ', b'"cat": "cpu_op"'
    early = edited.index(cpu_op, len(edited) // 10)
    late = edited.rindex(cpu_op)
    for at in (edited.index(cpu_op, early + 1), edited.rindex(cpu_op, 0, late)):
        at = edited.index(dur, at) + len(dur)
        edited[at] = ord("-")  # a cpu_op with a negative duration: dropped
    for at in (early, late):
        edited[at:at + len(cpu_op)] = b'"cat": "hpu_op"'  # same length: an HPU device activity
    path = tmp_path / "edited.json"
    path.write_bytes(bytes(edited))
    one = load(path, workers=1)
    many = load(path, workers=2)
    _assert_same(one, many)
    assert one.meta.dropped_events == {"unusable_time": 2}
    assert one.meta.unanalysed_activity == {"hpu_op": 2}


@pytest.fixture(scope="module")
def train_gz(train_json: Path) -> Path:
    """The training capture as two concatenated gzip members (as ``cat a.gz b.gz`` makes them)."""
    data = train_json.read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    path = train_json.with_name("train_eager_two_members.json.gz")
    path.write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    return path


def _spy_sources(monkeypatch) -> list:
    """The :class:`~tracekit.load.source.Source` of every read, kept to look at after the load."""
    seen = []
    real = source.read_input
    monkeypatch.setattr(source, "read_input", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    return seen


def test_gzip_is_inflated_to_shared_memory_and_decoded_in_shares(train_json: Path, train_gz: Path,
                                                                  monkeypatch) -> None:
    """A compressed trace is inflated into a file the workers map by path (the trace keeps its own
    name), decoded in shares to the same frames as the plain file; the file is removed and unmapped
    once every share is decoded, before the frames are joined."""
    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    monkeypatch.setattr(inflated, "SPILL_MIN_BYTES", 1 << 20)  # big-file rules for a 16 MB trace
    calls = []
    real = shares.decode_in_shares
    monkeypatch.setattr(shares, "decode_in_shares", lambda *a: calls.append(a) or real(*a))
    seen = _spy_sources(monkeypatch)
    at_join = []
    real_join = shares.join_shares
    monkeypatch.setattr(shares, "join_shares", lambda parts: at_join.append(
        (Path(calls[0][6]).exists(), seen[0].data.closed)) or real_join(parts))
    many = load(train_gz, workers=2)
    (path, *_, mapped, decoded_all), = calls
    assert path == train_gz and mapped is not None and mapped != str(train_gz)
    assert decoded_all == seen[0].give_back_copy
    assert at_join == [(False, True)]  # gone before the join, not only when the load ended
    assert not Path(mapped).exists() and seen[0].mapped is None
    one = load(train_json, workers=1)
    for name in FRAMES:
        assert getattr(one, name).equals(getattr(many, name)), name
    assert many.meta.event_count == one.meta.event_count == 32_651
    assert many.meta.path == str(train_gz)


def test_the_inflated_copy_goes_when_the_load_fails(train_json: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(inflated, "SPILL_MIN_BYTES", 1 << 20)
    text = train_json.read_bytes()
    cut = text.rindex(b'"ph": "X"')
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(text[:cut] + b'"ph": "X", "ts": [1, ' + text[cut + 9:]))
    seen = _spy_sources(monkeypatch)
    made = []
    real_mkstemp = inflated.tempfile.mkstemp
    monkeypatch.setattr(inflated.tempfile, "mkstemp", lambda **k: made.append(real_mkstemp(**k)) or made[-1])
    with pytest.raises(TraceError, match="broken.json.gz"):
        load(broken, workers=2)
    assert len(made) == 1 and not Path(made[0][1]).exists() and seen[0].mapped is None


def test_inflating_falls_back_to_memory_when_shared_memory_fills(train_json: Path, train_gz: Path,
                                                                  tmp_path: Path, monkeypatch) -> None:
    """ENOSPC part-way (a small /dev/shm): the bytes written come back into memory and the rest
    follows there; no /dev/shm at all: memory from the start. The JSON is the same either way."""
    import errno

    monkeypatch.setattr(inflated, "SPILL_MIN_BYTES", 1 << 20)
    plain = train_json.read_bytes()
    monkeypatch.setattr(parallel, "shared_memory_dir", lambda room: str(tmp_path))
    real_write, budget = inflated.os.write, [6 << 20]

    def write(fd, data):
        if budget[0] < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        budget[0] -= len(data)
        return real_write(fd, data)

    monkeypatch.setattr(inflated.os, "write", write)
    src = source.read_input(train_gz, spill=True)
    assert isinstance(src.data, bytearray) and src.mapped is None and bytes(src.data) == plain
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(parallel, "shared_memory_dir", lambda room: None)
    src = source.read_input(train_gz, spill=True)
    assert isinstance(src.data, bytearray) and bytes(src.data) == plain


def _stream_rules(monkeypatch) -> list:
    """Big-file rules for the 16 MB training capture (chunks, windows and the size that streams
    scaled down in this process; the worker keeps its own defaults, which changes nothing it
    decodes); returns the list that collects each :meth:`StreamedLoad.decode` result."""
    monkeypatch.setattr(layout, "CHUNK_BYTES", 200_000)
    monkeypatch.setattr(streamed, "STREAM_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(streamed, "WINDOW_BYTES", 300_000)
    finished = []
    real = streamed.StreamedLoad.decode
    monkeypatch.setattr(streamed.StreamedLoad, "decode",
                        lambda self, *a: finished.append(real(self, *a)) or finished[-1])
    return finished


def _spy_cuts(monkeypatch) -> list:
    cuts = []
    real = streamed.find_cut
    monkeypatch.setattr(streamed, "find_cut", lambda *a: cuts.append(real(*a)) or cuts[-1])
    return cuts


def test_a_gzip_trace_is_decoded_as_it_inflates(train_json: Path, tmp_path: Path, monkeypatch) -> None:
    """One gzip member: a worker decodes the events up to the first separator at or after
    EARLY_FRACTION of the size the gzip trailer gives, this process the rest, both as the text
    inflates; no inflated copy is made, and the trace is the one-process trace."""
    path = tmp_path / "train_eager.json.gz"
    plain = train_json.read_bytes()
    path.write_bytes(gzip.compress(plain, 1))
    finished = _stream_rules(monkeypatch)
    cuts = _spy_cuts(monkeypatch)
    seen = _spy_sources(monkeypatch)
    got = load(path, workers=2)
    assert finished[0] is not None and seen == []  # streamed: the whole text was never read
    # The cut: the comma of the first event separator after the target (ISIZE x fraction).
    (cut,) = cuts
    target = int(streamed.EARLY_FRACTION * len(plain))
    assert plain[cut:cut + 1] == b"," and target < cut < target + 2_000
    assert plain.find(b"},", target) == cut - 1 and not re.search(rb"\},\s*\{", plain[target:cut - 1])
    monkeypatch.undo()
    one = load(train_json, workers=1)
    for name in FRAMES:
        assert getattr(one, name).equals(getattr(got, name)), name
    assert got.meta.event_count == one.meta.event_count == 32_651
    assert got.meta.path == str(path) and got.meta.size_bytes == one.meta.size_bytes == len(plain)
    assert replace(got.meta, path=one.meta.path) == one.meta


def test_a_concatenated_gzip_streams_whole(train_json: Path, train_gz: Path, monkeypatch) -> None:
    """Two members (the trailer gives only the second one's size, so the cut falls early): every
    member is read, the trace is the one-process trace."""
    finished = _stream_rules(monkeypatch)
    got = load(train_gz, workers=2)
    assert finished[0] is not None
    monkeypatch.undo()
    _assert_same(load(train_gz, workers=1), got)


def test_a_wrong_guess_of_the_array_start_takes_the_usual_path(train_json: Path, tmp_path: Path,
                                                               monkeypatch) -> None:
    """A ``"traceEvents": [`` inside metadata before the real array fools the guess; the check of
    the metadata at the end drops the streamed load and the usual load gives the right frames."""
    import msgspec

    top = msgspec.json.decode(train_json.read_bytes())
    top = {"decoy": {"traceEvents": [1, 2]}, **top}
    text = msgspec.json.encode(top)
    path = tmp_path / "decoy.json.gz"
    path.write_bytes(gzip.compress(text, 1))
    finished = _stream_rules(monkeypatch)
    got = load(path, workers=2)
    assert finished == [None]
    plain = tmp_path / "decoy.json"
    plain.write_bytes(text)
    monkeypatch.undo()
    one = load(plain, workers=1)
    for name in FRAMES:
        assert getattr(one, name).equals(getattr(got, name)), name


def test_a_cut_the_worker_does_not_share_takes_the_usual_path(train_json: Path, tmp_path: Path,
                                                               monkeypatch) -> None:
    """Should this process and the worker ever cut at different separators, the events between
    would be lost or decoded twice: the load checks the worker's cut and goes the usual way."""
    path = tmp_path / "train_eager.json.gz"
    path.write_bytes(gzip.compress(train_json.read_bytes(), 1))
    finished = _stream_rules(monkeypatch)
    real = streamed.find_cut
    monkeypatch.setattr(streamed, "find_cut", lambda text, at: real(text, real(text, at) + 1))
    got = load(path, workers=2)
    assert finished == [None]
    monkeypatch.undo()
    _assert_same(load(train_json, workers=1), replace_path(got, train_json))


def replace_path(trace, path: Path):
    """``trace`` with ``path`` in its metadata (the same trace read from another file)."""
    return replace(trace, meta=replace(trace.meta, path=str(path)))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("damage", ["truncated", "trailing", "corrupt"])
def test_a_damaged_gzip_is_the_same_error_and_partial_when_streamed(
        train_json: Path, tmp_path: Path, monkeypatch, damage: str, workers: int) -> None:
    """A stream cut short (its trailer kept), junk after the last member, or a damaged block: the
    same error as without streaming, and ``--partial`` reports the same events."""
    from tracekit.load.read_options import ReadOptions

    whole = gzip.compress(train_json.read_bytes(), 1)
    path = tmp_path / f"{damage}.json.gz"
    if damage == "truncated":
        path.write_bytes(whole[:int(len(whole) * 0.9)] + whole[-8:])  # the trailer still says the size
    elif damage == "trailing":
        path.write_bytes(whole + b"junk after the stream")
    else:
        at = int(len(whole) * 0.7)
        path.write_bytes(whole[:at] + bytes(b ^ 0x5A for b in whole[at:at + 64]) + whole[at + 64:])
    finished = _stream_rules(monkeypatch)
    partial = ReadOptions(max_inflated_size=None, partial=True)
    streamed_outcomes = [_outcome(path, workers, None), _outcome(path, workers, partial)]
    assert finished == [None, None]
    monkeypatch.undo()
    usual_outcomes = [_outcome(path, 1, None), _outcome(path, 1, partial)]
    assert isinstance(streamed_outcomes[0], str) and streamed_outcomes[0] == usual_outcomes[0]
    if damage == "truncated":  # what --partial keeps: the events before the cut
        assert streamed_outcomes[1].meta.partial
    for got, expected in zip(streamed_outcomes[1:], usual_outcomes[1:]):
        if isinstance(expected, str):
            assert got == expected
        else:
            assert got.meta.partial == expected.meta.partial
            for name in FRAMES:
                assert getattr(expected, name).equals(getattr(got, name)), name


def _outcome(path: Path, workers: int, options):
    """The trace ``load`` gives, or its error's one line."""
    try:
        return load(path, workers=workers, options=options)
    except TraceError as err:
        return str(err)


def test_the_inflate_cap_stops_a_streamed_load_as_the_usual_one(train_json: Path, tmp_path: Path,
                                                                monkeypatch) -> None:
    """A trailer that understates the size (a bomb says what it likes) passes the size check; the
    cap still stops the inflating, and the error is the usual one."""
    from tracekit.load.read_options import ReadOptions

    plain = train_json.read_bytes()
    path = tmp_path / "liar.json.gz"
    path.write_bytes(gzip.compress(plain, 1)[:-4] + (2 << 20).to_bytes(4, "little"))
    finished = _stream_rules(monkeypatch)
    options = ReadOptions(max_inflated_size=4 << 20)
    with pytest.raises(TraceError, match="decompression bomb"):
        load(path, workers=2, options=options)
    assert finished == [None]


def _gz_text(tmp_path: Path, plain: bytes) -> streamed.InflatedText:
    path = tmp_path / "text.json.gz"
    path.write_bytes(gzip.compress(plain, 1))
    return streamed.InflatedText(source.gzip_pieces(path, None))


@pytest.fixture()
def big_event_text(train_json: Path) -> bytes:
    """The training capture with one event whose name (400 kB) is longer than a window."""
    plain = train_json.read_bytes()
    at = plain.index(b'"name": "', len(plain) // 4) + len(b'"name": "')
    return plain[:at] + b"x" * 400_000 + plain[at:]


def test_both_sides_of_the_cut_decode_every_event_once(big_event_text: bytes, tmp_path: Path,
                                                       monkeypatch) -> None:
    """In this process, with windows (100 kB) smaller than chunks and than one event: the worker's
    chunks run from the array's ``[`` to the cut, this process's from the cut to the ``]``; they
    meet at the same cut, and together hold every event once, in file order."""
    from tracekit.load import events

    monkeypatch.setattr(layout, "CHUNK_BYTES", 150_000)
    monkeypatch.setattr(streamed, "WINDOW_BYTES", 100_000)
    plain = big_event_text
    start = plain.index(b'"traceEvents": [') + len(b'"traceEvents": ')
    at = len(plain) // 5  # before the big event: the worker's windows grow past it
    worker = _gz_text(tmp_path, plain)
    got = [(first + worker.base, last + worker.base, layout.decode_span(window, first, last, events.EVENTS_DECODER))
           for window, first, last in streamed._spans(worker, start, at)]
    mine = _gz_text(tmp_path, plain)
    cut = streamed.find_cut(mine, at)
    closing: list = []
    head = plain[:start]
    got += [(first + mine.base, last + mine.base, layout.decode_span(window, first, last, events.EVENTS_DECODER))
            for window, first, last in streamed._to_the_end(mine, cut, b"{", head, closing)]
    worker.close()
    mine.close()
    assert cut == layout.separator_after(plain, at, len(plain)) and cut < plain.index(b"x" * 400_000)
    bounds = [(first, last) for first, last, _ in got]
    end = plain.rindex(b"]")
    assert bounds[0][0] == start and bounds[-1][1] == end and cut in [last for _, last in bounds]
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # no gap, no overlap
    decoded = [e for _, _, chunk in got for e in chunk]
    expected = events.EVENTS_DECODER.decode(plain[start:end + 1])
    assert len(decoded) == len(expected) == 32_651
    assert [(e.name, e.ts) for e in decoded] == [(e.name, e.ts) for e in expected]
    assert closing[0].traceEvents is None and closing[0] == layout.metadata_around(head, plain[end + 1:])


def test_a_worker_stops_when_its_load_is_given_up(train_json: Path, tmp_path: Path, monkeypatch) -> None:
    """The worker's pieces stop once the scratch directory (removed when the load ends or gives the
    streamed way up) is gone — it never inflates on for nobody."""
    monkeypatch.setattr(streamed, "_CHECK_EVERY", 1)
    monkeypatch.setattr(compressed, "_PIECE_STEP", 1 << 14)
    path = tmp_path / "text.json.gz"
    path.write_bytes(gzip.compress(train_json.read_bytes(), 1))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pieces = streamed._while_wanted(source.gzip_pieces(path, None), str(scratch))
    assert next(pieces) and next(pieces)
    scratch.rmdir()
    with pytest.raises(streamed._Abandoned):
        next(pieces)


def test_without_a_process_pool_a_gzip_trace_loads_the_usual_way(train_json: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    """Where no worker process can be made, the streamed way is not taken (its scratch directory
    is removed) and the trace loads as usual, in one process."""
    path = tmp_path / "train_eager.json.gz"
    path.write_bytes(gzip.compress(train_json.read_bytes(), 1))
    finished = _stream_rules(monkeypatch)
    made = []
    real_mkdtemp = streamed.tempfile.mkdtemp
    monkeypatch.setattr(streamed.tempfile, "mkdtemp", lambda **k: made.append(real_mkdtemp(**k)) or made[-1])

    def no_pool(workers: int):
        raise OSError("no semaphores here")

    monkeypatch.setattr(parallel, "spawn_pool", no_pool)
    got = load(path, workers=2)
    assert finished == [] and len(made) == 1 and not Path(made[0]).exists()
    monkeypatch.undo()
    _assert_same(load(path, workers=1), got)


def test_one_process_streams_a_big_gzip_trace_too(train_json: Path, tmp_path: Path, monkeypatch) -> None:
    """``workers=1`` (the Python API's default): no worker process, no inflated copy; this process
    decodes every event as the text inflates, to the trace the plain file gives, progress to the end."""
    path = tmp_path / "train_eager.json.gz"
    path.write_bytes(gzip.compress(train_json.read_bytes(), 1))
    finished = _stream_rules(monkeypatch)
    seen = _spy_sources(monkeypatch)

    def no_pool(workers: int):
        raise AssertionError("one process only")

    monkeypatch.setattr(parallel, "spawn_pool", no_pool)
    reported = []
    got = load(path, workers=1, progress=lambda done, total: reported.append((done, total)))
    assert finished[0] is not None and seen == []
    assert reported[-1] == (32_651, 32_651) and len(reported) > 10
    monkeypatch.undo()
    _assert_same(load(train_json, workers=1), replace_path(got, train_json))
