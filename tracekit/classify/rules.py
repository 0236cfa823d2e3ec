"""The taxonomy as data: an ordered table of :class:`Rule` records, first match wins.

Contract: :func:`classify_kernel` reads the name through :func:`tracekit.classify.names.rule_text`
(padding and rocprof's ``.kd`` suffix removed, ``_Z…`` symbols demangled), then walks :data:`RULES`
top to bottom and returns the first rule whose ``kinds`` contains the activity kind, whose matcher
accepts the text, and whose optional ``when`` predicate accepts the launch context. The last rule
matches everything, so every name gets a class in :data:`CLASSES`. A decoder that trips over odd text
never propagates: the result then carries ``{"decode_error": "<ExceptionType>"}``.

Time is linear in the name, whatever the name: matchers are literal substring tests (``str in str``)
or regular expressions written without nested or unanchored ``.*`` repeats (``tests/classify/test_classify.py``
checks every pattern of this package structurally) — on the whole name, or (:class:`Ident`) on the kernel's
own identifier only, so that namespaces and template arguments (``fused_attn_rocm::remove_pad``) do not
decide a family — and rules read at most :data:`RULE_WINDOW`
characters, so a 300,000-character name classifies in milliseconds. Case-insensitive tests run on one
lower-cased copy of the name. Callers keep the full name as identity: nothing here is cut for them.

Order matters and encodes four facts:

1. Library and vendor families first (memcpy/memset kernels, NCCL/RCCL and other collectives,
   attention libraries, GEMM libraries and cuDNN/MIOpen convolutions, TensorRT Myelin kernels, Inductor,
   Triton/bare-named GEMMs and ATen's own convolutions, MIOpen helpers).
   On Hopper, cuBLASLt's ``nvjet_*`` GEMMs and TensorRT-LLM's ``bmm_*``/``fmhaSm100f*`` cubins are
   launched with ``cuLaunchKernelEx`` — the driver call Triton uses — so the launch API alone cannot
   mean "Triton" until the library rules have had their say.
2. Then hand-written Triton identified by *evidence* (Triton's launch API or a non-ATen launching
   CPU op, and a bare identifier), before the name-based semantic rules, so that
   ``_rms_norm_forward_kernel`` launched by ``cuLaunchKernel`` is ``triton_custom`` rather than
   ``normalization``. A kernel launched with the CUDA/HIP *runtime* API (``cudaLaunchKernel``) is
   never ``triton_custom``: Triton's launcher does not use it.
3. Then serving-engine custom ops (KV-cache writes, rotary embedding, quantisation), FBGEMM's table-batched
   embeddings, pooling and upsampling, then ATen's semantic families (normalization, Eigen/TensorFlow,
   padding, scatter-add, reduction, copy, elementwise), then anything that says it multiplies matrices.
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

from tracekit.classify import aten, gemm, inductor, misc, nnc
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
    vendor: str | None = None  # the trace's device vendor (TraceMeta.vendor: "nvidia", "amd", …) when known
    #: The table's words found in ``low`` and in ``name`` by one scan for all of them (``found`` of
    #: :func:`classify_kernel`), or None: each :class:`Words` then tests its own words.
    found: tuple[frozenset[str], frozenset[str]] | None = None


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


#: Every word of every :class:`Words` built, case-folded ones and the others: what one scan of a
#: name looks for (:func:`table_words`).
_TABLE_WORDS: tuple[set[str], set[str]] = (set(), set())


@dataclass(frozen=True)
class Words(Matcher):
    """Any of these substrings (``fold=True``: in the lower-cased name; give them in lower case).

    Each test alone costs the name's length; the table holds some 450 words, so a long name costs
    450 times its length. A caller classifying many names finds every word of the table in one scan
    of them all instead (``found`` of :func:`classify_kernel`), and the test becomes a set look-up."""

    words: tuple[str, ...]
    fold: bool = True

    def __post_init__(self) -> None:
        _TABLE_WORDS[0 if self.fold else 1].update(self.words)

    def __call__(self, ctx: Context) -> bool:
        if ctx.found is not None:
            seen = ctx.found[0 if self.fold else 1]
            for word in self.words:
                if word in seen:
                    return True
            return False
        text = ctx.low if self.fold else ctx.name
        for word in self.words:  # a plain loop: ~2x cheaper than any(<generator>) on the hot path
            if word in text:
                return True
        return False


@lru_cache(maxsize=65536)
def kernel_identifier(name: str) -> str:
    """The kernel's own identifier, lower-cased: ``void sglang::flash_c4_prefill<512l>(Params)`` ->
    ``flash_c4_prefill`` (a bare name is its own identifier; ``""`` when the text starts with none)."""
    return (aten.template_name(name) or "").lower()


@dataclass(frozen=True)
class Ident(Matcher):
    """``re.search`` on :func:`kernel_identifier` (write the pattern in lower case): what the kernel is called,
    not its namespaces, template arguments or parameters (``transformer_engine::fused_attn_rocm::remove_pad``
    is called ``remove_pad``; ``attn`` there names the module, not the work)."""

    pattern: re.Pattern[str]

    def __call__(self, ctx: Context) -> bool:
        return self.pattern.search(kernel_identifier(ctx.name)) is not None

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return (self.pattern,)


@lru_cache(maxsize=65536)
def kernel_scope(name: str) -> str:
    """The namespaces qualifying the kernel's own identifier, lower-cased: ``void dpsk::ep::internode::dispatch<…>``
    -> ``dpsk::ep::internode`` (``""`` for a bare or unqualified name)."""
    return aten.template_scope(name).lower()


@dataclass(frozen=True)
class Scope(Matcher):
    """``re.search`` on :func:`kernel_scope` (write the pattern in lower case): where the kernel is declared, not
    the namespaces of its template arguments or parameters (``cub::DispatchReduceByKey<…>`` inside a CUB
    kernel's template is not a scope)."""

    pattern: re.Pattern[str]

    def __call__(self, ctx: Context) -> bool:
        return self.pattern.search(kernel_scope(ctx.name)) is not None

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return (self.pattern,)


@dataclass(frozen=True)
class _Myelin(Matcher):
    """A TensorRT Myelin kernel (``__myl_…``) whose op words spell ``kernel_class`` (misc.myelin_class)."""

    kernel_class: str

    def __call__(self, ctx: Context) -> bool:
        return ctx.name.startswith("__myl_") and misc.myelin_class(ctx.name) == self.kernel_class


@dataclass(frozen=True)
class All(Matcher):
    parts: tuple[Matcher, ...]

    def __call__(self, ctx: Context) -> bool:
        for part in self.parts:  # plain loops: cheaper than all()/any() over a generator on the hot path
            if not part(ctx):
                return False
        return True

    def regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(r for p in self.parts for r in p.regexes())


@dataclass(frozen=True)
class Any_(Matcher):
    parts: tuple[Matcher, ...]

    def __call__(self, ctx: Context) -> bool:
        for part in self.parts:
            if part(ctx):
                return True
        return False

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


def _id(pattern: str) -> Ident:
    return Ident(re.compile(pattern))


def _scope(pattern: str) -> Scope:
    return Scope(re.compile(pattern))


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


# torch.compile/Inductor kernel names: `triton_{poi,red,per,tem,…}_fused_<ops>_<n>`.
_INDUCTOR = _r(r"^triton_(?:poi|red|per|tem|for|mix|spl|split|ext|unk)?_|^triton_$|^triton__")

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
# A bare name whose own words say Triton or Gluon (`apply_rotary_emb_triton_kernel`, `gluon_mxfp4_moe_stage1_kernel`).
_TRITON_WORD = re.compile(r"(?:^|_)(?:triton|gluon)(?:_|$)", re.IGNORECASE)


def _bare(ctx: Context) -> bool:
    return _BARE_IDENTIFIER.match(ctx.name) is not None


def _launched_by_triton(ctx: Context) -> bool:
    return ctx.launch_api in TRITON_LAUNCH_APIS and _bare(ctx)


def _launched_by_runtime(ctx: Context) -> bool:
    return ctx.launch_api in RUNTIME_LAUNCH_APIS


# Ops of libraries that ship compiled CUDA kernels under bare names (TensorRT-LLM's XQA `kernel_mha`): their
# launching op is no evidence of Triton.
_VENDOR_OPS: tuple[tuple[str, str], ...] = (
    ("trtllm::", "trtllm"), ("tensorrt_llm::", "trtllm"), ("tensorrt::", "tensorrt"),
)


def _vendor_op_library(ctx: Context) -> str | None:
    op = (ctx.cpu_op or "").lower()
    for prefix, lib in _VENDOR_OPS:
        if op.startswith(prefix):
            return lib
    return "trtllm" if "xqa" in op else None


def _launched_by_python_op(ctx: Context) -> bool:
    # An autograd.Function or custom op (e.g. `LigerGELUMulFunction`, `sglang::inplace_fused_experts`)
    # launching a bare-named kernel: ATen ops never launch bare-named kernels, and CUDA-graph replays have no
    # cpu_op at all. A vendor library's op (TensorRT-LLM's) launches its own compiled kernels.
    op = ctx.cpu_op
    return (
        bool(op)
        and not op.startswith("aten::")
        and not op.startswith("cuda")  # a runtime call mistakenly passed as the op
        and not _launched_by_runtime(ctx)
        and _bare(ctx)
        and _vendor_op_library(ctx) is None
    )


def _not_inductor(ctx: Context) -> bool:
    """Not an Inductor kernel: its name lists the ATen ops it fused (`triton_poi_fused_all_gather_into_tensor_0`
    copies a collective's input; `…_flash_attention_…` surrounds an SDPA), so words in it name ops, not the
    kernel's work. For rules that precede the Inductor rule and read such words."""
    return _INDUCTOR.pattern.match(ctx.name) is None


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
    "primus_turbo": "primus_turbo",  # AMD Primus-Turbo (its DeepEP port: primus_turbo::deep_ep::…)
    "rocprim": "rocprim",
    "hipcub": "hipcub",
    "tvm": "tvm",
    "mscclpp": "mscclpp",
    "onnxruntime": "onnxruntime",
    "Eigen": "eigen",  # TensorFlow's GPU tensor expressions
    "tensorflow": "tensorflow",
    "nvinfer1": "tensorrt",  # TensorRT plugins
    "sgl_hip": "sglang",  # SGLang's HIP kernels (sgl_hip::activation::act_and_mul_kernel)
    "fused_moe": "trtllm",  # TensorRT-LLM's small-batch fused MoE (fused_moe::run_global<Fused_Moe_Kernel_sm80…>)
    "cusparse": "cusparse",
    "mori": "mori",  # AMD MORI (its EP all-to-all: mori::moe::EpDispatchIntraNodeKernel)
}

