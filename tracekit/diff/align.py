"""Align two units' kernel sequences and name what changed: fusions, variants, added, removed.

Contract: :func:`align` takes two launch-ordered sequences of :class:`~tracekit.analyses.profile.KernelRef`
and returns an :class:`Alignment`. It grows about linearly with the kernels per unit (real LLM steps
hold 10,000+ kernels), because every costly step is bounded: by :data:`MAX_SEGMENT` and
:data:`WINDOW` here, by ``EXACT_CELLS`` and ``WORK_PER_KERNEL`` in :mod:`tracekit.diff.matching`.

1. **Anchors** — unchanged *main* GEMMs (equal identity, :func:`is_main_gemm`: class ``gemm`` but not
   a split-K reduce, a stand-alone epilogue or another cuBLAS helper, whose presence follows the
   shapes rather than the program) are matched first over the GEMM subsequences; they split both
   sequences into segments that correspond.
2. **Segments** — between consecutive anchors the remaining kernels are matched by identity
   (identity = class + decoded name: the kernel name, except that an Inductor kernel's trailing
   graph index is ignored). Equal kernels are ``unchanged``. A segment that holds more than
   ``MAX_SEGMENT`` kernels (few GEMMs to anchor on) is cut further at its own unchanged kernels, and
   the alignment says so in ``notes``.
   Matching (:func:`tracekit.diff.matching.match`) is :class:`difflib.SequenceMatcher` on small ranges (at most
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
5. **The ops must agree** (:func:`ops_agree`) — a fusion, split or replacement is claimed only
   when the launching CPU ops of the kernels involved agree between A and B: Inductor's fused-op
   list and a custom launching op's name (a Liger ``…Function``) are records of which ops the one
   kernel computes, so they agree by construction; otherwise (words of the kernel's own name, or
   position) every kernel involved must be *launched alike* (:func:`launched_alike`: the same op
   name, and the same ``Input Dims`` where both traces recorded them). A variant change needs the
   same launching op name too, but for GEMMs (``aten::mm`` → ``aten::addmm`` is a GEMM that took
   on its bias). Kernels without such agreement stay removed and added, and where one launching
   op launches a different number of kernels in A and B they are a **count change** of that op
   (``aten::cat``: 16 → 17 kernels), never a split: a different device's or library's kernel
   choice is not a change of the program.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from tracekit.analyses.profile import KernelRef
from tracekit.diff.matching import Budget, match
from tracekit.shapes import parse_dims
from tracekit.results.alignment import Alignment, Change, CountChange, Fusion, Split

_FUNCTOR_SUFFIX = re.compile(r"(CUDAKernelImpl|KernelImpl|Functor|_kernel|Kernel)$")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: Decoded fields whose change is worth naming in a variant change, in display order.
VARIANT_FIELDS = ("tile", "layout", "dtype", "epilogue", "stages", "cluster", "coop", "k_tile",
                  "variant", "vector_width", "functor", "template", "arch", "accumulate", "raster")
#: Decoded ``op`` of GEMM-class kernels that are helpers, not a main GEMM: they do not anchor.
#: cuBLAS picks split-K (and so its reduce), a separate epilogue pass or a dot/scal helper from the
#: shapes, so they come and go between traces whose GEMMs are the same (classify/gemm.py names them).
HELPER_GEMM_OPS = frozenset({"split_k_reduce", "epilogue", "dot", "dot_reduce", "blas", "gemv"})
#: Decoded ``variant`` of cuBLAS helper GEMMs (``gemmSN_TN_kernel``: small-N, ``k1``): chosen by
#: the shapes like the helpers above (classify's ``gemm.cublas_aux`` rule names them together).
HELPER_GEMM_VARIANTS = frozenset({"small_n", "k1"})

#: A segment between unchanged GEMMs holding more kernels than this (on either side) is cut at its
#: own unchanged kernels: position means nothing over hundreds of kernels.
MAX_SEGMENT = 256
#: Fusion candidates outside the kernel's own segment are looked for at most this many kernels
#: before or after it: compilers reorder within a graph region, not across the step.
WINDOW = 256


def is_main_gemm(k: KernelRef) -> bool:
    """A GEMM that anchors the alignment: class ``gemm`` and not a helper (:data:`HELPER_GEMM_OPS`,
    :data:`HELPER_GEMM_VARIANTS`: GEMV, small-N, split-K reduce, epilogue, dot)."""
    return (k.kernel_class == "gemm" and k.decoded.get("op") not in HELPER_GEMM_OPS
            and k.decoded.get("variant") not in HELPER_GEMM_VARIANTS)


def launched_alike(x: KernelRef, y: KernelRef) -> bool:
    """Both kernels launched by the same CPU op: its name, and its ``Input Dims`` where both traces
    recorded them — the inputs both list agree (a compiled graph calls ``aten::mm`` with its ``out``
    tensor as one more input); a kernel whose launching op is unknown is launched alike with none."""
    if x.cpu_op is None or x.cpu_op != y.cpu_op:
        return False
    if not (x.cpu_op_dims and y.cpu_op_dims) or x.cpu_op_dims == y.cpu_op_dims:
        return True
    dims_x, dims_y = parse_dims(x.cpu_op_dims), parse_dims(y.cpu_op_dims)
    n = min(len(dims_x), len(dims_y))
    return dims_x[:n] == dims_y[:n]


def ops_agree(one: KernelRef, many: Sequence[KernelRef], evidence: str) -> bool:
    """Whether the launching ops of ``one`` kernel and the ``many`` it replaces agree (step 5 of the
    module docstring), for a replacement found on ``evidence``."""
    if evidence == "inductor fused_ops":
        return True  # the compiler's record of the ops the kernel computes
    if evidence == "launching CPU op" and one.cpu_op and not one.cpu_op.startswith("aten::"):
        return True  # a custom op named for the ops it fuses (LigerGELUMulFunction)
    return all(launched_alike(one, k) for k in many)


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


@dataclass
class _Segments:
    """Both sequences cut into segments that correspond (step 2 of the module docstring): the
    segment of each kernel (``of_a``, ``of_b``; -1 for an anchor), each segment's index range
    ``[lo, hi)`` in A and in B, the segments that are pieces of a long stretch cut at other kernels
    than GEMMs (``cut``), how many stretches were cut and the longest one's size."""

    of_a: list[int]
    of_b: list[int]
    range_a: dict[int, tuple[int, int]] = field(default_factory=dict)
    range_b: dict[int, tuple[int, int]] = field(default_factory=dict)
    cut: set[int] = field(default_factory=set)
    stretches_cut: int = 0
    longest: int = 0

    def add(self, in_a: range, in_b: range, *, piece_of_long: bool) -> None:
        s = len(self.range_a)
        self.range_a[s], self.range_b[s] = (in_a.start, in_a.stop), (in_b.start, in_b.stop)
        if piece_of_long:
            self.cut.add(s)
        for i in in_a:
            self.of_a[i] = s
        for j in in_b:
            self.of_b[j] = s


