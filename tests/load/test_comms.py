"""The collective metadata (``Trace.comms``): each era's spelling, on ops and on kernels, and the
Parquet form (files written before the frame existed still load)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgspec
import polars as pl
import pytest

from tests.factory import make_kernel, make_launch, make_op, make_step, write_trace
from tracekit.load import load, open_trace, parquet
from tracekit.trace import COMMS_SCHEMA

REAL = os.environ.get("TRACEKIT_REAL_TRACES")

# As PyTorch 2.5+ writes them: ranks and split sizes as text on the op, the kernel a copy with a list.
_OP_ARGS = {"Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 4096,
            "Out msg nelems": 4096, "Group size": 2, "Process Group Name": "0",
            "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]", "Seq": 7,
            "In split size": "[]", "Out split size": "[]", "Rank": 0}


def _events() -> list[dict]:
    kernel_args = {**_OP_ARGS, "Process Group Ranks": [0, 1], "Seq": 7}
    return [make_step(1, 0.0, 100.0),
            make_op("record_param_comms", 10.0, 20.0, **_OP_ARGS),
            make_op("aten::mm", 40.0, 5.0),
            make_launch("cudaLaunchKernel", 12.0, 3.0, 1),
            make_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                        20.0, 30.0, 1, **kernel_args)]


def test_comms_rows_on_op_and_kernel(tmp_path):
    trace = load(write_trace(tmp_path / "t.json", _events()))
    comms = trace.comms
    assert comms.schema == pl.Schema(COMMS_SCHEMA)
    assert comms["event"].to_list() == ["op", "kernel"]  # idx order: the op is written first
    op = comms.row(0, named=True)
    assert op["idx"] == 1 and op["collective"] == "allreduce" and op["dtype"] == "BFloat16"
    assert (op["in_nelems"], op["out_nelems"], op["group_size"], op["seq"]) == (4096, 4096, 2, 7)
    assert (op["pg_name"], op["pg_desc"], op["pg_ranks"], op["in_split"]) == ("0", "default_pg", "[0, 1]", "[]")
    kernel = comms.row(1, named=True)
    assert kernel["idx"] == 4 and kernel["pg_ranks"] == "[0, 1]"  # a list: its JSON text as written
    # An op without the metadata (aten::mm) has no row.
    assert trace.ops.filter(pl.col("name") == "aten::mm").height == 1 and comms.height == 2


def test_comms_survive_parquet(tmp_path):
    trace = load(write_trace(tmp_path / "t.json", _events()))
    out = tmp_path / "t.parquet"
    parquet.write(trace, out)
    assert open_trace(out).comms.equals(trace.comms)


def test_parquet_written_before_comms_loads_without_them(tmp_path):
    trace = load(write_trace(tmp_path / "t.json", _events()))
    # The file as the format's first writer made it: every frame but comms, none of its columns.
    parts = [getattr(trace, name).with_columns(table=pl.lit(name)) for name in parquet.FRAMES if name != "comms"]
    out = tmp_path / "old.parquet"
    pl.concat(parts, how="diagonal_relaxed").write_parquet(out, metadata={
        "tracekit.format": parquet.FORMAT,
        "tracekit.meta": msgspec.json.encode(dataclasses.asdict(trace.meta)).decode()})
    old = open_trace(out)
    assert old.comms.height == 0 and old.comms.schema == pl.Schema(COMMS_SCHEMA)
    assert old.gpu.equals(trace.gpu)


@pytest.mark.skipif(not REAL, reason="TRACEKIT_REAL_TRACES not set")
def test_real_eras():
    # TP2 Llama (PyTorch 2.4, 2024): only the 19 `wait` record_param_comms carry the metadata;
    # the coalesced collectives' ops and kernels carry none (checked in the raw JSON).
    tp2 = load(Path(REAL) / "tugot17__tokenomics-from-first-principles__rtx4090-tp2-llama-rank0.json.gz")
    assert tp2.comms.height == 19
    assert set(tp2.comms["collective"]) == {"wait"} and set(tp2.comms["group_size"]) == {1}
    assert set(tp2.comms["event"]) == {"op"}
    # DLRM (2023): record_param_comms carry only Input Dims: no row.
    dlrm = load(Path(REAL) / "facebookresearch__param__dlrm-8rank-v100-nccl-rank0.json.gz")
    assert dlrm.comms.height == 0
