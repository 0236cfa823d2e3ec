"""Align two units' kernel sequences and name what changed: fusions, variants, added, removed.

Contract: :func:`align` takes two launch-ordered sequences of :class:`~tracekit.diff.profile.KernelRef`
and returns an :class:`Alignment`:

1. **Anchors** — unchanged GEMMs (equal identity, class ``gemm``) matched first with
   :class:`difflib.SequenceMatcher` over the GEMM subsequences; they split both sequences into
   segments that correspond.
2. **Segments** — between consecutive anchors the remaining kernels are matched by identity
   (identity = class + decoded name: the kernel name, except that an Inductor kernel's trailing
   graph index is ignored). Equal kernels are ``unchanged``.
3. **Fusions** — an unmatched kernel in B that replaces n ≥ 2 unmatched kernels of A:
   * ``triton_fused`` (Inductor): its ``fused_ops`` cover the A kernels' ops (the op of an A kernel
     is its ATen op — ``aten::gelu`` → ``gelu`` — and its functor, ``GeluCUDAKernelImpl`` → ``gelu``);
   * any other kernel (``triton_custom`` such as Liger's): the words of its launching CPU op and
     name (``LigerGELUMulFunction`` → liger, gelu, mul, function) cover the A kernels' ops;
   * failing both, position: a B kernel alone in a segment where A has n ≥ 2 unmatched non-GEMM
     kernels. Candidates are searched in the B kernel's segment first, then anywhere in the unit
     (compilers reorder: Inductor launches GeLU·mul after the second GEMM, eager before it).
   One B kernel replacing exactly one A kernel of the same class is a **variant change** (tile,
   layout, dtype, epilogue… listed from the decoded fields); a variant change whose GEMM epilogue
   gained an op that A ran as its own kernel (``none`` → ``bias`` absorbing an ``add``) is a fusion
   with evidence ``GEMM epilogue``. A lone unmatched kernel facing a lone one of another class in
   the same segment is ``replaced``; everything left is added or removed. The reverse of a fusion
   (one A kernel now run as n ≥ 2 B kernels, found by the same rules) is a ``split``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from tracekit.diff.profile import KernelRef

_FUNCTOR_SUFFIX = re.compile(r"(CUDAKernelImpl|KernelImpl|Functor|_kernel|Kernel)$")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Decoded fields whose change is worth naming in a variant change, in display order.
VARIANT_FIELDS = ("tile", "layout", "dtype", "epilogue", "stages", "cluster", "coop", "k_tile",
                  "variant", "vector_width", "functor", "template", "arch", "accumulate", "raster")


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
class Alignment:
    unchanged: tuple[tuple[KernelRef, KernelRef], ...]
    fusions: tuple[Fusion, ...]
    splits: tuple[Split, ...]
    changed: tuple[Change, ...]
    #: One A kernel replaced by one B kernel of another class at the same place (not a variant).
    replaced: tuple[tuple[KernelRef, KernelRef], ...]
    removed: tuple[KernelRef, ...]
    added: tuple[KernelRef, ...]

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
                    or self.added)


def kernel_ops(k: KernelRef) -> set[str]:
    """The ATen-level ops a kernel computes, as Inductor spells them (``gelu``, ``mul``)."""
    ops: set[str] = set()
    for op in (k.cpu_op, k.top_op):
        if op and "::" in op:
            ops.add(op.split("::")[-1].strip("_").lower())
    functor = k.decoded.get("functor")
    if isinstance(functor, str):
        base = _FUNCTOR_SUFFIX.sub("", functor.split("::")[-1])
        if base:
            ops.add(base.lower())
    for op in k.decoded.get("fused_ops") or []:
        ops.add(str(op).strip("_").lower())
    return ops


def words(*texts: str | None) -> set[str]:
    """Lower-case words of CamelCase / snake_case names (``LigerGELUMulFunction`` → liger gelu mul…)."""
    out: set[str] = set()
    for text in texts:
        for part in re.split(r"[^A-Za-z0-9]+", text or ""):
            out.update(w.lower() for w in _WORDS.findall(part))
    return out


def _field_changes(a: KernelRef, b: KernelRef) -> tuple[tuple[str, object, object], ...]:
    keys = [k for k in VARIANT_FIELDS if k in a.decoded or k in b.decoded]
    keys += sorted(k for k in set(a.decoded) | set(b.decoded) if k not in VARIANT_FIELDS)
    return tuple((k, a.decoded.get(k), b.decoded.get(k)) for k in keys
                 if a.decoded.get(k) != b.decoded.get(k))


def _anchors(a: list[KernelRef], b: list[KernelRef]) -> list[tuple[int, int]]:
    ga = [i for i, k in enumerate(a) if k.kernel_class == "gemm"]
    gb = [j for j, k in enumerate(b) if k.kernel_class == "gemm"]
    sm = SequenceMatcher(None, [a[i].identity for i in ga], [b[j].identity for j in gb], autojunk=False)
    return [(ga[blk.a + n], gb[blk.b + n]) for blk in sm.get_matching_blocks() for n in range(blk.size)]


def align(a: tuple[KernelRef, ...], b: tuple[KernelRef, ...]) -> Alignment:
    """Align two kernel sequences (see module docstring)."""
    a, b = list(a), list(b)
    anchors = _anchors(a, b)
    unchanged: list[tuple[int, int]] = list(anchors)
    # Segments between anchors: (a range, b range, segment id).
    bounds = [(-1, -1), *anchors, (len(a), len(b))]
    seg_of_a: dict[int, int] = {}
    seg_of_b: dict[int, int] = {}
    for s, ((a0, b0), (a1, b1)) in enumerate(zip(bounds, bounds[1:])):
        sa, sb = list(range(a0 + 1, a1)), list(range(b0 + 1, b1))
        sm = SequenceMatcher(None, [a[i].identity for i in sa], [b[j].identity for j in sb],
                             autojunk=False)
        for blk in sm.get_matching_blocks():
            unchanged += [(sa[blk.a + n], sb[blk.b + n]) for n in range(blk.size)]
        for i in sa:
            seg_of_a[i] = s
        for j in sb:
            seg_of_b[j] = s
    matched_a = {i for i, _ in unchanged}
    matched_b = {j for _, j in unchanged}
    left_a = [i for i in range(len(a)) if i not in matched_a]
    left_b = [j for j in range(len(b)) if j not in matched_b]

    fusions: list[Fusion] = []
    claimed: set[int] = set()
    fused_b: set[int] = set()
    for j in left_b:
        found = _fusion_for(b[j], seg_of_b.get(j), a, left_a, claimed, seg_of_a, left_b, seg_of_b)
        if found is not None:
            members, ops, evidence = found
            claimed.update(members)
            fused_b.add(j)
            fusions.append(Fusion(tuple(a[i] for i in members), b[j], ops, evidence))
    left_b = [j for j in left_b if j not in fused_b]
    left_a = [i for i in left_a if i not in claimed]
    # The reverse: one A kernel now run as several B kernels.
    splits: list[Split] = []
    claimed_b: set[int] = set()
    split_a: set[int] = set()
    for i in list(left_a):
        found = _fusion_for(a[i], seg_of_a.get(i), b, left_b, claimed_b, seg_of_b, left_a, seg_of_a)
        if found is not None:
            members, ops, evidence = found
            claimed_b.update(members)
            split_a.add(i)
            splits.append(Split(a[i], tuple(b[j] for j in members), ops, evidence))
    rest_a = [i for i in left_a if i not in split_a]
    rest_b = [j for j in left_b if j not in claimed_b]

    changed: list[Change] = []
    used_a: set[int] = set()
    used_b: set[int] = set()
    for j in rest_b:
        same = [i for i in rest_a if i not in used_a and a[i].kernel_class == b[j].kernel_class
                and seg_of_a.get(i) == seg_of_b.get(j)]
        if len(same) >= 1:
            i = same[0]
            used_a.add(i)
            used_b.add(j)
            changed.append(Change(a[i], b[j], _field_changes(a[i], b[j])))
    # Lone unmatched kernels facing each other in a segment: a replacement by another class.
    replaced: list[tuple[int, int]] = []
    for j in rest_b:
        if j in used_b:
            continue
        seg_a = [i for i in rest_a if i not in used_a and seg_of_a.get(i) == seg_of_b.get(j)]
        seg_b = [x for x in rest_b if x not in used_b and seg_of_b.get(x) == seg_of_b.get(j)]
        if len(seg_a) == 1 and len(seg_b) == 1:
            used_a.add(seg_a[0])
            used_b.add(j)
            replaced.append((seg_a[0], j))
    removed = [i for i in rest_a if i not in used_a]
    # A GEMM whose epilogue now does an elementwise op that was its own kernel in A.
    for n, change in enumerate(changed):
        ops = _epilogue_ops(change)
        members = [i for i in removed if kernel_ops(a[i]) & ops]
        if change.before.kernel_class == "gemm" and members:
            removed = [i for i in removed if i not in members]
            fusions.append(Fusion((change.before, *(a[i] for i in members)), change.after,
                                  tuple(sorted(ops & set().union(*(kernel_ops(a[i]) for i in members)))),
                                  "GEMM epilogue"))
            changed[n] = None  # type: ignore[call-overload]
    return Alignment(
        unchanged=tuple((a[i], b[j]) for i, j in sorted(unchanged)),
        fusions=tuple(fusions),
        splits=tuple(splits),
        changed=tuple(c for c in changed if c is not None),
        replaced=tuple((a[i], b[j]) for i, j in replaced),
        removed=tuple(a[i] for i in removed),
        added=tuple(b[j] for j in rest_b if j not in used_b),
    )


def _epilogue_ops(change: Change) -> set[str]:
    """Ops that a GEMM's epilogue gained (``none`` → ``bias``: add), empty when none were gained."""
    before = str(change.before.decoded.get("epilogue") or "none")
    after = str(change.after.decoded.get("epilogue") or "none")
    if after in ("none", before):
        return set()
    gained = words(after) - words(before) - {"none"}
    if gained & {"bias", "badd", "beta"}:
        gained |= {"add"}
    return gained


