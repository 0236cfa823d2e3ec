"""Kernel families whose members were spelt in more than one way, each test one family: every spelling reaches the
family's class, and look-alike names outside the family do not.

Positive names are real (their rows, with sources, are in tests/data/real_kernel_names.json, marked ``family``);
the negatives are real names of other families that share a word with this one, or a name built to probe the
rule's boundary (said so where it is).
"""

from __future__ import annotations

import json
from pathlib import Path

from tracekit.classify import classify_kernel

_TABLE = json.loads((Path(__file__).parents[1] / "data" / "real_kernel_names.json").read_text())["cases"]


def _family(name: str) -> list[dict]:
    rows = [r for r in _TABLE if r.get("family") == name]
    assert rows, name
    return rows


def _got(name: str, **kw: str | None) -> tuple[str, str, str]:
    info = classify_kernel(name, **kw)
    return info.kernel_class, info.library, info.rule


def test_expert_parallel_all_to_all_under_any_namespace() -> None:
    """Family: expert-parallel all-to-all (DeepEP dispatch/combine/notify in `deep_ep::`, DeepSeek's `dpsk::ep::`,
    Primus-Turbo's port; MORI's `Ep*Kernel`) is communication whatever the namespace."""
    rows = _family("expert-parallel all-to-all (EP dispatch/combine/notify, any namespace)")
    assert {r["name"].split("::")[0] for r in rows} >= {"void dpsk", "void deep_ep", "void mori"}
    for row in rows:
        assert _got(row["name"])[:2] == ("communication", row["library"]), row["name"][:70]
        assert _got(row["name"])[2] == "collective.expert_parallel", row["name"][:70]
    # the whole DeepSeek set of the DualPipe/prefill traces, by kernel identifier
    dpsk = {r["name"].split("<")[0].removeprefix("void ") for r in rows if "dpsk::ep::internode::" in r["name"]}
    assert dpsk == {f"dpsk::ep::internode::{k}" for k in
                    ("notify_dispatch", "dispatch", "cached_notify", "combine", "dispatch_ll", "combine_ll")}
    # Look-alikes that are not EP traffic. Real: DeepSeek's traces hold CUB scan kernels in a `cdpsk::ep::CUB_…`
    # namespace (per a public walkthrough of deepseek-ai/profile-data; template arguments shortened here);
    # FlashAttention's split-KV combine; CUB's `Dispatch…` policy in a template argument (real, from the DLRM
    # trace). Built: a kernel called `combine` outside any EP namespace.
    assert _got("void cdpsk::ep::CUB_200200_900_NS::cub::DeviceScanKernel<int>(int)")[0] == "reduction"
    assert _got("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
                "false, cutlass::bfloat16_t>, 4, 3, true>(Flash_fwd_params)")[0] == "attention"
    cub = ("void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*, cub::ConstantInputIterator<int, "
           "int>, int*, int*, cub::Equality, cub::Sum, int>::PtxReduceByKeyPolicy, long*, long*>(long*)")
    assert _got(cub)[0] == "reduction"
    assert _got("void combine<float>(float*, float const*, int)")[0] == "other"


def test_expert_parallel_layout_is_local_bookkeeping() -> None:
    """Family: DeepEP's layout kernel counts tokens per rank/expert on the local GPU: class other in every namespace
    it has been declared in (an early `deep_ep::internode::` one included), never communication."""
    rows = _family("expert-parallel layout (local MoE routing bookkeeping)")
    assert len(rows) == 2
    for row in rows:
        assert _got(row["name"]) == ("other", "deep_ep", "moe.dispatch_layout"), row["name"][:70]
    # today's spelling, from DeepEP's csrc/kernels/api.cuh (namespace deep_ep::layout; parameters shortened)
    assert _got("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)") == \
        ("other", "deep_ep", "moe.dispatch_layout")


