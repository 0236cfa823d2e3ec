"""Pure analyses over a :class:`tracekit.trace.Trace`.

Each module exposes ``analyze(trace, ...) -> <Name>Report``, a frozen dataclass of Polars frames and
scalars. Analyses never print, plot or write files; renderers in :mod:`tracekit.render` do that.
"""
