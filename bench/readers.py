"""Native JSON readers against tracekit's msgspec loader, on the same trace, for equal results.

Each reader runs in its own child process (timed from its first read to a Polars frame of the
events' fields tracekit uses, peak RSS of the child) and must give the same answer: the number of
kernel events and the sum of their durations in integer nanoseconds. Readers:

* ``tracekit.load`` — the shipped loader (msgspec typed decode, one process per core for a big
  plain trace), on the Kineto file as written;
* ``msgspec (1 process)`` — the same loader forced into one process;
* ``duckdb read_json`` — DuckDB's parallel JSON reader with explicit columns (``args`` as JSON,
  the fields extracted with ``->>``), on a newline-delimited copy of the events: a Kineto file is one
  JSON object, not NDJSON, so this is the reader's best case (the copy is made beforehand, untimed);
* ``pyarrow.json`` — Arrow's C++ reader with an explicit schema and unexpected fields ignored, on
  the same NDJSON copy;
* ``polars read_ndjson`` — Polars' own parallel NDJSON reader with an explicit schema (pid/tid as
  text, nested ``args`` values as JSON text), on the same NDJSON copy;
* ``simdjson`` — pysimdjson's parser, one document per event line, fields read through its proxy
  objects (on the NDJSON copy).

    python bench/readers.py TRACE.json [--ndjson COPY.ndjson]   # prints a table (Markdown)

:func:`measure` returns the rows; ``bench/compare.py`` puts them in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Each reader as code run in a child: prints {"events", "kernels", "kernel_ns", "seconds"}.
_READERS: dict[str, str] = {
    "tracekit.load": r"""
import sys, time
from tracekit.load import load
t = time.perf_counter(); trace = load(sys.argv[1], workers=None); s = time.perf_counter() - t
k = trace.kernels
out = {"events": trace.meta.event_count, "kernels": k.height, "kernel_ns": int(k["dur"].sum()), "seconds": s}
""",
    "msgspec (1 process)": r"""
import sys, time
from tracekit.load import load
t = time.perf_counter(); trace = load(sys.argv[1], workers=1); s = time.perf_counter() - t
k = trace.kernels
out = {"events": trace.meta.event_count, "kernels": k.height, "kernel_ns": int(k["dur"].sum()), "seconds": s}
""",
    "duckdb read_json": r"""
import sys, time, duckdb, polars as pl
from tracekit.parallel import cores
con = duckdb.connect(); con.execute(f"SET threads={cores()}")
q = '''SELECT ph, cat, name, pid, tid, CAST(ts AS DECIMAL(18,3)) AS ts, CAST(dur AS DECIMAL(18,3)) AS dur, id,
       args->>'$."External id"' AS external_id, args->>'$.correlation' AS correlation,
       args->>'$."Record function id"' AS rf, args->'$."Input Dims"' AS input_dims,
       args->>'$.device' AS device, args->>'$.stream' AS stream, args->'$.grid' AS grid, args->'$.block' AS block
       FROM read_json(?, format='newline_delimited', columns={ph:'VARCHAR', cat:'VARCHAR', name:'VARCHAR',
       pid:'VARCHAR', tid:'VARCHAR', ts:'VARCHAR', dur:'VARCHAR', id:'VARCHAR', args:'JSON'})'''
t = time.perf_counter()
df = pl.from_arrow(con.sql(q.replace("?", repr(sys.argv[2]))).to_arrow_table())
df = df.with_columns((pl.col("dur") * 1000).cast(pl.Int64).alias("dur_ns"))
s = time.perf_counter() - t
k = df.filter(pl.col("cat") == "kernel")
out = {"events": df.height, "kernels": k.height, "kernel_ns": int(k["dur_ns"].sum()), "seconds": s}
""",
    "pyarrow.json": r"""
import sys, time, pyarrow as pa, pyarrow.json as pj, polars as pl
args = pa.struct([("External id", pa.int64()), ("correlation", pa.int64()), ("device", pa.int64()),
                  ("stream", pa.int64())])
schema = pa.schema([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", pa.int64()),
                    ("tid", pa.int64()), ("ts", pa.float64()), ("dur", pa.float64()), ("args", args)])
t = time.perf_counter()
tab = pj.read_json(sys.argv[2], parse_options=pj.ParseOptions(explicit_schema=schema,
                                                               unexpected_field_behavior="ignore"))
df = pl.from_arrow(tab)
s = time.perf_counter() - t
k = df.filter(pl.col("cat") == "kernel")
out = {"events": df.height, "kernels": k.height, "kernel_ns": int((k["dur"] * 1000).round(0).sum()), "seconds": s}
""",
    "polars read_ndjson": r"""
