"""HTA (HolisticTraceAnalysis) as an oracle for GPU busy/idle figures, and our figures aligned to it.

Contract:

* :func:`hta_figures` runs HTA 0.5 on a staged copy of a trace file and returns its figures;
  raises :class:`~tracekit.errors.UsageError` when the ``hta`` extra is not installed and
  :class:`~tracekit.errors.TraceError` when HTA cannot analyse the file.
* :func:`our_figures` computes the same figures from a :class:`~tracekit.trace.Trace` with our own
  code, under HTA's window rules (below).
* :func:`compare` joins the two; :func:`side_by_side` is the one call ``tracekit report --hta`` needs:
  it also compares what the report shows — the Steps table's per-step busy and idle
  (``scope "steps_table"``) — with HTA's per-step figures.

Figures frame (:data:`FIGURES_SCHEMA`), one row per ``(scope, rank, key)``:

* ``scope "rank"`` (key = rank): HTA ``get_temporal_breakdown``: ``window_ns`` = last end − first
  start over the rank's GPU rows, ``busy_ns`` = their union, ``idle_ns`` = window − busy.
* ``scope "step"`` (key = ProfilerStep number): the same breakdown run on each iteration's rows
  (HTA's ``iteration`` column: the step whose span holds the launch call).
* ``scope "stream"`` (key = stream): HTA ``get_idle_time_breakdown``: per stream, the sum of
  ``start − previous end`` over kernels/memcpy/memset in time order (``idle_ns``), split into
  ``host_wait_ns`` (launch call started after the previous activity ended), ``kernel_wait_ns``
  (shorter than ``consecutive_kernel_delay``, set to our back-to-back threshold) and
  ``other_wait_ns``.
* ``scope "comm_overlap"`` (key = rank): HTA ``get_comm_comp_overlap`` (``overlap_frac``, the share
  of the merged communication-kernel time that merged compute kernels overlap), and ours from
  :mod:`tracekit.analyses.breakdown` over the same rows. HTA calls kernels matching
  ``^nccl.*Kernel`` communication; we use the kernel class ``communication``.
* ``scope "steps_table"`` (key = step, :func:`side_by_side` only): the report's own per-step GPU busy
  and idle (:func:`tracekit.analyses.steps.summarize`) against HTA's ``step`` rows, for the steps
  HTA keeps. They agree when the step has no ``cuda_sync`` rows (HTA counts those as busy).

HTA's window rules, read from ``hta/common/trace.py`` and ``hta/analyzers/breakdown_analysis.py``
(0.5.0), which :func:`our_figures` reproduces:

1. With two or more distinct ``ProfilerStep#N`` names, HTA drops GPU rows whose launch call does
   not start before the *latest start of any event named ProfilerStep* — CPU spans and the
   ``gpu_user_annotation`` copies alike. The GPU copy of the last step starts after its CPU span
   does, so launches early in the last CPU step survive: the "dropped last step" leaks.
2. "GPU rows" are events with a ``stream`` ≥ 0 and a ``correlation`` ≥ 0: kernels, memcpy, memset
   *and* ``cuda_sync`` rows ("Stream Sync" counts as busy, non-compute time in the temporal
   breakdown; the idle breakdown excludes it).
3. A row's iteration is that of its launch call: the last ProfilerStep event in file order (CPU or
   GPU annotation) whose ``[ts, ts + dur)`` holds the call's start.

The staged copy differs from the user's file in two ways, both to let HTA read what it means to:
``distributedInfo.rank`` is added when missing (HTA wants a rank), and ``args.stream`` is removed
from CPU-side events (Inductor's Triton ``cpu_op`` rows carry the launcher's stream index; HTA 0.5
would count those CPU spans as GPU busy time). ``HTA_DISABLE_NS_ROUNDING=1`` is set while HTA runs:
by default HTA rounds starts up and ends down to whole µs, which shortens 2 µs kernels by up to
50 %. HTA's log output (it configures the root logger on import) is silenced and undone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator

import msgspec
import polars as pl

from tracekit.about import install_hint
from tracekit.analyses import intervals
from tracekit.analyses.launch_gaps import BACK_TO_BACK_MAX_NS
from tracekit.errors import TraceError, UsageError
from tracekit.load import read_document
from tracekit.trace import GPU_WORK_KINDS, Trace

INSTALL_HINT = f"install the hta extra: {install_hint('hta')}"
#: Relative difference (to HTA's value, floored at 1 µs) within which the figures agree.
AGREEMENT_TOLERANCE = 0.01
_REL_FLOOR_NS = 1_000
STEP_MARK = "ProfilerStep"
#: Event categories HTA may take as GPU rows; everything else loses ``args.stream`` in the copy.
GPU_CATEGORIES = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                            "cuda_sync", "mtia_ccp_events"})

FIGURES_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "rank": pl.Int64, "key": pl.Int64, "window_ns": pl.Int64,
    "busy_ns": pl.Int64, "idle_ns": pl.Int64, "host_wait_ns": pl.Int64,
    "kernel_wait_ns": pl.Int64, "other_wait_ns": pl.Int64, "overlap_frac": pl.Float64,
}
COMPARE_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String, "rank": pl.Int64, "key": pl.Int64,
    "ours_busy_ns": pl.Int64, "hta_busy_ns": pl.Int64, "busy_rel_diff": pl.Float64,
    "ours_idle_ns": pl.Int64, "hta_idle_ns": pl.Int64, "idle_rel_diff": pl.Float64,
    "agree": pl.Boolean,
    "ours_host_wait_ns": pl.Int64, "hta_host_wait_ns": pl.Int64,
    "ours_kernel_wait_ns": pl.Int64, "hta_kernel_wait_ns": pl.Int64,
    "ours_other_wait_ns": pl.Int64, "hta_other_wait_ns": pl.Int64,
    "ours_overlap_frac": pl.Float64, "hta_overlap_frac": pl.Float64,
}
_WAITS = ("host_wait_ns", "kernel_wait_ns", "other_wait_ns")
_SCOPE_ORDER = {"rank": 0, "step": 1, "steps_table": 2, "stream": 3, "comm_overlap": 4}
#: HTA rounds its overlap percentage to 0.01 points: differences below that are rounding.
_OVERLAP_FLOOR = 0.0001


# -- HTA side ------------------------------------------------------------------------------------

def _hta_modules() -> tuple[Any, Any]:
    """Import HTA without letting its ``logging.config.fileConfig`` rewire our process."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_disabled = {name: lg.disabled for name, lg in logging.root.manager.loggerDict.items()
                      if isinstance(lg, logging.Logger)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from hta.analyzers.breakdown_analysis import BreakdownAnalysis
            from hta.trace_analysis import TraceAnalysis
    except ImportError as err:
        raise UsageError(INSTALL_HINT) from err
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for name, disabled in saved_disabled.items():
            logging.getLogger(name).disabled = disabled
    return TraceAnalysis, BreakdownAnalysis


