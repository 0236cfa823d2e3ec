"""Kernel names for people and for the rules: profiler spellings normalised, C++ names demangled, long
template names shortened, the ``decoded`` column read back.

Contract
--------
- :func:`rule_text` is the text the taxonomy's rules read: the name stripped of padding and of the
  ``.kd`` / ``[clone .kd]`` suffix rocprof adds (the AMD kernel-descriptor symbol), and demangled when
  it arrives as an Itanium-mangled symbol (``_ZN2ck…``: Composable Kernel and XLA traces record the
  raw symbol). It is a pure function, linear in the name, and never raises.
- :func:`display_kernel_name` is what every table shows: :func:`rule_text`, then cut to ``limit``
  characters. The cut is for display only: frames, joins and JSON keep the full original name.
- :func:`short_kernel_name` also folds C++ template kernels to ``template<functor>``.
- :func:`decoded_fields` turns the ``decoded`` column (JSON object text) into a dict and never raises;
  :func:`describe_decoded` words it.

Demangling uses ``cpp_demangle`` (Rust ``cpp_demangle`` bindings: a wheel with no dependencies, no
compiler or system library needed, bounded recursion, returns an error instead of crashing on hostile
input). A symbol longer than :data:`DEMANGLE_MAX_CHARS` is not demangled (it is shown raw, cut), and
if the package is missing the raw name is used: classification never depends on it being importable.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import msgspec

# Real Composable Kernel symbols are 2-10 KB mangled; 64 KB leaves room and bounds the work a
# crafted symbol can cause (the demangled text can be several times longer than the symbol).
DEMANGLE_MAX_CHARS = 65_536
_DEMANGLED_MAX_CHARS = 1_048_576

_ROCPROF_SUFFIXES = (" [clone .kd]", "[clone .kd]", ".kd")


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str | None:
    """The demangled form of an Itanium C++ symbol (``_Z…``), or ``None`` if it is not one or cannot be
    demangled (malformed, over :data:`DEMANGLE_MAX_CHARS`, or ``cpp_demangle`` unavailable)."""
    if not symbol.startswith("_Z") or len(symbol) > DEMANGLE_MAX_CHARS:
        return None
    try:
        import cpp_demangle
    except ImportError:  # pragma: no cover - a core dependency; degrade to raw names without it
        return None
    try:
        text = cpp_demangle.demangle(symbol)
    except Exception:  # noqa: BLE001 - malformed or hostile symbols raise ValueError; any failure -> raw
        return None
    if not isinstance(text, str) or not text or len(text) > _DEMANGLED_MAX_CHARS:
        return None
    return text


def rule_text(name: str) -> str:
    """The name as the taxonomy reads it: stripped, rocprof's ``.kd`` suffix removed, demangled."""
    text = name.strip()
    for suffix in _ROCPROF_SUFFIXES:
        if text.endswith(suffix):
            text = text[: -len(suffix)].rstrip()
            break
    if text.startswith("_Z"):
        text = demangle(text) or text
    return text


def display_kernel_name(name: str, limit: int = 160) -> str:
    """A readable name for tables: :func:`rule_text` (demangled), cut to ``limit`` characters with "…"."""
    text = rule_text(name)
    if len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


_TEMPLATE_HEAD = re.compile(r"^(?:void\s+)?(?:[\w:]+::)?(\w+)\s*<")


def short_kernel_name(name: str, decoded: str | dict[str, Any] | None = None, limit: int = 80) -> str:
    """A readable kernel name: C++ template kernels shortened to ``template<functor>``.

    ``void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(…)…>(…)``
    becomes ``vectorized_elementwise_kernel<8, GeluCUDAKernelImpl>``; mangled symbols are demangled
    first; anything else is kept whole up to ``limit`` characters (cut with "…" beyond).
    """
    fields = decoded_fields(decoded)
    text = rule_text(name)
    if len(text) > limit:
        # the head of a real template name is short; anonymous namespaces are not part of its name
        head = text[:4096].replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
        match = _TEMPLATE_HEAD.match(head)
        if match:
            inner = [str(fields[k]) for k in ("vector_width", "functor") if fields.get(k) is not None]
            text = f"{match.group(1)}<{', '.join(inner) or '…'}>"
    if len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


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