def test_cublaslt_standalone_epilogue_in_both_spellings() -> None:
    """Family: cuBLASLt's stand-alone epilogue (bias/activation pass after a GEMM that could not fuse it) is class
    gemm, op=epilogue, library cublasLt, whether CUPTI writes it in the `cublasLt::` namespace (CUDA 12, real, from
    the A100 kernel map the table cites) or in the CUDA <= 11 spelling `epilogue::impl::globalKernel<…,
    cublasLtEpilogue_t, …>` (built: the same instantiation without the namespace, as cuBLASLt 11 declared it)."""
    params = "(int, int, long, float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, int*)"
    new = "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>" + params
    old = "void epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>" + params
    for name in (new, old):
        info = classify_kernel(name)
        assert (info.kernel_class, info.library, info.rule) == ("gemm", "cublasLt", "gemm.cublas_aux"), name
        assert dict(info.decoded) == {"op": "epilogue"}
    # Not the family: a `globalKernel` of another library's `epilogue::impl` without cuBLASLt's epilogue type
    # (built), and a cuBLAS kernel that merely takes a cublasLtEpilogue_t stays cuBLAS's (library by namespace).
    assert _got("void epilogue::impl::globalKernel<8, 32, float>(int, float*)")[0] == "other"
    assert _got("void cublas::gemvx::kernel<int, int, float, float, float, float, false, true, true, false, 7, false, "
                "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
                "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >("
                "cublasLtEpilogue_t)")[:2] == ("gemm", "cublas")


def test_sageattention_triton_forward_is_attention() -> None:
    """Family: SageAttention — its Triton forward `sage_fwd` and variants (aiter's ports) are attention, not
    triton_custom; library triton with Triton's launcher, sageattention without launch evidence; its quantisation
    kernels stay outside the family."""
    for row in _family("SageAttention (quantised attention: CUDA qk_int*_sv_* kernels, Triton sage_fwd variants, "
                       "SageAttention's _attn_fwd)"):
        got = _got(row["name"], launch_api=row["launch_api"])
        assert got[:2] == (row["kernel_class"], row["library"]), row["name"]
    # the other variants aiter ships (function names of its fav3_sage_attention modules), launched on ROCm
    for name in ("sage_fwd_v3", "sage_fwd_vfa", "sage_fwd_mxfp4_mixed"):
        assert _got(name, launch_api="hipModuleLaunchKernel") == ("attention", "triton", "attention.sage"), name
    # the CUDA kernels of SageAttention 2 (built from its qk_int_sv_f8 kernel template name), and a listing that
    # gives no launch API: library sageattention
    assert _got("void qk_int_sv_f8_attn_kernel<128u, 64u, 16u, 32u, 128u>(signed char*, signed char*)")[:2] == \
        ("attention", "sageattention")
    assert _got("sage_fwd")[:2] == ("attention", "sageattention")
    # not the family: aiter's quantisation kernel for it, and a name that only contains `sage_fwd` (built)
    assert _got("sage_quant_kernel", launch_api="hipModuleLaunchKernel")[0] == "triton_custom"
    assert _got("message_fwd_kernel", launch_api="cuLaunchKernel")[0] == "triton_custom"


def test_cudnn_weight_gradient_helpers_are_the_convolution() -> None:
    """Family: the helpers one cuDNN convolution call launches are class gemm, op=conv, as the convolution —
    `cudnn::cnn::reduce_wgrad_*` (the weight gradient's split-K sum and cast) with the split-K offset kernels."""
    for row in _family("cuDNN convolution helpers (weight/data-gradient kernels a convolution call launches)"):
        info = classify_kernel(row["name"])
        assert (info.kernel_class, info.library, info.rule) == ("gemm", "cudnn", "gemm.cudnn_conv"), row["name"]
        assert info.decoded["op"] == "conv"
    # the whole name as cuDNN declares the helper (parameters shortened) and its channels-last sibling (built)
    for name in ("void cudnn::cnn::reduce_wgrad_nchw_helper<float, __half>(int, int, int, float const*, __half*)",
                 "void cudnn::cnn::reduce_wgrad_nhwc_helper<float, __nv_bfloat16>(int, int, float const*)"):
        assert _got(name) == ("gemm", "cudnn", "gemm.cudnn_conv"), name
    # not the family: cuDNN's batch norm (real, same table) and a `wgrad` word outside cuDNN (a Triton split-K sum
    # of a custom convolution's weight gradient, built) — the helper must be cuDNN's own
    assert _got("void cudnn::bn_fw_tr_1C11_singleread<__half, 512, true, 1, 2, 0>(cudnnTensorStruct, __half const*)"
                )[0] == "normalization"
    assert _got("void reduce_wgrad<float>(float const*, float*, int)")[0] != "gemm"


