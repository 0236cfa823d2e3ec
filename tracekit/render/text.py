"""Formatting helpers shared by the renderers: durations, bytes, short kernel names, escaping."""

from __future__ import annotations

import re

import msgspec


def us(ns: int | None) -> str:
    """Nanoseconds as microseconds with one decimal ("241.3 µs"); "–" for missing."""
    if ns is None:
        return "–"
    return f"{ns / 1000:,.1f} µs"


def pct(part: float, whole: float) -> str:
    """``part/whole`` as a percentage with one decimal; "–" when ``whole`` is 0."""
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


_TEMPLATE_HEAD = re.compile(r"^(?:void\s+)?(?:[\w:]+::)?(\w+)\s*<")


def short_kernel_name(name: str, decoded: str | dict | None = None, limit: int = 80) -> str:
    """A readable kernel name: C++ template kernels shortened to ``template<functor>``.

    ``void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(…)…>(…)``
    becomes ``vectorized_elementwise_kernel<8, GeluCUDAKernelImpl>``; plain names are kept whole
    up to ``limit`` characters.
    """
    fields = decoded_fields(decoded)
    match = _TEMPLATE_HEAD.match(name)
    if match and len(name) > limit:
        inner = [str(fields[k]) for k in ("vector_width", "functor") if fields.get(k) is not None]
        return f"{match.group(1)}<{', '.join(inner) or '…'}>"
    if len(name) > limit:
        return name[: limit - 1] + "…"
    return name


def decoded_fields(decoded: str | dict | None) -> dict:
    """The ``decoded`` column (JSON text) as a dict."""
    if decoded is None:
        return {}
    if isinstance(decoded, dict):
        return decoded
    try:
        value = msgspec.json.decode(decoded)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def describe_decoded(decoded: str | dict | None) -> str:
    """Decoded fields as ``key=value`` pairs (lists joined with "+"), keys in a stable order."""
    fields = decoded_fields(decoded)
    parts = []
    for key in sorted(fields):
        value = fields[key]
        if isinstance(value, list):
            value = "+".join(str(v) for v in value)
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def md_escape(text: object) -> str:
    """Make ``text`` safe inside a GitHub Markdown table cell (pipes, backticks, HTML)."""
    if text is None:
        return ""
    s = str(text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("|", "\\|").replace("`", "&#96;").replace("*", "\\*").replace("_", "\\_")
    return s.replace("\r", " ").replace("\n", " ")
