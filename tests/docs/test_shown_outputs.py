"""The outputs docs/ shows beyond the findings, report and compare examples (tested in their rooms)
are real runs today: the diff of a PR, a check met and broken, the Compilation section, what convert
and annotate print, report on the gloo ranks, merge on two shipped ranks. Producers in tests/doc_blocks.py; refresh with ``pytest tests/docs
--update-goldens`` and review the diff."""

from __future__ import annotations

import pytest
from doc_blocks import check_block, check_example, diff_example, merge_example, ranks_gloo_example

BLOCKS = ("README-FINDINGS", "DIFF", "CHECK", "COMPILATION", "CONVERT", "ANNOTATE", "RANKS-GLOO", "MERGE")


@pytest.mark.parametrize("name", BLOCKS)
def test_shown_output_is_a_real_run(request, name):
    check_block(request, name)


def test_the_shown_outputs_say_what_the_pages_claim():
    assert "Fused gelu + mul (2 kernels) into one Inductor Triton kernel" in diff_example()
    shown = check_example()
    assert "13 of 13 expectations met" in shown and "11 of 13 expectations broken" in shown and "exit 1" in shown
    gloo = ranks_gloo_example()
    assert "Step 3: rank 2 arrived last at all" in gloo and "It lost the time in backward" in gloo
    merged = merge_example()
    # Both ranks: 3,184 + 3,168 events in the files, less 21 + 21 metadata events of processes with
    # no events, plus a process_name for each rank's 3 processes Kineto left unnamed (by hand).
    assert "2 ranks, 6,316 events" in merged and "clocks aligned to rank 0's" in merged
