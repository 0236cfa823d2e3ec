"""Serving and generation loops: each iteration's phase and tokens, per-phase cost, cost per token.

Contract: :func:`analyze` takes the trace with its units as steps, the attributed GPU work (``step``
= the unit) and the per-unit summary (:data:`tracekit.analyses.steps.SUMMARY_SCHEMA`), and returns a
frozen :class:`Serving`, or None when the trace is no serving or generation loop.

What one iteration (unit) processed, first found wins:

1. **A serving engine's iteration label** (:mod:`tracekit.analyses.serving_labels`: vLLM's
   ``execute_context_N(ctx)_generation_M(gen)``, SGLang's ``step[MODE bs=N …]``, TensorRT-LLM's
   ``_forward_step``): the first such annotation starting in the unit — the unit itself when the
   units are those labels, the label inside when the units are ProfilerSteps.
2. **The forward's token input** (``shapes``): the first ``aten::embedding`` starting in the unit;
   its index input ``[batch, seq]`` (``Input Dims``, needs ``record_shapes=True``) holds
   ``batch × seq`` tokens of ``batch`` requests — a prefill when ``seq > 1``, a decode step when
   ``seq == 1`` (a generate() loop, a hand-written decode loop). In a compiled forward the lookup
   runs inside an Inductor kernel (``triton_…_embedding_…``, its launch op named after it and
   recorded with its inputs): its first 2-D integer input is the token ids (:data:`FUSED_TOKEN_INPUT`),
   used where the unit has no ``aten::embedding`` (Hugging Face's static-cache ``generate``, which
   runs the prefill eagerly and the decode steps compiled).

The trace is a serving loop when some unit carries a label, or when the shapes show at least one
decode step (a training step never embeds one token per sequence).

Figures (Int64 ns, sums over the phase's iterations): wall (``max(CPU span, GPU window)``, the
Steps table's), host time (the unit's CPU span), GPU busy, GPU idle (in its GPU window);
``ns_per_token`` = wall / tokens and ``gpu_ns_per_token`` = busy / tokens, null when a token count
is unknown. Kernel classes per phase: GPU time (sum of durations) and share of the phase's.

The **steady-state window** is the iterations after the last one that warms up — cold, warm-up,
compiling, recording a CUDA graph, first-call JIT (:data:`WARMUP_STATES`) — less a last one the
trace may have cut (``partial``). Its per-phase figures (``window_phases``) are what ``diff``
compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from tracekit.analyses import serving_labels
from tracekit.analyses.steps import tag_steps
from tracekit.shapes import parse_types, tensor_dims
from tracekit.trace import Trace

#: Unit states that warm up (the steady-state window starts after the last of them).
WARMUP_STATES = ("cold", "warmup", "compile", "recompile", "graph_record", "jit_warmup")
#: The op whose index input says how many tokens a forward processes (input position, why).
TOKEN_INPUT_OP = ("aten::embedding", 1, "its index input is the forward's token ids, [batch, seq]")
#: A compiled forward's token lookup: an Inductor kernel's launch op whose name holds this word; its
#: first input that is a 2-D tensor of an integer type is the token ids ([batch, seq]).
FUSED_TOKEN_INPUT = ("triton_", "embedding", ("long int", "int", "long"))
PHASES = ("prefill", "decode", "mixed", "other")

ITERATION_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "label": pl.String, "source": pl.String, "phase": pl.String,
    "prefill_requests": pl.Int64, "prefill_tokens": pl.Int64, "decode_requests": pl.Int64,
    "decode_tokens": pl.Int64, "requests": pl.Int64, "tokens": pl.Int64,
    "wall_ns": pl.Int64, "cpu_span_ns": pl.Int64, "gpu_busy_ns": pl.Int64, "gpu_idle_ns": pl.Int64,
    "state": pl.String, "in_window": pl.Boolean,
}
PHASE_SCHEMA: dict[str, pl.DataType] = {
    "phase": pl.String, "iterations": pl.UInt32, "requests": pl.Int64, "tokens": pl.Int64,
    "wall_ns": pl.Int64, "cpu_span_ns": pl.Int64, "gpu_busy_ns": pl.Int64, "gpu_idle_ns": pl.Int64,
    "ns_per_token": pl.Float64, "gpu_ns_per_token": pl.Float64,
}
CLASS_SCHEMA: dict[str, pl.DataType] = {"phase": pl.String, "kernel_class": pl.String, "gpu_ns": pl.Int64,
                                        "share": pl.Float64}


@dataclass(frozen=True)
class Serving:
    """A serving or generation loop, iteration by iteration (see the module docstring).

    Attributes
    ----------
    source : str
        Where the phases and tokens came from: ``vllm``, ``sglang``, ``tensorrt-llm`` or ``shapes``
        (the most iterations' source).
    iterations : DataFrame
        :data:`ITERATION_SCHEMA`, one row per unit in time order: ``step i64, label str, source
        str?, phase str`` (``prefill`` | ``decode`` | ``mixed`` | ``other`` | ``unknown``), request
        and token counts per phase and their sums ``requests, tokens`` (null: not known), ``wall_ns,
        cpu_span_ns, gpu_busy_ns, gpu_idle_ns``, ``state str`` (the unit's), ``in_window bool``.
    phases : DataFrame
        :data:`PHASE_SCHEMA`: per phase over all its iterations (phase order: prefill, decode,
        mixed, other, unknown).
    window_phases : DataFrame
        :data:`PHASE_SCHEMA` over the steady-state window's iterations only.
    classes : DataFrame
        :data:`CLASS_SCHEMA`: GPU time per kernel class and phase, largest first within a phase.
    window : dict
        ``{"first": step, "last": step, "iterations": n, "after": step | None}`` — the window's first
        and last units, its size, and the last warming-up unit it follows (None: none warmed up).
    """

    source: str
    iterations: pl.DataFrame
    phases: pl.DataFrame
    window_phases: pl.DataFrame
    classes: pl.DataFrame
    window: dict = field(default_factory=dict)

    def per_token(self, phase: str, *, window: bool = True) -> float | None:
        """Wall ns per token of ``phase`` (in the steady window, else over all its iterations)."""
        frame = (self.window_phases if window else self.phases).filter(pl.col("phase") == phase)
        return frame["ns_per_token"][0] if frame.height else None


def analyze(trace: Trace, gpu: pl.DataFrame, summary: pl.DataFrame) -> Serving | None:
    """The :class:`Serving` of ``trace`` (units as its ``steps``), or None (module docstring)."""
    if trace.steps.height == 0 or summary.height == 0:
        return None
    parsed = _labels(trace)
    if parsed.height == 0:
        parsed = _shapes(trace)
        if parsed.filter(pl.col("phase") == "decode").height == 0:
            return None
    rows = summary.select("step", pl.col("name").alias("label"), "cpu_start_ns", "wall_ns", "cpu_span_ns",
                          "gpu_busy_ns", "gpu_idle_ns", "state").join(parsed, on="step", how="left")
    rows = rows.with_columns(phase=pl.col("phase").fill_null("unknown")).sort("cpu_start_ns", "step")
    rows = rows.with_columns(
        requests=pl.when(pl.any_horizontal(pl.col("prefill_requests", "decode_requests").is_not_null()))
        .then(pl.sum_horizontal("prefill_requests", "decode_requests")).cast(pl.Int64),
        tokens=_tokens())
    window, in_window = _window(rows)
    iterations = rows.with_columns(in_window=in_window).select(list(ITERATION_SCHEMA)).cast(ITERATION_SCHEMA)  # type: ignore[arg-type]
    source = (iterations.filter(pl.col("source").is_not_null()).group_by("source").len()
              .sort(["len", "source"], descending=[True, False])["source"][0])
    return Serving(source=source, iterations=iterations, phases=_phases(iterations),
                   window_phases=_phases(iterations.filter(pl.col("in_window"))),
                   classes=_classes(gpu, iterations), window=window)


def _tokens() -> pl.Expr:
    """The tokens of an iteration's phase (both parts for a mixed one); null when one is unknown."""
    return (pl.when(pl.col("phase") == "prefill").then(pl.col("prefill_tokens"))
            .when(pl.col("phase") == "decode").then(pl.col("decode_tokens"))
            .when(pl.col("phase") == "mixed").then(pl.col("prefill_tokens") + pl.col("decode_tokens"))
            .otherwise(None)).cast(pl.Int64)


_LABEL_COLUMNS = {"step": pl.Int64, "source": pl.String, "phase": pl.String, "prefill_requests": pl.Int64,
                  "prefill_tokens": pl.Int64, "decode_requests": pl.Int64, "decode_tokens": pl.Int64}


def _labels(trace: Trace) -> pl.DataFrame:
    """Per unit, the first serving label starting in it, parsed (empty without labels)."""
    notes = trace.ops.filter((pl.col("cat") == "user_annotation") & pl.col("name").str.contains(serving_labels.ANY_LABEL))
    notes = tag_steps(notes, trace.steps).filter(pl.col("step").is_not_null()).sort("ts", "idx")
    first = notes.unique(subset=["step"], keep="first", maintain_order=True)
    rows = []
    for step, name in zip(first["step"].to_list(), first["name"].to_list()):
        label = serving_labels.parse(name)
        if label is not None:
            rows.append({"step": step, "source": label.engine, "phase": label.phase,
                         "prefill_requests": label.prefill_requests, "prefill_tokens": label.prefill_tokens,
                         "decode_requests": label.decode_requests, "decode_tokens": label.decode_tokens})
    return pl.DataFrame(rows, schema=_LABEL_COLUMNS)


def _shapes(trace: Trace) -> pl.DataFrame:
    """Per unit, the tokens of the first token-input op starting in it (empty without shapes)."""
    op, position, _ = TOKEN_INPUT_OP
    prefix, word, int_types = FUSED_TOKEN_INPUT
    found = trace.ops.filter((pl.col("cat") == "cpu_op") & (
        (pl.col("name") == op) | (pl.col("name").str.starts_with(prefix) & pl.col("name").str.contains(word))))
    found = tag_steps(found, trace.steps).filter(pl.col("step").is_not_null())
    # aten::embedding first where a unit has one, then the earliest fused lookup
    found = found.with_columns(_eager=pl.col("name") == op).sort(["step", "_eager", "ts", "idx"],
                                                                  descending=[False, True, False, False])
    rows = []
    for step, name, raw, types in found.select("step", "name", "input_dims", "input_types").iter_rows():
        if rows and rows[-1]["step"] == step:
            continue
        dims = tensor_dims(raw)
        if name == op:
            shape = dims[position] if len(dims) > position else None
        else:
            kinds = parse_types(types)
            shape = next((d for d, t in zip(dims, kinds) if d is not None and len(d) == 2 and t in int_types), None)
        if not shape:
            continue
        batch, seq = (shape[0], shape[-1]) if len(shape) > 1 else (1, shape[0])
        tokens = batch * seq
        if seq > 1:
            rows.append({"step": step, "source": "shapes", "phase": "prefill", "prefill_requests": batch,
                         "prefill_tokens": tokens, "decode_requests": None, "decode_tokens": None})
        else:
            rows.append({"step": step, "source": "shapes", "phase": "decode", "prefill_requests": None,
                         "prefill_tokens": None, "decode_requests": batch, "decode_tokens": tokens})
    return pl.DataFrame(rows, schema=_LABEL_COLUMNS)


def _window(rows: pl.DataFrame) -> tuple[dict, pl.Series]:
    """The steady-state window (module docstring) and, per row, whether it is in it."""
    states = rows["state"].to_list()
    warm = [i for i, s in enumerate(states) if s in WARMUP_STATES]
    start = warm[-1] + 1 if warm else 0
    inside = [start <= i and s != "partial" for i, s in enumerate(states)]
    steps = [s for s, keep in zip(rows["step"].to_list(), inside) if keep]
    window = {"first": steps[0] if steps else None, "last": steps[-1] if steps else None,
              "iterations": len(steps), "after": rows["step"][warm[-1]] if warm else None}
    return window, pl.Series("in_window", inside, dtype=pl.Boolean)


def _phases(iterations: pl.DataFrame) -> pl.DataFrame:
    """Per phase: sums, and wall and GPU busy per token (null when some token count is unknown)."""
    if iterations.height == 0:
        return pl.DataFrame(schema=PHASE_SCHEMA)
    known = pl.col("tokens").null_count() == 0
    frame = iterations.group_by("phase").agg(
        iterations=pl.len(), requests=pl.when(pl.col("requests").null_count() == 0).then(pl.col("requests").sum()),
        tokens=pl.when(known).then(pl.col("tokens").sum()),
        wall_ns=pl.col("wall_ns").sum(), cpu_span_ns=pl.col("cpu_span_ns").sum(),
        gpu_busy_ns=pl.col("gpu_busy_ns").sum(), gpu_idle_ns=pl.col("gpu_idle_ns").sum())
    frame = frame.with_columns(
        ns_per_token=pl.when(pl.col("tokens") > 0).then(pl.col("wall_ns") / pl.col("tokens")),
        gpu_ns_per_token=pl.when(pl.col("tokens") > 0).then(pl.col("gpu_busy_ns") / pl.col("tokens")))
    order = {p: i for i, p in enumerate((*PHASES, "unknown"))}
    return (frame.with_columns(_o=pl.col("phase").replace_strict(order, default=len(order)))
            .sort("_o").drop("_o").select(list(PHASE_SCHEMA)).cast(PHASE_SCHEMA))  # type: ignore[arg-type]


def _classes(gpu: pl.DataFrame, iterations: pl.DataFrame) -> pl.DataFrame:
    """GPU time per kernel class and phase, and its share of the phase's GPU time."""
    if gpu.height == 0 or "step" not in gpu.columns:
        return pl.DataFrame(schema=CLASS_SCHEMA)
    tagged = gpu.join(iterations.select("step", "phase"), on="step", how="inner")
    frame = (tagged.group_by("phase", "kernel_class").agg(gpu_ns=pl.col("dur").sum())
             .with_columns(share=pl.col("gpu_ns") / pl.col("gpu_ns").sum().over("phase")))
    return frame.sort(["phase", "gpu_ns", "kernel_class"], descending=[False, True, False]).select(
        list(CLASS_SCHEMA)).cast(CLASS_SCHEMA)  # type: ignore[arg-type]
