"""Decoder for ATen's templated CUDA kernel names as CUPTI demangles them.

Contract: :func:`decode_aten` returns whichever of these it can read, never guessing:

- ``template``: the kernel template (``vectorized_elementwise_kernel``, ``reduce_kernel``,
  ``multi_tensor_apply_kernel``, ``CatArrayBatchedCopy`` ...);
- ``functor``: the operation inside — the innermost meaningful name, skipping wrappers such as
  ``BinaryFunctor``/``AUnaryFunctor``/``ReduceOp``/``TensorListMetadata``: ``GeluCUDAKernelImpl``,
  ``MulFunctor``, ``FusedAdamMathFunctor``, ``MeanOps``, ``direct_copy_kernel_cuda``;
- ``vector_width`` (int): the first template argument of ``vectorized_elementwise_kernel<8, ...>``;
- ``dtype``: the first scalar type in the template arguments (``c10::BFloat16`` -> ``bf16``) — the type
  the functor computes on; for casts that is the source type, and ``to_dtype`` names the target.
"""

from __future__ import annotations

import re

# Names that wrap the interesting functor rather than being it.
_WRAPPERS = frozenset(
    {
        "BinaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "ReduceOp", "TensorListMetadata",
        "TensorListScalarListMetadata", "FusedOptimizerTensorListMetadata", "gpu_kernel_impl",
        "gpu_kernel_impl_nocast", "gpu_kernel", "gpu_kernel_with_scalars", "opmath_gpu_kernel_with_scalars",
        "opmath_symmetric_gpu_kernel_with_scalars", "launch_vectorized_kernel", "launch_legacy_kernel",
        "launch_unrolled_kernel", "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
        "elementwise_kernel", "elementwise_kernel_helper", "multi_tensor_apply_kernel", "reduce_kernel",
        "index_elementwise_kernel", "binary_internal", "memory", "detail", "LoadWithCast", "StoreWithCast",
        "LoadWithoutCast", "StoreWithoutCast", "OffsetCalculator", "TrivialOffsetCalculator", "func_wrapper_t",
        "Array", "array", "OpaqueType", "CatArrInputTensorMetadata", "TensorSizeStride", "AccumulateType",
        "GenericPackedTensorAccessor", "PackedTensorAccessor", "TensorInfo", "CUDAFunctorOnSelf_add", "CUDAFunctorOnOther_add", "operator",
        "compute_dtype", "type", "policies", "unroll", "vectorized", "thread_work_size", "cuda",
    }
)

_SCALARS = (
    ("c10::BFloat16", "bf16"),
    ("__nv_bfloat16", "bf16"),
    ("c10::Half", "fp16"),
    ("__half", "fp16"),
    ("c10::Float8_e4m3fn", "fp8"),
    ("c10::Float8_e5m2", "fp8"),
    ("c10::complex<float>", "complex64"),
    ("double", "fp64"),
    ("float", "fp32"),
    ("long", "int64"),
    ("bool", "bool"),
    ("unsigned char", "uint8"),
    ("signed char", "int8"),
    # `int` / `unsigned int` are left out on purpose: in ATen templates they are index types and
    # nsys-style `(int)4` literals, almost never the element type.
)

def _declared(name: str) -> str:
    """The qualified name a kernel is declared as, before its template or parameter list:
    ``void at::native::(anonymous namespace)::reduce_kernel<...>(...)`` -> ``at::native::reduce_kernel``
    (anonymous namespaces dropped). String operations, linear in the name."""
    body = (name[5:] if name.startswith("void ") else name).lstrip()
    body = body.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    end = len(body)
    for stop in ("<", "(", " "):
        pos = body.find(stop)
        if pos >= 0:
            end = min(end, pos)
    return body[:end]


def template_name(name: str) -> str | None:
    """The kernel's own identifier: ``void at::native::(anonymous namespace)::reduce_kernel<...>(...)`` ->
    ``reduce_kernel``, the last qualified segment before the template or parameter list (a bare name is its
    own identifier). String operations, linear in the name; ``None`` when it does not start with one."""
    segment = _declared(name).rsplit("::", 1)[-1]
    m = _IDENT.match(segment)
    return m.group(0) if m else None


