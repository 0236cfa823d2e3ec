"""Per-unit figures of one trace, the input the diff and the expectation checks compare.

Contract: :func:`build` takes a :class:`~tracekit.trace.Trace` and its :class:`~tracekit.report.Report`
and returns a frozen :class:`Profile`. A *unit* is what :mod:`tracekit.analyses.units` finds — one
``ProfilerStep#N``, one span of a chosen annotation (``unit="mlp_fwd"``: its spans numbered 1, 2, …
in time order), the iteration units found in a trace without steps, or the whole trace. GPU
activity belongs to the unit whose CPU span holds its launch call (the rule of
:mod:`tracekit.analyses.attribution`; work launched before the trace began is in no unit); CPU ops
to the unit holding their start.

Why this needs the Trace and not only the Report: the Report keeps launch paths for one step and
kernel totals for the whole trace, while the diff needs every unit's kernel sequence and per-unit
sums to measure the step-to-step spread. Round-trip bytes, CPU dispatch and idle time come from the
Report's ``round_trips`` / ``launch_gaps`` when they were computed on the same units (else they are
measured here, or with ``complete=False`` listed in ``unavailable``).

Units that are not steady state (the per-step summary's ``cold``/``warmup``/``compile``/``partial``
flags) are left out of ``units`` and of every frame, so medians describe the steady state; they are
listed in ``excluded`` (all units stay when none is steady).

Frames (one row per unit and key; units without a key are absent, read them as 0):

``per_unit``: ``unit i64, label str, span_ns i64 (the unit's CPU span), gpu_ns i64, kernels i64,
launches i64, memsets i64, memcpys i64, preop_tax_ns i64, cpu_dispatch_ns i64?, idle_ns i64?,
busy_frac f64 (launch gaps' ``gpu_busy_frac`` when available, else ``gpu_ns / span_ns``),
round_trip_bytes i64?, round_trip_tensors i64?, round_trip_unknown i64? (kernels without a traffic
model: the round-trip figure may be incomplete), peak_memory i64? (the highest allocated bytes on a
GPU during the unit, :mod:`tracekit.analyses.memory`; null without ``[memory]`` events)`` sorted by unit.
``tensors``: ``unit i64, producer_op str, consumer_op str, shape str, dtype str, bytes i64`` — each
round trip (empty when round trips are unavailable).
``kernel_ns``: ``unit i64, identity str, name str, kernel_class str, count i64, ns i64``.
``class_ns``: ``unit i64, kernel_class str, ns i64``.
``cpu_ops``: ``unit i64, name str, count i64, cpu_ns i64, launches_gpu bool``.
``hidden``: ``unit i64, kind str, cpu_op str, count i64, ns i64`` (memset / memcpy activity).
``preops``: ``unit i64, kind str, count i64, cpu_ns i64``.
``syncs``: ``unit i64, name str, count i64, ns i64`` — host syncs by what blocked the host
(:mod:`tracekit.diff.syncs`); ``per_unit`` also has their sum ``host_sync_ns i64`` and the graph
launch calls ``graph_launches i64``.

``setup`` (:class:`Setup`) is what the trace ran on — devices, software versions, world size —
so that the diff can say first when A's and B's times are not comparable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from tracekit.analyses import attribution, intervals
from tracekit.analyses import steps as steps_analysis
from tracekit.analyses import units as units_mod
from tracekit.analyses.compile_ops import preop_kind
from tracekit.classify.names import decoded_fields
from tracekit.diff import syncs as syncs_mod
from tracekit.trace import GPU_WORK_KINDS, Trace

#: Compile wrappers counted as CPU "tax" per call: they run before the compiled graph and contain
#: none of its work (Torch-Compiled Region and Call CompiledFxGraph enclose the graph's own ops).
TAX_KINDS = ("cache_lookup", "pregraph_bytecode", "aot_prologue")


@dataclass(frozen=True)
class KernelRef:
    """One kernel in a unit's launch-ordered sequence.

    Everything here is fixed by the kernel's name and launching ops (its duration is in the
    ``kernel_ns`` frame), so :func:`build` makes one ``KernelRef`` per distinct kernel and every
    sequence shares them: equal sequences are then equal element by element *as objects*, which
    the diff uses to align each distinct pair of sequences once.
    """

    identity: str
    name: str
    kernel_class: str
    cpu_op: str | None
    top_op: str | None
    decoded: dict[str, Any]


@dataclass(frozen=True)
class Setup:
    """What a trace ran on: the names of the devices that ran its GPU work (every listed device when
    none did), its software versions (the trace's version keys but ``schemaVersion``, which is the
    file format's, and NCCL's from ``distributedInfo``), and the world size of a distributed run."""

    devices: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    world_size: int | None = None
    rank: int | None = None


@dataclass(frozen=True)
class Profile:
    """One trace seen unit by unit (see module docstring)."""

    label: str
    unit_kind: str
    units: list[int]
    unit_labels: dict[int, str]
    sequences: dict[int, tuple[KernelRef, ...]]
    per_unit: pl.DataFrame
    kernel_ns: pl.DataFrame
    class_ns: pl.DataFrame
    cpu_ops: pl.DataFrame
    hidden: pl.DataFrame
    preops: pl.DataFrame
    tensors: pl.DataFrame
    unavailable: dict[str, str] = field(default_factory=dict)
    #: Units left out of ``units`` (and of every frame's medians) because they are not steady
    #: state, with why (``{unit: "cold"}``); ``unit_labels`` still names them.
    excluded: dict[int, str] = field(default_factory=dict)
    setup: Setup = field(default_factory=Setup)
    syncs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=syncs_mod.SYNC_SCHEMA))
    #: What :mod:`tracekit.findings` finds in the trace (over its steady units), for ``diff``'s "new in
    #: B" / "resolved in B" and ``check``'s ``no_finding``; empty when the trace's analyses lack
    #: round trips (``complete=False``).
    findings: tuple[Any, ...] = ()
    #: Every unit's timeline (:class:`tracekit.analyses.timeline.Timelines`) when the diff is drawn
    #: (``Session.profile(timelines=True)``: the renderer's ``needs_timelines``); None otherwise.
    timelines: Any = None


def kernel_identity(name: str, kernel_class: str, decoded: dict[str, Any]) -> str:
    """What makes two kernels "the same": the name, except Inductor's per-graph index suffix."""
    if kernel_class == "triton_fused" and decoded.get("fused_ops"):
        return f"triton_{decoded.get('kind', '?')}_fused_{'_'.join(decoded['fused_ops'])}"
    return name


