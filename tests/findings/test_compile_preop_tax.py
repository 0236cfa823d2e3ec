"""compile_preop_tax: the torch.compile wrapper time around a compiled graph's own call, counted once.

Family: any torch.compile call — ``TorchDynamo Cache Lookup`` then ``Torch-Compiled Region: F/C``
holding ``Pregraph bytecode``, the AOT prologue and (with autograd) ``CompiledFunction``, which
holds ``## Call CompiledFxGraph <hash> ##`` (the graph's own ops and launches). The nested spans
used to be added up (104–185 % of the step); the tax is the outermost wrappers less the graph call.
"""

from __future__ import annotations

import gzip
import json

from factory import make_annotation, make_op, make_step, write_trace

import tracekit
from tracekit.findings.detectors import compile_preop_tax


def _tax(path) -> dict:
    return {f.rule: f for f in tracekit.open(str(path)).report().findings}.get("compile_preop_tax")


def _compiled_loop(tmp_path, *, region_us: float, call_us: float, lookup_us: float, name: str):
    """Three 1 ms steps, each: cache lookup, then a region holding CompiledFunction holding the call."""
    events = []
    for i in range(3):
        t0 = 10.0 + i * 1010.0
        events.append(make_step(i, t0, 1000.0))
        events.append(make_op("TorchDynamo Cache Lookup", t0 + 5, lookup_us))
        r0 = t0 + 10 + lookup_us
        events.append(make_op("Torch-Compiled Region: 0/0", r0, region_us))
        events.append(make_op("Pregraph bytecode", r0 + 1, 2.0))
        inner = region_us - 6.0
        events.append(make_op("CompiledFunction", r0 + 4, inner))
        events.append(make_annotation("## Call CompiledFxGraph fabc123 ##", r0 + 4 + (inner - call_us) / 2, call_us))
    return write_trace(tmp_path / name, events)


def test_nested_wrappers_count_once_and_the_graph_call_is_not_tax(tmp_path):
    # Region 400 µs ⊃ CompiledFunction 394 µs ⊃ graph call 300 µs; lookup 30 µs.
    tax = _tax(_compiled_loop(tmp_path, region_us=400.0, call_us=300.0, lookup_us=30.0, name="a.json"))
    assert tax is not None and tax.severity == "info" and tax.resource == "host"
    # (400 − 300) + 30 = 130 µs per step; adding the spans up would say 400 + 394 + 300 + 30 + 2.
    assert tax.cost_ns_per_step == 130_000 == tax.saving_ns_per_step
    names = [e.name for e in tax.evidence]
    assert names[0] == "Torch-Compiled Region: 0/0" and "## Call CompiledFxGraph fabc123 ##" not in names
    by_name = {e.name: e.dur_ns_per_step for e in tax.evidence}
    assert by_name["CompiledFunction"] == 94_000  # its own part, outside the graph call


def test_a_thin_wrapper_is_silent(tmp_path):
    # Near miss: region 305 µs around a 300 µs call, 3 µs lookup: 8 µs < PREOP_MIN_NS.
    assert compile_preop_tax.PREOP_MIN_NS == 10_000
    assert _tax(_compiled_loop(tmp_path, region_us=305.0, call_us=300.0, lookup_us=3.0, name="b.json")) is None


def test_shipped_compiled_mlp_tax_matches_a_recount_of_the_raw_spans(sample):
    # Recount from the raw events: per ProfilerStep, region − graph call + cache lookup
    # (steps 2-4: 114.7, 83.3, 65.4 µs; steps of 643, 479, 425 µs: 15-18 %).
    raw = json.load(gzip.open("sample_traces/mlp_compile.json.gz"))["traceEvents"]
    spans = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    total = 0.0
    for step in (e for e in spans if e["name"] in ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4")):
        inside = [e for e in spans if step["ts"] <= e["ts"] < step["ts"] + step["dur"]]
        dur = {e["name"].split(" ")[0] + e["name"].split(" ")[1]: e["dur"] for e in inside
               if e["name"].startswith(("Torch-Compiled", "## Call", "TorchDynamo"))}
        total += dur["Torch-CompiledRegion:"] - dur["##Call"] + dur["TorchDynamoCache"]
    tax = {f.rule: f for f in sample("mlp_compile").report().findings}["compile_preop_tax"]
    assert abs(tax.cost_ns_per_step - total * 1000 / 3) < 2
    assert tax.cost_ns_per_step == 87_787 and tax.severity == "info"
