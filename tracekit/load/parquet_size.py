"""How many bytes a Parquet file's columns may become once read, told from its footer and page headers
before any data is read — so that a small file cannot inflate past ``--max-inflated-size``.

Contract: :func:`column_bounds` returns, for each top-level column of a Parquet file (a path, or the
bytes of one held in memory), an upper bound of the bytes reading it may produce: for every column
chunk the larger of what the footer says (``total_uncompressed_size``, ``num_values``) and what its
pages' headers say (``uncompressed_page_size``, ``num_values``), each value counted once more at
its width as read (:data:`VALUE_WIDTH`: 16 bytes for a string's view, 8 for an Int64): a value taken
from a dictionary, or a null from run-length-encoded levels, costs that much though its page holds
next to nothing. Pages are walked as a reader
walks them: from the chunk's first page through its ``total_compressed_size`` bytes. A footer or page
header that cannot be parsed, or points outside the file, raises :class:`ParquetLayoutError`.

The bound covers decompression and the columns as read; it does not cover what strings read as views
of a shared dictionary become when copied later (one 1 MB name on a million rows is 16 MB read, 1 TB
copied). :func:`logical_bytes` counts that — every string's own length — for a frame once read, cheaply
(it reads the lengths, never the strings), and the loaders check it too before anything downstream runs.

Thrift's compact protocol is read here by hand (the footer format of every Parquet file), bounded:
nesting past :data:`MAX_DEPTH`, a length past the bytes left, or an unknown type is an error, never a
loop or a big allocation. The standard library and Polars only: no Arrow dependency.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import polars as pl

#: Bytes a reader keeps per value, by Parquet physical type (BOOLEAN, INT32, INT64, INT96, FLOAT,
#: DOUBLE, BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY): a string's view is 16 bytes; an unknown type counts 16.
VALUE_WIDTH = (1, 4, 8, 12, 4, 8, 16, 16)
#: Bytes per string counted beside its own length by :func:`logical_bytes`.
BYTES_PER_VALUE = 16
#: Thrift structs nest no deeper than this in a Parquet footer or page header.
MAX_DEPTH = 16
MAGIC = b"PAR1"

# Thrift compact protocol types.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


class ParquetLayoutError(ValueError):
    """The footer or a page header cannot be read, or points outside the file."""


class _Reader:
    """A Thrift compact-protocol reader over ``buf[pos:end]``; structs come back as
    ``{field id: value}``, lists as lists, binaries as bytes."""

    def __init__(self, buf: bytes | memoryview | mmap.mmap, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ParquetLayoutError("truncated Thrift data")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ParquetLayoutError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise ParquetLayoutError("length past the end of the data")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def value(self, kind: int, depth: int) -> object:
        if kind in (_TRUE, _FALSE):
            return kind == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == _BINARY:
            return self.take(self.varint())
        if depth >= MAX_DEPTH:
            raise ParquetLayoutError("Thrift data nested too deep")
        if kind in (_LIST, _SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            if size > self.end - self.pos:  # every element takes a byte at least
                raise ParquetLayoutError("list longer than the data")
            if elem in (_TRUE, _FALSE):  # booleans in a list take a byte each
                return [self.byte() == 1 for _ in range(size)]
            return [self.value(elem, depth + 1) for _ in range(size)]
        if kind == _MAP:
            size = self.varint()
            if size == 0:
                return {}
            if 2 * size > self.end - self.pos:
                raise ParquetLayoutError("map longer than the data")
            head = self.byte()
            return {_hashable(self.value(head >> 4, depth + 1)): self.value(head & 0x0F, depth + 1)
                    for _ in range(size)}
        if kind == _STRUCT:
            return self.struct(depth + 1)
        raise ParquetLayoutError(f"unknown Thrift type {kind}")

    def struct(self, depth: int = 0) -> dict[int, object]:
        if depth >= MAX_DEPTH:
            raise ParquetLayoutError("Thrift data nested too deep")
        fields: dict[int, object] = {}
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == _STOP:
                return fields
            delta = head >> 4
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind, depth)


def _hashable(value: object) -> object:
    return value if isinstance(value, (int, float, bytes, bool)) else repr(value)


def _int(fields: dict[int, object], key: int, default: int = 0) -> int:
    value = fields.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParquetLayoutError(f"field {key} is not an integer")
    return value


def column_bounds(source: str | os.PathLike[str] | bytes) -> dict[str, int]:
    """``{top-level column name: most bytes reading it may produce}`` of the Parquet file ``source``
    (a path or the file's bytes); see the module docstring. :class:`ParquetLayoutError` if unreadable."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _bounds(memoryview(source))
    with open(Path(source), "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise ParquetLayoutError("empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return _bounds(view)


def _bounds(buf: memoryview | mmap.mmap) -> dict[str, int]:
    size = len(buf)
    if size < 12 or bytes(buf[:4]) != MAGIC or bytes(buf[-4:]) != MAGIC:
        raise ParquetLayoutError("no Parquet magic bytes at both ends")
    footer_len = struct.unpack("<I", bytes(buf[-8:-4]))[0]
    if footer_len > size - 12:
        raise ParquetLayoutError("footer longer than the file")
    meta = _Reader(buf, size - 8 - footer_len, size - 8).struct()
    bounds: dict[str, int] = {}
    row_groups = meta.get(4, [])
    if not isinstance(row_groups, list):
        raise ParquetLayoutError("row groups are not a list")
    for group in row_groups:
        if not isinstance(group, dict) or not isinstance(group.get(1, []), list):
            raise ParquetLayoutError("a row group is not a struct")
        for chunk in group.get(1, []):
            col = chunk.get(3) if isinstance(chunk, dict) else None
            if not isinstance(col, dict):
                raise ParquetLayoutError("a column chunk without metadata")
            path = col.get(3)
            if not isinstance(path, list) or not path or not isinstance(path[0], bytes):
                raise ParquetLayoutError("a column chunk without a path")
            name = path[0].decode("utf-8", "replace")
            bounds[name] = bounds.get(name, 0) + _chunk_bound(buf, col)
    return bounds


def _chunk_bound(buf: memoryview | mmap.mmap, col: dict[int, object]) -> int:
    """The most bytes one column chunk may become: the footer's word against its pages' headers."""
    values = _int(col, 5)
    uncompressed = _int(col, 6)
    compressed = _int(col, 7)
    data_offset = _int(col, 9)
    dict_offset = _int(col, 11, 0)
    start = dict_offset if 0 < dict_offset < data_offset else data_offset
    if values < 0 or uncompressed < 0 or compressed < 0 or start < 4 or start + compressed > len(buf) - 8:
        raise ParquetLayoutError("a column chunk points outside the file")
    page_bytes = page_values = 0
    for page_size, page_count in _pages(buf, start, start + compressed):
        page_bytes += page_size
        page_values += page_count
    kind = col.get(1)
    width = VALUE_WIDTH[kind] if isinstance(kind, int) and 0 <= kind < len(VALUE_WIDTH) else 16
    return max(uncompressed, page_bytes) + width * max(values, page_values)


def _pages(buf: memoryview | mmap.mmap, pos: int, end: int) -> Iterator[tuple[int, int]]:
    """(uncompressed size, values) of each page header in ``buf[pos:end]``."""
    while pos < end:
        reader = _Reader(buf, pos, end)
        header = reader.struct()
        uncompressed, compressed = _int(header, 2), _int(header, 3)
        if uncompressed < 0 or compressed < 0:
            raise ParquetLayoutError("a page header with a negative size")
        values = 0
        for key in (5, 7, 8):  # data page, dictionary page, data page v2: num_values first
            sub = header.get(key)
            if isinstance(sub, dict):
                values = _int(sub, 1)
        yield uncompressed, max(values, 0)
        pos = reader.pos + compressed


def logical_bytes(frame: pl.DataFrame) -> int:
    """Bytes ``frame`` holds when every string is counted at its own length (strings that share a
    dictionary's buffer as read are counted once per row: what copying them costs)."""
    total = 0
    for series in frame.get_columns():
        if series.dtype == pl.String:
            total += int(series.str.len_bytes().sum() or 0) + BYTES_PER_VALUE * series.len()
        elif series.dtype == pl.Binary:
            total += int(series.bin.size().sum() or 0) + BYTES_PER_VALUE * series.len()
        else:
            total += series.estimated_size()
    return total


__all__ = ["BYTES_PER_VALUE", "VALUE_WIDTH", "MAX_DEPTH", "ParquetLayoutError", "column_bounds", "logical_bytes"]
