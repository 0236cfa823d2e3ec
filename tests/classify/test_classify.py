"""Kernel taxonomy: a table of real kernel names with their expected class, library and decoded fields.

Every name in :data:`CASES` was copied from a real trace or a public profile of one; the comment after
each gives the source. Source keys:

- KINETO:   the project's Kineto format notes (KINETO.md), "Seen on the H200" (our H200, torch 2.11, CUDA 13, triton 3.6).
- ISSUE:    names quoted in the core-analyzer issue ("Classifying kernels"), taken from real traces.
- A100MAP:  a public A100 kernel-name map from a GPGPU-sim study (model_pool_finetuned.py + mnist
            profiles).
- OLMO:     public OLMo-1B H100 training profile report.
- VLLM:     public vLLM 0.21 Qwen3-VL Hopper profile tables.
- SGL:      public SGLang Hopper kernel tables.
- B200:     public B200 profiles / kernel tables.
- XMMA:     public H100/A100 cuBLAS kernel listings.
- AMPERE:   public A100 profiles.
- MI300:    public ROCm MI300/MI355 profiles.
- NCCL:     public NCCL traces/tables.
- INDUCTOR: public Inductor output code / profiles.
- ATTN:     public SDPA backend listings, Triton's
            fused-attention tutorial (`_attn_fwd`), AMD MI300 profile (`attn_fwd`).
- TABLE:    tests/data/real_kernel_names.json: every kernel name of the public real-trace corpus plus names from
            public profiler logs, nsys/rocprof outputs and kernel sources (source noted per row); class and
            library per name. HELD-OUT: tests/data/heldout_kernel_names.json, gathered after the rules were
            written, from sources not used while writing them (accuracy reported, floor asserted). Rows of
            the second and third held-out sets that their first runs missed were added to TABLE once the
            rules for their families were written (source says so); bench/heldout.py prints every set.
- SAMPLE:   sample_traces/*.json.gz captured on our H200 (torch 2.11, bf16): every distinct GPU activity
            with its launch API (by correlation) and innermost cpu_op, full names, in
            tests/data/h200_sample_kernels.json (whole decoded records asserted).

Public sources were public repositories' profile tables, kernel-name listings and trace files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import msgspec
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.classify import CLASSES, RULES, KernelInfo, classify_frame, classify_kernel


class Case(NamedTuple):
    name: str
    kind: str
    launch_api: str | None
    cpu_op: str | None
    kernel_class: str
    library: str
    decoded: dict


def K(name, kernel_class, library, decoded=None, *, kind="kernel", launch_api=None, cpu_op=None):
    return Case(name, kind, launch_api, cpu_op, kernel_class, library, decoded or {})


# SAMPLE: every distinct (name, kind, launch_api, cpu_op) in our H200 sample_traces, with reviewed answers.
_SAMPLE_FILE = Path(__file__).parents[1] / "data" / "h200_sample_kernels.json"
SAMPLE: list[Case] = [
    Case(r["name"], r["kind"], r["launch_api"], r["cpu_op"], r["kernel_class"], r["library"], r["decoded"])
    for r in json.loads(_SAMPLE_FILE.read_text())["cases"]
]
_SAMPLE_RULES = {
    (r["name"], r["kind"], r["launch_api"], r["cpu_op"]): r["rule"] for r in json.loads(_SAMPLE_FILE.read_text())["cases"]
}


# The H200 eager GeGLU kernels, verbatim from the capture (KINETO.md describes them).
GELU_H200 = next(c.name for c in SAMPLE if "GeluCUDAKernelImpl" in c.name and "Backward" not in c.name)
MUL_H200 = next(c.name for c in SAMPLE if "MulFunctor" in c.name)
DIRECT_COPY_UNROLLED = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
    "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
    "{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, "
    "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)"
)
BF16_COPY = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)"
)
ELEMENTWISE_128_2_COPY = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
    "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>"
    "(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::"
    "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})"
)
GEMV_CUBLAS = "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>"

CASES: list[Case] = [
    # ------------------------------------------------------------------ H200 (ours) -----------------
    K("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "gemm", "cublasLt",  # ISSUE/KINETO (H200)
      {"arch": "sm90", "tile": "256x128", "k_tile": 64, "stages": 4, "cluster": "1x2", "raster": "h", "bz": True,
       "coop": "coopA", "epilogue": "bias", "layout": "TNT", "dtype": "bf16"}, launch_api="cuLaunchKernelEx",
      cpu_op="aten::addmm"),
    K("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopB_NNT", "gemm", "cublasLt",  # ISSUE/KINETO (H200)
      {"arch": "sm90", "tile": "128x256", "k_tile": 64, "stages": 4, "cluster": "2x1", "raster": "v",
       "coop": "coopB", "epilogue": "none", "layout": "NNT", "dtype": "bf16"}, launch_api="cuLaunchKernelEx"),
    K(GELU_H200, "elementwise", "aten",  # SAMPLE mlp_eager, verbatim (KINETO.md: eager GeGLU gelu)
      {"template": "vectorized_elementwise_kernel", "functor": "GeluCUDAKernelImpl", "vector_width": 8, "dtype": "bf16"},
      launch_api="cudaLaunchKernel", cpu_op="aten::gelu"),
    K(MUL_H200, "elementwise", "aten",  # SAMPLE mlp_eager, verbatim (KINETO.md: eager GeGLU mul)
      {"template": "vectorized_elementwise_kernel", "functor": "MulFunctor", "vector_width": 8, "dtype": "bf16"},
      launch_api="cudaLaunchKernel", cpu_op="aten::mul"),
    K("triton_poi_fused__unsafe_view_gelu_mul_0", "triton_fused", "inductor",  # KINETO (H200 compiled)
      {"kind": "pointwise", "fused_ops": ["_unsafe_view", "gelu", "mul"], "index": 0},
      launch_api="cuLaunchKernel", cpu_op="triton_poi_fused__unsafe_view_gelu_mul_0"),
    K("_geglu_tanh_forward_kernel", "triton_custom", "triton",  # KINETO (H200 Liger)
      {"function": "_geglu_tanh_forward_kernel", "direction": "fwd"},
      launch_api="cuLaunchKernel", cpu_op="LigerGELUMulFunction"),
    # ------------------------------------------------------------------ hand-written Triton (public) -
    # No launch evidence in these listings, so the name-shape rule (lower confidence) decides.
    K("_chunk_scan_fwd_kernel", "triton_custom", "triton",  # Hopper mamba profile, mamba_ssm
      {"function": "_chunk_scan_fwd_kernel", "direction": "fwd"}),
    K("_permute_kernel", "triton_custom", "triton",  # same profile, MoE routing
      {"function": "_permute_kernel"}),
    # fla's Triton kernel, but its listing gives no launch evidence and the name has no leading underscore:
    # without evidence a bare name is never guessed to be Triton (issue: "no Triton evidence").
    K("merge_16x16_to_64x64_inverse_kernel", "other", "unknown"),  # GDN profile, fla
    # ------------------------------------------------------------------ Hopper nvjet (public) -------
    K("nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "gemm", "cublasLt",  # OLMO (H100)
      {"arch": "sm90", "tile": "192x192", "k_tile": 64, "stages": 4, "cluster": "2x1", "coop": "coopB", "layout": "TNN"}),
    K("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NTT", "gemm", "cublasLt",  # OLMO (H100)
      {"tile": "256x128", "layout": "NTT", "coop": "coopA", "epilogue": "none"}),
    K("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "gemm", "cublasLt",  # OLMO (H100)
      {"tile": "256x128", "layout": "NNT"}),
    K("nvjet_sm90_tst_192x144_64x5_2x1_v_bz_coopB_TNT", "gemm", "cublasLt",  # VLLM
      {"tile": "192x144", "k_tile": 64, "stages": 5, "cluster": "2x1", "layout": "TNT"}),
    K("nvjet_sm90_tst_128x72_64x8_1x2_h_bz_splitK_TNT", "gemm", "cublasLt",  # VLLM
      {"tile": "128x72", "stages": 8, "split_k": True, "raster": "h", "layout": "TNT", "epilogue": "none"}),
    K("nvjet_sm90_tst_64x136_64x8_4x1_v_bz_TNT", "gemm", "cublasLt",  # VLLM
      {"tile": "64x136", "cluster": "4x1", "layout": "TNT"}),
    K("nvjet_sm90_tst_384x8_64x4_2x1_v_bz_TNT", "gemm", "cublasLt",  # VLLM (lm_head)
      {"tile": "384x8", "stages": 4, "layout": "TNT"}, cpu_op="aten::mm"),
    K("nvjet_sm90_tst_128x8_64x12_4x1_v_bz_splitK_TNT", "gemm", "cublasLt",  # VLLM (decode)
      {"tile": "128x8", "stages": 12, "split_k": True}, launch_api="cudaGraphLaunch"),
    K("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", "gemm", "cublasLt",  # VLLM / SGL
      {"tile": "64x8", "k_tile": 64, "stages": 16}),
    K("nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT", "gemm", "cublasLt",  # SGL (aten::addmm)
      {"tile": "192x208", "epilogue": "bias", "coop": "coopB", "layout": "TNT"}, cpu_op="aten::addmm"),
    K("nvjet_sm90_tst_144x128_64x6_1x2_h_bz_TNN", "gemm", "cublasLt",  # SGL
      {"tile": "144x128", "stages": 6, "cluster": "1x2", "layout": "TNN"}),
    K("nvjet_tst_192x128_64x4_1x2_h_bz_coopA_NTT", "gemm", "cublasLt",  # ATTN list: no-arch form
      {"variant": "tst", "tile": "192x128", "k_tile": 64, "stages": 4, "layout": "NTT"}),
    K("nvjet_tst_192x192_64x3_2x1_v_bz_coopB_NTN", "gemm", "cublasLt",  # H100 profile
      {"tile": "192x192", "stages": 3, "layout": "NTN"}),
    K("nvjet_tst_320x128_64x3_1x2_h_bz_coopB_NTT", "gemm", "cublasLt",  # Hopper mamba profile
      {"tile": "320x128", "coop": "coopB", "layout": "NTT"}),
    K("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "gemm", "cublasLt",  # H100 nsys of torch.matmul
      {"variant": "hsh", "dtype": "fp16", "accumulate": "fp32", "tile": "256x128", "k_tile": 64, "stages": 4,
       "cluster": "1x2", "coop": "coopA", "layout": "NNT"}),
    K("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNN", "gemm", "cublasLt",  # H100 proton profile
      {"dtype": "fp16", "tile": "128x256", "layout": "TNN"}),
    K("nvjet_sm90_hss_64x8_64x16_1x1_h_bz_splitK_NNT", "gemm", "cublasLt",  # cuBLAS 12.8 listing
      {"arch": "sm90", "variant": "hss", "dtype": "fp16", "split_k": True, "layout": "NNT"}),
    K("nvjet_hsh_32x64_64x16_4x1_v_bz_splitK_TNN", "gemm", "cublasLt",  # profile table
      {"tile": "32x64", "stages": 16, "split_k": True}),
    # ------------------------------------------------------------------ Blackwell --------------------
    K("nvjet_sm100_tst_16x64_64x16_4x1_v_bz_TNN", "gemm", "cublasLt",  # B200
      {"arch": "sm100", "tile": "16x64", "k_tile": 64, "stages": 16, "cluster": "4x1", "layout": "TNN"}),
    K("nvjet_sm100_tst_64x8_64x16_2x4_h_bz_splitK_TNT", "gemm", "cublasLt",  # B200 (aten::mm)
      {"arch": "sm100", "tile": "64x8", "cluster": "2x4", "split_k": True, "layout": "TNT"}, cpu_op="aten::mm"),
    K("nvjet_sm100_qqtst_128x256_128x6_2x1_2cta_v_bz_bias_TNT", "gemm", "cublasLt",  # B200 (fp8 FC2)
      {"arch": "sm100", "variant": "qqtst", "dtype": "fp8", "tile": "128x256", "k_tile": 128, "stages": 6,
       "cta": 2, "epilogue": "bias", "layout": "TNT"}),
    K("nvjet_sm100_tst_32x64_64x16_4x1_v_bz_splitK_TNN", "gemm", "cublasLt",  # B200
      {"arch": "sm100", "split_k": True, "layout": "TNN"}),
    K("cutlass3x_sm100_simt_sgemm_f32_f32_f32_f32_f32_64x64x16_1x1x1_3_tnn_align1_bias_f32_relu", "gemm", "cutlass",  # B200
      {"arch": "sm100", "math": "simt", "dtype": "fp32", "tile": "64x64", "k_tile": 16, "cluster": "1x1x1",
       "stages": 3, "layout": "tnn", "epilogue": "bias+relu"}),
    K("cutlass3x_sm100_simt_sgemm_f32_f32_f32_f32_f32_64x32x16_1x1x1_3_nnn_align1_bias_f32_relu", "gemm", "cutlass",  # B200
      {"arch": "sm100", "tile": "64x32", "layout": "nnn"}),
    K("sm100_xmma_gemm_bf16f16_bf16f16_bf16f32_tn_n_tilesize256x128x64_stage4_warpsize2x2x1", "gemm", "cublas",  # B200
      {"arch": "sm100", "dtype": "bf16", "accumulate": "fp32", "layout": "tn", "tile": "256x128", "k_tile": 64,
       "stages": 4, "warps": "2x2x1"}),
    K("sm100_xmma_fprop_implicit_gemm_f16f16_f16f32_nhwc", "gemm", "cudnn",  # B200 cuDNN conv
      {"arch": "sm100", "op": "conv", "pass": "fprop", "dtype": "fp16"}),
    # ------------------------------------------------------------------ xmma -------------------------
    K("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      "gemm", "cublas",  # ISSUE / XMMA (H100 nsys)
      {"arch": "sm90", "dtype": "bf16", "accumulate": "fp32", "layout": "tn", "tile": "128x128", "k_tile": 64,
       "warpgroups": "1x1x1", "split_k": False, "epilogue": "none"}),
    K("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      "gemm", "cublas",  # XMMA (H100 fp32 model -> tf32 tensor cores)
      {"arch": "sm90", "dtype": "fp32", "math": "tf32", "tile": "128x128", "k_tile": 32}),
    K("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
      "gemm", "cublas",  # XMMA
      {"tile": "64x64", "k_tile": 64, "dtype": "bf16"}),
    K("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage5_warpsize2x2x1_tensor16x8x16_kernel",
      "gemm", "cublas",  # ISSUE (A100)
      {"arch": "sm80", "dtype": "bf16", "layout": "tn", "tile": "128x128", "k_tile": 32, "stages": 5,
       "warps": "2x2x1", "instruction": "16x8x16"}),
    K("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize96x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
      "gemm", "cublas",  # XMMA (A100)
      {"arch": "sm80", "dtype": "fp16", "tile": "96x128", "stages": 4}),
    K("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x64x32_stage3_warpsize2x2x1_tensor16x8x16_kernel",
      "gemm", "cublas",  # XMMA (RTX 3080 SASS dump)
      {"arch": "sm80", "layout": "nn", "tile": "96x64", "stages": 3}),
    # ------------------------------------------------------------------ Ampere/Volta/Turing cuBLAS ----
    K("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "gemm", "cublas",  # ISSUE (A100)
      {"arch": "sm80", "dtype": "bf16", "mma": "s16816", "tile": "128x128", "k_tile": 32, "stages": 5,
       "layout": "tn", "epilogue": "none"}),
    K("ampere_sgemm_128x64_tn", "gemm", "cublas",  # ISSUE (A100)
      {"arch": "sm80", "dtype": "fp32", "mma": "simt", "tile": "128x64", "layout": "tn"}),
    K("volta_sgemm_128x64_nn", "gemm", "cublas",  # ISSUE (V100)
      {"arch": "sm70", "dtype": "fp32", "tile": "128x64", "layout": "nn"}),
    K("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", "gemm", "cublas",  # ISSUE (T4)
      {"arch": "sm75", "dtype": "fp16", "mma": "s1688", "tile": "128x128", "layout": "tn"}),
    K("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn", "gemm", "cublas",  # AMPERE
      {"tile": "128x256", "k_tile": 64, "stages": 3, "layout": "nn"}),
    K("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", "gemm", "cublas",  # AMPERE
      {"tile": "128x256", "layout": "tn"}),
    K("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x6_tn", "gemm", "cublas",  # AMPERE
      {"tile": "64x64", "k_tile": 64, "stages": 6}),
    K("ampere_bf16_s16816gemm_bf16_256x64_ldg8_f2f_tn", "gemm", "cublas",  # AMPERE
      {"tile": "256x64", "layout": "tn", "dtype": "bf16"}),
    K("ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x6_nn", "gemm", "cublas",  # AMPERE
      {"tile": "64x64", "sliced": "1x2", "stages": 6, "layout": "nn"}),
    K("ampere_bf16_s16816gemm_bf16_128x128_ldg8_relu_f2f_stages_64x3_nn", "gemm", "cublas",  # AMPERE
      {"tile": "128x128", "epilogue": "relu", "stages": 3}),
    K("ampere_sgemm_32x32_sliced1x4_nn", "gemm", "cublas",  # AMPERE
      {"dtype": "fp32", "tile": "32x32", "sliced": "1x4", "layout": "nn"}),
    K("ampere_sgemm_32x32_sliced1x4_tn", "gemm", "cublas",  # A100MAP
      {"dtype": "fp32", "layout": "tn"}),
    K("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_nt", "gemm", "cublas",  # AMPERE
      {"tile": "128x64", "layout": "nt"}),
    # ------------------------------------------------------------------ CUTLASS ----------------------
    K("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8", "gemm", "cutlass",  # ISSUE
      {"arch": "sm80", "math": "wmma_tensorop", "dtype": "bf16", "tile": "32x32", "k_tile": 32, "stages": 1,
       "layout": "tn", "align": 8}),
    K("cutlass_80_tensorop_s16816gemm_relu_bf16_64x64_32x6_tn_align8", "gemm", "cutlass",  # ISSUE
      {"arch": "sm80", "dtype": "bf16", "tile": "64x64", "k_tile": 32, "stages": 6, "layout": "tn",
       "epilogue": "relu"}),
    K("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
      "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)", "gemm", "cutlass",  # ISSUE
      {"arch": "sm80", "dtype": "bf16", "tile": "64x64", "k_tile": 64, "stages": 4, "layout": "tn", "epilogue": "relu"}),
    K("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x64_32x4_nn_align8", "gemm", "cutlass",  # AMPERE
      {"tile": "256x64", "stages": 4, "layout": "nn"}),
    K("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)", "gemm", "cutlass",  # AMPERE
      {"arch": "sm80", "math": "simt", "dtype": "fp32", "tile": "256x128", "k_tile": 8, "stages": 4, "layout": "nn"}),
    K("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>(T1::Params)", "gemm", "cutlass",  # AMPERE
      {"tile": "64x64", "stages": 5, "layout": "nt"}),
    K("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4>"
      "(cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4::Params)", "gemm", "cutlass",  # A100MAP (fp32 via tf32)
      {"arch": "sm80", "mma": "s1688", "tile": "128x64", "k_tile": 16, "stages": 6, "align": 4}),
    K("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>"
      "(cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)", "gemm", "cutlass",  # A100MAP
      {"tile": "64x64", "layout": "tn"}),
    # ------------------------------------------------------------------ AMD Tensile ------------------
    K("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x512_MI16x16x1_DTLA1_DTLB1_GRVWA8_GRVWB8_GSU0_PGR2_PLR1"
      "_SIA3_SK3_SKFTR0_WG16_4_4", "gemm", "hipblaslt",  # MI300 (rocprof of torch.matmul)
      {"layout": "TN", "dtype": "bf16", "tile": "16x16", "k_tile": 512, "instruction": "16x16x1", "epilogue": "bias"}),
    K("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_LDSB1_GRPM1_GSU1_ISA950_K1_WG32_8_1",
      "gemm", "hipblaslt",  # MI300 (MI355 corpus)
      {"layout": "TN", "dtype": "bf16", "tile": "256x256", "k_tile": 64, "arch": "gfx950", "split_k": False}),
    K("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1", "gemm", "rocblas",  # MI300
      {"layout": "NN", "dtype": "fp16", "tile": "128x128", "k_tile": 32, "instruction": "32x32x8", "epilogue": "none"}),
    K("Custom_Cijk_Alik_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT64x16x64_MI16x16x1_SN_LDSB0", "gemm", "hipblaslt",  # MI300
      {"layout": "TN", "dtype": "bf16", "tile": "64x16", "k_tile": 64}),
    K("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x32_MI16x16x1_SN", "gemm", "hipblaslt",  # MI300
      {"tile": "128x128", "k_tile": 32}),
    # ------------------------------------------------------------------ cuBLAS helpers ---------------
    K("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, true, " + GEMV_CUBLAS
      + " >(" + GEMV_CUBLAS + ", float, float)", "gemm", "cublas",  # A100MAP
      {"op": "gemv", "layout": "T", "dtype": "fp32"}),
    K("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true, "
      "true, false, 6, false, " + GEMV_CUBLAS + " >(" + GEMV_CUBLAS + ")", "gemm", "cublas",  # A100MAP (mnist)
      {"op": "gemv"}),
    K("void gemmk1_kernel<int, float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, "
      "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, 0>(cublasGemmk1Params"
      "<float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
      "cublasGemvTensorStridedBatched<float>, float, biasType<cublasGemvTensorStridedBatched<float>::value_type, "
      "float>::type>)", "gemm", "cublas",  # A100MAP (mnist)
      {"op": "gemm", "variant": "k1"}),
    K("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>("
      "cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, "
      "float const*, float const*, float*, void*, long, float*, int*)", "gemm", "cublasLt",  # A100MAP
      {"op": "split_k_reduce"}),
    K("void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>(int, int, long, float*, "
      "cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, int*)", "gemm", "cublasLt",  # A100MAP
      {"op": "epilogue"}),
    # ------------------------------------------------------------------ Inductor ---------------------
    K("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "triton_fused", "inductor",  # ISSUE
      {"kind": "reduction", "fused_ops": ["_to_copy", "add", "mean", "mul", "pow", "rsqrt"], "index": 1}),
    K("triton_per_fused_native_layer_norm_0", "triton_fused", "inductor",  # ISSUE
      {"kind": "persistent_reduction", "fused_ops": ["native_layer_norm"], "index": 0}),
    K("triton_tem_fused_addmm_0", "triton_fused", "inductor",  # ISSUE
      {"kind": "template", "fused_ops": ["addmm"], "index": 0}),
    K("triton_poi_fused_add_mul_0", "triton_fused", "inductor",  # ISSUE
      {"kind": "pointwise", "fused_ops": ["add", "mul"], "index": 0}),
    K("triton_red_fused_sum_2", "triton_fused", "inductor",  # ISSUE
      {"kind": "reduction", "fused_ops": ["sum"], "index": 2}),
    K("triton_poi_fused_cat_3", "triton_fused", "inductor",  # ISSUE
      {"kind": "pointwise", "fused_ops": ["cat"], "index": 3}),
    K("triton_poi_fused_convolution_relu_1", "triton_fused", "inductor",  # ISSUE
      {"kind": "pointwise", "fused_ops": ["convolution", "relu"], "index": 1}),
    K("triton_poi_0", "triton_fused", "inductor",  # ISSUE
      {"kind": "pointwise", "fused_ops": [], "index": 0}),
    K("triton_per_fused_add_embedding_mean_mul_pow_rsqrt_6", "triton_fused", "inductor",  # INDUCTOR
      {"kind": "persistent_reduction", "fused_ops": ["add", "embedding", "mean", "mul", "pow", "rsqrt"], "index": 6}),
    K("triton_per_fused_add_div_embedding_dense_backward_masked_fill_mul_neg_pow_sub_sum_25", "triton_fused",
      "inductor",  # INDUCTOR
      {"kind": "persistent_reduction", "index": 25,
       "fused_ops": ["add", "div", "embedding_dense_backward", "masked_fill", "mul", "neg", "pow", "sub", "sum"]}),
    K("triton_per_fused_native_group_norm_native_group_norm_backward_0", "triton_fused", "inductor",  # INDUCTOR
      {"fused_ops": ["native_group_norm", "native_group_norm_backward"], "index": 0}),
    K("triton_per_fused_native_layer_norm_relu_15", "triton_fused", "inductor",  # INDUCTOR
      {"fused_ops": ["native_layer_norm", "relu"], "index": 15}),
    K("triton_per_fused_add_mean_mul_pow_rsqrt_0", "triton_fused", "inductor",  # INDUCTOR (compiled RMSNorm)
      {"fused_ops": ["add", "mean", "mul", "pow", "rsqrt"]}),
    K("triton_per_fused_mul_0", "triton_fused", "inductor",  # INDUCTOR
      {"kind": "persistent_reduction", "fused_ops": ["mul"]}),
    K("triton_poi_fused_add_cat_mul_rsub_sigmoid_silu_split_0", "triton_fused", "inductor",  # B200 SwiGLU
      {"kind": "pointwise", "fused_ops": ["add", "cat", "mul", "rsub", "sigmoid", "silu", "split"]}),
    # ------------------------------------------------------------------ attention --------------------
    K("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, "
      "true, 64, 64, 64, true, true>::Params)", "attention", "cutlass",  # A100MAP
      {"impl": "mem_efficient", "direction": "fwd", "arch": "sm80", "dtype": "fp32", "tile": "64x64"}),
    K("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention", "cutlass",  # ATTN
      {"impl": "mem_efficient", "direction": "fwd", "dtype": "bf16", "tile": "64x128"}),
    K("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", "attention",
      "cudnn",  # ATTN
      {"impl": "cudnn_sdpa", "direction": "fwd", "arch": "sm80", "precision": "16bit"}),
    K("cudnn_generated_fort_native_sdpa_sm100_flash_fprop_f16", "attention", "cudnn",  # ATTN
      {"impl": "cudnn_sdpa", "arch": "sm100"}),
    K("_attn_fwd", "attention", "triton",  # ATTN (Triton fused-attention tutorial): attention beats triton_custom
      {"impl": "triton", "direction": "fwd"}, launch_api="cuLaunchKernel"),
    K("attn_fwd", "attention", "triton",  # MI300 profile
      {"direction": "fwd"}, launch_api="hipModuleLaunchKernel"),
    # ------------------------------------------------------------------ communication -----------------
    K("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "nccl",  # ISSUE
      {"collective": "AllReduce", "reduce_op": "Sum", "dtype": "fp32", "algorithm": "RING", "protocol": "LL"}),
    K("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "communication", "nccl",  # NCCL
      {"collective": "ReduceScatter", "dtype": "bf16", "protocol": "LL"}),
    K("ncclDevKernel_AllReduce_Sum_f32_RING_SIMPLE", "communication", "nccl",  # NCCL
      {"collective": "AllReduce", "protocol": "SIMPLE"}),
    K("ncclDevKernel_AllGather_RING_LL", "communication", "nccl",  # NCCL
      {"collective": "AllGather", "algorithm": "RING", "protocol": "LL"}),
    K("ncclDevKernel_SendRecv", "communication", "nccl",  # NCCL
      {"collective": "SendRecv"}),
    # ------------------------------------------------------------------ ATen -------------------------
    K(BF16_COPY, "copy", "aten",  # OLMO (H100)
      {"template": "vectorized_elementwise_kernel", "functor": "bfloat16_copy_kernel_cuda", "vector_width": 8,
       "dtype": "fp32", "to_dtype": "bf16"}),
    K(DIRECT_COPY_UNROLLED, "copy", "aten",  # OLMO (H100)
      {"template": "unrolled_elementwise_kernel", "functor": "direct_copy_kernel_cuda"}),
    K(ELEMENTWISE_128_2_COPY, "copy", "aten",  # A100MAP
      {"template": "elementwise_kernel", "functor": "direct_copy_kernel_cuda"}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
      "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", "elementwise", "aten",  # OLMO / A100MAP
      {"functor": "CUDAFunctor_add", "vector_width": 4, "dtype": "fp32"}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
      "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "elementwise", "aten",  # OLMO / A100MAP
      {"functor": "FillFunctor", "vector_width": 4, "dtype": "fp32"}),
    K("void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >"
      "(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)", "elementwise", "aten",  # OLMO
      {"functor": "FillFunctor", "vector_width": 8, "dtype": "bf16"}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
      "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
      "std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
      "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)",
      "elementwise", "aten",  # A100MAP
      {"functor": "GeluCUDAKernelImpl", "vector_width": 4, "dtype": "fp32"}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<long, long, bool, "
      "at::native::(anonymous namespace)::CompareEqFunctor<long> >, std::array<char*, 2ul> >(int, "
      "at::native::AUnaryFunctor<long, long, bool, at::native::(anonymous namespace)::CompareEqFunctor<long> >, "
      "std::array<char*, 2ul>)", "elementwise", "aten",  # A100MAP
      {"functor": "CompareEqFunctor", "vector_width": 4}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
      "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
      "const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::"
      "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
      "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
      "{lambda(float)#1}, std::array<char*, 2ul>)", "elementwise", "aten",  # A100MAP
      {"functor": "launch_clamp_scalar"}),
    K("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
      "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::"
      "{lambda(float, float)#1}>, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, "
      "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::"
      "{lambda(float, float)#1}>, std::array<char*, 3ul>)", "elementwise", "aten",  # A100MAP (relu backward)
      {"functor": "threshold_kernel_impl"}),
    K("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
      "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
      "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::"
      "(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)",
      "elementwise", "aten",  # A100MAP (foreach add)
      {"template": "multi_tensor_apply_kernel", "functor": "BinaryOpListAlphaFunctor"}),
    K("void at::native::(anonymous namespace)::indexSelectSmallIndex<float, long, unsigned int, 2, 2, -2>("
      "at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float const, unsigned int>, "
      "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, long)", "elementwise",
      "aten",  # A100MAP (embedding forward = gather)
      {"template": "indexSelectSmallIndex", "dtype": "fp32"}),
    # (no functor: TensorInfo's at::cuda namespace is not an op)
    K("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
      "float const*, float const*, float*, float*, float*)", "normalization", "aten",  # A100MAP
      {"template": "vectorized_layer_norm_kernel", "dtype": "fp32"}),
    K("void (anonymous namespace)::softmax_warp_forward<float, float, float, 4, true, false>(float*, float const*, "
      "int, int, int, bool const*, int, bool)", "reduction", "aten",  # A100MAP (ATen, though outside at::)
      {"template": "softmax_warp_forward", "dtype": "fp32"}),
    K("void (anonymous namespace)::softmax_warp_backward<float, float, float, 4, true, false>(float*, float const*, "
      "float const*, int, int, int, bool const*)", "reduction", "aten",  # A100MAP
      {"template": "softmax_warp_backward"}),
    K("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
      "float*, float const*, long const*, float const*, bool, long, long, long, long)", "reduction", "aten",  # A100MAP
      {"template": "nll_loss_forward_reduce_cuda_kernel_2d"}),
    K("void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
      "sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
      "float, 4>)", "reduction", "aten",  # A100MAP
      {"template": "reduce_kernel", "functor": "sum_functor", "dtype": "fp32"}),
    # ------------------------------------------------------------------ memcpy / memset --------------
    K("Memcpy HtoD (Pageable -> Device)", "memcpy", "cuda_runtime",  # ISSUE
      {"direction": "HtoD", "src": "Pageable", "dst": "Device"}, kind="memcpy"),
    K("Memcpy DtoD (Device -> Device)", "memcpy", "cuda_runtime",  # ISSUE
      {"direction": "DtoD", "src": "Device", "dst": "Device"}, kind="memcpy"),
    K("Memcpy DtoH (Device -> Pinned)", "memcpy", "cuda_runtime",  # A100 traces (HF torch.profiler guide)
      {"direction": "DtoH", "src": "Device", "dst": "Pinned"}, kind="memcpy"),
    K("Memset (Device)", "memset", "cuda_runtime", {"dst": "Device"}, kind="memset"),  # ISSUE / KINETO (H200)
]


# Shapes, not counted as real names: each is a real kernel whose public listing was truncated (or which
# we know from ATen / FlashAttention / CUTLASS source), completed by hand to exercise one rule or decoder.
SHAPES: list[Case] = [
    K("void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<at::native::(anonymous namespace)::"
      "OpaqueType<8u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<8u>*, "
      "at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<8u>, "
      "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
      "copy", "aten", {"template": "CatArrayBatchedCopy_contig"}),
    K("void at::native::<unnamed>::cunn_SoftMaxForward<(int)4, float, float, float, "
      "at::native::<unnamed>::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)",  # nsys spelling
      "reduction", "aten", {"template": "cunn_SoftMaxForward", "dtype": "fp32"}),
    K("flash_fwd_splitkv_kernel", "attention", "flash_attn", {"impl": "flash", "direction": "fwd"}),
    K("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
      "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
      "false, false, true, true, false>(pytorch_flash::Flash_fwd_params)",
      "attention", "flash_attn", {"impl": "flash", "direction": "fwd", "dtype": "bf16"}),
    K("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90"
      "<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, 128, "
      "cutlass::bfloat16_t, float, cutlass::arch::Sm90, false, false> > > >(flash::FlashAttnFwdSm90<...>::Params)",
      "attention", "flash_attn", {"arch": "sm90", "direction": "fwd"}),
    K("void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm10<cutlass::gemm::kernel::GemmUniversal<"
      "cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int>>, cutlass::gemm::collective::CollectiveMma<"
      "cutlass::gemm::MainloopSm100ArrayTmaUmmaWarpSpecialized<3, 8, 2>, cutlass::bfloat16_t>>>>(...)",
      "gemm", "cutlass", {"arch": "sm100", "dtype": "bf16"}),
    K("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*, "
      "float*, float*)", "normalization", "aten", {"template": "RowwiseMomentsCUDAKernel"}),
    K("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>("
      "c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
      "normalization", "aten", {"dtype": "bf16"}),
    K("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long const*, "
      "float const*, float*, int, long, int, int)", "reduction", "aten", {}),
    K("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
      "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
      "(at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, float*, float*>("
      "at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::"
      "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, "
      "bool, float*, float*)", "elementwise", "aten",
      {"template": "multi_tensor_apply_kernel", "functor": "FusedAdamMathFunctor", "dtype": "fp32"}),
    K("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication", "nccl",  # NCCL 2.1x spelling
      {"collective": "AllReduce", "algorithm": "RING", "protocol": "LL", "reduce_op": "Sum", "dtype": "fp32"}),
    K("void vllm::rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, "
      "float, int, int)", "normalization", "vllm", {"dtype": "bf16"}),
    K("CopyHostToDevice", "memcpy", "cuda_runtime", {"direction": "HtoD"}),  # ROCm roctracer spelling
    K("triton__0d1d2d3de4de", "triton_fused", "inductor", {"specialization": "0d1d2d3de4de"}),  # Inductor 2.0
    # vLLM/SGLang Triton fused-MoE expert GEMM: class gemm by its name; library triton only with evidence
    K("fused_moe_kernel", "gemm", "unknown", {"op": "gemm"}),  # listed without launch evidence
    K("fused_moe_kernel", "gemm", "triton", {"op": "gemm"}, launch_api="cuLaunchKernel"),
    K("fused_moe_kernel", "gemm", "triton", {"op": "gemm"}, cpu_op="sglang::inplace_fused_experts"),
    # Bare names that share Triton's launch APIs but are not Triton:
    K("MIOpenBatchNormFwdTrainSpatial", "normalization", "miopen", {}, launch_api="hipModuleLaunchKernel"),
    K("naive_conv_fwd_nchw_float_double_float", "gemm", "miopen", {"op": "conv"}, launch_api="hipModuleLaunchKernel"),
    K("gcd_vectorized4_kernel", "elementwise", "aten", {"functor": "gcd", "vector_width": 4},
      launch_api="cuLaunchKernel", cpu_op="aten::gcd"),
]


def _ids(cases: list[Case]) -> list[str]:
    return [f"{c.kernel_class}:{c.name[:70]}" for c in cases]


def test_table_has_enough_distinct_real_names() -> None:
    distinct = {c.name for c in CASES} | {c.name for c in SAMPLE}
    assert len(distinct) >= 70, len(distinct)
    assert len({c.name for c in SAMPLE}) >= 60
    assert {c.kernel_class for c in CASES + SAMPLE} >= set(CLASSES)


@pytest.mark.parametrize("case", SAMPLE, ids=[f"h200:{c.kernel_class}:{c.name[:60]}:{c.cpu_op}" for c in SAMPLE])
def test_h200_sample_trace_kernels(case: Case) -> None:
    info = classify_kernel(case.name, kind=case.kind, launch_api=case.launch_api, cpu_op=case.cpu_op)
    assert (info.kernel_class, info.library) == (case.kernel_class, case.library), info
    assert dict(info.decoded) == case.decoded  # the whole decoded record, not a subset
    assert info.rule == _SAMPLE_RULES[(case.name, case.kind, case.launch_api, case.cpu_op)]


def test_h200_sample_highlights() -> None:
    """The KINETO.md facts, checked against the real captures."""
    by_name = {c.name: c for c in SAMPLE}
    nvjet = [c for c in SAMPLE if c.name.startswith("nvjet_sm90_tst_")]
    assert nvjet and all(c.launch_api in ("cuLaunchKernelEx", "cudaGraphLaunch") for c in nvjet)
    assert all(c.kernel_class == "gemm" and c.library == "cublasLt" for c in nvjet)
    geglu = by_name["_geglu_tanh_forward_kernel"]
    assert (geglu.kernel_class, geglu.cpu_op, geglu.launch_api) == ("triton_custom", "LigerGELUMulFunction", "cuLaunchKernelEx")
    fused = by_name["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert fused.decoded["fused_ops"] == ["_unsafe_view", "gelu", "mul"]
    sdpa = [c for c in SAMPLE if c.name.startswith("cudnn_generated_fort_native_sdpa_sm90")]
    assert {c.decoded["direction"] for c in sdpa} == {"fwd", "bwd"}


@pytest.mark.parametrize("case", CASES + SHAPES, ids=_ids(CASES + SHAPES))
def test_real_kernel_names(case: Case) -> None:
    info = classify_kernel(case.name, kind=case.kind, launch_api=case.launch_api, cpu_op=case.cpu_op)
    assert info.kernel_class == case.kernel_class, info
    assert info.library == case.library, info
    for key, expected in case.decoded.items():
        assert key in info.decoded, (key, info)
        assert info.decoded[key] == expected, (key, info)
    # decoded must round-trip through JSON, as classify_frame stores it
    assert json.loads(msgspec.json.encode(dict(info.decoded))) == dict(info.decoded)


# ---------------------------------------------------------------------- the GEMM fields, explicitly --


def test_nvjet_fields_are_all_decoded() -> None:
    info = classify_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", launch_api="cuLaunchKernelEx")
    assert (info.kernel_class, info.library, info.rule) == ("gemm", "cublasLt", "gemm.nvjet")
    d = info.decoded
    assert d["arch"] == "sm90"
    assert d["tile"] == "256x128"
    assert (d["k_tile"], d["stages"]) == (64, 4)
    assert d["cluster"] == "1x2"
    assert d["raster"] == "h"
    assert d["bz"] is True
    assert d["coop"] == "coopA"
    assert d["epilogue"] == "bias"
    assert d["layout"] == "TNT"
    assert d["dtype"] == "bf16"


def test_ampere_and_cutlass_fields() -> None:
    a = classify_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn").decoded
    assert (a["arch"], a["dtype"], a["tile"], a["k_tile"], a["stages"], a["layout"]) == ("sm80", "bf16", "128x128", 32, 5, "tn")
    c = classify_kernel("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_tn_align8").decoded
    assert (c["arch"], c["dtype"], c["tile"], c["k_tile"], c["stages"], c["layout"]) == ("sm80", "bf16", "32x32", 32, 1, "tn")


def test_tensile_layout_from_index_order() -> None:
    layouts = {
        "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN": "NN",
        "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN": "TN",
        "Cijk_Ailk_Bjlk_BBS_BH_MT128x128x64_MI32x32x8x1_SN": "NT",
        "Cijk_Alik_Bjlk_BBS_BH_MT128x128x64_MI32x32x8x1_SN": "TT",
    }
    for name, layout in layouts.items():
        d = classify_kernel(name).decoded
        assert d["layout"] == layout
        assert (d["dtype"], d["tile"], d["k_tile"], d["instruction"]) == ("bf16", "128x128", 64, "32x32x8")


def test_inductor_fused_ops_vocabulary() -> None:
    d = classify_kernel("triton_poi_fused__unsafe_view_gelu_mul_0").decoded
    assert d["kind"] == "pointwise"
    assert list(d["fused_ops"]) == ["_unsafe_view", "gelu", "mul"]
    assert d["index"] == 0
    # longest match wins: native_layer_norm_backward is one op, not native_layer_norm + backward
    d = classify_kernel("triton_red_fused_native_layer_norm_native_layer_norm_backward_3").decoded
    assert list(d["fused_ops"]) == ["native_layer_norm", "native_layer_norm_backward"]
    # leading-underscore ops keep their underscore; unknown words fall back to single tokens
    d = classify_kernel("triton_poi_fused__softmax_frobnicate_where_2").decoded
    assert list(d["fused_ops"]) == ["_softmax", "frobnicate", "where"]
    # a double underscore: in-place `copy_` on the left, or a leading-underscore op on the right
    d = classify_kernel("triton_red_fused__to_copy_add_copy__div_lerp_linalg_vector_norm_mul_4").decoded
    assert list(d["fused_ops"]) == ["_to_copy", "add", "copy_", "div", "lerp", "linalg_vector_norm", "mul"]
    assert list(classify_kernel("triton_poi_fused_add_copy__0").decoded["fused_ops"]) == ["add", "copy_"]
    assert list(classify_kernel("triton_per_fused_add__softmax_1").decoded["fused_ops"]) == ["add", "_softmax"]
    # old Triton signature suffixes are not ops
    d = classify_kernel("triton_poi_fused_add_0d1d2de").decoded
    assert list(d["fused_ops"]) == ["add"] and d["specialization"] == "0d1d2de"


# ---------------------------------------------------------------------- rule order and evidence --------


def test_nvjet_launched_like_triton_is_still_gemm() -> None:
    # On Hopper cuBLASLt launches nvjet with cuLaunchKernelEx, Triton's own launch API.
    info = classify_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", launch_api="cuLaunchKernelEx",
                           cpu_op="aten::addmm")
    assert info.kernel_class == "gemm" and info.rule == "gemm.nvjet"
    names = [r.name for r in RULES]
    assert names.index("gemm.nvjet") < names.index("triton_custom.launch_api")


def test_hand_written_triton_evidence_and_confidence() -> None:
    name = "_geglu_tanh_forward_kernel"
    by_launch = classify_kernel(name, launch_api="cuLaunchKernel", cpu_op="aten::mul")
    by_op = classify_kernel(name, cpu_op="LigerGELUMulFunction")  # launch call not correlated
    by_shape = classify_kernel(name)
    assert by_launch.rule == "triton_custom.launch_api"
    assert by_op.rule == "triton_custom.cpu_op"
    assert by_shape.rule == "triton_custom.name_shape"
    assert {by_launch.kernel_class, by_op.kernel_class, by_shape.kernel_class} == {"triton_custom"}
    assert {by_launch.library, by_op.library, by_shape.library} == {"triton"}
    # launch evidence, or a Python-private name, beats a name that merely sounds like a norm
    assert classify_kernel("_rms_norm_forward_kernel", launch_api="cuLaunchKernel").kernel_class == "triton_custom"
    assert classify_kernel("_rms_norm_forward_kernel").rule == "triton_custom.name_shape"
    # no evidence and no Python-private name: not guessed to be Triton; the runtime API rules Triton out
    assert classify_kernel("fused_recurrent_gated_delta_rule_packed_decode_kernel").rule == "other"
    assert classify_kernel("_geglu_tanh_forward_kernel", launch_api="cudaLaunchKernel").kernel_class != "triton_custom"
    assert classify_kernel("_geglu_tanh_forward_kernel", launch_api="cudaLaunchKernel",
                           cpu_op="LigerGELUMulFunction").kernel_class != "triton_custom"
    # ...but an ATen-launched, C++-named kernel is never Triton
    assert classify_kernel(GELU_H200, launch_api="cuLaunchKernel").kernel_class == "elementwise"
    # hipBLASLt launches through hipExtModuleLaunchKernel; a Tensile name stays gemm whatever the API
    assert classify_kernel("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN",
                           launch_api="hipModuleLaunchKernel").kernel_class == "gemm"


def test_memcpy_kind_wins_over_name() -> None:
    assert classify_kernel("Memcpy HtoD (Pageable -> Device)", kind="memcpy").kernel_class == "memcpy"
    assert classify_kernel("Memcpy HtoD (Pageable -> Device)", kind="gpu_memcpy").kernel_class == "memcpy"
    assert classify_kernel("Memset (Device)", kind="memset").decoded == {"dst": "Device"}


def test_annotations_and_syncs_are_not_kernels() -> None:
    for kind in ("annotation", "sync"):
        info = classify_kernel("nccl:all_reduce", kind=kind)
        assert (info.kernel_class, info.rule) == ("other", "not_a_kernel")
    assert classify_kernel("nccl:all_reduce").kernel_class == "communication"


def test_unknown_names_are_other() -> None:
    info = classify_kernel("SomeVendorThing<3>(int)")
    assert info.kernel_class == "other" and info.rule == "other"


def test_every_rule_is_documented_and_classes_valid() -> None:
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.kernel_class in CLASSES
        assert len(rule.why) > 20, rule.name


def test_kernel_info_is_frozen_and_decoded_read_only() -> None:
    info = classify_kernel("ampere_sgemm_128x64_tn")
    assert isinstance(info, KernelInfo)
    with pytest.raises(Exception):
        info.kernel_class = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        info.decoded["tile"] = "1x1"  # type: ignore[index]
    assert classify_kernel("ampere_sgemm_128x64_tn").decoded["tile"] == "128x64"


# ---------------------------------------------------------------------- classify_frame ----------------


def test_classify_frame_distinct_once_keeps_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracekit.classify as classify

    names = [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        GELU_H200,
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        "_geglu_tanh_forward_kernel",
        "Memset (Device)",
        "_geglu_tanh_forward_kernel",
        GELU_H200,
    ]
    kinds = ["kernel", "kernel", "kernel", "kernel", "memset", "kernel", "kernel"]
    apis = ["cuLaunchKernelEx", "cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel", None, None, "cudaLaunchKernel"]
    frame = pl.DataFrame({"name": names, "kind": kinds, "launch_api": apis, "dur": list(range(len(names)))})

    calls: list[tuple] = []
    real = classify.classify_kernel

    def counting(name, **kw):
        calls.append((name, kw.get("kind"), kw.get("launch_api"), kw.get("cpu_op")))
        return real(name, **kw)

    monkeypatch.setattr(classify, "classify_kernel", counting)
    out = classify.classify_frame(frame)

    assert len(calls) == len(set(calls)) == 5  # 7 rows, 5 distinct (name, kind, launch_api, cpu_op)
    assert out.columns == ["name", "kind", "launch_api", "dur", "kernel_class", "library", "decoded", "rule"]
    assert out["dur"].to_list() == list(range(len(names)))  # row order kept
    assert out["name"].to_list() == names
    assert out["kernel_class"].to_list() == [
        "gemm", "elementwise", "gemm", "triton_custom", "memset", "triton_custom", "elementwise"
    ]
    # duplicates give identical answers
    assert out.row(0) [4:] == out.row(2)[4:]
    assert out.row(1)[4:] == out.row(6)[4:]
    # the two _geglu rows differ only in evidence, hence in rule
    assert out["rule"][3] == "triton_custom.launch_api" and out["rule"][5] == "triton_custom.name_shape"
    decoded = out["decoded"][0]
    assert decoded == msgspec.json.encode(json.loads(decoded), order="sorted").decode()
    assert json.loads(decoded)["tile"] == "256x128"
    for col in ("kernel_class", "library", "decoded", "rule"):
        assert out.schema[col] == pl.String


def test_classify_frame_without_optional_columns_and_empty() -> None:
    frame = pl.DataFrame({"name": ["triton_poi_fused_add_mul_0", "ampere_sgemm_128x64_tn"], "kind": ["kernel"] * 2})
    out = classify_frame(frame)
    assert out["kernel_class"].to_list() == ["triton_fused", "gemm"]
    assert json.loads(out["decoded"][0])["fused_ops"] == ["add", "mul"]
    empty = classify_frame(pl.DataFrame(schema={"name": pl.String, "kind": pl.String}))
    assert empty.height == 0
    assert empty.columns == ["name", "kind", "kernel_class", "library", "decoded", "rule"]
    # classifying twice replaces the columns instead of duplicating them
    again = classify_frame(out)
    assert again.columns == out.columns and again.equals(out)


# ---------------------------------------------------------------------- totality ---------------------


@settings(max_examples=400, deadline=None)
@given(
    name=st.text(),
    kind=st.sampled_from(["kernel", "memcpy", "memset", "gpu_memcpy", "weird", ""]),
    launch_api=st.none() | st.sampled_from(["cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernel"]) | st.text(max_size=8),
    cpu_op=st.none() | st.text(max_size=20),
)
def test_classify_kernel_is_total(name: str, kind: str, launch_api: str | None, cpu_op: str | None) -> None:
    info = classify_kernel(name, kind=kind, launch_api=launch_api, cpu_op=cpu_op)
    assert info.kernel_class in CLASSES
    assert isinstance(info.library, str) and isinstance(info.rule, str)
    msgspec.json.encode(dict(info.decoded))


@settings(max_examples=300, deadline=None)
@given(
    prefix=st.sampled_from(["nvjet_sm90_", "sm90_xmma_gemm_", "ampere_", "cutlass_80_", "Cijk_Alik_Bljk_", "triton_poi_fused_",
                            "ncclDevKernel_", "void at::native::vectorized_elementwise_kernel<", "Memcpy ", "fmha_cutlassF_"]),
    rest=st.text(alphabet="abcxTN0123456789_<>():, ", max_size=40),
)
def test_decoders_survive_mangled_library_names(prefix: str, rest: str) -> None:
    info = classify_kernel(prefix + rest)
    assert info.kernel_class in CLASSES
    assert "decode_error" not in info.decoded, info


_POOL = [c.name for c in CASES[:12]] + ["", "weird name", "_foo_kernel"]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(_POOL),
            st.sampled_from(["kernel", "memcpy", "memset", "annotation"]),
            st.none() | st.sampled_from(["cuLaunchKernel", "cudaLaunchKernel", "cuLaunchKernelEx"]),
            st.none() | st.sampled_from(["aten::mm", "LigerGELUMulFunction"]),
        ),
        max_size=40,
    )
)
def test_classify_frame_matches_row_by_row(rows: list[tuple]) -> None:
    frame = pl.DataFrame(rows, schema=["name", "kind", "launch_api", "cpu_op"], orient="row")
    out = classify_frame(frame)
    assert out.height == len(rows)
    for (name, kind, api, op), got in zip(rows, out.select("kernel_class", "library", "decoded", "rule").iter_rows()):
        info = classify_kernel(name, kind=kind, launch_api=api, cpu_op=op)
        expected_decoded = msgspec.json.encode(dict(info.decoded), order="sorted").decode()
        assert got == (info.kernel_class, info.library, expected_decoded, info.rule)


# ---------------------------------------------------------------------- the real-name table -----------

_TABLE_FILE = Path(__file__).parents[1] / "data" / "real_kernel_names.json"
TABLE: list[dict] = json.loads(_TABLE_FILE.read_text())["cases"]
_HELDOUT_FILE = Path(__file__).parents[1] / "data" / "heldout_kernel_names.json"


def test_table_holds_500_distinct_real_names_with_sources() -> None:
    distinct = {r["name"] for r in TABLE} | {c.name for c in CASES} | {c.name for c in SAMPLE}
    assert len(distinct) >= 500, len(distinct)
    for row in TABLE:
        assert row["kernel_class"] in CLASSES and row["library"] and len(row["source"]) > 10, row["name"][:80]
    assert len({r["name"] for r in TABLE}) == len(TABLE)  # no duplicates


def _table_params(rows: list[dict]) -> list:
    # A row the rules knowingly get wrong says why in `known_miss`; it must keep failing (strict xfail), so a
    # change that fixes it is noticed and the note removed.
    return [
        pytest.param(r, id=f"{r['kernel_class']}:{r['name'][:60]}",
                     marks=[pytest.mark.xfail(strict=True, reason=r["known_miss"])] if "known_miss" in r else [])
        for r in rows
    ]


@pytest.mark.parametrize("row", _table_params(TABLE))
def test_table_real_names(row: dict) -> None:
    info = classify_kernel(row["name"], kind=row["kind"], launch_api=row["launch_api"], cpu_op=row.get("cpu_op"))
    assert (info.kernel_class, info.library) == (row["kernel_class"], row["library"]), info.rule


def _accuracy(rows: list[dict]) -> tuple[int, int]:
    right = class_right = 0
    for row in rows:
        info = classify_kernel(row["name"], kind=row["kind"], launch_api=row["launch_api"], cpu_op=row.get("cpu_op"))
        class_right += info.kernel_class == row["kernel_class"]
        right += (info.kernel_class, info.library) == (row["kernel_class"], row["library"])
    return right, class_right


def test_tuned_table_accuracy_at_least_99_percent() -> None:
    right, class_right = _accuracy(TABLE)
    assert right / len(TABLE) >= 0.99 and class_right / len(TABLE) >= 0.99, (right, class_right, len(TABLE))


def test_heldout_names_accuracy_floor() -> None:
    """Names gathered after the rules were written (first run: 78/94 class+library, 83/94 class). The floor is
    what the rules reach now, so a regression fails; bench/classify.py prints the figures (88/94 and 91/94 since
    the padding family: TE's `remove_pad` is copy)."""
    doc = json.loads(_HELDOUT_FILE.read_text())
    rows = doc["cases"]
    assert len(rows) >= 80
    assert not {r["name"] for r in rows} & ({r["name"] for r in TABLE} | {c.name for c in CASES})
    right, class_right = _accuracy(rows)
    assert right >= 88 and class_right >= 91, (right, class_right, len(rows))


def test_named_families_of_the_issue() -> None:
    """One line per family the real-trace issue lists, checked on names from the table's sources."""
    ck = next(r["name"] for r in TABLE if r["name"].startswith("_ZN2ck"))
    cases = {
        # cuDNN convolutions in every spelling, and their helpers
        "cudnn_volta_scudnn_128x64_relu_xregs_large_nn_v1": ("gemm", "cudnn"),
        "void cutlass_cudnn_train::Kernel<cutlass_tensorop_s1688wgrad_optimized_tf32_256x128_16x3_nhwc_align": ("gemm", "cudnn"),
        "void wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float const*, int, float*)": ("gemm", "cudnn"),
        "cask_cudnn::computeWgradSplitKOffsetsKernel(cask_cudnn::ComputeSplitKOffsetsParams)": ("gemm", "cudnn"),
        "void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, float)": ("gemm", "cudnn"),
        # FBGEMM is not a GEMM
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int)": ("copy", "fbgemm"),
        # MIOpen helpers and Composable Kernel (mangled)
        "SubTensorOpWithScalar1d": ("elementwise", "miopen"),
        "batched_transpose_32x16_dword": ("copy", "miopen"),
        ck: ("gemm", "composable_kernel"),
        # magma, vendor attention, TRT-LLM bmm_, custom ops, collectives, pooling/upsampling
        "void magma_sgemmEx_kernel<float, float, float, false, false, 6, 3, 5, 3, 3>(int)": ("gemm", "magma"),
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0": ("copy", "vllm"),
        "void vllm::cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, int, __nv_bfloat16 const*)": ("elementwise", "vllm"),
        "rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)": ("communication", "rccl"),
        "void <unnamed>::multimem_all_reduce_kernel<c10::BFloat16, (int)16>(T1 *, unsigned long, unsigned in": ("communication", "symm_mem"),
        "void at::native::<unnamed>::max_pool_forward_nchw<float, float>(int, const T1 *, int, int, int, int": ("reduction", "aten"),
    }
    for name, expected in cases.items():
        info = classify_kernel(name)
        assert (info.kernel_class, info.library) == expected, (name[:60], info)
    # vendor cubins launched like Triton are never triton_custom
    bmm = "bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s8_et64x8_m64x8x32_cga1x1x1_16dp256b_rM_TN_transOut_sm100f"
    info = classify_kernel(bmm, launch_api="cuLaunchKernelEx")
    assert (info.kernel_class, info.library) == ("gemm", "trtllm")
    assert (info.decoded["dtype"], info.decoded["tile"], info.decoded["arch"]) == ("fp8", "128x8", "sm100")
    # RCCL keeps NCCL's names on ROCm: the HIP launch API decides the library
    assert classify_kernel("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)",
                           launch_api="hipExtLaunchKernel").library == "rccl"
    # a template argument in c10:: does not make a kernel ATen's
    assert classify_kernel("void per_token_group_quant_8bit_kernel<c10::BFloat16, c10::Float8_e4m3fn>(int)").library == "unknown"


