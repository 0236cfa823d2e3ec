"""Build a large Kineto trace by replicating the profiler steps of a real (or hand-made) one.

Contract: :func:`synthesize` reads ``src`` (JSON or gzip, any era), finds its ``ProfilerStep#N``
spans, and writes ``out`` containing the source's header, its metadata events once, and its step
window (every event from the first step's start on, GPU work included) repeated until the output
reaches ``size_mb`` megabytes of JSON. Each copy gets fresh correlation ids, ``External id``s,
``Record function id``s, sequence numbers and flow ids (shifted past the source's largest), step
numbers that continue the sequence, and times shifted by one window. Timestamps keep the source's
format (integer µs stay integers; 3-decimal µs stay 3-decimal, computed in integer ns so nothing
drifts). Output is gzip when ``gzip=True``. Used by ``bench/load.py`` and the later benchmarks.
:func:`minify` re-encodes such a trace on one line (the form tools that re-save traces write).

CLI: ``python bench/synth.py SRC --size-mb N -o OUT [--gzip] [--step-per-copy]``
"""

from __future__ import annotations

import argparse
import gzip as gzip_mod
import json
import sys
import zlib
from pathlib import Path
from typing import Any, BinaryIO

MB = 1_000_000
_ID_ARGS = ("correlation", "External id", "external id", "Record function id", "Sequence number")


def _read_json(path: Path) -> Any:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = zlib.decompress(raw, wbits=31)
    return json.loads(raw)


def _ns(value: Any) -> int:
    """A µs timestamp as exact integer ns (the text of a 3-decimal float rounds back exactly)."""
    if isinstance(value, int):
        return value * 1000
    return round(value * 1000)


class _Template:
    """The step window of the source, with what each copy must shift. ``step_per_copy``: a source
    without ``ProfilerStep#N`` spans gets one, around the whole of each copy (see :func:`synthesize`)."""

    def __init__(self, doc: dict[str, Any], step_per_copy: bool = False) -> None:
        events: list[dict[str, Any]] = doc["traceEvents"]
        self.fractional = any(isinstance(e.get("ts"), float) for e in events[:2000])
        steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                 and e.get("cat") not in ("gpu_user_annotation",)]
        if steps:
            start = min(_ns(e["ts"]) for e in steps)
            end = max(_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in steps)
            self.step_numbers = sorted({int(e["name"].split("#", 1)[1]) for e in steps})
        else:  # no steps: the whole trace is one "step"
            timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
            start = min(_ns(e["ts"]) for e in timed)
            end = max(_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in timed)
            self.step_numbers = []
        body = [e for e in events if e.get("ph") != "M" and "ts" in e and _ns(e["ts"]) >= start
                and not (e.get("ph") == "i" and e.get("s") == "g")]
        gpu_end = max((_ns(e["ts"]) + _ns(e.get("dur", 0)) for e in body), default=end)
        in_body = {id(e) for e in body}
        self.head = [e for e in events if id(e) not in in_body]
        self.body = body
        # One window holds the CPU steps and the GPU work they queued; a small gap follows.
        self.period_ns = max(end, gpu_end) - start + 1_000
        self.id_span = 1 + max(
            [int(v) for e in body for k, v in (e.get("args") or {}).items()
             if k in _ID_ARGS and isinstance(v, int)]
            + [int(e["id"]) for e in body if isinstance(e.get("id"), int)] + [0])
        self.step_span = (max(self.step_numbers) - min(self.step_numbers) + 1) if self.step_numbers else 0
        self.end_ns = start
        if step_per_copy and not steps:
            self._wrap_in_step(start, end)

    def _wrap_in_step(self, start: int, end: int) -> None:
        """Add ``ProfilerStep#1`` as Kineto writes it (a ``user_annotation`` span on the thread that
        ran the most CPU ops) from the body's first event to its last end, GPU work included; its
        ``External id`` is one past the source's largest id, so every copy's stays unique."""
        threads: dict[tuple[Any, Any], int] = {}
        for e in self.body:
            if e.get("cat") == "cpu_op":
                threads[(e["pid"], e["tid"])] = threads.get((e["pid"], e["tid"]), 0) + 1
        pid, tid = max(threads, key=threads.__getitem__) if threads else (self.body[0]["pid"], self.body[0]["tid"])
        raw = (lambda ns: round(ns / 1000, 3)) if self.fractional else (lambda ns: ns // 1000)
        step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": pid, "tid": tid,
                "ts": raw(start), "dur": raw(end - start), "args": {"External id": self.id_span}}
        self.body.insert(0, step)
        self.id_span += 1
        self.step_numbers = [1]
        self.step_span = 1