@contextlib.contextmanager
def _quiet_hta() -> Iterator[None]:
    hta_logger = logging.getLogger("hta")
    level = hta_logger.level
    env = os.environ.get("HTA_DISABLE_NS_ROUNDING")
    hta_logger.setLevel(logging.CRITICAL)
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hta_logger.setLevel(level)
        if env is None:
            os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
        else:
            os.environ["HTA_DISABLE_NS_ROUNDING"] = env


def _read_json(path: Path) -> dict[str, Any]:
    # Read as the loader reads it: with --partial, a truncated trace is cut after its last complete
    # event, so HTA analyses the events the report is made of.
    doc, _partial = read_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(path, "HTA needs a JSON object with a traceEvents list")
    return doc


def stage(trace_path: str | Path, directory: str | Path) -> tuple[int, Path]:
    r"""Write HTA's copy of ``trace_path`` into ``directory``; returns ``(rank, staged path)``.

    HTA finds a file's rank with the regex ``"rank":\s+(\d+)`` on the first line that matches, so
    the copy starts with a line holding ``"distributedInfo": {"rank": N, …}`` in that spacing (a
    compact encoding, as tools that re-save traces write, would leave every rank at 0).
    """
    doc = _read_json(Path(trace_path))
    info = doc.pop("distributedInfo", None)
    info = info if isinstance(info, dict) else {}
    rank = info.get("rank") if isinstance(info.get("rank"), int) and not isinstance(info.get("rank"), bool) else 0
    info = {"rank": rank, **{k: v for k, v in info.items() if k != "rank"}}
    for event in doc["traceEvents"]:
        if not isinstance(event, dict):
            continue
        args = event.get("args")
        if isinstance(args, dict) and "stream" in args and event.get("cat") not in GPU_CATEGORIES:
            del args["stream"]
    head = msgspec.json.format(msgspec.json.encode({"distributedInfo": info}), indent=0)
    out = Path(directory) / f"rank{rank}.json"
    out.write_bytes(head[:-1] + b",\n" + msgspec.json.encode(doc)[1:])
    return rank, out


