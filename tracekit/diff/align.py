"""Align two units' kernel sequences and name what changed: fusions, variants, added, removed.

Contract: :func:`align` takes two launch-ordered sequences of :class:`~tracekit.diff.profile.KernelRef`
and returns an :class:`Alignment`. It grows about linearly with the kernels per unit (real LLM steps
hold 10,000+ kernels), because every costly step is bounded by a rule of :data:`BOUNDS`.

1. **Anchors** — unchanged *main* GEMMs (equal identity, :func:`is_main_gemm`: class ``gemm`` but not
   a split-K reduce, a stand-alone epilogue or another cuBLAS helper, whose presence follows the
   shapes rather than the program) are matched first over the GEMM subsequences; they split both
   sequences into segments that correspond.
2. **Segments** — between consecutive anchors the remaining kernels are matched by identity
   (identity = class + decoded name: the kernel name, except that an Inductor kernel's trailing
   graph index is ignored). Equal kernels are ``unchanged``. A segment that holds more than
   ``MAX_SEGMENT`` kernels (few GEMMs to anchor on) is cut further at its own unchanged kernels, and
   the alignment says so in ``notes``.
   Matching (:func:`match`) is :class:`difflib.SequenceMatcher` on small ranges (at most
   ``EXACT_CELLS`` pairs), and on larger ones patience-style anchoring: each kernel's identity with
   its occurrence number (the 3rd ``add`` of A pairs with the 3rd ``add`` of B) is unique, the longest
   increasing run of such pairs anchors the range, and the gaps between anchors are matched again.
   The work is bounded (``WORK_PER_KERNEL``); past it the gaps stay unmatched and the alignment is
   called coarse in ``notes``.
3. **Moved** — kernels left unmatched on both sides with the same identity (a kernel launched at
   another place in the unit, e.g. units cut at another point of the iteration) pair up in order and
   are ``unchanged`` too (counted in ``moved``). So what remains unmatched of an identity is exactly
   the change of its count per unit: a kernel is called fused, split, removed or added only when its
   count per unit actually dropped (or rose).
4. **Fusions** — an unmatched kernel in B that replaces n ≥ 2 unmatched kernels of A:
   * ``triton_fused`` (Inductor): its ``fused_ops`` cover the A kernels' ops (the op of an A kernel
     is its ATen op — ``aten::gelu`` → ``gelu`` — and its functor, ``GeluCUDAKernelImpl`` → ``gelu``);
   * any other kernel (``triton_custom`` such as Liger's): the words of its name (its functor's, for
     an ATen kernel) and of its launching CPU op (``LigerGELUMulFunction`` → liger, gelu, mul,
     function) cover the A kernels' ops, at least two different ones (a fusion joins ops; one op's
     kernels run as fewer kernels of that op is not named a fusion on words alone). An ATen op
     (``aten::linear``) gives no words: it names the op its own kernels compute, not work it
     absorbed from others;
   * failing both, position: a B kernel other than a GEMM (what a GEMM absorbs shows in its
     epilogue, below) alone in a segment where A has n ≥ 2 unmatched non-GEMM kernels.
   Candidates are searched in the B kernel's segment between two GEMMs first (all it covers
   there), then within ``WINDOW`` kernels of it, the nearest one per op it names (compilers
   reorder: Inductor launches GeLU·mul after the second GEMM, eager before it; and in a piece of a
   long stretch cut at other kernels, a neighbour is no evidence of more).
   One B kernel replacing exactly one A kernel of the same class is a **variant change** (tile,
   layout, dtype, epilogue… listed from the decoded fields); a variant change whose GEMM epilogue
   gained an op that A ran as its own kernel nearby (``none`` → ``bias`` absorbing an ``add``) is a
   fusion with evidence ``GEMM epilogue``. A lone unmatched kernel facing a lone one of another class
   in the same segment is ``replaced``; everything left is added or removed. The reverse of a fusion
   (one A kernel now run as n ≥ 2 B kernels, found by the same rules) is a ``split``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from tracekit.analyses.profile import KernelRef

_FUNCTOR_SUFFIX = re.compile(r"(CUDAKernelImpl|KernelImpl|Functor|_kernel|Kernel)$")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Decoded fields whose change is worth naming in a variant change, in display order.
VARIANT_FIELDS = ("tile", "layout", "dtype", "epilogue", "stages", "cluster", "coop", "k_tile",
                  "variant", "vector_width", "functor", "template", "arch", "accumulate", "raster")
#: Decoded ``op`` of GEMM-class kernels that are helpers, not a main GEMM: they do not anchor.
#: cuBLAS picks split-K (and so its reduce), a separate epilogue pass or a dot/scal helper from the
#: shapes, so they come and go between traces whose GEMMs are the same (classify/gemm.py names them).
HELPER_GEMM_OPS = frozenset({"split_k_reduce", "epilogue", "dot", "blas"})

#: The bounds that keep the alignment about linear in the kernels per unit, with their reasons.
BOUNDS = {
    # Ranges of at most this many (A kernel, B kernel) pairs are matched exactly by difflib: cheap
    # there, and the small steps of the shipped traces keep their exact alignment.
    "EXACT_CELLS": 4096,
    # A segment between unchanged GEMMs holding more kernels than this (on either side) is cut at its
    # own unchanged kernels: position means nothing over hundreds of kernels.
    "MAX_SEGMENT": 256,
    # Fusion candidates outside the kernel's own segment are looked for at most this many kernels
    # before or after it: compilers reorder within a graph region, not across the step.
    "WINDOW": 256,
    # Matching work allowed per kernel of the unit (kernel visits of the patience passes); beyond it
    # the gaps left stay unmatched and the alignment is called coarse.
    "WORK_PER_KERNEL": 64,
}
EXACT_CELLS = BOUNDS["EXACT_CELLS"]
MAX_SEGMENT = BOUNDS["MAX_SEGMENT"]
WINDOW = BOUNDS["WINDOW"]
WORK_PER_KERNEL = BOUNDS["WORK_PER_KERNEL"]


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
    #: Unchanged main GEMMs that anchored the alignment.
    anchors: int = 0
    #: Unchanged kernels found out of sequence (step 3 of the module docstring); part of ``unchanged``.
    moved: int = 0
    #: Where the alignment is approximate, and why (few anchors, bounded matching).
    notes: tuple[str, ...] = field(default_factory=tuple)

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


def is_main_gemm(k: KernelRef) -> bool:
    """A GEMM that anchors the alignment: class ``gemm`` and not a helper (:data:`HELPER_GEMM_OPS`)."""
    return k.kernel_class == "gemm" and k.decoded.get("op") not in HELPER_GEMM_OPS


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


def _vocabulary(k: KernelRef) -> tuple[set[str], str]:
    """The op words a kernel claims to compute, and the evidence they come from: Inductor's fused
    ops, else the words of its launching CPU op unless that is an ATen op, and of its name (of its
    functor only, for an ATen TensorIterator kernel: the rest of its name is template plumbing)."""
    if k.kernel_class == "triton_fused" and k.decoded.get("fused_ops"):
        return {str(op).strip("_").lower() for op in k.decoded["fused_ops"]}, "inductor fused_ops"
    functor = k.decoded.get("functor")
    launched_by = k.cpu_op if k.cpu_op and not k.cpu_op.startswith("aten::") else None
    return words(launched_by, functor if isinstance(functor, str) else k.name), "launching CPU op"


def _field_changes(a: KernelRef, b: KernelRef) -> tuple[tuple[str, object, object], ...]:
    keys = [k for k in VARIANT_FIELDS if k in a.decoded or k in b.decoded]
    keys += sorted(k for k in set(a.decoded) | set(b.decoded) if k not in VARIANT_FIELDS)
    return tuple((k, a.decoded.get(k), b.decoded.get(k)) for k in keys
                 if a.decoded.get(k) != b.decoded.get(k))


# -- matching two sequences of identities ----------------------------------------------------------

class Budget:
    """Work left for :func:`match` (kernel visits of its patience passes) and the ranges it gave up."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.gave_up = 0  # ranges left unmatched because the budget ran out
        self.gave_up_kernels = 0