def _fmt_ts(ns: int, fractional: bool) -> str:
    if not fractional:
        return str(ns // 1000)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _shifted(template: _Template, copy: int) -> list[bytes]:
    """Encode copy number ``copy`` (0 = the source's own step window) of the body as JSON bytes."""
    shift_ns = copy * template.period_ns
    id_shift = copy * template.id_span
    step_shift = copy * template.step_span
    out: list[bytes] = []
    for ev in template.body:
        e = dict(ev)
        ts_ns = _ns(e["ts"]) + shift_ns
        e["ts"] = _Raw(_fmt_ts(ts_ns, template.fractional))
        if "dur" in e:
            e["dur"] = _Raw(_fmt_ts(_ns(e["dur"]), template.fractional))
        if copy:
            if isinstance(e.get("id"), int):
                e["id"] = e["id"] + id_shift
            name = e.get("name", "")
            if step_shift and isinstance(name, str) and name.startswith("ProfilerStep#"):
                e["name"] = f"ProfilerStep#{int(name.split('#', 1)[1]) + step_shift}"
            args = e.get("args")
            if args:
                args = dict(args)
                for k in _ID_ARGS:
                    v = args.get(k)
                    if isinstance(v, int) and v > 0:
                        args[k] = v + id_shift
                e["args"] = args
        out.append(_encode(e))
    return out


class _Raw(str):
    """A pre-formatted JSON number (keeps '123.450' exactly as Kineto writes it)."""


def _encode(obj: Any) -> bytes:
    # json.dumps cannot emit a number verbatim; render the two time fields by hand instead.
    parts = []
    for k, v in obj.items():
        text = v if isinstance(v, _Raw) else json.dumps(v, separators=(", ", ": "))
        parts.append(f"{json.dumps(k)}: {text}")
    return ("  {" + ", ".join(parts) + "}").encode()


def synthesize(src: str | Path, out: str | Path, size_mb: float, *, gzip: bool = False,
               step_per_copy: bool = False) -> dict[str, Any]:
    """Write a trace of about ``size_mb`` MB (uncompressed JSON) to ``out``; return a summary.
    ``step_per_copy``: where the source has no ``ProfilerStep#N`` spans, its whole timed body is the
    window, and each copy is wrapped in one ``ProfilerStep#N`` (N = copy + 1), so a capture of many
    iterations becomes one step of many kernels (sources with steps are unaffected)."""
    doc = _read_json(Path(src))
    template = _Template(doc, step_per_copy)
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    # Kineto ≥ 2025 writes baseTimeNanoseconds before traceEvents; keep every key before it.
    head_bytes = (b"{\n" + b"".join(
        f"  {json.dumps(k)}: {json.dumps(v)},\n".encode() for k, v in header.items()
    ) + b'  "traceEvents": [\n')
    target = int(size_mb * MB)
    raw_out: BinaryIO = open(out, "wb")
    sink: BinaryIO = gzip_mod.GzipFile(fileobj=raw_out, mode="wb", compresslevel=6) if gzip else raw_out
    written = len(head_bytes)
    events = 0
    copies = 0
    try:
        sink.write(head_bytes)
        first = True
        for e in template.head:
            e = dict(e)
            for key in ("ts", "dur"):
                if isinstance(e.get(key), (int, float)):
                    e[key] = _Raw(_fmt_ts(_ns(e[key]), template.fractional))
            blob = _encode(e)
            sink.write((b"" if first else b",\n") + blob)
            first = False
            written += len(blob) + 2
        events += len(template.head)
        while written < target or copies == 0:
            chunk = _shifted(template, copies)
            blob = b",\n".join(chunk)
            sink.write((b"" if first else b",\n") + blob)
            first = False
            written += len(blob) + 2
            events += len(chunk)
            copies += 1
        sink.write(b"\n]}\n")
    finally:
        if sink is not raw_out:
            sink.close()
        raw_out.close()
    kernels = sum(1 for e in template.body if e.get("cat") == "kernel")
    memory = sum(1 for e in template.body if e.get("name") == "[memory]")
    return {"events": events, "copies": copies, "json_bytes": written, "file_bytes": Path(out).stat().st_size,
            "steps_per_copy": template.step_span, "kernels_per_copy": kernels, "memory_events_per_copy": memory, "time_format": "fractional" if template.fractional else "integer"}


def minify(src: str | Path, out: str | Path, chunk_bytes: int = 64 * MB) -> dict[str, Any]:
    """Re-encode the trace ``src`` (as :func:`synthesize` writes it: Kineto's layout, one event per
    line) with msgspec into one line without white space, as tools that re-save traces write it:
    the same metadata and events, a piece of about ``chunk_bytes`` at a time. Returns a summary."""
    import msgspec

    data = Path(src).read_bytes()
    start = data.index(b"[", data.index(b'"traceEvents"'))
    end = data.rindex(b"]")
    head = msgspec.json.encode(msgspec.json.decode(data[:start] + b"[]" + data[end + 1:]))
    cut = head.index(b'"traceEvents":[]') + len(b'"traceEvents":[')
    events = 0
    with open(out, "wb") as fh:
        fh.write(head[:cut])
        lo = start + 1
        while lo < end:
            hi = data.find(b"},\n", lo + chunk_bytes, end)
            hi = end if hi < 0 else hi + 1  # after the event's "}"
            chunk = msgspec.json.decode(b"[" + data[lo:hi] + b"]")
            events += len(chunk)
            fh.write((b"," if lo > start + 1 else b"") + msgspec.json.encode(chunk)[1:-1])
            lo = hi + 1  # past the ","
        fh.write(head[cut:])
    return {"events": events, "json_bytes": Path(out).stat().st_size, "file_bytes": Path(out).stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="source trace (.json or gzip) with ProfilerStep#N spans")
    ap.add_argument("--size-mb", type=float, required=True, help="target size of the JSON text in MB")
    ap.add_argument("-o", "--out", required=True, help="output path")
    ap.add_argument("--gzip", action="store_true", help="gzip the output")
    ap.add_argument("--step-per-copy", action="store_true",
                    help="a source without ProfilerStep spans: wrap each copy in one ProfilerStep#N")
    args = ap.parse_args(argv)
    summary = synthesize(args.src, args.out, args.size_mb, gzip=args.gzip, step_per_copy=args.step_per_copy)
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
