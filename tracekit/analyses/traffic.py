"""Per-op models of HBM traffic and FLOPs: which tensors an op reads and writes, from its shapes.

Contract: :func:`model` takes an op name (``aten::mm``, ``triton_poi_fused_…``,
``LigerGELUMulFunction``…) and its arguments (:func:`args_from_kineto` decodes the trace's
``Input Dims`` / ``Input type``; :func:`args_from_et` an execution-trace node) and returns an
:class:`OpTraffic` — the tensors read and written, each tied to the argument position (or new output)
it is, so a caller can follow exact tensor ids — or None when no model covers the op. Callers count
None as *unknown*; nothing here guesses an op it does not know.

Models (bytes = numel × itemsize of each tensor, read once; each kernel is assumed to stream its
operands from HBM once, which is the ideal an L2-resident tile schedule approaches):

- ``mm``/``bmm``/``addmm``/``baddbmm``/``linear``/``matmul``: read the operands (and bias), write
  [.., M, N]; FLOPs 2·M·N·K (·batch). The bias add's M·N is left out (the issue's GEMM convention).
  An ``out=`` tensor (Inductor calls ``mm.out``/``addmm.out``) is written, not read.
- elementwise (unary/binary/ternary, with broadcasting, comparisons → bool): read every tensor
  argument at its own size, write the broadcast shape in the promoted dtype; in-place variants
  (``add_``) write their first argument. FLOPs: one per output element (nominal).
- copies: ``copy_`` reads src and writes self; ``clone``/``contiguous`` read and write a
  same-shaped tensor; ``_foreach_copy_`` reads the src list and writes the self list (Kineto keeps no
  TensorList dtype: :func:`foreach_copy_dtype` reads it from the kernel's name, which
  :func:`with_list_dtype` gives the lists); ``fill_``/``zero_`` only write.
- ``_softmax``/``_log_softmax``: read x, write same shape; ``_softmax_backward_data`` and
  ``_log_softmax_backward_data`` read grad and output, write grad_input.
- ``native_layer_norm``: read x, weight, bias; write y and the fp32 mean and rstd
  (FLOPs nominal 8 per element). Without a weight the normalized rank is unknown: unknown.
- Inductor ``triton_poi_*`` (pointwise): read the tensor arguments, write one tensor as large as the
  largest. Inductor orders arguments ``in_out_ptr*, in_ptr*, out_ptr*``: the written tensor is either
  the first argument, updated in place, or the last, write-only. :func:`resolve_inductor` decides
  from whether the last argument holds a live value (see ``round_trips``). ``triton_red``/
  ``triton_per``/``triton_tem`` (reductions, templates) are unknown.
- ``LigerGELUMulFunction``/``LigerSiLUMulFunction``: read gate and up, write one tensor of gate's shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from math import prod

from tracekit.shapes import DTYPE_BYTES, DTYPE_SHORT, parse_dims, parse_types


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's shape and dtype (torch's type name, e.g. ``c10::BFloat16``; "" when unknown)."""

    shape: tuple[int, ...]
    dtype: str

    # Cached on the instance (frozen fields never change; models are shared across calls).
    @cached_property
    def numel(self) -> int:
        return prod(self.shape) if self.shape else 1

    @cached_property
    def nbytes(self) -> int | None:
        size = DTYPE_BYTES.get(self.dtype)
        return None if size is None else self.numel * size

    @property
    def short_dtype(self) -> str:
        return DTYPE_SHORT.get(self.dtype, self.dtype or "?")


Arg = TensorSpec | tuple[TensorSpec, ...] | None


@dataclass(frozen=True)
class Access:
    """One tensor read or written: input ``arg`` (``item`` within a TensorList), or new ``output``."""

    tensor: TensorSpec
    arg: int | None = None
    item: int | None = None
    output: int | None = None


@dataclass(frozen=True)
class OpTraffic:
    """What one op reads and writes (see module docstring); ``dtype`` is the short compute dtype."""

    model: str
    reads: tuple[Access, ...]
    writes: tuple[Access, ...]
    flops: int
    dtype: str | None
    #: Inductor kernel whose written argument (first, in place, or last, write-only) is undecided.
    inductor_out: bool = False

    @property
    def bytes_read(self) -> int | None:
        return _sum_bytes(self.reads)

    @property
    def bytes_written(self) -> int | None:
        return _sum_bytes(self.writes)


def _sum_bytes(accesses: tuple[Access, ...]) -> int | None:
    total = 0
    for a in accesses:
        n = a.tensor.nbytes
        if n is None:
            return None
        total += n
    return total


# ---- argument decoding ---------------------------------------------------------------------------

