"""tracekit diff: alignment rules on hand-built sequences, the noise rule, the done-when diffs on
the real H200 traces (computed data asserted apart from rendered text), gates, JSON contract, CLI."""

from __future__ import annotations

import dataclasses
import functools
import html
import io
import json
import re
from pathlib import Path

import polars as pl
import pytest

from factory import make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.results import report as report_mod
from tracekit.analyses import pipeline, profile
from tracekit.analyses.profile import KernelRef
from tracekit.commands import main
from tracekit.diff import align, diff_verdict, gates, pairwise
from tracekit.results import diff as result
from tracekit.errors import UsageError
from tracekit.load import load
from tracekit.render import FORMATS, renderer_for
from tracekit.render.gfm import md_code, md_escape
from tracekit.render.json import diff as diff_json
from tracekit.render.views.verdict import plain, verdict_parts

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
RT_BYTES = 8192 * 3072 * 2  # one bf16 [8192, 3072] intermediate


@pytest.fixture
def prof(sample):
    """``prof(name, unit=None)``: the profile of sample NAME as the CLI makes it (the execution trace
    beside the trace makes round-trip links exact); shared, computed once per run."""
    return lambda name, unit=None: sample(name).profile(unit)


def without_gaps_and_trips(p: profile.Profile) -> profile.Profile:
    """``p`` as a profile that cannot give dispatch, idle time or round trips (one assembled from
    results lacking those analyses): the figures null, the reasons in ``unavailable``."""
    gaps, trips = "launch gaps were not computed for this profile", "round trips were not computed for this profile"
    per_unit = p.per_unit.with_columns(
        pl.lit(None, pl.Int64).alias(c) for c in ("cpu_dispatch_ns", "idle_ns", "round_trip_bytes",
                                                  "round_trip_tensors", "round_trip_unknown"))
    return dataclasses.replace(p, per_unit=per_unit, tensors=p.tensors.clear(), unavailable={
        "cpu_time": gaps, "idle_time": gaps, "round_trip_bytes": trips, "round_trip_tensors": trips})


@pytest.fixture(scope="module")
def diff(sample):
    """``diff(a, b)``: the diff of samples A and B (their profiles as :func:`prof` makes them)."""
    return functools.cache(lambda a, b: pairwise.diff(sample(a).profile(), sample(b).profile()))


# --- alignment rules --------------------------------------------------------------------------

def k(name, cls="elementwise", cpu_op=None, **decoded) -> KernelRef:
    ident = profile.kernel_identity(name, cls, decoded)
    return KernelRef(ident, name, cls, cpu_op, cpu_op, decoded)


G1 = k("nvjet_A", "gemm", "aten::mm", tile="256x128")
G2 = k("nvjet_B", "gemm", "aten::mm", tile="192x128")
GELU = k("gelu_kernel", cpu_op="aten::gelu", functor="GeluCUDAKernelImpl")
MUL = k("mul_kernel", cpu_op="aten::mul", functor="MulFunctor")
EAGER = (G1, GELU, G1, MUL, G2)


def test_inductor_fusion_found_from_fused_ops_despite_reordering():
    fused = k("triton_poi_fused_gelu_mul_0", "triton_fused", "triton_poi_fused_gelu_mul_0",
              kind="pointwise", fused_ops=["gelu", "mul"])
    al = align.align(EAGER, (G1, G1, fused, G2))
    assert [(tuple(x.name for x in f.before), f.after.name, f.evidence) for f in al.fusions] == [
        (("gelu_kernel", "mul_kernel"), "triton_poi_fused_gelu_mul_0", "inductor fused_ops")]
    assert [a.name for a, _ in al.unchanged] == ["nvjet_A", "nvjet_A", "nvjet_B"]
    assert not (al.added or al.removed or al.changed)


def test_hand_written_kernel_fusion_named_by_its_launching_cpu_op():
    liger = k("_geglu_tanh_forward_kernel", "triton_custom", "LigerGELUMulFunction")
    al = align.align(EAGER, (G1, G1, liger, G2))
    assert len(al.fusions) == 1 and al.fusions[0].evidence == "launching CPU op"
    assert al.fusions[0].ops == ("gelu", "mul")


