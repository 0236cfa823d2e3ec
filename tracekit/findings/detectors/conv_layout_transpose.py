"""The ``conv_layout_transpose`` rule: cuDNN's and MIOpen's layout transposes around convolutions
(``nchwToNhwcKernel``, ``nhwcToNchwKernel``, MIOpen ``transpose_NCHW2NHWC``/``batched_transpose``):
the model's tensors are NCHW while the convolution kernels chosen want NHWC, so every convolution
transposes its input and output (:mod:`.copies`: cause ``conv_layout``).
"""

from __future__ import annotations

from tracekit.findings.detectors.copies import COPY_MIN_BUSY_SHARE, cause_finding
from tracekit.findings.model import Context, Finding, Rule

RULE = Rule(
    id="conv_layout_transpose",
    title="layout transposes around convolutions: NCHW tensors fed to NHWC convolution kernels",
    severity="warning",
    needs="cuDNN/MIOpen NCHW<->NHWC transpose kernels launched by convolution ops",
    thresholds={"COPY_MIN_BUSY_SHARE": COPY_MIN_BUSY_SHARE},
    fix=("use channels_last: model.to(memory_format=torch.channels_last) and "
         "input.to(memory_format=torch.channels_last) (once, in the loader), so the convolutions run NHWC "
         "without transposing"),
)


def detect(context: Context) -> list[Finding]:
    return cause_finding(context, "conv_layout", RULE,
                         "the transposes' GPU time (NHWC tensors need none)")
