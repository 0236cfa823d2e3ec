"""tracekit annotate: the original trace plus tracekit's tracks — reloading it gives the same report,
the added events follow the Chrome trace event format (flows paired and bound to the kernels they
link, spans nested per thread, named tracks), their counts are the report's, hostile names stay
exact JSON strings, and the output rules (gzip by suffix, inputs refused, atomic, one-line errors)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import tracekit
from tracekit.classify.names import short_kernel_name
from tracekit.commands import main
from tracekit.load import load, source
from tracekit.render.annotated.events import micros
from tracekit.trace import is_annotation

from factory import make_annotation, make_kernel, make_launch, make_op, make_step, write_trace

#: Left out by --fast (tests/conftest.py): annotates and reloads every sample and real trace.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
REAL = Path(__file__).resolve().parents[1] / "data" / "real"

#: Shipped traces that between them have every added kind: eager and compiled steps, round trips
#: (with and without an execution trace), findings, compile spans, and traces in integer absolute µs
#: (before PyTorch 2.4's relative times: the added events must keep that form).
CASES = {
    "mlp_eager": SAMPLES / "mlp_eager.json.gz",
    "mlp_compile": SAMPLES / "mlp_compile.json.gz",
    "host_sync": SAMPLES / "antipatterns" / "antipatterns_host-sync.json.gz",
    "compile_sweep": SAMPLES / "compile_sweep" / "mlp_compile-sweep.json.gz",
    "resnet_2080ti": REAL / "facebookresearch__param__resnet-2080ti-cudnn-train.json.gz",
    "memcpy_2022": REAL / "pytorch__benchmark__a100x8-memcpy-only-2022.json.gz",
}
#: What reloading may change: the file, and the events tracekit added to it.
FILE_FACTS = ("path", "size_bytes", "event_count", "annotations")


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def _read(path: Path) -> dict:
    """The JSON of a trace, numbers with decimals read exactly (absolute µs pass float precision)."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)


def _report_json(path: Path, et: Path | None, capsys) -> dict:
    argv = ["report", str(path), "--format", "json"]
    argv += ["--execution-trace", str(et)] if et is not None else ["--no-execution-trace"]
    assert _exit(argv) == 0
    return json.loads(capsys.readouterr().out)


def _beside(trace: Path) -> Path | None:
    et = trace.with_name(trace.name.replace(".json.gz", ".et.json.gz"))
    return et if et.is_file() else None


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> dict[str, Path]:
    """Each case annotated once (by the command, its own execution trace found beside it)."""
    out = tmp_path_factory.mktemp("annotated")
    done = {}
    for name, path in CASES.items():
        target = out / f"{name}.json.gz"
        with pytest.raises(SystemExit) as exc:
            main(["annotate", str(path), "-o", str(target)])
        assert exc.value.code == 0
        done[name] = target
    return done


def _added(original: Path, output: Path) -> tuple[list[dict], list[dict]]:
    """(original events, added events) of an annotated output, checking the original part is the
    original trace unchanged: every top-level key and every event, in order."""
    before, after = _read(original), _read(output)
    events = before.pop("traceEvents")
    out_events = after.pop("traceEvents")
    assert after == before  # deviceProperties, distributedInfo, baseTimeNanoseconds … kept
    assert out_events[:len(events)] == events
    return events, out_events[len(events):]


@pytest.mark.parametrize("case", list(CASES))
def test_reloading_the_output_gives_the_same_report(case, annotated, capsys):
    path = CASES[case]
    et = _beside(path)
    original = _report_json(path, et, capsys)
    again = _report_json(annotated[case], et, capsys)
    events, added = _added(path, annotated[case])
    assert again["trace"]["annotations"] == len(added) > 0
    assert original["trace"]["annotations"] == 0
    assert again["trace"]["event_count"] == original["trace"]["event_count"] + len(added)
    for key in FILE_FACTS:
        original["trace"].pop(key), again["trace"].pop(key)
    assert again == original


def _corpus() -> list[Path]:
    folder = os.environ.get("TRACEKIT_REAL_TRACES")
    return sorted(Path(folder).glob("*.json.gz")) if folder else []


@pytest.mark.skipif(not _corpus(), reason="set TRACEKIT_REAL_TRACES to the real-trace corpus folder")
def test_every_real_trace_reloads_with_the_same_report(tmp_path, capsys):
    for path in _corpus():
        out = tmp_path / path.name
        assert _exit(["annotate", str(path), "-o", str(out), "--no-execution-trace"]) == 0, path.name
        original, again = _report_json(path, None, capsys), _report_json(out, None, capsys)
        for key in FILE_FACTS:
            original["trace"].pop(key), again["trace"].pop(key)
        assert again == original, path.name
        out.unlink()