def test_positional_fusion_when_names_say_nothing():
    # Position is evidence only where the launching op agrees: MyFunction's two kernels now one.
    opaque = k("my_kernel", "triton_custom", "MyFunction")
    first, second = k("my_first_kernel", "triton_custom", "MyFunction"), k("my_second_kernel", "triton_custom", "MyFunction")
    al = align.align((G1, first, second, G2), (G1, opaque, G2))
    assert al.fusions[0].evidence == "position"
    assert [x.name for x in al.fusions[0].before] == ["my_first_kernel", "my_second_kernel"]
    # A kernel of another op in the place of aten::gelu's and aten::mul's is no fusion of them.
    al = align.align((G1, GELU, MUL, G2), (G1, opaque, G2))
    assert not al.fusions and [x.name for x in al.removed] == ["gelu_kernel", "mul_kernel"]
    assert [x.name for x in al.added] == ["my_kernel"]


def test_a_single_replacement_is_not_a_fusion():
    other = k("triton_poi_fused_gelu_0", "triton_fused", "x", kind="pointwise", fused_ops=["gelu"])
    al = align.align((G1, GELU, G2), (G1, other, G2))
    assert not al.fusions and not al.removed and not al.added
    assert [(x.name, y.name) for x, y in al.replaced] == [("gelu_kernel", other.name)]
    al = align.align((G1, GELU, G2), (G1, G2))
    assert [x.name for x in al.removed] == ["gelu_kernel"] and not al.added


def test_variant_change_lists_the_decoded_fields():
    nn = k("nvjet_nn", "gemm", "aten::mm", layout="NN", epilogue="none")
    tn = k("nvjet_tn", "gemm", "aten::mm", layout="TN", epilogue="none")
    al = align.align((nn,), (tn,))
    assert [(c.before.name, c.after.name, c.fields) for c in al.changed] == [
        ("nvjet_nn", "nvjet_tn", (("layout", "NN", "TN"),))]


def test_bias_epilogue_absorbing_an_add_is_a_fusion():
    plain = k("nvjet_NNT", "gemm", "aten::mm", epilogue="none")
    add = k("add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")
    bias = k("nvjet_bias_NNT", "gemm", "aten::addmm", epilogue="bias")
    al = align.align((plain, add), (bias,))
    assert [(f.evidence, f.ops) for f in al.fusions] == [("GEMM epilogue", ("add",))]
    assert not (al.changed or al.removed or al.added)


def test_reverse_direction_is_a_split_and_identical_sequences_are_identical():
    fused = k("triton_poi_fused_gelu_mul_0", "triton_fused", "x", kind="pointwise", fused_ops=["gelu", "mul"])
    al = align.align((G1, G1, fused, G2), EAGER)
    assert [(s.before.name, len(s.after)) for s in al.splits] == [("triton_poi_fused_gelu_mul_0", 2)]
    assert align.align(EAGER, EAGER).is_identical


def test_inductor_identity_ignores_the_graph_index():
    a = profile.kernel_identity("triton_poi_fused_add_0", "triton_fused", {"kind": "pointwise", "fused_ops": ["add"]})
    b = profile.kernel_identity("triton_poi_fused_add_3", "triton_fused", {"kind": "pointwise", "fused_ops": ["add"]})
    assert a == b


# --- noise rule -------------------------------------------------------------------------------

def test_change_smaller_than_the_spread_is_within_noise():
    q = result.quantity("gpu_time", "GPU", "ns", [100, 104, 102], [103, 101, 105])
    assert (q.a, q.b, q.delta, q.noise, q.within_noise, q.direction) == (102, 103, 1, 4, True, "within noise")
    q = result.quantity("gpu_time", "GPU", "ns", [100, 101, 102], [90, 91, 92])
    assert (q.delta, q.noise, q.within_noise, q.direction, q.delta_pct) == (-10, 2, False, "down", -9.9)
    q = result.quantity("kernels", "k", "count", [5, 5, 5], [5, 5, 5])
    assert q.within_noise and q.direction == "same"


