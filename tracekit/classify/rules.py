"""The taxonomy as data: an ordered table of :class:`Rule` records, first match wins.

Contract: :func:`classify_kernel` reads the name through :func:`tracekit.classify.names.rule_text`
(padding and rocprof's ``.kd`` suffix removed, ``_Z…`` symbols demangled), then walks :data:`RULES`
top to bottom and returns the first rule whose ``kinds`` contains the activity kind, whose matcher
accepts the text, and whose optional ``when`` predicate accepts the launch context. The last rule
matches everything, so every name gets a class in :data:`CLASSES`. A decoder that trips over odd text
never propagates: the result then carries ``{"decode_error": "<ExceptionType>"}``.

Time is linear in the name, whatever the name: matchers are literal substring tests (``str in str``)
or regular expressions written without nested or unanchored ``.*`` repeats (``tests/test_classify.py``
checks every pattern of this package structurally), and rules read at most :data:`RULE_WINDOW`
characters, so a 300,000-character name classifies in milliseconds. Case-insensitive tests run on one
lower-cased copy of the name. Callers keep the full name as identity: nothing here is cut for them.

Order matters and encodes four facts:

1. Library and vendor families first (memcpy/memset kernels, NCCL/RCCL and other collectives,
   attention libraries, GEMM libraries and cuDNN/MIOpen convolutions, MIOpen helpers, Inductor).
   On Hopper, cuBLASLt's ``nvjet_*`` GEMMs and TensorRT-LLM's ``bmm_*``/``fmhaSm100f*`` cubins are
   launched with ``cuLaunchKernelEx`` — the driver call Triton uses — so the launch API alone cannot
   mean "Triton" until the library rules have had their say.
2. Then hand-written Triton identified by *evidence* (Triton's launch API or a non-ATen launching
   CPU op, and a bare identifier), before the name-based semantic rules, so that
   ``_rms_norm_forward_kernel`` launched by ``cuLaunchKernel`` is ``triton_custom`` rather than
   ``normalization``. A kernel launched with the CUDA/HIP *runtime* API (``cudaLaunchKernel``) is
   never ``triton_custom``: Triton's launcher does not use it.
3. Then serving-engine custom ops (KV-cache writes, rotary embedding, quantisation), FBGEMM's table-batched
   embeddings, pooling and upsampling, then ATen's semantic families (normalization, reduction, copy,
   elementwise), then anything that says it multiplies matrices.
4. A Python-private name (``_foo_kernel``) without launch evidence is guessed to be Triton (right after
   the evidence rules, as Triton's naming convention); a bare name without the leading underscore and
   without evidence is never guessed to be Triton.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from tracekit.classify import aten, gemm, inductor, misc
from tracekit.classify.names import rule_text

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
    """What a ``when`` predicate or a library function may inspect: ``name`` is the rule text
    (normalised, demangled), ``low`` its lower-cased copy."""

    name: str
    low: str
    kind: str
    launch_api: str | None
    cpu_op: str | None


# ---- matchers: all linear in the name -----------------------------------------------------------


class Matcher:
    """Decides whether a rule's pattern matches; ``describe`` is shown in documentation."""

    def __call__(self, ctx: Context) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return ()


@dataclass(frozen=True)
class Regex(Matcher):
    """``re.search`` on the name (``fold=True``: on the lower-cased name; write the pattern in lower case)."""

    pattern: re.Pattern[str]
    fold: bool = False

    def __call__(self, ctx: Context) -> bool:
        return self.pattern.search(ctx.low if self.fold else ctx.name) is not None

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return (self.pattern,)


@dataclass(frozen=True)
class Words(Matcher):
    """Any of these substrings (``fold=True``: in the lower-cased name; give them in lower case)."""

    words: tuple[str, ...]
    fold: bool = True

    def __call__(self, ctx: Context) -> bool:
        text = ctx.low if self.fold else ctx.name
        for word in self.words:  # a plain loop: ~2x cheaper than any(<generator>) on the hot path
            if word in text:
                return True
        return False


@dataclass(frozen=True)
class All(Matcher):
    parts: tuple[Matcher, ...]

    def __call__(self, ctx: Context) -> bool:
        return all(p(ctx) for p in self.parts)

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(r for p in self.parts for r in p.regexes())


@dataclass(frozen=True)
class Any_(Matcher):
    parts: tuple[Matcher, ...]

    def __call__(self, ctx: Context) -> bool:
        return any(p(ctx) for p in self.parts)

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(r for p in self.parts for r in p.regexes())


@dataclass(frozen=True)
class Always(Matcher):
    def __call__(self, ctx: Context) -> bool:
        return True


def _r(pattern: str) -> Regex:
    return Regex(re.compile(pattern))


def _ri(pattern: str) -> Regex:
    return Regex(re.compile(pattern), fold=True)


def _w(*words: str) -> Words:
    return Words(tuple(w.lower() for w in words))


def _all(*parts: Matcher) -> All:
    return All(parts)


def _any(*parts: Matcher) -> Any_:
    return Any_(parts)


Decoder = Callable[[str], dict]
Library = str | Callable[[Context], str]


@dataclass(frozen=True)
class Rule:
    """One row of the taxonomy.

    ``pattern`` decides on the name; ``library`` is a fixed string or a function of the context;
    ``decoder`` turns the name into fields; ``why`` is the documentation a user sees when asking why a
    kernel landed where it did.
    """

    name: str
    pattern: Matcher
    kernel_class: str
    library: Library
    decoder: Decoder | None
    why: str
    kinds: frozenset[str] = field(default=frozenset({"kernel"}))
    when: Callable[[Context], bool] | None = None


