"""Serving engines' iteration annotations: what one label says about its iteration.

Contract: :func:`parse` takes an annotation's name and returns a :class:`Label` (engine, phase,
requests and tokens per phase) or None when no engine writes that name; :data:`ENGINES` is the table
of spellings, each with where the engine writes it. :func:`family` names the family a label belongs
to, so that iterations whose labels differ (``execute_context_1(512)_generation_3(3)`` then
``execute_context_0(0)_generation_4(4)``) are units of one name (:mod:`tracekit.analyses.units`).

Phases: ``prefill`` (prompt tokens only), ``decode`` (one new token per running request, or the
engine's own count), ``mixed`` (both in one iteration: chunked prefill batched with decodes) and
``other`` (an iteration the label does not place: idle, speculative verification). Counts the label
does not carry are None, never guessed — but for the decode iterations of engines that write one
token per decode request (SGLang's ``DECODE`` mode is never speculative).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Label:
    """What one iteration annotation says (counts None where the label does not carry them)."""

    engine: str
    phase: str
    prefill_requests: int | None
    prefill_tokens: int | None
    decode_requests: int | None
    decode_tokens: int | None


def _phase(prefill: int | None, decode: int | None) -> str:
    if prefill and decode:
        return "mixed"
    if prefill:
        return "prefill"
    return "decode" if decode else "other"


def _vllm(m: re.Match) -> Label:
    nc, ct, ng, gt = (int(m.group(k)) for k in ("nc", "ct", "ng", "gt"))
    return Label("vllm", _phase(nc, ng), nc, ct, ng, gt)


def _vllm_v1_early(m: re.Match) -> Label:
    new, cached = int(m.group("new")), int(m.group("cached"))
    # Cached requests may still be in a chunked prefill: their tokens are not in the label.
    return Label("vllm", _phase(new, cached), new, None, cached, None)


#: SGLang ForwardMode names by phase (EXTEND is a prefill, possibly on a cached prefix).
_SGLANG_PHASES = {"EXTEND": "prefill", "SPLIT_PREFILL": "prefill", "DECODE": "decode", "MIXED": "mixed"}


def _sglang(m: re.Match) -> Label:
    mode, bs = m.group("mode"), int(m.group("bs"))
    toks = int(m.group("toks")) if m.group("toks") else None
    phase = _SGLANG_PHASES.get(mode, "other")
    if phase == "prefill":
        return Label("sglang", phase, bs, toks, None, None)
    if phase == "decode":
        return Label("sglang", phase, None, None, bs, bs)
    return Label("sglang", phase, None, None, None, None)


def _trtllm(m: re.Match) -> Label:
    ctx, gen = int(m.group("ctx")), int(m.group("gen"))
    # Generation requests yield one token per step without speculative decoding, which the label
    # does not say: the decode tokens are left unknown too.
    return Label("tensorrt-llm", _phase(ctx, gen), ctx, None, gen, None)


#: (engine, pattern, family name, parser, where the engine writes it). The family is what
#: ``--unit`` takes to use every label of the engine as units.
ENGINES: tuple[tuple[str, re.Pattern, str, object, str], ...] = (
    ("vllm", re.compile(r"^execute_context_(?P<nc>\d+)\((?P<ct>\d+)\)_generation_(?P<ng>\d+)\((?P<gt>\d+)\)$"),
     "execute_context_N(ctx)_generation_M(gen)", _vllm,
     "vLLM's worker (annotate_profile): context requests(tokens), generation requests(tokens)"),
    ("vllm", re.compile(r"^execute_new_(?P<new>\d+)_cached_(?P<cached>\d+)$"),
     "execute_new_N_cached_M", _vllm_v1_early,
     "vLLM V1 workers of 2025 (annotate_profile): new and cached request counts, no tokens"),
    ("sglang", re.compile(r"^step\[(?P<mode>[A-Z_0-9]+) bs=(?P<bs>\d+)(?: toks=(?P<toks>\d+))?(?: [^\]]*)?\]$"),
     "step[MODE bs=N]", _sglang,
     "SGLang's model runner (build_step_span_name): forward mode, batch size, extend tokens"),
    ("tensorrt-llm", re.compile(
        r"^(?:\[Executor\] )?_forward_step(?: \d+)?: (?P<ctx>\d+) ctx reqs, (?P<gen>\d+) gen reqs$"),
     "_forward_step", _trtllm,
     "TensorRT-LLM's PyTorch executor (_forward_step range): context and generation request counts"),
)


def parse(name: str) -> Label | None:
    """The :class:`Label` of an annotation ``name``, or None when no engine writes it."""
    for _, pattern, _, parser, _ in ENGINES:
        m = pattern.match(name)
        if m:
            return parser(m)  # type: ignore[operator]
    return None


def family(name: str) -> str | None:
    """The family name of a serving annotation (``execute_context_N(ctx)_generation_M(gen)``), or None."""
    for _, pattern, fam, _, _ in ENGINES:
        if pattern.match(name):
            return fam
    return None


#: Regular expression matching any serving label (for Polars filters).
ANY_LABEL = "|".join(f"(?:{pattern.pattern})" for _, pattern, _, _, _ in ENGINES)