# --- the done-when diffs on the H200 traces ---------------------------------------------------

def test_eager_to_compile_names_the_fusion_the_round_trip_and_the_compile_tax(diff):
    d = diff("mlp_eager", "mlp_compile")
    (f,) = d.alignment.fusions
    assert f.after.name == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert [x.decoded["functor"] for x in f.before] == ["GeluCUDAKernelImpl", "MulFunctor"]
    assert f.evidence == "inductor fused_ops" and f.ops == ("gelu", "mul")
    gemms = [a.name for a, b in d.alignment.unchanged if a.kernel_class == "gemm" and a.name == b.name]
    assert len(gemms) == 3
    assert not (d.alignment.added or d.alignment.removed or d.alignment.changed)
    assert d.pairs_agreeing == 3
    rt, tensors = d.quantities["round_trip_bytes"], d.quantities["round_trip_tensors"]
    assert (rt.delta, tensors.delta, rt.within_noise) == (-RT_BYTES, -1, False)
    assert [(t["producer_op"], t["consumer_op"], t["bytes"]) for t in d.tensors_fused_away] == [
        ("aten::gelu", "aten::mul", RT_BYTES)]
    tax = d.quantities["preop_tax"]
    assert tax.a == 0 and tax.b > 0 and not tax.within_noise
    assert {"cache_lookup", "pregraph_bytecode", "aot_prologue"} <= set(d.preops_b) and not d.preops_a
    gpu = d.quantities["gpu_time"]
    assert gpu.delta < 0 and not gpu.within_noise
    assert d.quantities["kernels"].delta == -1
    assert {"aten::t", "aten::transpose", "aten::gelu", "aten::mul"} <= {o.name for o in d.cpu_ops_removed}


def test_eager_to_liger_names_the_hand_written_geglu_kernel(diff):
    d = diff("mlp_eager", "mlp_liger")
    (f,) = d.alignment.fusions
    assert f.after.name == "_geglu_tanh_forward_kernel" and f.after.cpu_op == "LigerGELUMulFunction"
    assert [x.decoded["functor"] for x in f.before] == ["GeluCUDAKernelImpl", "MulFunctor"]
    assert d.quantities["round_trip_bytes"].delta == -RT_BYTES
    assert d.quantities["preop_tax"].b == 0


def test_eager_to_compiled_linear_keeps_the_gemm_and_drops_the_transpose_dispatch(diff):
    d = diff("linear_eager", "linear_compile")
    assert d.alignment.is_identical
    assert [a.name for a, _ in d.alignment.unchanged] == ["nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT"]
    removed = {o.name: o for o in d.cpu_ops_removed}
    for op in ("aten::t", "aten::transpose", "aten::as_strided"):
        assert removed[op].count == 1 and not removed[op].launches_gpu
    assert d.quantities["preop_tax"].b > 0


@pytest.mark.parametrize("name", ["mlp_eager", "mlp_compile", "linear_eager", "train_eager"])
def test_a_trace_against_itself_reports_no_change(name, diff):
    d = diff(name, name)
    assert d.alignment.is_identical and not d.structural_change
    assert all(q.delta == 0 and q.within_noise for q in d.quantities.values())
    assert diff_markdown_verdict(d).startswith("No change")


def diff_markdown_verdict(d) -> str:
    return plain(verdict_parts(d))


def test_step_quantities_match_the_core_report(sample):
    bundle = sample("mlp_eager", execution_trace=None).analyses()
    report = report_mod.build(bundle)
    p = profile.build(bundle)
    assert p.per_unit["gpu_ns"].to_list() == report.steps["gpu_busy_ns"].to_list()
    assert p.per_unit["kernels"].to_list() == [5, 5, 5]
    compiled = sample("mlp_compile", execution_trace=None).analyses()
    preops = profile.build(compiled).preops
    core = report_mod.build(compiled).compile_preops
    assert sorted(preops["cpu_ns"].to_list()) == sorted(core["cpu_ns"].to_list())


