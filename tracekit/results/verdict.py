"""The verdict vocabulary that ``tracekit diff`` and ``tracekit compare`` share: a verdict is an
ordered tuple of :class:`Verdict` clauses, each a ``kind``, what it is about (:class:`Subject`) and
the figures that word it.

Contract: data only — no rule of either command lives here. Which kinds exist, when each is found,
and what its subjects and quantities are is the business of the rules that make them:
:mod:`tracekit.diff.diff_verdict` (what changed between two traces) and
:mod:`tracekit.diff.side_by_side` (compile or hand-tuned, traces side by side). A renderer words a
clause from its ``kind``; it never decides one.

A verdict clause is not a trace finding (:class:`tracekit.findings.Finding`: a rule's claim about
one trace, with evidence, a wall-time price and a fix); a clause states how traces differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: One figure of a clause: a number, a label (a device name, a fusion's evidence, a baseline trace),
#: a flag, or None where a side cannot give it.
Scalar = int | float | str | bool | None
#: A clause's figure: a scalar, or one scalar per subject (a comparison's ``cpu_bound`` lists each
#: trace's dispatch and GPU time).
Value = Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Subject:
    """A kernel, an op, a software version or a trace that a clause is about.

    Attributes
    ----------
    role : str
        How the clause uses it: ``before`` | ``after`` | ``op`` (a fused op word: gelu, mul) |
        ``launched_by`` | ``kernel`` | ``producer`` | ``consumer`` | ``cpu_op`` | ``version`` (a diff);
        ``trace`` (a comparison).
    name : str
        The kernel's or op's name, the version key, or the trace's label.
    kernel_class : str or None
        The kernel's class (:mod:`tracekit.classify`); None for anything but a kernel.
    decoded : Mapping[str, object]
        What the kernel's name decodes to (lets a renderer shorten a C++ template name); empty for
        anything but a kernel.
    changes : tuple of (str, object, object)
        ``(field, before, after)`` of a changed kernel variant or a software version; empty
        otherwise.
    """

    role: str
    name: str
    kernel_class: str | None = None
    decoded: Mapping[str, object] = field(default_factory=dict)
    changes: tuple[tuple[str, object, object], ...] = ()


@dataclass(frozen=True)
class Verdict:
    """One clause of a verdict.

    Attributes
    ----------
    kind : str
        What the clause says (the kinds of a diff: :mod:`tracekit.diff.diff_verdict`; of a
        comparison: :data:`tracekit.diff.side_by_side.VERDICT_KINDS`).
    subjects : tuple of Subject
        What it is about, in the order it is worded.
    quantities : Mapping[str, Value]
        The figures that word it (per kind, in the modules above); times in ns.
    """

    kind: str
    subjects: tuple[Subject, ...] = ()
    quantities: Mapping[str, Value] = field(default_factory=dict)

    def of(self, role: str) -> tuple[Subject, ...]:
        """The subjects with ``role``, in order."""
        return tuple(s for s in self.subjects if s.role == role)

    @property
    def subject(self) -> str:
        """The subjects' names joined by ", " (how a comparison's clause names its traces)."""
        return ", ".join(s.name for s in self.subjects)
