"""Load a PyTorch execution trace (``ExecutionTraceObserver``, Chakra JSON) for tensor-level links.

Contract: :func:`load` reads ``path`` (JSON or gzip, detected by magic bytes) and returns a frozen
:class:`ExecutionTrace`: its nodes (one per recorded op), indexed by ``rf_id`` — which equals the
Kineto cpu_op's ``Record function id``, so the two files join exactly — and by parent (``ctrl_deps``).
:func:`find_beside` finds ``X.et.json.gz`` (or ``.et.json``) next to ``X.json.gz``.

Each input/output value is decoded by its declared type: ``Tensor(<dtype>)`` values
``[tensor_id, storage_id, offset, numel, itemsize, device]`` become :class:`EtTensor`, a
``GenericList[Tensor(...)]`` a tuple of them, anything else stays ``None`` (scalars, strings).
``offset`` is the storage offset in elements; :attr:`EtTensor.byte_range` gives the bytes covered.

Facts that the round-trip analysis relies on (seen on torch 2.11): storage ids follow data pointers,
so the caching allocator's reuse gives a later tensor the same storage id; ``op_schema`` marks
mutated arguments ``Tensor(a!)``; Inductor's Triton kernel nodes have an empty schema and list every
tensor argument (including an in-place ``in_out_ptr``) as inputs, with no outputs; CUDA-graph
replays are not nodes at all.

Raises :class:`tracekit.errors.TraceError` with one line when the file is not an execution trace.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tracekit.errors import TraceError

_TENSOR_TYPE = re.compile(r"Tensor\(([^)]*)\)")
_MUTATED_ARG = re.compile(r"Tensor\([a-z]+!\)(?:\[\])?\??\s+(\w+)")


@dataclass(frozen=True)
class EtTensor:
    """One tensor value of an execution-trace node."""

    tensor_id: int
    storage_id: int
    offset: int
    numel: int
    itemsize: int
    device: str
    dtype: str  # as in the node's types, e.g. "c10::BFloat16"

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def byte_range(self) -> tuple[int, int]:
        start = self.offset * self.itemsize
        return start, start + self.nbytes


EtValue = EtTensor | tuple[EtTensor, ...] | None


@dataclass(frozen=True)
class EtNode:
    """One op of the execution trace (``inputs``/``outputs`` decoded per :data:`EtValue`)."""

    id: int
    name: str
    parent: int | None
    rf_id: int | None
    op_schema: str
    inputs: tuple[EtValue, ...]
    input_shapes: tuple[Any, ...]
    input_types: tuple[str, ...]
    outputs: tuple[EtValue, ...]
    output_types: tuple[str, ...]

    def mutated_inputs(self) -> tuple[int, ...]:
        """Input positions the schema marks as written (``Tensor(a!)``), in schema order."""
        if not self.op_schema or "!" not in self.op_schema:
            return ()
        params = self.op_schema.split("(", 1)[1].rsplit(") ->", 1)[0]
        names = [p.strip() for p in _split_top(params) if p.strip() and p.strip() != "*"]
        written = set(_MUTATED_ARG.findall(params))
        return tuple(i for i, p in enumerate(names) if p.split("=")[0].split()[-1] in written)


@dataclass(frozen=True)
class ExecutionTrace:
    """A loaded execution trace: nodes in file order, plus lookups by ``rf_id`` and by parent."""

    path: str
    schema: str
    nodes: tuple[EtNode, ...]
    by_rf_id: dict[int, EtNode] = field(repr=False)
    children: dict[int, tuple[int, ...]] = field(repr=False)
    by_id: dict[int, EtNode] = field(repr=False)

    def descendants(self, node_id: int) -> list[EtNode]:
        """All nodes under ``node_id`` (depth first, children by id = call order)."""
        out: list[EtNode] = []
        stack = list(reversed(self.children.get(node_id, ())))
        while stack:
            nid = stack.pop()
            node = self.by_id[nid]
            out.append(node)
            stack.extend(reversed(self.children.get(nid, ())))
        return out


def find_beside(trace_path: str | Path) -> Path | None:
    """``X.et.json.gz`` / ``X.et.json`` beside the Kineto trace ``X.json.gz`` / ``X.json``, if present."""
    path = Path(trace_path)
    name = path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix) and not name.endswith(".et" + suffix):
            stem = name[: -len(suffix)]
            for et_suffix in (".et.json.gz", ".et.json"):
                candidate = path.with_name(stem + et_suffix)
                if candidate.is_file():
                    return candidate
    return None


def locate(trace_path: str | Path, original_path: str | Path | None = None) -> Path | None:
    """The execution trace beside ``trace_path``, else beside ``original_path`` (the JSON a Parquet
    file was converted from), else None — the "auto" rule of :mod:`tracekit.session`."""
    return find_beside(trace_path) or (find_beside(original_path) if original_path else None)


def load(path: str | Path) -> ExecutionTrace:
    """Read an execution trace file; raises TraceError with one line if it is not one."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise TraceError(path, f"cannot read execution trace ({err.strerror or err})") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise TraceError(path, f"corrupt gzip ({err})") from None
    try:
        top = msgspec.json.decode(data)
    except msgspec.DecodeError as err:
        raise TraceError(path, f"not JSON ({err})") from None
    if not isinstance(top, dict) or not isinstance(top.get("nodes"), list):
        raise TraceError(path, "not an execution trace (no 'nodes' list)")
    return from_data(top, str(path))


