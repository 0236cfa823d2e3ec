"""Trace events routed into Polars frames: the columns of :class:`~tracekit.trace.Trace`.

Contract: a :class:`FrameBuilder` takes decoded events a chunk at a time (in file order, with the
index of the chunk's first event) and :meth:`FrameBuilder.finish` returns the loaded frames of
:data:`tracekit.trace.LOADED_SCHEMAS` with exactly those columns and dtypes, in (ts, idx) order
(:func:`sort_frames`). Categories of every era are normalised here (2021 ``Operator``, ``Runtime``,
``Kernel``…, lower-case ``external id``, ROCm's ``cid``), times become Int64 ns exactly (integer µs,
3-decimal µs relative to ``baseTimeNanoseconds``, and the 2024 absolute 3-decimal form through
decimals), pids/tids become text, and values of unexpected JSON types are coerced column by column.
:func:`time_format`, :func:`trace_meta` and :func:`steps` derive the rest of a ``Trace``.

How it stays fast: each chunk is routed by category in one pass, then each column its frame needs
is read out of the routed structs by one list comprehension while they are still in the CPU cache
(no per-event dicts or appends per field). Columns become Polars series every :data:`FLUSH_ROWS`
rows; frames are concatenated once at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from tracekit.load.events import (MAX_DUR_NS, MAX_TS_NS, MIN_TS_NS, NO_ARGS, UNUSABLE_NS, VERSION_KEYS,
                                  TopLevel)
from tracekit.trace import (
    LOADED_SCHEMAS,
    STEPS_SCHEMA,
    UNANALYSED,
    DeviceInfo,
    is_annotation,
    TraceMeta,
    empty_frame,
)

#: Timestamps above this many µs (3 years) are absolute, since the epoch; relative ones (to
#: ``baseTimeNanoseconds``) are seen up to months (5.4e12 µs in a torch 2.11 H200 trace).
_ABSOLUTE_US = 1e14

# --- category routing ---------------------------------------------------------------------------

_OPS, _LAUNCHES, _GPU, _OVERHEAD, _FLOWS, _MEMORY, _OTHER, _UNANALYSED, _ANNOTATION = range(9)

#: Known categories (every era) -> (frame, normalised label).
_ROUTES: dict[str, tuple[int, str]] = {
    "cpu_op": (_OPS, "cpu_op"), "Operator": (_OPS, "cpu_op"),
    "user_annotation": (_OPS, "user_annotation"), "python_function": (_OPS, "python_function"),
    "cuda_runtime": (_LAUNCHES, "cuda_runtime"), "Runtime": (_LAUNCHES, "cuda_runtime"),
    "cuda_driver": (_LAUNCHES, "cuda_driver"), "Driver": (_LAUNCHES, "cuda_driver"),
    "kernel": (_GPU, "kernel"), "Kernel": (_GPU, "kernel"),
    "gpu_memcpy": (_GPU, "memcpy"), "Memcpy": (_GPU, "memcpy"),
    "gpu_memset": (_GPU, "memset"), "Memset": (_GPU, "memset"),
    "gpu_user_annotation": (_GPU, "annotation"), "cuda_sync": (_GPU, "sync"),
    "overhead": (_OVERHEAD, "overhead"),
    "ac2g": (_FLOWS, "ac2g"), "async": (_FLOWS, "ac2g"), "fwdbwd": (_FLOWS, "fwdbwd"),
    "cpu_instant_event": (_MEMORY, "memory"),
}


#: Launch-call categories by prefix -> vendor (the host side of each device family; ROCm writes
#: ``cuda_runtime`` too and is told apart by its metadata and ``hip*`` names).
LAUNCH_VENDORS: tuple[tuple[str, str], ...] = (
    ("cuda_", "nvidia"), ("xpu_", "intel"), ("mtia_", "mtia"), ("hpu_", "habana"),
    ("mlu_", "cambricon"), ("gcu_", "enflame"), ("privateuse1_", "privateuse1"),
)


def _route(cat: object) -> tuple[int, str]:
    """Route a category not in :data:`_ROUTES` (computed once per distinct category)."""
    text = cat if isinstance(cat, str) else str(cat)
    if text in UNANALYSED:
        return _UNANALYSED, text
    if is_annotation(text):  # tracekit annotate's own tracks: counted, never read as the trace's
        return _ANNOTATION, text
    if text.endswith("_runtime") or text.endswith("_driver"):
        return _LAUNCHES, text
    return _OTHER, text  # Trace spans, counters, ""...: only flows, memory and metadata are kept


@dataclass
class LoadCounts:
    """What a load left out or could not analyse (it crosses process boundaries from the shares):
    rows dropped for an unusable time, ``traceEvents`` entries that are not events, device
    activity of :data:`UNANALYSED` categories by category, and tracekit's own annotations."""

    unusable_time: int = 0
    not_an_event: int = 0
    unanalysed: dict[str, int] = field(default_factory=dict)
    annotations: int = 0

    def add(self, other: LoadCounts) -> None:
        self.unusable_time += other.unusable_time
        self.not_an_event += other.not_an_event
        self.annotations += other.annotations
        for cat, n in other.unanalysed.items():
            self.unanalysed[cat] = self.unanalysed.get(cat, 0) + n

    def dropped(self) -> dict[str, int]:
        """``TraceMeta.dropped_events``: reasons with a count above zero."""
        return {k: v for k, v in (("not_an_event", self.not_an_event),
                                  ("unusable_time", self.unusable_time)) if v}