def _fusion_for(k: KernelRef, seg: int | None, a: list[KernelRef], left_a: list[int], claimed: set[int],
                seg_of_a: dict[int, int], left_b: list[int], seg_of_b: dict[int, int]):
    free = [i for i in left_a if i not in claimed and a[i].kernel_class != "gemm"]
    if k.kernel_class == "triton_fused" and k.decoded.get("fused_ops"):
        vocabulary = {str(op).strip("_").lower() for op in k.decoded["fused_ops"]}
        evidence = "inductor fused_ops"
    else:
        vocabulary = words(k.cpu_op, k.top_op, k.name)
        evidence = "launching CPU op"
    covered = [i for i in free if kernel_ops(a[i]) & vocabulary]
    in_seg = [i for i in covered if seg_of_a.get(i) == seg]
    members = in_seg if len(in_seg) >= 2 else covered
    if len(members) >= 2:
        ops = tuple(sorted({op for i in members for op in kernel_ops(a[i]) & vocabulary}))
        return members, ops, evidence
    # Position: alone in its segment on B's side, n >= 2 unmatched non-GEMM kernels on A's side.
    alone = [j for j in left_b if seg_of_b.get(j) == seg]
    positional = [i for i in free if seg_of_a.get(i) == seg]
    if len(alone) == 1 and len(positional) >= 2:
        ops = tuple(sorted({op for i in positional for op in kernel_ops(a[i])}))
        return positional, ops, "position"
    return None