# DeepSeek's own builds keep DeepEP and DeepGEMM under one `dpsk::` namespace (`dpsk::ep::internode::dispatch`,
# `dpsk::gemm::fp8_gemm_kernel`): the second segment says which library's code it is.
_DPSK_NAMESPACE = {"ep": "deep_ep", "gemm": "deep_gemm"}

# Libraries whose kernels live in the global namespace but whose identifiers are their own, recognised by the
# start of the name (after `void `): ATen's legacy THC pointwise kernels and its XPU (SYCL) functors, cuDNN's RNN
# kernels, apex's fused norms, CUB's device kernels as nsys shortens them, cuFFT's passes, cuRAND's generators,
# bitsandbytes, AWQ, nvFuser, ROCm Iris, b12x's CuTe-DSL kernels (module path glued into the name).
# Identifiers that several engines vendor (`reshape_and_cache_*`, `paged_attention_*`) are deliberately absent:
# their short name does not say whose build it is.
_LIBRARY_PREFIX = re.compile(
    r"(?:void )?(?:(?P<aten>kernelPointwiseApply\d|Upsample(?:Bilinear|Bicubic|Nearest|Linear|Trilinear)|"
    r"tensor_kernel_scan_|distribution_elementwise_grid_stride|distribution_nullary_kernel)|"
    r"(?P<cudnn>RNN_blockPersist_|elemWiseRNNcell)|"
    r"(?P<apex>cuApply(?:LayerNorm|RMSNorm)|cuComputePartGradGammaBeta|cuComputeGradGammaBeta)|"
    r"(?P<cub>Device(?:RadixSort|Reduce|Scan|SegmentedRadixSort|SegmentedReduce|Select|Histogram|MergeSort)[A-Z])|"
    r"(?P<cufft>(?:regular|vector)_(?:bluestein_)?fft|bluestein_fft)|"
    r"(?P<curand>generate_seed_pseudo|gen_sequenced)|"
    r"(?P<bitsandbytes>kgemm_4bit|kDequantizeBlockwise|kQuantizeBlockwise|kOptimizer(?:32bit|Static8bit)|kspmm_coo)|"
    r"(?P<awq>gemm_forward_4bit_cuda)|"
    r"(?P<nvfuser>nvfuser_)|"
    r"(?P<iris>iris_)|"
    r"(?P<b12x>kernel_cutlass_kernel_b12x))"
)

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
    ("rocprim::", "rocprim"),
    # Serving engines also name their kernels without `::`: CuTe-DSL kernels carry the Python module path
    # glued into one identifier (`kernel_cutlass_kernel_vllmv1attentionops…`).
    ("vllm", "vllm"),
    ("sglang", "sglang"),
)


# A mangled symbol the demangler could not read (`_ZN7sgl_hip10activation…` with a malformed template argument):
# its first nested name is still `<length><identifier>`.
_MANGLED_HEAD = re.compile(r"_ZN(\d{1,2})")


@lru_cache(maxsize=65536)
def library_from_namespace(name: str) -> str:
    """The library a demangled C++ kernel name comes from, by namespace; ``unknown`` if none."""
    mangled = _MANGLED_HEAD.match(name)
    if mangled is not None:
        start = mangled.end()
        lead = name[start:start + int(mangled.group(1))]
        if lead in _LEADING_NAMESPACE:
            return _LEADING_NAMESPACE[lead]
    head = name[5:] if name.startswith("void ") else name
    cut = head.find("::")
    if 0 < cut <= 64:
        lead = head[:cut].strip()
        if lead.isidentifier() and lead in _LEADING_NAMESPACE:
            return _LEADING_NAMESPACE[lead]
        if lead == "dpsk":
            second = head[cut + 2:cut + 2 + 8].split("::", 1)
            if len(second) == 2 and second[0] in _DPSK_NAMESPACE:
                return _DPSK_NAMESPACE[second[0]]
    lead = _LIBRARY_PREFIX.match(name)
    if lead is not None:
        return lead.lastgroup or "unknown"
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
    """``triton`` only with Triton evidence: a bare identifier launched by Triton's launcher API or by a
    non-ATen, non-vendor CPU op (``sglang::inplace_fused_experts``), or a Python-private bare name
    (``_attn_fwd``) or one whose words say ``triton``/``gluon``, not launched by the runtime API. Other names by
    namespace, by a library's own identifier prefix (AWQ's bare ``gemm_forward_4bit_cuda_*``) or library word."""
    if _bare(ctx):
        vendor = _vendor_op_library(ctx)
        if vendor:
            return vendor
        if ctx.launch_api in TRITON_LAUNCH_APIS or _launched_by_python_op(ctx):
            return "triton"
        if (ctx.name.startswith("_") or _TRITON_WORD.search(ctx.name)) and not _launched_by_runtime(ctx):
            return "triton"
    return library_from_namespace(ctx.name)


def _gemm_library(ctx: Context) -> str:
    # By the kernel's own namespace: cuBLAS kernels take `cublasLtEpilogue_t` arguments too. cuBLASLt's stand-alone
    # epilogue is cuBLASLt's in both spellings (`cublasLt::epilogue::impl::…`, CUDA <= 11 `epilogue::impl::…`).
    if ctx.name.startswith(("void cublasLt::", "cublasLt::")) or _CUBLASLT_EPILOGUE(ctx):
        return "cublasLt"
    return "cublas"


# cuBLASLt's stand-alone epilogue kernel (bias/activation after a GEMM that could not fuse them), in its CUDA <= 11
# spelling outside the `cublasLt::` namespace: declared in `epilogue::impl`, and taking a `cublasLtEpilogue_t`.
_CUBLASLT_EPILOGUE = _all(_w("cublasltepilogue_t"), _id(r"^globalkernel$"), _scope(r"(?:^|::)epilogue::impl$"))


def _comm_library(ctx: Context) -> str:
    # RCCL keeps NCCL's kernel names on ROCm. The trace's vendor decides for every kernel alike: a kernel launched
    # before profiling began has no launch call in the trace, and must not be called NCCL's when its twin launched
    # by hipExtLaunchKernel a moment later is RCCL's. The launch API and the name decide when the vendor is unknown.
    if ctx.vendor == "amd" or "rccl" in ctx.low or (ctx.launch_api or "").startswith(_HIP_PREFIX):
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


# Two families that other rules must leave alone (attention.by_name reads `mla` in `concat_and_cache_mla`).
_KV_CACHE = _w("reshape_and_cache", "concat_and_cache", "gather_and_maybe_dequant_cache", "gather_cache",
               "cp_gather_cache", "copy_blocks", "swap_blocks", "kv_cache_write", "store_kvcache",
               "update_kv_cache", "kvcacheupdate", "write_to_kv_cache", "gather_kv_cache", "gatherkvcache",
               "gather_k_cache", "dequant_gather", "dequantgather")
_ROTARY = _any(_w("rotary", "mrope"), _all(_w("rope"), _r(r"(?<![A-Za-z])[Rr]ope(?![a-z])|[a-z0-9]Rope(?![a-z])")))