def build(trace: Trace, report, *, unit: str | None = None, complete: bool = True) -> Profile:
    """Per-unit figures of ``trace`` (``report`` is ``tracekit.report.analyse(trace)`` or
    ``tracekit.report.build(trace)``: its attribution, launch gaps and round trips are used).

    ``complete``: run the launch-gaps and round-trip analyses here when the report lacks them
    (``report.launch_gaps`` / ``report.round_trips`` is None); with False they stay unavailable.
    """
    # report.build already attributed the whole trace; reuse it (attribution is the costliest pass).
    attributed = getattr(report, "attribution", None) or attribution.analyze(trace)
    found = getattr(report, "units", None)
    if found is None or not units_mod.same_choice(found, unit):
        found = units_mod.detect(trace, attributed.gpu, unit)
        # The report's per-step figures are per other units: measure these afresh (or not at all).
        report = replace(report, launch_gaps=None, round_trips=None)
    if found.kind != "ProfilerStep":
        attributed = replace(attributed, gpu=found.tag(attributed.gpu))
    scoped = found.apply(trace)
    if complete:
        report = _complete(scoped, report, attributed)
    unit_kind, windows = found.label, found.windows
    numbers = windows["number"].to_list()
    labels = dict(zip(numbers, windows["name"].to_list()))
    gpu = attributed.gpu
    if "unit" in gpu.columns:
        gpu = gpu.drop("unit")
    gpu = gpu.rename({"step": "unit"}).filter(pl.col("unit").is_not_null())
    ops = (steps_analysis.tag_steps(attributed.tree.ops, windows, "ts").rename({"step": "unit"})
           .filter(pl.col("unit").is_not_null()))

    kernels = gpu.filter(pl.col("kind") == "kernel").sort([pl.coalesce("launch_ts", "ts"), "ts", "idx"])
    kernels, sequences = _sequences(kernels, numbers)

    kernel_ns = (kernels.group_by("unit", "identity")
                 .agg(pl.col("name").first(), pl.col("kernel_class").first(),
                      count=pl.len().cast(pl.Int64), ns=pl.col("dur").sum())
                 .sort("unit", "identity"))
    class_ns = (kernels.group_by("unit", "kernel_class").agg(ns=pl.col("dur").sum())
                .sort("unit", "kernel_class"))
    hidden = (gpu.filter(pl.col("kind").is_in(["memset", "memcpy"]))
              .with_columns(pl.col("cpu_op").fill_null("(no CPU op)"))
              .group_by("unit", "kind", "cpu_op")
              .agg(count=pl.len().cast(pl.Int64), ns=pl.col("dur").sum())
              .sort("unit", "kind", "cpu_op"))
    all_ops = ops.with_columns(preop=_preop_kinds(ops["name"]))
    cpu_ops = (all_ops.filter((pl.col("cat") == "cpu_op") & pl.col("preop").is_null())
               .group_by("unit", "name")
               .agg(count=pl.len().cast(pl.Int64), cpu_ns=pl.col("dur").sum(),
                    launches_gpu=pl.col("launches_gpu").any())
               .sort("unit", "name"))
    preops = (all_ops.filter(pl.col("preop").is_not_null())
              .group_by("unit", pl.col("preop").alias("kind"))
              .agg(count=pl.len().cast(pl.Int64), cpu_ns=pl.col("dur").sum())
              .sort("unit", "kind"))

    base = windows.select(pl.col("number").alias("unit"), pl.col("name").alias("label"),
                          (pl.col("end") - pl.col("ts")).fill_null(0).alias("span_ns"))
    busy = _busy(gpu, report)
    counts = gpu.group_by("unit").agg(
        kernels=(pl.col("kind") == "kernel").sum().cast(pl.Int64),
        launches=pl.col("launch_idx").drop_nulls().n_unique().cast(pl.Int64),
        memsets=(pl.col("kind") == "memset").sum().cast(pl.Int64),
        memcpys=(pl.col("kind") == "memcpy").sum().cast(pl.Int64),
    )
    tax = (preops.filter(pl.col("kind").is_in(TAX_KINDS)).group_by("unit")
           .agg(preop_tax_ns=pl.col("cpu_ns").sum()))
    syncs, graphs = syncs_mod.measure(trace, gpu, windows)
    sync_ns = syncs.group_by("unit").agg(host_sync_ns=pl.col("ns").sum())
    per_unit = (base.join(busy.rename({"busy_ns": "gpu_ns"}), on="unit", how="left")
                .join(counts, on="unit", how="left").join(tax, on="unit", how="left")
                .join(sync_ns, on="unit", how="left").join(graphs, on="unit", how="left")
                .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in
                              ("gpu_ns", "kernels", "launches", "memsets", "memcpys", "preop_tax_ns",
                               "host_sync_ns", "graph_launches")))
    unavailable: dict[str, str] = {}
    per_unit = _attach_launch_gaps(per_unit, report, unavailable)
    per_unit = _attach_round_trips(per_unit, report, unavailable)
    per_unit = _attach_memory(per_unit, scoped, attributed, report if found is getattr(report, "units", None) else None)
    if "busy_frac" not in per_unit.columns:
        per_unit = per_unit.with_columns(busy_frac=pl.when(pl.col("span_ns") > 0)
                                         .then(pl.col("gpu_ns") / pl.col("span_ns")).otherwise(0.0))
    excluded = _unsteady(report, numbers)
    kept = [n for n in numbers if n not in excluded]
    only = lambda frame: frame.filter(pl.col("unit").is_in(kept)) if excluded else frame  # noqa: E731
    return Profile(
        label=os.path.basename(trace.meta.path), unit_kind=unit_kind, units=kept,
        unit_labels=labels, sequences={n: sequences[n] for n in kept},
        per_unit=only(per_unit).sort("unit"), kernel_ns=only(kernel_ns), class_ns=only(class_ns),
        cpu_ops=only(cpu_ops), hidden=only(hidden), preops=only(preops), tensors=_tensors(report, kept),
        unavailable=unavailable, excluded=excluded, setup=setup_of(trace, gpu), syncs=only(syncs),
        findings=_findings(scoped, report, attributed),
    )