def match(x: Sequence[Hashable], y: Sequence[Hashable], budget: Budget | None = None) -> list[tuple[int, int]]:
    """Monotone pairs ``(i, j)`` with ``x[i] == y[j]``, sorted: a common subsequence of ``x`` and ``y``.

    Exact (difflib's matching blocks) for ranges of at most ``EXACT_CELLS`` pairs. A larger range
    sheds its common prefix and suffix and every kernel whose identity the other side's range lacks
    (it cannot match), is matched exactly if that leaves it small, and else is anchored by patience
    on (identity, occurrence number), recursing into the gaps between anchors while ``budget``
    lasts (see the module docstring).
    """
    if budget is None:
        budget = Budget(WORK_PER_KERNEL * (len(x) + len(y)))
    out: list[tuple[int, int]] = []
    stack = [(0, len(x), 0, len(y))]
    while stack:
        a0, a1, b0, b1 = stack.pop()
        if a0 >= a1 or b0 >= b1:
            continue
        if (a1 - a0) * (b1 - b0) <= EXACT_CELLS:
            out += _exact(x, range(a0, a1), y, range(b0, b1))
            continue
        while a0 < a1 and b0 < b1 and x[a0] == y[b0]:
            out.append((a0, b0))
            a0, b0 = a0 + 1, b0 + 1
        while a0 < a1 and b0 < b1 and x[a1 - 1] == y[b1 - 1]:
            a1, b1 = a1 - 1, b1 - 1
            out.append((a1, b1))
        if a0 >= a1 or b0 >= b1:
            continue
        if budget.left <= 0:
            budget.gave_up += 1
            budget.gave_up_kernels += (a1 - a0) + (b1 - b0)
            continue
        budget.left -= (a1 - a0) + (b1 - b0)
        common = set(x[a0:a1]).intersection(y[b0:b1])
        xi = [i for i in range(a0, a1) if x[i] in common]
        yj = [j for j in range(b0, b1) if y[j] in common]
        if not xi:
            continue
        if len(xi) * len(yj) <= EXACT_CELLS:
            out += _exact(x, xi, y, yj)
            continue
        anchors = _patience(x, xi, y, yj)
        out += anchors
        bounds = [(a0 - 1, b0 - 1), *anchors, (a1, b1)]
        for (i0, j0), (i1, j1) in zip(bounds, bounds[1:]):
            if i1 - i0 > 1 and j1 - j0 > 1:
                stack.append((i0 + 1, i1, j0 + 1, j1))
    out.sort()
    return out


