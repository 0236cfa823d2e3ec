"""Execution traces (Chakra JSON from ExecutionTraceObserver) beside the H200 sample traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from tracekit import execution_trace as et_mod
from tracekit.errors import TraceError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_find_beside(tmp_path):
    assert et_mod.find_beside(SAMPLES / "mlp_eager.json.gz") == SAMPLES / "mlp_eager.et.json.gz"
    assert et_mod.find_beside(SAMPLES / "train_eager.json.gz") is None
    (tmp_path / "x.json").write_text("{}")
    (tmp_path / "x.et.json").write_text("{}")
    assert et_mod.find_beside(tmp_path / "x.json") == tmp_path / "x.et.json"
    assert et_mod.find_beside(tmp_path / "x.et.json") is None  # an ET has no ET beside it


@pytest.mark.parametrize("name", ["mlp_eager", "mlp_compile", "mlp_liger", "mlp_compile-cudagraphs",
                                  "linear_eager", "matmul_add_compile-64"])
def test_every_et_node_with_an_rf_id_joins_a_kineto_op_of_the_same_name(name, sample):
    et = et_mod.load(SAMPLES / f"{name}.et.json.gz")
    assert et.schema.endswith("chakra.0.0.4")
    ops = sample(name).trace.ops.filter(pl.col("record_function_id").is_not_null())
    by_rf = dict(zip(ops["record_function_id"].to_list(), ops["name"].to_list()))
    assert et.by_rf_id
    for rf, node in et.by_rf_id.items():
        assert by_rf[rf] == node.name


def test_eager_mm_tensor_values_and_storage_reuse():
    et = et_mod.load(SAMPLES / "mlp_eager.et.json.gz")
    mms = [n for n in et.nodes if n.name == "aten::mm"]
    assert len(mms) == 9
    gate = mms[0]
    assert [t.numel for t in gate.inputs] == [8192 * 768, 768 * 3072]
    out = gate.outputs[0]
    assert (out.numel, out.itemsize, out.dtype, out.byte_range) == (
        8192 * 3072, 2, "c10::BFloat16", (0, 50_331_648))
    # The caching allocator hands gate's freed block to up_proj's output: same storage id.
    assert mms[1].outputs[0].storage_id == gate.outputs[0].storage_id
    assert mms[1].outputs[0].tensor_id != gate.outputs[0].tensor_id


def test_inductor_nodes_schema_mutations_and_in_place_kernel():
    et = et_mod.load(SAMPLES / "mlp_compile.et.json.gz")
    mm = next(n for n in et.nodes if n.name == "aten::mm")
    assert mm.op_schema.startswith("aten::mm.out(") and mm.mutated_inputs() == (2,)
    triton = next(n for n in et.nodes if n.name.startswith("triton_poi_fused"))
    assert triton.outputs == () and triton.op_schema == ""
    tensors = [v for v in triton.inputs if v is not None]
    assert len(tensors) == 2  # in_out_ptr0 (gate's storage) and in_ptr0 (up); xnumel is an Int
    assert tensors[0].storage_id == mm.outputs[0].storage_id


def test_foreach_copy_lists_and_liger_allocation_in_subtree():
    graphs = et_mod.load(SAMPLES / "mlp_compile-cudagraphs.et.json.gz")
    copy = next(n for n in graphs.nodes if n.name == "aten::_foreach_copy_")
    assert copy.mutated_inputs() == (0,)
    assert isinstance(copy.inputs[0], tuple) and copy.inputs[0][0].numel == 64 * 128 * 768
    # The replayed graph's ops are not in the execution trace.
    assert not any(n.name in ("aten::mm", "aten::addmm") or n.name.startswith("triton")
                   for n in graphs.nodes)
    liger = et_mod.load(SAMPLES / "mlp_liger.et.json.gz")
    fn = next(n for n in liger.nodes if n.name == "LigerGELUMulFunction")
    assert fn.outputs == ()
    names = [d.name for d in liger.descendants(fn.id)]
    assert "aten::empty_like" in names


def test_plain_json_and_errors(tmp_path):
    data = gzip.decompress((SAMPLES / "linear_eager.et.json.gz").read_bytes())
    plain = tmp_path / "p.et.json"
    plain.write_bytes(data)
    assert len(et_mod.load(plain).nodes) == len(json.loads(data)["nodes"])
    with pytest.raises(TraceError, match="a Kineto trace, not an execution trace"):
        et_mod.load(SAMPLES / "linear_eager.json.gz")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(TraceError, match="not JSON"):
        et_mod.load(bad)
    with pytest.raises(TraceError, match="no such file"):
        et_mod.load(tmp_path / "missing.json")


def test_mutated_inputs_parses_defaults_optionals_and_lists():
    node = et_mod.EtNode(1, "aten::foo", None, 1,
                         "aten::foo(Tensor self, *, int[2] dim=[1, 2], Tensor(a!)? out=None, "
                         "Tensor(b!)[] outs) -> ()", (), (), (), (), ())
    assert node.mutated_inputs() == (2, 3)
