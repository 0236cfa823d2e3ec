"""``conv_layout_transpose``: cuDNN/MIOpen NCHW<->NHWC transposes launched by convolutions — fires with
the channels_last fix; silent on the same kernel outside a convolution and under its floor."""

from __future__ import annotations

from copy_loop import COPY_RULES, NCHW_TO_NHWC, CopyLoop, findings

CONV = ["aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution"]


def test_fires_on_transposes_around_convolutions(tmp_path):
    loop = CopyLoop()
    for i in range(loop.steps):
        loop.copy(i, CONV, NCHW_TO_NHWC, 30.0)  # input to NHWC
        loop.copy(i, CONV, NCHW_TO_NHWC, 20.0)  # (a second conv)
    got = findings(loop.write(tmp_path))
    f = got["conv_layout_transpose"]
    assert (f.cost_ns_per_step, f.saving_ns_per_step, f.severity) == (50_000, 50_000, "warning")
    (e,) = f.evidence
    assert (e.name, e.count_per_step) == ("aten::conv2d", 2)
    assert "channels_last" in f.fix
    assert not set(got) & (set(COPY_RULES) - {"conv_layout_transpose"})


def test_silent_outside_a_convolution_and_under_the_floor(tmp_path):
    loop = CopyLoop()
    for i in range(loop.steps):
        loop.copy(i, ["aten::permute_copy"], NCHW_TO_NHWC, 50.0)  # no convolution asked for it
    assert "conv_layout_transpose" not in findings(loop.write(tmp_path, "a.json"))
    small = CopyLoop(gemm_us=1000.0)
    for i in range(small.steps):
        small.copy(i, CONV, NCHW_TO_NHWC, 8.0)
    assert "conv_layout_transpose" not in findings(small.write(tmp_path, "b.json"))
