"""The ``recompile`` rule: frame recompilations inside the trace (compile index > 0,
:class:`tracekit.analyses.compilations.Compilations`): one finding listing each, with its trigger
and the dims that changed; a one-time cost.
"""

from __future__ import annotations

import polars as pl

from tracekit.findings.model import Context, Evidence, Finding, Rule

#: Recompiles: at least this many frame recompilations (compile index > 0) in the trace: one
#: recompile is already a compile in the hot loop (seconds of CPU).
RECOMPILE_MIN = 1


RULE = Rule(
    id="recompile",
    title="torch.compile recompiled a frame inside the trace (a new shape or a failed guard)",
    severity="warning",
    needs="frame compilations with compile index > 0 and their trigger (tracekit.analyses.compilations)",
    thresholds={"RECOMPILE_MIN": RECOMPILE_MIN},
    fix=("mark the changing dim dynamic (torch._dynamo.mark_dynamic(x, 0) or torch.compile(dynamic=True)) "
         "or pad inputs to a few fixed shapes; TORCH_LOGS=recompiles names the guard"),
)


def detect(context: Context) -> list[Finding]:
    compiled = getattr(context.compilations, "compilations", None)
    if compiled is None or compiled.height == 0:
        return []
    again = compiled.filter(pl.col("trigger") != "first").sort("ts")
    if again.height < RECOMPILE_MIN:
        return []
    names = dict(zip(context.summary["step"].to_list(), context.summary["name"].to_list()))
    evidence = [Evidence("op", f"compile {r['compile_id'] or '?'}", r["step"], r["ts"], None, int(r["total_ns"]),
                         detail=f"{r['trigger']}" + (f": {r['changed']}" if r["changed"] else "")
                         + (f" in {names[r['step']]}" if r["step"] in names else ""))
               for r in again.iter_rows(named=True)]
    total = float(again["total_ns"].sum())
    steps = [s for s in again["step"].to_list() if s is not None]
    return [RULE.finding(steps, evidence, total, total,
                         "the recompilations' CPU time (compile, autotuning, run-time work), once per new shape",
                         recompiles=again.height, once=True, resource="once")]