# Triton's generated launcher calls the driver API directly (cuLaunchKernel, or cuLaunchKernelEx when
# it needs launch attributes such as clusters / PDL); on ROCm it is hipModuleLaunchKernel.
# hipExtModuleLaunchKernel is deliberately absent: hipBLASLt/Tensile launch with it, Triton does not.
TRITON_LAUNCH_APIS = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "hipModuleLaunchKernel"})
# The runtime APIs: what ATen, cuDNN, NCCL and every `<<<>>>` launch use. Triton never does.
RUNTIME_LAUNCH_APIS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipLaunchCooperativeKernel", "hipExtModuleLaunchKernel",
})
_HIP_PREFIX = "hip"

# A Triton kernel's profiler name is its Python function name: a bare identifier. CUPTI's demangled
# C++ names carry `void `, `::`, templates or parameter lists, so this shape separates the two worlds.
_BARE_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _bare(ctx: Context) -> bool:
    return _BARE_IDENTIFIER.match(ctx.name) is not None


def _launched_by_triton(ctx: Context) -> bool:
    return ctx.launch_api in TRITON_LAUNCH_APIS and _bare(ctx)


def _launched_by_runtime(ctx: Context) -> bool:
    return ctx.launch_api in RUNTIME_LAUNCH_APIS


def _launched_by_python_op(ctx: Context) -> bool:
    # An autograd.Function or custom op (e.g. `LigerGELUMulFunction`) launching a bare-named kernel:
    # ATen ops never launch bare-named kernels, and CUDA-graph replays have no cpu_op at all.
    op = ctx.cpu_op
    return (
        bool(op)
        and not op.startswith("aten::")
        and not op.startswith("cuda")  # a runtime call mistakenly passed as the op
        and not _launched_by_runtime(ctx)
        and _bare(ctx)
    )


def _maybe_triton(ctx: Context) -> bool:
    """A Python-private bare name with no evidence against Triton (no runtime-API launch)."""
    return not _launched_by_runtime(ctx)


# The kernel's own leading namespace is the best evidence; template arguments mention other libraries
# (`vllm::rms_norm_kernel<c10::BFloat16>` is vLLM's, not ATen's).
_LEADING_NAMESPACE = {
    "at": "aten",
    "at_cuda_detail": "cub",  # ATen's vendored CUB
    "c10": "aten",
    "vllm": "vllm",
    "sglang": "sglang",
    "flashinfer": "flashinfer",
    "transformer_engine": "transformer_engine",
    "apex": "apex",
    "cutlass": "cutlass",
    "cudnn": "cudnn",
    "cask_cudnn": "cudnn",
    "xmma_cudnn": "cudnn",
    "cub": "cub",
    "thrust": "thrust",
    "aiter": "aiter",
    "ck_tile": "composable_kernel",
    "ck": "composable_kernel",
    "pytorch_flash": "flash_attn",
    "flash": "flash_attn",
    "cublasLt": "cublasLt",
    "internal": "cublas",
    "fbgemm_gpu": "fbgemm",
    "deep_gemm": "deep_gemm",
    "deep_ep": "deep_ep",
    "marlin": "marlin",
    "marlin_moe_wna16": "marlin",
    "tensorrt_llm": "trtllm",
    "dlslime": "dlslime",
    "c10d": "pytorch_distributed",
    "torchvision": "torchvision",
    "xformers": "xformers",
    "megablocks": "megablocks",
}

# ATen kernels declared outside at:: (PersistentSoftmax.cuh, the THCUNN-era `cunn_*`, Indexing.cu's
# anonymous-namespace kernels) and other libraries recognised by a word anywhere in the name. Checked
# only when the leading namespace says nothing. `c10::` and `at::cuda` are deliberately absent: other
# libraries' kernels take `c10::BFloat16` template arguments and `at::` tensor accessors.
_LIBRARY_NEEDLES: tuple[tuple[str, str], ...] = (
    ("at::native", "aten"),
    ("::softmax_warp_", "aten"),
    ("cunn_", "aten"),
    ("indexing_backward_kernel", "aten"),
    ("elementwise_kernel_with_index", "aten"),
    ("transformer_engine", "transformer_engine"),
    ("apex", "apex"),
    ("flashinfer", "flashinfer"),
    ("aiter", "aiter"),
    ("ck_tile", "composable_kernel"),
    ("vllm::", "vllm"),
    ("fbgemm", "fbgemm"),
    ("cudnn", "cudnn"),
    ("bn_fw_", "cudnn"),
    ("bn_bw_", "cudnn"),
    ("nchwToNhwc", "cudnn"),
    ("nhwcToNchw", "cudnn"),
    ("cub::", "cub"),
    ("thrust::", "thrust"),
    ("magma", "magma"),
    ("cublas", "cublas"),
)


@lru_cache(maxsize=65536)
def library_from_namespace(name: str) -> str:
    """The library a demangled C++ kernel name comes from, by namespace; ``unknown`` if none."""
    head = name[5:] if name.startswith("void ") else name
    cut = head.find("::")
    if 0 < cut <= 64:
        lead = head[:cut].strip()
        if lead.isidentifier() and lead in _LEADING_NAMESPACE:
            return _LEADING_NAMESPACE[lead]
    for needle, lib in _LIBRARY_NEEDLES:
        if needle in name:
            return lib
    return "unknown"


def _ns(ctx: Context) -> str:
    return library_from_namespace(ctx.name)


def _ns_or(default: str) -> Callable[[Context], str]:
    def pick(ctx: Context) -> str:
        lib = library_from_namespace(ctx.name)
        return default if lib == "unknown" else lib

    return pick


def _triton_or_ns(ctx: Context) -> str:
    """``triton`` only with Triton evidence: a bare identifier launched by Triton's launcher API, or a
    Python-private bare name (``_attn_fwd``) not launched by the runtime API. C++ names by namespace."""
    if _bare(ctx):
        if ctx.launch_api in TRITON_LAUNCH_APIS:
            return "triton"
        if ctx.name.startswith("_") and not _launched_by_runtime(ctx):
            return "triton"
        return "unknown"
    return library_from_namespace(ctx.name)


