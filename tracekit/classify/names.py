"""Kernel names for people: the ``decoded`` column read back, and long C++ template names shortened.

Contract: :func:`decoded_fields` turns the taxonomy's ``decoded`` column (JSON object text, see
:mod:`tracekit.classify`) into a dict and never raises; :func:`short_kernel_name` and
:func:`describe_decoded` are pure functions of a name and its decoded fields.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

_TEMPLATE_HEAD = re.compile(r"^(?:void\s+)?(?:[\w:]+::)?(\w+)\s*<")


def short_kernel_name(name: str, decoded: str | dict[str, Any] | None = None, limit: int = 80) -> str:
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


def decoded_fields(decoded: str | dict[str, Any] | None) -> dict[str, Any]:
    """The ``decoded`` column (JSON text) as a dict (``{}`` for anything that is not an object)."""
    if decoded is None:
        return {}
    if isinstance(decoded, dict):
        return decoded
    try:
        value = msgspec.json.decode(decoded)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def describe_decoded(decoded: str | dict[str, Any] | None) -> str:
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
