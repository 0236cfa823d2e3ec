"""A finding's price on the critical path: what the step's wall time would lose if it were fixed.

Contract: :func:`price` takes a :class:`~tracekit.findings.model.Finding` (its saving per step in its
``resource``), the decomposition's units frame
(:data:`tracekit.analyses.decomposition.UNITS_SCHEMA`) limited to the units the findings are taken
over, and the whole trace's units; it returns the finding with ``saving_wall_ns``, ``wall_basis`` and
``severity`` set. :func:`floor_ns` is the warning floor of those units.

How a saving of ``x`` ns per step reaches the wall, unit by unit (the mean over the units is the
figure; a unit's figure never exceeds ``x``; ``wall`` is capped over the units as a whole):

- ``gpu`` — GPU time removed: the unit's wall can fall to what the host must still do,
  ``host = dispatch + data + op_free`` (the CPU span less the time it was blocked waiting for the
  GPU): ``min(x, max(0, wall − host))``. A CPU-bound unit (host ≈ wall) gains ≈ 0; a unit whose host
  mostly waits for the GPU gains ≈ ``x``.
- ``host`` — host work removed (dispatch, data loading, Python): the wall can fall to the GPU's busy
  time: ``min(x, max(0, wall − gpu_busy))``. A GPU-bound unit gains ≈ 0; a dispatch-bound unit ≈ ``x``.
- ``wall`` — the detector measured the wall time itself (the GPU idle a stall or a sync caused), as a
  mean over the units: ``x``, capped at the units' mean ``wall − gpu_busy`` (a stall that hits some
  units only is measured per unit by its detector; capping it unit by unit would cut it to the
  quiet units' room).
- ``once`` — a one-time cost (a cold step, a recompile): ``x`` once; its floor is taken against the
  whole trace's wall, not a step's.

Severity follows the wall price (:data:`WARN_MIN_STEP_SHARE`, :data:`WARN_MIN_NS`): a rule whose
table row says ``warning`` yields a warning only when its wall saving is at least the floor; below it,
or with no price, ``info``. A finding the trace cannot price is never a warning.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from tracekit.findings.model import Finding

#: A warning saves at least this share of the (median steady) step's wall: below it, the fix is not
#: worth a reviewer's time, however true (the answer key's "trivial" verdict).
WARN_MIN_STEP_SHARE = 0.01
#: ... and at least this much per step: 1 % of a 50 µs micro-benchmark step is run-to-run noise.
WARN_MIN_NS = 20_000

_BASIS = {
    "gpu": "GPU time on the critical path: min(saving, wall − host work) per step",
    "host": "host time on the critical path: min(saving, wall − GPU busy) per step",
    "wall": "wall time measured in the trace",
    "once": "once, not every step",
}


def floor_ns(units: pl.DataFrame) -> float:
    """The warning floor of ``units`` (decomposition units frame): the larger of
    :data:`WARN_MIN_NS` and :data:`WARN_MIN_STEP_SHARE` of their median wall."""
    median = units["wall_ns"].median() if units.height else None
    return max(WARN_MIN_NS, WARN_MIN_STEP_SHARE * float(median or 0))


def on_wall(resource: str, saving_ns: float, units: pl.DataFrame) -> float:
    """``saving_ns`` per step of ``resource`` projected on the wall of ``units`` (module docstring),
    ns per step; the saving itself for ``once``."""
    if resource == "once" or units.height == 0:
        return saving_ns
    x = pl.lit(float(saving_ns))
    wall = pl.col("wall_ns").cast(pl.Float64)
    if resource == "gpu":
        room = wall - (pl.col("dispatch_ns") + pl.col("data_ns") + pl.col("op_free_ns"))
    elif resource in ("host", "wall"):
        room = wall - pl.col("gpu_busy_ns")
    else:
        raise ValueError(f"unknown resource {resource!r}")
    room = room.clip(lower_bound=0)
    if resource == "wall":
        # Measured on the wall already, as a mean over the steps: a stall that hits some steps hard
        # and others not at all is capped by the steps' mean room, not step by step.
        return float(units.select(pl.min_horizontal(x, room.mean())).item() or 0.0)
    return float(units.select(pl.min_horizontal(x, room).mean()).item() or 0.0)


def price(finding: Finding, units: pl.DataFrame, trace_units: pl.DataFrame) -> Finding:
    """``finding`` with its wall saving, its basis and its severity (module docstring). ``units``: the
    decomposition units the findings are taken over (the steady ones, or the one ``--step`` names);
    ``trace_units``: every unit (what a one-time cost is weighed against)."""
    saving = finding.saving_ns_per_step
    if saving is None:
        return replace(finding, saving_wall_ns=None, wall_basis="not priced", severity="info")
    wall = int(round(on_wall(finding.resource, saving, units)))
    if finding.resource == "once":
        total = float(trace_units["wall_ns"].sum()) if trace_units.height else 0.0
        floor = max(WARN_MIN_NS, WARN_MIN_STEP_SHARE * total)
    else:
        floor = floor_ns(units)
    severity = "warning" if finding.severity == "warning" and wall >= floor else "info"
    return replace(finding, saving_wall_ns=wall, wall_basis=_BASIS[finding.resource], severity=severity)