def _findings(scoped: Trace, report, attributed) -> tuple[Any, ...]:
    """The report's findings when it has them, else found here from its analyses."""
    from tracekit import devices, findings
    from tracekit.analyses import dispatch

    if getattr(report, "findings", None) is not None:
        return tuple(report.findings)
    if getattr(report, "round_trips", None) is None or getattr(report, "steps", None) is None:
        return ()
    analyses = replace(report, attribution=attributed) if hasattr(report, "attribution") else report
    preops = dispatch.compile_preops(steps_analysis.tag_steps(attributed.tree.ops, scoped.steps))
    device = scoped.meta.devices[0].name if scoped.meta.devices else ""
    return findings.analyze(scoped, analyses, compile_preops=preops, ceilings=devices.ceilings_for(device),
                            compilations=getattr(report, "compilation", None))


def setup_of(trace: Trace, gpu: pl.DataFrame) -> Setup:
    """The :class:`Setup` of ``trace``; ``gpu`` is its GPU activity (column ``device``)."""
    meta = trace.meta
    used = set(gpu.filter(pl.col("kind").is_in(GPU_WORK_KINDS))["device"].drop_nulls().to_list())
    names = [d.name for d in meta.devices if d.id in used] or [d.name for d in meta.devices]
    versions = {k: v for k, v in meta.versions.items() if k != "schemaVersion"}
    dist = meta.distributed or {}
    if dist.get("nccl_version") is not None:
        versions["nccl_version"] = str(dist["nccl_version"])
    return Setup(devices=tuple(sorted({n for n in names if n})), versions=dict(sorted(versions.items())),
                 world_size=_int(dist.get("world_size")), rank=_int(dist.get("rank")))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _unsteady(report, numbers: list[int]) -> dict[int, str]:
    """Units kept out of the comparison, with why: those the per-step summary flags as not steady
    state (cold, warm-up, compiling, cut short), unless no unit is steady."""
    gaps = getattr(report, "launch_gaps", None)
    if gaps is None or "steady" not in gaps.per_step.columns:
        return {}
    flagged = gaps.per_step.filter(pl.col("step").is_in(numbers) & ~pl.col("steady"))
    if flagged.height == 0 or flagged.height == len(numbers):
        return {}
    words = {"cold": "cold", "warmup": "warm-up", "compile": "compiling", "recompile": "recompiling",
             "graph_record": "CUDA-graph record", "jit": "JIT warm-up", "partial": "cut short"}
    return {row["step"]: ", ".join(w for flag, w in words.items()
                                   if row.get(flag) and not (flag == "compile" and row.get("recompile")))
            for row in flagged.iter_rows(named=True)}