def test_unit_option_aligns_per_annotation_span(prof):
    p = prof("mlp_eager", unit="mlp_fwd")
    assert p.units == [1, 2, 3] and p.unit_labels[1] == "mlp_fwd#1"
    # Dispatch, idle time and round trips are measured per unit, whatever the units are.
    assert not p.unavailable and p.per_unit["round_trip_tensors"].to_list() == [4, 4, 4]
    d = pairwise.diff(p, prof("mlp_compile", unit="mlp_fwd"))
    assert d.alignment.fusions[0].after.name == "triton_poi_fused__unsafe_view_gelu_mul_0"
    with pytest.raises(UsageError, match="no span named"):
        prof("mlp_eager", unit="nope")


def test_missing_analyses_are_reported_unavailable_not_zero(prof):
    d = pairwise.diff(without_gaps_and_trips(prof("mlp_eager")), without_gaps_and_trips(prof("mlp_compile")))
    assert "round_trip_bytes" not in d.quantities and "cpu_time" not in d.quantities
    assert "not computed" in d.unavailable["round_trip_bytes"]
    data = diff_json.data(d)
    assert data["round_trip_bytes_per_step"] is None and data["cpu_ns_per_step"] is None
    with pytest.raises(UsageError, match="not available"):
        gates.evaluate([gates.parse("round_trip_bytes>+0")], d)


# --- JSON contract ----------------------------------------------------------------------------

def test_json_contract(diff):
    data = json.loads(_render(renderer_for("json").render, diff("mlp_eager", "mlp_compile")))
    assert data["schema"] == "tracekit.diff/1"
    assert data["fusions"][0]["after"] == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert len(data["fusions"][0]["before"]) == 2
    assert set(data["kernels"]) == {"added", "removed", "changed", "replaced", "unchanged", "count_changes",
                                    "device_choices"}
    assert set(data["gpu_ns_per_step"]) >= {"a", "b", "delta_pct", "within_noise"}
    assert data["gpu_ns_per_step"]["within_noise"] is False
    rt = data["round_trip_bytes_per_step"]
    assert rt["a"] - rt["b"] == RT_BYTES
    assert sum(u["count"] for u in data["kernels"]["unchanged"] if u["class"] == "gemm") == 3
    assert data["a"]["trace"] == "mlp_eager.json.gz"  # basenames only
    again = _render(renderer_for("json").render, diff("mlp_eager", "mlp_compile"))
    assert again == _render(renderer_for("json").render, diff("mlp_eager", "mlp_compile"))


def _render(fn, d, *args) -> str:
    out = io.StringIO()
    fn(d, out, *args)
    return out.getvalue()


# --- gates ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, metric, op, value, relative", [
    ("gpu_time>+5%", "gpu_time", ">", 5.0, True),
    ("kernels>+0", "kernels", ">", 0.0, False),
    ("round_trip_bytes > +0", "round_trip_bytes", ">", 0.0, False),
    ("cpu_time>+20us", "cpu_time", ">", 20_000.0, False),
    ("gpu_time<-10%", "gpu_time", "<", -10.0, True),
    ("idle_time>=1.5ms", "idle_time", ">=", 1_500_000.0, False),
    ("round_trip_bytes<=48MiB", "round_trip_bytes", "<=", 48 * 1024 ** 2, False),
    ("launches>2", "launches", ">", 2.0, False),
])
def test_gate_grammar(text, metric, op, value, relative):
    g = gates.parse(text)
    assert (g.metric, g.op, g.value, g.relative) == (metric, op, value, relative)


@pytest.mark.parametrize("text", ["gpu_time>5", "speed>+1%", "kernels>1us", "gpu_time=>1%",
                                  "round_trip_bytes>1us", "gpu_time"])
def test_bad_gates_are_usage_errors(text):
    with pytest.raises(UsageError):
        gates.parse(text)


