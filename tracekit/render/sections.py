"""The report's tables as rows of display strings, shared by the Markdown and terminal renderers.

Each function returns ``(title, headers, rows)``; rows are lists of plain strings. Keeping the
content here means the two renderers show the same facts and differ only in markup.
"""

from __future__ import annotations

import os

import polars as pl

from tracekit.render.text import describe_decoded, pct, short_kernel_name, us

Table = tuple[str, list[str], list[list[str]]]


def facts_lines(report) -> list[tuple[str, str]]:
    """(label, value) pairs describing the trace."""
    f = report.facts
    devices = "; ".join(
        f"{d['name']} (cc {d['compute_capability']}, {d['num_sms']} SMs)"
        if d.get("compute_capability") else d["name"]
        for d in f.devices
    ) or ("none (CPU-only trace)" if f.vendor == "cpu" else "not recorded")
    steps = ", ".join(str(n) for n in f.step_numbers) or "none"
    lines = [
        ("trace", os.path.basename(f.path)),
        ("device", devices),
        ("vendor", f.vendor),
        ("events", f"{f.event_count:,}"),
        ("steps", steps),
    ]
    lines += [(k, v) for k, v in f.versions.items()]
    if f.distributed:
        lines.append(("distributed", ", ".join(f"{k}={v}" for k, v in sorted(f.distributed.items()))))
    if f.graph_hashes:
        lines.append(("compiled graphs", ", ".join(f.graph_hashes)))
    if report.selected_step is not None:
        lines.append(("selected step", str(report.selected_step)))
    return lines


def steps_table(report) -> Table:
    rows = [
        [r["name"], us(r["dur_ns"]), us(r["gpu_busy_ns"]), pct(r["gpu_busy_ns"], r["dur_ns"]),
         str(r["kernel_count"]), str(r["gpu_activity_count"])]
        for r in report.steps.iter_rows(named=True)
    ]
    return ("Steps", ["step", "wall (CPU span)", "GPU busy", "busy/wall", "kernels",
                      "GPU activities"], rows)


def paths_table(report) -> Table:
    title = "Launch paths"
    if report.path_step is not None:
        title += f" (ProfilerStep#{report.path_step})"
    if report.paths_truncated:
        title += f" — first {report.paths.height} kernels"
    kernels = report.kernels.select("name", "decoded")
    decoded = dict(zip(kernels["name"].to_list(), kernels["decoded"].to_list()))
    rows = [
        [r["scope"] or "", r["top_op"] or "", r["cpu_op"] or "",
         short_kernel_name(r["kernel"], decoded.get(r["kernel"])), r["kernel_class"], r["launch"],
         us(r["dur_ns"])]
        for r in report.paths.iter_rows(named=True)
    ]
    return (title, ["scope", "op", "CPU op", "kernel", "class", "launch", "GPU time"], rows)


def kernels_table(report) -> Table:
    """Kernels grouped by class; classes ordered by their total time."""
    k = report.kernels
    order = (k.group_by("kernel_class").agg(pl.col("total_ns").sum())
             .sort(["total_ns", "kernel_class"], descending=[True, False])["kernel_class"].to_list())
    rows = []
    for cls in order:
        for r in k.filter(pl.col("kernel_class") == cls).iter_rows(named=True):
            rows.append([cls, short_kernel_name(r["name"], r["decoded"]), r["library"],
                         str(r["count"]), us(r["total_ns"]), us(r["mean_ns"]),
                         describe_decoded(r["decoded"])])
    return ("Kernels by class", ["class", "kernel", "library", "count", "total", "mean", "decoded"], rows)


def zero_kernel_table(report) -> Table:
    rows = [[r["name"], str(r["count"]), us(r["cpu_ns"])]
            for r in report.zero_kernel_ops.iter_rows(named=True)]
    return ("Ops that launch no GPU work", ["op", "count", "CPU time (inclusive)"], rows)


def preops_table(report) -> Table:
    rows = [[str(r["step"]) if r["step"] is not None else "", r["name"], r["kind"], str(r["count"]),
             us(r["cpu_ns"])]
            for r in report.compile_preops.iter_rows(named=True)]
    return ("torch.compile pre-ops", ["step", "op", "kind", "count", "CPU time"], rows)


def all_tables(report) -> list[Table]:
    """Every table in display order."""
    return [steps_table(report), paths_table(report), kernels_table(report),
            zero_kernel_table(report), preops_table(report)]


def ranks_table(rank_report) -> Table:
    """One row per rank trace of a directory, the slowest marked."""
    rows = []
    for r in rank_report.ranks.iter_rows(named=True):
        mark = " (slowest)" if r["file"] == rank_report.slowest else ""
        rows.append([
            "" if r["rank"] is None else str(r["rank"]), r["file"] + mark,
            "" if r["error"] else str(r["steps"]), us(r["mean_step_ns"]) if not r["error"] else "",
            us(r["max_step_ns"]) if not r["error"] else "",
            us(r["gpu_busy_ns"]) if not r["error"] else "",
            "" if r["error"] else str(r["kernel_count"]), r["error"] or "",
        ])
    return (f"Ranks in {rank_report.directory}",
            ["rank", "file", "steps", "mean step", "max step", "GPU busy (all steps)", "kernels", "error"],
            rows)