def test_the_original_text_is_copied_byte_for_byte(annotated):
    # The output is the input's bytes with the added events spliced in before the array closes.
    raw = gzip.decompress(CASES["mlp_eager"].read_bytes())
    out = gzip.decompress(annotated["mlp_eager"].read_bytes())
    cut = raw.rindex(b"}", 0, raw.rindex(b"]")) + 1  # the last original event's closing brace
    assert out.startswith(raw[:cut])
    assert out.endswith(raw[cut:])
    assert b'"cat":"tracekit.verdict"' in out[cut:]


def _spans_nest(spans: list[tuple[int, int]]) -> bool:
    open_ends: list[int] = []
    for ts, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ends and open_ends[-1] <= ts:
            open_ends.pop()
        if open_ends and end > open_ends[-1]:
            return False
        open_ends.append(end)
    return True


def _ns(ts: int | Decimal) -> int:
    return int(ts * 1000)


@pytest.mark.parametrize("case", list(CASES))
def test_added_events_follow_the_chrome_trace_event_format(case, annotated):
    """The rules of the Trace Event Format (and of Perfetto's JSON importer) for what is added."""
    events, added = _added(CASES[case], annotated[case])
    assert all(is_annotation(e["cat"]) for e in added)
    names: dict[tuple, str] = {}
    spans: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    used_pids = {e.get("pid") for e in events}
    own_pid = next(e["pid"] for e in added if e["ph"] == "M" and e["name"] == "process_name")
    assert own_pid not in used_pids and isinstance(own_pid, int)
    for e in added:
        ph = e["ph"]
        assert ph in ("M", "X", "i", "s", "f")
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], (int, str)) and isinstance(e["tid"], (int, str))
        if ph == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            assert set(e["args"]) == ({"name"} if e["name"].endswith("_name") else {"sort_index"})
            if e["name"] == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        assert isinstance(e["ts"], (int, Decimal))
        if ph == "X":
            assert e["pid"] == own_pid and isinstance(e["dur"], (int, Decimal)) and e["dur"] >= 0
            spans[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
        elif ph == "i":
            assert e["s"] == "t" and e["pid"] == own_pid
            spans.setdefault((e["pid"], e["tid"]), [])
        else:
            assert isinstance(e["id"], int)
            if ph == "f":
                assert e["bp"] == "e"
    # Every track is named "tracekit: …", and a thread's complete events nest (viewers need it).
    assert set(spans) <= set(names)
    assert all(name.startswith("tracekit: ") for name in names.values())
    assert all(_spans_nest(s) for s in spans.values())


@pytest.mark.parametrize("case", ["mlp_eager", "host_sync", "compile_sweep"])
def test_round_trip_flows_are_paired_and_bound_to_their_kernels(case, annotated):
    events, added = _added(CASES[case], annotated[case])
    starts = {e["id"]: e for e in added if e["ph"] == "s"}
    finishes = {e["id"]: e for e in added if e["ph"] == "f"}
    assert len(starts) == sum(e["ph"] == "s" for e in added) > 0  # ids are unique
    assert starts.keys() == finishes.keys()
    kernel_ids = {e.get("id") for e in events if e.get("ph") in ("s", "f")}
    assert not kernel_ids & starts.keys()  # no clash with the trace's own flow ids
    for flow_id, s in starts.items():
        f = finishes[flow_id]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]) == ("tracekit.round_trips", s["name"])
        assert s["name"].startswith("round trip ")
        # Bound where the kernels are, as the raw trace writes them (same pid/tid type, same ts
        # text): the producer's event at its idx in traceEvents, the consumer's likewise.
        producer, consumer = events[s["args"]["producer_idx"]], events[s["args"]["consumer_idx"]]
        assert s["args"]["producer"] == short_kernel_name(producer["name"])
        assert s["args"]["consumer"] == short_kernel_name(consumer["name"])
        assert producer["cat"] == consumer["cat"] == "kernel"
        assert (s["pid"], s["tid"], s["ts"]) == (producer["pid"], producer["tid"], producer["ts"])
        assert (f["pid"], f["tid"], f["ts"]) == (consumer["pid"], consumer["tid"], consumer["ts"])
        assert f["args"]["bytes"] == s["args"]["bytes"] > 0