class _NncFusion(Matcher):
    """A TorchScript NNC fusion group's kernel name (tracekit.classify.nnc) not launched by the runtime API."""

    def __call__(self, ctx: Context) -> bool:
        return (ctx.name.startswith("fused_") and not _launched_by_runtime(ctx)
                and nnc.nnc_fused_ops(ctx.name) is not None)


_NNC_FUSION = _NncFusion()


# Padding, read from the kernel's own identifier: `pad` as a token (`replication_pad_forward_kernel1d`,
# `remove_pad`, `unpad_input`, `pad2d`), or a padding mode glued to it.
_PADDING = _all(_w("pad"), _id(r"(?:reflection|replication|constant|circular|reflect|replicate)_?pad|"
                               r"(?<![a-z0-9])(?:un|remove_|add_)?pad(?:ding)?(?:_|\d|kernel|$)|(?:add|remove)padding"))


# A kernel whose own identifier says it normalises (`_attn_res_rmsnorm_kernel`: RMSNorm of the attention residual):
# the other words name where its input comes from, not its work.
_NORM_IDENT = _all(_w("norm"), _id(r"rms_?norm|layer_?norm|group_?norm|batch_?norm"))


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
    Rule("memcpy.by_name", _r(r"^(?:Memcpy |Copy(?:Host|Device)To(?:Host|Device)|\[CUDA memcpy|__amd_rocclr_copy)"),
         "memcpy", _rocclr, misc.decode_memcpy,
         "A memcpy recorded as a kernel-like event (old traces, ROCm `CopyHostToDevice`), or HIP's blit kernels "
         "`__amd_rocclr_copyBuffer*` / `copyBufferRect` / `copyImage*` that carry out hipMemcpy*: the time buys a "
         "copy the user asked for."),
    Rule("memset.by_name", _r(r"^(?:Memset |FillBuffer|\[CUDA memset|__amd_rocclr_fill)"), "memset", _rocclr,
         misc.decode_memset, "A memset recorded as a kernel-like event (old traces, ROCm `FillBuffer`), or HIP's "
         "blit kernels `__amd_rocclr_fillBuffer*` / `fillImage` that carry out hipMemset*."),
    Rule("hip_runtime", _r(r"^__amd_rocclr_"), "other", "hip_runtime", None,
         "The HIP runtime's other service kernels (`__amd_rocclr_batchMemOp` behind hipStreamBatchMemOp, "
         "`streamOpsWrite`/`streamOpsWait`, `initHeap`, `gwsInit`): stream bookkeeping the runtime launches, neither "
         "a copy nor a fill — class other, library hip_runtime like its copy and fill kernels."),
    # ---- communication ---------------------------------------------------------------------------
    Rule("nccl", _w("nccl", "rccl"), "communication", _comm_library, misc.decode_nccl,
         "NCCL/RCCL device kernels (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`, old `ncclKernel_...`, RCCL's "
         "`rcclGenericKernel` / `rccl_main_kernel`). RCCL keeps NCCL's kernel names on ROCm, so library `rccl` when "
         "the trace is an AMD one (its vendor), whatever launched the kernel — one launched before the trace began "
         "has no launch call to read — else when the name says so or a HIP API launched it."),
    Rule("moe.dispatch_layout", _all(_w("dispatch_layout"), _id(r"^get_dispatch_layout$")), "other", _ns, None,
         "DeepEP's layout kernel `get_dispatch_layout` (namespace `deep_ep::layout`, `deep_ep::internode` in early "
         "releases, `dpsk::ep::cuda` in DeepSeek's own builds): counts, on the local GPU, the tokens each rank and "
         "expert will receive from the top-k indices. It moves no data between GPUs, so it is not communication; "
         "like the other MoE routing bookkeeping (vLLM's `moe_align_block_size_kernel`) it is class other. Before "
         "collective.custom, which takes every other `deep_ep::internode::` kernel."),
    Rule("collective.expert_parallel",
         _any(_all(_w("dispatch", "combine", "notify", "barrier", "clean_low_latency"),
                   _id(r"^(?:(?:notify|cached_notify)_?)?(?:dispatch|combine)(?:_[a-z0-9_]{1,48})?$|^cached_notify$|"
                       r"^barrier$|^clean_low_latency_buffer$"),
                   _scope(r"(?:^|::)(?:ep|deep_ep|intranode|internode|internode_ll)$")),
              _all(_w("epdispatch", "epcombine", "ep_dispatch", "ep_combine"),
                   _id(r"^ep_?(?:dispatch|combine)(?:_?(?:intra|inter)_?node|_?ll|_?low_?latency)"))),
         "communication", _ns_or("deep_ep"), misc.decode_collective,
         "Expert-parallel all-to-all (the MoE token dispatch to the experts' GPUs and the combine back) under any "
         "namespace: DeepEP's kernels `dispatch`, `combine`, `notify_dispatch`, `cached_notify`, "
         "`cached_notify_{dispatch,combine}`, the low-latency `dispatch`/`combine` (`_ll`, tuned `dispatch_opt…` "
         "variants), `barrier` and `clean_low_latency_buffer`, read from the kernel's own identifier and declared in "
         "an EP namespace (`…::ep`, `deep_ep`, `intranode`, `internode`, `internode_ll`): `deep_ep::internode::…`, "
         "Primus-Turbo's `primus_turbo::deep_ep::intranode::…`, DeepSeek's own builds `dpsk::ep::internode::…` "
         "(library deep_ep: the same code); and MORI's `mori::moe::EpDispatchIntraNodeKernel` / "
         "`EpCombineInterNodeKernel`. A `dispatch`/`combine` word elsewhere (FlashAttention's "
         "`flash_fwd_splitkv_combine_kernel`, CUB's `Dispatch…` policies in template arguments, a kernel called "
         "`combine` outside an EP namespace) is not enough. Their time is communication, whoever built them."),
    Rule("collective.custom", _any(_w("multimem_all_reduce", "multimem_all_gather", "multimem_reduce_scatter",
                                 "multimem_one_shot", "one_shot_all_reduce", "two_shot_all_reduce",
                                 "oneshot_all_reduce", "twoshot_all_reduce", "oneshotallreduce", "twoshotallreduce",
                                 "cross_device_reduce", "allreduce_fusion_kernel", "custom_all_reduce",
                                 "intranode_alltoall", "internode_alltoall", "all_to_all_kernel",
                                 "deep_ep::intranode::", "deep_ep::internode::", "deep_ep::internode_ll::",
                                 "lamport", "ulysses", "::comm::", "b12xcomm"),
                              _r(r"^iris_"),
                              _all(_w("reduce", "gather", "to_all", "toall", "shot"),
                                   _id(r"(?<![a-z0-9])(?:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)|"
                                       r"(?<![a-z0-9])ar_(?:one|two)_?shot|(?:one|two)_?shot_ar(?![a-z])"))),
         "communication", _collective_library, misc.decode_collective,
         "Collectives outside NCCL: PyTorch SymmetricMemory's `multimem_all_reduce_kernel` (NVLS multicast) and "
         "one-/two-shot all-reduce, vLLM/SGLang/aiter custom all-reduce (`cross_device_reduce_1stage`, "
         "`sglang::all_reduce_pull_res_kernel`, `r4d_ar_oneshot_2rank_*`), TVM/MSCCL++ `allreduce_simple`, "
         "TensorRT-LLM's Lamport all-reduce fusion, any other kernel DeepEP declares in its communication "
         "namespaces `deep_ep::{intranode,internode,internode_ll}::` (its dispatch/combine family is "
         "collective.expert_parallel, above), dlslime all-to-all, b12x's CuTe-DSL comm module "
         "(`kernel_cutlass_kernel_b12xcommroce_…`: one-shot all-reduce and all-gather over RoCE), ROCm Iris (a "
         "symmetric-heap SHMEM library written in Triton/Gluon: every `iris_*` kernel it ships is a collective, "
         "`iris_stage_one_shot_allreduce_kernel`, `iris_reduce_symmetric_gluon_kernel`), FlashInfer's "
         "`flashinfer::comm::` kernels (Ulysses all-to-all and its cross-GPU barrier). The kernel's own name is read "
         "for the collective words (`all_reduce…`, `allreduce…`, `*_ar_oneshot*`), not its parameter types, and "
         "never in an Inductor kernel's fused-op list. Their time is communication, whoever wrote them.",
         when=_not_inductor),
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
    Rule("attention.flashinfer", _any(Words(("BatchPrefillWith", "BatchDecodeWith", "SinglePrefillWith",
                                             "SingleDecodeWith"), fold=False),
                                      _all(_w("flashinfer"), _w("prefill", "decode", "mla", "attention", "attn", "fmha",
                                                                "flash_fwd", "flash_bwd"))),
         "attention", "flashinfer", misc.decode_attention,
         "FlashInfer prefill/decode attention kernels, its CuTe-DSL ones included "
         "(`kernel_cutlass_kernel_flashinfercute_dsl…flash_fwd_sm120BlockSparseAttnForward…`). Before the "
         "FlashAttention rule: a name that says `flashinfer` is FlashInfer's even where it also says `flash_fwd`."),
    Rule("attention.flash", _w("flash_fwd", "flash_bwd", "flash::", "pytorch_flash", "flashattn", "flash_attn",
                               "flashattention"),
         "attention", "flash_attn", misc.decode_attention,
         "FlashAttention 2/3/4 kernels (PyTorch's vendored `pytorch_flash::` included, and FA4's CuTe-DSL "
         "`kernel_cutlass_kernel_…flash_attn…FlashAttentionForwardSm100…`)."),
    Rule("attention.trtllm", _any(_w("fmha_v2_", "fmhasm", "xqa_kernel", "masked_multihead_attention", "mmha_"),
                                  _all(_w("tensorrt_llm"), _w("attention", "fmha"))),
         "attention", "trtllm", misc.decode_attention,
         "TensorRT-LLM attention cubins: context FMHA `fmha_v2_flash_attention_*`, trtllm-gen "
         "`fmhaSm100fKernel_*` (also shipped through FlashInfer), XQA and masked multi-head decode attention."),
    Rule("attention.xqa", _all(_w("kernel_mha"), _id(r"^kernel_mha$")), "attention", _ns_or("trtllm"),
         misc.decode_xqa,
         "TensorRT-LLM's XQA decode attention: every XQA build (`xqa/mha.cu`, `mha_sm90.cu`, per head size, dtype "
         "and GQA ratio, also JIT-compiled and shipped by FlashInfer) exports its kernel as `extern \"C\" kernel_mha`, "
         "so the whole family shows one bare identifier. Other `kernel_mha_*` kernels (`kernel_mha_bwd`, custom "
         "code) are left to attention.by_name, which reads `mha` as a token and the library from evidence."),
    Rule("attention.sage", _any(_w("qk_int8_sv_f8", "qk_int_sv_f8", "qk_int8_sv_f16", "qk_int_sv_f16", "sageattn",
                                   "sage_attn", "sageattention"),
                                _all(_w("sage"), _id(r"^_?sage_?(?:attn_?)?(?:fwd|bwd)(?![a-z])"))),
         "attention", lambda ctx: "triton" if _triton_or_ns(ctx) == "triton" else "sageattention",
         misc.decode_attention,
         "SageAttention's quantised attention kernels, by name: the CUDA `qk_int8_sv_f8_attn_kernel` family, "
         "`sageattn` variants, and the Triton forward `sage_fwd` with its variants (`sage_fwd_mxfp4`, `sage_fwd_v3`, "
         "`sage_fwd_vfa`, "
         "`sage_fwd_mxfp4_mixed`: aiter's SageAttention ports) and a `sage_bwd` — the kernel's own identifier must "
         "start with `sage_fwd`/`sage_bwd`. Class attention, before the triton_custom rules (as attention.other: "
         "the class says what the time buys); library triton with Triton evidence (launch API, a Python op), else "
         "sageattention. SageAttention's own Triton kernel is called `_attn_fwd` (attention.other). Its quantisation "
         "kernels (`sage_quant_kernel`, `quant_per_block_int8_kernel`) are not attention."),
    Rule("attention.other", _any(_w("fmha", "paged_attention", "unified_attention", "merge_attn_states",
                                    "mergestates", "merge_states",
                                    "mha_fwd", "mha_bwd", "attn_fwd", "attn_bwd", "flash_decoding",
                                    "decode_attention", "prefill_attention", "context_attention",
                                    "attention_fwd", "attention_bwd", "attention_forward", "attention_backward",
                                    "transform_bias_rescale_qkv"),
                                 _all(_w("attn_", "attention_"),
                                      _ri(r"(?:attn|attention)_(?:[a-z0-9]{1,16}_){0,3}(?:fwd|bwd|forward|backward)")),
                                 _r(r"^(?:void )?aiter::(?:pa|mla|fmha|mha)_")),
         "attention", _triton_or_ns, misc.decode_attention,
         "Other attention kernels: vLLM paged / unified (Triton `kernel_unified_attention_2d`) attention and "
         "`merge_attn_states` (the combine step of split-KV attention), Triton `_attn_fwd` (tutorial) / AMD "
         "`attn_fwd`, CK-tile FMHA, custom `*_attention_*_fwd_kernel`s, ATen's native multi-head attention "
         "`transform_bias_rescale_qkv_kernel` (and its `_add_padding_` variant for nested inputs: splits the packed "
         "QKV projection into heads, adds the bias and scales q — a step of torch's native MHA, so attention, "
         "before the "
         "padding rule its name would reach). Judgement call: an attention-named "
         "*Triton* kernel is class `attention`, library `triton` — the class says what the time buys "
         "(attention FLOPs, comparable with FlashAttention), the library says who wrote it. This rule precedes "
         "the triton_custom rules on purpose. aiter's assembly kernels are named in its namespace by family: "
         "`aiter::pa_*` paged attention, `aiter::mla_*` MLA decode, `aiter::fmha_*`."),
    Rule("attention.by_name", _all(_w("attn", "attention", "mqa", "gqa", "mha", "mla", "sdpa", "flash_"),
                                   _id(r"(?<![a-z0-9])(?:attn|attention|mqa|gqa|mha|mla|fmha|sdpa)(?![a-z])|"
                                       r"(?<![a-z0-9])flash_(?:[a-z0-9]{1,16}_){0,3}(?:prefill|decode|fwd|bwd)|"
                                       r"(?:prefill|decode)_(?:[a-z0-9]{1,16}_){0,2}(?:attn|attention)")),
         "attention", _triton_or_ns, misc.decode_attention,
         "Attention by the words of the kernel's own name, as a token: `attn`, `attention`, `mqa`/`gqa`/`mha`/`mla`, "
         "`fmha`, `sdpa`, or `flash_…prefill`/`decode`/`fwd` (SGLang's `flash_c4_prefill`, vLLM's Triton "
         "`_fp8_paged_mqa_logits_kernel` — the q·k scores of DeepSeek's sparse-attention indexer — and custom "
         "prefill/decode attention). Only the identifier is read, never namespaces or template arguments "
         "(`transformer_engine::fused_attn_rocm::remove_pad` is padding), nor an Inductor kernel's fused-op list. "
         "KV-cache writes (`concat_and_cache_mla`) and rotary embedding stay with their rules below. Library as for "
         "attention.other: Triton with Triton evidence, else by namespace.",
         when=lambda ctx: _not_inductor(ctx) and not _KV_CACHE(ctx) and not _ROTARY(ctx) and not _NORM_IDENT(ctx)),
    Rule("attention.triton_fa", _all(_w("_fwd_", "_bwd_"),
                                     _r(r"^_(?:fwd|bwd)_(?:grouped_)?kernel(?:_(?:stage\d|splitK|splitk))?$|"
                                        r"^_bwd_preprocess(?:_do_o_dot)?$")),
         "attention", _triton_or_ns, misc.decode_attention,
         "The bare kernel names of the Triton attention implementations that predate the `_attn_fwd` naming: "
         "FlashAttention-Triton (`flash_attn_triton.py`: `_fwd_kernel`, `_bwd_kernel`, `_bwd_preprocess_do_o_dot` = "
         "rowsum(dO·O) of the backward), LightLLM/SGLang prefill and split-KV decode attention (`_fwd_kernel`, "
         "`_fwd_kernel_stage1`/`_fwd_grouped_kernel_stage1` = QK·softmax·PV partials, `_fwd_kernel_stage2` = their "
         "merge) and xformers' split-K decoder (`_fwd_kernel_splitK`). Only these exact shapes (a Python-private "
         "`_fwd`/`_bwd` + `kernel` + optional stage/split suffix), never a longer `_…_fwd_kernel` (Mamba's "
         "`_chunk_scan_fwd_kernel` is triton_custom). Class attention, library triton with Triton evidence."),
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
    Rule("miopen.conv_bias", _r(r"^MIOpenConvBwdB(?:ias)?(?![A-Za-z0-9])"), "reduction", "miopen", None,
         "MIOpen's convolution backward-bias (`MIOpenConvBwdB`, MIOpenConvBwdBias.cl): the bias gradient is the sum "
         "of dy over N, H and W, launched by its own miopenConvolutionBackwardBias call rather than as a helper of a "
         "convolution — class reduction (as a bias-gradient sum anywhere). Before gemm.miopen_conv, whose "
         "`MIOpenConv` prefix it shares."),
    Rule("gemm.miopen_conv", _r(r"^(?:naive_conv_|igemm_(?:fwd|bwd|wrw)|gridwise_convolution|MIOpenConv|MIOpenCv[A-Z]|"
                                r"miopenSp3As|(?:MIOpen)?Sub[Ss]ample|Im2Col|Im2d2Col|Im3d2Col|Col2Im|MIOpenGroupConv|"
                                r"(?:miopen)?[Gg]cnAsmConv|conv1x1[uv]|conv3x3|sp3AsmConv|MIOpenWinograd|"
                                r"MIOpenIm2d2Col|MIOpenIm3d2Col|MIOpenCol2Im)"), "gemm", "miopen", gemm.decode_conv,
         "MIOpen convolution kernels (`igemm_fwd_gtcx3_nhwc_*`, `naive_conv_*`, assembly Winograd, the hand-written "
         "GCN assembly `miopenGcnAsmConv7x7c3h224w224k64u2v2p3q3f1`/`miopenGcnAsmConv3x3WrW`, the OpenCL direct "
         "convolutions `MIOpenCvD3x3_WSR0`/`MIOpenCvBwdWrW`/`MIOpenCvFwd11x11`) and its helpers (`Im2d2Col`/`Col2Im`, "
         "`MIOpenSubsample` — the strided subsampling a 1x1 stride-2 weight-gradient convolution launches first): "
         "class gemm, op=conv, as for cuDNN."),
    Rule("gemm.cudnn_conv", _any(_w("scudnn", "hcudnn", "884cudnn", "1688cudnn", "16816cudnn", "cudnn_infer",
                                    "cudnn_train", "cutlass_cudnn", "_5x_cudnn", "cask_cudnn", "xmma_cudnn",
                                    "implicit_convolve", "explicit_convolve", "precomputed_convolve",
                                    "convolve_common_engine", "convolvend_", "dgrad_engine", "wgrad_alg",
                                    "dgrad2d_", "wgrad2d_", "dgrad_1x1", "winograd", "fft2d_", "fft_r2c", "fft_c2r",
                                    "fermipluscgemm", "pointwise_mult_and_sum_complex", "scalepackedtensor",
                                    "scaletensor_kernel", "2d_grouped_direct_kernel", "conv2d_grouped_direct",
                                    "im2col4d", "gcgemm", "strided_dgrad"),
                                 _all(_w("cudnn"), _w("conv", "gemm", "splitk")),
                                 _all(_w("cudnn"), _w("wgrad", "dgrad"), _id(r"wgrad|dgrad"))),
         "gemm", _ns_or("cudnn"), gemm.decode_conv,
         "cuDNN convolutions in every spelling: `*_scudnn_*` (also `cudnn_infer_`/`_5x_cudnn_` prefixed), "
         "`cutlass_cudnn{,_infer,_train}::Kernel<…{fprop,dgrad,wgrad}…>`, `implicit_convolve_sgemm`, "
         "`{dgrad,wgrad_alg0,wgrad_alg1}_engine`, `strided_dgrad_*` (strided data-gradient), Winograd/FFT "
         "kernels — and the helpers one convolution call "
         "launches (`cask_cudnn::computeOffsetsKernel`, `computeWgradSplitKOffsetsKernel`, "
         "`cudnn::ops::scalePackedTensor_kernel`, split-K reduces, and any cuDNN kernel whose own identifier says it "
         "computes a weight or data gradient: `cudnn::cnn::reduce_wgrad_nchw_helper` sums the split partial weight "
         "gradients and casts them to the weights' type). Convolutions are (implicit) GEMMs, so class "
         "gemm, op=conv; judgement call: the helpers are class gemm too, as the tail of cuBLAS split-K is — a "
         "convolution total that left them out would flatter the algorithms that need them. Layout transposes "
         "(`nchwToNhwcKernel`) are copies (rule copy) and batch norms are normalization."),
    Rule("cudnn.tensor_ops", _all(_w("cudnn"), _w("op_tensor", "optensor", "add_tensor", "addtensor", "activation_fw",
                                                "activation_bw")),
         "elementwise", _ns_or("cudnn"), None,
         "cuDNN's tensor arithmetic: `op_tensor_kernel<…cudnnOpTensorOp_t…>` (cudnnOpTensor: add/mul/min/max of two "
         "tensors, e.g. a bias add), `add_tensor_kernel` (cudnnAddTensor) and the activation kernels — one read and "
         "one write per element, class elementwise, as ATen's own."),
    Rule("gemm.cudnn_rnn", _r(r"^(?:void )?RNN_blockPersist_"), "gemm", "cudnn", gemm.decode_generic,
         "cuDNN's persistent RNN kernels (`RNN_blockPersist_fp_LSTM`, `RNN_blockPersist_fp_RNN_HMMA`, "
         "`RNN_blockPersist_bp_GRU`): the recurrent weights stay on chip and the time is the recurrent matmuls, "
         "so class gemm (the taxonomy has no RNN class); global namespace, cuDNN by the `RNN_blockPersist_` prefix."),
    Rule("cudnn.rnn_cell", _r(r"^(?:void )?elemWiseRNNcell"), "elementwise", "cudnn", None,
         "cuDNN's standard RNN path: `elemWiseRNNcell` applies the gate nonlinearities between the GEMMs cuBLAS "
         "runs — one read and one write per element, class elementwise."),
    Rule("gemm.cusparse", _all(_w("cusparse"), _w("csrmm", "csrmv", "spmm", "spmv", "sddmm", "spgemm", "bsrmm",
                                                   "bsrmv", "coomm", "coomv", "partition_kernel")),
         "gemm", _ns_or("cusparse"), gemm.decode_generic,
         "cuSPARSE's sparse matrix products (`cusparse::csrmm_alg2_kernel`, `csrmv`/`spmv`/`spmm`, SDDMM) and the "
         "merge-path `cusparse::partition_kernel` its SpMV/SpMM launch first. Judgement call: a sparse matmul is "
         "class gemm (what the time buys is a matrix product), its helper too, as cuBLAS's split-K reduce is."),
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
    Rule("gemm.tensile", _r(r"Cijk_A[a-z]{3}_B[a-z]{3}|^Cijk_[A-Za-z0-9_]{0,80}PostGSU\d"), "gemm",
         lambda ctx: "hipblaslt" if re.search(r"UserArgs|_SAV|_Bias|Custom_|PostGSU", ctx.name) else "rocblas",
         gemm.decode_tensile,
         "AMD Tensile GEMMs (`Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_...`). hipBLASLt and rocBLAS both "
         "ship Tensile kernels; `UserArgs`/`SAV`/`Bias` only occur in hipBLASLt's, so those are called hipblaslt. "
         "hipBLASLt's global-split-U post kernels (`Cijk_SS_BiasS_HAS_ScaleAlphaVec_PostGSU16_VW1`: sum the split "
         "partials, apply bias/alpha) carry no `A…_B…` layout and are the tail of one GEMM, as cuBLAS's split-K reduce: gemm."),
    Rule("gemm.cublas_aux", _any(Words(("gemv2N_kernel", "gemv2T_kernel", "gemvNSP", "gemv_kernel", "gemmSN_NN_kernel",
                                        "gemmSN_TN_kernel", "gemmSN_NT_kernel", "gemmSN_TT_kernel", "gemmk1_kernel",
                                        "gemmSN_kernel", "gemvx::kernel", "dot_kernel<", "splitKreduce_kernel",
                                        "cublasLt::", "cublas::", "scal_kernel", "axpy_kernel"), fold=False),
                                 _CUBLASLT_EPILOGUE,
                                 _all(_w("reduce_1block_kernel", "asum_kernel", "nrm2_kernel"), _w("cublas"))),
         "gemm", _gemm_library, gemm.decode_cublas_aux,
         "cuBLAS helper kernels: GEMV (`gemv2T_kernel_val`), small-N GEMM (`gemmSN_TN_kernel`), dot and its "
         "second-stage `reduce_1Block_kernel`, the split-K reduction `cublasLt::splitKreduce_kernel` and cuBLASLt's "
         "stand-alone epilogue `cublasLt::epilogue::impl::globalKernel` (CUDA <= 11 spells it "
         "`epilogue::impl::globalKernel<…>` outside the `cublasLt::` namespace; its `cublasLtEpilogue_t` "
         "parameter and `epilogue::impl` scope say whose "
         "it is: library cublasLt in both spellings). Judgement call: split-K's reduction and the "
         "epilogue are class gemm (decoded op=split_k_reduce / epilogue) — they are the tail of one GEMM call, and "
         "a GEMM-time total that left them out would flatter the algorithms that need them."),
    Rule("gemm.magma", _all(_w("magma"), _w("gemm", "gemv")), "gemm", "magma", gemm.decode_generic,
         "MAGMA's GEMMs (`magma_sgemmEx_kernel`, `magmablas_*gemm*`), which torch.linalg and some fp32 paths launch."),
    # ---- TensorRT Myelin: generated kernels named by the ops they fused ---------------------------------
    Rule("tensorrt.myelin_gemm", _Myelin("gemm"), "gemm", "tensorrt", misc.decode_myelin,
         "TensorRT's Myelin compiler names each generated kernel `__myl_` + the ops it fused, as abbreviated "
         "CamelCase words (`__myl_AddCastMulMeanAddSqrtDivMulCastMulCast`, `__myl_SiluMulMulCast`, `__myl_Fc_myl2_5`); "
         "the class is read from those words (tracekit.classify.misc.myelin_class), first match wins: a fully "
         "connected layer or matmul (`Fc`, `Gemm`, `MatMul`, `Bmm`, `Conv`) is gemm. Library tensorrt. Bare names "
         "launched with cuLaunchKernel, so these rules precede the Triton ones."),
    Rule("tensorrt.myelin_norm", _Myelin("normalization"), "normalization", "tensorrt", misc.decode_myelin,
         "Myelin normalization: a square root with a mean or a division (RMSNorm's `MeanAddSqrtDiv`, LayerNorm's "
         "`AddSqrtDivMul…` tail) or a `Norm` word — Myelin writes norms as their arithmetic, with no norm word."),
    Rule("tensorrt.myelin_reduction", _Myelin("reduction"), "reduction", "tensorrt", misc.decode_myelin,
         "Myelin reductions without a norm: `Mean`, `Sum`, `Maxr` (max-reduce), `Topk`; softmax "
         "(`MaxrSubExpSumDivMul`) included, as ATen's softmax is a reduction."),
    Rule("tensorrt.myelin_copy", _Myelin("copy"), "copy", "tensorrt", misc.decode_myelin,
         "Myelin kernels that only move data: `Resh`, `Tran`, `Slic`, `Conc`, `Repl`, `Move` and `Cast` "
         "(`__myl_TranReshMove`, `__myl_Cast`): copies and casts, as ATen's."),
    Rule("tensorrt.myelin_elementwise", _Myelin("elementwise"), "elementwise", "tensorrt", misc.decode_myelin,
         "Any other Myelin kernel: fused pointwise arithmetic (`__myl_SiluMulMulCast`, `__myl_MulCast`, "
         "`__myl_ReshTranDivCastErfCastAddMulMul` = GELU) — elementwise."),
    # ---- Inductor-generated Triton ----------------------------------------------------------------
    Rule("inductor", _INDUCTOR,
         "triton_fused", "inductor", inductor.decode_inductor,
         "torch.compile/Inductor kernels: `triton_{poi,red,per,tem}_fused_<ops>_<n>`; the ops are split "
         "with a vocabulary of ATen op names (greedy longest match)."),
    Rule("nvfuser.elementwise", _r(r"^nvfuser_pointwise"), "elementwise", "nvfuser", None,
         "nvFuser's generated kernels are named by the scheduler that made them (`nvfuser_pointwise_f0_c1_r0_g0`): "
         "a pointwise fusion is elementwise, as Inductor's `triton_poi_` would be read."),
    Rule("nvfuser.reduction", _r(r"^nvfuser_(?:reduction|inner_persistent|outer_persistent|inner_outer_persistent)"),
         "reduction", "nvfuser", None,
         "nvFuser reduction and persistent (normalization-style) schedulers: `nvfuser_reduction_…`, "
         "`nvfuser_inner_outer_persistent_…` — the fusion is built around a reduction."),
    Rule("gemm.triton", _all(_w("gemm", "gemv", "matmul", "bmm", "mm", "einsum", "fused_moe", "fmoe", "moe_stage"),
                              _r(r"^[A-Za-z_][A-Za-z0-9_]*$"),
                              _ri(r"gemm|gemv|matmul|einsum|(?<![a-z])bmm|(?<![a-z0-9])mm(?![a-z])|"
                                  r"(?<![a-z0-9])f(?:used_)?moe(?![a-z])|(?<![a-z])moe_stage[12](?![0-9])")),
         "gemm", _triton_or_ns, gemm.decode_generic,
         "GEMMs written in Triton or as bare-named cubins, by a GEMM word as a token of the name: `gemm`, `gemv`, "
         "`matmul`, `bmm`, `mm` (`_w8a8_triton_block_scaled_mm`, `_matmul_ogs_…`), `einsum` (a batched matmul), and "
         "the fused-MoE expert GEMM (vLLM/SGLang `fused_moe_kernel`, whose name carries no GEMM word; a MoE "
         "`moe_stage1`/`moe_stage2` kernel = the gate-up / down expert GEMM, as aiter's `fmoe_stage1`, e.g. Gluon's "
         "`gluon_mxfp4_moe_stage1_kernel`). Class gemm; "
         "library triton only with Triton evidence (launch API, a non-ATen launching op, a Python-private name). "
         "Precedes the triton_custom rules for the same reason attention does: the class says what the time buys."),
    Rule("gemm.causal_conv1d", _id(r"^causal_conv1d_"), "gemm", _ns_or("causal_conv1d"), gemm.decode_conv,
         "Dao-AILab causal-conv1d's CUDA kernels (`causal_conv1d_fwd_kernel`, `causal_conv1d_channellast_fwd_kernel`, "
         "`causal_conv1d_update_kernel`, their backward), the short depthwise convolution of Mamba blocks: a "
         "convolution, so class gemm, op=conv, as ATen's depthwise convolutions. The kernel's own identifier must "
         "start with the family name, so the Triton ports (`_causal_conv1d_update_kernel`, Python-private) stay "
         "triton_custom as hand-written Triton does."),
    Rule("gemm.aten_conv", _all(_w("im2col", "col2im", "vol2col", "col2vol", "depthwise", "slow_conv"),
                                _id(r"im2col|col2im|vol2col|col2vol|conv_depthwise|depthwise_?conv|slow_conv")),
         "gemm", _ns, gemm.decode_conv,
         "ATen's own convolutions and their helpers: `im2col`/`col2im`/`vol2col`/`col2vol` (the unfolding "
         "`slow_conv2d`, `slow_conv_dilated3d` and `slow_conv_transpose` do before and after a GEMM), and the direct "
         "depthwise convolutions `conv_depthwise2d_*`/`conv_depthwise3d_*` (forward, backward, grad-weight). "
         "Convention: a convolution and the helpers it launches are class gemm, op=conv, whatever the algorithm "
         "(as cuDNN's and MIOpen's `Im2d2Col`). After the Inductor rule: `triton_poi_fused_im2col_…` is Inductor's."),
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
    # ---- TorchScript's NNC fuser: NVRTC-compiled, launched with the driver API like Triton ------------
    Rule("nnc.fused", _NNC_FUSION, "elementwise", "nnc", nnc.decode_nnc,
         "TorchScript's NNC (TensorExpr) fusion groups: `fused_<op>_<op>…` with an optional decimal hash (NNC cuts "
         "names at 40 characters and appends one) and counter (`fused_mul_add`, `fused__to_copy_mul_add_1`, "
         "`fused_tanh_mul_div_mul_tanh_t_<hash>`). NNC compiles each group with NVRTC and launches it with "
         "cuLaunchKernel — the driver call Triton uses — so this rule precedes the Triton launch-API rule, and a "
         "runtime-API launch (`cudaLaunchKernel`) rules it out. Every op word must be an ATen op NNC fuses "
         "(tracekit.classify.nnc.NNC_OPS), which keeps hand-written Triton such as "
         "`fused_recurrent_gated_delta_rule_fwd_kernel` out. Class elementwise (NNC fuses element-wise ops, casts "
         "and views on the GPU), library nnc; the ops are decoded."),
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
    Rule("triton_custom.by_name", _all(_w("triton", "gluon"), _r(r"^[A-Za-z_][A-Za-z0-9_]*$")), "triton_custom",
         "triton", misc.decode_triton_custom,
         "LOWER CONFIDENCE, as name_shape: a bare identifier whose own words say `triton` or `gluon` "
         "(SGLang's `apply_rotary_emb_triton_kernel`, `_set_k_and_s_triton_kernel`): hand-written Triton (or Gluon, "
         "its lower-level dialect with the same launcher) that chose to say so. Never when the runtime API launched "
         "it. Before the serving-engine rules: a Triton rotary kernel stays triton_custom.",
         when=lambda ctx: _TRITON_WORD.search(ctx.name) is not None and _maybe_triton(ctx)),
    # ---- serving-engine custom ops -----------------------------------------------------------------
    Rule("custom_op.kv_cache", _KV_CACHE,
         "copy", _ns, aten.decode_aten,
         "KV-cache writes and gathers of serving engines (vLLM `reshape_and_cache_flash_kernel`, "
         "`concat_and_cache_mla_kernel`, `gather_and_maybe_dequant_cache`, TensorRT-LLM cache updates, vLLM's "
         "CuTe-DSL `…dequant_gather_k…DequantGatherKCache` for DeepSeek's fp8 cache): data movement into or out of "
         "the paged cache, class copy — dequantising on the way, as `gather_and_maybe_dequant_cache` does, does not "
         "make it a quantisation kernel. Written in Triton and launched as such, they stay triton_custom (rules "
         "above)."),
    Rule("custom_op.rotary", _ROTARY,
         "elementwise", _ns, aten.decode_aten,
         "Rotary position embedding kernels (vLLM `rotary_embedding_kernel`, fused QK-norm+RoPE+cache-insert ops): "
         "elementwise arithmetic on Q/K."),
    # ---- MoE token permutation and combine ------------------------------------------------------------
    Rule("moe.permute", _all(_w("expand", "permute"),
                             _id(r"^(?:moe_)?expand_?(?:to_?fused|input_?rows)|^moe_?permute(?!_?(?:idx|index))")),
         "copy", _ns, aten.decode_aten,
         "MoE token permutation, read from the kernel's own identifier: rows gathered (and replicated per chosen "
         "expert) into expert-contiguous order before the grouped expert GEMM — DeepSeek's `cuda::expand_to_fused` / "
         "`expand_to_fused_with_scales_impl` (scales travel with the fp8 rows), TensorRT-LLM's `expandInputRowsKernel` "
         "(also vLLM's copy of it), `moe_permute`. Class copy: pure data movement, as a gather into a new layout."),
    Rule("moe.combine", _all(_w("reduce_fused", "sum_gate"),
                             _id(r"^(?:moe_)?reduce_?fused|^top\d+_sum_gate")),
         "reduction", _ns, aten.decode_aten,
         "MoE combine and gating in DeepSeek's kernels, by the kernel's own identifier: `cuda::reduce_fused_impl` "
         "sums each token's expert outputs weighted by its gate scores (as TensorRT-LLM's `finalizeMoeRoutingKernel` "
         "and vLLM's `moe_sum`, both class reduction), `cuda::top2_sum_gate` picks each token's experts by a top-k "
         "over summed group scores (top-k is a reduction, as `customMoeRoutingKernel`). The routing bookkeeping "
         "between them (`get_fused_mapping`, `clean_and_count_expert`, vLLM's `moe_align_block_size`) stays other."),
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
                       "adaptiveavg", "adaptive_max", "adaptive_avg", "adaptive_average", "maxunpool", "lppool"),
         "reduction", _ns, aten.decode_aten,
         "Pooling, forward and backward (`max_pool_forward_nchw`, `adaptive_avg_pool2d`, ATen's "
         "`adaptive_average_pool`/`adaptive_max_pool`, `max_pool_backward_nchw`). "
         "Judgement call: class reduction — each output reduces a window (max or mean), and the backward "
         "accumulates every window's gradient into overlapping inputs."),
    Rule("upsampling.backward", _all(_w("upsample", "upample", "grid_sampler", "interpolat", "resize"), _w("backward")),
         "reduction", _ns, aten.decode_aten,
         "Upsampling / grid-sample backward: accumulates the gradients of many outputs into each input (atomic "
         "adds) — class reduction, like embedding backward."),
    Rule("upsampling", _w("upsample", "upample", "grid_sampler", "interpolat", "resize_kernel", "resize_bilinear",
                          "resize_nearest", "resizenearest", "resizebilinear", "resizecubic", "resizetrilinear"),
         "elementwise", _ns, aten.decode_aten,
         "Upsampling and grid sampling forward (`upsample_bilinear2d_out_frame`, `upsample_nearest2d_nhwc_out_frame`, "
         "ONNX Runtime's `_UpampleNearestKernel` / `_ResizeBilinearKernel` — its sources spell `Upample`): each "
         "output "
         "reads a few inputs and writes once — a gather with interpolation, class elementwise."),
    # ---- ATen and friends by semantic family ----------------------------------------------------------
    Rule("reduction.welford", _all(_w("reduce_kernel"), _w("welfordops")), "reduction", _ns, aten.decode_aten,
         "ATen's generic `reduce_kernel<…ReduceOp<…WelfordOps<…>>>`: the Welford mean/variance reduction behind "
         "`var`, `std`, `var_mean` (and the old norm-statistics path). Convention: a reduce_kernel is a reduction "
         "whatever its functor; only a kernel that is itself a norm (`welford_kernel` of batch norm, "
         "`RowwiseMoments`) is normalization. Before the normalization rule, which reads `welford`."),
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
    Rule("eigen.gemm", _w("eigencontractionkernel", "eigenconvolutionkernel"), "gemm", _ns_or("eigen"),
         gemm.decode_generic,
         "Eigen's GPU tensor contractions and convolutions (TensorFlow without cuBLAS/cuDNN): "
         "`EigenContractionKernel`."),
    Rule("eigen.reduction", _w("fullreductionkernel", "innerreductionkernel", "outerreductionkernel",
                               "reductioninitkernel", "tensorreductionop", "rowreducekernel", "columnreducekernel",
                               "blockreducekernel"),
         "reduction", _ns_or("eigen"), None,
         "Eigen/TensorFlow reductions: `Eigen::internal::FullReductionKernel`, `InnerReductionKernel`, "
         "`OuterReductionKernel`, an `EigenMetaKernel` whose expression holds a `TensorReductionOp`, and "
         "TensorFlow's own `tensorflow::functor::{Row,Column,Block}ReduceKernel` (library by namespace)."),
    Rule("eigen.elementwise", _w("eigenmetakernel"), "elementwise", _ns_or("eigen"), None,
         "`Eigen::internal::EigenMetaKernel<TensorEvaluator<TensorAssignOp<…>>>`: TensorFlow's generic kernel that "
         "evaluates one Eigen tensor expression per element (casts, arithmetic, broadcasts) — class elementwise, "
         "library eigen."),
    Rule("padding.backward", _all(_PADDING, _w("backward", "bwd", "grad")),
         "reduction", _ns, aten.decode_aten,
         "Padding backward (`reflection_pad2d_backward_out_kernel`, `replication_pad_backward_kernel`): each border "
         "input accumulates the gradients of the outputs that replicated or reflected it (atomic adds) — class "
         "reduction, like upsampling and embedding backward."),
    Rule("padding", _PADDING, "copy", _ns, aten.decode_aten,
         "Padding forward, in every spelling of the kernel's own name: ATen `reflection_pad{1,2,3}d_out_kernel`, "
         "`replication_pad_forward_kernel{1,2,3}d`, `constant_pad`/`circular_pad`, `*_pad_*_kernel`, unpadding "
         "(`remove_pad`, `unpad_*`) and cuDNN's `nchwAddPaddingToNhwc`. Convention: class copy — each output is one "
         "input element or a constant, nothing is computed (pure data movement, as a layout transpose)."),
    Rule("reduction.scatter_add", _any(_w("indexfuncsmallindex", "indexfunclargeindex", "index_add", "scatter_add",
                                          "index_reduce", "scatter_reduce", "indexadd", "scatteradd"),
                                       _all(_w("scatter_gather"), _w("reduceadd", "reducemultiply", "reducemean",
                                                                     "reducemaximum", "reduceminimum"))),
         "reduction", _ns, aten.decode_aten,
         "Scatter-add and index-add: ATen's `indexFuncSmallIndex`/`indexFuncLargeIndex` (the kernels of index_add_ "
         "and index_reduce_, functor `ReduceAdd`/`ReduceMultiply`/`ReduceMean`/`ReduceMaximum`/`ReduceMinimum`), "
         "`_scatter_gather_elementwise_kernel` with a `Reduce*` functor (scatter_add_, scatter_reduce_), other "
         "`index_add`/`scatter_add` kernels. Convention: class reduction — many source rows accumulate into each "
         "destination (atomic adds), as embedding backward; a plain scatter or gather (`TensorAssign`) stays "
         "elementwise."),
    Rule("reduction", _w("reduce_kernel", "softmax_warp_", "softmax", "cunn_classnll", "nll_loss", "devicereduce",
                         "devicesegmentedreduce", "devicescan", "scan_kernel", "tensor_kernel_scan", "embedding_backward",
                         "compute_grad_weight", "sum_and_scatter", "krn_partial", "partial_segments", "renorm_kernel",
                         "_norm_kernel", "cross_entropy", "reduce_1block", "kernelreduce", "aminmax", "topk", "argmax",
                         "argmin", "cumsum", "logsumexp", "gatingsoftmax", "moe_sum", "samplingfromprob", "sampling::",
                         "renormprob", "renorm_prob", "embeddingbag", "embedding_bag", "embedding_dense_backward",
                         "scanagent", "prefixsum", "prefix_sum", "moerouting",
                         "embeddingbackward", "embedding_bwd", "embedding_grad", "embeddinggrad"),
         "reduction", _ns, aten.decode_aten,
         "Reductions: ATen `reduce_kernel<...ReduceOp<...>>`, softmax (`softmax_warp_forward`, "
         "`cunn_SoftMaxForward`), losses, scans, top-k and token sampling from probabilities (FlashInfer "
         "`TopPSamplingFromProbKernel`: scans and reductions over the vocabulary). Losses, forward and backward, stay "
         "with ATen's NLL kernels (`nll_loss_backward_reduce_cuda_kernel_2d`, the legacy "
         "`cunn_ClassNLLCriterion_updateGradInput_kernel` alike). Scans are reductions (each output "
         "reduces a prefix): ATen's `tensor_kernel_scan_*`, CUB's `DeviceScan*`, thrust's `__scan::ScanAgent`, MoE "
         "prefix sums (TensorRT-LLM `blockExpertPrefixSumKernel`); so is MoE routing (`customMoeRoutingKernel`: "
         "top-k with renormalisation; `finalizeMoeRoutingKernel`: the weighted combine of expert outputs). "
         "Judgement call: embedding *backward* (`embedding_backward_*`, "
         "`compute_grad_weight`) is a reduction — it sums gradient rows per index; so is ATen's pooled "
         "`EmbeddingBag_updateOutputKernel_*` (each output sums or maxes its bag), as FBGEMM's pooled forward."),
    Rule("copy", _w("copy_kernel", "_copy_", "catarraybatchedcopy", "copy_device_to_device", "batched_copy",
                    "direct_copy", "transpose_kernel", "transpose_readwrite", "permute_kernel", "permute_2d", "permute",
                    "chunk_cat",
                    "contiguous_kernel", "nchwtonhwc", "nhwctonchw", "copyblocks", "transpose"),
         "copy", _ns, aten.decode_aten,
         "Copies and dtype casts done by kernels (`direct_copy_kernel_cuda`, `bfloat16_copy_kernel_cuda`, "
         "`CatArrayBatchedCopy`, `chunk_cat_cuda_kernel` = torch._chunk_cat, FSDP2's packing; MoE token "
         "permutation has its own rule, moe.permute), transposes/permutes "
         "(cuBLAS `transpose_readWrite_alignment_kernel`, FBGEMM "
         "`permute_2D_data_kernel`, cuDNN `nchwToNhwcKernel` and `cubeTransposeDeviceGeneric_kernel`, any kernel that "
         "says `transpose` and reached this rule) — memory-bound data movement, distinct from copy-engine memcpy."),
    Rule("elementwise", _w("elementwise_kernel", "elementwisekernel", "multi_tensor_apply", "fillfunctor",
                           "index_elementwise", "indexselect", "index_select", "embedding", "gather",
                           "distribution_elementwise", "fused_dropout",
                           "dropout", "where_kernel", "launch_clamp", "masked_fill", "scatter_gather", "_scatter_",
                           "index_put", "indexing_backward", "vectorized_", "unrolled_", "gpu_kernel", "functor",
                           "triu_tril", "act_and_mul", "silu_and_mul", "gelu_and_mul", "silu_mul", "swiglu",
                           "kernelpointwiseapply"),
         "elementwise", _ns, aten.decode_aten,
         "ATen TensorIterator kernels (`vectorized_elementwise_kernel<8, ...GeluCUDAKernelImpl...>`; the legacy THC "
         "`kernelPointwiseApply{1,2,3}<TensorFillOp…>` too: a fill written as a kernel is elementwise), foreach/"
         "fused optimizers (`multi_tensor_apply_kernel<...FusedAdamMathFunctor...>`, apex/TE's own), gathers/"
         "scatters and fused activations (`act_and_mul_kernel`). Judgement call: embedding *forward* "
         "(`indexSelectLargeIndex`, any `*embedding*` lookup such as `embeddingLookupKernel`) and every gather "
         "(`vectorized_gather_kernel`, any `*gather*` that is not a KV-cache gather or a collective, both matched "
         "above) are elementwise — one read and one write per element, nothing accumulated."),
    Rule("rng.curand", _r(r"^(?:void )?(?:generate_seed_pseudo|gen_sequenced)"), "elementwise", "curand", None,
         "cuRAND's host-API generator kernels: `generate_seed_pseudo` (per-thread state set-up, XORWOW/Philox) and "
         "`gen_sequenced<…>` (generation): random numbers are elementwise, as ATen's RNG kernels are."),
    Rule("gemm.grouped_setup", _w("computestridestmawarpspecialized"), "gemm", _ns, gemm.decode_generic,
         "TensorRT-LLM's MoE grouped-GEMM set-up (`computeStridesTmaWarpSpecializedKernel`, its `LowLatency` "
         "variant): computes the per-expert strides and pointers the grouped GEMM reads, launched by the MoE GEMM "
         "runner — class gemm, as cuBLAS's split-K reduce is (a helper of one GEMM call)."),
    Rule("gemm.generic", _all(_w("gemm", "gemv", "matmul", "_mm_", "bmm", "marlin", "mul_mat", "moe_q", "einsum", "fmoe",
                                 "wvsplitk", "wv_splitk", "fused_moe", "w4a16", "w4a8", "w8a8"),
                              _ri(r"(?<!fb)gemm|gemv|matmul|_mm_|bmm|marlin|mul_mat|(?<![a-z])moe_q\d|einsum|"
                                  r"(?<![a-z0-9])fmoe(?![a-z])|wv_?splitk|(?<![a-z0-9])fused_moe(?![a-z])|"
                                  r"w4a16|w4a8|w8a8")),
         "gemm", _ns, gemm.decode_generic,
         "Anything else that says it multiplies matrices (custom CUDA, DeepGEMM, Marlin, ggml-style quantised "
         "`mul_mat_q*` / `moe_q*`, aiter's assembly fused-MoE expert GEMMs `aiter::fmoe_*` (`fmoe_stage1_…`, "
         "`fmoe_bf16_…_g1u1_…`), vLLM's ROCm skinny GEMMs `wvSplitK*`/`wvSplitKQ*` (weight-stationary split-K GEMV "
         "for small batches), `einsum` kernels, TensorRT-LLM's `fused_moe::Fused_Moe_Kernel_sm80` "
         "(the MoE expert GEMM, whose namespace says fused_moe), kernels named by their weight/activation "
         "precisions `w4a16`/`w4a8`/`w8a8` (a quantised GEMM's signature: b12x's "
         "`…W4A16MixedTrellisKernel`; quantisation kernels and MoE top-k sums are taken by rules above), unknown "
         "vendors). "
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
    name: str, *, kind: str = "kernel", launch_api: str | None = None, cpu_op: str | None = None,
    vendor: str | None = None, found: tuple[frozenset[str], frozenset[str]] | None = None,
) -> KernelInfo:
    """Classify one GPU activity. Total and pure: never raises; result class is in :data:`CLASSES`.

    ``kind`` is the activity category ("kernel", "memcpy", "memset"; Kineto's ``gpu_memcpy`` /
    ``gpu_memset`` spellings are accepted too; any other kind, such as the gpu frame's ``annotation`` and
    ``sync``, is class ``other`` by rule ``not_a_kernel``, whatever its name). ``launch_api`` is the runtime/driver call that launched
    it (``cuLaunchKernelEx``...), ``cpu_op`` the innermost CPU op around that call; both are optional
    evidence used to tell hand-written Triton apart (and RCCL from NCCL). ``vendor`` is the trace's device vendor
    (:attr:`tracekit.trace.TraceMeta.vendor`); optional, it decides the library of kernels whose name several
    vendors' libraries share (``ncclDevKernel_*`` is RCCL's on ``"amd"``), whatever launched them.

    ``found`` is for a caller classifying many names at once (:func:`tracekit.classify.classify_frame`):
    the words of :func:`table_words` that :func:`rule_input` of this name holds, those of the
    lower-cased text first, as one scan of all the names found them; the table's substring tests
    then look them up instead of each reading the whole name. Given, it must be exactly those words:
    the answer is the same as without it.
    """
    return _classify(
        name if isinstance(name, str) else str(name),
        _normal_kind(kind),
        launch_api if isinstance(launch_api, str) and launch_api else None,
        cpu_op if isinstance(cpu_op, str) and cpu_op else None,
        vendor if isinstance(vendor, str) and vendor else None,
        found,
    )