def _exact(x: Sequence[Hashable], xi: Sequence[int], y: Sequence[Hashable], yj: Sequence[int]) -> list[tuple[int, int]]:
    """difflib's matching blocks of ``x`` at indices ``xi`` and ``y`` at ``yj``, as index pairs."""
    sm = SequenceMatcher(None, [x[i] for i in xi], [y[j] for j in yj], autojunk=False)
    return [(xi[blk.a + n], yj[blk.b + n]) for blk in sm.get_matching_blocks() for n in range(blk.size)]


def _patience(x: Sequence[Hashable], xi: list[int], y: Sequence[Hashable], yj: list[int]) -> list[tuple[int, int]]:
    """Anchors at indices ``xi`` and ``yj``: the longest increasing run of pairs of equal (identity,
    occurrence number), first over the identities that occur equally often on both sides (an
    unchanged kernel: its k-th launches pair up even where other kernels come and go), else over all."""
    count_x: dict[Hashable, int] = {}
    count_y: dict[Hashable, int] = {}
    for i in xi:
        count_x[x[i]] = count_x.get(x[i], 0) + 1
    for j in yj:
        count_y[y[j]] = count_y.get(y[j], 0) + 1
    steady = {key for key, n in count_x.items() if count_y.get(key) == n}
    if steady and len(steady) < len(count_x):
        anchors = _ranked_run(x, [i for i in xi if x[i] in steady], y, [j for j in yj if y[j] in steady])
        if anchors:
            return anchors
    return _ranked_run(x, xi, y, yj)


