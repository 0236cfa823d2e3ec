"""Decoder for torch.compile / Inductor kernel names: ``triton_<kind>_fused_<op>_<op>..._<index>``.

Contract: :func:`decode_inductor` returns ``kind`` (pointwise, reduction, persistent_reduction, template,
foreach, split_scan, unknown), ``fused_ops`` (list of ATen op names, in name order, possibly empty),
``index`` (int, the kernel's ordinal in its graph) when present, and ``specialization`` when an old
Triton signature suffix (``_0d1d2de``) was stripped.

Op names contain underscores (``_unsafe_view``, ``native_layer_norm``), so the fused part is split with
:data:`ATEN_OPS`, greedily taking the longest vocabulary entry that ends at an underscore boundary;
anything unknown falls back to one underscore-separated token (a leading underscore stays attached:
Inductor writes ``_to_copy`` as ``__to_copy`` after ``fused``).
"""

from __future__ import annotations

import re

KIND_BY_PREFIX = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent_reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split_scan",
    "split": "split_scan",
    "mix": "mixed_order_reduction",
    "ext": "extern",
}

# Multi-token ATen op names as Inductor writes them in kernel names (single-token ops such as `mul` or
# `gelu` need no entry: the fallback splits them correctly). Keep sorted for review.
ATEN_OPS: frozenset[str] = frozenset(
    """
    _adaptive_avg_pool2d _adaptive_avg_pool2d_backward _cdist_forward _embedding_bag _fused_dropout
    _log_softmax _log_softmax_backward_data _native_batch_norm_legit _native_batch_norm_legit_functional
    _native_batch_norm_legit_no_training _scaled_dot_product_cudnn_attention
    _scaled_dot_product_efficient_attention _scaled_dot_product_flash_attention _scaled_mm _softmax
    _softmax_backward_data _to_copy _unsafe_index _unsafe_index_put _unsafe_view _weight_norm_interface
    adaptive_avg_pool2d adaptive_max_pool2d add_ addcdiv addcmul addmm alias_default as_strided
    as_strided_scatter avg_pool2d avg_pool2d_backward baddbmm bernoulli_ bitwise_and bitwise_not bitwise_or
    bitwise_xor clamp_max clamp_min constant_pad_nd convolution_backward copy_ cross_entropy
    diagonal_scatter div_ elu_backward embedding_dense_backward empty_like fill_ full_default full_like
    gelu_backward glu_backward linalg_vector_norm hardsigmoid_backward hardswish_backward hardtanh_backward index_add
    index_copy index_put index_put_ index_reduce index_select leaky_relu leaky_relu_backward lift_fresh_copy
    log_softmax logical_and logical_not logical_or logical_xor masked_fill masked_scatter max_pool2d_with_indices
    max_pool2d_with_indices_backward mse_loss mse_loss_backward mul_ native_batch_norm
    native_batch_norm_backward native_dropout native_dropout_backward native_group_norm
    native_group_norm_backward native_layer_norm native_layer_norm_backward new_empty new_empty_strided
    new_ones new_zeros nll_loss_backward nll_loss_forward nll_loss2d_backward nll_loss2d_forward ones_like
    rand_like randn_like reflection_pad2d repeat_interleave replication_pad2d scalar_tensor
    scaled_dot_product_attention scatter_add scatter_reduce select_backward select_scatter sigmoid_backward
    silu_backward slice_backward slice_scatter smooth_l1_loss softplus_backward split_with_sizes
    squeeze_copy tanh_backward threshold_backward unsqueeze_copy upsample_bicubic2d upsample_bilinear2d
    upsample_nearest2d upsample_nearest2d_backward var_mean view_as_complex view_as_real where_self
    zeros_like
    """.split()
)
_MAX_WORDS = max(op.strip("_").count("_") + 1 for op in ATEN_OPS)

_NAME = re.compile(
    r"^triton_(?:(?P<prefix>[a-z]+)_)?(?P<body>.*?)(?:_(?P<index>\d+))?$"
)
# Triton < 3.0 appended the argument specialisation (`0d1d2de`: divisible-by-16 pointers, `c` constants)
# to kernel names; it says nothing about what was fused.
_SPECIALIZATION = re.compile(r"_[0-9][0-9cde]*[cde]$")


def split_fused_ops(body: str) -> list[str]:
    """``_unsafe_view_gelu_mul`` -> ``["_unsafe_view", "gelu", "mul"]`` (greedy longest vocabulary match).

    A double underscore is ambiguous: ``add__softmax`` is ``add`` + ``_softmax`` but ``copy__div`` is
    ``copy_`` + ``div``. A known leading-underscore op on the right wins; otherwise a known in-place op
    (trailing underscore) on the left; otherwise the underscore stays with the right-hand word.
    """
    ops: list[str] = []
    # A leading underscore in an op shows up as an empty word; glue it onto the next word.
    tokens: list[str] = []
    pending = ""
    for w in body.split("_"):
        if w == "":
            pending += "_"
            continue
        tokens.append(pending + w)
        pending = ""
    if pending and tokens:  # `..._copy_` at the very end: an in-place op
        tokens[-1] += pending
    i = 0
    while i < len(tokens):
        taken = 1
        for n in range(min(_MAX_WORDS, len(tokens) - i), 1, -1):
            if "_".join(tokens[i : i + n]) in ATEN_OPS:
                taken = n
                break
        op = "_".join(tokens[i : i + taken])
        nxt = i + taken
        if nxt < len(tokens) and tokens[nxt].startswith("_") and f"{op}_" in ATEN_OPS:
            if not any(
                "_".join(tokens[nxt : nxt + n]) in ATEN_OPS for n in range(1, min(_MAX_WORDS, len(tokens) - nxt) + 1)
            ):
                op += "_"
                tokens[nxt] = tokens[nxt][1:]
        ops.append(op)
        i = nxt
    return ops


def decode_inductor(name: str) -> dict:
    """Decode an Inductor kernel name into kind, fused_ops and index (see module docstring)."""
    base = re.split(r"[\s(.:]", name, maxsplit=1)[0]
    out: dict[str, object] = {}
    spec = _SPECIALIZATION.search(base)
    if spec and not re.fullmatch(r"_\d+", spec.group(0)):
        out["specialization"] = spec.group(0)[1:]
        base = base[: spec.start()]
    m = _NAME.match(base)
    if m is None:
        return {"kind": "unknown", "fused_ops": [], **out}
    prefix, body, index = m.group("prefix"), m.group("body"), m.group("index")
    if index is None and body.isdigit():  # `triton_poi_0`: nothing fused, just an ordinal
        body, index = "", body
    if prefix not in KIND_BY_PREFIX:
        # `triton__0d1d` or `triton_fused_...`: no kind prefix; the word belongs to the body.
        body = f"{prefix}_{body}" if prefix else body
        prefix = None
    out["kind"] = KIND_BY_PREFIX.get(prefix, "unknown") if prefix else "unknown"
    if index is not None:
        out["index"] = int(index)
    body = body or ""
    if body.startswith("fused_"):
        body = body[len("fused_") :]
    elif body == "fused":
        body = ""
    out["fused_ops"] = split_fused_ops(body) if body else []
    return out