def _rule_input(name: str, kind: str) -> str:
    """The text the rules read for ``name`` of (normalised) ``kind``."""
    # Kineto sometimes pads names, rocprof appends `.kd`, XLA/CK traces keep mangled symbols:
    # classification reads the normalised text; the caller keeps the original name as identity.
    # Rules and decoders read at most RULE_WINDOW characters: what decides a family is in a name's head
    # (namespace, template, first arguments), and the bound keeps a crafted 300,000-character name to a few
    # milliseconds. Identity is never cut: callers key on the full original name.
    return (rule_text(name) if kind == "kernel" else name.strip())[:RULE_WINDOW]


def rule_input(name: str, kind: str | None = "kernel") -> str:
    """The text the rules read for ``name`` of activity ``kind`` (the one :func:`classify_kernel`
    matches its rules against): what a caller scanning for :func:`table_words` must scan."""
    return _rule_input(name if isinstance(name, str) else str(name), _normal_kind(kind))


def table_words() -> tuple[list[str], list[str]]:
    """Every word the table's :class:`Words` tests look for: those sought in the lower-cased text,
    then those sought as written; each list sorted."""
    return sorted(_TABLE_WORDS[0]), sorted(_TABLE_WORDS[1])


@lru_cache(maxsize=65536)
def _classify(name: str, kind: str, launch_api: str | None, cpu_op: str | None,
              vendor: str | None = None, found: tuple[frozenset[str], frozenset[str]] | None = None) -> KernelInfo:
    text = _rule_input(name, kind)
    ctx = Context(text, text.lower(), kind, launch_api, cpu_op, vendor, found)
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