def _assert_class_library_rule(cases: dict[str, tuple[str, str, str]]) -> None:
    for name, expected in cases.items():
        info = classify_kernel(name)
        assert (info.kernel_class, info.library, info.rule) == expected, (name[:70], info)


def test_families_of_the_second_heldout_set_generalise() -> None:
    """The rules written for the families heldout2 exposed cover members of those families that the set does
    not hold: identifiers as the projects' sources declare them (ATen, ROCclr, cuDNN, vLLM, aiter, TensorFlow,
    ONNX Runtime, XQA) or as public tables list them (Myelin layer names verbatim); parameter lists shortened
    where a listing had none. Expected answers follow the README's conventions."""
    aten_ = "void at::native::(anonymous namespace)::"
    cases = {
        # padding forward copy, backward reduction (atomic adds into the border inputs)
        aten_ + "reflection_pad2d_out_kernel<float>(float const*, float*, long, long, long, long, long, long)":
            ("copy", "aten", "padding"),
        aten_ + "reflection_pad2d_backward_det_out_kernel<float>(float*, float const*, long, long, long, long)":
            ("reduction", "aten", "padding.backward"),
        # ATen's own convolutions and their unfolding helpers: gemm op=conv
        "void at::native::col2im_kernel<float, float>(long, float const*, long, long, long, long, long, float*)":
            ("gemm", "aten", "gemm.aten_conv"),
        aten_ + "conv_depthwise3d_cuda_backward_weight_kernel<float, float, -1, -1>(int)":
            ("gemm", "aten", "gemm.aten_conv"),
        # pooled embedding bag and index_reduce/index_add accumulate: reduction
        aten_ + "EmbeddingBag_updateOutputKernel_sum_mean<float, long>(long const*, long const*, float const*)":
            ("reduction", "aten", "reduction"),
        "void at::native::indexFuncSmallIndex<float, long, unsigned int, 2, 2, -2, at::native::ReduceAdd>(int)":
            ("reduction", "aten", "reduction.scatter_add"),
        # HIP runtime: copies and fills are memcpy/memset, its other service kernels other
        "__amd_rocclr_copyBufferRect": ("memcpy", "hip_runtime", "memcpy.by_name"),
        "__amd_rocclr_streamOpsWrite.kd": ("other", "hip_runtime", "hip_runtime"),
        # aiter's custom all-reduce (mangled), vLLM's ROCm fp8 skinny GEMM
        "_ZN5aiter26cross_device_reduce_2stageIDF16bLi8ELb0EEEv": ("communication", "aiter", "collective.custom"),
        "void wvSplitKQ_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>(int, int, int, int, int, int)":
            ("gemm", "unknown", "gemm.generic"),
        # cuDNN's AddTensor (bias add)
        "void add_tensor_kernel_v3<int=2, float, float, int=128, int=1, int=1, int=4, int=2>(cudnnTensorStruct, "
        "float*, cudnnTensorStruct, float const *, float, float)": ("elementwise", "cudnn", "cudnn.tensor_ops"),
        # TensorRT Myelin, class from the op words
        "__myl_ConcAddCastMeanSubMulMeanAddSqrtDivMulCastMulAdd_myl3_1":
            ("normalization", "tensorrt", "tensorrt.myelin_norm"),
        "__myl_MaxrSubExpSumDivMul_myl36_5": ("reduction", "tensorrt", "tensorrt.myelin_reduction"),
        "__myl_TranReshMove_myl3_3": ("copy", "tensorrt", "tensorrt.myelin_copy"),
        "__myl_Fc_myl2_0": ("gemm", "tensorrt", "tensorrt.myelin_gemm"),
        # other frameworks by namespace
        "void tensorflow::functor::ColumnReduceKernel<float const*, float*, cub::Sum>(float const*, float*, int)":
            ("reduction", "tensorflow", "eigen.reduction"),
        "void onnxruntime::cuda::_ResizeBilinearKernel<float>(long, long, long, long)":
            ("elementwise", "onnxruntime", "upsampling"),
        # attention by a token of the kernel's own name, not by its namespace
        "kernel_mha_bwd": ("attention", "unknown", "attention.other"),
        "void kernel_mha_varlength(float*, float*, float*, int*)": ("attention", "unknown", "attention.by_name"),
    }
    _assert_class_library_rule(cases)
    assert classify_kernel(aten_ + "col2im_kernel<float>(long)").decoded["algorithm"] == "im2col"
    assert classify_kernel("__myl_SiluMulMulCast").decoded["fused_ops"] == ["Silu", "Mul", "Mul", "Cast"]
    # Triton GEMM words as tokens of a bare name; library triton only with Triton evidence
    for name in ("_bmm_chunk_fwd_kernel", "fused_moe_kernel_gptq_awq", "_w8a8_block_fp8_matmul"):
        info = classify_kernel(name, launch_api="cuLaunchKernel")
        assert (info.kernel_class, info.library, info.rule) == ("gemm", "triton", "gemm.triton"), (name, info)
    assert classify_kernel("fused_moe_kernel_gptq_awq").library == "unknown"
    # XQA's extern "C" kernel_mha: TensorRT-LLM's, and its launching op is no evidence of Triton
    info = classify_kernel("kernel_mha", launch_api="cuLaunchKernel", cpu_op="trtllm::xqa_attention")
    assert (info.kernel_class, info.library, info.decoded["impl"]) == ("attention", "trtllm", "xqa")
    # words inside an Inductor kernel's fused-op list name ATen ops, not the kernel's work
    assert classify_kernel("triton_poi_fused_all_gather_into_tensor_0").rule == "inductor"
    assert classify_kernel("triton_poi_fused_im2col_0").rule == "inductor"
    # a Triton-written KV-cache write keeps its convention (triton_custom), though its name says `mla`
    assert classify_kernel("_concat_and_cache_mla_kernel").kernel_class == "triton_custom"