#: A found replacement: (the replacing kernel's index, the indices of the kernels it replaces on the
#: other side, the ops they share, the evidence).
_Found = tuple[int, list[int], tuple[str, ...], str]


def align(a: Sequence[KernelRef], b: Sequence[KernelRef]) -> Alignment:
    """Align two kernel sequences (see module docstring)."""
    a, b = list(a), list(b)
    budget = Budget.for_kernels(len(a) + len(b))
    anchors = _anchors(a, b, budget)
    unchanged, seg = _segments([k.identity for k in a], [k.identity for k in b], anchors, budget)
    unchanged += anchors
    matched_a = {i for i, _ in unchanged}
    matched_b = {j for _, j in unchanged}
    left_a = [i for i in range(len(a)) if i not in matched_a]
    left_b = [j for j in range(len(b)) if j not in matched_b]
    moved = _moved(a, b, left_a, left_b)
    if moved:
        unchanged += moved
        moved_a, moved_b = {i for i, _ in moved}, {j for _, j in moved}
        left_a = [i for i in left_a if i not in moved_a]
        left_b = [j for j in left_b if j not in moved_b]

    ops_of = {id(k): kernel_ops(k) for k in {id(k): k for k in a + b}.values()}
    vocabularies: dict[int, tuple[set[str], str]] = {}
    side_a = _Side(a, left_a, seg.of_a, ops_of)
    fused = _replacing_several(b, left_b, seg.of_b, seg.range_a, side_a, ops_of, vocabularies, seg.cut)
    fusions = [Fusion(tuple(a[i] for i in members), b[j], ops, evidence) for j, members, ops, evidence in fused]
    fused_b = {j for j, *_ in fused}
    left_b = [j for j in left_b if j not in fused_b]
    left_a = [i for i in left_a if i not in side_a.claimed]
    # The reverse: one A kernel now run as several B kernels.
    side_b = _Side(b, left_b, seg.of_b, ops_of)
    split = _replacing_several(a, left_a, seg.of_a, seg.range_b, side_b, ops_of, vocabularies, seg.cut)
    splits = [Split(a[i], tuple(b[j] for j in members), ops, evidence) for i, members, ops, evidence in split]
    split_a = {i for i, *_ in split}
    rest_a = [i for i in left_a if i not in split_a]
    rest_b = [j for j in left_b if j not in side_b.claimed]

    used_a: set[int] = set()
    used_b: set[int] = set()
    changed = _variant_changes(a, b, rest_a, rest_b, seg, used_a, used_b)
    replaced = _replacements(a, b, rest_a, rest_b, seg, used_a, used_b)
    removed = [i for i in rest_a if i not in used_a]  # ascending
    absorbed = _absorbed_by_epilogues(a, changed, removed, seg, ops_of)
    fusions += [fusion for _, fusion, _ in absorbed]
    into_epilogue = {n for n, _, _ in absorbed}
    gone = {i for _, _, members in absorbed for i in members}
    removed = [i for i in removed if i not in gone]
    added = [j for j in rest_b if j not in used_b]
    variants = [c for n, (_, c) in enumerate(changed) if n not in into_epilogue]
    pairs = [(a[i], b[j]) for i, j in replaced]
    counted = _count_changes(a, b, [a[i] for i in removed] + [c.before for c in variants] + [x for x, _ in pairs],
                             [b[j] for j in added] + [c.after for c in variants] + [y for _, y in pairs])
    ops = {c.cpu_op for c in counted}
    # A variant or replacement with a side in a count change comes apart: that side is counted
    # there, the other is removed or added.
    apart = [(c.before, c.after) for c in variants if {c.before.cpu_op, c.after.cpu_op} & ops]
    apart += [(x, y) for x, y in pairs if {x.cpu_op, y.cpu_op} & ops]
    return Alignment(
        unchanged=tuple((a[i], b[j]) for i, j in sorted(unchanged)),
        fusions=tuple(fusions),
        splits=tuple(splits),
        changed=tuple(c for c in variants if not {c.before.cpu_op, c.after.cpu_op} & ops),
        replaced=tuple((x, y) for x, y in pairs if not {x.cpu_op, y.cpu_op} & ops),
        removed=tuple([a[i] for i in removed if a[i].cpu_op not in ops] + [x for x, _ in apart if x.cpu_op not in ops]),
        added=tuple([b[j] for j in added if b[j].cpu_op not in ops] + [y for _, y in apart if y.cpu_op not in ops]),
        count_changes=counted,
        anchors=len(anchors), moved=len(moved),
        notes=_notes(len(anchors), seg.stretches_cut, seg.longest, budget),
    )


