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

Every schema version loads (``1.0.1`` with list-shaped ``inputs`` through Chakra ``1.1.x``);
values of unexpected types are read as absent. Raises :class:`tracekit.errors.TraceError` with one
line when the file is not an execution trace (a Kineto trace given here is named as one).
"""

from __future__ import annotations

import os
import re
import stat
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
    skipped_nodes: int = 0  # nodes without a usable integer id

    def descendants(self, node_id: int) -> list[EtNode]:
        """All nodes under ``node_id`` (depth first, children by id = call order; each node once,
        so a file whose parents form a cycle cannot make this loop)."""
        out: list[EtNode] = []
        seen = {node_id}
        stack = list(reversed(self.children.get(node_id, ())))
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            out.append(self.by_id[nid])
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
                if _is_file(candidate):
                    return candidate
    return None


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file; False where the probe itself fails. A trace whose name
    is near the file system's limit (255 bytes) has a longer name beside it (``ENAMETOOLONG``), and
    a name that cannot exist cannot be an execution trace; ``Path.is_file`` raises for it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def locate(trace_path: str | Path, original_path: str | Path | None = None) -> Path | None:
    """The execution trace beside ``trace_path``, else beside ``original_path`` (the JSON a Parquet
    file was converted from), else None — the "auto" rule of :mod:`tracekit.session`."""
    return find_beside(trace_path) or (find_beside(original_path) if original_path else None)


def load(path: str | Path) -> ExecutionTrace:
    """Read an execution trace file (JSON, or compressed as :mod:`tracekit.load.source` reads it);
    raises TraceError with one line if it is not one."""
    from tracekit.load import source

    label = Path(path)
    data = source.read_input(path, what="execution trace").data
    try:
        top = msgspec.json.decode(data)
    except msgspec.DecodeError as err:
        raise TraceError(label, f"execution trace is not JSON ({str(err).splitlines()[0]})") from None
    except RecursionError:
        raise TraceError(label, "execution trace JSON nested deeper than the decoder's limit "
                                "(about 1,000 levels)") from None
    finally:
        if hasattr(data, "close"):
            data.close()
    if isinstance(top, dict) and "traceEvents" in top:
        raise TraceError(label, "a Kineto trace, not an execution trace: pass it as TRACE")
    if not isinstance(top, dict) or not isinstance(top.get("nodes"), list):
        raise TraceError(label, "not an execution trace (no 'nodes' list)")
    return from_data(top, str(path))


def from_data(top: dict[str, Any], path: str = "<memory>") -> ExecutionTrace:
    """Build an :class:`ExecutionTrace` from the decoded top-level object (used by tests too).

    Every schema version is read: ``1.0.1`` (the ``ExecutionGraphObserver`` era: ``inputs`` a list
    of values beside ``input_shapes``/``input_types``, ``rf_id``/``op_schema``/``parent`` on the
    node) and Chakra ``1.0.2``+ (``inputs`` an object of ``values``/``shapes``/``types``,
    ``attrs`` a list of ``{name, value}``, ``ctrl_deps`` the parent). A node without a usable
    integer ``id`` is skipped and counted (``skipped_nodes``); values of unexpected types are
    read as absent, never a reason to refuse the file.
    """
    nodes = []
    skipped = 0
    for raw in top["nodes"]:
        node_id = _node_id(raw.get("id")) if isinstance(raw, dict) else None
        if node_id is None:
            skipped += 1
            continue
        attrs_list = raw.get("attrs")
        attrs = {a.get("name"): a.get("value") for a in attrs_list
                 if isinstance(a, dict) and isinstance(a.get("name"), str)} if isinstance(attrs_list, list) else {}
        ins, in_types, in_shapes = _side(raw, "input")
        outs, out_types, _ = _side(raw, "output")
        rf = attrs.get("rf_id", raw.get("rf_id"))
        parent = _node_id(raw.get("ctrl_deps", raw.get("parent")))
        schema = attrs.get("op_schema", raw.get("op_schema"))
        nodes.append(EtNode(
            id=node_id, name=_text(raw.get("name")),
            parent=parent if parent is not None and parent != node_id else None,
            rf_id=rf if _node_id(rf) is not None and rf > 0 else None,
            op_schema=schema if isinstance(schema, str) else "",
            inputs=_values(ins, in_types), input_shapes=in_shapes, input_types=in_types,
            outputs=_values(outs, out_types), output_types=out_types,
        ))
    nodes.sort(key=lambda n: n.id)
    by_rf: dict[int, EtNode] = {}
    children: dict[int, list[int]] = {}
    for node in nodes:
        if node.rf_id is not None:
            by_rf.setdefault(node.rf_id, node)
        if node.parent is not None:
            children.setdefault(node.parent, []).append(node.id)
    by_id = {n.id: n for n in nodes}
    return ExecutionTrace(
        path=path, schema=_text(top.get("schema", "")), nodes=tuple(nodes), by_rf_id=by_rf,
        children={k: tuple(i for i in v if i in by_id) for k, v in children.items()}, by_id=by_id,
        skipped_nodes=skipped,
    )


#: Ids, counts and sizes beyond this are no real tensor's (they would overflow Int64 sums later).
_MAX_VALUE = 2**53


def _node_id(value: Any) -> int | None:
    """A node id (or rf_id, parent): a non-negative int below 2^63, or decimal text of one."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _side(raw: dict[str, Any], side: str) -> tuple[list[Any], tuple[str, ...], tuple[Any, ...]]:
    """(values, types, shapes) of a node's inputs or outputs, in either schema's shape."""
    block = raw.get(f"{side}s")
    if isinstance(block, dict):  # Chakra 1.0.2+
        values, types, shapes = block.get("values"), block.get("types"), block.get("shapes")
    else:  # 1.0.1: parallel lists on the node
        values, types, shapes = block, raw.get(f"{side}_types"), raw.get(f"{side}_shapes")
    return (values if isinstance(values, list) else [],
            tuple(_text(t) for t in types) if isinstance(types, list) else (),
            tuple(_shape(x) for x in shapes) if isinstance(shapes, list) else ())


