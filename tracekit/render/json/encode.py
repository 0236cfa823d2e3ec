"""Writing a JSON contract: deterministic bytes (:func:`encode`) and the helpers every schema module
shares (:func:`rows` of a frame, :func:`finite`)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


def encode(data: Any) -> bytes:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline.

    Strings are written whole and exact (msgspec escapes control characters, quotes and
    backslashes), so every name keeps its identity. The one string JSON cannot hold is one with a
    lone surrogate (a file name that is not UTF-8, decoded by Python's ``surrogateescape``): each
    such code point is written as U+FFFD instead of failing.
    """
    import msgspec

    try:
        raw = msgspec.json.encode(data, order="sorted")
    except UnicodeEncodeError:
        raw = msgspec.json.encode(_without_surrogates(data), order="sorted")
    return msgspec.json.format(raw, indent=2) + b"\n"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return _SURROGATE.sub("\ufffd", data)
    if isinstance(data, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_without_surrogates(v) for v in data]
    return data


def rows(frame: pl.DataFrame, rename: dict[str, str] | None = None,
          drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rename = rename or {}
    return [
        {rename.get(k, k): v for k, v in row.items() if k not in drop}
        for row in frame.iter_rows(named=True)
    ]




def finite(x: float | None) -> float | None:
    """``x``, or None for an infinity or NaN (JSON has neither)."""
    return x if x is None or math.isfinite(x) else None
