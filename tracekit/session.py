"""One input, opened once: what every command and every notebook starts from.

Contract: :func:`open` (``tracekit.open``) takes a path — a Kineto trace (JSON or gzip) or a Parquet
file written by ``tracekit convert`` — and returns a :class:`Session`. Nothing is read but the
file's first bytes (and a Parquet file's footer) until a result is asked for; the trace is loaded
once, on first use, and every result is computed once per session and option set.

The execution trace (``ExecutionTraceObserver`` output, for exact round-trip links) is found by
one rule for every command:

1. ``execution_trace=PATH``: that file (an unreadable one is an error, exit 2);
2. ``execution_trace=None``: none — round trips are inferred from shapes and order;
3. ``"auto"`` (default): ``X.et.json.gz`` / ``X.et.json`` beside ``X.json.gz`` / ``X.json``; for a
   Parquet file, beside the JSON trace it was converted from.

Every result reads one bundle: :meth:`Session.analyses` runs :func:`tracekit.analyses.pipeline.run`
once per choice of units and ceilings, and :meth:`Session.report`, :meth:`Session.profile`,
:meth:`Session.diff` and :meth:`Session.check` read it. A Parquet file may hold the report
``convert`` stored; :meth:`Session.report` returns it without analysing when it is still what this
code would compute (same code fingerprint, same execution trace, default options) — see
:mod:`tracekit.results.store`.

:attr:`Session.source` is the input's own text to read again once analysed
(:class:`tracekit.load.source.TraceSource`): a writer that copies the trace through with events
added (``tracekit annotate``'s :mod:`tracekit.render.annotated`) is handed it, and reads no file itself.

:func:`read_expectations` reads an expectations file (``check --expect``) for
:func:`tracekit.diff.expect.parse`.
"""

from __future__ import annotations

import os
import sys
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tracekit import execution_trace as et_mod
from tracekit import progress
from tracekit.results import store as report_store
from tracekit.load import open_trace, parquet
from tracekit.load.source import TraceSource
from tracekit.trace import Trace, TraceMeta

if TYPE_CHECKING:
    from tracekit.analyses.graph_replays import Companion
    from tracekit.analyses.pipeline import Analyses
    from tracekit.analyses.profile import Profile
    from tracekit.results.diff import Diff
    from tracekit.diff.expect import Expectations
    from tracekit.results.check import CheckResult
    from tracekit.results.report import Report

ExecutionTraceChoice = Literal["auto"] | str | os.PathLike[str] | None


def open(path: str | os.PathLike[str], *, execution_trace: ExecutionTraceChoice = "auto",  # noqa: A001
         workers: int | None = None, show_progress: bool = False,
         graph_companion: str | os.PathLike[str] | None = None) -> Session:
    """Open a trace for analysis.

    Parameters
    ----------
    path
        A Kineto trace (``.json`` or gzip, recognised by content) or a Parquet file written by
        ``tracekit convert``.
    execution_trace
        ``"auto"`` (the file beside the trace, see the module docstring), ``None`` (do not use
        one) or the path of a PyTorch execution trace.
    workers
        Processes that decode a big (≥ 256 MB) plain-JSON trace: ``None`` picks one per core,
        ``1`` keeps everything in this process. Worker processes are *spawned*, which imports the
        caller's main module again: a script that opens big traces needs an
        ``if __name__ == "__main__":`` guard (a notebook does not).
    show_progress
        Show a progress bar on stderr while the trace loads, while it is analysed and while
        ``save`` writes (:mod:`tracekit.progress`: only on a terminal, only once a phase passes a
        second).
    graph_companion
        A trace of the CUDA-graph capture phase, or of the same code run eagerly, that the trace's
        graph replays are attributed from when its own captures do not tell their ops
        (:mod:`tracekit.analyses.graph_replays`).

    Returns
    -------
    Session
        Nothing is loaded yet; results are computed on first use.

    Raises
    ------
    tracekit.errors.TraceError
        When the file is missing, or is a Parquet file not written by ``tracekit convert``.

    Examples
    --------
    >>> import tracekit
    >>> s = tracekit.open("sample_traces/mlp_eager.json.gz")
    >>> s.execution_trace_path.name
    'mlp_eager.et.json.gz'
    >>> s.report().kernels.select("name", "kernel_class", "count").head(2)  # doctest: +SKIP
    """
    return Session(path, execution_trace=execution_trace, workers=workers, show_progress=show_progress,
                   graph_companion=graph_companion)


