"""The typed decode of trace events: msgspec structs naming only the fields tracekit reads.

Contract: :data:`EVENTS_DECODER` decodes a JSON array of events into :class:`Event` structs whose
fields have the types Kineto writes; :func:`decode_chunk` uses it, and when a chunk holds a value of
an unexpected JSON type (a string where an id should be…) decodes the chunk again into
:class:`LenientEvent` structs that accept any JSON value (the columns coerce them later), so odd
producers load instead of failing. An entry that is not an object or has no ``ph`` is skipped and
counted; only text that is not JSON, or JSON nested past the decoder's limit, is a
:class:`~tracekit.errors.TraceError`. Both struct families are generated from one field table
(:data:`ARGS_FIELDS`, :data:`EVENT_FIELDS`): a field is added in one place.

``Input Dims`` / ``Input type`` / ``grid`` / ``block`` stay raw JSON text (``Raw``), parsed only by
the analyses that need them. The 2024 absolute 3-decimal µs times do not fit a float64; for those
:func:`replace_with_exact_times` reads the times again as decimals. The structs are ``gc=False``:
the cyclic GC never needs to look at them.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import TraceError

#: Below this many µs a float64 still resolves 1 ns (its ulp is under 0.001 µs), so the 3-decimal
#: text is recovered exactly from the float; above it the text itself must be read (decimal path).
FLOAT_EXACT_US = float(2**43)

# msgspec cannot decode ``Raw | None``; an empty Raw stands for "absent".
EMPTY_RAW = msgspec.Raw(b"")
#: The default of a field every event must have.
REQUIRED = msgspec.NODEFAULT

#: An event's ``args`` fields tracekit reads: (attribute, JSON name, strict type, default).
ARGS_FIELDS: tuple[tuple[str, str, Any, Any], ...] = (
    ("external_id", "External id", int | None, None),
    # 2021 Runtime/Kernel/Memcpy events spell it in lower case (and then it names the op's id).
    ("external_id_lc", "external id", int | None, None),
    ("correlation", "correlation", int | None, None),
    ("record_function_id", "Record function id", int | None, None),
    ("sequence_number", "Sequence number", int | None, None),
    ("input_dims", "Input Dims", msgspec.Raw, EMPTY_RAW),
    ("input_types", "Input type", msgspec.Raw, EMPTY_RAW),
    ("device", "device", int | None, None),
    ("stream", "stream", int | str | None, None),
    ("grid", "grid", msgspec.Raw, EMPTY_RAW),
    ("block", "block", msgspec.Raw, EMPTY_RAW),
    ("registers", "registers per thread", int | None, None),
    ("shared_memory", "shared memory", int | None, None),
    ("bytes", "bytes", int | str | None, None),
    ("cbid", "cbid", int | None, None),
    # CUPTI's ids of the CUDA graph (exec graph) and graph node that ran a replayed activity (0 when
    # the activity was not replayed from a graph); newer Kineto writes them on kernels, memcpys, memsets.
    ("graph_id", "graph id", int | None, None),
    ("graph_node_id", "graph node id", int | None, None),
    ("cid", "cid", int | None, None),  # ROCm's name for the callback id
    ("name", "name", str | None, None),  # metadata events: process/thread name
    ("addr", "Addr", int | None, None),
    ("mem_bytes", "Bytes", int | None, None),
    ("total_allocated", "Total Allocated", int | None, None),
    ("total_reserved", "Total Reserved", int | None, None),
    ("device_type", "Device Type", int | None, None),
    ("device_id", "Device Id", int | None, None),
    # Collective metadata (record_param_comms ops since PyTorch ~2.1; NCCL kernels too since ~2.4):
    # libkineto's CollectiveMetadataFields. Ranks and split sizes are written as text ("[0, 1]")
    # or as lists, so they stay raw.
    ("collective", "Collective name", str | None, None),
    ("pg_name", "Process Group Name", str | int | None, None),
    ("pg_desc", "Process Group Description", str | None, None),
    ("pg_ranks", "Process Group Ranks", msgspec.Raw, EMPTY_RAW),
    ("group_size", "Group size", int | str | None, None),
    ("seq", "Seq", int | str | None, None),
    ("in_nelems", "In msg nelems", int | str | None, None),
    ("out_nelems", "Out msg nelems", int | str | None, None),
    ("dtype", "dtype", str | None, None),
    ("in_split", "In split size", msgspec.Raw, EMPTY_RAW),
    ("out_split", "Out split size", msgspec.Raw, EMPTY_RAW),
)

#: An event's own fields, as :data:`ARGS_FIELDS` (``args`` itself is added per struct below).
EVENT_FIELDS: tuple[tuple[str, str, Any, Any], ...] = (
    # Every Chrome trace event has a ph, and it tells events from other JSON: required in both.
    ("ph", "ph", str, REQUIRED),
    ("cat", "cat", str, ""),
    ("name", "name", str, ""),
    ("pid", "pid", int | str, 0),
    ("tid", "tid", int | str, 0),
    ("ts", "ts", int | float | None, None),
    ("dur", "dur", int | float | None, None),
    ("id", "id", int | str | None, None),
)


def _struct_fields(table: tuple[tuple[str, str, Any, Any], ...], *, lenient: bool) -> list[tuple[str, Any, Any]]:
    """``defstruct`` fields of ``table``; ``lenient`` accepts any JSON value, except in a required
    field (what makes the JSON an event) and a Raw one (kept as text whatever it holds)."""
    fields = []
    for attr, json_name, strict, default in table:
        kind = Any if lenient and default is not REQUIRED and strict is not msgspec.Raw else strict
        fields.append((attr, kind, msgspec.field(default=default, name=json_name)))
    return fields


Args = msgspec.defstruct("Args", _struct_fields(ARGS_FIELDS, lenient=False), module=__name__,
                         frozen=True, gc=False)
LenientArgs = msgspec.defstruct("LenientArgs", _struct_fields(ARGS_FIELDS, lenient=True), module=__name__,
                                frozen=True, gc=False)
#: The args of an event that has none (read where an event's args may be absent).
NO_ARGS = Args()
Event = msgspec.defstruct("Event", [*_struct_fields(EVENT_FIELDS, lenient=False), ("args", Args, NO_ARGS)],
                          module=__name__, gc=False)
LenientEvent = msgspec.defstruct(
    "LenientEvent", [*_struct_fields(EVENT_FIELDS, lenient=True), ("args", LenientArgs | None, None)],
    module=__name__, gc=False)
#: An event whose ``args`` is not an object: read without them (the event is kept).
_ArglessEvent = msgspec.defstruct(
    "ArglessEvent", _struct_fields(EVENT_FIELDS, lenient=True), module=__name__, gc=False)


class ExactTimes(msgspec.Struct, gc=False):
    """Times only, as decimals: the 2024 absolute 3-decimal µs form does not fit a float64."""

    ts: Any = None
    dur: Any = None


#: ``deviceProperties`` fields read, by JSON name.
DEVICE_FIELDS = ("id", "name", "computeMajor", "computeMinor", "numSms", "totalGlobalMem")

VERSION_KEYS = (
    "schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
    "roctracer_version", "rocprofiler_version", "hip_runtime_version", "hip_driver_version",
)


#: The trace object's metadata fields tracekit reads, besides the versions.
META_KEYS = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName")

#: The trace object around the events: its metadata, and the events as ``Raw`` views (``nodes``:
#: an execution trace's node list, present when one was given as the trace). Only ``traceEvents``
#: has a required shape (a list, or absent); every metadata field accepts any JSON value — writers
#: differ (ROCm writes ``"roctracer_version": 4.1``, a float) and a metadata field of an odd type is
#: kept as text or dropped (:func:`tracekit.load.frames.trace_meta`), never a reason to refuse a trace.
TopLevel = msgspec.defstruct(
    "TopLevel", [("traceEvents", list[msgspec.Raw] | None, None), ("nodes", msgspec.Raw, EMPTY_RAW),
                 *((key, Any, None) for key in (*META_KEYS, *VERSION_KEYS))],
    module=__name__)


TOP_DECODER = msgspec.json.Decoder(TopLevel)
BARE_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
EVENTS_DECODER = msgspec.json.Decoder(list[Event])
LENIENT_DECODER = msgspec.json.Decoder(list[LenientEvent])
_ONE_LENIENT_DECODER = msgspec.json.Decoder(LenientEvent)
_ONE_ARGLESS_DECODER = msgspec.json.Decoder(_ArglessEvent)

#: Times an event may carry, in ns (``ts`` in [MIN_TS_NS, MAX_TS_NS), ``dur`` in [0, MAX_DUR_NS]):
#: any sum or difference of two of them fits an Int64, and absolute µs since 1970 fit until 2116.
#: An event outside them is dropped and counted (``TraceMeta.dropped_events["unusable_time"]``).
MAX_TS_NS = 2**62
MIN_TS_NS = -(2**61)
MAX_DUR_NS = 2**61
#: The nesting msgspec decodes (it stops at Python's recursion limit, about 1,000 levels, counting
#: the frames already on the stack; a process that lifted the limit — torch.compile sets at least
#: 2,000 — decodes deeper): deeper JSON is refused with one line.
NESTING_PROBLEM = ("JSON nested deeper than the decoder's limit (about 1,000 levels); "
                   "no trace nests that deep")
_EXACT_TIMES_DECODER = msgspec.json.Decoder(list[ExactTimes], float_hook=decimal.Decimal)

#: A chunk of events, not yet decoded: called with a decoder, it returns the chunk's events.
Decode = Callable[[msgspec.json.Decoder], list[Any]]


def short(err: Exception) -> str:
    """msgspec's error on one line, naming the list it is about."""
    # msgspec reports "... - at `$[12].ts`".
    return str(err).splitlines()[0].replace("`$.traceEvents[", "`traceEvents[")