def test_moe_permute_and_combine_kernels() -> None:
    """Family: MoE token permutation (copy) and combine (reduction) in every spelling — DeepSeek's `cuda::` kernels,
    TensorRT-LLM's `expandInputRowsKernel`/`finalizeMoeRoutingKernel`; the routing bookkeeping between them is
    other."""
    for row in _family("MoE token permutation and combine (DeepSeek cuda:: kernels, TensorRT-LLM, vLLM)"):
        assert _got(row["name"])[:2] == (row["kernel_class"], row["library"]), row["name"][:70]
    # the real TensorRT-LLM permutation rows of the table keep their class, now by the family's rule
    trt = [r for r in _TABLE if "expandInputRowsKernel" in r["name"]]
    assert trt and all(_got(r["name"]) == ("copy", "trtllm", "moe.permute") for r in trt)
    # not the family: the mapping and counting kernels around it (real, same walkthrough), and an Inductor kernel
    # that fuses a reduction (real, from the nano-vllm trace)
    assert _got("cuda::clean_and_count_expert<512>")[0] == "other"
    assert _got("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0")[0] == "triton_fused"


def test_fp8_quantisation_in_generic_cuda_namespaces() -> None:
    """Family: fp8 (de)quantisation kernels declared in a generic `cuda::` namespace (DeepSeek's own builds) are
    elementwise like vLLM's and SGLang's quantisation kernels; the namespace names no library."""
    for row in _family("fp8 (de)quantisation in generic cuda:: namespaces"):
        assert _got(row["name"])[:2] == ("elementwise", "unknown"), row["name"][:70]
    # the serving engines' spellings of the same family (real kernel names of the table's sources and vLLM's
    # dynamic_scaled_fp8_quant_kernel as its source instantiates it)
    assert _got("void per_token_group_quant_8bit_kernel<__nv_bfloat16, c10::Float8_e4m3fn, false>(__nv_bfloat16 "
                "const*, void*, float*, int, int, int, float, float, float, int, int)")[:2] == ("elementwise", "unknown")
    assert _got("void vllm::dynamic_scaled_fp8_quant_kernel<c10::BFloat16, __nv_fp8_e4m3>(__nv_fp8_e4m3*, "
                "c10::BFloat16 const*, float*, long)")[:2] == ("elementwise", "vllm")


def test_torchscript_nnc_fusion_groups_are_not_triton() -> None:
    """Family: TorchScript's NNC (TensorExpr) fusion groups. NNC names each CUDA kernel `fused` + `_<aten op>` per
    node, cut to 40 characters with `_<decimal hash>` appended, plus `_<n>` when the name is taken
    (subgraph_utils.cpp generateNameForGraph/truncateStrWithHash, cuda_codegen GetUniqueFuncName), compiles it with
    NVRTC and launches it with cuLaunchKernel — Triton's launch API. Names built by those rules (no public trace
    of an NNC GPU kernel was found to copy from)."""
    short = _got("fused_mul_add", launch_api="cuLaunchKernel")
    assert short == ("elementwise", "nnc", "nnc.fused")
    info = classify_kernel("fused__to_copy_mul_add_1", launch_api="cuLaunchKernel")
    assert dict(info.decoded) == {"fuser": "nnc", "fused_ops": ["_to_copy", "mul", "add"]}
    # 42 characters before the cut: `fused_tanh_mul_div_mul_tanh_tanh_tanh_tanh` becomes its first 19 characters
    # (ending in `_`) + `_` + a 20-digit hash
    cut = "fused_tanh_mul_div__" + "12345678901234567890"
    info = classify_kernel(cut, launch_api="cuLaunchKernel")
    assert (info.kernel_class, info.library) == ("elementwise", "nnc")
    assert dict(info.decoded) == {"fuser": "nnc", "fused_ops": ["tanh", "mul", "div"], "hash": "12345678901234567890"}
    # a CUDA-graph replay or a listing gives no launch API: the name alone decides; a runtime-API launch is
    # not NVRTC's
    assert _got("fused_mul_add")[:2] == ("elementwise", "nnc")
    assert _got("fused_mul_add", launch_api="cudaLaunchKernel")[0] == "other"
    # not the family: hand-written Triton that chose a `fused_` name (real, from the table and the GB10 trace),
    # and a C++ kernel called fused_mul_add (built: CUPTI writes its signature)
    for row in _TABLE:
        if row["name"].startswith("fused_") and row["kernel_class"] == "triton_custom":
            assert _got(row["name"], launch_api=row["launch_api"])[0] == "triton_custom", row["name"]
    assert _got("fused_recurrent_gated_delta_rule_packed_decode_kernel", launch_api="cuLaunchKernel")[0] == \
        "triton_custom"
    assert _got("void fused_mul_add<float>(float*, float const*, float const*, int)")[1] != "nnc"


