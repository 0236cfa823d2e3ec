"""Two kernel sequences aligned: the pairs, the fusions, splits, variant changes and replacements
between them (computed by :func:`tracekit.diff.align.align`; part of a
:class:`~tracekit.results.diff.Diff`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.analyses.profile import KernelRef


@dataclass(frozen=True)
class Fusion:
    before: tuple[KernelRef, ...]
    after: KernelRef
    ops: tuple[str, ...]
    evidence: str  # "inductor fused_ops" | "launching CPU op" | "position" | "GEMM epilogue"


@dataclass(frozen=True)
class Change:
    before: KernelRef
    after: KernelRef
    fields: tuple[tuple[str, object, object], ...]


@dataclass(frozen=True)
class Split:
    """The reverse of a fusion: one A kernel replaced by several B kernels."""

    before: KernelRef
    after: tuple[KernelRef, ...]
    ops: tuple[str, ...]
    evidence: str


@dataclass(frozen=True)
class CountChange:
    """One launching CPU op that launches a different number of kernels per unit in A and B, with
    nothing that shows a fusion or split (:func:`tracekit.diff.align.ops_agree`): its kernels left
    unexplained on each side (``before`` in A, ``after`` in B: not matched, or matched only as a
    variant or a replacement) and its kernel count in each unit (``a``, ``b``)."""

    cpu_op: str
    before: tuple[KernelRef, ...]
    after: tuple[KernelRef, ...]
    a: int
    b: int


@dataclass(frozen=True)
class Alignment:
    unchanged: tuple[tuple[KernelRef, KernelRef], ...]
    fusions: tuple[Fusion, ...]
    splits: tuple[Split, ...]
    changed: tuple[Change, ...]
    #: One A kernel replaced by one B kernel of another class at the same place (not a variant).
    replaced: tuple[tuple[KernelRef, KernelRef], ...]
    removed: tuple[KernelRef, ...]
    added: tuple[KernelRef, ...]
    #: Unchanged main GEMMs that anchored the alignment.
    anchors: int = 0
    #: Unchanged kernels found out of sequence (step 3 of the module docstring); part of ``unchanged``.
    moved: int = 0
    #: Where the alignment is approximate, and why (few anchors, bounded matching).
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Launching ops whose kernel count changed, with no fusion or split shown (their unmatched
    #: kernels are here, not in ``removed`` / ``added``).
    count_changes: tuple[CountChange, ...] = ()
    #: Replacements on devices of other names whose kernels were launched alike: the device's
    #: library choosing another kernel for the same op (moved here from ``replaced`` by the diff,
    #: which knows the devices).
    device_choices: tuple[tuple[KernelRef, KernelRef], ...] = ()

    def unchanged_once(self) -> tuple[tuple[KernelRef, KernelRef, int], ...]:
        """Unchanged kernels once per identity, in order, with how often each runs in the unit."""
        counts: dict[str, int] = {}
        for ka, _ in self.unchanged:
            counts[ka.identity] = counts.get(ka.identity, 0) + 1
        seen: set[str] = set()
        out = []
        for ka, kb in self.unchanged:
            if ka.identity not in seen:
                seen.add(ka.identity)
                out.append((ka, kb, counts[ka.identity]))
        return tuple(out)

    @property
    def is_identical(self) -> bool:
        return not (self.fusions or self.splits or self.changed or self.replaced or self.removed
                    or self.added or self.count_changes or self.device_choices)
