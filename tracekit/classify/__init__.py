"""The kernel taxonomy: a GPU activity name (plus what launched it) -> class, library, decoded fields.

Contract
--------
``classify_kernel(name, *, kind="kernel", launch_api=None, cpu_op=None, vendor=None) -> KernelInfo`` is total:
it never raises, for any text, and ``KernelInfo.kernel_class`` is always one of :data:`CLASSES`. It is pure and
memoised (``functools.lru_cache``), so calling it again for a name already seen costs a dict look-up.

``classify_frame(gpu, *, vendor=None)`` takes a Polars frame with at least ``name`` (str) and ``kind`` (str) and
optionally ``launch_api`` (str) and ``cpu_op`` (str), and returns the same frame, rows in the same order,
with four columns appended (replacing any of the same name):

========================  ======  ==========================================================
column                    dtype   meaning
========================  ======  ==========================================================
``kernel_class``          String  one of :data:`CLASSES`
``library``               String  cublas, cublasLt, cutlass, cudnn, aten, inductor, triton, ...
``decoded``               String  JSON object text, keys sorted (``msgspec.json.encode(order="sorted")``)
``rule``                  String  name of the rule that matched, for explanations
========================  ======  ==========================================================

Traces carry millions of kernel rows but only hundreds of distinct names, so ``classify_frame``
classifies each distinct ``(name, kind, launch_api, cpu_op)`` once and joins the answers back; the
table's substring tests for all of them are one Aho-Corasick search (``found`` of :func:`classify_kernel`),
so that many long distinct names cost their total length, not their length once per word of the table.

The rules themselves are the data table :data:`tracekit.classify.rules.RULES`; decoders live in
:mod:`~tracekit.classify.gemm`, :mod:`~tracekit.classify.inductor`, :mod:`~tracekit.classify.aten` and
:mod:`~tracekit.classify.misc`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.classify.rules import CLASSES, RULES, KernelInfo, Rule, classify_kernel, rule_input, table_words

if TYPE_CHECKING:  # polars is imported lazily so that `classify_kernel` alone stays cheap to import
    import polars as pl

__all__ = ["CLASSES", "RULES", "KernelInfo", "Rule", "classify_frame", "classify_kernel"]

_KEYS = ("name", "kind", "launch_api", "cpu_op")
_OUT = ("kernel_class", "library", "decoded", "rule")


def classify_frame(gpu: "pl.DataFrame", *, vendor: str | None = None) -> "pl.DataFrame":
    """Return ``gpu`` with ``kernel_class``, ``library``, ``decoded`` (JSON text) and ``rule`` appended.

    Each distinct ``(name, kind, launch_api, cpu_op)`` combination is classified exactly once; missing
    optional columns count as null. Row order and all existing columns are kept. ``vendor`` is the trace's
    device vendor (``TraceMeta.vendor``), passed to every :func:`classify_kernel` call: one trace, one vendor.
    """
    import msgspec
    import polars as pl

    frame = gpu.drop([c for c in _OUT if c in gpu.columns])
    keys = frame.select(
        [
            (pl.col(c).cast(pl.String) if c in frame.columns else pl.lit(None, dtype=pl.String)).alias(c)
            for c in _KEYS
        ]
    )
    # The keys as categorical codes (one string hash per value): finding the distinct keys and
    # joining the answers back then hash four integers per row instead of four strings.
    codes = keys.select(pl.all().cast(pl.Categorical).to_physical())
    firsts = codes.with_row_index("row").unique(subset=list(_KEYS), keep="first", maintain_order=True)
    distinct = keys.gather(firsts.get_column("row"))
    keys = list(distinct.iter_rows())
    texts = [rule_input(name if name is not None else "", kind if kind is not None else "kernel")
             for name, kind, _, _ in keys]
    folded_words, plain_words = table_words()
    found = zip(_scan([t.lower() for t in texts], folded_words), _scan(texts, plain_words))
    rows = []
    for (name, kind, launch_api, cpu_op), words in zip(keys, found):
        info = classify_kernel(
            name if name is not None else "",
            kind=kind if kind is not None else "kernel",
            launch_api=launch_api,
            cpu_op=cpu_op,
            vendor=vendor,
            found=words,
        )
        decoded = msgspec.json.encode(dict(info.decoded), order="sorted").decode()
        rows.append((info.kernel_class, info.library, decoded, info.rule))
    answers = firsts.drop("row").with_columns(
        pl.Series(c, [r[i] for r in rows], dtype=pl.String) for i, c in enumerate(_OUT)
    )
    # Null keys (no launch_api / cpu_op) must match each other, hence nulls_equal. maintain_order="left"
    # keeps row order without a sort (a row-index + sort costs ~7x more on millions of rows).
    joined = codes.join(answers, on=list(_KEYS), how="left", nulls_equal=True, maintain_order="left")
    return frame.with_columns(joined.get_column(c) for c in _OUT)


def _scan(texts: list[str], words: list[str]) -> list[frozenset[str]]:
    """For each of ``texts``, the ``words`` it holds: one Aho-Corasick search over all of them
    (Polars' ``extract_many``, overlapping matches included, so a word inside another is found
    too), linear in the texts' total length whatever the number of words."""
    import polars as pl

    if not texts or not words:
        return [frozenset()] * len(texts)
    found = pl.Series(texts, dtype=pl.String).str.extract_many(words, overlapping=True)
    return [frozenset(hits) if hits else frozenset() for hits in found.to_list()]
