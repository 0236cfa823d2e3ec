"""``tracekit check``'s result: every expectation tested against every unit, as numbers (made by
:func:`tracekit.diff.expect.check`, worded by the renderers)."""

from __future__ import annotations

from typing import ClassVar

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Item:
    """One expectation tested against every unit, as numbers (a renderer words them).

    ``unit`` says what the values measure: ``count``, ``bytes``, ``ns``, ``percent`` (GPU busy as a
    % of the step's wall time), ``bool`` (``compile_preops``: present or absent) or ``names`` (a
    glob pattern over classes, kernels or CPU ops). ``op`` is how the observed values are tested
    against ``expected_value``: ``==``, ``>=``, ``<=`` (bounds and ``bool``), ``present`` or
    ``absent`` (``names``; ``expected_value`` is then the pattern). Time limits are held in ns
    (the file gives µs). ``steps``: units measured; ``steps_met``: units that meet it.
    Bounds give ``observed_min``/``observed_max`` over the units (None when there are none);
    ``bool`` and ``names`` give ``steps_present`` (units in which the thing occurs) and ``names``
    an ``example``: the first matching name (kernel names shortened).
    """

    key: str
    met: bool
    unit: str
    op: str
    expected_value: int | float | bool | str
    steps: int
    steps_met: int
    observed_min: int | float | None = None
    observed_max: int | float | None = None
    steps_present: int | None = None
    example: str | None = None


@dataclass(frozen=True)
class CheckResult:
    """``tracekit check``'s result.

    Attributes
    ----------
    trace : str
        The trace's label (its file name).
    description : str
        The expectations file's ``description``.
    items : tuple of Item
        Every expectation tested against every unit (one item per bound, per pattern of a list).
    notes : tuple of str
        How it was checked: the units checked, what GPU busy % is taken over, no units at all.
    """

    #: The result kind: its view is ``tracekit.render.views.check``, its JSON contract
    #: ``tracekit.render.json.check`` (the renderers find both by this name).
    kind: ClassVar[str] = "check"

    trace: str
    description: str
    items: tuple[Item, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(i.met for i in self.items)