def _gemm_library(ctx: Context) -> str:
    # By the kernel's own namespace: cuBLAS kernels take `cublasLtEpilogue_t` arguments too.
    return "cublasLt" if ctx.name.startswith(("void cublasLt::", "cublasLt::")) else "cublas"


def _comm_library(ctx: Context) -> str:
    if "rccl" in ctx.low or (ctx.launch_api or "").startswith(_HIP_PREFIX):
        return "rccl"
    return "nccl"


def _collective_library(ctx: Context) -> str:
    lib = library_from_namespace(ctx.name)
    if lib != "unknown":
        return lib
    if "multimem" in ctx.low or "shot_all_reduce" in ctx.low:
        return "symm_mem"  # PyTorch SymmetricMemory's kernels live in an anonymous namespace
    return "unknown"


def _rocclr(ctx: Context) -> str:
    return "hip_runtime" if ctx.name.startswith("__amd_rocclr") else "cuda_runtime"


RULES: tuple[Rule, ...] = (
    # ---- activity kinds that are not kernels -----------------------------------------------------
    Rule("memcpy", Always(), "memcpy", "cuda_runtime", misc.decode_memcpy,
         "GPU activity of category gpu_memcpy: a copy engine transfer (direction decoded from the name).",
         kinds=frozenset({"memcpy"})),
    Rule("memset", Always(), "memset", "cuda_runtime", misc.decode_memset,
         "GPU activity of category gpu_memset.", kinds=frozenset({"memset"})),
    Rule("not_a_kernel", Always(), "other", "unknown", None,
         "A GPU-timeline activity that is not work (gpu_user_annotation spans, cuda_sync waits): its name is "
         "a user label, so it is never matched against kernel rules (`nccl:all_reduce` is not NCCL's kernel).",
         kinds=frozenset({"activity"})),
    Rule("memcpy.by_name", _r(r"^(?:Memcpy |Copy(?:Host|Device)To(?:Host|Device)|\[CUDA memcpy|__amd_rocclr_copyBuffer)"),
         "memcpy", _rocclr, misc.decode_memcpy,
         "A memcpy recorded as a kernel-like event (old traces, ROCm `CopyHostToDevice`), or HIP's blit kernel "
         "`__amd_rocclr_copyBuffer*` that carries out hipMemcpy: the time buys a copy the user asked for."),
    Rule("memset.by_name", _r(r"^(?:Memset |FillBuffer|\[CUDA memset|__amd_rocclr_fillBuffer)"), "memset", _rocclr,
         misc.decode_memset, "A memset recorded as a kernel-like event (old traces, ROCm `FillBuffer`), or HIP's "
         "blit kernel `__amd_rocclr_fillBuffer*` that carries out hipMemset."),
    # ---- communication ---------------------------------------------------------------------------
    Rule("nccl", _w("nccl", "rccl"), "communication", _comm_library, misc.decode_nccl,
         "NCCL/RCCL device kernels (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, old `ncclKernel_...`, RCCL's "
         "`rcclGenericKernel` / `rccl_main_kernel`). Library `rccl` when the name says so or a HIP API launched "
         "it (RCCL keeps NCCL's kernel names on ROCm)."),
    Rule("collective.custom", _w("multimem_all_reduce", "multimem_all_gather", "multimem_reduce_scatter",
                                 "multimem_one_shot", "one_shot_all_reduce", "two_shot_all_reduce",
                                 "oneshot_all_reduce", "twoshot_all_reduce", "oneshotallreduce", "twoshotallreduce",
                                 "cross_device_reduce", "allreduce_fusion_kernel", "custom_all_reduce",
                                 "intranode_alltoall", "internode_alltoall", "all_to_all_kernel",
                                 "deep_ep::intranode::", "deep_ep::internode::", "lamport"),
         "communication", _collective_library, misc.decode_collective,
         "Collectives outside NCCL: PyTorch SymmetricMemory's `multimem_all_reduce_kernel` (NVLS multicast) and "
         "one-/two-shot all-reduce, vLLM/aiter custom all-reduce (`cross_device_reduce_1stage`), TensorRT-LLM's "
         "Lamport all-reduce fusion, DeepEP/dlslime all-to-all. Their time is communication, whoever wrote them."),
    # ---- attention (before GEMM: FlashAttention names contain `gemm`-like CUTLASS fragments) --------
    Rule("attention.cudnn_sdpa", _any(_w("cudnn_generated_fort_native_sdpa", "cudnn::fusion::compute_dot_do_o",
                                         "cudnn::fusion::convert_dq", "cudnn::fusion::convert_dk",
                                         "cudnn::fusion::convert_dv"),
                                      _all(_w("cudnn"), _w("sdpa", "flash_fprop", "flash_bprop", "fmha"))),
         "attention", "cudnn", misc.decode_attention,
         "cuDNN's fused SDPA (graph API) kernels, e.g. `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_*`, and "
         "the helpers its backward launches (`cudnn::fusion::compute_dot_do_o_specialized`, `convert_dq_to_16bits`; "
         "seen under aten::_cudnn_attention_backward on our H200)."),
    Rule("attention.mem_efficient", Words(("fmha_cutlassF", "fmha_cutlassB", "AttentionKernel", "attention_kernel_backward",
                                           "efficient_attention"), fold=False),
         "attention", "cutlass", misc.decode_attention,
         "PyTorch's memory-efficient SDPA (xformers-derived CUTLASS `fmha_cutlassF_*` / `fmha_cutlassB_*`)."),
    Rule("attention.flash_mla", _w("flash_mla", "splitkv_mla", "sparse_attn_fwd", "sparse_attn_bwd"),
         "attention", "flash_mla", misc.decode_attention,
         "FlashMLA (DeepSeek) decode and sparse attention (`flash_fwd_splitkv_mla_kernel`, "
         "`sm90::fwd::sparse_attn_fwd_kernel`); before the FlashAttention rule, whose words its names share."),
    Rule("attention.flash", _w("flash_fwd", "flash_bwd", "flash::", "pytorch_flash", "flashattn", "flash_attn",
                               "flashattention"),
         "attention", "flash_attn", misc.decode_attention,
         "FlashAttention 2/3/4 kernels (PyTorch's vendored `pytorch_flash::` included, and FA4's CuTe-DSL "
         "`kernel_cutlass_kernel_…flash_attn…FlashAttentionForwardSm100…`)."),
    Rule("attention.flashinfer", _any(Words(("BatchPrefillWith", "BatchDecodeWith", "SinglePrefillWith",
                                             "SingleDecodeWith"), fold=False),
                                      _all(_w("flashinfer"), _w("prefill", "decode", "mla", "attention"))),
         "attention", "flashinfer", misc.decode_attention, "FlashInfer prefill/decode attention kernels."),
    Rule("attention.trtllm", _any(_w("fmha_v2_", "fmhasm", "xqa_kernel", "masked_multihead_attention", "mmha_"),
                                  _all(_w("tensorrt_llm"), _w("attention", "fmha"))),
         "attention", "trtllm", misc.decode_attention,
         "TensorRT-LLM attention cubins: context FMHA `fmha_v2_flash_attention_*`, trtllm-gen "
         "`fmhaSm100fKernel_*` (also shipped through FlashInfer), XQA and masked multi-head decode attention."),
    Rule("attention.sage", _w("qk_int8_sv_f8", "qk_int_sv_f8", "qk_int8_sv_f16", "qk_int_sv_f16", "sageattn",
                              "sage_attn", "sageattention"),
         "attention", "sageattention", misc.decode_attention,
         "SageAttention's quantised attention kernels (`qk_int8_sv_f8_attn_kernel`, Triton `sageattn` variants)."),
    Rule("attention.other", _any(_w("fmha", "paged_attention", "unified_attention", "merge_attn_states",
                                    "mergestates", "merge_states",
                                    "mha_fwd", "mha_bwd", "attn_fwd", "attn_bwd", "flash_decoding",
                                    "decode_attention", "prefill_attention", "context_attention",
                                    "attention_fwd", "attention_bwd", "attention_forward", "attention_backward"),
                                 _all(_w("attn_", "attention_"),
                                      _ri(r"(?:attn|attention)_(?:[a-z0-9]{1,16}_){0,3}(?:fwd|bwd|forward|backward)"))),
         "attention", _triton_or_ns, misc.decode_attention,
         "Other attention kernels: vLLM paged / unified (Triton `kernel_unified_attention_2d`) attention and "
         "`merge_attn_states` (the combine step of split-KV attention), Triton `_attn_fwd` (tutorial) / AMD "
         "`attn_fwd`, CK-tile FMHA, custom `*_attention_*_fwd_kernel`s. Judgement call: an attention-named "
         "*Triton* kernel is class `attention`, library `triton` — the class says what the time buys "
         "(attention FLOPs, comparable with FlashAttention), the library says who wrote it. This rule precedes "
         "the triton_custom rules on purpose."),
    # ---- GEMM libraries --------------------------------------------------------------------------
    Rule("gemm.nvjet", _r(r"^nvjet_"), "gemm", "cublasLt", gemm.decode_nvjet,
         "cuBLASLt's Hopper/Blackwell JIT-less GEMMs (`nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT`). "
         "Launched with cuLaunchKernelEx, which is why this rule precedes the Triton launch-API rule."),
    Rule("gemm.trtllm_gen", _r(r"^(?:bmm|gemm)_(?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32|Int8|Int4|MxInt4)"), "gemm", "trtllm",
         gemm.decode_trtllm_gen,
         "TensorRT-LLM's generated (trtllm-gen) batched GEMM cubins, e.g. MoE expert GEMMs "
         "`bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s8_…_sm100f` (also shipped through FlashInfer). Bare names launched "
         "with cuLaunchKernelEx, so this rule precedes the Triton rules."),
    Rule("gemm.xmma", _all(Words(("_xmma_",), fold=False), _r(r"sm\d+_xmma_(?:gemm|fprop|dgrad|wgrad|sparse_gemm)")),
         "gemm", lambda ctx: "cudnn" if re.search(r"xmma_(?:fprop|dgrad|wgrad)", ctx.name) or ctx.name.endswith("cudnn")
         else "cusparselt" if "xmma_sparse_gemm" in ctx.name else "cublas", gemm.decode_xmma,
         "cuBLAS/cuDNN xmma kernels (`sm80_xmma_gemm_*`, `sm90_xmma_gemm_*_cublas`, `sm100_xmma_*`); "
         "`fprop/dgrad/wgrad` are cuDNN implicit-GEMM convolutions, kept in class gemm with op=conv; "
         "`xmma_sparse_gemm` (2:4 structured sparsity) is cuSPARSELt's."),
    Rule("gemm.miopen_conv", _r(r"^(?:naive_conv_|igemm_(?:fwd|bwd|wrw)|gridwise_convolution|MIOpenConv|MIOpenCvD|"
                                r"miopenSp3As|SubSample|Im2Col|Im2d2Col|Im3d2Col|Col2Im|MIOpenGroupConv|"
                                r"gcnAsmConv|conv1x1[uv]|conv3x3|sp3AsmConv|MIOpenWinograd|MIOpenIm2d2Col|"
                                r"MIOpenIm3d2Col|MIOpenCol2Im)"), "gemm", "miopen", gemm.decode_conv,
         "MIOpen convolution kernels (`igemm_fwd_gtcx3_nhwc_*`, `naive_conv_*`, assembly Winograd) and its "
         "`Im2d2Col`/`Col2Im` helpers: class gemm, op=conv, as for cuDNN."),
    Rule("gemm.cudnn_conv", _any(_w("scudnn", "hcudnn", "884cudnn", "1688cudnn", "16816cudnn", "cudnn_infer",
                                    "cudnn_train", "cutlass_cudnn", "_5x_cudnn", "cask_cudnn", "xmma_cudnn",
                                    "implicit_convolve", "explicit_convolve", "precomputed_convolve",
                                    "convolve_common_engine", "convolvend_", "dgrad_engine", "wgrad_alg",
                                    "dgrad2d_", "wgrad2d_", "dgrad_1x1", "winograd", "fft2d_", "fft_r2c", "fft_c2r",
                                    "fermipluscgemm", "pointwise_mult_and_sum_complex", "scalepackedtensor",
                                    "scaletensor_kernel", "2d_grouped_direct_kernel", "conv2d_grouped_direct",
                                    "im2col4d", "gcgemm"),
                                 _all(_w("cudnn"), _w("conv", "gemm", "splitk"))),
         "gemm", _ns_or("cudnn"), gemm.decode_conv,
         "cuDNN convolutions in every spelling: `*_scudnn_*` (also `cudnn_infer_`/`_5x_cudnn_` prefixed), "
         "`cutlass_cudnn{,_infer,_train}::Kernel<…{fprop,dgrad,wgrad}…>`, `implicit_convolve_sgemm`, "
         "`{dgrad,wgrad_alg0,wgrad_alg1}_engine`, Winograd/FFT kernels — and the helpers one convolution call "
         "launches (`cask_cudnn::computeOffsetsKernel`, `computeWgradSplitKOffsetsKernel`, "
         "`cudnn::ops::scalePackedTensor_kernel`, split-K reduces). Convolutions are (implicit) GEMMs, so class "
         "gemm, op=conv; judgement call: the helpers are class gemm too, as the tail of cuBLAS split-K is — a "
         "convolution total that left them out would flatter the algorithms that need them. Layout transposes "
         "(`nchwToNhwcKernel`) are copies (rule copy) and batch norms are normalization."),
    Rule("gemm.ck", _all(_r(r"^(?:void\s+)?ck(?:_tile)?::"), _w("gemm", "conv", "xdl", "wmma")),
         "gemm", "composable_kernel", gemm.decode_ck,
         "Composable Kernel GEMMs and convolutions (`ck::kernel_gemm_xdl_cshuffle_v3<…>`, "
         "`ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_xdl_cshuffle_v3<…>`); CK "
         "names often arrive mangled (`_ZN2ck…`) and are demangled before any rule reads them."),
    Rule("gemm.cublas_legacy", _r(r"^(?:void )?(?:maxwell|pascal|volta|turing|ampere|hopper|blackwell)_[a-z0-9_]*gemm"),
         "gemm", "cublas", gemm.decode_cublas_legacy,
         "cuBLAS's pre-nvjet kernels named by architecture (`ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn`, "
         "`volta_sgemm_128x64_nn`)."),
    Rule("gemm.cutlass", _any(_all(_w("cutlass"), _w("gemm", "fprop", "dgrad", "wgrad")), _w("cutlass3x_")),
         "gemm", "cutlass",
         gemm.decode_cutlass,
         "CUTLASS GEMMs, as instantiated by cuBLAS (`cutlass_80_tensorop_*`) or templated (`cutlass::Kernel2<...>`, "
         "`cutlass::device_kernel<...GemmUniversal...>`) and CUTLASS implicit-GEMM convolutions "
         "(`cutlass_tensorop_*fprop*`, `ImplicitGemmConvolution`)."),
    Rule("gemm.tensile", _r(r"Cijk_A[a-z]{3}_B[a-z]{3}"), "gemm",
         lambda ctx: "hipblaslt" if re.search(r"UserArgs|_SAV|_Bias|Custom_", ctx.name) else "rocblas",
         gemm.decode_tensile,
         "AMD Tensile GEMMs (`Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_...`). hipBLASLt and rocBLAS both "
         "ship Tensile kernels; `UserArgs`/`SAV`/`Bias` only occur in hipBLASLt's, so those are called hipblaslt."),
    Rule("gemm.cublas_aux", _any(Words(("gemv2N_kernel", "gemv2T_kernel", "gemvNSP", "gemv_kernel", "gemmSN_NN_kernel",
                                        "gemmSN_TN_kernel", "gemmSN_NT_kernel", "gemmSN_TT_kernel", "gemmk1_kernel",
                                        "gemmSN_kernel", "gemvx::kernel", "dot_kernel<", "splitKreduce_kernel",
                                        "cublasLt::", "cublas::", "scal_kernel", "axpy_kernel"), fold=False),
                                 _all(_w("reduce_1block_kernel", "asum_kernel", "nrm2_kernel"), _w("cublas"))),
         "gemm", _gemm_library, gemm.decode_cublas_aux,
         "cuBLAS helper kernels: GEMV (`gemv2T_kernel_val`), small-N GEMM (`gemmSN_TN_kernel`), dot and its "
         "second-stage `reduce_1Block_kernel`, the split-K reduction `cublasLt::splitKreduce_kernel` and cuBLASLt's "
         "stand-alone epilogue `cublasLt::epilogue::impl::globalKernel`. Judgement call: split-K's reduction and the "
         "epilogue are class gemm (decoded op=split_k_reduce / epilogue) — they are the tail of one GEMM call, and "
         "a GEMM-time total that left them out would flatter the algorithms that need them."),
    Rule("gemm.magma", _all(_w("magma"), _w("gemm", "gemv")), "gemm", "magma", gemm.decode_generic,
         "MAGMA's GEMMs (`magma_sgemmEx_kernel`, `magmablas_*gemm*`), which torch.linalg and some fp32 paths launch."),
    # ---- Inductor-generated Triton ----------------------------------------------------------------
    Rule("inductor", _r(r"^triton_(?:poi|red|per|tem|for|mix|spl|split|ext|unk)?_|^triton_$|^triton__"),
         "triton_fused", "inductor", inductor.decode_inductor,
         "torch.compile/Inductor kernels: `triton_{poi,red,per,tem}_fused_<ops>_<n>`; the ops are split "
         "with a vocabulary of ATen op names (greedy longest match)."),
    Rule("gemm.triton", _all(_w("gemm", "matmul", "bmm", "mm_"), _r(r"^[A-Za-z_][A-Za-z0-9_]*$"),
                              _ri(r"gemm|matmul|(?<![a-z])bmm|(?<![a-z0-9])mm_")),
         "gemm", _triton_or_ns, gemm.decode_generic,
         "GEMMs written in Triton or as bare-named cubins (`_gemm_a8w8_blockscale_kernel_…`, `matmul_kernel`): "
         "class gemm, library triton unless a runtime API launched them. Precedes the triton_custom rules for the "
         "same reason attention does: the class says what the time buys."),
    # ---- MIOpen helpers: bare names launched through module APIs, like Triton -----------------------
    Rule("miopen.norm", _r(r"^MIOpen\w*(?:BatchNorm|LayerNorm|GroupNorm)"), "normalization", "miopen", None,
         "MIOpen normalization kernels (`MIOpenBatchNormFwdTrainSpatial`), launched via hipModuleLaunchKernel."),
    Rule("miopen.copy", _r(r"^(?:MIOpen)?(?:batched_transpose_|transpose_NCHW2NHWC|transpose_NHWC2NCHW|"
                           r"general_4d_reorder|SubTensorOpWithSubTensor|SubTensorOpWithCastTensor|"
                           r"SubTensorOpWithTransform|Copy[1-5]d|TransformTensor|ChangeLayout)"),
         "copy", "miopen", None,
         "MIOpen data movement: batched transposes and NCHW<->NHWC reorders around convolutions, sub-tensor copies "
         "(`SubTensorOpWithSubTensor2d`) and casts."),
    Rule("miopen.elementwise", _r(r"^(?:MIOpen)?(?:SubTensorOpWithScalar|Op[1-5]dTensor|OpTensor|ScaleTensor|"
                                  r"SetTensor|ActiveFwd|ActiveBwd|NeuronFwd|NeuronBwd|LSTM\w*HidUpdate|LSTMBwd|"
                                  r"GRU\w*Update|RNN\w*Update)"),
         "elementwise", "miopen", None,
         "MIOpen tensor ops: `SubTensorOpWithScalar*` (set/scale a tensor), `Op2dTensorLite` (binary ops), "
         "activations and the RNN cell updates (`LSTMFwdHidUpdate`)."),
    Rule("miopen.pooling", _r(r"^(?:MIOpen)?(?:Pooling|mloPooling|PoolingForward|PoolingBackward)"),
         "reduction", "miopen", None, "MIOpen pooling kernels (class reduction, as for ATen's pooling)."),
    Rule("miopen.reduction", _r(r"^(?:MIOpen)?(?:SoftmaxForward|SoftmaxBackward|Softmax|ReduceTensor|Reduce[A-Z])"),
         "reduction", "miopen", None, "MIOpen softmax and tensor reductions."),
    Rule("jiterator", _r(r"^[a-z][a-z0-9_]*_(?:vectorized\d+|unrolled)_kernel$"), "elementwise", "aten",
         aten.decode_jiterator,
         "ATen jiterator kernels (`gcd_vectorized4_kernel`): NVRTC-compiled at run time and launched with "
         "cuLaunchKernel like Triton, but ATen elementwise ops."),
    # ---- Inductor-generated Triton ----------------------------------------------------------------
    # ---- hand-written Triton, with evidence ---------------------------------------------------------
    Rule("triton_custom.launch_api", Always(), "triton_custom", "triton", misc.decode_triton_custom,
         "Hand-written Triton (e.g. Liger's `_geglu_tanh_forward_kernel`): a bare identifier (no `void `, no `::`, "
         "no template or parameter list) that matched no library or Inductor rule above, launched through "
         "Triton's launcher API (cuLaunchKernel / cuLaunchKernelEx / hipModuleLaunchKernel). Library rules come "
         "first because cuBLASLt's nvjet and TensorRT-LLM's cubins also use cuLaunchKernelEx.",
         when=_launched_by_triton),
    Rule("triton_custom.cpu_op", Always(), "triton_custom", "triton", misc.decode_triton_custom,
         "Hand-written Triton identified by its launcher: a bare-identifier kernel whose launching CPU op is not "
         "an `aten::` op (an autograd.Function such as `LigerGELUMulFunction`, or a custom op), not launched with "
         "the runtime API.",
         when=_launched_by_python_op),
    # ---- hand-written Triton, without launch evidence ------------------------------------------------
    Rule("triton_custom.name_shape", _r(r"^_[a-z](?:[a-z0-9]|_(?=[a-z0-9]))*$"), "triton_custom",
         "triton", misc.decode_triton_custom,
         "LOWER CONFIDENCE (no launch API or CPU-op evidence). A bare snake_case identifier with a leading "
         "underscore (`_geglu_tanh_forward_kernel`, `_rms_norm_forward_kernel`) is a Python-private function "
         "name, the Triton convention; CUPTI names C++ kernels with `void `, namespaces and templates. Never "
         "when a runtime API (`cudaLaunchKernel`) launched it: Triton does not. A name without the underscore "
         "and without evidence is not guessed to be Triton.",
         when=_maybe_triton),
    # ---- serving-engine custom ops -----------------------------------------------------------------
    Rule("custom_op.kv_cache", _w("reshape_and_cache", "concat_and_cache", "gather_and_maybe_dequant_cache",
                                  "gather_cache", "cp_gather_cache", "copy_blocks", "swap_blocks", "kv_cache_write",
                                  "store_kvcache", "update_kv_cache", "kvcacheupdate", "write_to_kv_cache"),
         "copy", _ns, aten.decode_aten,
         "KV-cache writes and gathers of serving engines (vLLM `reshape_and_cache_flash_kernel`, "
         "`concat_and_cache_mla_kernel`, TensorRT-LLM cache updates): data movement into or out of the paged "
         "cache, class copy. Written in Triton and launched as such, they stay triton_custom (rules above)."),
    Rule("custom_op.rotary", _any(_w("rotary", "mrope"),
                                  _all(_w("rope"), _r(r"(?<![A-Za-z])[Rr]ope(?![a-z])|[a-z0-9]Rope(?![a-z])"))),
         "elementwise", _ns, aten.decode_aten,
         "Rotary position embedding kernels (vLLM `rotary_embedding_kernel`, fused QK-norm+RoPE+cache-insert ops): "
         "elementwise arithmetic on Q/K."),
    # ---- FBGEMM table-batched embeddings -------------------------------------------------------------
    Rule("fbgemm.tbe_forward_nobag", _all(_w("embedding_codegen_forward", "embedding_forward"), _w("nobag")),
         "elementwise", "fbgemm", aten.decode_aten,
         "FBGEMM table-batched embedding forward without pooling (`*_nobag_*`): a gather, as ATen's embedding."),
    Rule("fbgemm.tbe_forward", _w("embedding_codegen_forward", "split_embedding_forward", "dense_embedding_forward"),
         "reduction", "fbgemm", aten.decode_aten,
         "FBGEMM table-batched embedding forward (`split_embedding_codegen_forward_unweighted_kernel`): each output "
         "row sums the rows of its bag (pooled lookup), so class reduction. Not a GEMM although the library's "
         "name says `gemm`."),
    Rule("fbgemm.tbe_backward", _w("embedding_backward_codegen", "embedding_codegen_backward", "_find_long_segments",
                                   "backward_codegen"),
         "reduction", "fbgemm", aten.decode_aten,
         "FBGEMM embedding backward (with fused optimizers, e.g. `…_adagrad_…_kernel_warp_per_row_1`): sums gradient "
         "rows per index — a reduction, as for ATen's embedding backward."),
    Rule("fbgemm.index", _w("bounds_check_indices", "linearize_index", "lxu_cache", "lru_cache_find",
                            "direct_mapped_lxu", "cache_lookup", "jagged", "asynchronous_complete_cumsum"),
         "elementwise", _ns_or("fbgemm"), aten.decode_aten,
         "FBGEMM's index helpers around table-batched embeddings (`bounds_check_indices_kernel`, "
         "`linearize_index_kernel`, cache lookups) and jagged-tensor ops: per-element index arithmetic."),
    # ---- pooling and upsampling ---------------------------------------------------------------------
    Rule("pooling", _w("pool2d", "pool3d", "pool1d", "max_pool", "avg_pool", "maxpool", "avgpool", "adaptivemax",
                       "adaptiveavg", "adaptive_max", "adaptive_avg", "maxunpool", "lppool"),
         "reduction", _ns, aten.decode_aten,
         "Pooling, forward and backward (`max_pool_forward_nchw`, `adaptive_avg_pool2d`, `max_pool_backward_nchw`). "
         "Judgement call: class reduction — each output reduces a window (max or mean), and the backward "
         "accumulates every window's gradient into overlapping inputs."),
    Rule("upsampling.backward", _all(_w("upsample", "grid_sampler", "interpolat", "resize"), _w("backward")),
         "reduction", _ns, aten.decode_aten,
         "Upsampling / grid-sample backward: accumulates the gradients of many outputs into each input (atomic "
         "adds) — class reduction, like embedding backward."),
    Rule("upsampling", _w("upsample", "grid_sampler", "interpolat", "resize_kernel", "resize_bilinear",
                          "resize_nearest"),
         "elementwise", _ns, aten.decode_aten,
         "Upsampling and grid sampling forward (`upsample_bilinear2d_out_frame`, `upsample_nearest2d_nhwc_out_frame`): "
         "each output reads a few inputs and writes once — a gather with interpolation, class elementwise."),
    # ---- ATen and friends by semantic family ----------------------------------------------------------
    Rule("normalization", _w("layer_norm", "layernorm", "batch_norm", "batchnorm", "rms_norm", "rmsnorm",
                             "group_norm", "groupnorm", "instance_norm", "instancenorm", "rowwisemoments",
                             "gammabetabackward", "computeinternalgradients", "computefusedparams", "computegradinput",
                             "cuapplylayernorm", "cuapplyrmsnorm", "cucomputepartgradgammabeta",
                             "cucomputegradgammabeta", "cudnn::bn_", "bn_fw_", "bn_bw_", "welford", "gemma_norm",
                             "norm_quant", "qk_norm", "normquant"),
         "normalization", _ns, aten.decode_aten,
         "Layer/RMS/batch/group norm kernels (ATen `vectorized_layer_norm_kernel`, `RowwiseMomentsCUDAKernel`, "
         "apex/TE `cuApplyLayerNorm`, cuDNN `bn_fw_*`, vLLM `rms_norm_kernel`), fused norm+quant included."),
    Rule("custom_op.quant", _w("quant", "cvt_fp16_to_fp4", "cvt_fp16_to_fp8", "_to_fp4", "_to_fp8", "to_mxfp",
                               "fp4_convert", "fp8_convert"),
         "elementwise", _ns, aten.decode_aten,
         "fp8/fp4/int8 quantisation and dequantisation kernels (`scaled_fp8_quant_kernel`, "
         "`per_token_group_quant_8bit_kernel`, `cvt_fp16_to_fp4`, `silu_mul_cvt_fp16_to_fp4`): one read and one "
         "write per element plus a per-group scale — elementwise, memory-bound."),
    Rule("reduction", _w("reduce_kernel", "softmax_warp_", "softmax", "cunn_classnll", "nll_loss", "devicereduce",
                         "devicesegmentedreduce", "devicescan", "scan_kernel", "tensor_kernel_scan", "embedding_backward",
                         "compute_grad_weight", "sum_and_scatter", "krn_partial", "partial_segments", "renorm_kernel",
                         "_norm_kernel", "cross_entropy", "reduce_1block", "kernelreduce", "aminmax", "topk", "argmax",
                         "argmin", "cumsum", "logsumexp", "gatingsoftmax", "moe_sum", "samplingfromprob", "sampling::",
                         "renormprob", "renorm_prob"),
         "reduction", _ns, aten.decode_aten,
         "Reductions: ATen `reduce_kernel<...ReduceOp<...>>`, softmax (`softmax_warp_forward`, "
         "`cunn_SoftMaxForward`), losses, scans, top-k and token sampling from probabilities (FlashInfer "
         "`TopPSamplingFromProbKernel`: scans and reductions over the vocabulary). Judgement call: embedding *backward* (`embedding_backward_*`, "
         "`compute_grad_weight`) is a reduction — it sums gradient rows per index."),
    Rule("copy", _w("copy_kernel", "_copy_", "catarraybatchedcopy", "copy_device_to_device", "batched_copy",
                    "direct_copy", "transpose_kernel", "transpose_readwrite", "permute_kernel", "permute_2d", "permute",
                    "contiguous_kernel", "nchwtonhwc", "nhwctonchw", "copyblocks"),
         "copy", _ns, aten.decode_aten,
         "Copies and dtype casts done by kernels (`direct_copy_kernel_cuda`, `bfloat16_copy_kernel_cuda`, "
         "`CatArrayBatchedCopy`), transposes/permutes (cuBLAS `transpose_readWrite_alignment_kernel`, FBGEMM "
         "`permute_2D_data_kernel`, cuDNN `nchwToNhwcKernel`) — memory-bound data movement, distinct from "
         "copy-engine memcpy."),
    Rule("elementwise", _w("elementwise_kernel", "elementwisekernel", "multi_tensor_apply", "fillfunctor",
                           "index_elementwise", "indexselect", "index_select", "embedding_fwd", "embedding_forward",
                           "indexfunclargeindex", "indexfuncsmallindex", "distribution_elementwise", "fused_dropout",
                           "dropout", "where_kernel", "launch_clamp", "masked_fill", "scatter_gather", "_scatter_",
                           "index_put", "indexing_backward", "vectorized_", "unrolled_", "gpu_kernel", "functor",
                           "triu_tril", "act_and_mul", "silu_and_mul", "gelu_and_mul", "silu_mul", "swiglu",
                           "gather_kernel"),
         "elementwise", _ns, aten.decode_aten,
         "ATen TensorIterator kernels (`vectorized_elementwise_kernel<8, ...GeluCUDAKernelImpl...>`), foreach/"
         "fused optimizers (`multi_tensor_apply_kernel<...FusedAdamMathFunctor...>`, apex/TE's own), gathers/"
         "scatters and fused activations (`act_and_mul_kernel`). Judgement call: embedding *forward* "
         "(`indexSelectLargeIndex`) is elementwise — a gather, one read and one write per element, nothing "
         "accumulated."),
    Rule("gemm.generic", _all(_w("gemm", "gemv", "matmul", "_mm_", "bmm", "marlin", "mul_mat", "moe_q"),
                              _ri(r"(?<!fb)gemm|gemv|matmul|_mm_|bmm|marlin|mul_mat|(?<![a-z])moe_q\d")),
         "gemm", _ns, gemm.decode_generic,
         "Anything else that says it multiplies matrices (custom CUDA, DeepGEMM, Marlin, ggml-style quantised "
         "`mul_mat_q*` / `moe_q*`, unknown vendors). "
         "FBGEMM's kernels do not count: `fbgemm` names the library, not the work."),
    # ---- everything else ------------------------------------------------------------------------
    Rule("other.aten", Words(("at::", "c10::"), fold=False), "other", _ns, aten.decode_aten,
         "Other kernels ATen launches (CUB radix sort / unique inside embedding backward, RNG set-up, ...): "
         "named in ATen's world but in no family above; the library is read from the kernel's own namespace."),
    Rule("other", Always(), "other", _ns, None,
         "No rule matched: a vendor or custom kernel this table does not know yet."),
)

