"""Parse the raw ``Input Dims`` / ``Input type`` text kept by the loader, only where needed.

``Input Dims`` is nested unevenly: a tensor is ``[d0, d1, …]``, a scalar or None is ``[]``, a
TensorList is a list of such lists. :func:`parse_dims` returns the decoded nested lists;
:func:`tensor_dims` keeps only plain tensor shapes (lists of ints) by position; :func:`kineto_text`
writes such text the one way Kineto does, whatever whitespace the file had.
"""

from __future__ import annotations

from functools import lru_cache

import msgspec

_DECODER = msgspec.json.Decoder()

#: Bytes per element of the dtypes ``Input type`` names.
DTYPE_BYTES = {
    "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8, "int": 4, "long int": 8,
    "long": 8, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::complex<float>": 8,
}
#: Short names used in reports.
DTYPE_SHORT = {
    "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "double": "fp64",
    "int": "int32", "long int": "int64", "long": "int64", "bool": "bool",
    "c10::Float8_e4m3fn": "fp8e4m3", "c10::Float8_e5m2": "fp8e5m2",
}


def _decode_list(raw: str | None) -> list | None:
    """The JSON list in ``raw``, or None when it is empty, malformed, nested past the decoder's
    limit or not a list."""
    if not raw:
        return None
    try:
        value = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return value if isinstance(value, list) else None


#: No real tensor has this many elements: a shape past it (2^62 dims, a product that would
#: overflow byte counts) is unparsable, as is a dim that is negative, a float or a boolean.
MAX_NUMEL = 2**53


@lru_cache(maxsize=65536)
def parse_dims(raw: str | None) -> tuple:
    """Decode ``Input Dims`` text into nested tuples (cached: the same shapes recur every step).
    A shape that is no real tensor's (see :data:`MAX_NUMEL`) becomes None: unparsable, never a
    number that overflows later."""
    value = _decode_list(raw)
    if value is None:
        return ()
    try:
        return _freeze(value)
    except RecursionError:
        return ()


@lru_cache(maxsize=65536)
def parse_types(raw: str | None) -> tuple[str, ...]:
    """Decode ``Input type`` text into a tuple of type names ("" for non-tensors)."""
    value = _decode_list(raw)
    return () if value is None else tuple(v if isinstance(v, str) else "" for v in value)


def tensor_dims(raw: str | None) -> list[tuple[int, ...] | None]:
    """Per input position: the tensor's shape, or None when it is not a plain tensor."""
    out: list[tuple[int, ...] | None] = []
    for item in parse_dims(raw):
        if isinstance(item, tuple) and item and all(isinstance(d, int) for d in item):
            out.append(item)
        else:
            out.append(None)
    return out


def _freeze(value):
    if isinstance(value, list):
        if value and all(isinstance(v, int) for v in value):  # a shape
            numel = 1
            for dim in value:
                numel *= dim
                if type(dim) is bool or not 0 <= dim < MAX_NUMEL or numel >= MAX_NUMEL:
                    return None
            return tuple(value)
        return tuple(_freeze(v) for v in value)
    return value


@lru_cache(maxsize=4096)
def kineto_text(raw: str | None) -> str | None:
    """``raw`` JSON list text (``Input Dims``, ``Input type``) written as Kineto writes it: ``", "``
    between items, no other whitespace, so the same shapes read the same from a trace re-saved
    minified or indented (``[[1,2],[]]`` and ``[[1, 2], []]`` both give the latter). Text that is
    not a JSON list, or nested too deep to write back, is returned as it is."""
    value = _decode_list(raw)
    if value is None:
        return raw
    try:
        return _kineto(value)
    except RecursionError:
        return raw


def _kineto(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_kineto(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_kineto(k)}: {_kineto(v)}" for k, v in value.items()) + "}"
    return msgspec.json.encode(value).decode()