def test_counts_of_each_kind_are_the_reports(annotated):
    """mlp_eager, checked by hand against the raw trace JSON: 3 ProfilerStep#N spans (steps 2-4)
    -> 3 verdicts; 21 GPU activities per trace (15 kernels + 6 memsets on stream 7, one after the
    other) -> 20 idle gaps between them; the GeGLU MLP makes 4 round trips per step (up-projection
    -> gelu, gate -> mul, gelu -> mul, mul -> down-projection) -> 12 arrows; one finding
    (unfused_pointwise: gelu and mul run as two kernels); no compile work."""
    _, added = _added(CASES["mlp_eager"], annotated["mlp_eager"])
    kinds = Counter((e["cat"], e["ph"]) for e in added)
    assert kinds[("tracekit.verdict", "X")] == 3
    assert kinds[("tracekit.idle_gaps", "X")] == 20
    assert kinds[("tracekit.round_trips", "s")] == kinds[("tracekit.round_trips", "f")] == 12
    assert kinds[("tracekit.findings", "i")] == 1
    assert kinds[("tracekit.compilation", "X")] == 0
    report = tracekit.open(CASES["mlp_eager"]).report()
    assert report.launch_gaps.gaps.height == 20 and report.round_trips.tensors.height == 12
    assert len(report.findings) == 1 and report.launch_gaps.per_step.height == 3
    verdicts = {e["args"]["step"]: e["name"] for e in added if e["cat"] == "tracekit.verdict"}
    assert verdicts == dict(zip(*report.launch_gaps.per_step.select("step", "verdict").to_dict(as_series=False)
                                .values()))


def test_counts_follow_the_report_on_every_case(annotated):
    for case, path in CASES.items():
        _, added = _added(path, annotated[case])
        report = tracekit.open(path).report()
        kinds = Counter((e["cat"], e["ph"]) for e in added)
        assert kinds[("tracekit.verdict", "X")] == report.launch_gaps.per_step.height, case
        assert kinds[("tracekit.idle_gaps", "X")] == report.launch_gaps.gaps.height, case
        assert kinds[("tracekit.round_trips", "s")] == report.round_trips.tensors.height, case
        assert kinds[("tracekit.findings", "i")] == len(report.findings), case
        assert kinds[("tracekit.compilation", "X")] == report.compilation.work.height, case
    # The sweep compiles its frame three times (a first compile, two recompiles when automatic
    # dynamic shapes promote it), each followed by Inductor's autotuning: six spans, by compile id.
    _, added = _added(CASES["compile_sweep"], annotated["compile_sweep"])
    compiles = sorted(e["name"] for e in added if e["cat"] == "tracekit.compilation")
    assert compiles == ["autotune 0/0", "autotune 0/1", "autotune 0/2", "compile 0/0", "recompile 0/1",
                        "recompile 0/2"]


HOSTILE = '<script>alert("x")</script> \'q\' \\ `md` | *b*'


def test_hostile_names_survive_as_json_strings(tmp_path):
    # Two units named by a hostile span (--unit), each launching a kernel with a hostile name.
    events = []
    for n, t0 in enumerate((0.0, 100.0)):
        events += [make_annotation(HOSTILE, t0, 90.0), make_op(HOSTILE, t0 + 1.0, 20.0),
                   make_launch("cudaLaunchKernel", t0 + 2.0, 5.0, n + 1),
                   make_kernel(HOSTILE + str(n), t0 + 10.0, 10.0, n + 1)]
    path = write_trace(tmp_path / "t.json", events)
    out = tmp_path / "out.json"
    assert _exit(["annotate", str(path), "-o", str(out), "--unit", HOSTILE]) == 0
    _, added = _added(path, out)
    units = [e["args"]["unit"] for e in added if e["cat"] == "tracekit.verdict"]
    assert len(units) == 2 and all(u.startswith(HOSTILE) for u in units)
    gaps = [e for e in added if e["cat"] == "tracekit.idle_gaps"]
    assert [g["args"]["next_kernel"] for g in gaps] == [short_kernel_name(HOSTILE + "1")]
    assert load(out).meta.annotations == len(added)


@pytest.mark.parametrize("kind", ["empty", "cpu_only", "no_steps"])
def test_small_traces_annotate_and_reload(kind, tmp_path, capsys):
    events = {
        "empty": [],
        "cpu_only": [make_op("aten::add", 1.0, 2.0), make_op("aten::mul", 4.0, 2.0)],
        "no_steps": [make_op("aten::mm", 1.0, 20.0), make_launch("cudaLaunchKernel", 2.0, 5.0, 1),
                     make_kernel("k", 10.0, 10.0, 1), make_launch("cudaLaunchKernel", 30.0, 5.0, 2),
                     make_kernel("k", 40.0, 10.0, 2)],
    }[kind]
    path = write_trace(tmp_path / "t.json", events, gpu=kind != "cpu_only")
    out = tmp_path / "out.json"
    assert _exit(["annotate", str(path), "-o", str(out)]) == 0
    _, added = _added(path, out)
    assert {e["name"] for e in added if e["ph"] == "M"} >= {"process_name", "process_sort_index"}
    original, again = _report_json(path, None, capsys), _report_json(out, None, capsys)
    for key in FILE_FACTS:
        original["trace"].pop(key), again["trace"].pop(key)
    assert again == original