def _is_dtype(type_name: str) -> bool:
    return type_name in DTYPE_BYTES or type_name.startswith("c10::")


def args_from_kineto(input_dims: str | None, input_types: str | None) -> list[Arg]:
    """Arguments from the trace's raw ``Input Dims`` / ``Input type`` (TensorList dtypes are "")."""
    dims = parse_dims(input_dims)
    types = parse_types(input_types)
    out: list[Arg] = []
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if isinstance(d, tuple) and all(isinstance(x, int) for x in d) and _is_dtype(t):
            out.append(TensorSpec(tuple(d), t))
        elif t == "TensorList" and isinstance(d, tuple) and d and all(isinstance(x, tuple) for x in d):
            out.append(tuple(TensorSpec(tuple(x), "") for x in d))
        else:
            out.append(None)
    return out


#: The element types a foreach copy kernel names: ``multi_tensor_apply_kernel<…, at::native::Copy<c10::BFloat16,
#: c10::BFloat16> >`` (the launch of ``aten::_foreach_copy_``'s fast path).
_FOREACH_COPY = re.compile(r"multi_tensor_apply_kernel<.*\bCopy<([^<>,]+), ([^<>,]+)>")


def foreach_copy_dtype(kernel_name: str | None) -> str:
    """The dtype of both lists a foreach copy kernel copies, from its name; "" when the name is not a
    foreach copy's or names two dtypes (which side is which is not decided here) or one unknown.

    Kineto records a TensorList's shapes but not its dtype; this kernel's name states it."""
    found = _FOREACH_COPY.search(kernel_name or "")
    if found is None or found[1] != found[2] or found[1] not in DTYPE_BYTES:
        return ""
    return found[1]


def with_list_dtype(args: list[Arg], dtype: str) -> list[Arg]:
    """``args`` with ``dtype`` given to the TensorList members whose dtype is unknown ("")."""
    if not dtype:
        return args
    return [tuple(t if t.dtype else TensorSpec(t.shape, dtype) for t in a) if isinstance(a, tuple) else a
            for a in args]


def args_from_et(node) -> list[Arg]:
    """Arguments from an :class:`tracekit.execution_trace.EtNode` (exact dtypes, lists included)."""
    out: list[Arg] = []
    for i, value in enumerate(node.inputs):
        shape = node.input_shapes[i] if i < len(node.input_shapes) else ()
        if value is None:
            out.append(None)
        elif isinstance(value, tuple):
            shapes = shape if isinstance(shape, list) else []
            out.append(tuple(
                TensorSpec(tuple(shapes[j]) if j < len(shapes) and isinstance(shapes[j], list) else (v.numel,),
                           v.dtype) for j, v in enumerate(value)))
        else:
            out.append(TensorSpec(tuple(shape) if isinstance(shape, list) else (value.numel,), value.dtype))
    return out


# ---- models --------------------------------------------------------------------------------------

UNARY = frozenset("""gelu relu silu sigmoid tanh exp exp2 expm1 log log2 log10 log1p neg abs sqrt rsqrt
reciprocal sin cos erf erfinv clamp clamp_min clamp_max hardtanh hardswish hardsigmoid leaky_relu elu
mish softplus sign sgn floor ceil round trunc logical_not bitwise_not isnan isinf nan_to_num threshold
square relu6 celu selu silu_ gelu_ relu_ sigmoid_ tanh_ frac""".split())
BINARY = frozenset("""add sub rsub mul div true_divide floor_divide maximum minimum fmax fmin pow fmod
remainder atan2 hypot eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or
bitwise_xor gelu_backward silu_backward threshold_backward sigmoid_backward tanh_backward
masked_fill xlogy copysign""".split())
TERNARY = frozenset("where lerp addcmul addcdiv clamp".split())
COMPARISONS = frozenset("eq ne lt le gt ge logical_and logical_or logical_xor logical_not isnan isinf".split())
GEMMS = frozenset("mm bmm addmm baddbmm linear matmul".split())
LIGER_GLU = {"LigerGELUMulFunction": "liger_geglu", "LigerSiLUMulFunction": "liger_swiglu"}
_FLOAT_RANK = {"c10::Float8_e4m3fn": 0, "c10::Float8_e5m2": 0, "c10::Half": 1, "c10::BFloat16": 1,
               "float": 2, "double": 3}


