"""tracekit: turn PyTorch profiler (Kineto) traces into answers.

Public entry points: :func:`tracekit.load.load` (a trace file -> :class:`tracekit.trace.Trace`),
the kernel taxonomy in :mod:`tracekit.classify`, analyses in :mod:`tracekit.analyses`, and the
``tracekit`` command line in :mod:`tracekit.cli`.
"""

__version__ = "0.1.0"