# --- columns ------------------------------------------------------------------------------------


def _int_series(name: str, values: Sequence[object]) -> pl.Series:
    """An Int64 column from ints/None, tolerating numeric strings (ROCm writes ``bytes`` as text)."""
    try:
        return pl.Series(name, values, dtype=pl.Int64)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [_to_int(v) for v in values], dtype=pl.Int64)


def _to_int(value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value if value is None or -(2**63) <= value < 2**63 else None  # type: ignore[operator]
    if isinstance(value, float):
        return int(value) if value == value and abs(value) < 2**63 else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 0) if text[:2].lower() in ("0x", "0o", "0b") else int(text)
        except ValueError:
            try:
                return _to_int(float(text))
            except ValueError:
                return None
    return None


def _id_series(name: str, values: Sequence[object]) -> pl.Series:
    """pids/tids as strings: Kineto writes ints, but also "Spans", "Traces", "stream 7"."""
    try:
        return pl.Series(name, values, dtype=pl.Int64).cast(pl.String)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [v if isinstance(v, str) else _id_text(v) for v in values],
                         dtype=pl.String)


def _id_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _str_series(name: str, values: Sequence[object]) -> pl.Series:
    try:
        return pl.Series(name, values, dtype=pl.String)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        return pl.Series(name, [v if isinstance(v, str) or v is None else str(v) for v in values],
                         dtype=pl.String)


def _raw_text(name: str, values: Sequence[msgspec.Raw]) -> pl.Series:
    """Raw JSON fragments kept as text, parsed only where an analysis needs them.

    The fragments are joined in C with NUL (a byte JSON text cannot hold outside an escape) and
    split in Polars: 2-3x cheaper than a Python ``bytes()`` per value. Absent = empty = null.
    """
    try:
        blob = b"\x00".join(values)
        out = pl.Series(name, [blob], dtype=pl.Binary).cast(pl.String).str.split("\x00").explode()
        if out.len() == len(values):
            return out.replace("", None)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        pass  # not UTF-8: keep what can be kept
    return pl.Series(
        name, [bytes(v).decode("utf-8", "replace") if v else None for v in values], dtype=pl.String
    )


#: What a time that is no time becomes in a column until its row is dropped (Int64's minimum,
#: below every usable value: see :data:`tracekit.load.events.MAX_TS_NS`).
UNUSABLE = -(2**63)
#: Usable range of each time column, in ns (inclusive).
_TIME_RANGE = {"ts": (MIN_TS_NS, MAX_TS_NS - 1), "dur": (0, MAX_DUR_NS)}