def test_families_of_the_third_heldout_set_generalise() -> None:
    """The rules written for the families heldout3 exposed cover members of those families that the set does
    not hold: names as the projects' sources declare them (MIOpen's OpenCL kernel names, TensorRT-LLM's MoE runner,
    causal-conv1d, nvFuser's `nvfuser_<scheduler>_f0_c1_r0_g0` naming) or as public nvprof/nsys tables and
    hipBLASLt's name builder list them (parameter lists cut where the listing cut them)."""
    cases = {
        # MIOpen's OpenCL direct convolutions are convolutions: gemm op=conv
        "MIOpenCvFwd11x11": ("gemm", "miopen", "gemm.miopen_conv"),
        "MIOpenCvBwd11x11": ("gemm", "miopen", "gemm.miopen_conv"),
        # hipBLASLt's global-split-U reducer without the A/B layout: a GEMM's tail
        "Cijk_B_PostGSU2": ("gemm", "hipblaslt", "gemm.tensile"),
        # cuRAND generation (not only seeding) is elementwise, library curand
        "void gen_sequenced_Philox<curandStatePhilox4_32_10, float4, int, __operator_&__(float4 curand_unif":
            ("elementwise", "curand", "rng.curand"),
        # cuFFT's other pass family: no FFT class, so other — but its library is named
        "void vector_fft<unsigned int=32, unsigned int=8, unsigned int=32, unsigned int=10, padding_t=1,":
            ("other", "cufft", "other"),
        # DeepEP low-latency combine, the dispatch's partner
        "void deep_ep::internode_ll::combine<(bool)0, (int)6144, (int)11, (int)4>(void *, void *, int *, void *, con...":
            ("communication", "deep_ep", "collective.expert_parallel"),
        # TensorRT-LLM's low-latency grouped-GEMM set-up
        "void tensorrt_llm::kernels::cutlass_kernels::computeStridesTmaWarpSpecializedLowLatencyKernel<__nv_bfloat16, "
        "__nv_bfloat16, __nv_bfloat16, __nv_bfloat16>": ("gemm", "trtllm", "gemm.grouped_setup"),
        # causal-conv1d's plain forward (not channel-last); its Triton port stays triton_custom
        "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16>>"
        "(ConvParamsBase)": ("gemm", "causal_conv1d", "gemm.causal_conv1d"),
        "_causal_conv1d_update_kernel": ("triton_custom", "triton", "triton_custom.name_shape"),
        # nvFuser's reduction scheduler
        "nvfuser_reduction_f0_c1_r0_g0": ("reduction", "nvfuser", "nvfuser.reduction"),
        # a Welford reduce_kernel is a reduction (the bf16 instantiation ATen's std/var kernel makes of the set's
        # fp32 row: ReduceOp<scalar_t, WelfordOps<scalar_t, acc_t, int32_t, thrust::pair<out_t, out_t>>, uint32_t,
        # out_t, 4>); apex's SyncBatchNorm `welford_kernel` (csrc/welford.cu) is a norm's own and stays normalization
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::WelfordOps<c10::BFloat16, "
        "float, int, thrust::pair<float, float> >, unsigned int, float, 4> >": ("reduction", "aten", "reduction.welford"),
        "void welford_kernel<float, float, float>(float const*, float*, float*, int, int, int)":
            ("normalization", "unknown", "normalization"),
    }
    _assert_class_library_rule(cases)
    # FlashAttention-Triton's forward/backward under their bare names, launched by Triton
    for name in ("_fwd_kernel", "_bwd_kernel", "_fwd_kernel_stage1"):
        info = classify_kernel(name, launch_api="cuLaunchKernel")
        assert (info.kernel_class, info.library, info.rule) == ("attention", "triton", "attention.triton_fa"), name
    # only those shapes: a longer Python-private `_…_fwd_kernel` stays hand-written Triton
    assert classify_kernel("_chunk_scan_fwd_kernel", launch_api="cuLaunchKernel").kernel_class == "triton_custom"
    # a bare name that says triton or gluon is Triton's, also where another rule gives the class
    info = classify_kernel("gluon_mxfp4_moe_stage2_kernel")
    assert (info.kernel_class, info.library) == ("gemm", "triton")
    # a kernel launched with the runtime API is never credited to Triton, whatever its name says
    assert classify_kernel("apply_rotary_emb_triton_kernel", launch_api="cudaLaunchKernel").kernel_class == "elementwise"