def _ranked_run(x: Sequence[Hashable], xi: list[int], y: Sequence[Hashable], yj: list[int]) -> list[tuple[int, int]]:
    """The longest increasing run of pairs of equal (identity, occurrence number)."""
    where: dict[tuple[Hashable, int], int] = {}
    seen: dict[Hashable, int] = {}
    for j in yj:
        n = seen.get(y[j], 0)
        seen[y[j]] = n + 1
        where[(y[j], n)] = j
    seen = {}
    pairs = []
    for i in xi:
        n = seen.get(x[i], 0)
        seen[x[i]] = n + 1
        j = where.get((x[i], n))
        if j is not None:
            pairs.append((i, j))
    return _longest_increasing(pairs)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (increasing in i) that also increases in j (patience sort)."""
    tails: list[int] = []  # tails[n]: smallest j ending an increasing run of length n + 1
    tail_at: list[int] = []  # index into pairs of that run's last pair
    back = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(n)
        else:
            tails[k] = j
            tail_at[k] = n
        back[n] = tail_at[k - 1] if k else -1
    run = []
    n = tail_at[-1] if tail_at else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


# -- the alignment -------------------------------------------------------------------------------

class _Side:
    """One sequence's unmatched kernels, indexed for bounded candidate searches."""

    def __init__(self, seq: list[KernelRef], left: list[int], seg_of: list[int],
                 ops_of: dict[int, set[str]]) -> None:
        self.seq = seq
        self.seg_of = seg_of
        self.claimed: set[int] = set()
        self.by_seg: dict[int, list[int]] = {}
        self.by_op: dict[str, list[int]] = {}
        for i in left:
            self.by_seg.setdefault(seg_of[i], []).append(i)
            if seq[i].kernel_class != "gemm":
                for op in ops_of[id(seq[i])]:
                    self.by_op.setdefault(op, []).append(i)

    def free(self, i: int) -> bool:
        return i not in self.claimed and self.seq[i].kernel_class != "gemm"