class _Times:
    """Turns µs values into Int64 ns and remembers what it saw (for ``time_format``).

    A value that is no usable time — a missing ``ts``, a ``ts``/``dur`` that is not a number, NaN
    or infinite, out of :data:`_TIME_RANGE` or a negative ``dur`` — becomes :data:`UNUSABLE` and
    sets ``unusable``; the builder drops those rows and counts them. The checks are a few
    vectorised reductions per column part, so whole traces pay next to nothing for them.
    """

    def __init__(self) -> None:
        self.fractional = False
        self.exact = False  # values are already integer ns (see events.replace_with_exact_times)
        self.unusable = False

    def ns(self, name: str, values: Sequence[object]) -> pl.Series:
        lo, hi = _TIME_RANGE[name]
        if self.exact:
            self.fractional = True
            return self._checked(name, _int_series(name, [v if v != UNUSABLE_NS else UNUSABLE for v in values]
                                                   if UNUSABLE_NS in values else values))
        first = next((v for v in values if v is not None), None)
        if not isinstance(first, float):
            try:  # integer µs (≤ 2.2, and relative traces that happen to be whole): exact
                whole = pl.Series(name, values, dtype=pl.Int64)
            except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
                whole = None
            if whole is not None:
                low, high = whole.min(), whole.max()
                if low is None or (low * 1000 >= lo and high * 1000 <= hi):  # type: ignore[operator]
                    return self._checked(name, whole * 1000)
        # 3-decimal µs. Whole µs and the fraction are converted apart: the fraction of a float
        # below 2^43 µs is within 0.5 ns of the written one, so rounding it gives the exact ns
        # (round(ts × 1000) alone can be 1 ns off past 2^42 µs, where real relative traces reach).
        self.fractional = True
        try:
            floats = pl.Series(name, values, dtype=pl.Float64)
        except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
            floats = pl.Series(name, [_float_or_nan(v) for v in values], dtype=pl.Float64)
        usable = (floats >= lo / 1000) & (floats <= hi / 1000)  # NaN: False; null: null
        bad = None
        if not usable.all():
            bad = ~usable.fill_null(True)
            floats = floats.set(bad, 0.0)
        whole = floats.floor()
        out = (whole.cast(pl.Int64) * 1000 + ((floats - whole) * 1000.0).round(0).cast(pl.Int64)).alias(name)
        if bad is not None:
            out = out.set(bad, UNUSABLE)
        return self._checked(name, out)

    def _checked(self, name: str, ns: pl.Series) -> pl.Series:
        """``ns`` with values outside :data:`_TIME_RANGE` (and a missing ``ts``) as UNUSABLE."""
        lo, hi = _TIME_RANGE[name]
        low, high = ns.min(), ns.max()
        missing = name == "ts" and ns.null_count() > 0
        if not missing and (low is None or (low >= lo and high <= hi)):  # type: ignore[operator]
            return ns
        self.unusable = True
        return ns.set(~ns.is_between(lo, hi).fill_null(name != "ts"), UNUSABLE)


def _float_or_nan(value: object) -> float | None:
    """A time value of an unexpected JSON type as a float: numbers and numeric text as they are,
    anything else NaN (no usable time); None stays None (absent)."""
    if value is None or isinstance(value, float):
        return value  # type: ignore[return-value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return float("nan")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return float("nan")
    return float("nan")


# Column order of each frame as the one pass fills it (``end`` is derived in finish).
_OPS_COLS = ("idx", "cat", "name", "pid", "tid", "ts", "dur", "external_id", "record_function_id",
             "sequence_number", "input_dims", "input_types")
_LAUNCH_COLS = ("idx", "cat", "name", "pid", "tid", "ts", "dur", "correlation", "external_id", "cbid")
_GPU_COLS = ("idx", "kind", "name", "pid", "tid", "ts", "dur", "device", "stream", "correlation",
             "external_id", "grid", "block", "registers", "shared_memory", "bytes", "graph_id", "graph_node_id",
             "graph_annotation")
_FLOW_COLS = ("idx", "cat", "ph", "id", "pid", "tid", "ts")
_MEMORY_COLS = ("idx", "pid", "tid", "ts", "addr", "bytes", "total_allocated", "total_reserved",
                "device_type", "device_id", "oom")
_OVERHEAD_COLS = ("idx", "name", "pid", "tid", "ts", "dur")
_THREAD_COLS = ("kind", "pid", "tid", "name")
_COMMS_COLS = ("idx", "event", "collective", "pg_name", "pg_desc", "pg_ranks", "group_size", "seq",
               "in_nelems", "out_nelems", "dtype", "in_split", "out_split")