def test_rocprof_kd_suffix_and_mangled_names_are_read_normalised() -> None:
    assert classify_kernel("triton_poi_fused_add_1.kd").decoded["fused_ops"] == ["add"]
    assert classify_kernel("void vllm::rms_norm_kernel<c10::BFloat16, 8, 4, true>(float, int) [clone .kd]").kernel_class == "normalization"
    mangled = "_ZN5cudnn6detail12dgrad_engineIfLi512ELi6ELi5ELi3ELi3ELi3ELb0EEEviiiPKT_iS4_iPS2_18kernel_grad_paramsyiyifiii"
    assert classify_kernel(mangled).kernel_class == "gemm"
    # the frame keeps the original name (identity); only the rules read the normalised text
    out = classify_frame(pl.DataFrame({"name": [mangled], "kind": ["kernel"]}))
    assert out["name"][0] == mangled and out["library"][0] == "cudnn"


def test_display_names_are_demangled_and_cut() -> None:
    from tracekit.classify.names import DEMANGLE_MAX_CHARS, demangle, display_kernel_name, rule_text, short_kernel_name

    ck = next(r["name"] for r in TABLE if r["name"].startswith("_ZN2ck"))
    text = rule_text(ck)
    assert text.startswith("void ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_xdl_cshuffle_v3<")
    assert short_kernel_name(ck) == "kernel_grouped_conv_fwd_xdl_cshuffle_v3<…>"
    assert display_kernel_name(ck, limit=40) == text[:39] + "…"
    assert demangle("_Z10foo_kernelPf") == "foo_kernel(float*)"
    assert demangle("_Znot-a-symbol") is None and rule_text("_Znot-a-symbol") == "_Znot-a-symbol"
    assert demangle("_Z" + "N1a" * (DEMANGLE_MAX_CHARS // 3)) is None  # over the cap: shown raw
    # deep nesting in a crafted symbol ends in a clean "cannot demangle", not a crash
    assert demangle("_Z1fI" + "1AI" * 100_000 + "i" + "EE" * 100_000 + "Ev") is None
    long_name = "k" * 300_000
    assert len(short_kernel_name(long_name)) == 80 and len(display_kernel_name(long_name)) == 160


# ---------------------------------------------------------------------- names of any length -----------

# Hostile shapes: long runs of what the rules look for, without what would complete a match.
_LONG = 300_000
_PATHOLOGICAL = [
    "a" * _LONG,
    "_" + "a_" * (_LONG // 2),
    "void " + "a::" * (_LONG // 3) + "<",
    "triton_poi_fused_" + "add_" * (_LONG // 4) + "0",
    "sm90_xmma_gemm_" + "a1" * (_LONG // 2),
    "Cijk_Alik_Bljk_" + "_MT1x" * (_LONG // 5),
    "cutlass" * (_LONG // 7),
    "attention_" + "a_" * (_LONG // 2),
    "nvjet_" + "1x" * (_LONG // 2),
    "void at::native::vectorized_elementwise_kernel<" + "<" * _LONG,
    "_Z" + "N1a" * (_LONG // 3) + "E",
    "x" * _LONG + ".kd",
]


@pytest.mark.parametrize("name", _PATHOLOGICAL, ids=[n[:24] for n in _PATHOLOGICAL])
def test_pathological_long_names_classify(name: str) -> None:
    # Correctness only (speed is measured by bench/classify.py): a regex that backtracked
    # catastrophically would hang this test, and the structural check below keeps it from happening.
    info = classify_kernel(name)
    assert info.kernel_class in CLASSES
    msgspec.json.encode(dict(info.decoded))


def _nested_unbounded_repeats(pattern: str) -> list[str]:
    """Constructs in a regex that can backtrack super-linearly: an unbounded repeat whose body holds another
    repeat, and an unbounded `.` repeat followed by more pattern (`x.*y` rescans the rest for every `x`)."""
    try:
        import re._parser as sre_parse  # Python >= 3.11
        from re._constants import ANY, MAXREPEAT, MAX_REPEAT, MIN_REPEAT, SUBPATTERN, BRANCH
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse  # type: ignore[no-redef]
        from sre_constants import ANY, MAXREPEAT, MAX_REPEAT, MIN_REPEAT, SUBPATTERN, BRANCH  # type: ignore[no-redef]
    problems: list[str] = []
    repeats = (MAX_REPEAT, MIN_REPEAT)

    def contains_repeat(items) -> bool:
        for op, av in items:
            if op in repeats and av[1] > 1:
                return True
            if op == SUBPATTERN and contains_repeat(av[-1]):
                return True
            if op == BRANCH and any(contains_repeat(b) for b in av[1]):
                return True
            if op in repeats and contains_repeat(av[2]):
                return True
        return False

    def walk(items) -> None:
        items = list(items)
        for i, (op, av) in enumerate(items):
            if op in repeats:
                lo, hi, body = av
                if hi == MAXREPEAT and contains_repeat(body):
                    problems.append("nested unbounded repeat")
                if hi == MAXREPEAT and any(o == ANY for o, _ in body) and i < len(items) - 1:
                    problems.append("unbounded '.' repeat before more pattern")
                walk(body)
            elif op == SUBPATTERN:
                walk(av[-1])
            elif op == BRANCH:
                for b in av[1]:
                    walk(b)

    walk(sre_parse.parse(pattern))
    return problems


def _classify_package_regexes() -> list[tuple[str, str]]:
    """Every constant regex in tracekit/classify/*.py: re.compile/search/match/... calls and _r/_ri."""
    import ast

    import tracekit.classify as pkg

    found: list[tuple[str, str]] = []
    for path in sorted(Path(pkg.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            is_re = owner == "re" and fname in {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "split"}
            if (is_re or fname in {"_r", "_ri"}) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append((f"{path.name}:{node.lineno}", node.args[0].value))
    return found


def test_every_classify_regex_is_free_of_catastrophic_shapes() -> None:
    from tracekit.classify.rules import rule_patterns

    regexes = _classify_package_regexes()
    assert len(regexes) > 60  # the scan sees the decoders' regexes, not just the rule table's
    for where, pattern in regexes + [(name, p.pattern) for name, p in rule_patterns()]:
        assert not _nested_unbounded_repeats(pattern), (where, pattern)
    # the checker itself catches the shapes it is for
    assert _nested_unbounded_repeats(r"(?:a+)*b") and _nested_unbounded_repeats(r"cutlass.*gemm")
    assert not _nested_unbounded_repeats(r"(?:[a-z]+\d+){1,2}_x") and not _nested_unbounded_repeats(r"^foo.*")