def from_data(top: dict[str, Any], path: str = "<memory>") -> ExecutionTrace:
    """Build an :class:`ExecutionTrace` from the decoded top-level object (used by tests too)."""
    nodes = []
    for raw in top["nodes"]:
        if not isinstance(raw, dict) or "id" not in raw:
            continue
        attrs = {a.get("name"): a.get("value") for a in raw.get("attrs") or () if isinstance(a, dict)}
        ins = raw.get("inputs") or {}
        outs = raw.get("outputs") or {}
        in_types = tuple(str(t) for t in ins.get("types") or ())
        out_types = tuple(str(t) for t in outs.get("types") or ())
        rf = attrs.get("rf_id")
        parent = raw.get("ctrl_deps")
        nodes.append(EtNode(
            id=int(raw["id"]), name=str(raw.get("name", "")),
            parent=int(parent) if isinstance(parent, int) and parent != raw["id"] else None,
            rf_id=int(rf) if isinstance(rf, int) and rf > 0 else None,
            op_schema=str(attrs.get("op_schema") or ""),
            inputs=_values(ins.get("values") or (), in_types), input_shapes=tuple(ins.get("shapes") or ()),
            input_types=in_types,
            outputs=_values(outs.get("values") or (), out_types), output_types=out_types,
        ))
    nodes.sort(key=lambda n: n.id)
    by_rf: dict[int, EtNode] = {}
    children: dict[int, list[int]] = {}
    for node in nodes:
        if node.rf_id is not None:
            by_rf.setdefault(node.rf_id, node)
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node.id)
    return ExecutionTrace(
        path=path, schema=str(top.get("schema", "")), nodes=tuple(nodes), by_rf_id=by_rf,
        children={k: tuple(v) for k, v in children.items()}, by_id={n.id: n for n in nodes},
    )


def _split_top(text: str) -> list[str]:
    """Split a schema's parameter list on commas outside brackets (defaults like ``dim=[1, 2]``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _values(values, types: tuple[str, ...]) -> tuple[EtValue, ...]:
    out: list[EtValue] = []
    for i, value in enumerate(values):
        type_name = types[i] if i < len(types) else ""
        dtypes = _TENSOR_TYPE.findall(type_name)
        if type_name.startswith("Tensor(") and _is_tensor_value(value):
            out.append(_tensor(value, dtypes[0]))
        elif dtypes and isinstance(value, list):
            items = [v for v in value if _is_tensor_value(v)]
            out.append(tuple(_tensor(v, dtypes[min(j, len(dtypes) - 1)]) for j, v in enumerate(items)))
        else:
            out.append(None)
    return tuple(out)


def _is_tensor_value(value) -> bool:
    return (isinstance(value, list) and len(value) >= 5
            and all(isinstance(v, int) for v in value[:5]))


def _tensor(value: list, dtype: str) -> EtTensor:
    device = value[5] if len(value) > 5 else ""
    return EtTensor(tensor_id=value[0], storage_id=value[1], offset=value[2], numel=value[3],
                    itemsize=value[4], device=str(device), dtype=dtype)