#: How each column's Python values become a series.
_KIND = {
    "idx": "idx", "cat": "str", "kind": "str", "name": "str", "ph": "str", "pid": "id", "tid": "id",
    "ts": "time", "dur": "time", "input_dims": "raw", "input_types": "raw", "grid": "raw",
    "block": "raw", "oom": "bool", "graph_annotation": "str", "event": "str", "collective": "str",
    "pg_name": "str", "pg_desc": "str", "dtype": "str", "pg_ranks": "raw", "in_split": "raw", "out_split": "raw",
}
#: Rows gathered before they are turned into series (bounds the Python objects held).
FLUSH_ROWS = 50_000


class FrameBuilder:
    """Routes events to per-frame column lists in one pass; series are built every
    :data:`FLUSH_ROWS` rows and frames concatenated once in :meth:`finish`.

    Events arrive in small chunks (:data:`tracekit.load.layout.CHUNK_EVENTS`) so that the structs msgspec has just made
    are still in the CPU cache when the pass reads them; that alone halves the pass's cost.
    """

    def __init__(self) -> None:
        self.layout = {
            "ops": _OPS_COLS, "launches": _LAUNCH_COLS, "gpu": _GPU_COLS, "flows": _FLOW_COLS,
            "memory": _MEMORY_COLS, "overhead": _OVERHEAD_COLS, "threads": _THREAD_COLS,
            "comms": _COMMS_COLS,
        }
        self.cols: dict[str, tuple[list[Any], ...]] = {
            name: tuple([] for _ in cols) for name, cols in self.layout.items()
        }
        self.parts: dict[str, list[pl.DataFrame]] = {name: [] for name in self.layout}
        self.times = _Times()
        self.exact_times = False
        self.routes = dict(_ROUTES)
        self.pending = 0
        self.counts = LoadCounts()

    def add_chunk(self, events: list[Any], offset: int) -> None:
        # Two passes over the chunk while its structs are still in cache: one routes each event
        # (by category, and ph "X" for spans), one list comprehension per column then reads the
        # routed events' field. Comprehensions and ``extend`` run in C-speed loops; a bound
        # ``append`` per field per event cost a third more.
        routes = self.routes
        get = routes.get
        ops: list[int] = []
        launches: list[int] = []
        gpu: list[int] = []
        flows: list[int] = []
        other: list[tuple[int, int, Any]] = []  # memory, overhead, metadata: few; done after
        to_ops, to_launches, to_gpu, to_flows = ops.append, launches.append, gpu.append, flows.append
        k = 0
        for e in events:
            route = get(e.cat)
            if route is None:
                route = routes[e.cat] = _route(e.cat)
            frame = route[0]
            if frame == _OPS:
                if e.ph == "X":
                    to_ops(k)
            elif frame == _FLOWS:
                to_flows(k)
            elif frame == _GPU:
                if e.ph == "X":
                    to_gpu(k)
            elif frame == _LAUNCHES:
                if e.ph == "X":
                    to_launches(k)
            else:
                other.append((offset + k, frame, e))
            k += 1
        no_args = NO_ARGS
        if ops:
            ev = [events[k] for k in ops]
            args = [e.args or no_args for e in ev]
            self._extend("ops", self._common(ev, ops, offset) + (
                [a.external_id for a in args], [a.record_function_id for a in args],
                [a.sequence_number for a in args], [a.input_dims for a in args],
                [a.input_types for a in args]))
            self._add_comms(ops, args, offset, "op")
        if flows:
            ev = [events[k] for k in flows]
            self._extend("flows", (
                [offset + k for k in flows], [routes[e.cat][1] for e in ev], [e.ph for e in ev],
                [e.id for e in ev], [e.pid for e in ev], [e.tid for e in ev], [e.ts for e in ev]))
        if gpu:
            ev = [events[k] for k in gpu]
            args = [e.args or no_args for e in ev]
            self._extend("gpu", self._common(ev, gpu, offset) + (
                [a.device for a in args], [a.stream for a in args], [a.correlation for a in args],
                [a.external_id if a.external_id is not None else a.external_id_lc for a in args],
                [a.grid for a in args], [a.block for a in args], [a.registers for a in args],
                [a.shared_memory for a in args], [a.bytes for a in args],
                [a.graph_id for a in args], [a.graph_node_id for a in args],
                # PyTorch's CUDA-graph annotation script writes a node's annotation as the activity's
                # args "name" (Kineto itself writes none there).
                [a.name if isinstance(a.name, str) else None for a in args]))
            self._add_comms(gpu, args, offset, "kernel")
        if launches:
            ev = [events[k] for k in launches]
            args = [e.args or no_args for e in ev]
            self._extend("launches", self._common(ev, launches, offset) + (
                [a.correlation for a in args],
                [a.external_id if a.external_id is not None else a.external_id_lc for a in args],
                [a.cbid if a.cbid is not None else a.cid for a in args]))
        if other:
            self._add_other(other)
        self.pending += len(events)
        if self.pending >= FLUSH_ROWS:
            self.flush()

    def _common(self, ev: list[Any], positions: list[int], offset: int) -> tuple[list[Any], ...]:
        """The columns every span frame starts with: idx, category label, name, pid, tid, ts, dur."""
        routes = self.routes
        return ([offset + k for k in positions], [routes[e.cat][1] for e in ev], [e.name for e in ev],
                [e.pid for e in ev], [e.tid for e in ev], [e.ts for e in ev], [e.dur for e in ev])

    def _add_comms(self, positions: list[int], args: list[Any], offset: int, event: str) -> None:
        """The collective metadata of the events that carry a ``Collective name`` (few: one op and,
        in newer eras, one kernel per collective call)."""
        rows = [(k, a) for k, a in zip(positions, args) if a.collective is not None]
        if not rows:
            return
        self._extend("comms", (
            [offset + k for k, _ in rows], [event] * len(rows), [a.collective for _, a in rows],
            [a.pg_name for _, a in rows], [a.pg_desc for _, a in rows], [a.pg_ranks for _, a in rows],
            [a.group_size for _, a in rows], [a.seq for _, a in rows], [a.in_nelems for _, a in rows],
            [a.out_nelems for _, a in rows], [a.dtype for _, a in rows], [a.in_split for _, a in rows],
            [a.out_split for _, a in rows]))

    def _extend(self, frame: str, columns: tuple[list[Any], ...]) -> None:
        for target, values in zip(self.cols[frame], columns, strict=True):
            target.extend(values)

    def _add_other(self, other: list[tuple[int, int, Any]]) -> None:
        """``[memory]`` instants, overhead spans, flows of other categories, metadata names."""
        mi, mp, mt, mts, ma, mb, mta, mtr, mdt, mdi, moom = (c.append for c in self.cols["memory"])
        vi, vn, vp, vt, vts, vd = (c.append for c in self.cols["overhead"])
        fi, fc, fph, fid, fp, ft, fts = (c.append for c in self.cols["flows"])
        hk, hp, ht, hn = (c.append for c in self.cols["threads"])
        unanalysed = self.counts.unanalysed
        for i, frame, e in other:
            ph = e.ph
            if frame == _ANNOTATION:
                self.counts.annotations += 1
                continue
            if frame == _UNANALYSED:
                if ph not in ("s", "f", "t", "M"):
                    unanalysed[e.cat] = unanalysed.get(e.cat, 0) + 1
                    continue
            if frame == _MEMORY or (ph == "i" and e.name == "[memory]"):  # 2021: no category
                # [OutOfMemory] carries Bytes (the failed request) and the totals but no Addr; marked
                # by name, since [memory] events before PyTorch 1.9 carry no Addr either.
                if e.name == "[memory]" or e.name == "[OutOfMemory]":
                    a = e.args or NO_ARGS
                    mi(i); mp(e.pid); mt(e.tid); mts(e.ts); ma(a.addr); mb(a.mem_bytes)
                    mta(a.total_allocated); mtr(a.total_reserved); mdt(a.device_type)
                    mdi(a.device_id); moom(e.name == "[OutOfMemory]")
            elif frame == _OVERHEAD:
                if ph == "X":
                    vi(i); vn(e.name); vp(e.pid); vt(e.tid); vts(e.ts); vd(e.dur)
            elif ph in ("s", "f", "t"):  # a flow of a category tracekit does not know
                fi(i); fc(e.cat); fph(ph); fid(e.id); fp(e.pid); ft(e.tid); fts(e.ts)
            elif ph == "M" and e.name in ("process_name", "thread_name"):
                name = (e.args or NO_ARGS).name
                if name is not None:
                    hk("process" if e.name == "process_name" else "thread")
                    hp(e.pid); ht(e.tid); hn(name)

    def flush(self) -> None:
        """Turn the gathered column lists into one frame part per frame and empty them."""
        times = self.times
        times.exact = self.exact_times
        for frame, names in self.layout.items():
            lists = self.cols[frame]
            if not lists[0]:
                continue
            series = []
            for name, values in zip(names, lists):
                kind = _KIND.get(name, "int")
                if kind == "idx":
                    s = pl.Series(name, values, dtype=pl.UInt32)
                elif kind == "str":
                    s = _str_series(name, values)
                elif kind == "id":
                    s = _id_series(name, values)
                elif kind == "time":
                    s = times.ns(name, values)
                elif kind == "raw":
                    s = _raw_text(name, values)
                elif kind == "bool":
                    s = pl.Series(name, values, dtype=pl.Boolean)
                else:
                    s = _int_series(name, values)
                series.append(s)
                values.clear()
            part = pl.DataFrame(series)
            if times.unusable:  # rows with a time that is no time are dropped and counted
                times.unusable = False
                keep = pl.col("ts") != UNUSABLE
                if "dur" in part.columns:
                    keep &= pl.col("dur").fill_null(0) != UNUSABLE
                height = part.height
                part = part.filter(keep)
                self.counts.unusable_time += height - part.height
            self.parts[frame].append(part)
        self.pending = 0

    def finish(self, *, sort: bool = True) -> dict[str, pl.DataFrame]:
        """The frames, in (ts, idx) order unless ``sort`` is False: then in event order, for a
        caller that joins several shares and sorts once."""
        self.flush()
        frames: dict[str, pl.DataFrame] = {}
        for name, schema in LOADED_SCHEMAS.items():
            parts = self.parts[name]
            self.parts[name] = []
            if not parts:
                frames[name] = empty_frame(schema)
                continue
            # No rechunk here: the sort below writes every column out contiguously anyway.
            df = pl.concat(parts, how="vertical_relaxed", rechunk=False) if len(parts) > 1 else parts[0]
            del parts
            exprs = []
            for col, dtype in schema.items():
                if col == "end":
                    exprs.append((pl.col("ts") + pl.col("dur").fill_null(0)).alias("end"))
                elif col == "dur":
                    exprs.append(pl.col("dur").fill_null(0).cast(dtype))
                elif col in df.columns:
                    exprs.append(pl.col(col).cast(dtype))
                else:  # pragma: no cover - every builder writes all its columns
                    exprs.append(pl.lit(None, dtype=dtype).alias(col))
            frames[name] = df.select(exprs)
            if name == "comms":  # a list recorded as text or as a list: both kept as its text
                frames[name] = frames[name].with_columns(
                    pl.col(c).str.strip_chars('"') for c in ("pg_ranks", "in_split", "out_split"))
        return sort_frames(frames) if sort else frames