_IDENT = re.compile(r"\w+")


def template_scope(name: str) -> str:
    """The namespaces (and enclosing classes) that qualify the kernel's own identifier, joined by ``::``:
    ``void dpsk::ep::internode::dispatch<false, 4>(...)`` -> ``dpsk::ep::internode``; ``""`` for a bare or
    unqualified name. Anonymous namespaces are dropped, as :func:`template_name` drops them. Linear."""
    head = _declared(name)
    cut = head.rfind("::")
    return head[:cut] if cut > 0 else ""


def _functor(name: str, template: str | None) -> str | None:
    # Candidates are qualified names inside at::native (possibly in an anonymous namespace), in order
    # of appearance; a lambda's enclosing function (`GeluCUDAKernelImpl(...)::{lambda...}`) counts.
    start = name.find("<")
    if start < 0:
        return None
    args = name[start:]
    # Look inside the *template arguments*: a parameter list repeats the same names.
    for m in re.finditer(r"(?:at::native::|\(anonymous namespace\)::|<unnamed>::|binary_internal::|at::)(\w+)", args):
        ident = m.group(1)
        if ident in _WRAPPERS or ident == template or ident == "native":
            continue
        return ident
    # Functors outside at::native (`CUDAFunctor_add` is at::native too; `__nv_*` are not interesting).
    for m in re.finditer(r"\b([A-Z]\w*(?:Functor|Ops|Op|Impl)\w*)\b", args):
        if m.group(1) not in _WRAPPERS:
            return m.group(1)
    return None


_NSYS_LITERAL = re.compile(r"\((?:unsigned )?(?:int|long|bool|char)\)")
_UNSIGNED = re.compile(r"unsigned (?:long|char)")


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _first_standalone(text: str, needle: str) -> int:
    """Index of the first ``needle`` in ``text`` not glued to a word or a ``::`` qualifier, else -1."""
    pos = text.find(needle)
    while pos >= 0:
        before = text[pos - 1] if pos else " "
        after = text[pos + len(needle)] if pos + len(needle) < len(text) else " "
        if not (_is_word_char(before) or before == ":") and not _is_word_char(after):
            return pos
        pos = text.find(needle, pos + 1)
    return -1


def _dtype(name: str) -> str | None:
    start = name.find("<")
    if start < 0:
        return None
    args = _NSYS_LITERAL.sub("", name[start:])  # nsys `(int)4` literals
    args = _UNSIGNED.sub("", args)
    best: tuple[int, str] | None = None
    for needle, dt in _SCALARS:
        pos = _first_standalone(args, needle)
        if pos >= 0 and (best is None or pos < best[0]):
            best = (pos, dt)
    return best[1] if best else None


def decode_aten(name: str) -> dict:
    """Decode a demangled ATen kernel name (see module docstring); bare names give ``template`` only."""
    out: dict[str, object] = {}
    template = template_name(name)
    if template:
        out["template"] = template
    vec = re.search(r"vectorized_elementwise_kernel<(\d+),", name)
    if vec:
        out["vector_width"] = int(vec.group(1))
    functor = _functor(name, template)
    if functor:
        out["functor"] = functor
    dt = _dtype(name)
    if dt:
        out["dtype"] = dt
    # A cast's lambda takes the *source* type; the target is in the functor's name.
    cast = re.match(r"(bfloat16|float16|float8\w*?|half)_copy_kernel", str(functor or ""))
    if cast:
        out["to_dtype"] = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(cast.group(1), "fp8")
    return out


def decode_jiterator(name: str) -> dict:
    """``gcd_vectorized4_kernel`` -> functor gcd, vector_width 4 (``_unrolled_kernel`` -> no width)."""
    m = re.match(r"(\w+?)_(?:vectorized(\d+)|unrolled)_kernel$", name)
    if not m:
        return {}
    out: dict[str, object] = {"template": "jiterator", "functor": m.group(1)}
    if m.group(2):
        out["vector_width"] = int(m.group(2))
    return out
