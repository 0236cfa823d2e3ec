"""The version strings of tracekit's JSON outputs, in one place.

Each output written with ``--format json`` starts with ``"schema": <one of these>``. Keys may be
added within a version; removing or changing the meaning of a key bumps it (``/2``). The formats
of stored files (the Parquet trace and its stored report) are defined beside their readers.
"""

from __future__ import annotations

#: ``tracekit report TRACE`` (:mod:`tracekit.render.json`).
REPORT = "tracekit.report/1"
#: ``tracekit diff A B``.
DIFF = "tracekit.diff/1"
#: ``tracekit check TRACE --expect FILE``.
CHECK = "tracekit.check/1"
#: ``tracekit report DIR`` (one row per rank trace).
RANKS = "tracekit.ranks/1"
#: ``tracekit compare TRACE…`` (compilations, steady state and break-even across traces).
COMPARE = "tracekit.compare/1"