import sys, time, polars as pl
# Polars' own (Rust, multi-threaded) NDJSON reader with an explicit schema: numbers declared as
# text are kept as text (mixed pid/tid load), nested values declared as text come back as JSON text.
args = pl.Struct({"External id": pl.Int64, "correlation": pl.Int64, "Record function id": pl.Int64,
                  "Input Dims": pl.String, "device": pl.Int64, "stream": pl.Int64, "grid": pl.String,
                  "block": pl.String})
schema = {"ph": pl.String, "cat": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
          "ts": pl.Float64, "dur": pl.Float64, "id": pl.String, "args": args}
t = time.perf_counter()
df = pl.read_ndjson(sys.argv[2], schema=schema)
s = time.perf_counter() - t
k = df.filter(pl.col("cat") == "kernel")
out = {"events": df.height, "kernels": k.height, "kernel_ns": int((k["dur"] * 1000).round(0).sum()), "seconds": s}
""",
    "simdjson": r"""
import sys, time, simdjson
parser = simdjson.Parser()
t = time.perf_counter()
n = kernels = kernel_ns = 0
cols = {c: [] for c in ("ph", "cat", "name", "pid", "tid", "ts", "dur")}
with open(sys.argv[2], "rb") as fh:
    for line in fh:
        e = parser.parse(line)
        n += 1
        for c, values in cols.items():
            values.append(e.get(c))
        if e.get("cat") == "kernel":
            kernels += 1
            kernel_ns += round(e.get("dur") * 1000)
        del e  # the parser is reused: its proxy objects must be gone first
s = time.perf_counter() - t
out = {"events": n, "kernels": kernels, "kernel_ns": kernel_ns, "seconds": s}
""",
}
# Peak RSS from VmHWM, which starts afresh at exec: ru_maxrss would carry the parent's size at fork.
_TAIL = ("\nimport json\nout['peak_rss'] = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') "
         "if l.startswith('VmHWM:'))\nprint(json.dumps(out))\n")


def ndjson_copy(trace: Path, out: Path) -> Path:
    """The events of a Kineto-layout trace as newline-delimited JSON (one event per line)."""
    data = trace.read_bytes()
    start = data.index(b"[", data.index(b'"traceEvents"')) + 1
    end = data.rindex(b"]")
    body = re.sub(rb"\},?\s*\n\s*\{", b"}\n{", data[start:end]).strip()
    out.write_bytes(body + b"\n")
    return out


def measure(trace: Path, ndjson: Path, timeout: float = 900.0) -> list[dict]:
    """One row per reader: name, seconds, peak RSS, result, and whether it equals tracekit's."""
    rows = []
    for name, code in _READERS.items():
        try:
            done = subprocess.run([sys.executable, "-c", code + _TAIL, str(trace), str(ndjson)],
                                  capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            if done.returncode == 0:
                rows.append({"reader": name, **json.loads(done.stdout.splitlines()[-1])})
            else:
                rows.append({"reader": name, "error": (done.stderr.strip().splitlines() or ["?"])[-1][:160]})
        except subprocess.TimeoutExpired:
            rows.append({"reader": name, "error": f"timed out after {timeout:.0f} s"})
    reference = next((r for r in rows if r["reader"] == "tracekit.load" and "error" not in r), None)
    for r in rows:
        if "error" not in r and reference is not None:
            r["equal"] = (r["kernels"], r["kernel_ns"]) == (reference["kernels"], reference["kernel_ns"])
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| reader | seconds | peak RSS | kernels | kernel time (ns) | same result as tracekit.load |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['reader']} | — | — | — | — | failed: {r['error'].replace('|', '/')} |")
        else:
            lines.append(f"| {r['reader']} | {r['seconds']:.2f} | {r['peak_rss'] / 1e9:.2f} GB | {r['kernels']:,} | "
                         f"{r['kernel_ns']:,} | {'yes' if r.get('equal') else 'no'} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--ndjson", type=Path, default=None, help="NDJSON copy (made beside TRACE when absent)")
    args = ap.parse_args()
    nd = args.ndjson or args.trace.with_suffix(".ndjson")
    if not nd.exists():
        t = time.perf_counter()
        ndjson_copy(args.trace, nd)
        print(f"NDJSON copy written in {time.perf_counter() - t:.1f} s (not part of any reader's time)")
    print(markdown(measure(args.trace, nd)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