def _us_to_ns(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(round(float(value) * 1000))
    except (TypeError, ValueError):
        return None


def hta_figures(trace_path: str | Path) -> pl.DataFrame:
    """HTA's temporal (per rank and per step) and idle-time (per stream) figures for a trace file.

    Columns :data:`FIGURES_SCHEMA`, sorted by scope (rank, step, stream), rank, key.
    """
    TraceAnalysis, BreakdownAnalysis = _hta_modules()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tracekit-hta-") as tmp, _quiet_hta():
        rank, _ = stage(trace_path, tmp)
        try:
            analysis = TraceAnalysis(trace_dir=tmp)
            temporal = analysis.get_temporal_breakdown(visualize=False)
            idle, _stats = analysis.get_idle_time_breakdown(
                ranks=[rank], visualize=False, consecutive_kernel_delay=BACK_TO_BACK_MAX_NS / 1000)
            overlap = analysis.get_comm_comp_overlap(visualize=False)
            frame = analysis.t.get_trace(rank)
            per_step = []
            gpu_rows = frame[frame["stream"].ne(-1)]
            for iteration in sorted({int(i) for i in gpu_rows["iteration"].dropna() if i >= 0}):
                view = _TraceView({rank: frame[frame["iteration"] == iteration]}, analysis.t.symbol_table)
                part = BreakdownAnalysis.get_temporal_breakdown(view, visualize=False)
                per_step.append((iteration, part.iloc[0]))
        except Exception as err:  # HTA raises bare asserts, KeyErrors, ValueErrors on odd traces
            raise TraceError(trace_path, f"HTA cannot analyse it ({type(err).__name__}: {err})") from None
    for _, row in temporal.iterrows():
        rows.append(_temporal_row("rank", int(row["rank"]), int(row["rank"]), row))
    for iteration, row in per_step:
        rows.append(_temporal_row("step", rank, iteration, row))
    for stream, part in idle.groupby("stream"):
        by_cat = {str(c): _us_to_ns(v) or 0 for c, v in zip(part["idle_category"], part["idle_time"])}
        rows.append({
            "scope": "stream", "rank": rank, "key": int(stream), "window_ns": None, "busy_ns": None,
            "idle_ns": sum(by_cat.values()), "host_wait_ns": by_cat.get("host_wait", 0),
            "kernel_wait_ns": by_cat.get("kernel_wait", 0), "other_wait_ns": by_cat.get("other", 0),
        })
    for _, row in overlap.iterrows():
        pct = row["comp_comm_overlap_pctg"]
        if pct == pct:  # HTA divides by zero (NaN) on a rank without communication kernels
            rows.append({"scope": "comm_overlap", "rank": int(row["rank"]), "key": int(row["rank"]),
                         "overlap_frac": float(pct) / 100})
    return _sorted(pl.DataFrame(rows, schema=FIGURES_SCHEMA))


class _TraceView:
    """The two attributes of ``hta.common.trace.Trace`` that the temporal breakdown reads."""

    def __init__(self, traces: dict[int, Any], symbol_table: Any) -> None:
        self.traces = traces
        self.symbol_table = symbol_table


def _temporal_row(scope: str, rank: int, key: int, row: Any) -> dict[str, Any]:
    window = _us_to_ns(row["kernel_time(us)"])
    idle = _us_to_ns(row["idle_time(us)"])
    busy = None if window is None or idle is None else window - idle
    return {"scope": scope, "rank": rank, "key": key, "window_ns": window, "busy_ns": busy,
            "idle_ns": idle, "host_wait_ns": None, "kernel_wait_ns": None, "other_wait_ns": None}


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return (frame.with_columns(_o=pl.col("scope").replace_strict(_SCOPE_ORDER, default=9))
            .sort(["_o", "rank", "key"]).drop("_o"))


# -- our side, under HTA's rules -----------------------------------------------------------------

def _step_events(trace: Trace) -> pl.DataFrame:
    """Every event named ProfilerStep: idx, name, ts, end, number, layer (0 CPU span, 1 GPU copy)."""
    cpu = trace.ops.filter(pl.col("name").str.contains(STEP_MARK)).select(
        "idx", "name", "ts", "end", layer=pl.lit(0))
    gpu = trace.gpu.filter((pl.col("kind") == "annotation") & pl.col("name").str.contains(STEP_MARK)
                           ).select("idx", "name", "ts", "end", layer=pl.lit(1))
    events = pl.concat([cpu, gpu], how="vertical_relaxed")
    return events.with_columns(
        number=pl.col("name").str.extract(r"ProfilerStep\s*#\s*(\d+)").cast(pl.Int64))


def _hta_iteration(launch_ts: pl.Series, steps: pl.DataFrame) -> pl.Series:
    """HTA's rule: the last ProfilerStep event in file order whose ``[ts, end)`` holds the launch.

    Vectorised per layer (CPU spans, GPU copies), each a sequence of disjoint spans; a layer whose
    spans overlap (never seen) falls back to HTA's own loop.
    """
    steps = steps.filter(pl.col("number").is_not_null())
    probe = pl.DataFrame({"ts": launch_ts}).with_row_index("_row")
    best = probe.select("_row", _idx=pl.lit(None, pl.UInt32), step=pl.lit(None, pl.Int64))
    for layer in (0, 1):
        spans = steps.filter(pl.col("layer") == layer).sort(["ts", "idx"])
        if spans.height == 0:
            continue
        if (spans["ts"][1:] < spans["end"][:-1]).any():
            return _hta_iteration_loop(launch_ts, steps)
        hit = (probe.filter(pl.col("ts").is_not_null()).sort("ts")
               .join_asof(spans.select(pl.col("ts").alias("_s"), pl.col("end").alias("_e"),
                                       pl.col("idx").alias("_i"), pl.col("number").alias("_n")),
                          left_on="ts", right_on="_s", strategy="backward")
               .filter(pl.col("ts") < pl.col("_e"))
               .select("_row", "_i", "_n"))
        best = (best.join(hit, on="_row", how="left")
                .with_columns(take=pl.col("_i").is_not_null()
                              & (pl.col("_idx").is_null() | (pl.col("_i") > pl.col("_idx"))))
                .select("_row",
                        _idx=pl.when("take").then("_i").otherwise("_idx"),
                        step=pl.when("take").then("_n").otherwise("step")))
    return best.sort("_row")["step"]


def _hta_iteration_loop(launch_ts: pl.Series, steps: pl.DataFrame) -> pl.Series:
    ordered = steps.sort("idx")
    spans = list(zip(ordered["ts"].to_list(), ordered["end"].to_list(), ordered["number"].to_list()))
    out: list[int | None] = []
    for ts in launch_ts.to_list():
        found = None
        if ts is not None:
            for start, end, number in spans:
                if start <= ts < end:
                    found = number
        out.append(found)
    return pl.Series("step", out, dtype=pl.Int64)


def hta_window_rows(trace: Trace) -> pl.DataFrame:
    """The GPU rows HTA analyses, with ``step`` per HTA's iteration rule (module docstring)."""
    rows = trace.gpu.filter(pl.col("kind").is_in([*GPU_WORK_KINDS, "sync"])
                            & (pl.col("stream") >= 0))
    launches = (trace.launches.filter(pl.col("correlation").is_not_null())
                .unique(subset=["correlation"], keep="first", maintain_order=True)
                .select("correlation", pl.col("ts").alias("launch_ts")))
    rows = rows.join(launches, on="correlation", how="left", maintain_order="left")
    steps = _step_events(trace)
    if steps["name"].n_unique() >= 2:
        cutoff = steps["ts"].max()
        rows = rows.filter(pl.col("correlation").is_not_null() & (pl.col("correlation") >= 0)
                           & (pl.col("launch_ts") < cutoff))
    return rows.with_columns(step=_hta_iteration(rows["launch_ts"], steps).cast(pl.Int64))


def _rank(trace: Trace) -> int:
    info = trace.meta.distributed or {}
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) else 0


