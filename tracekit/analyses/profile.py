"""Per-unit figures of one trace, the input the diff and the expectation checks compare.

Contract: :func:`build` takes a trace's :class:`~tracekit.analyses.pipeline.Analyses` and returns a
frozen :class:`Profile`; it reads the bundle only (the profile of other units is the profile of
another bundle: :func:`tracekit.analyses.pipeline.run` with that ``unit``). A *unit* is what
:mod:`tracekit.analyses.units` finds — one ``ProfilerStep#N``, one span of a chosen annotation
(``unit="mlp_fwd"``: its spans numbered 1, 2, … in time order), the iteration units found in a
trace without steps, or the whole trace. GPU activity belongs to the unit whose CPU span holds its
launch call (the rule of :mod:`tracekit.analyses.attribution`; work launched before the trace began
is in no unit); CPU ops to the unit holding their start.

Why a profile beside the report: the report keeps launch paths for one step and kernel totals for
the whole trace, while the diff needs every unit's kernel sequence and per-unit sums to measure the
step-to-step spread.

Units that are not steady state (the per-step summary's ``cold``/``warmup``/``compile``/``partial``
flags) are left out of ``units`` and of every frame, so medians describe the steady state; they are
listed in ``excluded`` (all units stay when none is steady).

Frames (one row per unit and key; units without a key are absent, read them as 0):

``per_unit``: ``unit i64, label str, span_ns i64 (the unit's CPU span), gpu_ns i64, kernels i64,
launches i64, memsets i64, memcpys i64, preop_tax_ns i64, host_sync_ns i64, graph_launches i64,
cpu_dispatch_ns i64?, idle_ns i64?, busy_frac f64 (launch gaps' ``gpu_busy_frac``),
round_trip_bytes i64?, round_trip_tensors i64?, round_trip_unknown i64? (kernels without a traffic
model: the round-trip figure may be incomplete), peak_memory i64? (the highest allocated bytes on a
GPU during the unit, :mod:`tracekit.analyses.memory`; null without ``[memory]`` events),
prefill_token_ns i64?, decode_token_ns i64? (a serving loop's wall per token of the unit's phase,
:mod:`tracekit.analyses.serving`; null in other phases and other traces)`` sorted by unit.
``tensors``: ``unit i64, producer_op str, consumer_op str, shape str, dtype str, bytes i64`` — each
round trip.
``kernel_ns``: ``unit i64, identity str, name str, kernel_class str, count i64, ns i64``.
``class_ns``: ``unit i64, kernel_class str, ns i64``.
``cpu_ops``: ``unit i64, name str, count i64, cpu_ns i64, launches_gpu bool``.
``hidden``: ``unit i64, kind str, cpu_op str, count i64, ns i64`` (memset / memcpy activity).
``preops``: ``unit i64, kind str, count i64, cpu_ns i64``.
``syncs``: ``unit i64, name str, count i64, ns i64`` — host syncs by what blocked the host
(:mod:`tracekit.analyses.syncs`); ``per_unit`` has their sum ``host_sync_ns`` and the graph launch
calls ``graph_launches``.

``shapes`` is each unit's *shape* — what the diff pairs units by when it varies within a trace (a
shape sweep runs several input shapes, and a [32, 160] call compared with a [24, 96] one says
nothing): the text after the number of a numbered annotation (``mlp_fwd#3 64x128`` → ``64x128``)
when those texts differ between units, else the unit's shape key (:mod:`tracekit.analyses.compilations`:
the key op's ``Input Dims``, written after the op's name so that keys of different ops never
match). ``shape_basis`` says which of the two it is.

``setup`` (:class:`Setup`) is what the trace ran on — devices, software versions, world size —
so that the diff can say first when A's and B's times are not comparable.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from tracekit.analyses.compile_ops import preop_kind
from tracekit.analyses.syncs import SYNC_SCHEMA
from tracekit.classify.names import decoded_fields
from tracekit.trace import GPU_WORK_KINDS, TraceMeta

if TYPE_CHECKING:
    from tracekit.analyses.pipeline import Analyses
    from tracekit.findings import Finding
    from tracekit.analyses.timeline import Timelines

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
    #: The launching CPU op's ``Input Dims`` as recorded (None: not recorded): two kernels are
    #: launched alike when their ops' names and, where both recorded them, dims agree.
    cpu_op_dims: str | None = None


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
    """One trace seen unit by unit (see the module docstring for the frames).

    Attributes
    ----------
    label : str
        The trace's file name.
    unit_kind : str
        What a unit is: ``ProfilerStep``, the span name, or ``trace``.
    units : list of int
        The steady units compared (all units when none is steady).
    unit_labels : dict
        ``{unit: label}`` of every unit, excluded ones too (``mlp_fwd#3``).
    sequences : dict
        ``{unit: (KernelRef, ...)}``: each compared unit's kernels in launch order.
    per_unit, kernel_ns, class_ns, cpu_ops, hidden, preops, tensors, syncs : DataFrame
        The module docstring's frames, over ``units``.
    unavailable : dict
        ``{metric: reason}`` of the figures this profile cannot give (empty for a profile made
        by :func:`build`: the pipeline runs every analysis; the diff still words a gap here).
    excluded : dict
        Units left out of ``units`` (and of every frame's medians) because they are not steady
        state, with why (``{unit: "cold"}``); ``unit_labels`` still names them.
    setup : Setup
        The devices, software versions and world size the trace ran on.
    findings : tuple of tracekit.findings.Finding
        The bundle's findings (over its steady units), for ``diff``'s "new in B" / "resolved in B"
        and ``check``'s ``no_finding``.
    timelines : tracekit.analyses.timeline.Timelines or None
        Every unit's timeline when the diff is drawn (``Session.profile(timelines=True)``: the
        renderer's ``needs_timelines``); None otherwise.
    """

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
    excluded: dict[int, str] = field(default_factory=dict)
    setup: Setup = field(default_factory=Setup)
    syncs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SYNC_SCHEMA))
    findings: tuple[Finding, ...] = ()
    timelines: Timelines | None = None
    #: ``{unit: shape}`` of every unit (None: not known), see the module docstring.
    shapes: dict[int, str | None] = field(default_factory=dict)
    #: What ``shapes`` are: ``annotation`` (the text after a numbered annotation's number),
    #: ``input dims`` (shape keys) or ``none``.
    shape_basis: str = "none"


def kernel_identity(name: str, kernel_class: str, decoded: dict[str, Any]) -> str:
    """What makes two kernels "the same": the name, except Inductor's per-graph index suffix."""
    if kernel_class == "triton_fused" and decoded.get("fused_ops"):
        return f"triton_{decoded.get('kind', '?')}_fused_{'_'.join(decoded['fused_ops'])}"
    return name


def build(bundle: Analyses) -> Profile:
    """Per-unit figures of the trace whose analyses are ``bundle`` (:func:`tracekit.analyses.pipeline.run`)."""
    found, windows = bundle.units, bundle.units.windows
    numbers = windows["number"].to_list()
    labels = dict(zip(numbers, windows["name"].to_list()))
    gpu = bundle.attribution.gpu
    if "unit" in gpu.columns:
        gpu = gpu.drop("unit")
    gpu = gpu.rename({"step": "unit"}).filter(pl.col("unit").is_not_null())
    ops = bundle.ops.rename({"step": "unit"}).filter(pl.col("unit").is_not_null())

    dims = ops.select(pl.col("idx").alias("op_idx"), pl.col("input_dims").alias("cpu_op_dims")) \
        if "input_dims" in ops.columns else None
    kernels = gpu.filter(pl.col("kind") == "kernel").sort([pl.coalesce("launch_ts", "ts"), "ts", "idx"])
    if dims is not None:
        kernels = kernels.join(dims, on="op_idx", how="left", maintain_order="left")
    else:
        kernels = kernels.with_columns(cpu_op_dims=pl.lit(None, pl.String))
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
    # A unit's GPU busy time is the per-step summary's, so report and diff agree by construction.
    busy = bundle.launch_gaps.per_step.select(pl.col("step").alias("unit"), pl.col("gpu_busy_ns").alias("gpu_ns"))
    counts = gpu.group_by("unit").agg(
        kernels=(pl.col("kind") == "kernel").sum().cast(pl.Int64),
        launches=pl.col("launch_idx").drop_nulls().n_unique().cast(pl.Int64),
        memsets=(pl.col("kind") == "memset").sum().cast(pl.Int64),
        memcpys=(pl.col("kind") == "memcpy").sum().cast(pl.Int64),
    )
    tax = (preops.filter(pl.col("kind").is_in(TAX_KINDS)).group_by("unit")
           .agg(preop_tax_ns=pl.col("cpu_ns").sum()))
    syncs, graphs = bundle.host_syncs.syncs, bundle.host_syncs.graphs
    sync_ns = syncs.group_by("unit").agg(host_sync_ns=pl.col("ns").sum())
    per_unit = (base.join(busy, on="unit", how="left")
                .join(counts, on="unit", how="left").join(tax, on="unit", how="left")
                .join(sync_ns, on="unit", how="left").join(graphs, on="unit", how="left")
                .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in
                              ("gpu_ns", "kernels", "launches", "memsets", "memcpys", "preop_tax_ns",
                               "host_sync_ns", "graph_launches")))
    per_unit = _with_launch_gaps(per_unit, bundle)
    per_unit = _with_round_trips(per_unit, bundle)
    peaks = bundle.memory.peak_per_step().select(pl.col("step").alias("unit"),
                                                 pl.col("peak_allocated").alias("peak_memory"))
    per_unit = per_unit.join(peaks, on="unit", how="left")
    per_unit = per_unit.join(_per_token(bundle), on="unit", how="left")
    excluded = _unsteady(bundle.steps, numbers)
    kept = [n for n in numbers if n not in excluded]
    only = lambda frame: frame.filter(pl.col("unit").is_in(kept)) if excluded else frame  # noqa: E731
    return Profile(
        label=os.path.basename(bundle.trace.meta.path), unit_kind=found.label, units=kept,
        unit_labels=labels, sequences={n: sequences[n] for n in kept},
        per_unit=only(per_unit).sort("unit"), kernel_ns=only(kernel_ns), class_ns=only(class_ns),
        cpu_ops=only(cpu_ops), hidden=only(hidden), preops=only(preops), tensors=_tensors(bundle, kept),
        excluded=excluded, setup=setup_of(bundle.trace.meta, gpu), syncs=only(syncs),
        findings=bundle.findings, **_shapes(labels, numbers, bundle),
    )


#: A numbered annotation's label: the text after its number (``mlp_fwd#3 64x128`` → ``64x128``).
_LABEL_TEXT = re.compile(r"(?s)^.+?#\d+\s+(\S.*)$")


def _shapes(labels: dict[int, str], numbers: list[int], bundle: Analyses) -> dict[str, Any]:
    """``shapes`` and ``shape_basis`` of the profile (module docstring): the annotation's text after
    its number where the labels carry texts that differ, else the shape keys."""
    texts = {n: (m.group(1).strip() if (m := _LABEL_TEXT.match(labels.get(n) or "")) else None) for n in numbers}
    if all(texts.values()) and len(set(texts.values())) > 1:
        return {"shapes": texts, "shape_basis": "annotation"}
    key_op = bundle.compilation.key_op
    if key_op is None or "shape" not in bundle.steps.columns:
        return {"shapes": {n: None for n in numbers}, "shape_basis": "none"}
    keys = dict(zip(bundle.steps["step"].to_list(), bundle.steps["shape"].to_list()))
    return {"shapes": {n: (f"{key_op} {keys[n]}" if keys.get(n) else None) for n in numbers},
            "shape_basis": "input dims"}


def setup_of(meta: TraceMeta, gpu: pl.DataFrame) -> Setup:
    """The :class:`Setup` of a trace from its ``meta`` and its GPU activity ``gpu`` (column ``device``)."""
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


#: How a non-steady state is worded in ``Profile.excluded``, by the summary's flag.
_UNSTEADY_WORDS = {"cold": "cold", "warmup": "warm-up", "compile": "compiling", "recompile": "recompiling",
                   "graph_record": "CUDA-graph record", "jit": "JIT warm-up", "partial": "cut short"}


def _unsteady(summary: pl.DataFrame, numbers: list[int]) -> dict[int, str]:
    """Units kept out of the comparison, with why: those the per-step summary flags as not steady
    state (cold, warm-up, compiling, cut short), unless no unit is steady."""
    flagged = summary.filter(pl.col("step").is_in(numbers) & ~pl.col("steady"))
    if flagged.height == 0 or flagged.height == len(numbers):
        return {}
    return {row["step"]: ", ".join(w for flag, w in _UNSTEADY_WORDS.items()
                                   if row.get(flag) and not (flag == "compile" and row.get("recompile")))
            for row in flagged.iter_rows(named=True)}


_REF_KEY = ("name", "kernel_class", "cpu_op", "top_op", "decoded", "cpu_op_dims")


def _sequences(kernels: pl.DataFrame, numbers: list[int]) -> tuple[pl.DataFrame, dict[int, tuple[KernelRef, ...]]]:
    """``kernels`` (launch-ordered) with an ``identity`` column, and each unit's kernel sequence.

    One :class:`KernelRef` per distinct (name, class, launching ops, decoded fields): a big trace
    has hundreds of thousands of kernels but a few hundred distinct ones, so the decoded JSON is
    parsed and the identity worked out once per distinct kernel, not once per launch.
    """
    distinct = kernels.select(_REF_KEY).unique(maintain_order=True)
    refs = []
    for name, kernel_class, cpu_op, top_op, decoded_text, dims in distinct.iter_rows():
        decoded = decoded_fields(decoded_text)
        refs.append(KernelRef(kernel_identity(name, kernel_class, decoded), name, kernel_class,
                              cpu_op, top_op, decoded, dims or None))
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


def _per_token(bundle: Analyses) -> pl.DataFrame:
    """Per unit of a serving loop, its wall per token in its phase (``prefill_token_ns`` or
    ``decode_token_ns``; null in other phases, when its tokens are unknown, or without a loop)."""
    schema = {"unit": pl.Int64, "prefill_token_ns": pl.Int64, "decode_token_ns": pl.Int64}
    if bundle.serving is None:
        return pl.DataFrame(schema=schema)
    it = bundle.serving.iterations.filter(pl.col("tokens") > 0)
    per = (pl.col("wall_ns") / pl.col("tokens")).round(0).cast(pl.Int64)
    return it.select(pl.col("step").alias("unit"),
                     pl.when(pl.col("phase") == "prefill").then(per).alias("prefill_token_ns"),
                     pl.when(pl.col("phase") == "decode").then(per).alias("decode_token_ns")).cast(schema)  # type: ignore[arg-type]


def _with_launch_gaps(per_unit: pl.DataFrame, bundle: Analyses) -> pl.DataFrame:
    """``cpu_dispatch_ns``, ``idle_ns`` and ``busy_frac`` per unit, from the launch-gap analysis."""
    table = bundle.launch_gaps.per_step.select(
        pl.col("step").alias("unit"), pl.col("cpu_dispatch_ns").cast(pl.Int64),
        pl.col("gpu_idle_ns").cast(pl.Int64).alias("idle_ns"),
        pl.col("gpu_busy_frac").cast(pl.Float64).alias("busy_frac"))
    return per_unit.join(table, on="unit", how="left")


def _with_round_trips(per_unit: pl.DataFrame, bundle: Analyses) -> pl.DataFrame:
    """``round_trip_bytes``, ``round_trip_tensors`` and ``round_trip_unknown`` per unit (0 without any)."""
    table = bundle.round_trips.bytes_per_step.filter(pl.col("step").is_not_null()).select(
        pl.col("step").alias("unit"), pl.col("round_trip_bytes").cast(pl.Int64),
        pl.col("tensor_count").cast(pl.Int64).alias("round_trip_tensors"),
        pl.col("unknown_kernels").cast(pl.Int64).alias("round_trip_unknown"))
    return per_unit.join(table, on="unit", how="left").with_columns(
        pl.col("round_trip_bytes").fill_null(0), pl.col("round_trip_tensors").fill_null(0),
        pl.col("round_trip_unknown").fill_null(0))


TENSOR_SCHEMA = {"unit": pl.Int64, "producer_op": pl.String, "consumer_op": pl.String, "shape": pl.String,
                 "dtype": pl.String, "bytes": pl.Int64}


def _tensors(bundle: Analyses, numbers: list[int]) -> pl.DataFrame:
    return (bundle.round_trips.tensors.filter(pl.col("step").is_in(numbers))
            .select(pl.col("step").alias("unit"), "producer_op", "consumer_op", "shape", "dtype", "bytes")
            .cast(TENSOR_SCHEMA))  # type: ignore[arg-type]
