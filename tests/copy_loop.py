"""Hand-built training/decode loops for the copy rules' tests (tests/findings/test_<copy rule>.py).

Each step of a :class:`CopyLoop` is a ``ProfilerStep#N`` whose host launches a GEMM (``gemm_us`` of GPU
time: what sets the step's GPU busy time, against which the copy rules' floor is a share), then the
op chains the test adds, each of which launches one copy, and finally waits for the GPU in a
``cudaDeviceSynchronize`` (so the step's wall follows its GPU work: a GPU saving reaches the wall).
"""

from __future__ import annotations

from pathlib import Path

from factory import make_kernel, make_launch, make_step, span, write_trace

import tracekit

#: ATen's plain copy (``gpu_kernel_impl_nocast``: no dtype change).
COPY = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, ...)")
#: ATen's float -> bf16 cast.
CAST = ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, "
        "at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)")
#: torch.cat's kernel.
CAT = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>(float*, "
       "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 64, 64>, "
       "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)")
#: cuDNN's layout transpose before an NHWC convolution kernel.
NCHW_TO_NHWC = ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>("
                "cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)")
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
#: Copy-class kernels that are no removable copy.
KV_WRITE = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>("
            "__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, "
            "long, int, int, int, float const*, float const*)")
FBGEMM_PERMUTE = ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int const*, "
                  "int const*, int const*, int*, int*)")
FP8_CAST_TRANSPOSE = ("void transformer_engine::detail::cast_transpose_kernel<8, false, float, __nv_fp8_e4m3, "
                      "transformer_engine::Empty, transformer_engine::Empty>(float const*, __nv_fp8_e4m3*, "
                      "__nv_fp8_e4m3*, float*, float*, unsigned long, unsigned long)")


class CopyLoop:
    """``steps`` steps of ``step_us``; :meth:`copy` adds one op chain launching one copy in a step."""

    def __init__(self, steps: int = 3, step_us: float = 1000.0, gemm_us: float = 500.0):
        self.events: list[dict] = []
        self.steps, self.step_us, self.gemm_us = steps, step_us, gemm_us
        self.corr = 1
        self.host = [self.start(i) + 5.0 for i in range(steps)]  # next free host time per step
        self.device = [self.start(i) + 10.0 for i in range(steps)]  # next free GPU time per step
        for i in range(steps):
            self.copy(i, ["aten::mm"], GEMM, gemm_us)

    def start(self, step: int) -> float:
        return 10.0 + step * (self.step_us + 10.0)

    def copy(self, step: int, chain: list, gpu: str, dur: float, *, kind: str = "kernel",
             launch: str = "cudaLaunchKernel", dims: dict | None = None, **gpu_args) -> None:
        """In ``step``, the ops of ``chain`` (outermost first; a name is a cpu_op, ``(name, cat)`` any span)
        nested around one launch of ``gpu`` (``dur`` µs); ``dims``: op name -> its ``Input Dims``."""
        ts = self.host[step]
        total = 10.0 + 0.2 * len(chain)
        for depth, item in enumerate(chain):
            name, cat = item if isinstance(item, tuple) else (item, "cpu_op")
            args = {"Input Dims": dims[name]} if dims and name in dims else {}
            self.events.append(span(cat, name, ts + depth * 0.1, total - depth * 0.2, **args))
        corr, self.corr = self.corr, self.corr + 1
        self.events.append(make_launch(launch, ts + len(chain) * 0.1, 5.0, corr))
        self.events.append(make_kernel(gpu, self.device[step], dur, corr, kind=kind, **gpu_args))
        self.host[step] += total + 1.0
        self.device[step] += dur + 1.0

    def write(self, tmp_path: Path, name: str = "t.json") -> Path:
        for i in range(self.steps):
            t0 = self.start(i)
            self.events.append(make_step(i, t0, self.step_us))
            wait = self.host[i] + 1.0
            self.events.append(make_launch("cudaDeviceSynchronize", wait, max(self.device[i], wait + 1.0) - wait,
                                           900_000 + i))
        return write_trace(tmp_path / name, self.events)


def findings(path: Path) -> dict:
    """The findings of the trace at ``path`` by rule id."""
    return {f.rule: f for f in tracekit.open(str(path)).report().findings}


#: The rules that price copies (a test of one checks the others stay silent where they should).
COPY_RULES = ("hot_path_copy", "dtype_cast", "kv_cache_cat", "conv_layout_transpose", "ddp_bucket_copy")
