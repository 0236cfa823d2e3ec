"""Compilation read from the trace (tracekit/analyses/compilations.py), the units' states, and
``tracekit compare``: rule-level cases on hand-built traces, then the shipped shape-sweep traces held
against their manifest's ground truth (Dynamo's own counters and CompilationMetrics) and against the
raw trace JSON counted in plain Python, and no false positives on traces taken after compilation."""

from __future__ import annotations

import functools
import gzip
import json
import math
from pathlib import Path

import polars as pl
import pytest

import tracekit
from tracekit.analyses import steps as steps_analysis
from tracekit.diff import gates, side_by_side
from tracekit.errors import UsageError

from factory import make_annotation, make_kernel, make_launch, make_op, write_trace

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
SWEEP = SAMPLES / "compile_sweep"
REAL = Path(__file__).resolve().parents[1] / "data" / "real"
MODES = ("eager", "compile", "compile-static", "compile-dynamic", "compile-cudagraphs", "liger")


@functools.cache
def _manifest() -> dict[str, dict]:
    m = json.loads((SWEEP / "manifest.json").read_text())
    return {c["mode"].removesuffix("-sweep"): c for c in m["captures"]}


@pytest.fixture
def sweep(sample):
    """``sweep(mode)``: the report of compile_sweep/mlp_{mode}-sweep (shared: opened once per run)."""
    return lambda mode: sample(f"compile_sweep/mlp_{mode}-sweep", execution_trace=None).report()


@functools.cache
def _events(mode: str) -> list[dict]:
    return json.loads(gzip.decompress((SWEEP / f"mlp_{mode}-sweep.json.gz").read_bytes()))["traceEvents"]


def _states(report) -> dict[int, str]:
    return dict(zip(report.launch_gaps.per_step["step"].to_list(), report.launch_gaps.per_step["state"].to_list()))


# -- rule-level cases on hand-built traces -------------------------------------------------------------

def _call(i: int, t0: float, corr: int, *, shape: str = "[[8, 16], [16, 16]]", label: str | None = None,
          mm_dur: float = 20) -> list[dict]:
    """One annotated call: ``mlp_fwd#i`` holding aten::mm (with Input Dims) launching one kernel."""
    return [make_annotation(label or f"mlp_fwd#{i}", t0, 900),
            make_op("aten::mm", t0 + 1, mm_dur, **{"Input Dims": json.loads(shape)}),
            make_launch("cudaLaunchKernel", t0 + 2, 3, corr),
            make_kernel("gemm_kernel_x", t0 + 30, 10, corr)]


def _open(tmp_path, events, name="t.json"):
    return tracekit.open(write_trace(tmp_path / name, events), execution_trace=None)


def test_numbered_labels_are_one_family_of_units(tmp_path):
    events = [e for i in range(4) for e in _call(i, 1000.0 * i, 10 + i, label=f"mlp_fwd#{i} 8x16")]
    found = _open(tmp_path, events).analyses().units
    assert (found.kind, found.name) == ("span", "mlp_fwd#N")
    assert found.windows["name"].to_list() == [f"mlp_fwd#{i} 8x16" for i in range(4)]
    assert found.windows["number"].to_list() == [0, 1, 2, 3]
    # --unit names the family too.
    user = _open(tmp_path, events, "u.json").analyses("mlp_fwd#N").units
    assert (user.source, user.windows.height) == ("user", 4)


