"""``tracekit diff`` and ``tracekit check``: compare two traces' per-unit profiles, gate on the
result, and assert expectations about one trace. The diff compares results, never traces: its
input is :class:`tracekit.analyses.profile.Profile` (made from the pipeline's bundle, with
:mod:`tracekit.analyses.syncs` for host syncs and CUDA-graph launches).

Modules: :mod:`~tracekit.diff.align` (kernel-sequence alignment, fusions), :mod:`~tracekit.diff.compare`
(the :class:`~tracekit.diff.compare.Diff` with noise-aware quantities), :mod:`~tracekit.diff.findings`
(its verdict as typed findings), :mod:`~tracekit.diff.gates`
(``--fail-if`` grammar), :mod:`~tracekit.diff.expect` (TOML expectations for ``check``).
"""
