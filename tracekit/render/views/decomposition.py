"""The step decomposition (:mod:`tracekit.analyses.decomposition`) worded: the one line that says what
limits the trace (:func:`limit_line`), the host-state cells of the Steps table (:func:`step_cells`) and
the note that defines them beside HTA's idle categories (:func:`note`). Nothing here computes a figure:
shares are the analysis' totals put in words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.render.text import duration, pct

if TYPE_CHECKING:
    from tracekit.results.report import Report

#: The host-state columns of the Steps table, in the analysis' priority order, and their headers.
STATE_HEADERS = (("blocked_ns", "blocked"), ("data_ns", "data"), ("dispatch_ns", "dispatch"),
                 ("op_free_ns", "op-free"))
#: Beside the Steps table's title: its idle split is not HTA's (the note under the tables says how).
TABLE_NOTE = " — host time by state, GPU idle by what the host did (not HTA's host_wait/kernel_wait: see the notes)"
#: How each limit reads, first words of the line.
LIMIT_WORDS = {
    "gpu": "GPU-bound",
    "data": "input-bound",
    "dispatch": "dispatch-bound (overhead)",
    "blocked": "sync-bound",
    "op_free": "host-bound outside any op",
}
#: What the host does in each state, as a verb phrase.
HOST_DOES = {"blocked": "is blocked", "data": "waits for data", "dispatch": "dispatches", "op_free": "is in no op"}


def _total(totals: pl.DataFrame, part: str, of: str) -> tuple[int, float]:
    row = totals.filter((pl.col("part") == part) & (pl.col("of") == of))
    return (int(row["total_ns"].item()), float(row["share"].item())) if row.height else (0, 0.0)


def limit_line(report: Report) -> str | None:
    """What limits the trace's steady units, in one line ("input-bound: 54.0% of the wall waiting for
    the data loader (…); the GPU is busy …"), or None without a decomposition."""
    found = report.decomposition
    if found is None or found.limit is None or found.units.height == 0:
        return None
    steady = found.units.filter(pl.col("steady")) if report.selected_step is None else found.units
    wall = int(steady["wall_ns"].sum())
    totals = found.totals
    busy, _ = _total(totals, "gpu_busy", "wall")
    idle, _ = _total(totals, "gpu_idle", "gpu_window")
    scope = (f"step {report.selected_step}" if report.selected_step is not None
             else f"{steady.height} steady step{'s' if steady.height != 1 else ''}")
    words = LIMIT_WORDS[found.limit]
    if found.limit == "gpu":
        return f"{words}: the GPU is busy {pct(busy, wall)} of the wall ({scope})"
    part, _ = _total(totals, found.limit, "cpu_span")
    while_part, _ = _total(totals, f"idle_while_{found.limit}", "gpu_idle")
    what = {
        "data": "waiting for the data loader",
        "dispatch": "issuing work (inside ops and launch calls)",
        "blocked": "blocked until the GPU catches up (synchronise calls, blocking copies)",
        "op_free": "in no op (Python between ops, sleeps, unprofiled work)",
    }[found.limit]
    return (f"{words}: {pct(part, wall)} of the wall {what} ({scope}); the GPU is busy {pct(busy, wall)}, "
            f"and {pct(while_part, idle)} of its idle time falls while the host {HOST_DOES[found.limit]}")


def step_cells(report: Report, step: int) -> list[str]:
    """The Steps table's decomposition cells of unit ``step``: blocked, data, dispatch, op-free, the GPU
    idle time's largest host state, and the unit's limit ("–" cells without a decomposition)."""
    found = report.decomposition
    row: dict[str, Any] | None = None
    if found is not None:
        rows = found.units.filter(pl.col("step") == step)
        row = rows.row(0, named=True) if rows.height else None
    if row is None:
        return ["–"] * (len(STATE_HEADERS) + 2)
    cells = [duration(row[column]) for column, _ in STATE_HEADERS]
    idle = {state: row[f"idle_while_{state}_ns"] for state in ("blocked", "data", "dispatch", "op_free")}
    state, most = max(idle.items(), key=lambda kv: kv[1])
    cells.append(f"{duration(most)} {state.replace('_', '-')}" if most else "–")
    cells.append(row["limit"].replace("_", "-"))
    return cells


def headers() -> list[str]:
    """The headers of :func:`step_cells`."""
    return [header for _, header in STATE_HEADERS] + ["GPU idle mostly while", "limit"]


def note(report: Report) -> str | None:
    """The rule behind the decomposition cells, and how it differs from HTA's idle categories."""
    if report.decomposition is None or report.decomposition.units.height == 0:
        return None
    from tracekit.analyses.decomposition import LIMIT_RULE

    return ("Step decomposition: each step's CPU span is split, instant by instant over all threads of its "
            "process, into blocked (synchronise calls, blocking or pageable copies), data (inside a "
            "DataLoader's __next__ or a data annotation), dispatch (inside any other op or launch call) and "
            "op-free (the rest); the four sum to the span. Its GPU idle time is split by the host state at "
            f"each idle instant. Limit: {LIMIT_RULE}. HTA's idle categories differ: HTA splits each stream's "
            "gaps between kernels into host_wait (the next kernel's launch call started after the previous "
            "kernel ended), kernel_wait (shorter than its consecutive_kernel_delay) and other; tracekit "
            "splits the device's idle time (any stream busy counts as busy) by what the host process was "
            "doing, so HTA's host_wait spans tracekit's data, dispatch and op-free.")