def test_a_recompile_on_new_input_dims_with_autotuning_set_aside(tmp_path):
    events = []
    for i in range(6):
        events += _call(i, 1000.0 * i, 10 + i, shape="[[8, 16], [16, 16]]" if i < 3 else "[[4, 16], [16, 16]]")
    # Unit 0 compiles frame 0 (id from Dynamo's _data annotation), then autotunes two benchmark kernels.
    events += [make_op("_compile.compile_inner (dynamo_timed)", 100, 400),
               make_annotation("compile_attempt_0_data: compile_id=0/0", 101, 1),
               make_op("bytecode_tracing (dynamo_timed)", 110, 100),
               make_op("build_guards (dynamo_timed)", 300, 50),
               make_op("CachingAutotuner.benchmark_all_configs", 600, 300),
               make_annotation("CachingAutotuner.benchmark_all_configs_data: kernel_name=k, compile_id=0/0", 601, 1),
               make_launch("cuLaunchKernel", 610, 2, 900), make_kernel("triton_poi_fused_mul_0", 615, 5, 900),
               make_launch("cuLaunchKernel", 620, 2, 901), make_kernel("triton_poi_fused_mul_0", 625, 5, 901)]
    # Unit 3 (new dims) recompiles with no _data annotation: its id comes from the region after it.
    events += [make_op("_compile.compile_inner (dynamo_timed)", 3100, 300),
               make_op("Torch-Compiled Region: 0/1", 3450, 5)]
    session = _open(tmp_path, events)
    comp = session.report().compilation
    rows = comp.compilations.select("compile_id", "step", "trigger", "changed", "cpu_ns").rows()
    assert rows == [("0/0", 0, "first", None, 400_000),
                    ("0/1", 3, "shape_change", "input 0 dim 0: 8 → 4", 300_000)]
    phases = dict(comp.phases.filter(pl.col("compile_id") == "0/0").select("phase", "cpu_ns").iter_rows())
    # 400 µs compile: 100 tracing, 50 guards, the rest Dynamo's own; plus the 300 µs autotuning.
    assert phases == {"dynamo_tracing": 100_000, "guards": 50_000, "other": 250_000, "autotuning": 300_000}
    assert comp.set_aside.select("compile_id", "work", "name", "count").rows() == [
        ("0/0", "autotune", "triton_poi_fused_mul_0", 2)]
    report = session.report()
    assert "triton_poi_fused_mul_0" not in report.kernels["name"].to_list()
    assert _states(report) == {0: "compile", 1: "steady", 2: "steady", 3: "recompile", 4: "steady", 5: "steady"}
    assert report.compilation.units["shape"].to_list()[2:4] == ["[[8, 16], [16, 16]]", "[[4, 16], [16, 16]]"]


def test_dynamic_promotion_from_pgo_evidence_and_a_graph_serving_two_shapes(tmp_path):
    events = []
    for i in range(6):
        events += _call(i, 1000.0 * i, 10 + i, shape=f"[[{8 if i < 2 else 4 if i < 4 else 2}, 16]]")
        events += [make_op(f"Torch-Compiled Region: 0/{0 if i < 2 else 1}", 1000.0 * i + 50, 5)]
    events += [make_op("_compile.compile_inner (dynamo_timed)", 100, 300),
               make_annotation("dynamo_data: compile_id=0/0", 101, 1),
               make_op("_compile.compile_inner (dynamo_timed)", 2100, 300),
               make_annotation("dynamo_data: compile_id=0/1", 2101, 1),
               make_op("pgo.dynamic_whitelist (dynamo_timed)", 2300, 5)]
    comp = _open(tmp_path, events).report().compilation
    assert comp.compilations.select("compile_id", "trigger", "dynamic", "shapes_run").rows() == [
        ("0/0", "first", False, 1), ("0/1", "dynamic_promotion", True, 2)]
    # Without the PGO span the graph running shapes 4 and 2 is evidence enough.
    events = [e for e in events if not e["name"].startswith("pgo.")]
    comp = _open(tmp_path, events, "n.json").report().compilation
    assert comp.compilations["trigger"].to_list() == ["first", "dynamic_promotion"]


def test_cuda_graph_record_and_replays_and_a_first_call_jit(tmp_path):
    events = []
    for i in range(4):
        t0 = 10000.0 * i
        events += [make_annotation(f"step#{i}", t0, 3000)]
        if i == 1:
            events += [make_op("CUDAGraphNode.record", t0 + 5, 50),
                       make_launch("cudaGraphInstantiateWithFlags", t0 + 10, 20, 500 + i)]
        if i >= 1:
            events += [make_launch("cudaGraphLaunch", t0 + 100, 5, 600 + i), make_kernel("gemm_x", t0 + 110, 10, 600 + i)]
        # A hand-written Triton kernel whose first call took 2 ms (JIT), later ones 20 µs.
        events += [make_op("MyTritonOp", t0 + 200, 2000 if i == 0 else 20),
                   make_launch("cuLaunchKernel", t0 + 205, 3, 700 + i),
                   make_kernel("_my_kernel_fwd", t0 + (2300 if i == 0 else 250), 10, 700 + i)]
    comp = _open(tmp_path, events).report().compilation
    assert comp.units.select("step", "graph_records", "graph_replays").rows() == [
        (0, 0, 0), (1, 1, 1), (2, 0, 1), (3, 0, 1)]
    assert comp.jit.select("kernel", "op", "step", "first_ns", "later_ns", "jit_ns").rows() == [
        ("_my_kernel_fwd", "MyTritonOp", 0, 2_000_000, 20_000, 1_980_000)]
    report = _open(tmp_path, events, "r.json").report()
    assert _states(report) == {0: "jit_warmup", 1: "graph_record", 2: "steady", 3: "steady"}


