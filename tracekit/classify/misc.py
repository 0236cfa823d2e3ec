"""Small decoders: memcpy/memset activities, NCCL kernels, attention kernels, hand-written Triton.

Contract: each ``decode_*(name) -> dict`` returns only fields read from the name.

- memcpy: ``direction`` (HtoD, DtoH, DtoD, HtoH, PtoP), ``src`` and ``dst`` memory kinds
  (``Memcpy HtoD (Pageable -> Device)`` -> HtoD, Pageable, Device);
- memset: ``dst`` (``Memset (Device)`` -> Device);
- nccl: ``collective`` (AllReduce, AllGather, ReduceScatter, SendRecv, Broadcast, Generic ...),
  ``reduce_op`` (Sum...), ``dtype``, ``algorithm`` (RING, TREE, NVLS ...), ``protocol`` (LL, LL128, SIMPLE);
- attention: ``direction`` (fwd/bwd), ``impl``, and ``arch``/``dtype``/``tile`` where written
  (cuDNN's ``f16`` is ``precision: 16bit``, since bf16 runs use the same kernels); XQA's ``kernel_mha``:
  impl ``xqa``, direction fwd (decode);
- triton_custom: ``function`` (the Python function name), ``direction`` when it says forward/backward;
- collective (non-NCCL): ``collective`` and ``algorithm`` (see :func:`decode_collective`);
- TensorRT Myelin (``__myl_AddCastMulMeanAddSqrtDiv…``): ``fused_ops``, the op words in order; and
  :func:`myelin_class`, the class those words spell (see its docstring).
"""

from __future__ import annotations

import re
from functools import lru_cache

_DIRECTIONS = {
    "HostToDevice": "HtoD",
    "DeviceToHost": "DtoH",
    "DeviceToDevice": "DtoD",
    "HostToHost": "HtoH",
}


def decode_memcpy(name: str) -> dict:
    """``Memcpy HtoD (Pageable -> Device)`` / ROCm ``CopyHostToDevice`` -> direction, src, dst."""
    out: dict[str, object] = {}
    m = re.search(r"Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?", name, re.IGNORECASE)
    if m:
        out["direction"] = m.group(1)
        if m.group(2):
            out["src"], out["dst"] = m.group(2), m.group(3)
        return out
    m = re.search(r"Copy(Host|Device)To(Host|Device)", name)
    if m:
        out["direction"] = _DIRECTIONS[f"{m.group(1)}To{m.group(2)}"]
    return out


def decode_memset(name: str) -> dict:
    """``Memset (Device)`` -> dst Device; ROCm ``FillBuffer`` -> {}."""
    m = re.search(r"Memset\s*\((\w+)\)", name, re.IGNORECASE)
    return {"dst": m.group(1)} if m else {}


_NCCL_OPS = {"Sum", "Prod", "Max", "Min", "PreMulSum", "SumPostDiv", "Avg"}
_NCCL_ALGOS = {"RING", "TREE", "NVLS", "NVLSTREE", "COLLNET", "COLLNET_DIRECT", "COLLNET_CHAIN", "PAT"}
_NCCL_PROTOS = {"LL", "LL128", "SIMPLE"}
_NCCL_DTYPES = {
    "f32": "fp32", "float": "fp32", "f16": "fp16", "half": "fp16", "bf16": "bf16", "f64": "fp64",
    "double": "fp64", "i8": "int8", "int8_t": "int8", "u8": "uint8", "uint8_t": "uint8", "i32": "int32",
    "int32_t": "int32", "u32": "uint32", "uint32_t": "uint32", "i64": "int64", "int64_t": "int64",
    "u64": "uint64", "uint64_t": "uint64", "f8e4m3": "fp8", "f8e5m2": "fp8", "__nv_bfloat16": "bf16",
}


