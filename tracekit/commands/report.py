"""``tracekit report TRACE`` (one trace) and ``tracekit report DIR`` (one row per rank trace)."""

from __future__ import annotations

import os

import click

from tracekit.commands import options
from tracekit.errors import UsageError
from tracekit.output import refuse_inputs


def _fail_if_help() -> str:
    from tracekit.findings import RULES

    return ("Exit 1 (after the output) when the trace has a finding of RULE, e.g. --fail-if finding:host_sync "
            f"(repeatable). Rules: {', '.join(RULES)}.")


@click.command()
@click.argument("trace_path", metavar="TRACE", type=click.Path(dir_okay=True, path_type=str))
@options.output_format
@options.output
@click.option("--step", type=int, default=None,
              help="Restrict every table to ProfilerStep#N (without ProfilerSteps: to unit N).")
@options.unit
@click.option("--execution-trace", "et_path", type=options.FilePath("an execution trace file"), default=None,
              help="PyTorch execution trace for exact round-trip links (default: X.et.json.gz beside X.json.gz).")
@click.option("--no-execution-trace", "no_et", is_flag=True,
              help="Ignore any execution trace; infer round trips from shapes and order.")
@click.option("--ceiling", "ceilings", multiple=True, metavar="KEY=VALUE",
              help="Override a device ceiling: hbm_gbps, bf16_tflops, fp16_tflops, fp32_tflops, "
                   "tf32_tflops, fp8_tflops (repeatable), e.g. --ceiling hbm_gbps=4300.")
@click.option("--hta", is_flag=True, help="Show HolisticTraceAnalysis' busy/idle figures beside ours "
              "(needs the hta extra).")
@click.option("--fail-if", "fail_if", multiple=True, metavar="finding:RULE", cls=options.LazyHelp,
              help_text=lambda: _fail_if_help())
@options.graph_companion
@click.option("--engine", type=click.Choice(("pool", "ray")), default=None,
              help="A directory of ranks: where each rank is summarised — pool (processes of this machine, "
                   "the default) or ray (the ray extra; this machine, or the cluster RAY_ADDRESS names).")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="A directory of ranks: keep the per-rank summaries in this folder (default: "
                   "$TRACEKIT_CACHE_DIR, else ~/.cache/tracekit/rank-summaries; DIR is never written "
                   "into); a rerun reads only new or changed traces.")
@click.option("--no-cache", is_flag=True, help="A directory of ranks: keep no summaries; read every trace.")
@options.reading
def report(trace_path: str, fmt: str | None, output: str | None, step: int | None, unit: str | None,
           et_path: str | None, no_et: bool, ceilings: tuple[str, ...], hta: bool,
           fail_if: tuple[str, ...] = (), graph_companion: str | None = None, engine: str | None = None,
           cache_dir: str | None = None, no_cache: bool = False) -> None:
    """Classify kernels, attribute CPU ops and summarise steps of one trace.

    TRACE may also be a directory of per-rank traces: each is summarised in its own process (a
    pool, or Ray with --engine ray), and a per-rank table names the rank the others waited for.
    """
    from tracekit.session import Session

    from tracekit.findings import parse_gate

    renderer = options.renderer(fmt, output)
    target = renderer.files_target(output)  # a format writing files: where, checked before the slow part
    gated = [parse_gate(text) for text in fail_if]  # a typo fails before the slow part
    if os.path.isdir(trace_path):
        from tracekit import ranks

        if step is not None or unit is not None or gated or graph_companion:
            raise UsageError("--step, --unit, --fail-if and --graph-companion apply to one trace, "
                             "not to a directory of ranks")
        if renderer.writes_files:  # before the ranks are analysed
            raise UsageError(f"--format {renderer.name} draws one trace's report, not a directory of ranks; "
                             "use --format md, html, json or term")
        if cache_dir is not None and no_cache:
            raise UsageError("--cache and --no-cache contradict each other; give one")
        refuse_inputs(output, ranks.find_traces(trace_path))
        result = ranks.analyze(trace_path, show_progress=True, engine=engine or "pool",
                               cache=False if no_cache else (cache_dir or True))
        options.write_result(output, lambda out: renderer.render(result, out, color=options.colour(output)))
        return
    if engine is not None or cache_dir is not None or no_cache:
        raise UsageError("--engine, --cache and --no-cache apply to a directory of ranks, not to one trace")
    overrides = options.parse_ceilings(ceilings)
    session = Session(trace_path, execution_trace=options.execution_trace_choice(et_path, no_et),
                      workers=None, show_progress=True, graph_companion=graph_companion)
    inputs = [trace_path, session.execution_trace_path, graph_companion]
    if target is None:
        refuse_inputs(output, inputs)
    result = session.report(step=step, ceilings=overrides, hta=hta, unit=unit, timelines=renderer.needs_timelines)
    options.write_result(output, lambda out: renderer.render(result, out, color=options.colour(output)),
                         target=target, inputs=inputs, files=lambda index: renderer.files(result, index=index))
    hits = sorted({f.rule for f in result.findings} & set(gated))
    if hits:
        from tracekit.errors import GateFailed

        raise GateFailed(f"{len(hits)} of {len(set(gated))} --fail-if gates failed: "
                         + ", ".join(f"finding:{rule}" for rule in hits))