def test_a_trace_without_compilation_has_no_section_in_any_format(tmp_path):
    events = [e for i in range(3) for e in _call(i, 1000.0 * i, 10 + i)]
    report = _open(tmp_path, events).report()
    assert not report.compilation.found and report.compilation.compilations.height == 0
    from tracekit.render import RENDERERS
    import io

    for name in ("term", "md"):
        out = io.StringIO()
        RENDERERS[name].render(report, out)
        assert "Compilation" not in out.getvalue(), name


def test_every_renderer_reports_an_empty_and_a_cpu_only_trace(tmp_path):
    import io

    from tracekit.render import RENDERERS

    # An empty trace has no unit to measure; a CPU-only one runs 0 ns of GPU work per call.
    for name, events, gpu, reason in (("empty", [], True, "unmeasured"),
                                      ("cpu", [make_op("aten::add", 0, 5)], False, "immediately")):
        path = write_trace(tmp_path / f"{name}.json", events, gpu=gpu)
        report = tracekit.open(path, execution_trace=None).report()
        comparison = side_by_side.compare([("a", report), ("b", report)])
        assert comparison.rows[1].break_even.reason == reason
        for renderer in RENDERERS.values():
            renderer.render(report, io.StringIO())
            if renderer.name == "svg":  # no picture for compare: one line, exit 2
                from tracekit.errors import UsageError

                with pytest.raises(UsageError, match="--format svg draws"):
                    renderer.render(comparison, io.StringIO())
                continue
            renderer.render(comparison, io.StringIO())


# -- the shipped sweep, against its manifest and the raw JSON ------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_the_calls_that_compiled_are_dynamos(mode, sweep):
    gt = _manifest()[mode]["ground_truth"]
    report = sweep(mode)
    comp = report.compilation
    # The units are the calls: mlp_fwd#<call> <b>x<s>, numbered as the manifest's calls.
    assert report.steps["name"].to_list() == [c["annotation"] for c in _manifest()[mode]["calls"]]
    assert comp.compilations["step"].to_list() == gt["compiled_calls"]
    assert comp.compilations["compile_id"].to_list() == gt["compile_ids"]
    assert comp.totals()["recompiles"] == gt["recompiles"] == len(gt["recompile_reasons"])
    states = _states(report)
    assert [s for s, st in states.items() if st in ("compile", "recompile")] == gt["compiled_calls"]
    if mode in ("eager", "liger"):
        assert "recompile" not in states.values() and not comp.work.height
    # Each compilation's CPU time is the one Dynamo measured (CompilationMetrics, µs) within 1 ms; its
    # autotuning likewise (runtime_triton_autotune_time_us).
    metrics = {m["compile_id"]: m for c in _manifest()[mode]["calls"] for m in c["compilations"]}
    autotune = {}
    for c in _manifest()[mode]["calls"]:
        for m in c["runtime_compilations"]:
            autotune[m["compile_id"]] = autotune.get(m["compile_id"], 0) + m.get("runtime_triton_autotune_time_us", 0)
    for r in comp.compilations.iter_rows(named=True):
        assert abs(r["cpu_ns"] / 1000 - metrics[r["compile_id"]]["duration_us"]) < 1000, r["compile_id"]
        assert abs(r["autotune_ns"] / 1000 - autotune[r["compile_id"]]) < 1000, r["compile_id"]
        # The phases add up to the compilation's total.
        phases = comp.phases.filter(pl.col("compile_id") == r["compile_id"])["cpu_ns"].sum()
        assert phases == r["total_ns"]