def align(a: Sequence[KernelRef], b: Sequence[KernelRef]) -> Alignment:
    """Align two kernel sequences (see module docstring)."""
    a, b = list(a), list(b)
    budget = Budget(WORK_PER_KERNEL * (len(a) + len(b)))
    ga = [i for i, k in enumerate(a) if is_main_gemm(k)]
    gb = [j for j, k in enumerate(b) if is_main_gemm(k)]
    anchors = [(ga[i], gb[j]) for i, j in match([a[i].identity for i in ga], [b[j].identity for j in gb], budget)]
    unchanged: list[tuple[int, int]] = list(anchors)
    seg_of_a, seg_of_b = [-1] * len(a), [-1] * len(b)
    seg_range_a: dict[int, tuple[int, int]] = {}  # segment -> its index range [lo, hi) in A
    seg_range_b: dict[int, tuple[int, int]] = {}  # ... and in B
    ids_a, ids_b = [k.identity for k in a], [k.identity for k in b]
    cut, longest = 0, 0
    cut_segments: set[int] = set()  # pieces of a long stretch, bounded by other kernels than GEMMs
    bounds = [(-1, -1), *anchors, (len(a), len(b))]
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        pairs = [(a0 + 1 + i, b0 + 1 + j) for i, j in match(ids_a[a0 + 1:a1], ids_b[b0 + 1:b1], budget)]
        unchanged += pairs
        size = max(a1 - a0, b1 - b0) - 1
        # A long stretch without an unchanged GEMM, where something changed: cut it at its own
        # unchanged kernels.
        long = size > MAX_SEGMENT and len(pairs) < size
        inner = [(a0, b0), *pairs, (a1, b1)] if long else [(a0, b0), (a1, b1)]
        if long:
            cut, longest = cut + 1, max(longest, size)
        for (i0, j0), (i1, j1) in zip(inner, inner[1:]):
            s = len(seg_range_a)
            seg_range_a[s], seg_range_b[s] = (i0 + 1, i1), (j0 + 1, j1)
            if long:
                cut_segments.add(s)
            for i in range(i0 + 1, i1):
                seg_of_a[i] = s
            for j in range(j0 + 1, j1):
                seg_of_b[j] = s
    matched_a = {i for i, _ in unchanged}
    matched_b = {j for _, j in unchanged}
    left_a = [i for i in range(len(a)) if i not in matched_a]
    left_b = [j for j in range(len(b)) if j not in matched_b]

    # Moved: the same kernel unmatched on both sides pairs up in order; what is left of an identity
    # is then exactly the change of its count.
    waiting: dict[str, list[int]] = {}
    for j in reversed(left_b):
        waiting.setdefault(b[j].identity, []).append(j)
    moved: list[tuple[int, int]] = []
    for i in left_a:
        stack = waiting.get(a[i].identity)
        if stack:
            moved.append((i, stack.pop()))
    if moved:
        unchanged += moved
        moved_a, moved_b = {i for i, _ in moved}, {j for _, j in moved}
        left_a = [i for i in left_a if i not in moved_a]
        left_b = [j for j in left_b if j not in moved_b]

    ops_of = {id(k): kernel_ops(k) for k in {id(k): k for k in a + b}.values()}
    vocabularies: dict[int, tuple[set[str], str]] = {}
    side_a = _Side(a, left_a, seg_of_a, ops_of)
    fusions: list[Fusion] = []
    fused_b: set[int] = set()
    lone_b = _seg_counts(left_b, seg_of_b)
    for j in left_b:
        found = _fusion_for(b[j], seg_of_b[j], seg_range_a, side_a, ops_of, lone_b, vocabularies, cut_segments)
        if found is not None:
            members, ops, evidence = found
            side_a.claimed.update(members)
            fused_b.add(j)
            fusions.append(Fusion(tuple(a[i] for i in members), b[j], ops, evidence))
    left_b = [j for j in left_b if j not in fused_b]
    left_a = [i for i in left_a if i not in side_a.claimed]
    # The reverse: one A kernel now run as several B kernels.
    side_b = _Side(b, left_b, seg_of_b, ops_of)
    splits: list[Split] = []
    split_a: set[int] = set()
    lone_a = _seg_counts(left_a, seg_of_a)
    for i in left_a:
        found = _fusion_for(a[i], seg_of_a[i], seg_range_b, side_b, ops_of, lone_a, vocabularies, cut_segments)
        if found is not None:
            members, ops, evidence = found
            side_b.claimed.update(members)
            split_a.add(i)
            splits.append(Split(a[i], tuple(b[j] for j in members), ops, evidence))
    rest_a = [i for i in left_a if i not in split_a]
    rest_b = [j for j in left_b if j not in side_b.claimed]

    changed: list[tuple[int, Change] | None] = []
    used_a: set[int] = set()
    used_b: set[int] = set()
    by_class: dict[tuple[int, str], list[int]] = {}
    for i in reversed(rest_a):
        by_class.setdefault((seg_of_a[i], a[i].kernel_class), []).append(i)
    for j in rest_b:
        same = by_class.get((seg_of_b[j], b[j].kernel_class))
        if same:
            i = same.pop()
            used_a.add(i)
            used_b.add(j)
            changed.append((i, Change(a[i], b[j], _field_changes(a[i], b[j]))))
    # Lone unmatched kernels facing each other in a segment: a replacement by another class.
    replaced: list[tuple[int, int]] = []
    seg_a: dict[int, list[int]] = {}
    for i in rest_a:
        if i not in used_a:
            seg_a.setdefault(seg_of_a[i], []).append(i)
    seg_b = _seg_counts([j for j in rest_b if j not in used_b], seg_of_b)
    for j in rest_b:
        if j in used_b:
            continue
        s = seg_of_b[j]
        if len(seg_a.get(s, ())) == 1 and seg_b.get(s) == 1:
            i = seg_a.pop(s)[0]
            seg_b[s] = 0
            used_a.add(i)
            used_b.add(j)
            replaced.append((i, j))
    removed = [i for i in rest_a if i not in used_a]  # ascending
    # A GEMM whose epilogue now does an elementwise op that was its own kernel in A, nearby.
    absorbed: set[int] = set()
    for n, item in enumerate(changed):
        assert item is not None
        at, change = item
        ops = _epilogue_ops(change)
        if change.before.kernel_class != "gemm" or not ops:
            continue
        lo, hi = seg_range_a[seg_of_a[at]]
        near = removed[bisect_left(removed, lo - WINDOW):bisect_left(removed, hi + WINDOW)]
        members = [i for i in near if i not in absorbed and ops_of[id(a[i])] & ops]
        if members:
            absorbed.update(members)
            fusions.append(Fusion((change.before, *(a[i] for i in members)), change.after,
                                  tuple(sorted(ops & set().union(*(ops_of[id(a[i])] for i in members)))),
                                  "GEMM epilogue"))
            changed[n] = None
    removed = [i for i in removed if i not in absorbed]
    return Alignment(
        unchanged=tuple((a[i], b[j]) for i, j in sorted(unchanged)),
        fusions=tuple(fusions),
        splits=tuple(splits),
        changed=tuple(c for _, c in filter(None, changed)),
        replaced=tuple((a[i], b[j]) for i, j in replaced),
        removed=tuple(a[i] for i in removed),
        added=tuple(b[j] for j in rest_b if j not in used_b),
        anchors=len(anchors), moved=len(moved),
        notes=_notes(len(anchors), cut, longest, budget),
    )


