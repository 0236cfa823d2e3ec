"""Match two sequences of identities: a common subsequence, found in about linear time.

Contract: :func:`match` returns monotone index pairs ``(i, j)`` with ``x[i] == y[j]``. Ranges of at
most :data:`EXACT_CELLS` pairs are matched exactly by :class:`difflib.SequenceMatcher`; larger ones
by patience-style anchoring: each identity with its occurrence number (the 3rd ``add`` of A pairs
with the 3rd ``add`` of B) is unique, the longest increasing run of such pairs anchors the range,
and the gaps between anchors are matched again. The work is bounded by a :class:`Budget`
(:data:`WORK_PER_KERNEL` per kernel); past it the gaps stay unmatched and the budget counts what it
gave up. :mod:`tracekit.diff.align` matches kernel sequences with it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher

#: Ranges of at most this many (A kernel, B kernel) pairs are matched exactly by difflib: cheap
#: there, and the small steps of the shipped traces keep their exact alignment.
EXACT_CELLS = 4096
#: Matching work allowed per kernel of the unit (kernel visits of the patience passes); beyond it
#: the gaps left stay unmatched and the alignment is called coarse.
WORK_PER_KERNEL = 64


class Budget:
    """Work left for :func:`match` (kernel visits of its patience passes) and the ranges it gave up."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.gave_up = 0  # ranges left unmatched because the budget ran out
        self.gave_up_kernels = 0

    @classmethod
    def for_kernels(cls, kernels: int) -> Budget:
        """The budget of matching ``kernels`` kernels (both sides): :data:`WORK_PER_KERNEL` each."""
        return cls(WORK_PER_KERNEL * kernels)


def match(x: Sequence[Hashable], y: Sequence[Hashable], budget: Budget | None = None) -> list[tuple[int, int]]:
    """Monotone pairs ``(i, j)`` with ``x[i] == y[j]``, sorted: a common subsequence of ``x`` and ``y``.

    Exact (difflib's matching blocks) for ranges of at most ``EXACT_CELLS`` pairs. A larger range
    sheds its common prefix and suffix and every kernel whose identity the other side's range lacks
    (it cannot match), is matched exactly if that leaves it small, and else is anchored by patience
    on (identity, occurrence number), recursing into the gaps between anchors while ``budget``
    lasts (see the module docstring).
    """
    if budget is None:
        budget = Budget.for_kernels(len(x) + len(y))
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


__all__ = ["EXACT_CELLS", "WORK_PER_KERNEL", "Budget", "match"]