def test_triggers_name_the_recompile_cause_and_the_dims(sweep):
    # Default dynamic handling: Dynamo marked the batch dim dynamic after the first size mismatch
    # ("size mismatch at index 0") and seq after the second: both recompiles hold pgo.dynamic_whitelist.
    rows = sweep("compile").compilation.compilations.select("compile_id", "trigger", "dynamic", "changed").rows()
    # Dims: aten::mm's Input Dims in the call before and the recompiling call, checked in the raw JSON
    # (call 3: [[8192, 768], [768, 3072], [8192, 3072]], call 4: [[4096, 768], …]; call 11 [[6144, …]],
    # call 12 [[16384, …]]).
    assert rows == [("0/0", "first", False, None),
                    ("0/1", "dynamic_promotion", True, "input 0 dim 0: 8192 → 4096; input 2 dim 0: 8192 → 4096"),
                    ("0/2", "dynamic_promotion", True, "input 0 dim 0: 6144 → 16384; input 2 dim 0: 6144 → 16384")]
    static = sweep("compile-static").compilation.compilations
    assert static["trigger"].to_list() == ["first", "shape_change", "shape_change", "shape_change"]
    assert not static["dynamic"].any()
    dynamic = sweep("compile-dynamic").compilation.compilations
    assert dynamic.select("trigger", "dynamic", "steps_run", "shapes_run").rows() == [("first", True, 16, 4)]
    # Under CUDA graphs the shape key is the input copy's TensorList: the dims read as batch x seq.
    graphs = sweep("compile-cudagraphs").compilation.compilations["changed"].to_list()
    assert graphs[1] == "input 0[0] dim 0: 64 → 32; input 1[0] dim 0: 64 → 32"


@pytest.mark.parametrize("mode", ["compile", "compile-static", "compile-dynamic", "compile-cudagraphs"])
@pytest.mark.slow
def test_autotuning_kernels_are_set_aside_as_counted_in_the_raw_json(mode, sweep):
    events = _events(mode)
    # Plain Python over the raw JSON: GPU activity whose launch call (same correlation) starts inside an
    # outermost compile-work span on its thread.
    work_names = ("_compile.compile_inner (dynamo_timed)", "CachingAutotuner.benchmark_all_configs",
                  "CUDAGraphNode.record", "cudagraphify.get_container (dynamo_timed)")
    spans = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X" and e.get("name") in work_names]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    aside = 0
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(e["args"].get("correlation"))
        if launch and any(t == launch["tid"] and a <= launch["ts"] < b for t, a, b in spans):
            aside += 1
    comp = sweep(mode).compilation
    assert comp.totals()["set_aside_count"] == aside > 800
    names = set(comp.set_aside["name"].to_list())
    assert "triton_poi_fused__unsafe_view_gelu_mul_0" in names and "Memcpy DtoD (Device -> Device)" in names
    # Kept out of the workload: the L2-flush fills are in no kernel table, and every steady call runs
    # exactly the compiled graph's kernels.
    report = sweep(mode)
    assert not [n for n in report.kernels["name"].to_list() if "FillFunctor" in n]
    per_step = report.launch_gaps.per_step.join(report.steps.select(pl.col("number").alias("step"), "kernel_count"),
                                                on="step")
    expected = 5 if mode == "compile-cudagraphs" else 4  # 3 GEMMs + the fused Triton kernel (+ input copy)
    assert set(per_step.filter(pl.col("steady"))["kernel_count"].to_list()) == {expected}


@pytest.mark.slow
def test_cuda_graph_records_and_replays_match_the_manifest(sweep):
    gt = _manifest()["compile-cudagraphs"]["ground_truth"]
    report = sweep("compile-cudagraphs")
    units = report.compilation.units
    assert units.filter(pl.col("graph_record"))["step"].to_list() == gt["cudagraph_record_calls"] == [1, 5, 9, 13]
    # A recording call launches the graph it recorded: every call from a record on replays it.
    assert units.filter(pl.col("graph_replays") > 0)["step"].to_list() == sorted(
        gt["cudagraph_record_calls"] + gt["cudagraph_replay_calls"])
    assert report.compilation.totals()["graph_replays"] == sum(
        1 for e in _events("compile-cudagraphs") if e.get("name") == "cudaGraphLaunch") == 12
    states = _states(report)
    assert [s for s, st in states.items() if st == "graph_record"] == [1, 5, 9, 13]
    # Call 8 is the CUDA-graph trees' warm-up of a new shape (no Dynamo compile): cold.
    assert states[8] == "cold" and 8 in gt["cudagraph_warmup_calls"] and 8 not in gt["compiled_calls"]


