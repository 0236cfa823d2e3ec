"""Hostile inputs for every command: a fixed corpus, event mutations, and a bounded runner.

Used by ``tests/commands/test_hostile_inputs.py`` (the corpus and hypothesis mutations) and ``bench/fuzz.py``
(longer, coverage-guided runs). Three parts:

- :func:`corpus`: named :class:`Case` s along the axes of hostile input — numbers, structure,
  compression, non-regular inputs, execution traces, Parquet files, expectations files, rank
  directories — each a set of files and the trace to run on, built from real sample traces.
- :func:`mutate`: a list of :data:`Mutation` s (set or delete an event field, drop, repeat or
  insert an entry, change a metadata field) applied to a decoded trace; :func:`random_mutations`
  draws them without hypothesis (the fuzzer's fallback).
- :func:`run_matrix`: every command (report, convert then report of the Parquet, diff, check,
  compare, annotate then report of the annotated trace, merge then report of the merged trace) in
  every format (term, md, json), in this process; :func:`check_outcomes` states what each may
  end in: exit 0 with output, exit 2 with one line on stderr (1 for a broken expectation), never a
  traceback or an internal error, and never a change to a file the case wrote (the user's). ``python tests/hostile.py serve`` runs matrices for a parent
  that sends cases as JSON lines, under an address-space limit (the tests' bounded child).
- :func:`write_failures`: every writer against an output that cannot be written (a full or closed
  stdout, ``/dev/full``, a file-size limit, a full file system, a read-only directory); :func:`run_write_case` runs one in
  its own process and :func:`check_write_outcome` states what it must end in.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import io
import json
import os
import random
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
REAL = Path(__file__).resolve().parent / "data" / "real"
#: The real traces mutated: an H200 capture of this project and a public 2022 A100 trace.
SEEDS = {
    "mlp_eager": SAMPLES / "mlp_eager.json.gz",
    "a100_2022": REAL / "pytorch__benchmark__a100x8-memcpy-only-2022.json.gz",
}
#: Expectations used by ``check`` (a few keys of every kind).
EXPECT = b'''description = "hostile-input run"
[per_step]
kernels_min = 0
classes_absent = ["no_such_class"]
cpu_ops_absent = ["no::such_op"]
'''
FORMATS = ("term", "md", "json")


def seed(name: str = "mlp_eager") -> dict[str, Any]:
    return json.loads(gzip.decompress(SEEDS[name].read_bytes()))


def seed_bytes(name: str = "mlp_eager") -> bytes:
    return gzip.decompress(SEEDS[name].read_bytes())


# --- mutations ----------------------------------------------------------------------------------

#: Values that have broken or could break a loader: overflowing and special numbers, wrong types,
#: markup and control characters, deep-ish structures, absurd shapes.
VALUES: list[Any] = [
    2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**70, 10**30, 1e300, -1e300, 1e-300,
    float("nan"), float("inf"), float("-inf"), -1, -1.5, 0, 0.5, 12.345678, "", "abc", "12", "1e400",
    "\x1b[31mred\x1b[0m", "[/]", "[bold]x[/bold]", "a" * 5000, "\u202e\x00", None, True, False, [],
    [1, [2, [3]]], {}, {"a": {"b": 1}}, [[2**62, 2**62]], [["a", 1.5, None]], [[]] * 50,
]
#: Event fields mutated (``args.X``: a field inside ``args``).
FIELDS = ("ts", "dur", "ph", "cat", "name", "pid", "tid", "id", "args", "args.External id",
          "args.correlation", "args.Input Dims", "args.Input type", "args.grid", "args.block",
          "args.stream", "args.device", "args.bytes", "args.Record function id", "args.name",
          "args.Bytes", "args.Addr")
#: Top-level metadata fields mutated.
TOP_FIELDS = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "roctracer_version",
              "schemaVersion", "traceName", "cuda_runtime_version")
#: A mutation: (kind, event index, field, value); kinds ``set``, ``delete``, ``drop``, ``repeat``,
#: ``insert`` (a non-event entry), ``top`` (a metadata field; index unused).
Mutation = tuple[str, int, str, Any]


def mutate(doc: dict[str, Any], mutations: list[Mutation]) -> dict[str, Any]:
    """``doc`` (a decoded trace, changed in place) with ``mutations`` applied; indices wrap."""
    events = doc["traceEvents"]
    for kind, index, name, value in mutations:
        if kind == "top":
            doc[name] = value
            continue
        if not events:
            events.append(value)
            continue
        i = index % len(events)
        event = events[i]
        if kind == "drop":
            del events[i]
        elif kind == "repeat":
            events.insert(i, json.loads(json.dumps(event)))
        elif kind == "insert":
            events.insert(i, value)
        elif isinstance(event, dict):
            target, key = event, name
            if name.startswith("args."):
                args = event.get("args")
                if not isinstance(args, dict):
                    args = event["args"] = {}
                target, key = args, name[5:]
            if kind == "set":
                target[key] = value
            else:
                target.pop(key, None)
    return doc


def random_mutations(rng: random.Random, count: int) -> list[Mutation]:
    """``count`` mutations drawn with ``rng`` (for the fuzzer without hypothesis)."""
    out: list[Mutation] = []
    for _ in range(count):
        kind = rng.choice(("set", "set", "set", "delete", "drop", "repeat", "insert", "top"))
        value = rng.choice(VALUES) if rng.random() < 0.8 else rng.randint(-(2**70), 2**70)
        name = rng.choice(TOP_FIELDS if kind == "top" else FIELDS)
        out.append((kind, rng.randrange(10_000), name, value))
    return out


def dumps(doc: Any) -> bytes:
    """JSON as Python writes it: NaN and Infinity as literals (not JSON, but seen in re-saved traces)."""
    return json.dumps(doc, allow_nan=True).encode()


# --- the fixed corpus -------------------------------------------------------------------------------


@dataclass
class Case:
    """Files to write (relative path -> bytes, or a FIFO/device marker) and what to run.

    ``trace``: the TRACE argument (a path relative to the case's directory, or absolute);
    ``commands``: which commands apply; ``args``: extra arguments for every command;
    ``expect``: exit statuses allowed per command, beyond the defaults of :func:`check_outcomes`
    (for cases whose outcome is known: e.g. ``{"report": {2}}``); ``merge_output``: ``merge``'s
    ``-o`` (relative to the case's directory).
    """

    name: str
    files: dict[str, bytes | str] = field(default_factory=dict)
    trace: str = "t.json"
    commands: tuple[str, ...] = ("report", "convert", "diff", "check", "annotate")
    args: tuple[str, ...] = ()
    expect: dict[str, set[int]] = field(default_factory=dict)
    expect_file: str = "e.toml"
    formats: tuple[str, ...] = FORMATS
    merge_output: str = "merged.json.gz"


def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


def corpus() -> list[Case]:
    """The fixed hostile-input corpus (see the module docstring)."""
    base = seed()
    raw = seed_bytes()
    gz = gzip.compress(raw)
    cases: list[Case] = []

    def add(name: str, data: bytes, **kw: Any) -> None:
        files = {"t.json": data, **kw.pop("files", {})}
        cases.append(Case(name, files, **kw))

    def with_event(field_path: str, text: str, index: int = 5) -> bytes:
        doc = seed()
        mutate(doc, [("set", index, field_path, "@@MARK@@")])
        return json.dumps(doc).replace('"@@MARK@@"', text).encode()

    ok_or_bad = {"report": {0, 2}}
    # Numbers: each event kept or dropped and counted, never a crash.
    for label, text in (("ts_2^63", str(2**63)), ("ts_2^64", str(2**64)), ("ts_1e300", "1e300"),
                        ("ts_NaN", "NaN"), ("ts_Infinity", "Infinity"), ("ts_-Infinity", "-Infinity"),
                        ("ts_string", '"12x"'), ("ts_2^70", str(2**70))):
        add(f"numbers/{label}", with_event("ts", text), expect={"report": {0}})
    for label, text in (("dur_negative", "-5.5"), ("dur_1e300", "1e300"), ("dur_NaN", "NaN"),
                        ("dur_2^63", str(2**63)), ("dur_float_int", "7.0")):
        add(f"numbers/{label}", with_event("dur", text), expect={"report": {0}})
    for label, key in (("correlation_2^64", "args.correlation"), ("external_id_float", "args.External id"),
                       ("pid_float", "pid"), ("stream_2^70", "args.stream"), ("bytes_1e300", "args.bytes")):
        value = {"correlation_2^64": str(2**64), "external_id_float": "3.5", "pid_float": "1.5",
                 "stream_2^70": str(2**70), "bytes_1e300": "1e300"}[label]
        add(f"numbers/{label}", with_event(key, value), expect={"report": {0}})
    # Structure: deep nesting anywhere, odd shapes of the whole.
    for depth in (1000, 10_000, 100_000):
        for where, key in (("args", "args.foo"), ("input_dims", "args.Input Dims"), ("grid", "args.grid"),
                           ("event_field", "name")):
            add(f"nesting/{where}_{depth}", with_event(key, _nest(depth)), expect=ok_or_bad)
        add(f"nesting/top_{depth}", _nest(depth).encode(), expect={"report": {2}})
    add("nesting/args_object_1000", with_event("args.foo", '{"a":' * 1000 + "1" + "}" * 1000), expect=ok_or_bad)
    doc = seed()
    doc["traceEvents"].insert(3, 5)
    doc["traceEvents"].insert(4, "text")
    doc["traceEvents"].insert(5, {"name": "no ph"})
    add("structure/non_object_events", dumps(doc), expect={"report": {0}})
    add("structure/duplicate_keys", raw.replace(b'"ph": "X",', b'"ph": "i", "ph": "X",', 20)
        .replace(b'"traceEvents"', b'"traceEvents": [], "traceEvents"', 1), expect={"report": {0}})
    add("structure/traceEvents_object", dumps({**base, "traceEvents": {"a": 1}}), expect={"report": {2}})
    add("structure/no_traceEvents", dumps({k: v for k, v in base.items() if k != "traceEvents"}),
        expect={"report": {2}})
    add("structure/empty_list", dumps({**base, "traceEvents": []}), expect={"report": {0}})
    add("structure/chrome_array", dumps(base["traceEvents"]), expect={"report": {0}})
    add("structure/trailing_junk", raw + b"\n}garbage", expect={"report": {2}})
    add("structure/odd_metadata", dumps({**base, "roctracer_version": 4.1, "schemaVersion": 1.5,
                                        "deviceProperties": {"a": 1}, "distributedInfo": [1],
                                        "baseTimeNanoseconds": "soon", "traceName": {"x": 1}}),
        expect={"report": {0}})
    add("structure/rank_2^70", dumps({**base, "distributedInfo": {"rank": 2**70, "world_size": -1}}),
        expect={"report": {0}})
    add("structure/execution_trace_as_trace",
        gzip.decompress((SAMPLES / "mlp_eager.et.json.gz").read_bytes()), expect={"report": {2}})
    add("structure/input_dims_absurd", with_event("args.Input Dims", json.dumps([[2**62, 2**62], ["a", 1.5, None],
                                                                              [True], [-1]])),
        expect={"report": {0}})
    add("structure/long_names", with_event("name", json.dumps("k" * 280_000)), expect={"report": {0}})
    add("structure/many_long_kernel_names", _long_kernel_names(base, 2000, 2048), commands=("report", "diff"),
        formats=("json",), expect={"report": {0}})
    # Compression.
    add("compression/truncated_gzip", gz[: len(gz) // 2], expect={"report": {2}})
    add("compression/truncated_gzip_partial", gz[: len(gz) * 2 // 3], args=("--partial",), expect={"report": {0}})
    if importlib.util.find_spec("hta") is not None:  # HolisticTraceAnalysis reads what loaded
        add("compression/truncated_gzip_partial_hta", gz[: len(gz) * 2 // 3], args=("--partial", "--hta"),
            commands=("report",), formats=("json",), expect={"report": {0}})
        add("compression/truncated_json_partial_hta", raw[: len(raw) * 2 // 3], args=("--partial", "--hta"),
            commands=("report",), formats=("json",), expect={"report": {0}})
    add("compression/corrupt_gzip", gz[:200] + bytes(64) + gz[264:], expect={"report": {2}})
    add("compression/multi_member", gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]), expect={"report": {0}})
    zeros = gzip.compress(bytes(1 << 20), 9)
    add("compression/gzip_bomb_capped", zeros * 80, args=("--max-inflated-size", "32M"),
        expect={"report": {2}})
    add("compression/gzip_bomb_default_cap", zeros * 3000, commands=("report",), formats=("json",),
        expect={"report": {2}})
    import bz2
    import lzma

    add("compression/bz2", bz2.compress(raw), expect={"report": {0}})
    add("compression/xz", lzma.compress(raw), expect={"report": {0}})
    add("compression/zstd", b"\x28\xb5\x2f\xfd" + bytes(32), expect={"report": {2}})
    add("compression/zip", b"PK\x03\x04" + bytes(64), expect={"report": {2}})
    add("compression/trailing_gzip_junk", gz + b"junk", expect={"report": {2}})
    # Not regular files.
    cases.append(Case("inputs/fifo_trace", {"fifo": "FIFO"}, trace="fifo", expect={"report": {2}}))
    cases.append(Case("inputs/dev_zero_trace", {}, trace="/dev/zero", expect={"report": {2}}))
    cases.append(Case("inputs/dev_zero_expectations", {"t.json": raw}, commands=("check",),
                      expect_file="/dev/zero", expect={"check": {2}}))
    cases.append(Case("inputs/fifo_expectations", {"t.json": raw, "fifo": "FIFO"}, commands=("check",),
                      expect_file="fifo", expect={"check": {2}}))
    cases.append(Case("inputs/dev_zero_execution_trace", {"t.json": raw}, commands=("report",),
                      args=("--execution-trace", "/dev/zero"), expect={"report": {2}}))
    cases.append(Case("inputs/path_too_long", {}, trace="x" * 5000, expect={"report": {2}}))
    cases.append(Case("inputs/directory_of_nothing", {"d/readme.txt": b"hi"}, trace="d", commands=("report",),
                      expect={"report": {2}}))
    # A trace named near the file system's limit (255 bytes): the execution trace probed beside it
    # has a name too long to exist, which is "no execution trace", never an error.
    long_name = "t" * (255 - len(".json")) + ".json"
    cases.append(Case("inputs/name_at_the_limit", {long_name: raw}, trace=long_name,
                      commands=("report", "convert", "diff", "check", "annotate", "compare"), expect={"report": {0}}))
    # A directory where a file is expected: one line naming what was expected, never click's usage text.
    for label, case_kw in (
            ("trace", {"trace": "d", "commands": ("annotate", "compare")}),
            ("execution_trace", {"commands": ("report", "annotate"), "args": ("--execution-trace", "d")}),
            ("expectations", {"commands": ("check",), "expect_file": "d"})):
        cases.append(Case(f"inputs/directory_as_{label}", {"t.json": raw, "d/x.json": raw},
                          expect={c: {2} for c in ("report", "annotate", "compare", "check")}, **case_kw))
    # Execution traces beside the trace (found by the "auto" rule), malformed.
    et = json.loads(gzip.decompress((SAMPLES / "mlp_eager.et.json.gz").read_bytes()))
    for label, change in (
            ("ids_strings_null", lambda n, i: n.update(id=[str(n["id"]), None][i % 2])),
            ("inputs_list", lambda n, i: n.update(inputs=n.get("inputs", {}).get("values", []))),
            ("attrs_not_list", lambda n, i: n.update(attrs={"rf_id": 5})),
            ("values_huge", lambda n, i: n.update(inputs={"values": [[2**70, 2**64, -1, 2**62, 2**62, "cuda:0"]],
                                                         "shapes": [[2**62, 2**62]], "types": ["Tensor(float)"]})),
            ("parents_cycle", lambda n, i: n.update(ctrl_deps=n["id"] + 1))):
        mutated = json.loads(json.dumps(et))
        for i, node in enumerate(mutated["nodes"]):
            change(node, i)
        cases.append(Case(f"execution_trace/{label}", {"t.json": raw, "t.et.json": dumps(mutated)},
                          expect={"report": {0}}))
    et_gz = gzip.compress(dumps(et))
    cases.append(Case("execution_trace/corrupt_gzip", {"t.json": raw, "t.et.json": et_gz[: len(et_gz) // 2]},
                      expect={"report": {2}}))
    cases.append(Case("execution_trace/nesting_10000",
                      {"t.json": raw, "t.et.json": b'{"schema": "1.1.0", "nodes": [' + _nest(10_000).encode() + b"]}"},
                      expect={"report": {2}}))
    v101 = {"schema": "1.0.1", "pid": 1, "nodes": [
        {"name": "aten::mm", "id": 2, "rf_id": 5, "parent": 1, "fw_parent": 0, "seq_id": -1, "scope": 0,
         "tid": 1, "fw_tid": 0, "op_schema": "", "inputs": [[3, 4, 0, 16, 4, "cuda:0"]],
         "input_shapes": [[4, 4]], "input_types": ["Tensor(float)"], "outputs": [], "output_shapes": [],
         "output_types": []}]}
    cases.append(Case("execution_trace/schema_1.0.1", {"t.json": raw, "t.et.json": dumps(v101)},
                      expect={"report": {0}}))
    # Parquet files with the right magic.
    cases.append(Case("parquet/magic_only", {"p.parquet": b"PAR1" + bytes(100) + b"PAR1"}, trace="p.parquet",
                      expect={"report": {2}}))
    # Expectations files.
    cases.append(Case("expectations/nested_10000", {"t.json": raw, "x.toml": b"a = " + _nest(10_000).encode()},
                      commands=("check",), expect_file="x.toml", expect={"check": {2}}))
    cases.append(Case("expectations/million_entries",
                      {"t.json": raw, "x.toml": b"[per_step]\nkernels_present = [" + b'"a",' * 1_000_000 + b"]"},
                      commands=("check",), expect_file="x.toml", expect={"check": {2}}))
    cases.append(Case("expectations/markup_description",
                      {"t.json": raw, "x.toml": b'description = "[bold red]x[/] [/] \\u001b[2J <b>y</b> [z](http://e)"\n'
                                                b"[per_step]\nkernels_min = 0\n"},
                      commands=("check",), expect_file="x.toml", expect={"check": {0}}))
    # Rank directories mixing bad files.
    # Rank directories mixing bad files: the one file that reads names its rank (a set of ranks);
    # the others cannot say which rank they are, and are reported with their errors.
    cases.append(Case("ranks/mixed", {
        "r/rank0.json": dumps({**base, "distributedInfo": {"rank": 0, "world_size": 6}}),
        "r/rank1.json": gz[:100], "r/rank2.json": b"not json",
        "r/rank3.json": dumps({**base, "distributedInfo": {"rank": 2**70}}),
        "r/rank4.json": _nest(100_000).encode(), "r/rank5.json": dumps({**base, "traceEvents": 5})},
        trace="r", commands=("report", "merge"), expect={"report": {0}, "merge": {2}}))
    # A directory of rank files none of which reads: refused in one line naming the files' errors.
    cases.append(Case("ranks/all_broken", {
        "r/rank0.json": b"not json", "r/rank1.json": gz[:100],
        "r/rank2.json": dumps({**base, "traceEvents": 5}),
        "r/rank3.json": dumps({**base, "distributedInfo": {"rank": 2**70}})},
        trace="r", commands=("report", "merge"), expect={"report": {2}, "merge": {2}}))
    # Directories that are not a set of ranks: refused in one line.
    cases.append(Case("ranks/no_rank", {"r/a.json": raw, "r/b.json": raw}, trace="r", commands=("report", "merge"),
                      expect={"report": {2}, "merge": {2}}))
    cases.append(Case("ranks/duplicate", {
        "r/a.json": dumps({**base, "distributedInfo": {"rank": 1, "world_size": 2}}),
        "r/b.json": dumps({**base, "distributedInfo": {"rank": 1, "world_size": 2}})},
        trace="r", commands=("report", "merge"), expect={"report": {2}, "merge": {2}}))
    cases += _merge_cases(base, raw)
    return cases


def _merge_cases(base: dict[str, Any], raw: bytes) -> list[Case]:
    """``merge`` on what a user may point it at: its output onto one of the ranks, a directory
    holding more than ranks, a rank it cannot copy, a file or a wrong ``-o``. Each is refused in
    one line (exit 2) or merged (exit 0: the other files are not traces of the set), and
    :func:`check_outcomes` checks that no file of the case changed."""
    def rank(r: int, world: int = 2, doc: dict[str, Any] | None = None) -> bytes:
        return dumps({**(doc or base), "distributedInfo": {"backend": "nccl", "rank": r, "world_size": world}})

    pair = {"r/rank0.json": rank(0), "r/rank1.json": rank(1)}
    merge_only = {"commands": ("merge",)}
    big_id = json.loads(json.dumps(base))
    launch = next(e for e in big_id["traceEvents"] if isinstance(e.get("args"), dict) and "correlation" in e["args"])
    launch["args"]["correlation"] = 10**10  # merge keeps ids below 10^10 (tracekit.merge.ID_STRIDE)
    return [
        Case("ranks/merge_output_is_a_rank", pair, trace="r", merge_output="r/rank0.json", expect={"merge": {2}},
             **merge_only),
        # Files that are not ranks of the set beside it: passed over, by merge and by report alike.
        Case("ranks/merge_beside_other_files", {**pair, "r/readme.txt": b"notes", "r/manifest.json": b"{}",
                                                 "r/.hidden.json": b"not json", "r/rank0.et.json": b"not json",
                                                 "r/sub/rank2.json": rank(0)},
             trace="r", commands=("report", "merge"), expect={"report": {0}, "merge": {0}, "report-merged": {0}}),
        Case("ranks/merge_a_trace_without_rank", {**pair, "r/other.json": raw}, trace="r", expect={"merge": {2}},
             **merge_only),
        Case("ranks/merge_a_parquet_rank", {"r/rank0.json": rank(0), "r/rank1.parquet": b"PAR1" + bytes(100) + b"PAR1"},
             trace="r", expect={"merge": {2}}, **merge_only),
        Case("ranks/merge_an_id_too_large", {"r/rank0.json": rank(0), "r/rank1.json": rank(1, doc=big_id)},
             trace="r", expect={"merge": {2}}, **merge_only),
        Case("ranks/merge_a_file", {"t.json": rank(0)}, trace="t.json", expect={"merge": {2}}, **merge_only),
        Case("ranks/merge_output_not_a_trace_name", pair, trace="r", merge_output="merged.txt",
             expect={"merge": {2}}, **merge_only),
        Case("ranks/merge_output_in_a_missing_directory", pair, trace="r", merge_output="nowhere/m.json.gz",
             expect={"merge": {2}}, **merge_only),
        Case("ranks/merge_output_is_a_directory", {**pair, "out.json.gz/x.txt": b"kept"}, trace="r",
             merge_output="out.json.gz", expect={"merge": {2}}, **merge_only),
    ]


def _long_kernel_names(base: dict[str, Any], count: int, length: int) -> bytes:
    """``base`` with its kernels replaced by ``count`` kernels of distinct names ``length`` characters
    long (generated code names a kernel per shape): every name read by every rule of the table."""
    rng = random.Random(count)
    kernels = [e for e in base["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    events = [e for e in base["traceEvents"] if not (isinstance(e, dict) and e.get("cat") == "kernel")]
    alphabet = "abcdefghijklmnopqrstuvwxyz_0123456789"
    for i in range(count):
        event = json.loads(json.dumps(kernels[i % len(kernels)]))
        body = "".join(rng.choice(alphabet) for _ in range(length))
        event["name"] = f"void at::native::elementwise_kernel_{i}<{body}>(int, float*)"
        events.append(event)
    return dumps({**base, "traceEvents": events})


# --- running ----------------------------------------------------------------------------------------


def matrix(case: Case, workdir: Path, *, quick: bool = False) -> list[tuple[str, list[str]]]:
    """(command, argv) pairs for ``case`` run in ``workdir``: every command in every format (with
    ``quick``: JSON only, and the report in Markdown too)."""
    trace = case.trace
    formats = ("md", "json") if quick else case.formats
    runs: list[tuple[str, list[str]]] = []
    for command in case.commands:
        if command == "report":
            runs += [("report", ["report", trace, "--format", f, *case.args]) for f in formats]
            if not quick:  # the page too (under the memory cap its charts are a note, never a crash)
                runs.append(("report", ["report", trace, "--format", "html", *case.args]))
        elif command == "convert":
            out = str(workdir / "out.parquet")
            runs.append(("convert", ["convert", trace, "-o", out, *case.args]))
            runs.append(("report-parquet", ["report", out, "--format", "json"]))
        elif command == "diff":  # the case as A and as B, against a clean trace
            clean = str(SEEDS["mlp_eager"])
            runs.append(("diff", ["diff", trace, clean, "--format", "json", *case.args]))
            if not quick:
                runs.append(("diff", ["diff", clean, trace, "--format", "md", *case.args]))
                runs.append(("diff", ["diff", trace, clean, "--format", "term", *case.args]))
        elif command == "check":
            runs += [("check", ["check", trace, "--expect", case.expect_file, "--format", f, *case.args])
                     for f in formats]
        elif command == "compare":  # the case against a clean trace, and as the baseline
            clean = str(SEEDS["mlp_eager"])
            runs.append(("compare", ["compare", trace, clean, "--format", "json", *case.args]))
            if not quick:
                runs.append(("compare", ["compare", clean, trace, "--baseline", trace, "--format", "md",
                                         *case.args]))
        elif command == "annotate":  # and the annotated trace read back
            out = str(workdir / "annotated.json.gz")
            # annotate takes no --partial (a trace cut short cannot be copied whole): without it,
            # such a case must be refused in one line like any bad input.
            args = [a for a in case.args if a != "--partial"]
            runs.append(("annotate", ["annotate", trace, "-o", out, *args]))
            runs.append(("report-annotated", ["report", out, "--format", "json"]))
        elif command == "merge":  # and the merged trace read back
            # merge takes only --max-inflated-size of the reading options (no --partial).
            args = [a for i, a in enumerate(case.args) if a == "--max-inflated-size"
                    or (i and case.args[i - 1] == "--max-inflated-size")]
            runs.append(("merge", ["merge", trace, "-o", case.merge_output, *args]))
            runs.append(("report-merged", ["report", case.merge_output, "--format", "json"]))
    return runs


def run_one(argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``tracekit ARGV`` run in this process."""
    from tracekit import commands

    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            commands.main(argv)
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


def write_case(case: Case, workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "e.toml").write_bytes(EXPECT)
    for rel, data in case.files.items():
        path = workdir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data == "FIFO":
            os.mkfifo(path)
        else:
            path.write_bytes(data)  # type: ignore[arg-type]


def _inputs(case: Case, workdir: Path) -> dict[str, bytes]:
    """The bytes of every regular file the case wrote (the user's files, which no run may change)."""
    found = {}
    for rel in [*case.files, "e.toml"]:
        path = workdir / rel
        if path.is_file() and not path.is_symlink():
            found[rel] = path.read_bytes()
    return found


#: The runs that read back what the run before them wrote.
READS_BACK = {"report-parquet": "convert", "report-merged": "merge"}


def run_matrix(case: Case, workdir: Path, *, quick: bool = False) -> list[dict[str, Any]]:
    """Every run of :func:`matrix` in ``workdir``: ``{command, argv, code, stdout_len, json_ok,
    stderr, inputs_changed}`` each (``inputs_changed``: the case's files the run changed)."""
    results = []
    here = os.getcwd()
    os.chdir(workdir)
    try:
        failed: set[str] = set()
        for command, argv in matrix(case, workdir, quick=quick):
            if READS_BACK.get(command) in failed:
                continue  # nothing was written to read back
            before = _inputs(case, workdir)
            code, out, err = run_one(argv)
            after = _inputs(case, workdir)
            if code != 0:
                failed.add(command)
            json_ok = None
            fmt = argv[argv.index("--format") + 1] if "--format" in argv else None
            if code in (0, 1) and fmt == "json":
                try:
                    json.loads(out)
                    json_ok = True
                except ValueError:
                    json_ok = False
            results.append({"command": command, "argv": argv[:1] + [a[:60] for a in argv[1:]], "code": code,
                            "stdout_len": len(out), "json_ok": json_ok, "stderr": err[-4000:],
                            "inputs_changed": sorted(k for k in set(before) | set(after)
                                                     if before.get(k) != after.get(k))})
    finally:
        os.chdir(here)
    return results


#: What each command may end in, whatever its input.
ALLOWED = {"report": {0, 2}, "convert": {0, 2}, "report-parquet": {0, 2}, "diff": {0, 2}, "check": {0, 1, 2},
           "compare": {0, 2}, "annotate": {0, 2}, "report-annotated": {0, 2}, "merge": {0, 2},
           "report-merged": {0, 2}}


def check_outcomes(case: Case, results: list[dict[str, Any]]) -> list[str]:
    """Problems with ``results`` (empty: all outcomes are defined ones)."""
    problems = []
    for r in results:
        where = f"{case.name}: {' '.join(r['argv'])}"
        code, err = r["code"], r["stderr"]
        allowed = ALLOWED[r["command"]] & case.expect.get(r["command"], ALLOWED[r["command"]])
        lines = [line for line in err.splitlines() if line.strip()]
        if r.get("inputs_changed"):
            problems.append(f"{where}: changed the user's {', '.join(r['inputs_changed'])}")
        elif "Traceback" in err or code == 3:
            problems.append(f"{where}: exit {code}, traceback or internal error: {err[-600:]}")
        elif code not in allowed:
            problems.append(f"{where}: exit {code}, expected one of {sorted(allowed)}: {err[-300:]}")
        elif code in (1, 2) and not (len(lines) == 1 and lines[0].startswith("tracekit: error: ")):
            problems.append(f"{where}: exit {code} without exactly one error line: {lines[:3]}")
        elif code == 0 and r["command"] in ("report", "diff", "check", "compare") and not r["stdout_len"]:
            problems.append(f"{where}: exit 0 with no output")
        elif code in (0, 1) and r["json_ok"] is False:
            problems.append(f"{where}: --format json wrote something that is not JSON")
    return problems


# --- failing writes ----------------------------------------------------------------------------------
#
# A write the machine refuses is the user's environment, not a bug: one line on stderr, exit 2, the
# output that was there before unchanged and no temp file left beside it. Each case runs as the user
# runs it, in its own process (``python -m tracekit``), since what fails is the process's own output.

#: Where a write fails. ``stdout_full``: stdout is ``/dev/full``; ``stdout_closed``: started with
#: stdout closed (``>&-``); ``dev_full``: ``-o /dev/full``; ``file_size``: ``-o FILE`` under a
#: file-size limit (``ulimit -f``, ``RLIMIT_FSIZE`` set in the child); ``full_disk``: ``-o FILE`` on a
#: file system with no free block (a small tmpfs in a user namespace, ``unshare -rm``: no root needed;
#: skipped where the system allows no such namespace); ``read_only``: ``-o FILE`` in a directory that
#: cannot be written (the same tmpfs remounted read-only once the earlier output is in it: a mode
#: bit would not stop root).
STDOUT_SINKS = ("stdout_full", "stdout_closed")
FILE_SINKS = ("dev_full", "file_size", "full_disk", "read_only")
#: Sinks made with a tmpfs in a user namespace.
NAMESPACE_SINKS = ("full_disk", "read_only")
#: The file-size limit of ``file_size``: below any output's size.
FILE_SIZE_LIMIT = 64
#: What the output file holds before the run (it must hold it after).
OLD_OUTPUT = b"the output of an earlier run\n"


@dataclass
class WriteCase:
    """One command whose output cannot be written: ``argv`` (``{out}``: the output path), the
    ``sink`` (see :data:`STDOUT_SINKS`, :data:`FILE_SINKS`), and ``output``: the output's name in the
    case's directory (a file, or a directory ending in ``/``), None for stdout."""

    name: str
    argv: list[str]
    sink: str
    output: str | None = None


def write_failures() -> list[WriteCase]:
    """Every writer (report in every format, diff, check, compare, annotate, convert, merge) against
    every sink that applies to it: standard output for what writes there, an ``-o`` file for the
    rest (:func:`run_write_case` gives merge a directory ``r`` of two ranks)."""
    clean = str(SEEDS["mlp_eager"])
    to_stdout = {
        **{f"report_{f}": ["report", "t.json", "--format", f] for f in ("term", "md", "json", "html")},
        "diff_md": ["diff", "t.json", clean, "--format", "md"],
        "check_md": ["check", "t.json", "--expect", "e.toml", "--format", "md"],
        "compare_json": ["compare", "t.json", clean, "--format", "json"],
        "annotate_dash": ["annotate", "t.json", "-o", "-"],
        "merge_dash": ["merge", "r", "-o", "-"],
    }
    to_file = {
        **{f"report_{f}": (["report", "t.json", "--format", f, "-o", "{out}"], f"out.{ext}")
           for f, ext in (("term", "txt"), ("md", "md"), ("json", "json"), ("html", "html"))},
        "report_svg_file": (["report", "t.json", "-o", "{out}"], "out.svg"),
        "report_svg_dir": (["report", "t.json", "--format", "svg", "-o", "{out}"], "pictures/"),
        "diff_md": (["diff", "t.json", clean, "-o", "{out}"], "out.md"),
        "check_json": (["check", "t.json", "--expect", "e.toml", "-o", "{out}"], "out.json"),
        "compare_md": (["compare", "t.json", clean, "-o", "{out}"], "out.md"),
        "annotate": (["annotate", "t.json", "-o", "{out}"], "out.json.gz"),
        "convert": (["convert", "t.json", "-o", "{out}"], "out.parquet"),
        "merge": (["merge", "r", "-o", "{out}"], "out.json.gz"),
    }
    cases = [WriteCase(f"{sink}/{label}", argv, sink) for label, argv in to_stdout.items() for sink in STDOUT_SINKS]
    for label, (argv, output) in to_file.items():
        for sink in FILE_SINKS:
            if sink == "dev_full" and output.endswith("/"):
                continue  # a format that writes a directory has no device to write through
            cases.append(WriteCase(f"{sink}/{label}", argv, sink, output))
    return cases


def full_disk_available() -> bool:
    """Whether this system lets an unprivileged process mount a tmpfs in a user namespace (the
    :data:`NAMESPACE_SINKS`)."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=8k none {tmp}"],
                               capture_output=True, timeout=30)
    return probe.returncode == 0


def run_write_case(case: WriteCase, workdir: Path) -> dict[str, Any]:
    """Run ``case`` in ``workdir`` (made here, with the trace, the expectations and ``r``, a directory
    of two ranks): ``{code, stderr, before, after, left}`` — the output's bytes before and after (a
    directory's: its files'), and the names beside the output that were not there before (a temp
    file left behind)."""
    import subprocess

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "t.json").write_bytes(seed_bytes())
    (workdir / "e.toml").write_bytes(EXPECT)
    (workdir / "r").mkdir(exist_ok=True)
    for rank in (0, 1):
        doc = {**seed(), "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
        (workdir / "r" / f"rank{rank}.json").write_bytes(dumps(doc))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for key in [k for k in env if k.startswith("TRACEKIT_")]:
        del env[key]
    command = [sys.executable, "-m", "tracekit"]
    if case.output is None:
        argv = [*command, *case.argv]
        if case.sink == "stdout_full":
            with open("/dev/full", "wb") as full:
                done = subprocess.run(argv, cwd=workdir, env=env, stdout=full, stderr=subprocess.PIPE, timeout=300)
        else:  # started with descriptor 1 closed, as `>&-` does
            done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *argv], cwd=workdir, env=env,
                                  stderr=subprocess.PIPE, timeout=300)
        return {"code": done.returncode, "stderr": done.stderr.decode(errors="replace"), "before": None,
                "after": None, "left": []}
    if case.sink == "dev_full":
        argv = [*command, *[a.replace("{out}", "/dev/full") for a in case.argv]]
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, timeout=300)
        return {"code": done.returncode, "stderr": done.stderr.decode(errors="replace"), "before": None,
                "after": None, "left": []}
    # An output that exists before the run, in a directory of its own.
    where = workdir / "out"
    where.mkdir()
    target = where / case.output
    old = target / "timeline.svg" if case.output.endswith("/") else target
    old.parent.mkdir(parents=True, exist_ok=True)
    argv = [*command, *[a.replace("{out}", str(target) + ("/" if case.output.endswith("/") else ""))
                        for a in case.argv]]
    if case.sink == "file_size":
        old.write_bytes(OLD_OUTPUT)
        before = _listing(where)

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, timeout=300, preexec_fn=limit)
        code, stderr = done.returncode, done.stderr.decode(errors="replace")
        after = _listing(where)
    else:  # a tmpfs mounted over `out` in a namespace of its own: filled (full_disk) or made read-only
        report = workdir / "report.json"
        seal = ('dd if=/dev/zero of="$1/.filler" bs=4k 2>/dev/null' if case.sink == "full_disk"
                else 'mount -o remount,ro "$1" || exit 92')
        script = f"""
mount -t tmpfs -o size=64k none "$1" || exit 90
mkdir -p "$(dirname "$2")" && printf '%s' "$3" > "$2" || exit 91
{seal}
root="$1"
shift 4
"$@" 2> "$0.stderr"
echo $? > "$0.code"
{sys.executable} -c 'import json, os, sys; from pathlib import Path
root = Path(sys.argv[1])
print(json.dumps({{str(p.relative_to(root)): p.read_bytes().decode("latin-1") for p in sorted(root.rglob("*"))
                  if p.is_file() and p.name != ".filler"}}))' "$root" > "$0"
"""
        done = subprocess.run(["unshare", "-rm", "sh", "-c", script, str(report), str(where), str(old),
                               OLD_OUTPUT.decode(), "--", *argv], cwd=workdir, env=env, capture_output=True,
                              timeout=300)
        if done.returncode != 0 or not report.exists():
            raise RuntimeError(f"{case.name}: the {case.sink} file system could not be set up: {done.stderr[-300:]!r}")
        code = int(Path(f"{report}.code").read_text())
        stderr = Path(f"{report}.stderr").read_text(errors="replace")
        before = {str(old.relative_to(where)): OLD_OUTPUT.decode("latin-1")}
        after = json.loads(report.read_text())
    left = sorted(set(after) - set(before))
    return {"code": code, "stderr": stderr, "before": before, "after": after, "left": left}


def _listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative name -> its bytes as latin-1 text)."""
    return {str(p.relative_to(root)): p.read_bytes().decode("latin-1") for p in sorted(root.rglob("*")) if p.is_file()}


def check_write_outcome(case: WriteCase, result: dict[str, Any]) -> list[str]:
    """Problems with ``result`` (empty: one line on stderr, exit 2, the earlier output unchanged, no
    file left beside it)."""
    problems = []
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    if result["code"] != 2:
        problems.append(f"exit {result['code']}, expected 2")
    if len(lines) != 1 or not lines[0].startswith("tracekit: error: "):
        problems.append(f"expected one error line on stderr, got {lines[:4]}")
    elif "internal error" in lines[0] or "Traceback" in result["stderr"]:
        problems.append(f"reported as a bug: {lines[0]}")
    if result["before"] is not None and result["after"] != {**result["after"], **result["before"]}:
        problems.append("the output that was there before changed")
    if result["left"]:
        problems.append(f"files left behind: {result['left']}")
    return [f"{case.name}: {p}" for p in problems]


def serve(memory_bytes: int) -> None:
    """Read cases as JSON lines on stdin (``{"case": name, "dir": path, "quick": bool, "mutations":
    [...], "seed": name}``) and answer each with a JSON line of :func:`run_matrix` results, under
    an address-space limit of ``memory_bytes``."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, resource.getrlimit(resource.RLIMIT_AS)[1]))
    by_name = {c.name: c for c in corpus()}
    for line in sys.stdin:
        request = json.loads(line)
        workdir = Path(request["dir"])
        if "mutations" in request:
            doc = mutate(seed(request.get("seed", "mlp_eager")), [tuple(m) for m in request["mutations"]])
            case = Case("mutation", {"t.json": dumps(doc)})
        else:
            case = by_name[request["case"]]
        write_case(case, workdir)
        results = run_matrix(case, workdir, quick=request.get("quick", False))
        sys.stdout.write(json.dumps({"results": results}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        sys.path.insert(0, str(ROOT))
        serve(int(sys.argv[2]) if len(sys.argv) > 2 else 3 << 30)
