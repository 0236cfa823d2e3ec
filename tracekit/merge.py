"""One trace of many ranks (``tracekit merge DIR``): every rank its own processes, on one clock.

Contract: :func:`merge` reads a directory that is a set of ranks (:func:`tracekit.ranks.analyze`,
whose refusals it keeps), estimates the ranks' clock offsets from their collectives
(:mod:`tracekit.analyses.skew`), and writes one Chrome/Perfetto trace (gzip for ``.json.gz``,
atomically, :mod:`tracekit.output`) in which:

- **processes**: each process ``p`` of rank ``r`` (its host process, each GPU's) becomes pid
  ``(r + 1) * pid_stride + i``, ``i`` its place among the rank's processes (host first: Kineto's
  ``process_sort_index`` order, then the pid); ``pid_stride`` is the smallest power of ten, at least
  :data:`MIN_PID_STRIDE`, above every rank's process count. Each process is named ``rank r`` (its
  non-host processes ``rank r GPU d``, after Kineto's ``process_labels``) and sorted by its new pid,
  so ranks never collide and line up in rank order. Processes holding nothing but metadata (Kineto
  names every GPU of the machine in every rank's file) are left out;
- **clocks**: every time of rank ``r`` moves by ``-offset_ns`` of :attr:`Skew.offsets` (the lowest
  rank's clock; 0 for every rank when no collective matched), and the times are written as µs
  relative to ``baseTimeNanoseconds`` (the earliest aligned time), three decimals: exact to the ns
  for the loader and any viewer;
- **ids**: ``correlation``, ``External id``, ``Record function id``, ``Python id``, ``Python parent
  id`` and the flow events' ``id`` become ``r * ID_STRIDE + id`` (0 and negative values, which
  mean "none", are kept): a kernel and its launch stay linked, no two ranks share one. An id at or
  above :data:`ID_STRIDE` is refused (:class:`UsageError`) rather than wrapped into another rank's.

Everything else of each event is kept as it was. The top level holds the lowest rank's
``schemaVersion`` and ``deviceProperties`` (every rank's devices, by id, first rank first), a
``distributedInfo`` without ``rank`` (the merged trace is no one rank) and ``tracekitMerge``: the
reference rank, each rank's offset and the strides. Ranks are read one at a time, so the memory a
merge needs is one rank's decoded events beyond the output it writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from tracekit.errors import TraceError, UsageError

#: Ids of rank ``r`` become ``r * ID_STRIDE + id``: CUPTI's correlation ids are 32-bit, and the
#: profiler's op ids count up from 0 in one process, so a rank's ids stay below it.
ID_STRIDE = 10**10
#: The ``args`` fields holding ids that link events of one rank (kernel to launch, op to op).
ID_ARGS = ("correlation", "External id", "external id", "Record function id", "Python id",
           "Python parent id")
#: Chrome trace phases whose ``id`` links events (flows, async spans).
ID_PHASES = frozenset("sftbenSTFpO")
#: Fewest pids a rank is given: rank ``r``'s processes are ``(r + 1) * 100 + i``, readable at a glance.
MIN_PID_STRIDE = 100
#: The label Kineto gives a rank's host process.
HOST_LABEL = "CPU"
#: Categories of GPU activities (every era's spelling): a process holding them is a GPU's.
DEVICE_CATEGORIES = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                               "gpu_user_annotation"})
#: gzip level of a ``.json.gz`` output (ISA-L's 1 is faster than zlib's 1).
GZIP_LEVEL = 1
#: The forms of ``-o``.
EXTENSIONS = (".json.gz", ".json")


@dataclass(frozen=True)
class Merged:
    """What :func:`merge` wrote: ``ranks`` (rank numbers, lowest first), ``events`` written,
    ``offsets_ns`` (rank → the offset removed from its times), ``reference`` (the rank whose clock
    the trace is on), ``matched`` (whether collectives matched, so the offsets are estimates
    rather than zeros) and ``pid_stride``."""

    ranks: tuple[int, ...]
    events: int
    offsets_ns: dict[int, int]
    reference: int
    matched: bool
    pid_stride: int


def check_output(output: str) -> bool:
    """Whether ``-o output`` is gzip (``.json.gz``) or plain (``.json``, ``-``); UsageError otherwise."""
    if output == "-":
        return False
    ending = next((e for e in EXTENSIONS if output.lower().endswith(e)), None)
    if ending is None:
        raise UsageError(f"-o {output}: a merged trace is written as .json or .json.gz")
    return ending.endswith(".gz")


def merge(directory: str | os.PathLike[str], output: str, *, workers: int | None = None,
          show_progress: bool = False) -> Merged:
    """Write the ranks of ``directory`` as one trace to ``output`` (module docstring).

    Raises :class:`UsageError` (one line) for a directory that is not a set of ranks, a rank that
    does not load or is a Parquet file (it holds no events to copy), or an id too large to keep
    apart (:data:`ID_STRIDE`)."""
    from tracekit import ranks as rank_set
    from tracekit.output import atomic_path

    gz = check_output(output)
    paths = rank_set.find_traces(directory)
    parquet = [p.name for p in paths if p.name.endswith(".parquet")]
    if parquet:
        raise UsageError(f"{directory}: {parquet[0]} is a Parquet file, which holds no trace events to merge: "
                         "merge the JSON traces it was converted from")
    report = rank_set.analyze(directory, workers=workers, show_progress=show_progress)
    failed = report.ranks.filter(report.ranks["error"].is_not_null())
    if failed.height:
        name, error = failed.row(0, named=True)["file"], failed.row(0, named=True)["error"]
        raise UsageError(f"{directory}: cannot merge: {name}: {error}")
    files = {row["rank"]: Path(directory) / row["file"] for row in report.ranks.iter_rows(named=True)}
    order = sorted(files)
    offsets = {r: 0 for r in order}
    matched = False
    if report.skew is not None and report.skew.instances.height:
        matched = True
        offsets.update(dict(report.skew.offsets.select("rank", "offset_ns").iter_rows()))

    decoded = [_Rank(r, files[r], offsets[r]) for r in order]
    stride = MIN_PID_STRIDE
    while any(len(d.pids) >= stride for d in decoded):
        stride *= 10
    base_ns = min((d.first_ns for d in decoded if d.first_ns is not None), default=0)
    head = decoded[0].top
    devices: dict[Any, Any] = {}
    for d in decoded:
        for device in d.top.get("deviceProperties") or []:
            if isinstance(device, dict):
                devices.setdefault(device.get("id"), device)
    distributed = {k: v for k, v in (head.get("distributedInfo") or {}).items() if k != "rank"} \
        if isinstance(head.get("distributedInfo"), dict) else {}
    top: dict[str, Any] = {
        "schemaVersion": head.get("schemaVersion", 1),
        "deviceProperties": list(devices.values()),
        "distributedInfo": distributed,
        "baseTimeNanoseconds": base_ns + _int(head.get("baseTimeNanoseconds")),
        "traceName": f"{os.path.basename(os.path.normpath(directory))} merged",
        "tracekitMerge": {"reference": order[0], "id_stride": ID_STRIDE, "pid_stride": stride,
                          "offsets_ns": {str(r): offsets[r] for r in order},
                          "clock": "estimated from collective ends" if matched else "none matched: offsets 0"},
    }
    import msgspec

    encode = msgspec.json.Encoder(decimal_format="number").encode
    written = 0
    with atomic_path(output) as tmp, open(tmp, "wb") as raw:
        sink = _gzip(raw) if gz else raw
        try:
            head_bytes = encode(top)
            sink.write(head_bytes[:-1] + b', "traceEvents": [')
            for d in decoded:
                written += _write_events(sink, d.rewrite(stride, base_ns), encode, first=written == 0)
            sink.write(b"\n]}\n")
        finally:
            if sink is not raw:
                sink.close()
    return Merged(ranks=tuple(order), events=written, offsets_ns=offsets, reference=order[0],
                  matched=matched, pid_stride=stride)


def _write_events(sink: IO[bytes], events: list[dict], encode, *, first: bool) -> int:
    """Write ``events`` (one rank's) as members of the ``traceEvents`` array; return how many.

    The list is this function's alone, so it goes when it returns: the next rank is decoded with
    only the output's buffers held (a loop variable would keep one rank's events alive while the
    next is decoded, twice the memory the module docstring states)."""
    for lo in range(0, len(events), 4096):
        chunk = b",\n  ".join(encode(e) for e in events[lo:lo + 4096])
        sink.write((b"\n  " if first else b",\n  ") + chunk)
        first = False
    return len(events)


class _Rank:
    """One rank's file: its processes and earliest aligned time are read when made; its events
    are decoded again by :meth:`rewrite` (one rank's objects in memory at a time)."""

    def __init__(self, rank: int, path: Path, offset_ns: int) -> None:
        self.rank, self.path, self.offset_ns = rank, path, offset_ns
        doc = self._decode()
        self.top = {k: v for k, v in doc.items() if k != "traceEvents"}
        events = doc.get("traceEvents") or []
        used: set[Any] = set()
        sort_index: dict[Any, Any] = {}
        labels: dict[Any, str] = {}
        first: int | None = None
        devices: dict[Any, Any] = {}
        for e in events:
            if not isinstance(e, dict):
                continue
            pid = _key(e.get("pid", 0))
            if e.get("ph") == "M":
                args = e.get("args") if isinstance(e.get("args"), dict) else {}
                if e.get("name") == "process_sort_index":
                    sort_index[pid] = args.get("sort_index")
                elif e.get("name") == "process_labels" and isinstance(args.get("labels"), str):
                    labels[pid] = args["labels"]
                continue
            used.add(pid)
            if e.get("cat") in DEVICE_CATEGORIES and isinstance(e.get("args"), dict):
                devices.setdefault(pid, e["args"].get("device"))
            ns = _ns(e.get("ts"))
            if ns is not None:
                ns -= offset_ns
                first = ns if first is None or ns < first else first

        for pid, device in devices.items():  # unlabelled: a process of GPU activities is that GPU's
            labels.setdefault(pid, f"GPU {device}" if isinstance(device, int) else "GPU")

        for pid in used:  # Kineto's text pids ("Spans", "Traces") are their own label
            if pid not in labels and pid[0] == "str" and pid[1]:
                labels[pid] = pid[1]

        def order(pid: Any) -> tuple:
            index = sort_index.get(pid)
            numeric = isinstance(index, (int, Decimal)) and not isinstance(index, bool)
            host = labels.get(pid) == HOST_LABEL or (pid not in labels and pid[0] != "str")
            return (0 if host else 1, 0 if numeric else 1,
                    index if numeric else 0, str(type(pid[1])), str(pid[1]))

        self.pids = {pid: i for i, pid in enumerate(sorted(used, key=order))}
        self.labels = labels
        self.first_ns = first

    def _decode(self) -> dict:
        import msgspec

        from tracekit.load.source import read_input

        try:
            source = read_input(self.path)
        except TraceError as err:
            raise UsageError(str(err)) from None
        try:
            doc = msgspec.json.Decoder(float_hook=Decimal).decode(source.data)
        except msgspec.DecodeError as err:
            raise UsageError(f"{self.path}: not JSON ({err})") from None
        finally:
            source.release()
        if not isinstance(doc, dict):
            raise UsageError(f"{self.path}: not a Kineto trace (no traceEvents object)")
        return doc

    def rewrite(self, pid_stride: int, base_ns: int) -> list[dict]:
        """The rank's events with pids, times and ids rewritten (module docstring)."""
        out: list[dict] = []
        named: set[int] = set()
        prefix = f"rank {self.rank}"
        for e in self._decode().get("traceEvents") or []:
            if not isinstance(e, dict):
                continue
            pid = _key(e.get("pid", 0))
            if pid not in self.pids:
                continue  # metadata of a process with no events here
            new_pid = (self.rank + 1) * pid_stride + self.pids[pid]
            e["pid"] = new_pid
            ns = _ns(e.get("ts"))
            if ns is not None:
                e["ts"] = _us(ns - self.offset_ns - base_ns)
            args = e.get("args")
            if e.get("ph") == "M" and isinstance(args, dict):
                if e.get("name") == "process_name":
                    label = self.labels.get(pid)
                    args["name"] = prefix if label in (None, HOST_LABEL) else f"{prefix} {label}"
                    named.add(new_pid)
                elif e.get("name") == "process_sort_index":
                    args["sort_index"] = new_pid
            elif isinstance(args, dict):
                for field in ID_ARGS:
                    if field in args:
                        args[field] = self._id(args[field], field)
            if e.get("ph") in ID_PHASES and "id" in e:
                e["id"] = self._id(e["id"], "flow id")
            out.append(e)
        for pid, index in self.pids.items():  # a process Kineto left unnamed still says whose it is
            new_pid = (self.rank + 1) * pid_stride + index
            if new_pid not in named:
                label = self.labels.get(pid)
                out.append({"name": "process_name", "ph": "M", "pid": new_pid, "tid": 0,
                            "args": {"name": prefix if label in (None, HOST_LABEL) else f"{prefix} {label}"}})
        return out

    def _id(self, value: Any, field: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return value  # absent (0, -1) or not a number: nothing to keep apart
        if value >= ID_STRIDE:
            raise UsageError(f"{self.path}: {field} {value} is too large to keep the ranks' ids apart "
                             f"(merge keeps ids below {ID_STRIDE:,})")
        return self.rank * ID_STRIDE + value


def _key(pid: Any) -> tuple[str, Any]:
    """A pid as a hashable key that keeps 0 and "0" apart."""
    return (type(pid).__name__, pid if isinstance(pid, (int, str)) else str(pid))


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, Decimal)) and not isinstance(value, bool) else 0


def _ns(ts: Any) -> int | None:
    """A Chrome trace time (µs, int or exact decimal) as integer ns; None when it is not a number."""
    if isinstance(ts, bool) or not isinstance(ts, (int, Decimal)):
        return None
    if isinstance(ts, Decimal) and not ts.is_finite():
        return None
    return int(ts) * 1000 if isinstance(ts, int) else int((ts * 1000).to_integral_value())


def _us(ns: int) -> int | Decimal:
    """Integer ns as µs: an int when whole, else an exact three-decimal number."""
    return ns // 1000 if ns % 1000 == 0 else Decimal(ns).scaleb(-3)


def _gzip(raw: IO[bytes]) -> IO[bytes]:
    try:
        from isal import igzip

        return igzip.IGzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL)
    except ImportError:  # pragma: no cover - isal is a dependency
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL)