def test_liger_jits_on_its_first_call_only(sweep):
    gt = _manifest()["liger"]["ground_truth"]
    report = sweep("liger")
    jit = report.compilation.jit.row(0, named=True)
    assert report.compilation.jit.height == 1 and gt["jit_calls"] == [jit["step"]] == [0]
    assert (jit["kernel"], jit["op"]) == ("_geglu_tanh_forward_kernel", "LigerGELUMulFunction")
    # The op's first call: 338.93 ms (raw JSON: LigerGELUMulFunction dur 338928.982 µs) inside a call
    # of 340.9 ms wall (manifest); its later 15 calls take a median of 114.5 µs.
    assert jit["first_ns"] == 338_928_982 and jit["later_count"] == 15
    assert jit["first_ns"] < _manifest()["liger"]["calls"][0]["wall_us"] * 1000
    assert _states(report)[0] == "jit_warmup" and report.compilation.compilations.height == 0


def test_eager_new_shapes_are_cold_not_compiled(sweep):
    states = _states(sweep("eager"))
    # Call 0 (102 ms, cuBLAS start-up) and each new shape's first call (manifest: 0.7, 4.5, 1.3 ms
    # against at most 0.6 ms for the others) are cold.
    assert [s for s, st in states.items() if st != "steady"] == [0, 4, 8, 12]
    assert set(states[s] for s in (0, 4, 8, 12)) == {"cold"}


def _steady_kernels(session: tracekit.Session, steps: list[int] | None = None) -> pl.DataFrame:
    a = session.analyses()
    keep = a.steps.filter(pl.col("steady"))
    if steps is not None:
        keep = keep.filter(pl.col("step").is_in(steps))
    gpu = a.attribution.gpu.filter((pl.col("kind") == "kernel") & pl.col("step").is_in(keep["step"].implode()))
    return (gpu.group_by("step", "name").agg(n=pl.len(), ns=pl.col("dur").sum())
            .group_by("name").agg(n=pl.col("n").unique().sort(), median=pl.col("ns").median(),
                                  spread=pl.col("ns").max() - pl.col("ns").min()).sort("name"))


@pytest.mark.slow
def test_steady_kernels_of_the_sweep_equal_the_post_compile_trace_at_the_same_shape(sample):
    ref = _steady_kernels(sample("mlp_compile", execution_trace=None))
    for mode in ("compile", "compile-static", "compile-dynamic", "compile-cudagraphs"):
        steps = [2, 3] if mode == "compile-cudagraphs" else [1, 2, 3]  # the 64x128 steady calls
        got = _steady_kernels(sample(f"compile_sweep/mlp_{mode}-sweep", execution_trace=None), steps)
        if mode == "compile-cudagraphs":  # the replay copies the input into the graph's static buffer
            got = got.filter(~pl.col("name").str.contains("multi_tensor_apply_kernel"))
        assert got.select("name", "n").rows() == ref.select("name", "n").rows(), mode
    # Times: with dynamic=False the sweep's 64x128 graph is mlp_compile's, kernel for kernel, within the
    # step-to-step spread of either trace.
    got = _steady_kernels(sample("compile_sweep/mlp_compile-static-sweep", execution_trace=None), [1, 2, 3])
    for a, b in zip(got.iter_rows(named=True), ref.iter_rows(named=True)):
        assert abs(a["median"] - b["median"]) <= max(a["spread"], b["spread"]), a["name"]
    # The default-compile sweep autotuned its first graph's Triton kernel to another launch config
    # (raw JSON: grid [49152,1,1] block [256,1,1], 55.6 µs, against [24576,1,1] x [128,1,1], 37.2 µs).
    triton = [e for e in _events("compile") if e.get("cat") == "kernel"
              and e["name"] == "triton_poi_fused__unsafe_view_gelu_mul_0" and 54_000 < e["dur"] * 1000 < 57_000]
    assert {tuple(e["args"]["grid"]) for e in triton} == {(49152, 1, 1)}