def _anchors(a: list[KernelRef], b: list[KernelRef], budget: Budget) -> list[tuple[int, int]]:
    """Unchanged main GEMMs (step 1 of the module docstring), as index pairs."""
    ga = [i for i, k in enumerate(a) if is_main_gemm(k)]
    gb = [j for j, k in enumerate(b) if is_main_gemm(k)]
    return [(ga[i], gb[j]) for i, j in match([a[i].identity for i in ga], [b[j].identity for j in gb], budget)]


def _segments(ids_a: list[str], ids_b: list[str], anchors: list[tuple[int, int]],
              budget: Budget) -> tuple[list[tuple[int, int]], _Segments]:
    """The unchanged kernels between consecutive anchors (index pairs), and the segments (step 2 of
    the module docstring)."""
    seg = _Segments([-1] * len(ids_a), [-1] * len(ids_b))
    unchanged: list[tuple[int, int]] = []
    bounds = [(-1, -1), *anchors, (len(ids_a), len(ids_b))]
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        pairs = [(a0 + 1 + i, b0 + 1 + j) for i, j in match(ids_a[a0 + 1:a1], ids_b[b0 + 1:b1], budget)]
        unchanged += pairs
        size = max(a1 - a0, b1 - b0) - 1
        # A long stretch without an unchanged GEMM, where something changed: cut it at its own
        # unchanged kernels.
        long = size > MAX_SEGMENT and len(pairs) < size
        inner = [(a0, b0), *pairs, (a1, b1)] if long else [(a0, b0), (a1, b1)]
        if long:
            seg.stretches_cut, seg.longest = seg.stretches_cut + 1, max(seg.longest, size)
        for (i0, j0), (i1, j1) in zip(inner, inner[1:]):
            seg.add(range(i0 + 1, i1), range(j0 + 1, j1), piece_of_long=long)
    return unchanged, seg


