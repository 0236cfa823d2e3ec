"""The taxonomy as data: an ordered table of :class:`Rule` records, first match wins.

Contract: :func:`classify_kernel` walks :data:`RULES` top to bottom and returns the first rule whose
``kinds`` contains the activity kind, whose ``pattern`` matches (``re.search``) the name, and whose
optional ``when`` predicate accepts the launch context. The last rule matches everything, so every
name gets a class in :data:`CLASSES`. A decoder that trips over odd text never propagates: the
result then carries ``{"decode_error": "<ExceptionType>"}`` so the failure is visible, not fatal.

Order matters and encodes three facts:

1. Library prefixes first (NCCL, attention libraries, cuBLAS/cuBLASLt/CUTLASS/Tensile GEMMs, Inductor).
   On Hopper, cuBLASLt's ``nvjet_*`` GEMMs are launched with ``cuLaunchKernelEx`` — the same driver call
   Triton uses — so the launch API alone cannot mean "Triton" until the library rules have had their say.
2. Then hand-written Triton identified by *evidence* (launch API, launching CPU op), before the
   name-based semantic rules, so that ``_rms_norm_forward_kernel`` launched by ``cuLaunchKernel`` is
   ``triton_custom`` rather than ``normalization``.
3. Then a name-shape guess for Triton without launch evidence (leading-underscore Python names), ATen's
   semantic families (normalization, reduction, copy, elementwise), a looser name-shape guess, ``other``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from tracekit.classify import aten, gemm, inductor, misc

CLASSES: tuple[str, ...] = (
    "gemm",
    "triton_fused",
    "triton_custom",
    "elementwise",
    "reduction",
    "copy",
    "memcpy",
    "memset",
    "attention",
    "normalization",
    "communication",
    "other",
)


@dataclass(frozen=True)
class KernelInfo:
    """What one GPU activity is: ``kernel_class`` (in :data:`CLASSES`), ``library``, ``decoded`` name
    fields (JSON-serialisable), and the ``rule`` that decided it."""

    kernel_class: str
    library: str
    decoded: Mapping[str, object]
    rule: str


class Context(NamedTuple):
    """The launch context a ``when`` predicate may inspect."""

    name: str
    kind: str
    launch_api: str | None
    cpu_op: str | None


Decoder = Callable[[str], dict]
Library = str | Callable[[str], str]


@dataclass(frozen=True)
class Rule:
    """One row of the taxonomy.

    ``pattern`` is searched (not anchored unless it says so) in the name; ``library`` is a fixed string
    or a function of the name; ``decoder`` turns the name into fields; ``why`` is the documentation a
    user sees when asking why a kernel landed where it did.
    """

    name: str
    pattern: re.Pattern[str]
    kernel_class: str
    library: Library
    decoder: Decoder | None
    why: str
    kinds: frozenset[str] = field(default=frozenset({"kernel"}))
    when: Callable[[Context], bool] | None = None


def _r(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# Triton's generated launcher calls the driver API directly (cuLaunchKernel, or cuLaunchKernelEx when
# it needs launch attributes such as clusters / PDL); on ROCm it is hipModuleLaunchKernel.
# hipExtModuleLaunchKernel is deliberately absent: hipBLASLt/Tensile launch with it, Triton does not.
TRITON_LAUNCH_APIS = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "hipModuleLaunchKernel"})

# A Triton kernel's profiler name is its Python function name: a bare identifier. CUPTI's demangled
# C++ names carry `void `, `::`, templates or parameter lists, so this shape separates the two worlds.
_BARE_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _launched_by_triton(ctx: Context) -> bool:
    return ctx.launch_api in TRITON_LAUNCH_APIS and bool(_BARE_IDENTIFIER.match(ctx.name))


def _launched_by_python_op(ctx: Context) -> bool:
    # An autograd.Function or custom op (e.g. `LigerGELUMulFunction`) launching a bare-named kernel:
    # ATen ops never launch bare-named kernels, and CUDA-graph replays have no cpu_op at all.
    op = ctx.cpu_op
    return (
        bool(op)
        and not op.startswith("aten::")
        and not op.startswith("cuda")  # a runtime call mistakenly passed as the op
        and bool(_BARE_IDENTIFIER.match(ctx.name))
    )


# The kernel's own leading namespace is the best evidence; template arguments mention other libraries
# (`vllm::rms_norm_kernel<c10::BFloat16>` is vLLM's, not ATen's).
_LEADING_NAMESPACE = {
    "at": "aten",
    "at_cuda_detail": "cub",  # ATen's vendored CUB
    "c10": "aten",
    "vllm": "vllm",
    "flashinfer": "flashinfer",
    "transformer_engine": "transformer_engine",
    "apex": "apex",
    "cutlass": "cutlass",
    "cudnn": "cudnn",
    "cub": "cub",
    "thrust": "thrust",
    "aiter": "aiter",
    "ck_tile": "composable_kernel",
    "ck": "composable_kernel",
    "pytorch_flash": "flash_attn",
    "flash": "flash_attn",
    "cublasLt": "cublasLt",
    "internal": "cublas",
}


def _library_from_namespace(name: str) -> str:
    """The library a demangled C++ kernel name comes from, by namespace; ``unknown`` if none."""
    lead = re.match(r"(?:void\s+)?([A-Za-z_]\w*)::", name)
    if lead and lead.group(1) in _LEADING_NAMESPACE:
        return _LEADING_NAMESPACE[lead.group(1)]
    for needle, lib in (
        ("at::native", "aten"),
        # ATen kernels declared outside at:: (PersistentSoftmax.cuh, the THCUNN-era `cunn_*`).
        ("::softmax_warp_", "aten"),
        ("cunn_", "aten"),
        ("at::cuda", "aten"),
        ("c10::", "aten"),
        ("transformer_engine", "transformer_engine"),
        ("apex", "apex"),
        ("flashinfer", "flashinfer"),
        ("aiter", "aiter"),
        ("ck_tile", "composable_kernel"),
        ("vllm::", "vllm"),
        ("cudnn", "cudnn"),
        ("cub::", "cub"),
        ("thrust::", "thrust"),
    ):
        if needle in name:
            return lib
    return "unknown"


def _gemm_library(name: str) -> str:
    if "cublasLt" in name:
        return "cublasLt"
    return "cublas"


RULES: tuple[Rule, ...] = (
    # ---- activity kinds that are not kernels -----------------------------------------------------
    Rule("memcpy", _r(""), "memcpy", "cuda_runtime", misc.decode_memcpy,
         "GPU activity of category gpu_memcpy: a copy engine transfer (direction decoded from the name).",
         kinds=frozenset({"memcpy"})),
    Rule("memset", _r(""), "memset", "cuda_runtime", misc.decode_memset,
         "GPU activity of category gpu_memset.", kinds=frozenset({"memset"})),
    Rule("not_a_kernel", _r(""), "other", "unknown", None,
         "A GPU-timeline activity that is not work (gpu_user_annotation spans, cuda_sync waits): its name is "
         "a user label, so it is never matched against kernel rules (`nccl:all_reduce` is not NCCL's kernel).",
         kinds=frozenset({"activity"})),
    Rule("memcpy.by_name", _r(r"^(Memcpy |Copy(Host|Device)To(Host|Device)|\[CUDA memcpy)"), "memcpy",
         "cuda_runtime", misc.decode_memcpy,
         "A memcpy recorded as a kernel-like event (old traces, ROCm `CopyHostToDevice`)."),
    Rule("memset.by_name", _r(r"^(Memset |FillBuffer|\[CUDA memset)"), "memset", "cuda_runtime",
         misc.decode_memset, "A memset recorded as a kernel-like event (old traces, ROCm `FillBuffer`)."),
    # ---- communication ---------------------------------------------------------------------------
    Rule("nccl", _r(r"nccl|rccl", re.IGNORECASE), "communication",
         lambda n: "rccl" if "rccl" in n.lower() else "nccl", misc.decode_nccl,
         "NCCL/RCCL device kernels (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, old `ncclKernel_...`)."),
    # ---- attention (before GEMM: FlashAttention names contain `gemm`-like CUTLASS fragments) --------
    Rule("attention.cudnn_sdpa", _r(r"cudnn_generated_fort_native_sdpa|cudnn.*(sdpa|flash_fprop|flash_bprop|fmha)|"
                                    r"cudnn::fusion::(compute_dot_do_o|convert_dq|convert_dk|convert_dv)"),
         "attention", "cudnn", misc.decode_attention,
         "cuDNN's fused SDPA (graph API) kernels, e.g. `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_*`, and "
         "the helpers its backward launches (`cudnn::fusion::compute_dot_do_o_specialized`, `convert_dq_to_16bits`; "
         "seen under aten::_cudnn_attention_backward on our H200)."),
    Rule("attention.mem_efficient", _r(r"fmha_cutlass[FB]|AttentionKernel|attention_kernel_backward|efficient_attention"),
         "attention", "cutlass", misc.decode_attention,
         "PyTorch's memory-efficient SDPA (xformers-derived CUTLASS `fmha_cutlassF_*` / `fmha_cutlassB_*`)."),
    Rule("attention.flash", _r(r"flash_fwd|flash_bwd|flash::|pytorch_flash|FlashAttn|flash_attn|FlashAttention"),
         "attention", "flash_attn", misc.decode_attention,
         "FlashAttention 2/3/4 kernels (PyTorch's vendored `pytorch_flash::` included)."),
    Rule("attention.flashinfer", _r(r"BatchPrefillWith|BatchDecodeWith|SinglePrefillWith|SingleDecodeWith|flashinfer.*(Prefill|Decode|MLA)"),
         "attention", "flashinfer", misc.decode_attention, "FlashInfer prefill/decode attention kernels."),
    Rule("attention.other", _r(r"fmha|paged_attention|mha_(fwd|bwd)|\b_?attn_(fwd|bwd)|_attention_(fwd|bwd|forward|backward)|(^|_)attn_fwd",
                               re.IGNORECASE),
         "attention", lambda n: "triton" if _BARE_IDENTIFIER.match(n) else _library_from_namespace(n),
         misc.decode_attention,
         "Other attention kernels. Judgement call: an attention-named *Triton* kernel (`_attn_fwd`, the "
         "Triton tutorial / AMD's `attn_fwd`) is class `attention`, library `triton` — the class says what "
         "the time buys (attention FLOPs, comparable with FlashAttention), the library says who wrote it. "
         "This rule precedes the triton_custom rules on purpose."),
    # ---- GEMM libraries --------------------------------------------------------------------------
    Rule("gemm.nvjet", _r(r"^nvjet_"), "gemm", "cublasLt", gemm.decode_nvjet,
         "cuBLASLt's Hopper/Blackwell JIT-less GEMMs (`nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT`). "
         "Launched with cuLaunchKernelEx, which is why this rule precedes the Triton launch-API rule."),
    Rule("gemm.xmma", _r(r"(^|[^A-Za-z])sm\d+_xmma_(gemm|fprop|dgrad|wgrad)"), "gemm",
         lambda n: "cudnn" if re.search(r"xmma_(fprop|dgrad|wgrad)", n) else "cublas", gemm.decode_xmma,
         "cuBLAS/cuDNN xmma kernels (`sm80_xmma_gemm_*`, `sm90_xmma_gemm_*_cublas`, `sm100_xmma_*`); "
         "`fprop/dgrad/wgrad` are cuDNN implicit-GEMM convolutions, kept in class gemm with op=conv."),
    Rule("gemm.cublas_legacy", _r(r"^(void )?(maxwell|pascal|volta|turing|ampere|hopper|blackwell)_\w*gemm"), "gemm", "cublas",
         gemm.decode_cublas_legacy,
         "cuBLAS's pre-nvjet kernels named by architecture (`ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn`, "
         "`volta_sgemm_128x64_nn`)."),
    Rule("gemm.cutlass", _r(r"cutlass.*([a-z0-9]gemm|Gemm|_gemm)|cutlass3x_"), "gemm", "cutlass", gemm.decode_cutlass,
         "CUTLASS GEMMs, as instantiated by cuBLAS (`cutlass_80_tensorop_*`) or templated (`cutlass::Kernel2<...>`, "
         "`cutlass::device_kernel<...GemmUniversal...>`)."),
    Rule("gemm.tensile", _r(r"(^|_)Cijk_A[a-z]{3}_B[a-z]{3}"), "gemm",
         lambda n: "hipblaslt" if re.search(r"UserArgs|_SAV|_Bias|Custom_", n) else "rocblas", gemm.decode_tensile,
         "AMD Tensile GEMMs (`Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_...`). hipBLASLt and rocBLAS both "
         "ship Tensile kernels; `UserArgs`/`SAV`/`Bias` only occur in hipBLASLt's, so those are called hipblaslt."),
    Rule("gemm.cublas_aux", _r(r"gemv2[NT]_kernel|gemvNSP|gemv_kernel|gemmSN_[NT]{2}_kernel|gemmk1_kernel|gemmSN_kernel|"
                               r"gemvx::kernel|dot_kernel<|splitKreduce_kernel|cublasLt::|cublas::|scal_kernel|axpy_kernel"), "gemm",
         _gemm_library, gemm.decode_cublas_aux,
         "cuBLAS helper kernels: GEMV (`gemv2T_kernel_val`), small-N GEMM (`gemmSN_TN_kernel`) and the split-K "
         "reduction `cublasLt::splitKreduce_kernel`. Judgement call: split-K's reduction is class gemm "
         "(decoded op=split_k_reduce) — it is the tail of one GEMM call, and a GEMM-time total that left it "
         "out would flatter split-K algorithms."),
    Rule("gemm.conv", _r(r"implicit_convolve|convolve_[a-z]*gemm|winograd|conv2d_|cudnn::\S*(convolve|convolution|conv[23]d|"
                         r"conv_)|explicit_convolve|fft2d_|fft_(r2c|c2r)"),
         "gemm", "cudnn", gemm.decode_conv,
         "cuDNN convolution kernels; convolutions are (implicit) GEMMs on tensor cores, so class gemm, op=conv."),
    # ---- other bare-named kernels launched through module/driver APIs --------------------------------
    # These share Triton's launch path (cuLaunchKernel / hipModuleLaunchKernel) and bare names, so they
    # must be claimed before the triton_custom evidence rules.
    Rule("miopen.norm", _r(r"^MIOpen\w*(BatchNorm|LayerNorm|GroupNorm)"), "normalization", "miopen", None,
         "MIOpen normalization kernels (`MIOpenBatchNormFwdTrainSpatial`), launched via hipModuleLaunchKernel."),
    Rule("miopen.conv", _r(r"^(naive_conv_|igemm_(fwd|bwd|wrw)|gridwise_convolution|MIOpenConv|MIOpenCvD|"
                           r"miopenSp3As|SubSample|Im2Col|Col2Im)"), "gemm", "miopen", gemm.decode_conv,
         "MIOpen convolution kernels (class gemm, op=conv, as for cuDNN)."),
    Rule("jiterator", _r(r"^[a-z][a-z0-9_]*_(vectorized\d+|unrolled)_kernel$"), "elementwise", "aten", aten.decode_jiterator,
         "ATen jiterator kernels (`gcd_vectorized4_kernel`): NVRTC-compiled at run time and launched with "
         "cuLaunchKernel like Triton, but ATen elementwise ops."),
    # ---- Inductor-generated Triton ----------------------------------------------------------------
    Rule("inductor", _r(r"^triton_(poi|red|per|tem|for|mix|spl|split|ext|unk)?_|^triton_$|^triton__"), "triton_fused", "inductor",
         inductor.decode_inductor,
         "torch.compile/Inductor kernels: `triton_{poi,red,per,tem}_fused_<ops>_<n>`; the ops are split "
         "with a vocabulary of ATen op names (greedy longest match)."),
    # ---- hand-written Triton, with evidence ---------------------------------------------------------
    Rule("triton_custom.launch_api", _r(""), "triton_custom", "triton", misc.decode_triton_custom,
         "Hand-written Triton (e.g. Liger's `_geglu_tanh_forward_kernel`): a bare identifier (no `void `, no `::`, "
         "no template or parameter list) that matched no library or Inductor rule above, launched through "
         "Triton's launcher API (cuLaunchKernel / cuLaunchKernelEx / hipModuleLaunchKernel). Library rules come "
         "first because cuBLASLt's nvjet GEMMs also use cuLaunchKernelEx.",
         when=_launched_by_triton),
    Rule("triton_custom.cpu_op", _r(""), "triton_custom", "triton", misc.decode_triton_custom,
         "Hand-written Triton identified by its launcher: a bare-identifier kernel whose launching CPU op is not "
         "an `aten::` op (an autograd.Function such as `LigerGELUMulFunction`, or a custom op).",
         when=_launched_by_python_op),
    # ---- hand-written Triton, without evidence: Python-private names -----------------------------
    Rule("triton_custom.name_shape", _r(r"^_[a-z][a-z0-9]*(_[a-z0-9]+)*(_\d+d[\dcde]*)?$"), "triton_custom",
         "triton", misc.decode_triton_custom,
         "LOWER CONFIDENCE (no launch API or CPU-op evidence). A bare snake_case identifier with a leading "
         "underscore (`_geglu_tanh_forward_kernel`, `_rms_norm_forward_kernel`) is a Python-private function "
         "name, the Triton convention; CUPTI names C++ kernels with `void `, namespaces and templates. It "
         "precedes the ATen family rules so `_rms_norm_forward_kernel` is not mistaken for ATen's norm."),
    # ---- ATen and friends by semantic family ----------------------------------------------------------
    Rule("normalization", _r(r"layer_?norm|batch_?norm|rms_?norm|group_?norm|instance_?norm|RowwiseMoments|"
                             r"GammaBetaBackward|ComputeInternalGradients|ComputeFusedParams|ComputeGradInput|"
                             r"cuApplyLayerNorm|cuApplyRMSNorm|cuComputePartGradGammaBeta|cuComputeGradGammaBeta|"
                             r"cudnn::bn_|bn_fw_|bn_bw_|welford", re.IGNORECASE),
         "normalization", _library_from_namespace, aten.decode_aten,
         "Layer/RMS/batch/group norm kernels (ATen `vectorized_layer_norm_kernel`, `RowwiseMomentsCUDAKernel`, "
         "apex/TE `cuApplyLayerNorm`, cuDNN `bn_fw_*`)."),
    Rule("reduction", _r(r"reduce_kernel|softmax_warp_|SoftMax|softmax|cunn_ClassNLL|nll_loss|DeviceReduce|"
                         r"DeviceSegmentedReduce|DeviceScan|scan_kernel|tensor_kernel_scan|embedding_backward|"
                         r"compute_grad_weight|sum_and_scatter|krn_partial|partial_segments|renorm_kernel|_norm_kernel|"
                         r"cross_entropy|reduce_1Block|kernelReduce|aminmax|topk|argmax|argmin|cumsum|logsumexp",
                         re.IGNORECASE),
         "reduction", _library_from_namespace, aten.decode_aten,
         "Reductions: ATen `reduce_kernel<...ReduceOp<...>>`, softmax (`softmax_warp_forward`, "
         "`cunn_SoftMaxForward`), losses, scans. Judgement call: embedding *backward* (`embedding_backward_*`, "
         "`compute_grad_weight`) is a reduction — it sums gradient rows per index."),
    Rule("copy", _r(r"copy_kernel|_copy_|CatArrayBatchedCopy|copy_device_to_device|batched_copy|"
                    r"direct_copy|transpose_kernel|permute_kernel|contiguous_kernel|nchwToNhwc|nhwcToNchw"),
         "copy", _library_from_namespace, aten.decode_aten,
         "Copies and dtype casts done by kernels (`direct_copy_kernel_cuda`, `bfloat16_copy_kernel_cuda`, "
         "`CatArrayBatchedCopy`) — memory-bound data movement, distinct from copy-engine memcpy."),
    Rule("elementwise", _r(r"elementwise_kernel|multi_tensor_apply|FillFunctor|index_elementwise|indexSelect|"
                           r"index_select|embedding_(fwd|forward)|indexFuncLargeIndex|indexFuncSmallIndex|"
                           r"distribution_elementwise|fused_dropout|dropout|where_kernel|launch_clamp|"
                           r"masked_fill|scatter_gather|_scatter_|index_put|indexing_backward|"
                           r"vectorized_|unrolled_|gpu_kernel|Functor", re.IGNORECASE),
         "elementwise", _library_from_namespace, aten.decode_aten,
         "ATen TensorIterator kernels (`vectorized_elementwise_kernel<8, ...GeluCUDAKernelImpl...>`), foreach/"
         "fused optimizers (`multi_tensor_apply_kernel<...FusedAdamMathFunctor...>`) and gathers/scatters. "
         "Judgement call: embedding *forward* (`indexSelectLargeIndex`) is elementwise — a gather, one read "
         "and one write per element, nothing accumulated."),
    Rule("gemm.generic", _r(r"gemm|gemv|Gemm|GEMM|matmul|_mm_|bmm"), "gemm", _library_from_namespace, gemm.decode_generic,
         "Anything else that says it multiplies matrices (custom CUDA, DeepGEMM, unknown vendors)."),
    # ---- hand-written Triton, without evidence ----------------------------------------------------
    Rule("triton_custom.name_shape_loose", _r(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*_kernel(_\d+d[\dcde]*)?$"),
         "triton_custom", "triton", misc.decode_triton_custom,
         "LOWEST CONFIDENCE. A bare snake_case identifier ending in `_kernel` (`fused_moe_kernel`) that no "
         "family rule claimed is guessed to be hand-written Triton; extern \"C\" CUDA kernels rarely look so."),
    # ---- everything else ------------------------------------------------------------------------
    Rule("other.aten", _r(r"at::|c10::"), "other", _library_from_namespace, aten.decode_aten,
         "Other kernels ATen launches (CUB radix sort / unique inside embedding backward, RNG set-up, ...): "
         "named in ATen's world but in no family above."),
    Rule("other", _r(""), "other", _library_from_namespace, None,
         "No rule matched: a vendor or custom kernel this table does not know yet."),
)

_MEMCPY_KINDS = {"memcpy", "gpu_memcpy", "Memcpy"}
_MEMSET_KINDS = {"memset", "gpu_memset", "Memset"}


_KERNEL_KINDS = {"kernel", "Kernel", "", None}


def _normal_kind(kind: str | None) -> str:
    # Three kinds are work; everything else the gpu frame carries (annotation, sync, ...) is "activity".
    if kind in _KERNEL_KINDS:
        return "kernel"
    if kind in _MEMCPY_KINDS:
        return "memcpy"
    if kind in _MEMSET_KINDS:
        return "memset"
    return "activity"


def classify_kernel(
    name: str, *, kind: str = "kernel", launch_api: str | None = None, cpu_op: str | None = None
) -> KernelInfo:
    """Classify one GPU activity. Total and pure: never raises; result class is in :data:`CLASSES`.

    ``kind`` is the activity category ("kernel", "memcpy", "memset"; Kineto's ``gpu_memcpy`` /
    ``gpu_memset`` spellings are accepted too; any other kind, such as the gpu frame's ``annotation`` and
    ``sync``, is class ``other`` by rule ``not_a_kernel``, whatever its name). ``launch_api`` is the runtime/driver call that launched
    it (``cuLaunchKernelEx``...), ``cpu_op`` the innermost CPU op around that call; both are optional
    evidence used only to tell hand-written Triton apart.
    """
    return _classify(
        name if isinstance(name, str) else str(name),
        _normal_kind(kind),
        launch_api if isinstance(launch_api, str) and launch_api else None,
        cpu_op if isinstance(cpu_op, str) and cpu_op else None,
    )


@lru_cache(maxsize=65536)
def _classify(name: str, kind: str, launch_api: str | None, cpu_op: str | None) -> KernelInfo:
    # Kineto sometimes pads names; classification must not depend on that.
    stripped = name.strip()
    ctx = Context(stripped, kind, launch_api, cpu_op)
    for rule in RULES:
        if kind not in rule.kinds:
            continue
        if not rule.pattern.search(stripped):
            continue
        if rule.when is not None and not rule.when(ctx):
            continue
        try:
            library = rule.library if isinstance(rule.library, str) else rule.library(stripped)
            decoded = rule.decoder(stripped) if rule.decoder is not None else {}
        except Exception as exc:  # noqa: BLE001 - totality is the contract; make the failure visible
            library = rule.library if isinstance(rule.library, str) else "unknown"
            decoded = {"decode_error": type(exc).__name__}
        return KernelInfo(rule.kernel_class, library, _freeze(decoded), rule.name)
    raise AssertionError("the last rule matches everything")  # pragma: no cover


class _FrozenDict(dict):
    """A read-only dict: KernelInfo values are cached and shared, so no caller may mutate them.

    Lists inside (``fused_ops``) stay lists so that JSON encoders and equality with plain lists behave
    as a reader expects; they are not to be mutated either.
    """

    def _readonly(self, *args: object, **kwargs: object) -> None:
        raise TypeError("KernelInfo.decoded is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, repr(v)) for k, v in self.items())))


def _freeze(decoded: dict) -> Mapping[str, object]:
    return _FrozenDict(decoded)