def _busy(gpu: pl.DataFrame, report) -> pl.DataFrame:
    """``unit i64, busy_ns i64``: a unit's GPU busy time comes from the trace's per-step summary
    (launch gaps' ``per_step``), so report and diff agree by construction; without it, the union
    of the unit's own activity."""
    gaps = getattr(report, "launch_gaps", None)
    if gaps is not None:
        return gaps.per_step.select(pl.col("step").alias("unit"), pl.col("gpu_busy_ns").alias("busy_ns"))
    return intervals.union_ns(gpu.select("unit", "ts", "end"), by=["unit"])


_REF_KEY = ("name", "kernel_class", "cpu_op", "top_op", "decoded")


def _sequences(kernels: pl.DataFrame, numbers: list[int]) -> tuple[pl.DataFrame, dict[int, tuple[KernelRef, ...]]]:
    """``kernels`` (launch-ordered) with an ``identity`` column, and each unit's kernel sequence.

    One :class:`KernelRef` per distinct (name, class, launching ops, decoded fields): a big trace
    has hundreds of thousands of kernels but a few hundred distinct ones, so the decoded JSON is
    parsed and the identity worked out once per distinct kernel, not once per launch.
    """
    distinct = kernels.select(_REF_KEY).unique(maintain_order=True)
    refs = []
    for name, kernel_class, cpu_op, top_op, decoded_text in distinct.iter_rows():
        decoded = decoded_fields(decoded_text)
        refs.append(KernelRef(kernel_identity(name, kernel_class, decoded), name, kernel_class,
                              cpu_op, top_op, decoded))
    distinct = distinct.with_columns(
        _ref=pl.int_range(0, distinct.height, dtype=pl.UInt32),
        identity=pl.Series([r.identity for r in refs], dtype=pl.String))
    # nulls_equal: a kernel without a launching op (null cpu_op) still finds its distinct row.
    kernels = kernels.join(distinct, on=list(_REF_KEY), how="left", nulls_equal=True, maintain_order="left")
    per_unit = dict(kernels.group_by("unit", maintain_order=True).agg("_ref").iter_rows())
    sequences = {n: tuple(refs[i] for i in per_unit.get(n, ())) for n in numbers}
    return kernels.drop("_ref"), sequences


