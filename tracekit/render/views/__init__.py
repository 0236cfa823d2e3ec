"""One view per result kind: each turns a result into an ordered :class:`~tracekit.render.document.Document`.

:mod:`~tracekit.render.views.report` (``tracekit report TRACE``), :mod:`~tracekit.render.views.diff`
(``tracekit diff``), :mod:`~tracekit.render.views.check` (``tracekit check``),
:mod:`~tracekit.render.views.ranks` (``tracekit report DIR``) and
:mod:`~tracekit.render.views.compare` (``tracekit compare``), each with one function ``document``.
The other modules are their parts: the report's tables (:mod:`~tracekit.render.views.tables`,
:mod:`~tracekit.render.views.compilation`, :mod:`~tracekit.render.views.memory`), the findings
(:mod:`~tracekit.render.views.findings`), the diff's verdict (:mod:`~tracekit.render.views.verdict`),
step names (:mod:`~tracekit.render.views.labels`).

A view words a result; it never computes a figure nor decides what counts (the analyses,
:mod:`tracekit.diff` and :mod:`tracekit.diff.side_by_side` do), and it knows no output format.
"""
