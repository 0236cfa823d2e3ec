"""Serving and generation loops: the repeated forward as units, prefill vs decode, engines' labels,
cost per token, the serving section in every format and in ``diff``.

Hand counts: the figures asserted for the generate()-like trace follow from :func:`factory.make_generate`'s
fixed times (a forward every 200 µs, the last period running to the last CPU event at 700 µs); those of
the public vLLM trace were counted from its raw JSON by a separate script (no tracekit: annotations
``execute_context_0(0)_generation_4(4)`` → units, kernels/memcpys/memsets by the correlation of their
launch call inside the annotation, wall = max(CPU span, GPU window)): 10 decode iterations, 40 tokens,
763,432.829 µs of wall, 19,085.82 µs per decode token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from factory import make_annotation, make_generate, make_kernel, make_launch, make_op, write_trace

import tracekit
from tracekit.analyses import attribution, serving_labels, units as units_mod
from tracekit.commands import main as _main
from tracekit.load import load

REAL = Path(os.environ.get("TRACEKIT_REAL_TRACES", "")) if os.environ.get("TRACEKIT_REAL_TRACES") else None
VLLM = "Navi-AI-Lab__nvllm__vllm-gb10-flashinfer-cudagraph-decode.json.gz"


def _units(path, unit=None):
    trace = load(path)
    return units_mod.detect(trace, attribution.analyze(trace).gpu, unit)


# -- units of a loop without annotations ------------------------------------------------------

def test_a_generate_loop_splits_at_its_repeated_forward(tmp_path):
    found = _units(write_trace(tmp_path / "g.json", make_generate()))
    assert (found.kind, found.name, found.source, found.partial) == ("period", "from:aten::embedding", "auto", (4,))
    # One unit per forward: 0, 200, 400 µs, the last to the last CPU event (aten::cat ends at 700 µs).
    assert found.windows.select("name", "ts", "end").rows() == [
        ("forward#1", 0, 200_000), ("forward#2", 200_000, 400_000), ("forward#3", 400_000, 600_000),
        ("forward#4", 600_000, 700_000)]
    offered = found.candidates.filter(pl.col("name").str.starts_with("from:"))
    assert offered.row(0, named=True) | {} == {"name": "from:aten::embedding", "cat": "cpu_op", "occurrences": 4,
                                               "top_level": True, "coverage": 1.0, "first_ns": 0, "alike": 4}
    # aten::argmax's periods start at 60 µs: the prefill's embedding..linears (6 of 36 launches) fall before.
    argmax = offered.filter(pl.col("name") == "from:aten::argmax").row(0, named=True)
    assert (argmax["occurrences"], argmax["coverage"], argmax["alike"]) == (4, pytest.approx(30 / 36), 3)


def test_the_offered_candidate_is_usable_with_unit(tmp_path):
    found = _units(write_trace(tmp_path / "g.json", make_generate()), "from:aten::argmax")
    assert (found.kind, found.source, found.windows["ts"].to_list()) == (
        "period", "user", [60_000, 260_000, 460_000, 660_000])


def test_a_layer_that_repeats_is_offered_not_chosen(tmp_path):
    # Two forwards only: too few for a loop; the whole trace, with the best candidate named in the rule:
    # aten::add (a layer op) starts after the prefill's embedding and first linear (2 of 18 launches),
    # and of its 4 periods the 1st and 3rd (add, linear) are alike.
    found = _units(write_trace(tmp_path / "g.json", make_generate(new_tokens=2)))
    assert found.kind == "trace"
    assert ("the best candidate, --unit 'from:aten::add', holds 88.9% of the launches in 4 periods, 2 of them "
            "alike") in found.rule


# -- engines' labels --------------------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("execute_context_0(0)_generation_4(4)", ("vllm", "decode", 0, 0, 4, 4)),
    ("execute_context_2(1024)_generation_3(3)", ("vllm", "mixed", 2, 1024, 3, 3)),
    ("execute_new_1_cached_0", ("vllm", "prefill", 1, None, 0, None)),
    ("step[EXTEND bs=2 toks=300]", ("sglang", "prefill", 2, 300, None, None)),
    ("step[DECODE bs=32]", ("sglang", "decode", None, None, 32, 32)),
    ("step[DECODE bs=2 g_sq=2 g_sqsq=2 g_sqsk=30 g_sk=30]", ("sglang", "decode", None, None, 2, 2)),
    ("step[TARGET_VERIFY bs=4]", ("sglang", "other", None, None, None, None)),
    ("[Executor] _forward_step 12: 0 ctx reqs, 8 gen reqs", ("tensorrt-llm", "decode", 0, None, 8, None)),
    ("_forward_step: 1 ctx reqs, 0 gen reqs", ("tensorrt-llm", "prefill", 1, None, 0, None)),
])
def test_engine_labels_parse(name, expected):
    label = serving_labels.parse(name)
    assert (label.engine, label.phase, label.prefill_requests, label.prefill_tokens, label.decode_requests,
            label.decode_tokens) == expected
    assert serving_labels.parse("draft step[DECODE bs=2]") is None and serving_labels.parse("mlp_fwd") is None


def _vllm_iteration(name, t0, corr, kernel_us):
    return [make_annotation(name, t0, 50), make_op("aten::mm", t0 + 1, 10),
            make_launch("cudaLaunchKernel", t0 + 2, 2, corr),
            make_kernel("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", t0 + 5, kernel_us, corr)]


def test_vllm_labels_that_differ_are_one_family_with_their_phases(tmp_path):
    names = ["execute_context_1(100)_generation_0(0)", "execute_context_0(0)_generation_1(1)",
             "execute_context_1(20)_generation_1(1)", "execute_context_0(0)_generation_2(2)"]
    events = [e for i, n in enumerate(names) for e in _vllm_iteration(n, 100.0 * i, i + 1, 10)]
    path = write_trace(tmp_path / "v.json", events)
    found = _units(path)
    assert (found.kind, found.name) == ("span", "execute_context_N(ctx)_generation_M(gen)")
    assert found.windows["name"].to_list() == names
    served = tracekit.open(path, execution_trace=None).report().serving
    assert served.source == "vllm"
    it = served.iterations
    assert it.select("phase", "requests", "tokens").rows() == [
        ("prefill", 1, 100), ("decode", 1, 1), ("mixed", 2, 21), ("decode", 2, 2)]
    # Every unit's wall is its 50 µs span (its kernel ends inside it).
    phases = {r["phase"]: r for r in served.phases.iter_rows(named=True)}
    assert (phases["decode"]["iterations"], phases["decode"]["tokens"], phases["decode"]["wall_ns"]) == (2, 3, 100_000)
    assert phases["decode"]["ns_per_token"] == pytest.approx(100_000 / 3)
    assert phases["prefill"]["ns_per_token"] == pytest.approx(500.0)
    assert phases["mixed"]["ns_per_token"] == pytest.approx(50_000 / 21)


# -- prefill vs decode from shapes -------------------------------------------------------------

def test_a_generate_loop_has_a_prefill_and_decode_steps(tmp_path):
    report = tracekit.open(write_trace(tmp_path / "g.json", make_generate()), execution_trace=None).report()
    served = report.serving
    assert served.source == "shapes"
    assert served.iterations.select("step", "phase", "tokens", "wall_ns", "state", "in_window").rows() == [
        (1, "prefill", 6, 200_000, "steady", True), (2, "decode", 1, 200_000, "steady", True),
        (3, "decode", 1, 200_000, "steady", True), (4, "decode", 1, 100_000, "partial", False)]
    phases = {r["phase"]: r for r in served.phases.iter_rows(named=True)}
    # Prefill: 200 µs (its CPU period; its GPU window is shorter) for 6 tokens.
    assert (phases["prefill"]["tokens"], phases["prefill"]["wall_ns"], phases["prefill"]["ns_per_token"]) == (
        6, 200_000, pytest.approx(200_000 / 6))
    assert (phases["decode"]["iterations"], phases["decode"]["tokens"], phases["decode"]["wall_ns"]) == (3, 3, 500_000)
    # Decode GPU busy per step: kernels 2+6+1+6+1+10+2 + memcpy 1 + cat 1 = 30 µs (none overlap).
    assert phases["decode"]["gpu_busy_ns"] == 90_000
    assert served.window == {"first": 1, "last": 3, "iterations": 3, "after": None}
    assert served.per_token("decode") == pytest.approx(200_000.0)  # the steady window: units 2, 3
    decode = served.classes.filter(pl.col("phase") == "decode")
    assert decode.row(0, named=True)["kernel_class"] == "gemm" and decode["gpu_ns"][0] == 66_000  # 3 × 22 µs


def test_a_training_trace_is_no_serving_loop(tmp_path):
    events = make_generate(prompt_len=6, new_tokens=4)
    for e in events:  # every forward a full sequence: training-like, never one token
        if e.get("name") == "aten::embedding":
            e["args"]["Input Dims"] = [[32000, 64], [8, 512]]
    assert tracekit.open(write_trace(tmp_path / "t.json", events), execution_trace=None).report().serving is None


# -- every format and diff --------------------------------------------------------------------

def cli_main(argv):
    with pytest.raises(SystemExit) as exc:
        _main(argv)
    return exc.value.code


def _run(args, capsys):
    code = cli_main(args)
    return code, capsys.readouterr().out


def test_the_serving_section_in_every_format(tmp_path, capsys):
    path = str(write_trace(tmp_path / "g.json", make_generate()))
    code, out = _run(["report", path, "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["serving"]["source"] == "shapes"
    assert [(p["phase"], p["tokens"], p["wall_ns"]) for p in data["serving"]["phases"]] == [
        ("prefill", 6, 200_000), ("decode", 3, 500_000)]
    assert data["units"]["candidates"][0]["name"] == "from:aten::embedding"
    for fmt in ("md", "term"):
        code, out = _run(["report", path, "--format", fmt], capsys)
        assert code == 0 and "Serving loop by phase" in out and "33.3 µs" in out and "166.7 µs" in out
        assert "from:aten::embedding (4 periods, 100.0% of the launches, 4 alike)" in " ".join(out.split())
    out_html = tmp_path / "r.html"
    assert cli_main(["report", path, "-o", str(out_html)]) == 0
    assert "Serving loop by phase" in out_html.read_text()


def test_diff_compares_cost_per_token(tmp_path, capsys):
    a = str(write_trace(tmp_path / "a.json", make_generate()))
    b = str(write_trace(tmp_path / "b.json", make_generate(period=150.0)))
    code, out = _run(["diff", a, b, "--format", "md"], capsys)
    assert code == 0
    text = " ".join(out.split())
    # Steady units only (the last, cut one left out): decode 200 µs → 150 µs per token.
    assert "wall per decode token 200.0 µs → 150.0 µs (-25.0%)" in text
    assert "| wall per decode token | 200.0 µs | 150.0 µs |" in text


@pytest.mark.skipif(REAL is None or not (REAL / VLLM).is_file() if REAL else True, reason="real traces not present")
def test_the_public_vllm_trace_per_token_matches_a_hand_count():
    served = tracekit.open(REAL / VLLM, execution_trace=None).report().serving
    assert served.source == "vllm" and served.window == {"first": 1, "last": 10, "iterations": 10, "after": None}
    phase = served.phases.row(0, named=True)
    assert (phase["phase"], phase["iterations"], phase["requests"], phase["tokens"]) == ("decode", 10, 40, 40)
    assert phase["wall_ns"] == 763_432_829  # hand count: 763,432.829 µs
    assert phase["ns_per_token"] == pytest.approx(19_085_820.7, abs=1)


# -- real generation loops captured on an H100 (sample_traces/generation/) ---------------------------
# Family: loops with no ProfilerStep and no annotation. Ground truth: the capture's forward hook
# (manifest.json: every forward of the model with its input's sequence length); for the compiled run
# the tokens generate() returned (32 new tokens, so 1 prefill + 31 decode forwards).

GENERATION = Path(__file__).resolve().parents[2] / "sample_traces" / "generation"


def _truth(name: str) -> list[int]:
    manifest = json.loads((GENERATION / "manifest.json").read_text())
    entry = next(c for c in manifest["captures"] if c["trace_file"] == name + ".json.gz")
    return entry.get("seq_lens") or [8] + [1] * (entry["new_tokens"] - 1)


@pytest.mark.parametrize("name, unit", [
    ("hf_generate", "from:aten::embedding"),
    ("decode_plain", "from:aten::embedding"),
    # transformers compiles only the decode forward of a static-cache generate(): one eager prefill
    # (its aten::embedding) then 31 Torch-Compiled Region: 0/0 calls, the two blocks one after the other.
    ("hf_generate_static-compile", "from:aten::embedding|Torch-Compiled Region: 0/*"),
])
def test_a_real_generation_loop_has_one_unit_per_forward(name, unit):
    report = tracekit.open(GENERATION / f"{name}.json.gz").report()
    seq = _truth(name)
    assert (report.units.kind, report.units.name, report.units.source) == ("period", unit, "auto")
    assert report.units.windows.height == len(seq)
    serving = report.serving
    assert serving is not None and serving.source == "shapes"
    # Every forward's phase and tokens equal the hook's: batch 4, seq 8 then 1.
    got = serving.iterations.select("phase", "requests", "tokens").rows()
    assert got == [("prefill" if s > 1 else "decode", 4, 4 * s) for s in seq]


def test_a_compiled_forward_reads_its_tokens_from_the_fused_embedding_kernel():
    # In the compiled decode forward the lookup runs inside
    # triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0, recorded with inputs
    # [[4, 1], [2048, 256], [256], [4, 1, 256], [], []] of types ['long int', 'c10::BFloat16', ...].
    report = tracekit.open(GENERATION / "hf_generate_static-compile.json.gz").report()
    phases = {r["phase"]: r for r in report.serving.phases.iter_rows(named=True)}
    assert (phases["prefill"]["iterations"], phases["prefill"]["tokens"]) == (1, 32)
    assert (phases["decode"]["iterations"], phases["decode"]["requests"], phases["decode"]["tokens"]) == (31, 124, 124)


def test_the_compiled_loop_that_replays_no_graph_is_told_so():
    findings = {f.rule: f for f in tracekit.open(GENERATION / "hf_generate_static-compile.json.gz").report().findings}
    assert "replays no CUDA graph" in findings["overhead_bound"].fix
    assert "torch.compile(mode='reduce-overhead'), torch.compile" not in findings["overhead_bound"].fix


def test_eager_then_compiled_forwards_are_one_loop_but_compiled_layers_are_not():
    region = "Torch-Compiled Region: {}/{}"
    assert units_mod._mark_label(region.format(0, 3)) == "Torch-Compiled Region: 0/*"
    # An eager prefill, then compiled decode steps (recompiled once: 0/0, 0/1 are one frame's family).
    eager_then_compiled = ["aten::embedding", "aten::cat", region.format(0, 0), "aten::cat",
                           region.format(0, 1), "aten::cat", region.format(0, 1), "aten::cat"]
    sets = units_mod._mark_sets([units_mod._mark_label(n) for n in eager_then_compiled])
    assert sets["aten::embedding|Torch-Compiled Region: 0/*"] == ([0, 2, 4, 6], True)
    # Compiled layers inside eager forwards: the region repeats within each forward, interleaved with
    # the embeddings — no union (it would cut a forward per layer); the embedding alone opens forwards.
    layers = ["aten::embedding", region.format(1, 0), region.format(1, 0)] * 3
    sets = units_mod._mark_sets([units_mod._mark_label(n) for n in layers])
    assert set(sets) == {"aten::embedding", "Torch-Compiled Region: 1/*"}
    assert sets["aten::embedding"] == ([0, 3, 6], True)