def test_gates_fail_only_outside_noise(diff):
    d = diff("mlp_compile", "mlp_eager")  # the regression direction
    results = gates.evaluate([gates.parse(t) for t in (
        "gpu_time>+5%", "kernels>+0", "round_trip_bytes>+0", "launches>+1", "gpu_time>+50%")], d)
    assert [r.failed for r in results] == [True, True, True, False, False]
    noisy = result.Diff.__new__(result.Diff)  # a within-noise change never fails
    object.__setattr__(noisy, "quantities", {"gpu_time": result.quantity("gpu_time", "g", "ns", [100, 110], [106, 108])})
    object.__setattr__(noisy, "unavailable", {})
    (r,) = gates.evaluate([gates.parse("gpu_time>+1%")], noisy)
    assert r.exceeded and r.within_noise and not r.failed


# peak_memory needs [memory] events, which this trace has not (tests/analyses/test_memory.py gates it).
def test_a_metric_name_takes_the_same_unit_in_every_command():
    # TIME_METRICS and BYTE_METRICS (which renderers read) hold for diff's and compare's gates alike.
    units: dict[str, str] = {}
    for table in (gates.DIFF_GATES, gates.COMPARE_GATES):
        for metric in table.metrics:
            assert units.setdefault(metric.name, metric.unit) == metric.unit, metric.name
    assert set(gates.TIME_METRICS) == {name for name, unit in units.items() if unit == "ns"}
    assert gates.parse("cpu_time>+20us", gates.COMPARE_GATES) == gates.parse("cpu_time>+20us")


EVERY_GATE = [f"{m}{op}{v}" for m in gates.DIFF_GATES.names if m not in gates.MISSING for op in (">", ">=", "<", "<=")
              for v in (("+0",) if m not in gates.TIME_METRICS else ("+0%", "+0us"))]


def test_self_diff_exits_0_under_every_gate(capsys):
    path = str(SAMPLES / "mlp_eager.json.gz")
    args = ["diff", path, path, "--format", "json"]
    for gate in EVERY_GATE:
        args += ["--fail-if", gate]
    assert _exit(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["gates"]) == len(EVERY_GATE) and not any(g["failed"] for g in data["gates"])


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


@pytest.mark.slow
def test_cli_exit_codes_and_failed_gate_is_named(capsys, tmp_path):
    eager, compiled = str(SAMPLES / "mlp_eager.json.gz"), str(SAMPLES / "mlp_compile.json.gz")
    assert _exit(["diff", eager, compiled, "--fail-if", "gpu_time>+5%", "--fail-if", "kernels>+0",
                  "--fail-if", "round_trip_bytes>+0"]) == 0
    capsys.readouterr()
    assert _exit(["diff", compiled, eager, "--fail-if", "gpu_time>+5%", "--fail-if", "launches>+5",
                  "--format", "md"]) == 1
    out, err = capsys.readouterr()
    assert "| `gpu_time>+5%` | +12.5% | FAILED |" in out
    assert err.strip() == "tracekit: error: 1 of 2 gates failed: gpu_time>+5%"
    assert _exit(["diff", eager, compiled, "--fail-if", "gpu_time>5"]) == 2
    assert "needs a time unit" in capsys.readouterr().err
    assert _exit(["diff", eager, str(tmp_path / "missing.json")]) == 2
    capsys.readouterr()
    # CPU dispatch is measured per --unit span too: compiled dispatch is lower, the gate passes.
    assert _exit(["diff", eager, compiled, "--unit", "mlp_fwd", "--fail-if", "cpu_time>+1us"]) == 0
    assert "CPU dispatch per step" in capsys.readouterr().out
    out_file = tmp_path / "diff.md"
    assert _exit(["diff", eager, compiled, "-o", str(out_file)]) == 0
    assert out_file.read_text().startswith("### tracekit diff: `mlp_eager.json.gz`")


# --- Markdown escaping, empty and CPU-only traces ---------------------------------------------