# -- no false positives -----------------------------------------------------------------------------------

POST_COMPILE = ["mlp_compile", "mlp_compile-cudagraphs", "linear_compile", "matmul_add_compile-64",
                "matmul_add_compile-4096", "mlp_liger", "antipatterns/antipatterns_pointwise-fused"]
EAGER = ["mlp_eager", "linear_eager", "matmul_add_eager-64", "matmul_add_eager-4096", "train_eager",
         "antipatterns/antipatterns_cold-first-step", "antipatterns/antipatterns_healthy", "memory/mlp_eager-memory"]


@pytest.mark.parametrize("stem", POST_COMPILE + EAGER)
def test_traces_taken_after_compilation_report_no_compilation(stem, sample):
    report = sample(stem, execution_trace=None).report()
    comp = report.compilation
    t = comp.totals()
    assert (t["compilations"], t["recompiles"], t["jits"], t["set_aside_count"], t["graph_records"]) == (0, 0, 0, 0, 0)
    assert not set(_states(report).values()) & {"compile", "recompile", "graph_record", "jit_warmup"}
    # Replays of a graph recorded before the trace are replays, not records.
    assert t["graph_replays"] == (3 if stem == "mlp_compile-cudagraphs" else 0)


@pytest.mark.parametrize("path", sorted(REAL.glob("*.json.gz")), ids=lambda p: p.name[:40])
@pytest.mark.slow
def test_real_traces_show_no_compilation(path):
    comp = tracekit.open(path, execution_trace=None).report().compilation
    t = comp.totals()
    assert (t["compilations"], t["recompiles"], t["jits"], t["set_aside_count"]) == (0, 0, 0, 0)


# -- tracekit compare -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def comparison(sample):
    reports = [(f"mlp_{m}-sweep", sample(f"compile_sweep/mlp_{m}-sweep", execution_trace=None).report()) for m in MODES]
    return side_by_side.compare(reports)


def test_compare_rows_and_break_even_follow_the_formula(comparison):
    c = comparison
    rows = {r.label.removeprefix("mlp_").removesuffix("-sweep"): r for r in c.rows}
    assert c.baseline_label == "mlp_eager-sweep" and rows["eager"].break_even is None
    assert [(m, rows[m].compilations, rows[m].recompiles) for m in MODES] == [
        ("eager", 0, 0), ("compile", 3, 2), ("compile-static", 4, 3), ("compile-dynamic", 1, 0),
        ("compile-cudagraphs", 3, 2), ("liger", 0, 0)]
    assert {r.shapes for r in c.rows} == {4}
    eager = rows["eager"]
    for m in MODES[1:]:
        r = rows[m]
        # Every compiled or hand-tuned variant saves GPU time per call, but this sweep of small calls
        # is bound by the CPU: each costs more wall time per call than eager (303.8 µs), so none pays
        # off — the break-even counts wall time, not the GPU time a CPU-bound loop never waits for.
        extra, saving = r.one_off_ns - eager.one_off_ns, eager.wall_ns - r.wall_ns
        assert eager.gpu_ns - r.gpu_ns > 0
        assert extra > 0 and saving < 0 and r.break_even.reason == "slower" and r.break_even.calls is None
        assert (r.break_even.extra_ns, r.break_even.saving_ns) == (extra, saving)
    assert rows["liger"].one_off_ns == rows["liger"].jit_ns == 338_814_466
    assert rows["compile-cudagraphs"].graph_records == 4
    kinds = [(f.kind, f.subject) for f in c.findings]
    assert kinds[:5] == [("compiled", "mlp_compile-sweep"), ("compiled", "mlp_compile-static-sweep"),
                         ("compiled", "mlp_compile-dynamic-sweep"), ("compiled", "mlp_compile-cudagraphs-sweep"),
                         ("jit", "mlp_liger-sweep")]
    liger = c.findings[4].quantities
    assert liger["versus"] == "mlp_compile-dynamic-sweep"
    assert liger["versus_pct"] == pytest.approx(100 * (rows["liger"].gpu_ns / rows["compile-dynamic"].gpu_ns - 1))