def _moved(a: list[KernelRef], b: list[KernelRef], left_a: list[int], left_b: list[int]) -> list[tuple[int, int]]:
    """The same kernel unmatched on both sides, paired up in order (step 3 of the module docstring):
    what is left of an identity is then exactly the change of its count."""
    waiting: dict[str, list[int]] = {}
    for j in reversed(left_b):
        waiting.setdefault(b[j].identity, []).append(j)
    moved: list[tuple[int, int]] = []
    for i in left_a:
        stack = waiting.get(a[i].identity)
        if stack:
            moved.append((i, stack.pop()))
    return moved


def _replacing_several(seq: list[KernelRef], left: list[int], seg_of: list[int],
                       other_range: dict[int, tuple[int, int]], other: _Side, ops_of: dict[int, set[str]],
                       vocabularies: dict[int, tuple[set[str], str]], cut_segments: set[int]) -> list[_Found]:
    """Each unmatched kernel of ``seq`` (indices ``left``) that replaces several unmatched kernels of
    ``other`` (step 4 of the module docstring: a fusion seen from B, a split seen from A), in order;
    the kernels it replaces are claimed in ``other``."""
    lone = _seg_counts(left, seg_of)
    found: list[_Found] = []
    for j in left:
        hit = _fusion_for(seq[j], seg_of[j], other_range, other, ops_of, lone, vocabularies, cut_segments)
        if hit is not None:
            members, ops, evidence = hit
            other.claimed.update(members)
            found.append((j, members, ops, evidence))
    return found


def _variant_changes(a: list[KernelRef], b: list[KernelRef], rest_a: list[int], rest_b: list[int],
                     seg: _Segments, used_a: set[int], used_b: set[int]) -> list[tuple[int, Change]]:
    """One B kernel facing an A kernel of the same class in its segment: a variant change, with the A
    kernel's index; both marked used."""
    changed: list[tuple[int, Change]] = []
    by_class: dict[tuple[int, str], list[int]] = {}
    for i in reversed(rest_a):
        by_class.setdefault((seg.of_a[i], a[i].kernel_class), []).append(i)
    for j in rest_b:
        same = by_class.get((seg.of_b[j], b[j].kernel_class))
        # The same launching op (step 5 of the module docstring); a GEMM may have changed op.
        at = next((n for n in range(len(same or ()) - 1, -1, -1)
                   if b[j].kernel_class == "gemm" or (a[same[n]].cpu_op and a[same[n]].cpu_op == b[j].cpu_op)), None)
        if at is not None:
            i = same.pop(at)
            used_a.add(i)
            used_b.add(j)
            changed.append((i, Change(a[i], b[j], _field_changes(a[i], b[j]))))
    return changed


def _replacements(a: list[KernelRef], b: list[KernelRef], rest_a: list[int], rest_b: list[int], seg: _Segments,
                  used_a: set[int], used_b: set[int]) -> list[tuple[int, int]]:
    """Lone unmatched kernels facing each other in a segment: a replacement by another class (index
    pairs; both marked used)."""
    replaced: list[tuple[int, int]] = []
    seg_a: dict[int, list[int]] = {}
    for i in rest_a:
        if i not in used_a:
            seg_a.setdefault(seg.of_a[i], []).append(i)
    seg_b = _seg_counts([j for j in rest_b if j not in used_b], seg.of_b)
    for j in rest_b:
        if j in used_b:
            continue
        s = seg.of_b[j]
        if len(seg_a.get(s, ())) == 1 and seg_b.get(s) == 1 and _replaces(a[seg_a[s][0]], b[j]):
            i = seg_a.pop(s)[0]
            seg_b[s] = 0
            used_a.add(i)
            used_b.add(j)
            replaced.append((i, j))
    return replaced