def test_markdown_names_are_safe_on_github():
    assert md_code("a|b<script>", in_table=True) == "`a\\|b<script>`"
    assert md_code("x`y|z", in_table=True) == "x&#96;y\\|z"
    assert md_code("a|b", in_table=False) == "`a|b`"


def _tiny(tmp_path, name, kernels):
    events = [make_step(1, 0.0, 100)]
    for n, kname in enumerate(kernels):
        events += [make_op("aten::mul", 1 + 20 * n, 10), make_launch("cudaLaunchKernel", 2 + 20 * n, 2, 10 + n),
                   make_kernel(kname, 5 + 20 * n, 3, 10 + n)]
    return write_trace(tmp_path / name, events, gpu=bool(kernels))


HOSTILE = "k|<b>`x`</b>*_"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.slow
def test_every_renderer_on_empty_cpu_only_and_hostile_names(tmp_path, fmt):
    render = renderer_for(fmt).render
    empty = write_trace(tmp_path / "empty.json", [], gpu=False)
    cpu = _tiny(tmp_path, "cpu.json", [])
    hostile = _tiny(tmp_path, "hostile.json", [HOSTILE])
    verdicts = ("No change: the same kernels", "No change: the same kernels", f"{HOSTILE} added; GPU time per step "
                "0.0 µs → 3.0 µs", f"{HOSTILE} removed; GPU time per step 3.0 µs → 0.0 µs (-100.0%")
    for (a, b), verdict in zip(((empty, empty), (empty, cpu), (cpu, hostile), (hostile, cpu)), verdicts):
        pa = profile.build(pipeline.run(load(a)))
        pb = profile.build(pipeline.run(load(b)))
        text = _render(render, pairwise.diff(pa, pb), [])
        assert text.strip()
        if fmt == "md":
            assert "<b>" not in text  # HTML in names never reaches GitHub raw
        if fmt == "json":
            data = json.loads(text)
            assert data["verdict"].startswith(verdict)
            assert [s["name"] for f in data["findings"] for s in f["subjects"]] == ([HOSTILE] if HOSTILE in verdict else [])
        elif fmt == "md":
            assert f"**Verdict:** {md_escape(verdict)}" in text
        elif fmt == "svg":  # the per-class bars A vs B (tests/render/test_svg.py), or a sentence when no kernel ran
            assert text.startswith("<svg") and text.rstrip().endswith("</svg>")
            assert ("Nothing to draw" in text) == (HOSTILE not in verdict)
        elif fmt == "html":  # the page's text: tags dropped, entities decoded (names are never tags)
            assert "<b>" not in text
            assert f"Verdict: {verdict}" in html.unescape(re.sub(r"<[^>]*>", "", text))
        else:
            assert f"Verdict: {verdict}" in text


# --- findings: the verdict as data ------------------------------------------------------------