def test_steady_cost_per_call_weights_each_shape_by_its_calls():
    summary = pl.DataFrame({
        "shape": ["a", "a", "a", "b", "b", "b"], "steady": [False, True, True, False, True, True],
        "state": ["compile", "steady", "steady", "cold", "steady", "steady"],
        "gpu_busy_ns": [9, 100, 110, 9, 300, 320], "cpu_dispatch_ns": [9, 50, 50, 9, 60, 60],
        "wall_ns": [9, 150, 150, 9, 400, 400]})
    from tracekit.analyses.compilations import steady

    got = steady(summary)
    assert (got["gpu_ns"], got["cpu_dispatch_ns"], got["wall_ns"]) == (208, 55, 275)  # (105 + 310) / 2 …
    assert got["set_aside"] == {"compile": 1, "cold": 1} and got["steady_units"] == 4


@pytest.mark.slow
def test_compare_command_in_every_format_and_its_gates(tmp_path):
    from tracekit.commands import main

    paths = [str(SWEEP / f"mlp_{m}-sweep.json.gz") for m in ("compile", "liger")]
    out = tmp_path / "c.json"
    with pytest.raises(SystemExit) as done:
        main(["compare", *paths, "--baseline", str(SWEEP / "mlp_eager-sweep.json.gz"), "-o", str(out),
              "--fail-if", "recompiles>0", "--fail-if", "jit_time>1s"])
    assert done.value.code == 1
    data = json.loads(out.read_text())
    assert data["schema"] == "tracekit.compare/1" and data["baseline"] == "mlp_eager-sweep"
    assert [r["label"] for r in data["rows"]] == ["mlp_eager-sweep", "mlp_compile-sweep", "mlp_liger-sweep"]
    outcome = {g["expr"]: (g["failed"], g["traces"]) for g in data["gates"]}
    assert outcome == {"recompiles>0": (True, ["mlp_compile-sweep"]), "jit_time>1s": (False, [])}
    assert any("never pays off against mlp_eager-sweep: its steady wall time per call is not shorter" in line
               for line in data["verdict"])
    md = tmp_path / "c.md"
    with pytest.raises(SystemExit) as done:
        main(["compare", *paths, "-o", str(md)])
    assert done.value.code == 0
    text = md.read_text()
    assert "| mlp\\_compile-sweep |" in text and "baseline: mlp\\_compile-sweep" in text


def test_compare_gates_parse_like_diffs():
    assert gates.parse("compile_time>2s", gates.COMPARE_GATES).value == 2e9
    with pytest.raises(UsageError, match="unknown metric 'kernels'"):
        gates.parse("kernels>0", gates.COMPARE_GATES)
    with pytest.raises(UsageError, match="needs a time unit"):
        gates.parse("gpu_time>5", gates.COMPARE_GATES)


def test_compare_gates_test_every_trace_and_relative_ones_against_the_baseline(comparison):
    c = comparison
    base = c.rows[c.baseline]
    change = {r.label: 100.0 * (r.gpu_ns / base.gpu_ns - 1.0) for r in c.rows if not r.is_baseline}
    assert all(pct < 0 for pct in change.values())  # every compiled or hand-tuned variant saves GPU time
    faster, slower, most = gates.evaluate_comparison(
        [gates.parse(t, gates.COMPARE_GATES) for t in ("gpu_time<-0%", "gpu_time>+0%", "recompiles>=3")], c)
    assert faster.failed and faster.traces == tuple(change) and faster.observed == min(change.values())
    assert not slower.failed and slower.traces == () and slower.observed == max(change.values())
    assert most.traces == ("mlp_compile-static-sweep",) and most.observed == 3
    assert not faster.within_noise  # a comparison has no noise test: exceeded is failed
    with pytest.raises(UsageError, match="not a metric of tracekit compare"):
        gates.evaluate_comparison([gates.parse("kernels>0")], c)


def test_report_shows_a_compilation_section_and_json_key(sweep):
    import io

    from tracekit.render import RENDERERS

    report = sweep("compile")
    out = io.StringIO()
    RENDERERS["md"].render(report, out)
    md = out.getvalue()
    assert "## Compilation: frame compilations (dims of aten::mm)" in md
    assert "| 0/1 | mlp\\_fwd#4 32x128 | recompile, dynamic-shape promotion | dynamic |" in md
    assert "3 frame compilations (2 recompiles: 2 dynamic-shape promotions), 3.21 s of CPU" in md
    assert "**steady units**: 13 of 16 steady; set aside: 1 compile, 2 recompile" in md
    out = io.StringIO()
    RENDERERS["json"].render(report, out)
    data = json.loads(out.getvalue())
    assert data["compilation"]["totals"]["recompiles"] == 2
    assert data["set_aside_units"] == {"0": "compile", "4": "recompile", "12": "recompile"}
    assert [s["state"] for s in data["launch_gaps"]["steps"]][:5] == ["compile", "steady", "steady", "steady",
                                                                       "recompile"]