def decode_chunk(path: Path, decode: Decode, start: int) -> tuple[list[Any], int]:
    """The events of one chunk and how many of its entries were skipped as not events (``start``:
    the index of its first entry, unused but for symmetry with the callers' progress).

    The events are :class:`Event` structs, or :class:`LenientEvent` structs whose ``cat`` and
    ``name`` are text when some value had an unexpected type. An entry that is not an object, or
    has no ``ph``, is not a trace event: it is skipped and counted (the chunk is then decoded entry
    by entry, which only such chunks pay for). TraceError when the text is not JSON or nests
    deeper than the decoder can go.
    """
    skipped = 0
    try:
        try:
            return decode(EVENTS_DECODER), 0
        except msgspec.ValidationError:
            pass
        # The typed decode can stop at a wrong type before reaching the text that is not JSON:
        # each decode below may still find that it is not.
        try:
            events = decode(LENIENT_DECODER)
        except msgspec.ValidationError:
            events, skipped = _entry_by_entry(decode(BARE_LIST_DECODER))
    except msgspec.DecodeError as err:
        raise TraceError(path, f"malformed event JSON ({short(err)})") from None
    except RecursionError:
        raise TraceError(path, NESTING_PROBLEM) from None
    for e in events:  # categories and names are routed and compared as text
        if not isinstance(e.cat, str):
            e.cat = "" if e.cat is None else msgspec.json.encode(e.cat).decode()
        if not isinstance(e.name, str):
            e.name = "" if e.name is None else msgspec.json.encode(e.name).decode()
    return events, skipped


