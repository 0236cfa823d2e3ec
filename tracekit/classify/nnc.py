"""TorchScript's NNC (TensorExpr) fusion groups: ``fused_<op>_<op>…[_<hash>][_<n>]``, compiled by NVRTC at run time.

Contract: :func:`nnc_fused_ops` returns the ATen ops a kernel name lists when the name has the shape NNC gives
its CUDA kernels, else ``None``; :func:`decode_nnc` returns ``{"fuser": "nnc", "fused_ops": [...]}`` (plus
``hash`` when NNC shortened the name). Pure string work, linear in the name.

How NNC names a kernel (torch/csrc/jit/passes/utils/subgraph_utils.cpp ``generateNameForGraph``, prefix
``fused``, at most 40 characters by default): ``fused`` then ``_<op>`` for every ATen node of the fusion group, written
unqualified (``aten::_to_copy`` -> ``__to_copy``); a longer name is cut and ``_<decimal hash>`` appended; the
CUDA code generator adds ``_<n>`` when a name is already taken in the process. The names carry no ``kernel``
word and only ATen op names — which is what tells them from hand-written Triton that chose a ``fused_`` name
(``fused_recurrent_gated_delta_rule_fwd_kernel``): every op word must be in :data:`NNC_OPS`, the ops NNC's fuser
accepts on the GPU (torch/csrc/jit/passes/tensorexpr_fuser.cpp) plus the view and cast ops that join them.
"""

from __future__ import annotations

import re

from tracekit.classify.inductor import ATEN_OPS, split_fused_ops

#: ATen ops NNC fuses on the GPU (element-wise, casts, views, `cat`), as NNC writes them in kernel names.
NNC_OPS: frozenset[str] = frozenset(
    """
    __and__ __lshift__ __or__ __rshift__ __xor__ _autocast_to_reduced_precision _autocast_to_full_precision
    _to_copy abs acos add addcmul asin atan atan2 cat ceil clamp clamp_max clamp_min clone contiguous cos cosh
    detach div elu eq erf erfc exp expand expand_as expm1 flatten floor fmod frac ge gelu gt hardsigmoid hardswish
    hardtanh isnan le leaky_relu lerp lgamma log log10 log1p log2 log_sigmoid lt masked_fill max maximum min minimum
    mish mul ne neg permute pow reciprocal relu relu6 remainder reshape round rsqrt sigmoid sign silu sin sinh slice
    softplus sqrt square squeeze sub t tan tanh threshold to transpose trunc type_as unsqueeze view where
    """.split()
) | ATEN_OPS

_SHAPE = re.compile(r"^fused_[a-z0-9_]+$")


def nnc_fused_ops(name: str) -> tuple[list[str], str | None] | None:
    """``(ops, hash)`` for an NNC kernel name, ``None`` for any other name (see the module docstring)."""
    if _SHAPE.match(name) is None:
        return None
    words = name[len("fused_"):].split("_")
    numbers: list[str] = []
    while words and words[-1].isdigit() and len(numbers) < 2:  # the hash and the counter, at the end
        numbers.insert(0, words.pop())
    # A hash is a long decimal (std::hash of the full name); a short number is the code generator's counter.
    digest = next((n for n in numbers if len(n) >= 6), None)
    body = "_".join(words)
    if digest is not None:
        # The name was cut at NNC's length limit before the hash, possibly right after an underscore
        # (`fused_tanh_mul_div__<hash>`) or inside the last op's name (`…_tan_<hash>`).
        body = body.rstrip("_")
    if not body or body[-1] == "_" or not body.lstrip("_")[:1].isalpha():
        return None
    ops = split_fused_ops(body)
    if not ops or any(op not in NNC_OPS for op in ops[:-1]):
        return None
    last = ops[-1]
    if last not in NNC_OPS and not (digest is not None and any(op.startswith(last) for op in NNC_OPS)):
        return None
    return ops, digest


def decode_nnc(name: str) -> dict:
    """``fuser`` = ``nnc``, ``fused_ops`` (ATen ops, in name order; a last op cut by NNC's length limit stays cut)
    and ``hash`` when NNC shortened the name."""
    found = nnc_fused_ops(name)
    if found is None:
        return {"fuser": "nnc", "fused_ops": []}
    ops, digest = found
    out: dict[str, object] = {"fuser": "nnc", "fused_ops": ops}
    if digest is not None:
        out["hash"] = digest
    return out