def model(op_name: str, args: list[Arg]) -> OpTraffic | None:
    """The traffic model of ``op_name`` with ``args``, or None when none applies (unknown)."""
    if op_name in LIGER_GLU:
        return _liger_glu(LIGER_GLU[op_name], args)
    if op_name.startswith("triton_poi_"):
        return _inductor_pointwise(args)
    base = op_name[6:] if op_name.startswith("aten::") else None
    if base is None:
        return None
    try:
        if base in GEMMS:
            return _gemm(base, args)
        if base in ("copy_", "_copy_from"):
            return _copy(args)
        if base in ("clone", "contiguous", "_softmax", "_log_softmax"):
            return _same_shape("softmax" if "softmax" in base else "copy", args)
        if base == "_foreach_copy_":
            return _foreach_copy(args)
        if base in ("fill_", "zero_"):
            return _fill(args)
        if base == "native_layer_norm":
            return _layer_norm(args)
        if base in ("_softmax_backward_data", "_log_softmax_backward_data"):
            return _softmax_backward(args)
        inplace = base.endswith("_") and not base.startswith("_")
        name = base[:-1] if inplace else base
        if name in UNARY or name in BINARY or name in TERNARY:
            return _elementwise(name, args, inplace)
    except (IndexError, ValueError, TypeError):
        return None
    return None


def _tensors(args: list[Arg]) -> list[tuple[int, TensorSpec]]:
    return [(i, a) for i, a in enumerate(args) if isinstance(a, TensorSpec)]


def _arg(args: list[Arg], i: int) -> TensorSpec | None:
    return args[i] if i < len(args) and isinstance(args[i], TensorSpec) else None