def _entry_by_entry(raws: list[msgspec.Raw]) -> tuple[list[Any], int]:
    """(events, entries skipped) of a chunk holding entries that are not events: each entry decoded
    on its own; one whose ``args`` are not an object keeps everything but them."""
    events: list[Any] = []
    skipped = 0
    for raw in raws:
        try:
            events.append(_ONE_LENIENT_DECODER.decode(raw))
            continue
        except msgspec.ValidationError:
            pass
        try:
            e = _ONE_ARGLESS_DECODER.decode(raw)
        except msgspec.ValidationError:
            skipped += 1
        else:
            events.append(LenientEvent(*(getattr(e, f) for f in e.__struct_fields__)))
    return events, skipped


def needs_exact_times(events: list[Any]) -> bool:
    """True for the 2024 form: absolute µs written with 3 decimals (beyond float64's precision)."""
    for e in events[:5000]:
        ts = e.ts
        if isinstance(ts, float) and FLOAT_EXACT_US <= abs(ts) < _MAX_TS_US:
            return True
    return False


_MAX_TS_US = MAX_TS_NS / 1000


def replace_with_exact_times(path: Path, decode: Decode, events: list[Any]) -> None:
    """Set each event's ts/dur to exact integer ns, read again from the text as decimals."""
    try:
        exact = decode(_EXACT_TIMES_DECODER)
    except msgspec.MsgspecError as err:  # pragma: no cover - the first decode already passed
        raise TraceError(path, f"malformed event JSON ({short(err)})") from None
    thousand = decimal.Decimal(1000)
    for e, x in zip(events, exact):
        e.ts = _decimal_ns(x.ts, thousand)
        e.dur = _decimal_ns(x.dur, thousand)


def _decimal_ns(value: object, thousand: decimal.Decimal) -> int | None:
    if isinstance(value, decimal.Decimal):
        if not value.is_finite() or value.adjusted() > 18:  # far past any usable time: no huge int
            return UNUSABLE_NS
        ns = int((value * thousand).to_integral_value(decimal.ROUND_HALF_EVEN))
    elif isinstance(value, int) and not isinstance(value, bool):
        ns = value * 1000
    else:
        return None if value is None else UNUSABLE_NS
    return ns if MIN_TS_NS <= ns <= MAX_TS_NS else UNUSABLE_NS


#: An exact time that is no time (see :data:`MAX_TS_NS`): outside every range, so it is dropped.
UNUSABLE_NS = 2**63