def test_aten_native_mha_qkv_transform_is_attention() -> None:
    """Family: ATen's native multi-head attention (`aten::_native_multi_head_attention`,
    `aten::_transform_bias_rescale_qkv`) launches `transform_bias_rescale_qkv_kernel` and, for nested (padded)
    inputs, `transform_bias_rescale_qkv_add_padding_kernel`: attention, library aten, not other and not padding.
    Names built from the kernels' declarations in aten/src/ATen/native/transformers/cuda/attention.cu
    (anonymous namespace of at::native, templates <scalar_t, accscalar_t, assume_aligned>), as CUPTI writes them."""
    acc = "at::GenericPackedTensorAccessor<{t}, {d}ul, at::RestrictPtrTraits, long>"
    plain = ("void at::native::(anonymous namespace)::transform_bias_rescale_qkv_kernel<float, float, true>("
             f"{acc.format(t='float', d=3)}, {acc.format(t='float', d=1)}, {acc.format(t='float', d=5)}, float)")
    padded = ("void at::native::(anonymous namespace)::transform_bias_rescale_qkv_add_padding_kernel<c10::Half, float, "
              f"true>({acc.format(t='c10::Half', d=1)}, {acc.format(t='c10::Half', d=1)}, int const*, int const*, "
              f"{acc.format(t='c10::Half', d=5)}, float)")
    for name in (plain, padded):
        assert _got(name) == ("attention", "aten", "attention.other"), name[:80]
    # not the family: ATen's own padding kernels stay copies (real, heldout2's family rows)
    assert _got("void at::native::(anonymous namespace)::reflection_pad2d_out_kernel<float>(float const*, float*, "
                "long, long, long, long, long, long)")[0] == "copy"


def test_nccl_named_kernels_on_amd_traces_are_rccl() -> None:
    """Family: NCCL-named collectives on ROCm (RCCL keeps NCCL's kernel names). The trace's vendor decides, so a
    kernel launched before profiling began (no launch API) and its hipExtLaunchKernel twin get one library."""
    name = "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"  # the name test_classify's ROCm row uses
    assert _got(name, vendor="amd")[:2] == ("communication", "rccl")
    assert _got(name, launch_api="hipExtLaunchKernel", vendor="amd")[:2] == ("communication", "rccl")
    assert _got(name, launch_api="hipExtLaunchKernel")[:2] == ("communication", "rccl")  # vendor unknown: the API
    assert _got(name, vendor="nvidia")[:2] == ("communication", "nccl")
    assert _got(name)[:2] == ("communication", "nccl")
    # the vendor changes no class and no other library (real names of the table)
    for row in _TABLE[:200]:
        plain = classify_kernel(row["name"], kind=row["kind"], launch_api=row["launch_api"])
        amd = classify_kernel(row["name"], kind=row["kind"], launch_api=row["launch_api"], vendor="amd")
        assert plain.kernel_class == amd.kernel_class, row["name"][:60]
        assert plain.library == amd.library or (plain.library, amd.library) == ("nccl", "rccl"), row["name"][:60]
