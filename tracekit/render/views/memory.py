"""The report's "Memory" section as rows of display strings (:mod:`tracekit.analyses.memory`).

Like :mod:`tracekit.render.views.tables`, each table is ``(title, headers, rows)`` of display
strings (names as :class:`~tracekit.render.text.Code`), which every printer escapes. A trace without ``[memory]`` events gets no table, only :func:`hint`'s one line.
Nothing here computes a figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.render.text import Code, Rows, size
from tracekit.render.views.labels import step_label

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: The one line a report without memory events shows in its Memory section.
HINT = ("no [memory] events in this trace: record them with torch.profiler.profile(profile_memory=True) "
        "(tracekit capture --profile-memory)")
#: What the "what holds the peak" table says of a device whose events carry no block address.
NO_ADDRESSES = ("(unknown: this trace's [memory] events carry no block address, as before PyTorch 1.9; "
                "totals and per-op bytes only)")
#: Rows of the per-op tables (the JSON has them all).
TOP_OPS = 15


def _ms(ns: int | None) -> str:
    return "–" if ns is None else f"{ns / 1e6:,.3f} ms"


def hint(report: Report) -> str | None:
    """The Memory section's one line when the trace has no memory events (None otherwise, and for a
    report made without the memory analysis)."""
    memory = getattr(report, "memory", None)
    return HINT if memory is not None and memory.events == 0 else None


def _op(name: str | None) -> Code | str:
    return Code(name) if name else "–"


def tables(report: Report) -> list[Rows]:
    """Peak per device, peak per unit, what holds the peak, per-op allocations, growth per unit and
    out-of-memory events (empty without memory events)."""
    memory = getattr(report, "memory", None)
    if memory is None or (memory.events == 0 and not memory.set_aside):
        return []
    devices = []
    for d in memory.devices.iter_rows(named=True):
        at = (f"{step_label(report, d['peak_step'])} +{_ms(d['peak_offset_ns'])}" if d["peak_step"] is not None
              else "outside every step")
        devices.append([d["device"], size(d["peak_allocated"]), at, _op(d["op"]), _op(d["top_op"]),
                        d["phase"] or "–", size(d["peak_reserved"]), size(d["fragmentation"]),
                        size(d["total_memory"]), size(d["headroom"]), size(d["before_trace_at_peak"]),
                        f"{d['allocations']:,}", str(d["out_of_memory"])])
    out: list[Rows] = [(
        "Memory — peak per device (allocator totals; CPU allocations are their own row)",
        ["device", "peak allocated", "at", "op", "top-level op", "phase", "peak reserved",
         "reserved − allocated at peak", "device memory", "headroom (memory − peak reserved)",
         "held since before the trace", "allocations", "out of memory"], devices)]
    step_rows = [[step_label(report, r["step"]), r["device"], size(r["peak_allocated"]), size(r["peak_reserved"]),
                  size(r["allocated_at_start"]), size(r["allocated_at_end"]), _op(r["op"]), r["phase"] or "–"]
                 for r in memory.steps.iter_rows(named=True)]
    out.append(("Memory — peak per step", ["step", "device", "peak allocated", "peak reserved",
                                           "allocated at start", "at end", "op at the peak", "phase"], step_rows))
    live = [[r["device"], _op(r["op"]), _op(r["top_op"]), r["phase"] or "–", f"{r['blocks']:,}", size(r["bytes"]),
             size(r["largest"])] for r in memory.live.head(TOP_OPS).iter_rows(named=True)]
    before = [[d["device"], "(allocated before the trace)", "–", "–", "–", size(d["before_trace_at_peak"]), "–"]
              for d in memory.devices.iter_rows(named=True) if d["before_trace_at_peak"]]
    before += [[d["device"], NO_ADDRESSES, "–", "–", "–", "–", "–"]
               for d in memory.devices.iter_rows(named=True) if not d["addressed"]]
    out.append(("Memory — what holds the peak (blocks alive at it, by the op that allocated them)",
                ["device", "allocated by", "top-level op", "phase", "blocks", "bytes", "largest"], live + before))
    ops = [[r["device"], _op(r["op"]), f"{r['allocations']:,}", size(r["bytes_allocated"]), size(r["bytes_freed"]),
            size(r["net"]), size(r["largest"]), size(r["incl_bytes_allocated"]), size(r["incl_net"])]
           for r in memory.ops.head(TOP_OPS).iter_rows(named=True)]
    out.append((f"Memory — allocations by op (top {TOP_OPS} by bytes allocated incl. children)",
                ["device", "op", "allocations", "allocated (self)", "freed (self)", "net (self)", "largest",
                 "allocated (incl.)", "net (incl.)"], ops))
    growth = [[step_label(report, r["step"]), r["device"], _op(r["op"]), size(r["net"]), f"{r['allocations']:,}"]
              for r in memory.growth.iter_rows(named=True)]
    out.append(("Memory — ops that grew memory most per step (allocated − freed in the op)",
                ["step", "device", "op", "net", "allocations"], growth))
    if memory.set_aside:
        from tracekit.analyses.memory import SET_ASIDE

        out.append(("Memory — events set aside", ["events", "why"],
                    [[f"{n:,}", SET_ASIDE.get(why, why)] for why, n in memory.set_aside.items()]))
    if memory.out_of_memory.height:
        out.append(("Memory — out-of-memory events", ["device", "requested", "allocated", "reserved", "op"],
                    [[r["device"], size(r["bytes"]), size(r["allocated"]), size(r["reserved"]), _op(r["op"])]
                     for r in memory.out_of_memory.iter_rows(named=True)]))
    return out
