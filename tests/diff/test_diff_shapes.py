"""tracekit diff on a shape sweep: units paired by shape, not by position.

The compile sweep (sample_traces/compile_sweep) runs one MLP at four input shapes, three steady
calls each (``mlp_fwd#1 64x128`` … ``mlp_fwd#15 64x256``). Every figure asserted here was checked
by hand against the traces: a bf16 [M, 3072] intermediate is M × 3072 × 2 B, with M = batch × seq
(64x128 → 8192, 32x128 → 4096, 48x128 → 6144, 64x256 → 16384); eager runs three GEMMs, a GeLU and
a mul per call (5 kernels), Inductor three GEMMs and one fused GeLU·mul (4 kernels).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from tracekit.commands import main
from tracekit.diff import pairwise
from tracekit.render.json import diff as diff_json
from tracekit.render.views.verdict import plain, verdict_parts

SWEEP = Path(__file__).resolve().parents[2] / "sample_traces" / "compile_sweep"
SHAPES = ("64x128", "32x128", "48x128", "64x256")
M = {"64x128": 8192, "32x128": 4096, "48x128": 6144, "64x256": 16384}


def tensor_bytes(shape: str) -> int:
    return M[shape] * 3072 * 2


def reorder(src: Path, dst: Path, order: list[int]) -> None:
    """Write the sweep ``src`` with its shapes run in another ``order`` (indices into the shapes in
    time order): every event from the first call of a shape to the first call of the next moves as
    one block (the sweep synchronises after each call, so a block holds its GPU work too)."""
    data = json.loads(gzip.decompress(src.read_bytes()))
    events = data["traceEvents"]
    firsts: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("mlp_fwd#"):
            shape = e["name"].split(" ", 1)[1]
            firsts[shape] = min(firsts.get(shape, e["ts"]), e["ts"])
    starts = sorted(firsts.values())
    end = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e) + 1
    blocks = list(zip(starts, starts[1:] + [end]))
    moved_to, t = {}, starts[0]
    for k in order:
        moved_to[k], t = t, t + blocks[k][1] - blocks[k][0]
    for e in events:
        if "ts" in e and e["ts"] >= starts[0]:
            k = next(i for i, (lo, hi) in enumerate(blocks) if lo <= e["ts"] < hi)
            e["ts"] = e["ts"] - blocks[k][0] + moved_to[k]
    dst.write_bytes(gzip.compress(json.dumps(data).encode()))


@pytest.fixture(scope="module")
def sweep():
    import tracekit
    return lambda path: tracekit.open(path).profile()


@pytest.fixture(scope="module")
def reordered(tmp_path_factory):
    """The eager and compiled sweeps with their shapes run 48x128, 64x128, 64x256, 32x128."""
    out = tmp_path_factory.mktemp("reordered")
    for name in ("mlp_eager-sweep", "mlp_compile-sweep"):
        reorder(SWEEP / f"{name}.json.gz", out / f"{name}.json.gz", [2, 0, 3, 1])
    return out


def test_profile_shapes_are_the_annotated_shapes(sweep):
    p = sweep(SWEEP / "mlp_eager-sweep.json.gz")
    assert p.shape_basis == "annotation"
    assert {p.unit_labels[u]: p.shapes[u] for u in (1, 5, 9, 13)} == {
        "mlp_fwd#1 64x128": "64x128", "mlp_fwd#5 32x128": "32x128", "mlp_fwd#9 48x128": "48x128",
        "mlp_fwd#13 64x256": "64x256"}


def test_sweep_pairs_units_by_shape_and_compares_within_a_shape(sweep):
    a, b = sweep(SWEEP / "mlp_eager-sweep.json.gz"), sweep(SWEEP / "mlp_compile-sweep.json.gz")
    d = pairwise.diff(a, b)
    # Every pair joins units of one shape (B's mlp_fwd#8 48x128 is steady, A's is cold: B has one more).
    assert all(a.shapes[ua] == b.shapes[ub] for ua, ub in d.unit_pairs)
    assert len(d.unit_pairs) == 12
    assert [s.key for s in d.shapes] == list(SHAPES)
    for s in d.shapes:
        q = s.quantities["round_trip_bytes"]
        # eager: mm → gelu, gelu → mul, mm → mul, mul → mm; compiled: the gelu → mul one stays inside.
        assert (q.a, q.b) == (4 * tensor_bytes(s.key), 3 * tensor_bytes(s.key))
        assert (s.quantities["kernels"].a, s.quantities["kernels"].b) == (5, 4)
    # Per sweep: one step of each shape; a tensor fewer per shape, each a real [M, 3072] bf16 tensor.
    rt = d.quantities["round_trip_bytes"]
    assert rt.delta == -sum(tensor_bytes(s) for s in SHAPES) == -213_909_504
    assert (d.quantities["kernels"].a, d.quantities["kernels"].b) == (20, 16)
    # The unchanged GEMM is timed within its shape: the same kernel, the same time (not −100 %).
    (gemm,) = d.kernel_times
    assert gemm.name_a.startswith("nvjet_sm90_tst_256x128") and d.aligned_shape == "64x256"
    assert gemm.quantity.within_noise and abs(gemm.quantity.delta_pct) < 1
    text = plain(verdict_parts(d))
    assert text.startswith("Compared shape by shape: four annotated shapes both traces ran")
    assert "four round-trip tensors (213,909,504 B) fewer per sweep" in text
    assert "fused gelu + mul (2 kernels) into one Inductor Triton kernel" in text
    data = diff_json.data(d)
    assert data["per"] == "sweep" and [s["shape"] for s in data["shapes"]] == list(SHAPES)
    assert data["shapes"][3]["round_trip_bytes_per_step"]["delta"] == -tensor_bytes("64x256")
    frame = d.per_step
    row = frame.filter((frame["shape"] == "32x128") & (frame["key"] == "kernels")).row(0, named=True)
    assert (row["a"], row["b"]) == (5.0, 4.0)


def test_a_reordered_sweep_compares_the_same_shapes(sweep, reordered):
    a = sweep(SWEEP / "mlp_eager-sweep.json.gz")
    # The sweep against itself run in another order: nothing changed (by position, a 64x128 call
    # faced a 48x128 one and its GEMM was called a variant change).
    same = pairwise.diff(a, sweep(reordered / "mlp_eager-sweep.json.gz"))
    assert same.alignment.is_identical and same.structural_change is False
    assert [f.kind for f in same.findings] == ["per_shape"]
    assert all(s.quantities["kernels"].delta == 0 and s.quantities["round_trip_bytes"].delta == 0
               for s in same.shapes)
    # Eager against the reordered compiled sweep says what eager against the compiled sweep says.
    straight = pairwise.diff(a, sweep(SWEEP / "mlp_compile-sweep.json.gz"))
    moved = pairwise.diff(a, sweep(reordered / "mlp_compile-sweep.json.gz"))
    assert plain(verdict_parts(moved)) == plain(verdict_parts(straight))
    assert {s.key: s.quantities["gpu_time"].b for s in moved.shapes} == {
        s.key: s.quantities["gpu_time"].b for s in straight.shapes}


def test_no_shape_in_common_compares_only_totals(sweep):
    a, b = sweep(SWEEP / "mlp_eager-sweep.json.gz"), sweep(SWEEP / "mlp_compile-sweep.json.gz")
    other = dataclasses.replace(b, shapes={u: f"{s}x2" for u, s in b.shapes.items()})
    d = pairwise.diff(a, other)
    assert not d.structural and d.unit_pairs == () and d.shapes == ()
    assert d.kernel_times == () and d.cpu_ops_added == () and d.tensors_a == ()
    assert d.findings[0].kind == "no_common_shape"
    assert not {"fusion", "gemms_unchanged", "same_kernels", "removed", "added"} & {f.kind for f in d.findings}
    text = plain(verdict_parts(d))
    assert text.startswith("A and B have no annotated shape in common (A ran four, B four): no kernel, op or "
                           "tensor is compared, only totals per sweep")
    # Totals: one step of each of a trace's own shapes (20 eager kernels, 16 compiled).
    assert (d.quantities["kernels"].a, d.quantities["kernels"].b) == (20, 16)


def test_sweep_cli(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["diff", str(SWEEP / "mlp_eager-sweep.json.gz"), str(SWEEP / "mlp_compile-sweep.json.gz"), "--format", "md"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "| per sweep (one step of each of 4 shapes: sum of each shape's median) |" in out
    assert "|   round-trip bytes · 64x256 (median of 3) | 402,653,184 B | 301,989,888 B | -100,663,296 B (-25.0%) |" in out
    assert "Kernel changes (one step of 64x256; the same in 12 of 12 step pairs)" in out