def our_figures(trace: Trace, gpu: pl.DataFrame | None = None) -> pl.DataFrame:
    """Our figures under HTA's rules; same schema and order as :func:`hta_figures`. ``gpu``: the
    trace's attributed GPU work when the caller has it (for the kernel classes)."""
    rank = _rank(trace)
    rows = hta_window_rows(trace)
    out: list[dict[str, Any]] = []
    if rows.height:
        out.append(_window_row("rank", rank, rank, rows))
        for step in sorted(rows["step"].drop_nulls().unique().to_list()):
            out.append(_window_row("step", rank, step, rows.filter(pl.col("step") == step)))
        work = rows.filter(pl.col("kind") != "sync")
        for stream in sorted(work["stream"].unique().to_list()):
            part = work.filter(pl.col("stream") == stream).sort(["ts", "idx"])
            gaps = (part["ts"] - part["end"].shift(1))[1:]
            launched_after = (part["launch_ts"] > part["end"].shift(1))[1:].fill_null(False)
            host = int(gaps.filter(launched_after).sum())
            short = int(gaps.filter(~launched_after & (gaps < BACK_TO_BACK_MAX_NS)).sum())
            total = int(gaps.sum())
            out.append({"scope": "stream", "rank": rank, "key": stream, "window_ns": None,
                        "busy_ns": None, "idle_ns": total, "host_wait_ns": host,
                        "kernel_wait_ns": short, "other_wait_ns": total - host - short})
        out += _overlap_rows(trace, rows, gpu, rank)
    return _sorted(pl.DataFrame(out, schema=FIGURES_SCHEMA))


