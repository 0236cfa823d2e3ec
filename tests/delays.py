"""Inject a known delay on one rank before one collective into real multi-rank Kineto traces.

:func:`inject` takes the ranks' trace objects (as ``json.load`` gives them), a rank, a collective
(its position among that rank's NCCL kernels in start order: the same collective on every rank of
one process group), a phase (``forward``, ``backward`` or ``data``) and a delay, and returns new trace
objects in which that rank spent the delay longer in one op of that phase just before the collective:

* the delayed op: on the rank's process, the last op of the phase that ends between the rank's
  launch of the previous collective (or the trace's start) and its launch of this one — ``data``: a
  data-loading span (``enumerate(DataLoader)#…``); ``backward``: an
  ``autograd::engine::evaluate_function: …`` span (the autograd engine's thread); ``forward``: an
  ``aten::`` op on the main thread (tid = pid) outside any data-loading span. Its end is the point P;
* on the delayed rank, every event at or after P moves by the delay, and every span around P (the
  op, its parents, the ProfilerStep) lasts the delay longer: the rank's host, and the GPU work it
  launches afterwards, run that much later, consistently;
* on every other rank the collective's kernel lasts the delay longer (it waits for the late rank
  inside NCCL), and every event at or after its original end moves by the delay (spans around that
  instant last longer): the fleet leaves the collective together, the delay later.

What it does not model: the delayed rank's own kernel keeps its length (had the rank been waiting
for a later peer before, that wait would shrink), and a GPU kernel launched before P but running
after it moves too. Both keep every rank's timeline in order and the collectives' ends together,
which is what the cross-rank analysis reads; choose a delay longer than the collective's existing
skew so that the injected rank is the last to arrive. The step lengths of every rank grow by the
delay, so a delay in backward hides from a step-length rule exactly as a straggler hidden by DDP's
all-reduce does: every rank's step is longer, the late one's not the most.
"""

from __future__ import annotations

import copy
from typing import Any

PHASES = ("forward", "backward", "data")


def _is_nccl_kernel(e: dict) -> bool:
    return e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel") and e.get("name", "").lower().startswith(("nccl", "rccl"))


def collectives(trace: dict) -> list[dict]:
    """The trace's NCCL kernels in start order."""
    return sorted((e for e in trace["traceEvents"] if _is_nccl_kernel(e)), key=lambda e: (e["ts"], e.get("dur", 0)))


def _launch_ts(trace: dict, kernel: dict) -> float:
    corr = kernel.get("args", {}).get("correlation")
    for e in trace["traceEvents"]:
        if e.get("cat") in ("cuda_runtime", "Runtime") and e.get("args", {}).get("correlation") == corr:
            return e["ts"]
    raise ValueError(f"no launch call for kernel correlation {corr}")


def _in_data(e: dict, data_spans: list[dict]) -> bool:
    return any(d["pid"] == e["pid"] and d["ts"] <= e["ts"] < d["ts"] + d["dur"] for d in data_spans)


def _phase_op(trace: dict, phase: str, lo: float, hi: float) -> dict:
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    data = [e for e in spans if e["name"].startswith("enumerate(DataLoader)")]
    if phase == "data":
        pick = data
    elif phase == "backward":
        pick = [e for e in spans if e["name"].startswith("autograd::engine::evaluate_function")]
    elif phase == "forward":
        pick = [e for e in spans if e["cat"] == "cpu_op" and e["name"].startswith("aten::")
                and e["tid"] == e["pid"] and not _in_data(e, data)]
    else:
        raise ValueError(f"phase must be one of {PHASES}")
    inside = [e for e in pick if lo <= e["ts"] and e["ts"] + e["dur"] <= hi]
    if not inside:
        raise ValueError(f"no {phase} op between {lo} and {hi}")
    return max(inside, key=lambda e: (e["ts"] + e["dur"], e["ts"]))


def _shift(trace: dict, point: float, delay: float) -> None:
    """Every event at or after ``point`` later by ``delay``; every span around it longer by it."""
    for e in trace["traceEvents"]:
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        if ts >= point:
            e["ts"] = ts + delay
        elif e.get("ph") == "X" and isinstance(e.get("dur"), (int, float)) and ts + e["dur"] >= point:
            e["dur"] = e["dur"] + delay


def inject(traces: dict[int, dict], rank: int, collective: int, phase: str, delay_us: float) -> tuple[dict[int, dict], dict]:
    """``traces`` (rank → trace object) with ``delay_us`` injected on ``rank`` in ``phase`` before its
    collective number ``collective`` (module docstring); returns the new traces and what was done:
    ``{"op": name, "point_us": P, "ends_us": {rank: the collective's original end}}``."""
    out = {r: copy.deepcopy(t) for r, t in traces.items()}
    mine = collectives(out[rank])
    kernel = mine[collective]
    hi = _launch_ts(out[rank], kernel)
    lo = _launch_ts(out[rank], mine[collective - 1]) if collective > 0 else float("-inf")
    op = _phase_op(out[rank], phase, lo, hi)
    point = op["ts"] + op["dur"]
    ends = {}
    for r, trace in out.items():
        if r == rank:
            _shift(trace, point, delay_us)
        else:
            k = collectives(trace)[collective]
            ends[r] = k["ts"] + k["dur"]
            _shift(trace, ends[r], delay_us)
    return out, {"op": op["name"], "point_us": point, "ends_us": ends}