def test_eager_to_compile_findings_name_the_fusion_and_the_gpu_time(diff, sample):
    d = diff("mlp_eager", "mlp_compile")
    assert [f.kind for f in d.findings] == ["fusion", "gemms_unchanged", "gpu_time", "round_trip_bytes",
                                            "preop_tax", "cpu_time", "quiet_ops_gone", "launches"]
    fusion = d.findings[0]
    assert [s.name for s in fusion.of("after")] == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert [s.decoded["functor"] for s in fusion.of("before")] == ["GeluCUDAKernelImpl", "MulFunctor"]
    assert [s.name for s in fusion.of("op")] == ["gelu", "mul"]
    assert dict(fusion.quantities) == {"kernels": 2, "evidence": "inductor fused_ops"}
    # GPU busy per step from the core report's step table, not from the diff's own profile
    busy_a = sample("mlp_eager", execution_trace=None).report().steps["gpu_busy_ns"].to_list()
    busy_b = sample("mlp_compile", execution_trace=None).report().steps["gpu_busy_ns"].to_list()
    assert busy_a == [232_320, 231_104, 230_464] and busy_b == [202_464, 205_440, 206_849]
    (gpu,) = [f for f in d.findings if f.kind == "gpu_time"]
    assert dict(gpu.quantities) == {"a": 231_104, "b": 205_440, "delta": 205_440 - 231_104,
                                    "delta_pct": -11.1, "noise": 206_849 - 202_464, "within_noise": False}
    (rt,) = [f for f in d.findings if f.kind == "round_trip_bytes"]
    assert [(s.role, s.name) for s in rt.subjects] == [("producer", "aten::gelu"), ("consumer", "aten::mul")]
    assert (rt.quantities["bytes_delta"], rt.quantities["tensors_delta"]) == (-RT_BYTES, -1)
    (quiet,) = [f for f in d.findings if f.kind == "quiet_ops_gone"]
    assert len(quiet.subjects) == 4 and quiet.quantities["ops"] == 6
    # The renderer only words them; the JSON carries both.
    verdict = plain(verdict_parts(d))
    assert verdict.startswith("Fused gelu + mul (2 kernels) into one Inductor Triton kernel "
                              "triton_poi_fused__unsafe_view_gelu_mul_0; the three GEMMs unchanged; "
                              "GPU time per step 231.1 µs → 205.4 µs (-11.1%, outside the step-to-step noise of ±4.4 µs)")
    assert "aten::as_strided and 2 more (ops that launch no GPU work) is gone" in verdict
    data = diff_json.data(d)
    assert data["verdict"] == verdict
    assert data["findings"][0]["subjects"][2] == {"role": "after", "name": "triton_poi_fused__unsafe_view_gelu_mul_0",
                                                  "class": "triton_fused", "changes": []}
    assert data["findings"][2] == {"kind": "gpu_time", "subjects": [], "quantities": dict(gpu.quantities)}


def test_findings_name_a_few_and_count_the_rest(diff):
    ADD = k("add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")
    # A replacement needs the same launching op: each sum kernel launched by the op it replaces.
    sums = [k(f"sum{i}_kernel", "reduction", op) for i, op in enumerate(("aten::gelu", "aten::mul", "aten::add"))]
    base = diff("mlp_eager", "mlp_eager")
    replaced = align.align((G1, GELU, G1, MUL, G1, ADD, G2), (G1, sums[0], G1, sums[1], G1, sums[2], G2))
    kinds = [(f.kind, [s.name for s in f.subjects], dict(f.quantities))
             for f in diff_verdict.judge(dataclasses.replace(base, alignment=replaced))]
    assert kinds[:4] == [("replaced", ["gelu_kernel", "sum0_kernel"], {}),
                         ("replaced", ["mul_kernel", "sum1_kernel"], {}),
                         ("more_replaced", [], {"kernels": 1}), ("gemms_unchanged", [], {"kernels": 4})]
    removed = align.align((G1, GELU, MUL, ADD, G2), (G1, G2))
    d = dataclasses.replace(base, alignment=removed)
    d = dataclasses.replace(d, findings=diff_verdict.judge(d))
    assert [(f.kind, f.subjects, dict(f.quantities)) for f in d.findings][0] == ("removed", (), {"kernels": 3})
    assert plain(verdict_parts(d)).startswith("3 kernels removed; the two GEMMs unchanged; GPU time per step unchanged")
    two = dataclasses.replace(base, alignment=align.align((G1, GELU, MUL, G2), (G1, G2)))
    (first, *_) = diff_verdict.judge(two)
    assert (first.kind, [s.name for s in first.subjects]) == ("removed", ["gelu_kernel", "mul_kernel"])


# --- check items carry numbers ----------------------------------------------------------------

