"""The findings engine (tracekit.findings): each rule on small hand-built traces (fires; silent on
its near miss), then on the shipped H200 antipattern captures against their manifest (each planted
problem found at its op, the controls and the healthy loop without it), and the report surfaces
(Findings first in every format, ``--fail-if finding:RULE``, the JSON contract)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factory import make_annotation, make_kernel, make_launch, make_op, make_step, write_trace

import tracekit
from tracekit import findings, host_link
from tracekit.findings import detectors
from tracekit.findings.detectors import host_sync
from tracekit.findings.model import SEVERITIES
from tracekit.commands import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
ANTI = SAMPLES / "antipatterns"
MANIFEST = json.loads((ANTI / "manifest.json").read_text())
CAPTURES = {c["mode"]: c for c in MANIFEST["captures"]}

SIMT = ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>"
        "(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)")
TF32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
               "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
               "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
               "std::array<char*, 2ul>)")
MULTI_TENSOR = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
                "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, "
                "1, 1, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<1>, "
                "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float)")
COPY = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
        "{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, ...)")


class Loop:
    """A hand-built loop of ``ProfilerStep``s: each ``call`` is one op chain (outermost first) on the
    CPU whose innermost op issues one launch call, and the GPU activity it launches."""

    def __init__(self, steps: int = 3, step_us: float = 1000.0):
        self.events: list[dict] = []
        self.steps, self.step_us = steps, step_us
        self.corr = 1

    def start(self, step: int) -> float:
        return 10.0 + step * (self.step_us + 10.0)

    def call(self, ops: list[str], ts: float, *, launch: str = "cudaLaunchKernel", launch_dur: float = 5.0,
             gpu: str | None = None, gpu_ts: float | None = None, gpu_dur: float = 10.0, kind: str = "kernel",
             extra_launches: tuple[tuple[str, float], ...] = (), **gpu_args) -> None:
        """``ops`` nest around the launch; ``extra_launches`` (name, dur) follow the launch inside them."""
        total = launch_dur + sum(d for _, d in extra_launches) + 2.0
        for depth, name in enumerate(ops):
            self.events.append(make_op(name, ts + depth * 0.1, total - depth * 0.2))
        at = ts + len(ops) * 0.1
        corr = self.corr
        self.corr += 1
        self.events.append(make_launch(launch, at, launch_dur, corr))
        at += launch_dur
        for name, dur in extra_launches:
            self.events.append(make_launch(name, at, dur, 10_000 + self.corr))
            self.corr += 1
            at += dur
        if gpu is not None:
            self.events.append(make_kernel(gpu, gpu_ts if gpu_ts is not None else ts + 1.0, gpu_dur, corr,
                                           kind=kind, **gpu_args))

    def write(self, tmp_path: Path, name: str = "t.json", *, step_durs: list[float] | None = None) -> Path:
        for i in range(self.steps):
            dur = step_durs[i] if step_durs else self.step_us
            self.events.append(make_step(i, self.start(i), dur))
        return write_trace(tmp_path / name, self.events)


def found(path: Path) -> dict[str, findings.Finding]:
    return {f.rule: f for f in tracekit.open(str(path)).report().findings}


def _each_step(loop: Loop, body) -> Loop:
    for i in range(loop.steps):
        body(loop, i, loop.start(i))
    return loop


# -- rule by rule on hand-built traces -------------------------------------------------------------

# host_sync, pageable_copy, allocator_churn and exposed_comm: tests/findings/test_<rule>.py


def test_fp32_gemm_fires_on_simt_and_not_on_tf32(tmp_path):
    def gemm(name):
        return lambda loop, i, t0: loop.call(["aten::linear", "aten::mm"], t0 + 10, gpu=name, gpu_dur=800)
    got = found(_each_step(Loop(), gemm(SIMT)).write(tmp_path, "a.json"))
    fp32 = got["fp32_gemm"]
    assert fp32.quantities["gemm_share_of_busy"] == 1.0 and fp32.evidence[0].detail == "launched by aten::mm"
    # H200 SXM: 800 µs × (1 − 67 / 494.5 TFLOP/s) = 691.6 µs.
    assert fp32.saving_ns_per_step == round(800_000 * (1 - 67 / 494.5))
    assert "fp32_gemm" not in found(_each_step(Loop(), gemm(TF32)).write(tmp_path, "b.json"))


def _optimizer(kernel: str, count: int):
    def body(loop, i, t0):
        loop.events.append(make_annotation("Optimizer.step#AdamW.step", t0 + 500, 300))
        for k in range(count):
            loop.call(["aten::mul_"], t0 + 510 + 20 * k, gpu=kernel, gpu_dur=5, gpu_ts=t0 + 600 + 10 * k)
    return body


def test_optimizer_for_loop_fires_and_foreach_is_silent(tmp_path):
    got = found(_each_step(Loop(), _optimizer(ELEMENTWISE, 12)).write(tmp_path, "a.json"))
    opt = got["optimizer_unfused"]
    assert opt.quantities["kernels_per_step"] == 12 and opt.evidence[0].detail == "inside Optimizer.step#AdamW.step"
    assert "optimizer_unfused" not in found(_each_step(Loop(), _optimizer(MULTI_TENSOR, 12)).write(tmp_path, "b.json"))
    # Below OPTIMIZER_MIN_KERNELS per step: a few per-tensor kernels are not a for-loop.
    assert "optimizer_unfused" not in found(_each_step(Loop(), _optimizer(ELEMENTWISE, 4)).write(tmp_path, "c.json"))


def test_cold_first_step_fires_and_equal_steps_are_silent(tmp_path):
    def body(loop, i, t0):
        loop.call(["aten::mm"], t0 + 10, gpu=TF32, gpu_dur=500)
    loop = Loop(steps=4, step_us=5000.0)
    got = found(_each_step(loop, body).write(tmp_path, "a.json", step_durs=[5000.0, 1000.0, 1000.0, 1000.0]))
    cold = got["cold_first_step"]
    assert cold.steps == (0,) and cold.evidence[0].name == "ProfilerStep#0"
    assert cold.cost_ns_per_step == 4_000_000  # 5 ms against a 1 ms median
    assert "cold_first_step" not in found(_each_step(Loop(steps=4), body).write(tmp_path, "b.json"))


def test_hot_path_copy_fires_and_a_small_copy_or_a_gemm_seed_does_not_warn(tmp_path):
    def body(dur):
        def step(loop, i, t0):
            loop.call(["aten::contiguous", "aten::clone", "aten::copy_"], t0 + 10, gpu=COPY, gpu_dur=dur)
            loop.call(["aten::addmm"], t0 + 100, launch="cudaMemcpyAsync", gpu="Memcpy DtoD (Device -> Device)",
                      kind="memcpy", gpu_dur=30, bytes=1 << 24)
            # GPU busy ~ 600 µs a step: the copy floor is a share of it (a 2 µs copy is 0.3 %)
            loop.call(["aten::mm"], t0 + 200, gpu=TF32, gpu_ts=t0 + 200, gpu_dur=570)
        return step
    got = found(_each_step(Loop(), body(50)).write(tmp_path, "a.json"))
    assert got["hot_path_copy"].evidence[0].name == "aten::contiguous"
    assert got["gemm_bias_seed"].severity == "info" and got["gemm_bias_seed"].evidence[0].name == "aten::addmm"
    small = found(_each_step(Loop(), body(2)).write(tmp_path, "b.json"))
    assert "hot_path_copy" not in small and small["gemm_bias_seed"].severity == "info"


def test_every_rule_has_its_module_a_detector_thresholds_and_a_fix():
    modules = detectors.RULE_MODULES
    # One module per rule, named after it; ids unique (the table is a dict: a repeated id would
    # silently replace a rule).
    assert [m.__name__.rsplit(".", 1)[1] for m in modules] == [m.RULE.id for m in modules]
    assert list(findings.RULES) == [m.RULE.id for m in modules] == list(findings.rule_ids())
    assert len(set(modules)) == len(modules)
    for module in modules:
        rule = module.RULE
        assert rule.severity in SEVERITIES and rule.fix and rule.thresholds and callable(module.detect), rule.id
        for name, value in rule.thresholds.items():
            assert getattr(module, name) == value, (rule.id, name)


def test_the_table_keeps_its_order():
    # The order --fail-if's message and no_finding list the rules in (and the detectors run in).
    assert findings.rule_ids() == (
        "overhead_bound", "cold_first_step", "input_stall", "cpu_tensor_copy", "host_sync", "pageable_copy",
        "allocator_churn", "exposed_comm", "fp32_gemm", "unfused_pointwise", "hot_path_copy", "dtype_cast", "kv_cache_cat",
        "conv_layout_transpose", "ddp_bucket_copy", "gemm_bias_seed", "optimizer_unfused", "zero_grad_fill",
        "occupancy_query", "compile_preop_tax", "recompile", "kernel_time_varies", "out_of_memory")


def test_no_finding_without_steps(tmp_path):
    loop = Loop()
    loop.call(["aten::mm"], 10, gpu=SIMT, gpu_dur=500)
    path = write_trace(tmp_path / "t.json", loop.events)
    assert tracekit.open(str(path)).report().findings == () or all(
        f.evidence for f in tracekit.open(str(path)).report().findings)


# -- the shipped H200 antipattern captures --------------------------------------------------------

@pytest.fixture
def anti(sample):
    """``anti(mode)``: the report of the antipattern capture of ``mode`` (shared, opened once per run)."""
    return lambda mode: sample(f"antipatterns/{CAPTURES[mode]['trace_file']}").report()


PLANTED = sorted(mode for mode, c in CAPTURES.items() if c["planted"])


@pytest.mark.parametrize("mode", PLANTED)
def test_each_planted_problem_is_the_only_warning_of_its_trace(mode, anti):
    capture = CAPTURES[mode]
    got = anti(mode).findings
    warnings = {f.rule for f in got if f.severity == "warning"}
    assert warnings == {capture["planted"]}
    for f in got:
        assert f.evidence and f.fix and f.thresholds


@pytest.mark.parametrize("mode", sorted(m for m, c in CAPTURES.items() if not c["planted"]))
def test_controls_stay_silent_on_what_they_control(mode, anti):
    capture = CAPTURES[mode]
    got = anti(mode).findings
    assert not {f.rule for f in got} & set(capture["control_for"])
    assert [f.rule for f in got if f.severity == "warning"] == []


@pytest.mark.parametrize("name", ["mlp_compile.json.gz", "mlp_liger.json.gz", "antipatterns/antipatterns_healthy.json.gz"])
def test_healthy_traces_have_no_warning(name, sample):
    assert [f.rule for f in sample(name).report().findings if f.severity == "warning"] == []


@pytest.fixture
def planted(anti):
    """``planted(mode)``: the finding of the problem planted in the antipattern capture of ``mode``."""
    return lambda mode: next(f for f in anti(mode).findings if f.rule == CAPTURES[mode]["planted"])


def test_host_sync_at_the_manifests_ops(planted):
    f = planted("host-sync")
    # manifest evidence: aten::item, aten::nonzero, aten::to (.cpu()), once per step each.
    assert {(e.name, e.count_per_step) for e in f.evidence} == {(ev["op"], ev["per_step"])
                                                                 for ev in CAPTURES["host-sync"]["evidence"]}
    assert f.steps == (2, 3, 4)


def test_pageable_copy_at_the_manifests_copy(planted):
    f = planted("h2d-pageable")
    (ev,) = CAPTURES["h2d-pageable"]["evidence"]
    (e,) = f.evidence
    assert e.name == ev["memcpy"] and e.count_per_step == ev["per_step"]
    assert e.bytes_per_step == ev["per_step"] * ev["bytes_each"] and e.detail == f"launched by {ev['op']}"
    # The trace has no pinned copy of its own to measure, so the H200's host link (PCIe Gen5) prices it.
    assert f.quantities["pinned_bytes_per_s"] == host_link.PCIE_GEN5_X16


def test_fp32_gemm_counts_the_manifests_gemms(planted):
    f = planted("gemm-fp32")
    assert f.quantities["gemms_per_step"] == CAPTURES["gemm-fp32"]["gemms_per_step"]
    assert {e.detail for e in f.evidence} == {"launched by aten::mm"}
    assert f.quantities["gemm_share_of_busy"] > 0.9


def test_unfused_pointwise_names_gelu_into_mul(planted):
    f = planted("pointwise-unfused")
    links = {e.name: e for e in f.evidence}
    # 4 GeGLU blocks: gelu's [8192, 4096] fp32 output (128 MiB) read back by mul, per step.
    assert links["aten::gelu → aten::mul"].count_per_step == 4
    assert links["aten::gelu → aten::mul"].detail == "[8192, 4096] fp32"
    assert links["aten::gelu → aten::mul"].bytes_per_step == 4 * 8192 * 4096 * 4


def test_hot_path_copies_at_the_manifests_ops(planted):
    f = planted("extra-copies")
    names = {e.name for e in f.evidence}
    assert names == {"aten::contiguous", "aten::clone", "torch::autograd::AccumulateGrad"}
    clone = next(e for e in f.evidence if e.name == "aten::clone")
    assert clone.bytes_per_step == 8192 * 4096 * 4 and clone.detail.startswith("Memcpy DtoD")


def test_gemm_bias_seed_of_the_compiled_loop_is_info(anti):
    got = anti("pointwise-fused").findings
    seed = next(f for f in got if f.rule == "gemm_bias_seed")
    (incidental,) = CAPTURES["pointwise-fused"]["incidental"]
    assert seed.severity == "info" and seed.evidence[0].name == incidental["op"]
    assert seed.evidence[0].count_per_step == incidental["per_step"]
    assert seed.evidence[0].bytes_per_step == incidental["per_step"] * incidental["bytes_each"]


def test_optimizer_and_zero_grad_at_their_annotations(planted):
    opt = planted("optimizer-unfused")
    assert opt.quantities["kernels_per_step"] == 64  # manifest: 8 kernels per parameter, 8 parameters
    assert {e.detail for e in opt.evidence} == {"inside " + CAPTURES["optimizer-unfused"]["evidence"][0]["op"]}
    zero = planted("zero-grad-fill")
    assert zero.evidence[0].detail == "inside " + CAPTURES["zero-grad-fill"]["evidence"][0]["op"]


def test_cold_first_step_and_overhead_bound(planted):
    assert planted("cold-first-step").steps == (0,)
    over = planted("overhead-bound")
    assert over.quantities["launches_per_step"] > 50 and over.quantities["cpu_dispatch_ns"] > 10 * over.quantities[
        "gpu_busy_ns"]


# -- surfaces -------------------------------------------------------------------------------------

def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.slow
def test_findings_come_first_in_every_format_and_in_the_json_contract(capsys):
    path = str(ANTI / CAPTURES["host-sync"]["trace_file"])
    _, term, _ = _run(["report", path], capsys)
    # The limit line opens the report (host-sync: the host blocked in syncs most of the step), then the findings.
    lines = term.splitlines()
    assert lines[1].startswith("sync-bound: ") and "Findings" in lines[2:5] and "WARNING host_sync" in term
    _, md, _ = _run(["report", path, "--format", "md"], capsys)
    sections = md.split("\n## ")
    assert "\nsync-bound: " in sections[0] and sections[1].startswith("Findings") and "`host_sync`" in md
    _, text, _ = _run(["report", path, "--format", "json"], capsys)
    first = json.loads(text)["findings"][0]
    assert first["rule"] == "host_sync" and first["severity"] == "warning"
    assert set(first) == {"rule", "title", "severity", "steps", "evidence", "cost_ns_per_step",
                          "saving_ns_per_step", "saving_basis", "resource", "saving_wall_ns", "wall_basis", "fix",
                          "thresholds", "quantities"}
    assert first["thresholds"]["PAGEABLE_COPY_MIN_BYTES"] == host_sync.PAGEABLE_COPY_MIN_BYTES


def test_fail_if_finding_exits_1_after_the_output_and_2_on_a_typo(capsys):
    code, out, err = _run(["report", str(ANTI / "antipatterns_host-sync.json.gz"), "--format", "json",
                           "--fail-if", "finding:host_sync"], capsys)
    assert code == 1 and json.loads(out)["findings"] and "finding:host_sync" in err
    code, _, _ = _run(["report", str(ANTI / "antipatterns_healthy.json.gz"), "--fail-if", "finding:host_sync"],
                      capsys)
    assert code == 0
    code, _, err = _run(["report", str(ANTI / "antipatterns_healthy.json.gz"), "--fail-if", "finding:nope"], capsys)
    assert code == 2 and "expected finding:RULE" in err


# -- compile, check and diff ----------------------------------------------------------------------

SWEEP = SAMPLES / "compile_sweep"
SWEEP_MANIFEST = {c["trace_file"]: c for c in json.loads((SWEEP / "manifest.json").read_text())["captures"]}


@pytest.mark.parametrize("name", sorted(SWEEP_MANIFEST))
def test_recompiles_match_what_dynamo_counted(name, sample):
    got = {f.rule: f for f in sample(f"compile_sweep/{name}").report().findings}
    recompiles = SWEEP_MANIFEST[name]["ground_truth"]["recompiles"]
    if recompiles:
        assert got["recompile"].quantities["recompiles"] == recompiles
        assert all(e.name.startswith("compile ") for e in got["recompile"].evidence)
    else:
        assert "recompile" not in got


def test_check_no_finding(tmp_path, capsys):
    exp = tmp_path / "e.toml"
    exp.write_text('[per_step]\nno_finding = ["host_sync", "fp32_gemm"]\n')
    code, out, _ = _run(["check", str(ANTI / "antipatterns_host-sync.json.gz"), "--expect", str(exp),
                         "--format", "json"], capsys)
    items = {i["expected"]: i for i in json.loads(out)["items"]}
    assert code == 1 and not items["host_sync"]["met"] and items["host_sync"]["steps_present"] == 3
    assert items["fp32_gemm"]["met"]
    code, _, _ = _run(["check", str(ANTI / "antipatterns_healthy.json.gz"), "--expect", str(exp)], capsys)
    assert code == 0
    exp.write_text('[per_step]\nno_finding = ["nope"]\n')
    code, _, err = _run(["check", str(ANTI / "antipatterns_healthy.json.gz"), "--expect", str(exp)], capsys)
    assert code == 2 and "unknown rule 'nope'" in err


def test_diff_names_findings_new_and_resolved_in_b(sample):
    diff = sample("antipatterns/antipatterns_healthy").diff(sample("antipatterns/antipatterns_host-sync"))
    assert [f.rule for f in diff.findings_new if f.severity == "warning"] == ["host_sync"]
    assert diff.findings_resolved == ()
    back = sample("mlp_eager").diff(sample("mlp_compile"))
    assert [f.rule for f in back.findings_resolved] == ["unfused_pointwise"]


def test_evidence_names_pass_through_the_escaping_choke_points(tmp_path, capsys):
    hostile = "aten::item\x1b]0;owned\x07 <img src=x onerror=alert(1)> | @octocat"

    def body(loop, i, t0):
        # A 400 µs kernel queued ahead of the item, so its synchronise drains work (host_sync fires).
        loop.call(["aten::mm"], t0 + 10, gpu=TF32, gpu_ts=t0 + 20, gpu_dur=400)
        loop.call([hostile, "aten::_local_scalar_dense"], t0 + 50, launch="cudaMemcpyAsync",
                  gpu="Memcpy DtoH (Device -> Pageable)", kind="memcpy", bytes=4, gpu_ts=t0 + 421, gpu_dur=2,
                  extra_launches=(("cudaStreamSynchronize", 370.0),))
        loop.call(["aten::relu"], t0 + 480, gpu=TF32, gpu_ts=t0 + 485, gpu_dur=300)
    path = str(_each_step(Loop(step_us=800), body).write(tmp_path))
    _, term, _ = _run(["report", path], capsys)
    assert "\x1b" not in term and "\x07" not in term and "\\x1b]0;owned\\x07" in term
    _, md, _ = _run(["report", path, "--format", "md"], capsys)
    findings_part = md.split("\n## ")[1]
    assert "<img" not in findings_part and "&lt;img" in findings_part and "\\|" in findings_part
    _, text, _ = _run(["report", path, "--format", "json"], capsys)
    assert json.loads(text)["findings"][0]["evidence"][0]["name"] == hostile  # JSON keeps names exact