def decode_nccl(name: str) -> dict:
    """``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` / ``ncclKernel_AllReduce_RING_LL_Sum_float(...)``."""
    base = name.split("(")[0].strip()
    if base.startswith("void "):
        base = base[5:]
    m = re.search(r"(?:nccl|rccl)\w*?Kernel_(\w+)", base, re.IGNORECASE)
    if not m:
        return {}
    tokens = m.group(1).split("_")
    out: dict[str, object] = {"collective": tokens[0]}
    for t in tokens[1:]:
        if t in _NCCL_OPS:
            out["reduce_op"] = t
        elif t in _NCCL_ALGOS:
            out["algorithm"] = t
        elif t in _NCCL_PROTOS:
            out["protocol"] = t
        elif t in _NCCL_DTYPES:
            out["dtype"] = _NCCL_DTYPES[t]
    return out


def decode_attention(name: str) -> dict:
    """Attention kernels: direction, implementation, and arch/dtype/tile where the name spells them."""
    out: dict[str, object] = {}
    low = name.lower()
    if re.search(r"bwd|backward|bprop|cutlassb|dq_dk_dv|dkdv|_dq_|dot_do_o", low):
        out["direction"] = "bwd"
    elif re.search(r"fwd|forward|fprop|cutlassf|prefill|decode|combine", low):
        out["direction"] = "fwd"
    if "cudnn" in low:
        out["impl"] = "cudnn_sdpa"
    elif "fmha_cutlass" in low or "attentionkernel" in low or "efficient_attention" in low:
        out["impl"] = "mem_efficient"
    elif "flash" in low and "flashinfer" not in low and "batchprefill" not in low and "batchdecode" not in low:
        out["impl"] = "flash"
    elif "flashinfer" in low or "batchprefill" in low or "batchdecode" in low:
        out["impl"] = "flashinfer"
    elif re.fullmatch(r"[A-Za-z_]\w*", name):
        out["impl"] = "triton"
    sm = re.search(r"sm(\d{2,3})", low)
    if sm:
        out["arch"] = f"sm{sm.group(1)}"
    for tok, dt in (("bf16", "bf16"), ("bfloat16", "bf16"), ("f16", "fp16"), ("half", "fp16"),
                    ("fp8", "fp8"), ("e4m3", "fp8"), ("f32", "fp32")):
        if re.search(rf"(?<![a-z0-9]){tok}(?![0-9])", low):
            if tok == "f16" and out.get("impl") == "cudnn_sdpa":
                # cuDNN's `wgmma_f16` names a 16-bit kernel family: our H200 bf16-autocast capture
                # runs `..._flash_fprop_wgmma_f16_...`, so it does not mean fp16.
                out["precision"] = "16bit"
            else:
                out["dtype"] = dt
            break
    tile = re.search(r"_(\d+)x(\d+)(?:x(\d+))?_", name)
    if tile and "cutlass" in low:
        out["tile"] = f"{tile.group(1)}x{tile.group(2)}"
    return out


def decode_xqa(name: str) -> dict:
    """TensorRT-LLM's XQA decode attention (``kernel_mha``): impl xqa, direction fwd."""
    return {**decode_attention(name), "impl": "xqa", "direction": "fwd"}


def decode_triton_custom(name: str) -> dict:
    """Hand-written Triton: the Python function name, with a forward/backward hint if it has one."""
    base = re.sub(r"_[0-9][0-9cde]*[cde]$", "", name.strip())
    out: dict[str, object] = {"function": base}
    low = base.lower()
    if re.search(r"backward|bwd", low):
        out["direction"] = "bwd"
    elif re.search(r"forward|fwd", low):
        out["direction"] = "fwd"
    return out


