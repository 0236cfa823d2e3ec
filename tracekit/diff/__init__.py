"""``tracekit diff`` and ``tracekit check``: compare two traces' reports, gate on the result, and
assert expectations about one trace.

Modules: :mod:`~tracekit.diff.profile` (per-unit figures of a trace and its report, with
:mod:`~tracekit.diff.syncs` for host syncs and CUDA-graph launches),
:mod:`~tracekit.diff.align` (kernel-sequence alignment, fusions), :mod:`~tracekit.diff.compare`
(the :class:`~tracekit.diff.compare.Diff` with noise-aware quantities), :mod:`~tracekit.diff.findings`
(its verdict as typed findings), :mod:`~tracekit.diff.gates`
(``--fail-if`` grammar), :mod:`~tracekit.diff.expect` (TOML expectations for ``check``).
"""