#: Characters of a name the rules read (the longest real kernel names, demangled Composable Kernel
#: instantiations, are tens of KB).
RULE_WINDOW = 65_536

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
    evidence used to tell hand-written Triton apart (and RCCL from NCCL).
    """
    return _classify(
        name if isinstance(name, str) else str(name),
        _normal_kind(kind),
        launch_api if isinstance(launch_api, str) and launch_api else None,
        cpu_op if isinstance(cpu_op, str) and cpu_op else None,
    )


@lru_cache(maxsize=65536)
def _classify(name: str, kind: str, launch_api: str | None, cpu_op: str | None) -> KernelInfo:
    # Kineto sometimes pads names, rocprof appends `.kd`, XLA/CK traces keep mangled symbols:
    # classification reads the normalised text; the caller keeps the original name as identity.
    # Rules and decoders read at most RULE_WINDOW characters: what decides a family is in a name's head
    # (namespace, template, first arguments), and the bound keeps a crafted 300,000-character name to a few
    # milliseconds. Identity is never cut: callers key on the full original name.
    text = (rule_text(name) if kind == "kernel" else name.strip())[:RULE_WINDOW]
    ctx = Context(text, text.lower(), kind, launch_api, cpu_op)
    for rule in RULES:
        if kind not in rule.kinds:
            continue
        if not rule.pattern(ctx):
            continue
        if rule.when is not None and not rule.when(ctx):
            continue
        try:
            library = rule.library if isinstance(rule.library, str) else rule.library(ctx)
            decoded = rule.decoder(text) if rule.decoder is not None else {}
        except Exception as exc:  # noqa: BLE001 - totality is the contract; make the failure visible
            library = rule.library if isinstance(rule.library, str) else "unknown"
            decoded = {"decode_error": type(exc).__name__}
        return KernelInfo(rule.kernel_class, library, _freeze(decoded), rule.name)
    raise AssertionError("the last rule matches everything")  # pragma: no cover


def rule_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every regular expression the rule table uses, with its rule's name (for structural checks)."""
    return [(rule.name, p) for rule in RULES for p in rule.pattern.regexes()]


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