def sort_frames(frames: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Each frame in (ts, idx) order; threads without repeats."""
    out = {}
    for name, df in frames.items():
        if name == "threads":
            out[name] = df.unique(maintain_order=True)
        elif "ts" not in df.columns:  # comms: in event order
            out[name] = df.sort("idx")
        elif df["idx"].is_sorted():
            # Rows are in event order, so a stable sort on ts alone is the (ts, idx) order,
            # and far cheaper than a two-key sort (which row-encodes both keys).
            out[name] = (df.rechunk() if df["ts"].is_sorted()
                         else df.sort("ts", maintain_order=True, nulls_last=True))
        else:
            out[name] = df.sort(["ts", "idx"], nulls_last=True)
    return out


def time_format(frames: dict[str, pl.DataFrame], fractional: bool) -> str:
    """``TraceMeta.time_format`` of loaded frames (``fractional``: some time had a decimal part)."""
    max_us = max((frames[f]["ts"].max() or 0) for f in ("ops", "launches", "gpu", "overhead",
                                                         "flows", "memory")) / 1000.0
    if max_us == 0:
        return "empty"
    if max_us > _ABSOLUTE_US:
        return "absolute-us3" if fractional else "absolute-us-int"
    return "relative-ns3"


# --- metadata and steps -------------------------------------------------------------------------


def _opt_int(value: object) -> int | None:
    return _to_int(value) if value is not None else None


def trace_meta(path: Path | str, size: int, top: TopLevel, frames: dict[str, pl.DataFrame],
               time_format: str, event_count: int, counts: LoadCounts | None = None,
               partial: str | None = None) -> TraceMeta:
    """The trace's metadata: devices, versions and vendor from ``top`` and the loaded frames.

    Metadata of an unexpected type is kept as text (a version written as a float, ``4.1``) or
    dropped (a ``deviceProperties`` that is not a list, a ``distributedInfo`` that is not an
    object), never a reason to refuse the trace. ``counts``: what the load left out
    (:class:`LoadCounts`); ``partial``: why only part of the input was read, if it was.
    """
    counts = counts or LoadCounts()
    devices = []
    for d in top.deviceProperties if isinstance(top.deviceProperties, list) else ():
        if not isinstance(d, dict):
            continue
        major, minor = _opt_int(d.get("computeMajor")), _opt_int(d.get("computeMinor"))
        name = d.get("name")
        devices.append(DeviceInfo(
            id=_opt_int(d.get("id")) or 0, name=name if isinstance(name, str) else _meta_text(name) or "",
            compute_capability=f"{major}.{minor if minor is not None else 0}" if major is not None else None,
            num_sms=_opt_int(d.get("numSms")), total_global_mem=_opt_int(d.get("totalGlobalMem")),
        ))
    versions = {k: text for k in VERSION_KEYS if (text := _meta_text(getattr(top, k))) is not None}
    distributed = top.distributedInfo if isinstance(top.distributedInfo, dict) else None
    return TraceMeta(
        path=str(path), size_bytes=size, base_time_ns=_opt_int(top.baseTimeNanoseconds), devices=tuple(devices),
        versions=versions, distributed=distributed, vendor=_vendor(top, frames, counts.unanalysed),
        time_format=time_format, event_count=event_count, trace_name=_meta_text(top.traceName),
        unanalysed_activity=dict(sorted(counts.unanalysed.items())), dropped_events=counts.dropped(),
        partial=partial, annotations=counts.annotations,
    )


def _meta_text(value: object) -> str | None:
    """A metadata value as text: strings as they are, numbers and booleans written out, anything
    else as its JSON; None stays None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value).lower() if isinstance(value, bool) else str(value)
    return msgspec.json.encode(value).decode()