def _overlap_rows(trace: Trace, rows: pl.DataFrame, gpu: pl.DataFrame | None, rank: int) -> list[dict[str, Any]]:
    """Our communication overlap (tracekit.analyses.breakdown) over the rows HTA analyses."""
    from tracekit.analyses import attribution, breakdown

    if gpu is None:
        gpu = attribution.analyze(trace).gpu
    mine = gpu.join(rows.select("idx"), on="idx", how="semi").with_columns(step=pl.lit(None, pl.Int64))
    frame = breakdown.analyze(mine).overlap.filter(pl.col("scope") == "trace")
    if frame.height == 0 or frame["overlap_frac"][0] is None:
        return []
    return [{"scope": "comm_overlap", "rank": rank, "key": rank, "overlap_frac": frame["overlap_frac"][0]}]


def steps_table_figures(trace: Trace, summary: pl.DataFrame) -> pl.DataFrame:
    """The report's per-step GPU busy and idle (``summary``: :func:`tracekit.analyses.steps.summarize`
    of ``trace``) as figures of ``scope "steps_table"``."""
    rank = _rank(trace)
    out = [{"scope": "steps_table", "rank": rank, "key": r["step"], "window_ns": r["gpu_window_ns"],
            "busy_ns": r["gpu_busy_ns"], "idle_ns": r["gpu_idle_ns"]}
           for r in summary.iter_rows(named=True)]
    return _sorted(pl.DataFrame(out, schema=FIGURES_SCHEMA))


