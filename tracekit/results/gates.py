"""A ``--fail-if`` gate and its result, for ``tracekit diff`` and ``tracekit compare`` alike (parsed
and tested by :mod:`tracekit.diff.gates`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    """A parsed ``--fail-if`` expression.

    Attributes
    ----------
    text : str
        The expression as given, stripped.
    metric : str
        The metric's name.
    op : str
        ``>`` | ``>=`` | ``<`` | ``<=``.
    value : float
        The threshold: in % when ``relative``, else in the metric's base unit (ns, bytes, count).
    relative : bool
        Whether the threshold is a change in % (against A, or the baseline).
    """

    text: str
    metric: str
    op: str
    value: float
    relative: bool


@dataclass(frozen=True)
class GateResult:
    """A gate tested on a diff or a comparison.

    Attributes
    ----------
    gate : Gate
        The gate.
    observed : float or None
        A diff's change ``B - A``; a comparison's most extreme value over its traces (the largest
        for ``>``/``>=``, the smallest for ``<``/``<=``). In % when the gate is relative (infinite
        when A's value is 0), else in base units (ns, bytes, count).
    exceeded : bool
        Whether the threshold is exceeded (a comparison: by any trace).
    within_noise : bool
        Whether a diff's change is within the step-to-step noise (:mod:`tracekit.results.diff`);
        always False for a comparison.
    traces : tuple of str
        The labels of a comparison's traces that exceed the gate; empty for a diff.
    """

    gate: Gate
    observed: float | None
    exceeded: bool
    within_noise: bool = False
    traces: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Exceeded, and not within the noise."""
        return self.exceeded and not self.within_noise