def _shape(value: Any) -> Any:
    """A tensor shape (list of dims) or a TensorList's shapes (list of lists) as written; anything
    else — dims that are not non-negative ints, absurd sizes, deeper nesting — as ``[]``."""
    if not isinstance(value, list):
        return []
    if all(isinstance(d, list) for d in value) and value:
        return [_shape(d) if all(not isinstance(x, list) for x in d) else [] for d in value]
    numel = 1
    for d in value:
        if not (isinstance(d, int) and not isinstance(d, bool) and 0 <= d < _MAX_VALUE):
            return []
        numel *= d
        if numel >= _MAX_VALUE:
            return []
    return value


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


def _values(values: list[Any], types: tuple[str, ...]) -> tuple[EtValue, ...]:
    out: list[EtValue] = []
    for i, value in enumerate(values):
        type_name = types[i] if i < len(types) else ""
        dtypes = _TENSOR_TYPE.findall(type_name)
        if type_name.startswith("Tensor("):  # one tensor: its value, or nothing usable
            out.append(_tensor(value, dtypes[0]) if _is_tensor_value(value) and dtypes else None)
        elif dtypes and isinstance(value, list):
            items = [v for v in value if _is_tensor_value(v)]
            out.append(tuple(_tensor(v, dtypes[min(j, len(dtypes) - 1)]) for j, v in enumerate(items)))
        else:
            out.append(None)
    return tuple(out)


def _is_tensor_value(value: Any) -> bool:
    return (isinstance(value, list) and len(value) >= 5
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _MAX_VALUE for v in value[:5])
            and value[3] * value[4] < _MAX_VALUE)


def _tensor(value: list, dtype: str) -> EtTensor:
    device = value[5] if len(value) > 5 else ""
    return EtTensor(tensor_id=value[0], storage_id=value[1], offset=value[2], numel=value[3],
                    itemsize=value[4], device=str(device), dtype=dtype)