def _window_row(scope: str, rank: int, key: int, rows: pl.DataFrame) -> dict[str, Any]:
    window = int(rows["end"].max()) - int(rows["ts"].min())  # type: ignore[arg-type]
    busy = int(intervals.union_ns(rows.select("ts", "end"))["busy_ns"][0])
    return {"scope": scope, "rank": rank, "key": key, "window_ns": window, "busy_ns": busy,
            "idle_ns": window - busy, "host_wait_ns": None, "kernel_wait_ns": None,
            "other_wait_ns": None}


# -- comparison ----------------------------------------------------------------------------------

def _rel(ours: str, hta: str) -> pl.Expr:
    return ((pl.col(ours) - pl.col(hta)).abs()
            / pl.max_horizontal(pl.col(hta).abs(), pl.lit(_REL_FLOOR_NS))).cast(pl.Float64)


def compare(ours: pl.DataFrame, hta: pl.DataFrame) -> pl.DataFrame:
    """Join two figures frames on (scope, rank, key): :data:`COMPARE_SCHEMA`.

    ``*_rel_diff`` = |ours − hta| / max(|hta|, 1 µs); ``agree`` when both busy (if present) and idle
    are within :data:`AGREEMENT_TOLERANCE` and the row exists on both sides. Stream rows also carry
    HTA's idle categories from both sides (``*_wait_ns``; null elsewhere); ``comm_overlap`` rows
    carry ``*_overlap_frac`` and agree when they differ by at most :data:`AGREEMENT_TOLERANCE` of
    HTA's (HTA's 0.01-point rounding at least).
    """
    keys = ["scope", "rank", "key"]
    joined = ours.select(*keys, ours_busy_ns="busy_ns", ours_idle_ns="idle_ns", ours_overlap_frac="overlap_frac",
                         **{f"ours_{w}": w for w in _WAITS}).join(
        hta.select(*keys, hta_busy_ns="busy_ns", hta_idle_ns="idle_ns", hta_overlap_frac="overlap_frac",
                   **{f"hta_{w}": w for w in _WAITS}),
        on=keys, how="full", coalesce=True)
    joined = joined.with_columns(busy_rel_diff=_rel("ours_busy_ns", "hta_busy_ns"),
                                 idle_rel_diff=_rel("ours_idle_ns", "hta_idle_ns"))
    busy_ok = (pl.col("ours_busy_ns").is_null() & pl.col("hta_busy_ns").is_null()) | (
        pl.col("busy_rel_diff") <= AGREEMENT_TOLERANCE)
    idle_ok = pl.col("idle_rel_diff") <= AGREEMENT_TOLERANCE
    overlap_ok = ((pl.col("ours_overlap_frac") - pl.col("hta_overlap_frac")).abs()
                  <= pl.max_horizontal(AGREEMENT_TOLERANCE * pl.col("hta_overlap_frac").abs(), pl.lit(_OVERLAP_FLOOR)))
    is_overlap = pl.col("scope") == "comm_overlap"
    joined = joined.with_columns(agree=pl.when(is_overlap).then(overlap_ok).otherwise(busy_ok & idle_ok)
                                 .fill_null(False))
    return _sorted(joined.select(list(COMPARE_SCHEMA)).cast(COMPARE_SCHEMA))  # type: ignore[arg-type]


def side_by_side(trace: Trace, trace_path: str | Path, summary: pl.DataFrame | None = None,
                 gpu: pl.DataFrame | None = None) -> pl.DataFrame:
    """``compare(our_figures(trace), hta_figures(trace_path))`` — for ``report --hta``; ``trace_path``
    is the JSON file ``trace`` was loaded from, which HTA reads itself — plus, with ``summary`` (the
    per-ProfilerStep summary the report's Steps table shows), that table against HTA's per-step
    figures for the steps HTA keeps (``scope "steps_table"``). ``gpu``: the attributed GPU work,
    when the caller has it."""
    hta = hta_figures(trace_path)
    out = compare(our_figures(trace, gpu), hta)
    if summary is not None and summary.height:
        kept = hta.filter(pl.col("scope") == "step").with_columns(scope=pl.lit("steps_table"))
        shown = steps_table_figures(trace, summary).join(kept.select("rank", "key"), on=["rank", "key"], how="semi")
        out = _sorted(pl.concat([out, compare(shown, kept)]))
    return out