def decode_collective(name: str) -> dict:
    """Collectives outside NCCL: ``collective`` (all_reduce, all_gather, reduce_scatter, all_to_all) and
    ``algorithm`` (multimem, one_shot, two_shot, two_stage) where the name says it."""
    low = name.lower()
    out: dict[str, object] = {}
    for words, collective in ((("all_reduce", "allreduce", "cross_device_reduce"), "all_reduce"),
                              (("all_gather", "allgather"), "all_gather"),
                              (("reduce_scatter", "reducescatter"), "reduce_scatter"),
                              (("alltoall", "all_to_all", "intranode", "internode"), "all_to_all")):
        if any(w in low for w in words):
            out["collective"] = collective
            break
    for word, algorithm in (("multimem", "multimem"), ("one_shot", "one_shot"), ("oneshot", "one_shot"),
                            ("two_shot", "two_shot"), ("twoshot", "two_shot"), ("1stage", "one_stage"),
                            ("2stage", "two_stage"), ("lamport", "lamport")):
        if word in low:
            out["algorithm"] = algorithm
            break
    return out


# TensorRT's Myelin compiler names each generated kernel `__myl_` + the ops it fused, each an abbreviated
# CamelCase word (`__myl_AddCastMulMeanAddSqrtDivMulCastMulCast_myl0_3`, `__myl_TranReshMove_0x4d2a…`,
# `__myl_Fc_myl2_5`, `__myl_MaxrSubExpSumDivMul`): Fc = fully connected, Maxr = max-reduce, Resh/Tran/Slic/
# Conc/Repl/Move = reshape/transpose/slice/concat/replicate/move, Gath = gather, Sigm = sigmoid.
_MYELIN_PREFIX = "__myl_"
_MYELIN_WORD = re.compile(r"[A-Z][a-z0-9]*")
_MYELIN_GEMM = frozenset({"Fc", "Gemm", "Matmul", "Bmm", "Conv"})
_MYELIN_REDUCE = frozenset({"Mean", "Sum", "Maxr", "Minr", "Redu", "Reduce", "Topk", "Argmax", "Argmin", "Softmax"})
_MYELIN_MOVE = frozenset({"Resh", "Tran", "Slic", "Conc", "Repl", "Move", "Cast", "Copy", "Pad", "Split"})


@lru_cache(maxsize=4096)
def myelin_ops(name: str) -> tuple[str, ...]:
    """The op words of a Myelin kernel name (``__myl_SiluMulMulCast_myl0_1`` -> Silu, Mul, Mul, Cast); ``()``
    for any other name. ``MatMul`` reads as one word."""
    if not name.startswith(_MYELIN_PREFIX):
        return ()
    head = name[len(_MYELIN_PREFIX):].split("_", 1)[0][:4096]
    return tuple(_MYELIN_WORD.findall(head.replace("MatMul", "Matmul")))


def myelin_class(name: str) -> str | None:
    """The class a Myelin kernel's op words spell, first match wins: ``gemm`` (Fc, Gemm, MatMul, Bmm, Conv);
    ``normalization`` (Sqrt/Rsqrt with Mean or Div: RMSNorm's Mean-Add-Sqrt-Div, LayerNorm's Sqrt-Div tail, or
    a Norm word); ``reduction`` (Mean, Sum, Maxr, Topk, ...: softmax's Maxr-Sub-Exp-Sum-Div included);
    ``copy`` (only data movement: Resh, Tran, Slic, Conc, Repl, Move, Cast); else ``elementwise``.
    ``None`` for a name that is not Myelin's or has no op words."""
    ops = myelin_ops(name)
    if not ops:
        return None
    words = set(ops)
    if words & _MYELIN_GEMM:
        return "gemm"
    if "Norm" in words or (words & {"Sqrt", "Rsqrt"} and words & {"Mean", "Div", "Recip"}):
        return "normalization"
    if words & _MYELIN_REDUCE:
        return "reduction"
    if words <= _MYELIN_MOVE:
        return "copy"
    return "elementwise"


def decode_myelin(name: str) -> dict:
    """``__myl_SiluMulMulCast`` -> fused_ops [Silu, Mul, Mul, Cast]."""
    ops = myelin_ops(name)
    return {"fused_ops": list(ops)} if ops else {}
