"""``tracekit diff``, ``tracekit compare`` and ``tracekit check``: compare traces' results, gate on
the result, and assert expectations about one trace. The diff compares results, never traces: its
input is :class:`tracekit.analyses.profile.Profile` (made from the pipeline's bundle, with
:mod:`tracekit.analyses.syncs` for host syncs and CUDA-graph launches).

Modules: :mod:`~tracekit.diff.align` (kernel-sequence alignment, fusions), :mod:`~tracekit.results.diff`
(the :class:`~tracekit.results.diff.Diff` with noise-aware quantities), :mod:`~tracekit.diff.pairwise`
(builds the ``Diff`` of two profiles), :mod:`~tracekit.diff.diff_verdict` (what counts as a change:
the diff's verdict), :mod:`~tracekit.diff.side_by_side` (compile or hand-tuned: traces side by side
and break-even), :mod:`~tracekit.results.verdict` (the verdict vocabulary both speak),
:mod:`~tracekit.diff.gates` (the ``--fail-if`` grammar of diff and compare),
:mod:`~tracekit.diff.expect` (TOML expectations for ``check``).
"""
