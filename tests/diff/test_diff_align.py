"""tracekit diff's kernel alignment on hand-built sequences: a fusion only where counts drop, main
GEMMs as anchors, the fall-back and coarse notes, and a matcher that stays a common subsequence.

(Timing belongs in ``bench/align.py``; these tests assert what the alignment finds.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyses.profile import KernelRef, kernel_identity
from tracekit.diff import align, matching


def k(name, cls="elementwise", cpu_op=None, **decoded) -> KernelRef:
    return KernelRef(kernel_identity(name, cls, decoded), name, cls, cpu_op, cpu_op, decoded)


G1 = k("nvjet_A", "gemm", "aten::mm", op="gemm", tile="256x128")
G2 = k("nvjet_B", "gemm", "aten::mm", op="gemm", tile="192x128")
SPLIT_K = k("cublasLt::splitKreduce_kernel", "gemm", "aten::mm", op="split_k_reduce")
GELU = k("gelu_kernel", cpu_op="aten::gelu", functor="GeluCUDAKernelImpl")
MUL = k("mul_kernel", cpu_op="aten::mul", functor="MulFunctor")
OPAQUE = k("my_kernel", "triton_custom", "MyFunction")


def test_kernels_launched_elsewhere_in_the_unit_are_moved_not_fused():
    # Units cut at another point of the iteration: the same kernels, rotated. Before, the lone
    # my_kernel facing gelu + mul between the GEMMs was a fusion "by position".
    a = (G1, GELU, MUL, G2, OPAQUE)
    b = (G1, OPAQUE, G2, GELU, MUL)
    al = align.align(a, b)
    assert al.is_identical and not al.fusions
    assert al.moved == 3 and len(al.unchanged) == 5


def test_a_fusion_needs_the_replaced_kernels_count_to_drop():
    # B still runs gelu and mul once each: the Inductor kernel is new work, not their fusion.
    fused = k("triton_poi_fused_gelu_mul_0", "triton_fused", "triton_poi_fused_gelu_mul_0",
              kind="pointwise", fused_ops=["gelu", "mul"])
    al = align.align((G1, GELU, MUL, G2), (G1, fused, G2, GELU, MUL))
    assert not al.fusions and [x.name for x in al.added] == [fused.name]
    # One of two gelu+mul pairs fused: exactly one pair is claimed.
    al = align.align((G1, GELU, MUL, G2, GELU, MUL), (G1, fused, G2, GELU, MUL))
    assert [(tuple(x.name for x in f.before), f.after.name) for f in al.fusions] == [
        (("gelu_kernel", "mul_kernel"), fused.name)]
    assert not (al.removed or al.added)


def test_split_k_reduce_and_helpers_do_not_anchor():
    assert align.is_main_gemm(G1) and not align.is_main_gemm(SPLIT_K)
    assert not align.is_main_gemm(k("dot_kernel<float>", "gemm", "aten::dot", op="dot"))
    al = align.align((G1, SPLIT_K, GELU, G2), (G1, SPLIT_K, GELU, G2))
    assert al.anchors == 2 and al.is_identical
    # A split-K reduce that appears in B is an added kernel, and never an anchor.
    al = align.align((G1, GELU, G2), (G1, SPLIT_K, GELU, G2))
    assert al.anchors == 2 and [x.name for x in al.added] == [SPLIT_K.name]


def test_an_aten_op_name_is_no_evidence_of_a_fusion():
    # A GEMM launched by aten::linear does not "fuse" the other kernels aten::linear launched in A.
    bias = k("add_kernel", cpu_op="aten::linear", functor="CUDAFunctor_add")
    copy = k("copy_kernel", "copy", "aten::linear", functor="copy")
    new_gemm = k("nvjet_C", "gemm", "aten::linear", op="gemm")
    al = align.align((G1, bias, copy, G2), (G1, new_gemm, G2))
    assert not al.fusions
    # ... while a custom op's name is (Liger's fused GeGLU).
    liger = k("_geglu_tanh_forward_kernel", "triton_custom", "LigerGELUMulFunction")
    al = align.align((G1, GELU, MUL, G2), (G1, liger, G2))
    assert [(f.evidence, f.ops) for f in al.fusions] == [("launching CPU op", ("gelu", "mul"))]


def test_kernels_of_one_op_are_no_fusion_on_words_alone():
    # Two adds facing one add kernel of another variant (and a copy in the way): the add kernel's
    # words name one op, so no "fused add (2 kernels)" on words; what is left is said as it is.
    add_a = k("add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")
    add_b = k("vectorized_add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")
    copy = k("copy_kernel", "copy", "aten::copy_", functor="copy")
    al = align.align((G1, add_a, add_a, G2), (G1, add_b, copy, G2))
    assert not any(f.evidence == "launching CPU op" for f in al.fusions)
    # Outside its segment, a kernel claims one kernel per op it names: the nearest.
    liger = k("_geglu_tanh_forward_kernel", "triton_custom", "LigerGELUMulFunction")
    al = align.align((G1, GELU, MUL, G2, GELU, G1, MUL), (G1, G2, liger, GELU, G1, MUL))
    assert [len(f.before) for f in al.fusions] == [2]


def test_a_gemm_is_no_fusion_target_by_position():
    other_gemm = k("cutlass_gemm_kernel", "gemm", "MyGemmOp", op="gemm")
    al = align.align((G1, GELU, MUL, G2), (G1, other_gemm, G2))
    assert not al.fusions and {x.name for x in al.removed} == {"gelu_kernel", "mul_kernel"}
    mine = (k("my_first_kernel", "triton_custom", "MyFunction"), k("my_second_kernel", "triton_custom", "MyFunction"))
    al = align.align((G1, *mine, G2), (G1, OPAQUE, G2))  # a non-GEMM of the same launching op still is
    assert [f.evidence for f in al.fusions] == ["position"]


def test_few_gemm_anchors_cut_long_stretches_at_other_kernels_and_say_so():
    body = [k(f"e{i}_kernel") for i in range(300)]
    mine = (k("my_first_kernel", "triton_custom", "MyFunction"), k("my_second_kernel", "triton_custom", "MyFunction"))
    a = (G1, *body[:150], *mine, *body[150:], G2)
    b = (G1, *body[:150], OPAQUE, *body[150:], G2)
    al = align.align(a, b)
    # Cut at the unchanged kernels around it, my_kernel still stands for MyFunction's two by position.
    assert [(f.evidence, [x.name for x in f.before]) for f in al.fusions] == [
        ("position", ["my_first_kernel", "my_second_kernel"])]
    (note,) = al.notes
    assert note.startswith("few unchanged GEMMs anchor the kernel alignment (2 in the unit): 1 stretch of "
                           "more than 256 kernels without one (the longest 302) was cut")
    # Nothing changed in a long stretch: nothing to say.
    assert align.align(a, a).notes == ()


def test_alignment_beyond_its_work_bound_is_called_coarse(monkeypatch):
    monkeypatch.setattr(matching, "WORK_PER_KERNEL", 0)
    monkeypatch.setattr(matching, "EXACT_CELLS", 16)
    a = tuple(k(f"e{i % 7}_kernel") for i in range(100))
    b = tuple(k(f"e{i % 5}_kernel") for i in range(100))
    al = align.align(a, b)
    assert any(n.startswith("the kernel alignment is coarse: matching stopped at its work bound") for n in al.notes)
    _accounts_for_every_kernel(al, a, b)


def _accounts_for_every_kernel(al, a, b):
    used_a = [x for x, _ in al.unchanged] + [x for f in al.fusions for x in f.before] + \
        [s.before for s in al.splits] + [c.before for c in al.changed] + [x for x, _ in al.replaced] + list(al.removed) + \
        [x for c in al.count_changes for x in c.before]
    used_b = [y for _, y in al.unchanged] + [f.after for f in al.fusions] + \
        [y for s in al.splits for y in s.after] + [c.after for c in al.changed] + [y for _, y in al.replaced] + list(al.added) + \
        [y for c in al.count_changes for y in c.after]
    assert sorted(map(id, used_a)) == sorted(map(id, a))
    assert sorted(map(id, used_b)) == sorted(map(id, b))


names = st.lists(st.integers(0, 6), max_size=120)


@settings(max_examples=200, deadline=None)
@given(names, names, st.sampled_from([0, 16, 4096]))
def test_match_returns_a_common_subsequence(x, y, exact_cells):
    old = matching.EXACT_CELLS
    matching.EXACT_CELLS = exact_cells  # 0 and 16 force the patience path on small inputs
    try:
        pairs = matching.match(x, y)
    finally:
        matching.EXACT_CELLS = old
    assert all(x[i] == y[j] for i, j in pairs)
    assert all(i0 < i1 and j0 < j1 for (i0, j0), (i1, j1) in zip(pairs, pairs[1:]))
    if x == y:
        assert len(pairs) == len(x)
    # Every identity both sides share is matched at least once (nothing common is left over).
    assert not set(x) & set(y) or pairs


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 7), max_size=60), st.lists(st.integers(0, 7), max_size=60))
def test_every_kernel_is_accounted_for_once_on_the_patience_path(ix, jx):
    pool = [G1, G2, SPLIT_K, GELU, MUL, OPAQUE,
            k("triton_poi_fused_gelu_mul_0", "triton_fused", "x", kind="pointwise", fused_ops=["gelu", "mul"]),
            k("add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")]
    a, b = tuple(pool[i] for i in ix), tuple(pool[j] for j in jx)
    old = matching.EXACT_CELLS
    matching.EXACT_CELLS = 4
    try:
        al = align.align(a, b)
    finally:
        matching.EXACT_CELLS = old
    _accounts_for_every_kernel(al, a, b)
    # What is left unmatched of a kernel is exactly the change of its count per unit.
    matched_a = [x for x, _ in al.unchanged]
    for kernel in pool:
        left = len(a) and sum(1 for x in a if x is kernel) - sum(1 for x in matched_a if x is kernel)
        assert left == max(0, sum(1 for x in a if x is kernel) - sum(1 for y in b if y is kernel))