def _replaces(x: KernelRef, y: KernelRef) -> bool:
    """Whether ``y`` may be called ``x``'s replacement (step 5 of the module docstring): launched
    alike, or one is an Inductor kernel whose fused-op list names the other's op."""
    if launched_alike(x, y):
        return True
    for one, other in ((y, x), (x, y)):
        fused = one.decoded.get("fused_ops") if one.kernel_class == "triton_fused" else None
        if fused and kernel_ops(other) & {str(op).strip("_").lower() for op in fused}:
            return True
    return False


def _absorbed_by_epilogues(a: list[KernelRef], changed: list[tuple[int, Change]], removed: list[int],
                           seg: _Segments, ops_of: dict[int, set[str]]) -> list[tuple[int, Fusion, list[int]]]:
    """GEMMs whose epilogue now does an elementwise op that was its own kernel in A, nearby: for each,
    (its position in ``changed``, the fusion it is instead, the indices of the removed A kernels it
    absorbed)."""
    absorbed: set[int] = set()
    out: list[tuple[int, Fusion, list[int]]] = []
    for n, (at, change) in enumerate(changed):
        ops = _epilogue_ops(change)
        if change.before.kernel_class != "gemm" or not ops:
            continue
        lo, hi = seg.range_a[seg.of_a[at]]
        near = removed[bisect_left(removed, lo - WINDOW):bisect_left(removed, hi + WINDOW)]
        members = [i for i in near if i not in absorbed and ops_of[id(a[i])] & ops]
        if members:
            absorbed.update(members)
            out.append((n, Fusion((change.before, *(a[i] for i in members)), change.after,
                                  tuple(sorted(ops & set().union(*(ops_of[id(a[i])] for i in members)))),
                                  "GEMM epilogue"), members))
    return out


def _count_changes(a: list[KernelRef], b: list[KernelRef], left_a: list[KernelRef],
                   left_b: list[KernelRef]) -> tuple[CountChange, ...]:
    """Launching ops with kernels left unexplained on both sides (``left_a``, ``left_b``: removed,
    added, or paired only as a variant or a replacement) whose kernel count differs between the
    units (step 5 of the module docstring), in A's order. An op whose kernels were only added (a
    split-K reduce joining a GEMM) or only removed is said as it is."""
    new = {k.cpu_op for k in left_b}
    out = []
    for op in dict.fromkeys(k.cpu_op for k in left_a):
        if op is None or op not in new:
            continue
        in_a = [k for k in a if k.cpu_op == op]
        in_b = [k for k in b if k.cpu_op == op]
        if len(in_a) != len(in_b):
            out.append(CountChange(op, tuple(k for k in left_a if k.cpu_op == op),
                                   tuple(k for k in left_b if k.cpu_op == op), len(in_a), len(in_b)))
    return tuple(out)


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
    members = (in_seg if len(in_seg) >= 2 and seg not in cut_segments
               else _nearest_per_op(covered, vocabulary, lo + WINDOW, hi - WINDOW, other, ops_of))
    if len(members) >= 2 and ops_agree(k, [other.seq[i] for i in members], evidence):
        ops = tuple(sorted({op for i in members for op in ops_of[id(other.seq[i])] & vocabulary}))
        if len(ops) >= 2 or evidence == "inductor fused_ops":
            return members, ops, evidence
    # Position: a non-GEMM alone in its segment on its side, n >= 2 unmatched non-GEMM kernels on the other.
    if k.kernel_class == "gemm" or lone.get(seg) != 1:
        return None
    positional = [i for i in other.by_seg.get(seg, ()) if other.free(i)]
    if len(positional) >= 2 and ops_agree(k, [other.seq[i] for i in positional], "position"):
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
