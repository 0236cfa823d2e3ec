"""What several rules share when a fix saves two resources at once: which one reaches the wall.

Contract: :func:`best_resource` takes the context and a saving per resource (ns per step, or None
when the trace cannot price it) and returns the ``(resource, saving)`` pair whose projection on the
steady steps' wall (:func:`tracekit.findings.wall.on_wall`) is the largest — a fusion that removes
both GPU traffic and host dispatch is priced on the GPU where the step is GPU-bound and on the host
where the host sets the pace. Ties go to the first resource given; ``(first, None)`` when none is
priced.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings import wall
from tracekit.findings.model import Context


def best_resource(context: Context, savings: dict[str, float | None]) -> tuple[str, float | None]:
    """The resource of ``savings`` (module docstring) whose saving reaches the wall most, and that saving."""
    units = context.decomposition.units.filter(pl.col("step").is_in(context.steady))
    best: tuple[str, float | None] = (next(iter(savings)), None)
    reach = -1.0
    for resource, saving in savings.items():
        if saving is None:
            continue
        projected = wall.on_wall(resource, saving, units)
        if projected > reach:
            best, reach = (resource, saving), projected
    return best