def test_check_items_carry_numbers_and_the_renderers_word_them(prof):
    from tracekit.diff import expect
    from tracekit.render.views.check import expected_text, observed_text
    from tracekit.session import read_expectations

    result = expect.check(prof("mlp_eager"), read_expectations(SAMPLES.parent / "expectations" / "mlp_eager.toml"))
    items = {(i.key, str(i.expected_value)): i for i in result.items}
    kernels = items["kernels", "5"]
    assert (kernels.unit, kernels.op, kernels.expected_value) == ("count", "==", 5)
    assert (kernels.observed_min, kernels.observed_max, kernels.steps, kernels.steps_met) == (5, 5, 3, 3)
    assert (expected_text(kernels), observed_text(kernels)) == ("exactly 5", "5 in every step")
    rt = items["round_trip_bytes_max", str(4 * RT_BYTES)]
    assert (rt.unit, rt.op, rt.observed_min, rt.observed_max) == ("bytes", "<=", 4 * RT_BYTES, 4 * RT_BYTES)
    gelu = items["kernels_present", "*GeluCUDAKernelImpl*"]
    assert (gelu.unit, gelu.op, gelu.steps_present, gelu.steps, gelu.met) == ("names", "present", 3, 3, True)
    assert gelu.example == "vectorized_elementwise_kernel<…>" and gelu.observed_min is None
    preops = items["compile_preops", "False"]
    assert (preops.unit, preops.expected_value, preops.steps_present, preops.steps_met) == ("bool", False, 0, 3)
    assert (expected_text(preops), observed_text(preops)) == ("absent", "absent in every step")
    busy = expect.check(prof("mlp_eager"), expect.Expectations("t", "", None, {"gpu_busy_min_pct": 10,
                                                                               "gpu_time_max_us": 240}))
    pct, time = busy.items
    assert (pct.unit, pct.expected_value, expected_text(pct)) == ("percent", 10, "≥ 10%")
    assert (time.unit, time.expected_value, expected_text(time)) == ("ns", 240_000, "≤ 240 µs")
    assert (time.observed_min, time.observed_max) == (230_464, 232_320)
    assert observed_text(time) == "230.5 µs–232.3 µs across steps"
    for fmt, line in (("md", "| kernels | `exactly 5` | 5 in every step | met |"),
                      ("term", "exactly 5"), ("json", '"expected_value": 5')):
        out = io.StringIO()
        renderer_for(fmt).render(result, out)
        assert line in out.getvalue()
    data = json.loads(_check_json(result))
    assert data["items"][0] == {"key": "kernels", "expected": "exactly 5", "observed": "5 in every step", "met": True,
                                "unit": "count", "op": "==", "expected_value": 5, "steps": 3, "steps_met": 3,
                                "observed_min": 5, "observed_max": 5, "steps_present": None, "example": None}


def _check_json(result) -> str:
    out = io.StringIO()
    renderer_for("json").render(result, out)
    return out.getvalue()


# --- alignment accounts for every kernel exactly once (property) ------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

POOL = [G1, G2, GELU, MUL,
        k("triton_poi_fused_gelu_mul_0", "triton_fused", "x", kind="pointwise", fused_ops=["gelu", "mul"]),
        k("_geglu_tanh_forward_kernel", "triton_custom", "LigerGELUMulFunction"),
        k("nvjet_bias", "gemm", "aten::addmm", epilogue="bias"),
        k("add_kernel", cpu_op="aten::add", functor="CUDAFunctor_add")]
seqs = st.lists(st.sampled_from(range(len(POOL))), max_size=9).map(lambda ix: tuple(POOL[i] for i in ix))


@settings(max_examples=300, deadline=None)
@given(seqs, seqs)
@pytest.mark.slow
def test_alignment_accounts_for_every_kernel_exactly_once(a, b):
    al = align.align(a, b)
    used_a = [x for x, _ in al.unchanged] + [x for f in al.fusions for x in f.before] + \
        [s.before for s in al.splits] + [c.before for c in al.changed] + [x for x, _ in al.replaced] + list(al.removed) + \
        [x for c in al.count_changes for x in c.before]
    used_b = [y for _, y in al.unchanged] + [f.after for f in al.fusions] + \
        [y for s in al.splits for y in s.after] + [c.after for c in al.changed] + [y for _, y in al.replaced] + list(al.added) + \
        [y for c in al.count_changes for y in c.after]
    assert sorted(map(id, used_a)) == sorted(map(id, a))  # as multisets: nothing lost or counted twice
    assert sorted(map(id, used_b)) == sorted(map(id, b))
    assert align.align(a, a).is_identical