def _gemm(kind: str, args: list[Arg]) -> OpTraffic | None:
    if kind in ("addmm", "baddbmm"):
        bias_pos, a_pos, b_pos, out_pos = 0, 1, 2, 5
    elif kind == "linear":
        bias_pos, a_pos, b_pos, out_pos = 2, 0, 1, None
    else:
        bias_pos, a_pos, b_pos, out_pos = None, 0, 1, 2
    a, b = _arg(args, a_pos), _arg(args, b_pos)
    bias = _arg(args, bias_pos) if bias_pos is not None else None
    if a is None or b is None or not a.shape or not b.shape:
        return None
    sb = b.shape
    if kind == "linear":  # weight is [N, K]; the GEMM reads its transpose
        if len(sb) != 2:
            return None
        sb = (sb[1], sb[0])
    sa = a.shape if len(a.shape) > 1 else (1,) + a.shape
    sb = sb if len(sb) > 1 else sb + (1,)
    k, n = sa[-1], sb[-1]
    if sb[-2] != k:
        return None
    if len(sb) == 2:  # leading dims of a fold into M (linear, matmul of [.., K] by [K, N])
        m, batch, out_shape = prod(sa[:-1]), 1, tuple(sa[:-1]) + (n,)
    else:
        batch_shape = _broadcast([tuple(sa[:-2]), tuple(sb[:-2])])
        m, batch = sa[-2], prod(batch_shape) if batch_shape else 1
        out_shape = tuple(batch_shape) + (m, n)
    reads = [Access(a, arg=a_pos), Access(b, arg=b_pos)]
    if bias is not None:
        reads.append(Access(bias, arg=bias_pos))
    out_arg = _arg(args, out_pos) if out_pos is not None else None
    write = (Access(out_arg, arg=out_pos) if out_arg is not None
             else Access(TensorSpec(out_shape, a.dtype), output=0))
    return OpTraffic(kind, tuple(reads), (write,), 2 * batch * m * n * k, a.short_dtype)


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(ndim):
        sizes = {s[len(s) - ndim + axis] for s in shapes if len(s) - ndim + axis >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _promote(tensors: list[TensorSpec]) -> str:
    floats = [t.dtype for t in tensors if t.dtype in _FLOAT_RANK]
    if floats:
        best = max(floats, key=lambda d: _FLOAT_RANK[d])
        ties = {d for d in floats if _FLOAT_RANK[d] == _FLOAT_RANK[best]}
        return "float" if ties == {"c10::Half", "c10::BFloat16"} else best
    return max((t.dtype for t in tensors), key=lambda d: DTYPE_BYTES.get(d, 0))


def _elementwise(name: str, args: list[Arg], inplace: bool) -> OpTraffic | None:
    tensors = _tensors(args)
    if not tensors:
        return None
    specs = [t for _, t in tensors]
    reads = tuple(Access(t, arg=i) for i, t in tensors)
    if inplace:
        pos, first = tensors[0]
        write = Access(first, arg=pos)
        out = first
    else:
        dtype = "bool" if name in COMPARISONS else _promote(specs)
        out = TensorSpec(_broadcast([t.shape for t in specs]), dtype)
        write = Access(out, output=0)
    arity = {1: "unary", 2: "binary"}.get(len(tensors), "ternary")
    return OpTraffic(f"elementwise_{arity}", reads, (write,), out.numel, specs[0].short_dtype)


def _copy(args: list[Arg]) -> OpTraffic | None:
    dst, src = _arg(args, 0), _arg(args, 1)
    if dst is None or src is None:
        return None
    return OpTraffic("copy", (Access(src, arg=1),), (Access(dst, arg=0),), 0, dst.short_dtype)


def _same_shape(kind: str, args: list[Arg]) -> OpTraffic | None:
    x = _arg(args, 0)
    if x is None:
        return None
    flops = x.numel if kind == "softmax" else 0
    return OpTraffic(kind, (Access(x, arg=0),), (Access(x, output=0),), flops, x.short_dtype)


def _foreach_copy(args: list[Arg]) -> OpTraffic | None:
    dst = args[0] if args and isinstance(args[0], tuple) else None
    src = args[1] if len(args) > 1 and isinstance(args[1], tuple) else None
    if not dst or not src or len(dst) != len(src):
        return None
    reads = tuple(Access(t, arg=1, item=j) for j, t in enumerate(src))
    writes = tuple(Access(t, arg=0, item=j) for j, t in enumerate(dst))
    return OpTraffic("foreach_copy", reads, writes, 0, dst[0].short_dtype if dst[0].dtype else None)


def _fill(args: list[Arg]) -> OpTraffic | None:
    x = _arg(args, 0)
    if x is None:
        return None
    return OpTraffic("fill", (), (Access(x, arg=0),), 0, x.short_dtype)


def _layer_norm(args: list[Arg]) -> OpTraffic | None:
    """(input, normalized_shape, weight, bias, eps) → y, mean, rstd (fp32, [..., 1 × k]).

    ``normalized_shape`` is a ScalarList whose values Kineto does not keep; its length is the
    weight's rank, so without a weight the op is left unknown."""
    x, w, b = _arg(args, 0), _arg(args, 2), _arg(args, 3)
    if x is None or w is None or len(w.shape) > len(x.shape):
        return None
    k = len(w.shape)
    stats = TensorSpec(tuple(x.shape[:-k]) + (1,) * k, "float" if x.dtype in _FLOAT_RANK else x.dtype)
    reads = [Access(x, arg=0), Access(w, arg=2)] + ([Access(b, arg=3)] if b is not None else [])
    writes = (Access(x, output=0), Access(stats, output=1), Access(stats, output=2))
    return OpTraffic("layer_norm", tuple(reads), writes, 8 * x.numel, x.short_dtype)


def _softmax_backward(args: list[Arg]) -> OpTraffic | None:
    """(grad_output, output, dim, input_dtype) → grad_input of grad_output's shape."""
    grad, out = _arg(args, 0), _arg(args, 1)
    if grad is None or out is None:
        return None
    return OpTraffic("softmax_backward", (Access(grad, arg=0), Access(out, arg=1)),
                     (Access(grad, output=0),), 3 * grad.numel, grad.short_dtype)


def _liger_glu(kind: str, args: list[Arg]) -> OpTraffic | None:
    a, b = _arg(args, 0), _arg(args, 1)
    if a is None or b is None:
        return None
    return OpTraffic(kind, (Access(a, arg=0), Access(b, arg=1)), (Access(a, output=0),), a.numel,
                     a.short_dtype)


def _inductor_pointwise(args: list[Arg]) -> OpTraffic | None:
    tensors = _tensors(args)
    if not tensors:
        return None
    biggest = max((t for _, t in tensors), key=lambda t: t.numel)
    reads = tuple(Access(t, arg=i) for i, t in tensors)
    return OpTraffic("inductor_pointwise", reads, (), biggest.numel, tensors[0][1].short_dtype,
                     inductor_out=True)


def resolve_inductor(traffic: OpTraffic, last_is_live: bool) -> OpTraffic:
    """Fix an Inductor kernel's written argument.

    ``last_is_live``: the last tensor argument holds a value written earlier in the step, so it is an
    input and the kernel writes its first argument in place (``in_out_ptr0``); otherwise the last
    argument is a write-only ``out_ptr``. One tensor argument: in place if live, else write-only.
    """
    if not traffic.inductor_out:
        return traffic
    reads = traffic.reads
    first, last = reads[0], reads[-1]
    if last_is_live:
        write = replace(first, tensor=TensorSpec(
            _largest_shape(reads, first.tensor), first.tensor.dtype))
        return replace(traffic, writes=(write,), inductor_out=False)
    return replace(traffic, reads=reads[:-1], writes=(last,), inductor_out=False)


def _largest_shape(reads: tuple[Access, ...], first: TensorSpec) -> tuple[int, ...]:
    biggest = max((a.tensor for a in reads), key=lambda t: t.numel)
    return first.shape if first.numel == biggest.numel else biggest.shape
