"""``ddp_bucket_copy``: DDP's reducer copying each gradient into its bucket (a copy under AccumulateGrad's
post-hook, in a process that runs DDP) — fires with gradient_as_bucket_view=True; silent without DDP,
and AccumulateGrad's own copy (a gradient in another layout) stays hot_path_copy's."""

from __future__ import annotations

from copy_loop import COPY, COPY_RULES, CopyLoop, findings

HOOK = ["autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "aten::copy_"]
NODE = ["autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad",
        "aten::copy_"]


def loop_with(chain: list, *, ddp: bool) -> CopyLoop:
    loop = CopyLoop()
    for i in range(loop.steps):
        if ddp:
            loop.copy(i, ["DistributedDataParallel.forward", "aten::linear", "aten::addmm"], COPY, 1.0)
        for _ in range(4):
            loop.copy(i, chain, COPY, 10.0)
    return loop


def test_fires_on_bucket_copies_under_ddp(tmp_path):
    got = findings(loop_with(HOOK, ddp=True).write(tmp_path))
    f = got["ddp_bucket_copy"]
    assert f.cost_ns_per_step == 40_000 and f.severity == "warning"
    (e,) = f.evidence
    assert (e.name, e.count_per_step) == ("torch::autograd::AccumulateGrad", 4)
    assert "gradient_as_bucket_view=True" in f.fix
    assert not set(got) & (set(COPY_RULES) - {"ddp_bucket_copy"})


def test_silent_without_ddp_and_on_accumulate_grads_own_copy(tmp_path):
    assert not set(findings(loop_with(HOOK, ddp=False).write(tmp_path, "a.json"))) & set(COPY_RULES)
    got = findings(loop_with(NODE, ddp=True).write(tmp_path, "b.json"))
    assert "ddp_bucket_copy" not in got and "hot_path_copy" in got
