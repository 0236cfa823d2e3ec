"""tracekit diff across GPU generations: a structural claim needs the launching ops to agree.

A hand-made pair, because the public traces hold no A100/V100 pair of one model: the same small
model step on an A100 (A) and a V100 (B) — one family, the same program on two GPU generations.
Its kernel names are real ones from A100 and V100 traces; it reproduces three false claims an
A100 → V100 diff made before the rule:

* "split ``CatArrayBatchedCopy`` into N kernels": ``aten::cat`` runs 16 → 17 times per step, each
  launching one kernel (the ``_aligned16_contig`` variant on the A100, the plain one on the V100),
  and an ``aten::copy_`` kernel appears — no cat op launches an extra kernel, so it is a count;
* "``splitKreduce_kernel`` replaced by / changed to ``globalKernel``": V100's cuBLAS picks another
  helper for the same ``aten::addmm``: a device's kernel choice, not a change of the program;
* "the three GEMMs unchanged" naming three GEMV kernels while all five main GEMMs changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory import make_flow, make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.diff import align, pairwise
from tracekit.render.views.verdict import plain, verdict_parts

ADDMM_DIMS = "[[512], [64, 1024], [1024, 512], [], []]"
SGEMM_A = "ampere_sgemm_128x64_tn"
SGEMM_B = "volta_sgemm_128x64_tn"
SPLITK = "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, float*, int*)"
GLOBAL = "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, false, false>(int, int, long, float*, long, float*, long, float const*, long, float const*, long, float, float, float const*, float const*, cublasLt::epilogue::impl::ReluArgs<float>)"
GEMV = "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)"
CAT_A = "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
CAT_B = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
COPY = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})"



def build(path: Path, device: str, gemm: str, helper: str, cats: int, cat: str, *, copy: bool = False,
          first_gemm: str | None = None) -> Path:
    """Three identical ProfilerSteps: five ``aten::addmm`` (the first also launching ``helper``),
    three ``aten::mv`` (GEMV), ``cats`` × ``aten::cat`` and, with ``copy``, one ``aten::copy_``."""
    ops = [("aten::addmm", ADDMM_DIMS, [first_gemm or gemm, helper])]
    ops += [("aten::addmm", ADDMM_DIMS, [gemm])] * 4
    ops += [("aten::mv", "[[512, 1024], [1024]]", [GEMV])] * 3
    ops += [("aten::cat", "[[[64, 32], [64, 32]], []]", [cat])] * cats
    ops += [("aten::copy_", "[[64, 64], [64, 64], []]", [COPY])] if copy else []
    events: list[dict] = []
    t, corr = 0.0, 1
    for step in range(1, 4):
        start, inner = t, []
        t += 5
        for name, dims, kernels in ops:
            op_ts = t
            for kernel in kernels:
                inner += [make_launch("cudaLaunchKernel", t + 1, 2, corr), make_kernel(kernel, t + 4, 3, corr),
                          *make_flow(corr, t + 1, t + 4)]
                corr, t = corr + 1, t + 6
            inner.append(make_op(name, op_ts, t - op_ts + 1, **{"Input Dims": json.loads(dims)}))
            t += 2
        t += 5
        events += [make_step(step, start, t - start), *inner]
        t += 10
    write_trace(path, events)
    top = json.loads(path.read_text())
    top["deviceProperties"][0]["name"] = device
    path.write_text(json.dumps(top))
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    import tracekit
    out = tmp_path_factory.mktemp("generations")
    a = build(out / "a100.json", "NVIDIA A100-SXM4-40GB", SGEMM_A, SPLITK, 16, CAT_A)
    b = build(out / "v100.json", "Tesla V100-SXM2-32GB", SGEMM_B, GLOBAL, 17, CAT_B, copy=True)
    return tracekit.open(a).profile(), tracekit.open(b).profile()


def test_a_count_change_is_no_split_and_a_device_choice_is_no_replacement(pair):
    d = pairwise.diff(*pair)
    kinds = [f.kind for f in d.findings]
    assert kinds[:4] == ["different_devices", "device_choice", "count_change", "added"]
    assert not {"split", "fusion", "replaced", "variant_change", "gemms_unchanged"} & set(kinds)
    # aten::cat: 16 kernels per step in A, 17 in B, one per call.
    (cat,) = d.alignment.count_changes
    assert (cat.cpu_op, cat.a, cat.b, len(cat.before), len(cat.after)) == ("aten::cat", 16, 17, 16, 17)
    # The five GEMMs and the split-K reduce → epilogue helper: the same aten::addmm, V100's cuBLAS choice.
    assert sorted({(x.name, y.name) for x, y in d.alignment.device_choices}) == [
        (SGEMM_A, SGEMM_B), (SPLITK, GLOBAL)]
    assert len(d.alignment.device_choices) == 6
    assert [k.name for k in d.alignment.added] == [COPY]
    text = plain(verdict_parts(d))
    assert text.startswith("A: A100-SXM4-40GB, B: V100-SXM2-32GB — kernel times are not comparable across devices; "
                           "aten::addmm runs volta_sgemm_128x64_tn instead of ampere_sgemm_128x64_tn, aten::addmm runs "
                           "globalKernel<…> instead of splitKreduce_kernel<…> (6 kernels in all) — the device's library "
                           "choosing its kernels, not a change of the program; CatArrayBatchedCopy_aligned16_contig<…> / "
                           "CatArrayBatchedCopy<…>: 16 → 17 per step (kernels of aten::cat); "
                           "elementwise_kernel<direct_copy_kernel_cuda> added;")
    assert text.count("not comparable across devices") == 1
    assert "split " not in text and "replaced" not in text and "GEMMs unchanged" not in text


def test_gemv_is_no_main_gemm_and_unchanged_gemms_say_how_many_changed(pair, tmp_path):
    import tracekit
    gemv = next(k for k in pair[0].sequences[pair[0].units[0]] if k.name == GEMV)
    assert gemv.kernel_class == "gemm" and not align.is_main_gemm(gemv)
    # Same device, one of the five GEMMs now another kernel: four of five unchanged, and it says so.
    b = build(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", SGEMM_A, SPLITK, 16, CAT_A,
              first_gemm="ampere_sgemm_64x64_tn")
    d = pairwise.diff(pair[0], tracekit.open(b).profile())
    (gemms,) = [f for f in d.findings if f.kind == "gemms_unchanged"]
    assert dict(gemms.quantities) == {"kernels": 4, "changed": 1}
    assert "; 4 of 5 GEMMs unchanged (1 changed);" in plain(verdict_parts(d))