def _vendor(top: TopLevel, frames: dict[str, pl.DataFrame], unanalysed: dict[str, int]) -> str:
    """Whose device the trace's activity ran on (``TraceMeta.vendor``): from the device activity —
    GPU rows speak through their launch calls' family, else the most frequent family of activity
    tracekit does not analyse — then from launch calls alone; ``"cpu"`` when there is neither."""
    launches = frames["launches"]
    if frames["gpu"].height == 0 and unanalysed:
        by_vendor: dict[str, int] = {}
        for cat, n in unanalysed.items():
            vendor = UNANALYSED[cat][1]
            by_vendor[vendor] = by_vendor.get(vendor, 0) + n
        return min(by_vendor, key=lambda v: (-by_vendor[v], v))
    if frames["gpu"].height == 0 and launches.height == 0:
        return "cpu"
    if (top.roctracer_version is not None or top.rocprofiler_version is not None
            or top.hip_runtime_version is not None or launches["name"].str.starts_with("hip").any()):
        return "amd"
    by_vendor = {}
    for cat, n in launches["cat"].value_counts().iter_rows():
        vendor = next((v for prefix, v in LAUNCH_VENDORS if cat.startswith(prefix)), None)
        if vendor is not None:
            by_vendor[vendor] = by_vendor.get(vendor, 0) + n
    return min(by_vendor, key=lambda v: (-by_vendor[v], v)) if by_vendor else "nvidia"


def steps(ops: pl.DataFrame) -> pl.DataFrame:
    """ProfilerStep#N spans, one per step number (the earliest if a step appears twice)."""
    found = (
        ops.filter(pl.col("name").str.starts_with("ProfilerStep#"))
        .with_columns(number=pl.col("name").str.strip_prefix("ProfilerStep#").cast(pl.Int64, strict=False))
        .filter(pl.col("number").is_not_null())
        .sort(["ts", "idx"])
        .unique(subset=["number"], keep="first", maintain_order=True)
    )
    if found.height == 0:
        return empty_frame(STEPS_SCHEMA)
    return found.select(list(STEPS_SCHEMA)).cast(STEPS_SCHEMA)  # type: ignore[arg-type]