def _note_ignored(reason: str) -> None:
    """One line on stderr: a stored report was damaged, so the answer costs a fresh analysis."""
    print(f"tracekit: stored report ignored ({reason}): analysing the trace again", file=sys.stderr)


class Session:
    """A trace and everything known about it; see :func:`open`.

    Attributes
    ----------
    path : str
        The path as given.
    is_parquet : bool
        The input is a Parquet file from ``tracekit convert``.
    execution_trace_path : pathlib.Path or None
        The execution trace this session uses (the module docstring's rule).
    """

    def __init__(self, path: str | os.PathLike[str], *, execution_trace: ExecutionTraceChoice = "auto",
                 workers: int | None = None, show_progress: bool = False,
                 graph_companion: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path)
        #: A trace of the capture phase, or of the same code run eagerly, that CUDA-graph replays
        #: are attributed from (``--graph-companion``; :mod:`tracekit.analyses.graph_replays`).
        self.graph_companion = None if graph_companion is None else os.fspath(graph_companion)
        self.workers = workers
        self.show_progress = show_progress
        self.is_parquet = parquet.is_parquet(self.path)
        # A Parquet file's footer is read once: its metadata, and the JSON it was converted from.
        self._footer = parquet.read_metadata(self.path) if self.is_parquet else None
        original = parquet.stored_meta(self.path, kv=self._footer).path if self._footer is not None else None
        #: The JSON trace HolisticTraceAnalysis reads for ``report --hta`` (it cannot read Parquet).
        self._json_path = original if original is not None else self.path
        if execution_trace is None:
            self.execution_trace_path: Path | None = None
        elif isinstance(execution_trace, str) and execution_trace == "auto":
            self.execution_trace_path = et_mod.locate(self.path, original)
        else:
            self.execution_trace_path = Path(execution_trace)
        self._reports: dict[tuple, Report] = {}
        self._analyses: dict[tuple[str | None, tuple], Analyses] = {}

    def __repr__(self) -> str:
        et = self.execution_trace_path.name if self.execution_trace_path else None
        return f"Session({self.path!r}, execution_trace={et!r})"

    # -- inputs -------------------------------------------------------------------------------

    @cached_property
    def trace(self) -> Trace:
        """The loaded :class:`~tracekit.trace.Trace` (frames documented in :mod:`tracekit.trace`)."""
        return open_trace(self.path, show_progress=self.show_progress, workers=self.workers)

    @property
    def meta(self) -> TraceMeta:
        """The trace's top-level facts; for a Parquet file read from its footer, without loading."""
        if self._footer is not None and "trace" not in self.__dict__:
            return parquet.stored_meta(self.path, kv=self._footer)
        return self.trace.meta

    @cached_property
    def source(self) -> TraceSource:
        """The input's own text, to read again once analysed (the module docstring says who reads it)."""
        return TraceSource(self.path)

    @cached_property
    def companion(self) -> Companion | None:
        """The graph companion as graph attribution reads it (None without one)."""
        if self.graph_companion is None:
            return None
        from tracekit.analyses.attribution import companion_of

        return companion_of(open_trace(self.graph_companion, show_progress=self.show_progress,
                                       workers=self.workers), self.graph_companion)

    @cached_property
    def execution_trace(self) -> et_mod.ExecutionTrace | None:
        """The loaded execution trace, or None when the session uses none."""
        return et_mod.load(self.execution_trace_path) if self.execution_trace_path else None

    # -- results ------------------------------------------------------------------------------

    def stored_report(self) -> Report | None:
        """The report ``convert`` stored in a Parquet input, if it is still valid for this code and
        execution trace; else None (and always None for a JSON input)."""
        if self._footer is None or self.graph_companion is not None:
            return None  # a stored report was made without the companion
        et = self.execution_trace_path
        if et is not None and not et.is_file():
            return None  # a named execution trace that is missing: analysing again says so
        return report_store.load_report(self.path, report_store.cache_key(et), kv=self._footer,
                                        on_ignored=_note_ignored)

    def analyses(self, unit: str | None = None, *, ceilings: dict[str, float] | None = None) -> Analyses:
        """The trace's analyses (:class:`tracekit.analyses.pipeline.Analyses`), computed once per
        ``unit`` (a span name to use as units, as ``--unit``; None: the trace's own rule) and
        ``ceilings`` (device ceilings to replace, as ``--ceiling``)."""
        key = (unit, _frozen(ceilings))
        if key not in self._analyses:
            from tracekit.analyses import pipeline

            plain = self._analyses.get((unit, ()))
            if plain is not None:  # other ceilings price the findings only: keep the analyses
                self._analyses[key] = pipeline.with_ceilings(plain, ceilings)
            else:
                trace = self.trace  # loaded first, under its own bar
                with self._phase("analysing"):
                    self._analyses[key] = pipeline.run(trace, execution_trace=self.execution_trace, unit=unit,
                                                       ceilings=ceilings, companion=self.companion)
        return self._analyses[key]

    def _phase(self, doing: str) -> AbstractContextManager[progress.Phase]:
        """A progress bar for a long phase on this trace (only with ``show_progress``, see :func:`open`)."""
        return progress.phase(f"{doing} {os.path.basename(self.path)}", enabled=self.show_progress)

    def report(self, *, step: int | None = None, ceilings: dict[str, float] | None = None,
               hta: bool = False, unit: str | None = None, timelines: bool = False) -> Report:
        """The report ``tracekit report`` renders.

        Parameters
        ----------
        step
            Restrict every table to ``ProfilerStep#step`` (or to the unit numbered ``step``).
        unit
            Use the spans of this name as the trace's units instead of its ProfilerSteps or the
            units found automatically (:mod:`tracekit.analyses.units`).
        ceilings
            Replace device ceilings, e.g. ``{"hbm_gbps": 4256, "bf16_tflops": 704}``.
        hta
            Add HolisticTraceAnalysis' busy/idle figures beside ours (needs the ``hta`` extra).
        timelines
            Add every unit's timeline (``Report.timelines``, :mod:`tracekit.analyses.timeline`): what
            the HTML and SVG formats draw.

        Returns
        -------
        tracekit.results.report.Report
            Frames as Polars DataFrames: ``steps``, ``kernels``, ``paths``, ``zero_kernel_ops``,
            ``compile_preops`` (columns in :mod:`tracekit.results.report`), plus ``launch_gaps``,
            ``round_trips`` and ``throughput`` reports.
        """
        key = (step, _frozen(ceilings), hta, unit, timelines)
        if key in self._reports:
            return self._reports[key]
        if timelines:
            from dataclasses import replace

            from tracekit.analyses import timeline

            plain = self.report(step=step, ceilings=ceilings, hta=hta, unit=unit)
            bundle = self.analyses(unit, ceilings=ceilings)
            with self._phase("drawing the timelines of"):
                made = replace(plain, timelines=timeline.analyze(bundle, default_step=plain.path_step))
        else:
            made = (self.stored_report() if key == (None, (), False, None, False) else None) or self._report(
                step, ceilings, hta, unit)
        self._reports[key] = made
        return made

    def _report(self, step: int | None, ceilings: dict[str, float] | None, hta: bool, unit: str | None) -> Report:
        """The report made from this session's analyses (see :meth:`report`)."""
        from dataclasses import replace

        from tracekit.results import report as report_mod

        if unit is None and self.trace.steps.height:
            report_mod.check_step(self.trace, step)  # before the analyses, which take longest
        bundle = self.analyses(unit, ceilings=ceilings)
        made = report_mod.build(bundle, step=step)
        if hta:
            from tracekit import hta_oracle

            # HTA reads the JSON file itself, and knows only ProfilerSteps.
            shown = bundle.steps if bundle.units.kind == "ProfilerStep" else None
            with self._phase("HolisticTraceAnalysis reading"):
                made = replace(made, extra={"hta": hta_oracle.side_by_side(
                    bundle.trace, self._json_path, shown, bundle.attribution.gpu)})
        return made

    def profile(self, unit: str | None = None, *, timelines: bool = False) -> Profile:
        """Per-unit figures (the trace's units, or spans named ``unit``) that diff and check compare;
        ``timelines`` adds every unit's timeline (``Profile.timelines``, for a diff drawn as a page)."""
        from tracekit.analyses import profile

        bundle = self.analyses(unit)
        built = profile.build(bundle)
        if not timelines:
            return built
        from dataclasses import replace

        from tracekit.analyses import timeline

        return replace(built, timelines=timeline.analyze(bundle))

    def diff(self, other: Session | str | os.PathLike[str], *, unit: str | None = None,
             timelines: bool = False) -> Diff:
        """Compare this trace (A, before) with ``other`` (B, after): fusions, kernels, per-step deltas.

        Returns
        -------
        tracekit.results.diff.Diff
            ``findings`` (the verdict as data), per-step ``quantities`` with their noise, the
            kernel ``alignment`` and per-class times.
        """
        from tracekit.diff import pairwise

        if not isinstance(other, Session):
            other = Session(other, workers=self.workers)
        return pairwise.diff(self.profile(unit, timelines=timelines), other.profile(unit, timelines=timelines))

    def check(self, expectations: Expectations | str | os.PathLike[str], *,
              unit: str | None = None) -> CheckResult:
        """Test the trace against expectations (a TOML file or loaded :class:`Expectations`)."""
        from tracekit.diff import expect

        if not isinstance(expectations, expect.Expectations):
            expectations = read_expectations(expectations)
        return expect.check(self.profile(unit or expectations.unit), expectations)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trace and its report to one Parquet file (what ``tracekit convert`` does)."""
        made = self.report()
        with progress.phase(f"writing {os.path.basename(os.fspath(path))}", enabled=self.show_progress):
            report_store.save(self.trace, made, path, key=report_store.cache_key(self.execution_trace_path))


def read_expectations(path: str | os.PathLike[str]) -> Expectations:
    """Read and validate an expectations file (:mod:`tracekit.diff.expect` says what it holds).

    Anything but a regular file (a pipe, ``/dev/zero``) is refused before reading, as is a file past
    :data:`tracekit.diff.expect.MAX_FILE_BYTES`; every problem is a
    :class:`~tracekit.errors.UsageError` of one line naming the file.
    """
    from tracekit.diff import expect
    from tracekit.errors import TraceError, UsageError
    from tracekit.load import source

    name = Path(path).name
    try:
        if source.check_input(path, "expectations") != "file":
            raise UsageError(f"{name}: an expectations file must be a regular file, not a stream")
        if os.path.getsize(path) > expect.MAX_FILE_BYTES:
            raise UsageError(f"{name}: {os.path.getsize(path):,} bytes is not an expectations file "
                             f"(at most {expect.MAX_FILE_BYTES:,})")
        text = Path(path).read_text(encoding="utf-8")
    except TraceError as err:
        raise UsageError(f"{name}: {err.problem}") from None
    except FileNotFoundError:
        raise UsageError(f"{name}: no such expectations file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{name}: cannot read ({err})") from None
    return expect.parse(text, name)


def _frozen(ceilings: dict[str, float] | None) -> tuple:
    """``ceilings`` as a key of the session's caches (None and ``{}`` are the table's ceilings)."""
    return tuple(sorted((ceilings or {}).items()))


def profile_of(path: str, unit: str | None, execution_trace: ExecutionTraceChoice = "auto",
               workers: int | None = None, timelines: bool = False, graph_companion: str | None = None) -> Profile:
    """``Session(path).profile(unit)`` as one picklable call (``diff`` profiles A and B in two processes)."""
    return Session(path, execution_trace=execution_trace, workers=workers,
                   graph_companion=graph_companion).profile(unit, timelines=timelines)


__all__ = ["ExecutionTraceChoice", "Session", "open", "profile_of", "read_expectations"]
