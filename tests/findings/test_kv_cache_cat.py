"""``kv_cache_cat``: a cache grown by ``torch.cat([past, new])`` every decode step (or a list stacked
that gains an entry per step) — fires with the static-cache fix when the cat's ``past`` is the
previous step's output; silent on a cat of fixed shapes and on a shape sweep (shapes that change, but
not by the appended part)."""

from __future__ import annotations

import pytest
from copy_loop import CAT, COPY_RULES, CopyLoop, findings

LAYERS = 2


def decode(lengths: list[int], new: int = 1, dur: float = 30.0) -> CopyLoop:
    """A decode loop: step i cats a past of ``lengths[i]`` tokens with ``new`` tokens, per layer."""
    loop = CopyLoop(steps=len(lengths))
    for i, length in enumerate(lengths):
        for _ in range(LAYERS):
            dims = [[[1, 8, length, 64], [1, 8, new, 64]], []]
            loop.copy(i, ["aten::cat"], CAT, dur, dims={"aten::cat": dims})
    return loop


def test_fires_on_a_cache_grown_by_cat(tmp_path):
    lengths = [100, 101, 102, 103]
    got = findings(decode(lengths).write(tmp_path))
    f = got["kv_cache_cat"]
    # Steps 1-3 grow (step 0 has no step before it): 2 cats × 30 µs in 3 of 4 steps = 45 µs per step.
    assert f.steps == (1, 2, 3) and f.cost_ns_per_step == 45_000 and f.severity == "warning"
    # The part of each output the previous step already held: 101/102, 102/103, 103/104 of 60 µs a step.
    held = sum(60_000 * (n + 1) / (n + 2) for n in lengths[:-1]) / 4
    assert f.saving_ns_per_step == pytest.approx(held, abs=1)
    assert f.evidence[0].name == "aten::cat" and "static cache" in f.fix
    assert not set(got) & (set(COPY_RULES) - {"kv_cache_cat"})


@pytest.mark.parametrize("lengths", [[100, 100, 100, 100], [64, 128, 256, 512]], ids=["fixed", "sweep"])
def test_silent_on_fixed_shapes_and_on_a_shape_sweep(tmp_path, lengths):
    # A sweep of 64-token appends doubles its past: 64 -> 128 grows by the appended 64 once, not twice.
    assert "kv_cache_cat" not in findings(decode(lengths, new=64).write(tmp_path))


def test_silent_on_the_token_ids_a_generate_loop_appends_to(tmp_path):
    # Family: Hugging Face generate() (sample_traces/generation/hf_generate_static-compile: a static KV
    # cache, yet each step cats [4, n] + [4, 1] for input_ids, the attention mask and one more): a
    # [batch, seq] tensor grows by one token a step, by design of the loop, and is no cache.
    loop = CopyLoop(steps=4)
    for i in range(4):
        for _ in range(3):
            loop.copy(i, ["aten::cat"], CAT, 30.0, dims={"aten::cat": [[[4, 8 + i], [4, 1]], []]})
    assert "kv_cache_cat" not in findings(loop.write(tmp_path))


def test_fires_on_a_list_stacked_that_gains_an_entry_per_step(tmp_path):
    loop = CopyLoop(steps=4)
    for i in range(4):  # torch.stack(tokens) of a list that grows by one token a step
        dims = [[[1, 8, 64]] * (3 + i), []]
        loop.copy(i, ["aten::stack", "aten::cat"], CAT, 40.0, dims={"aten::cat": dims})
    f = findings(loop.write(tmp_path))["kv_cache_cat"]
    assert f.steps == (1, 2, 3) and f.evidence[0].name == "aten::stack"
    assert f.saving_ns_per_step == pytest.approx(40_000 * (3 / 4 + 4 / 5 + 5 / 6) / 4, abs=1)