def test_tag_steps_into_another_column():
    frame = pl.DataFrame({"ts": [5, 15, 25], "step": [1, 1, 1]})
    windows = pl.DataFrame({"number": [7], "ts": [10], "end": [20]})
    out = steps_analysis.tag_steps(frame, windows, "ts", "_span")
    assert out["_span"].to_list() == [None, 7, None] and out["step"].to_list() == [1, 1, 1]


@pytest.mark.slow
def test_the_docs_show_a_real_compare_run(request, tmp_path):
    """docs/guide/compile.md shows ``tracekit compare`` of the sweep as it prints today (its producer
    in tests/doc_blocks.py; refresh with ``pytest --update-goldens``), and ``-o`` writes the same."""
    from doc_blocks import COMPARE_MODES, check_block, compare_example

    from tracekit.commands import main

    assert COMPARE_MODES == MODES
    out = tmp_path / "c.md"
    with pytest.raises(SystemExit) as done:
        main(["compare", *[str(SWEEP / f"mlp_{m}-sweep.json.gz") for m in MODES], "--format", "md", "-o", str(out)])
    assert done.value.code == 0
    assert "Lowest steady GPU time per call: mlp\\_compile-dynamic-sweep, 216.7 µs." in out.read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8").strip().splitlines()[-1] in compare_example()
    check_block(request, "COMPARE")


def test_hostile_trace_names_are_escaped_in_compare(tmp_path):
    from tracekit.commands import main

    name = "x [a](e.example) @me #1 `b` c|d \x1b[31m"
    events = [e for i in range(3) for e in _call(i, 1000.0 * i, 10 + i)]
    first = write_trace(tmp_path / f"{name}.json", events)
    second = write_trace(tmp_path / "plain.json", events)
    md_parts = ("\\[a\\](e.example)", "@&#8203;me", "#&#8203;1", "&#96;b&#96;", "c\\|d", "\\x1b\\[31m")
    for fmt, check in (("md", lambda s: all(p in s for p in md_parts) and "\x1b" not in s),
                       ("term", lambda s: "\x1b" not in s and "\\x1b[31m" in s),
                       ("json", lambda s: json.loads(s)["rows"][0]["label"] == name)):
        out = tmp_path / f"out.{fmt}"
        with pytest.raises(SystemExit) as done:
            main(["compare", str(first), str(second), "--format", fmt, "-o", str(out)])
        assert done.value.code == 0 and check(out.read_text(encoding="utf-8")), fmt


@pytest.mark.slow
def test_unit_shape_keys_do_not_depend_on_the_files_whitespace(tmp_path):
    """The sweep re-saved minified (as other tools re-save traces) and indented keys its units by
    the same shapes as Kineto's own file, written as Kineto writes them."""
    import msgspec

    doc = json.loads(gzip.decompress((SWEEP / "mlp_compile-sweep.json.gz").read_bytes()))
    minified, indented = tmp_path / "min.json", tmp_path / "indented.json"
    minified.write_bytes(msgspec.json.encode(doc))
    indented.write_text(json.dumps(doc, indent=3))
    assert b'"Input Dims":[[' in minified.read_bytes()  # the re-saved text really differs
    keys = [tracekit.open(path).report().compilation.units.select("step", "shape").rows()
            for path in (SWEEP / "mlp_compile-sweep.json.gz", minified, indented)]
    assert keys[0] == keys[1] == keys[2]
    # The key op multiplies the flattened [batch x seq, 768] input by a [768, 3072] weight.
    rows = [batch * seq for batch, seq, _ in _manifest()["compile"]["shapes"]["sweep"]]
    assert {shape for _, shape in keys[0]} == {f"[[{n}, 768], [768, 3072], [{n}, 3072]]" for n in rows}