def _preop_kinds(names: pl.Series) -> pl.Series:
    """:func:`preop_kind` of every name, worked out once per distinct name."""
    distinct = names.unique().drop_nulls().to_list()
    kinds = {n: preop_kind(n) for n in distinct}
    return names.replace_strict(kinds, default=None, return_dtype=pl.String).alias("preop")


def _complete(trace: Trace, report, attributed):
    from tracekit.analyses import launch_gaps, round_trips

    if getattr(report, "launch_gaps", None) is None:
        report = replace(report, launch_gaps=launch_gaps.analyze(trace, attributed))
    if getattr(report, "round_trips", None) is None:
        report = replace(report, round_trips=round_trips.analyze(trace, attributed))
    return report


def _attach_launch_gaps(per_unit: pl.DataFrame, report, unavailable: dict[str, str]) -> pl.DataFrame:
    gaps = getattr(report, "launch_gaps", None)
    if gaps is None:
        reason = "launch gaps were not computed for this report"
        unavailable["cpu_time"] = unavailable["idle_time"] = reason
        return per_unit.with_columns(cpu_dispatch_ns=pl.lit(None, pl.Int64), idle_ns=pl.lit(None, pl.Int64))
    table = gaps.per_step.select(pl.col("step").alias("unit"), pl.col("cpu_dispatch_ns").cast(pl.Int64),
                                 pl.col("gpu_idle_ns").cast(pl.Int64).alias("idle_ns"),
                                 pl.col("gpu_busy_frac").cast(pl.Float64).alias("busy_frac"))
    return per_unit.join(table, on="unit", how="left")


def _attach_memory(per_unit: pl.DataFrame, scoped: Trace, attributed, report) -> pl.DataFrame:
    """``peak_memory``: the report's memory analysis when it was made on these units, else run here."""
    from tracekit.analyses import memory

    found = getattr(report, "memory", None) or memory.analyze(scoped, attributed.tree.ops)
    peaks = found.peak_per_step().select(pl.col("step").alias("unit"), pl.col("peak_allocated").alias("peak_memory"))
    return per_unit.join(peaks, on="unit", how="left")


def _attach_round_trips(per_unit: pl.DataFrame, report, unavailable: dict[str, str]) -> pl.DataFrame:
    trips = getattr(report, "round_trips", None)
    if trips is None:
        reason = "round trips were not computed for this report"
        unavailable["round_trip_bytes"] = unavailable["round_trip_tensors"] = reason
        return per_unit.with_columns(round_trip_bytes=pl.lit(None, pl.Int64),
                                     round_trip_tensors=pl.lit(None, pl.Int64),
                                     round_trip_unknown=pl.lit(None, pl.Int64))
    table = trips.bytes_per_step.filter(pl.col("step").is_not_null()).select(
        pl.col("step").alias("unit"), pl.col("round_trip_bytes").cast(pl.Int64),
        pl.col("tensor_count").cast(pl.Int64).alias("round_trip_tensors"),
        pl.col("unknown_kernels").cast(pl.Int64).alias("round_trip_unknown"))
    return per_unit.join(table, on="unit", how="left").with_columns(
        pl.col("round_trip_bytes").fill_null(0), pl.col("round_trip_tensors").fill_null(0),
        pl.col("round_trip_unknown").fill_null(0))


TENSOR_SCHEMA = {"unit": pl.Int64, "producer_op": pl.String, "consumer_op": pl.String, "shape": pl.String,
                 "dtype": pl.String, "bytes": pl.Int64}


def _tensors(report, numbers: list[int]) -> pl.DataFrame:
    trips = getattr(report, "round_trips", None)
    if trips is None:
        return pl.DataFrame(schema=TENSOR_SCHEMA)
    return (trips.tensors.filter(pl.col("step").is_in(numbers))
            .select(pl.col("step").alias("unit"), "producer_op", "consumer_op", "shape", "dtype", "bytes")
            .cast(TENSOR_SCHEMA))  # type: ignore[arg-type]