def test_annotation_events_are_set_aside_by_the_loader(tmp_path):
    events = [make_step(1, 0.0, 100.0), make_launch("cudaLaunchKernel", 2.0, 5.0, 1),
              make_kernel("k", 10.0, 10.0, 1)]
    ours = [
        {"ph": "X", "cat": "tracekit.verdict", "name": "ProfilerStep#9", "pid": 100, "tid": 100, "ts": 0.5,
         "dur": 1.0},
        {"ph": "s", "cat": "tracekit.round_trips", "name": "r", "id": 1, "pid": 0, "tid": 7, "ts": 10.0},
        {"ph": "f", "cat": "tracekit.round_trips", "name": "r", "id": 1, "bp": "e", "pid": 0, "tid": 7, "ts": 10.0},
        {"ph": "M", "cat": "tracekit", "name": "thread_name", "pid": 9, "tid": 1, "args": {"name": "x"}},
        {"ph": "i", "s": "t", "cat": "tracekit.findings", "name": "[memory]", "pid": 9, "tid": 1, "ts": 3.0},
    ]
    plain = load(write_trace(tmp_path / "a.json", events))
    marked = load(write_trace(tmp_path / "b.json", events + ours))
    assert plain.meta.annotations == 0 and marked.meta.annotations == len(ours)
    for frame in ("ops", "launches", "gpu", "flows", "memory", "threads", "steps"):
        assert getattr(marked, frame).equals(getattr(plain, frame)), frame
    # A category that only starts with the word is not ours.
    other = load(write_trace(tmp_path / "c.json", events + [dict(ours[0], cat="tracekitten")]))
    assert other.meta.annotations == 0


def test_gzip_follows_the_output_suffix(tmp_path):
    path = CASES["mlp_eager"]
    assert _exit(["annotate", str(path), "-o", str(tmp_path / "a.json")]) == 0
    assert _exit(["annotate", str(path), "-o", str(tmp_path / "a.JSON.GZ")]) == 0
    plain, packed = (tmp_path / "a.json").read_bytes(), (tmp_path / "a.JSON.GZ").read_bytes()
    assert plain.lstrip()[:1] == b"{" and packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == plain


@pytest.mark.parametrize("argv, message", [
    (["-o", "{tmp}/a.md"], "written as .json or .json.gz"),
    (["-o", "{trace}"], "refusing to overwrite an input"),
    (["-o", "{tmp}/missing/a.json"], "does not exist"),
])
def test_bad_outputs_are_one_line_usage_errors(tmp_path, argv, message, capsys):
    trace = tmp_path / "t.json.gz"
    shutil.copy(CASES["mlp_eager"], trace)
    before = trace.read_bytes()
    argv = [a.format(tmp=tmp_path, trace=trace) for a in argv]
    assert _exit(["annotate", str(trace), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert trace.read_bytes() == before


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"not json", "not JSON"),
    (b'{"traceEvents": 3}', "not a trace"),
])
def test_bad_inputs_are_one_line_usage_errors(tmp_path, content, message, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert _exit(["annotate", str(bad), "-o", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.json").exists()


def test_a_parquet_input_is_refused(tmp_path, capsys):
    parquet = tmp_path / "t.parquet"
    assert _exit(["convert", str(SAMPLES / "linear_eager.json.gz"), "-o", str(parquet)]) == 0
    capsys.readouterr()
    assert _exit(["annotate", str(parquet), "-o", str(tmp_path / "out.json")]) == 2
    assert "Parquet" in capsys.readouterr().err


def test_a_failed_write_leaves_the_existing_output_untouched(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out.json"
    out.write_text("keep me")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(source, "_copy", broken)  # the copy-through of the trace's text fails half-way
    assert _exit(["annotate", str(SAMPLES / "linear_eager.json.gz"), "-o", str(out)]) != 0
    assert out.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left behind


def test_micros_writes_exact_three_decimal_microseconds():
    assert bytes(micros(5427043549027728)) == b"5427043549027.728"
    assert bytes(micros(1_000)) == b"1.000"
    assert bytes(micros(-1_500)) == b"-1.500"
    assert bytes(micros(1_000, whole=True)) == b"1"
    assert bytes(micros(1_500, whole=True)) == b"1.500"


def test_round_trip_kernels_stay_row_for_row_with_tensors_in_one_step():
    # The flows pair tensors with tensor_kernels by row; --step must cut both alike.
    trips = tracekit.open(CASES["mlp_eager"]).report(step=3).round_trips
    assert trips.tensors["step"].to_list() == trips.tensor_kernels["step"].to_list() == [3] * 4