def _notes(anchors: int, cut: int, longest: int, budget: Budget) -> tuple[str, ...]:
    notes = []
    if cut:
        notes.append(f"few unchanged GEMMs anchor the kernel alignment ({anchors:,} in the unit): "
                     f"{cut} stretch{'es' if cut > 1 else ''} of more than {MAX_SEGMENT} kernels without one "
                     f"(the longest {longest:,}) {'were' if cut > 1 else 'was'} cut at {'their' if cut > 1 else 'its'} "
                     "other unchanged kernels instead, so a change found there by position alone is a neighbour, "
                     "not a proof")
    if budget.gave_up:
        notes.append(f"the kernel alignment is coarse: matching stopped at its work bound, leaving "
                     f"{budget.gave_up_kernels:,} kernels in {budget.gave_up} range{'s' if budget.gave_up > 1 else ''} "
                     "unmatched (counted as removed or added)")
    return tuple(notes)


def _seg_counts(indices: list[int], seg_of: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for i in indices:
        out[seg_of[i]] = out.get(seg_of[i], 0) + 1
    return out


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


def _fusion_for(k: KernelRef, seg: int, other_range: dict[int, tuple[int, int]], other: _Side,
                ops_of: dict[int, set[str]], lone: dict[int, int], vocabularies: dict[int, tuple[set[str], str]],
                cut_segments: set[int]):
    """The other side's kernels that ``k`` (in segment ``seg``, whose kernels on the other side lie in
    ``other_range[seg]``) replaces, or None."""
    if id(k) not in vocabularies:
        vocabularies[id(k)] = _vocabulary(k)
    vocabulary, evidence = vocabularies[id(k)]
    lo, hi = other_range[seg]
    lo, hi = lo - WINDOW, hi + WINDOW
    covered: set[int] = set()
    for op in vocabulary:
        listed = other.by_op.get(op, ())
        for i in listed[bisect_left(listed, lo):bisect_left(listed, hi)]:
            if other.free(i):
                covered.add(i)
    in_seg = sorted(i for i in covered if other.seg_of[i] == seg)
    members = in_seg if len(in_seg) >= 2 and seg not in cut_segments else _nearest_per_op(covered, vocabulary, lo + WINDOW, hi - WINDOW,
                                                                other, ops_of)
    if len(members) >= 2:
        ops = tuple(sorted({op for i in members for op in ops_of[id(other.seq[i])] & vocabulary}))
        if len(ops) >= 2 or evidence == "inductor fused_ops":
            return members, ops, evidence
    # Position: a non-GEMM alone in its segment on its side, n >= 2 unmatched non-GEMM kernels on the other.
    if k.kernel_class == "gemm" or lone.get(seg) != 1:
        return None
    positional = [i for i in other.by_seg.get(seg, ()) if other.free(i)]
    if len(positional) >= 2:
        ops = tuple(sorted({op for i in positional for op in ops_of[id(other.seq[i])]}))
        return positional, ops, "position"
    return None


def _nearest_per_op(covered: set[int], vocabulary: set[str], lo: int, hi: int, other: _Side,
                    ops_of: dict[int, set[str]]) -> list[int]:
    """Outside its segment, a kernel replaces at most one kernel per op it names: for each op, the
    candidate nearest the segment's range ``[lo, hi)`` (ties: the earlier)."""
    picked: set[int] = set()
    for op in sorted(vocabulary):
        having = [i for i in covered if op in ops_of[id(other.seq[i])] and i not in picked]
        if having:
            picked.add(min(having, key=lambda i: (max(lo - i, i - hi + 1, 0), i)))
    return sorted(picked)
