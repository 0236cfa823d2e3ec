"""Which charting library draws tracekit's charts: Vega-Lite through vl-convert-python, matplotlib's SVG
backend, plotly through kaleido — output size, time to the first chart and per chart, same bytes twice.

    python bench/charts.py [--repeat R] [--results bench/RESULTS.md | --no-results]

The charts are the report's (:mod:`tracekit.render.charts`): GPU time by kernel class per step, the
roofline, the memory timeline, and a diff's per-class bars A vs B, each drawn from the same data
rows (``charts.class_time_rows`` & co.) by each library with the same marks, sizes and colours.
Data come from shipped traces: ``sample_traces/memory/train_eager-memory.json.gz`` (GPT-2 training
step with memory events: 3 steps, 9 classes, 24 roofline points, 2 x 241 memory points),
``sample_traces/compile_sweep/mlp_compile-sweep.json.gz`` (many steps) and the diff of
``mlp_eager`` against ``mlp_compile``.

Each library runs in its own child process (a cold interpreter, as ``tracekit report --format svg``
is): ``first`` is the wall time from before the library's import to the first chart's SVG in hand
(import included; the reports are built before and not counted); ``per chart`` the median of R
renders of each chart afterwards. ``same bytes`` renders every chart twice and compares; ``valid``
parses each SVG as XML. The results are printed and written as the "Charts" section of
``bench/RESULTS.md`` (between its markers; the rest of the file is left as it is). ``bench/compare.py``
regenerates the rest of the file and carries this section over as it is.

What each needs offline: vl-convert-python is one wheel with no dependency (Vega and Vega-Lite in
an embedded JavaScript runtime); matplotlib needs numpy, pillow, fonttools, kiwisolver, contourpy,
cycler, pyparsing, python-dateutil (its fonts ship with it); plotly draws SVG only through kaleido,
which drives a Chrome/Chromium installed on the machine (kaleido 1.x downloads one only when asked:
``kaleido.get_chrome``) — its figure is taken with a browser kept open for the whole run
(``kaleido.start_sync_server``), and without that each chart starts a browser.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sections import write_section  # noqa: E402  (bench/sections.py, beside this file)

TRACES = {
    "memory": ROOT / "sample_traces" / "memory" / "train_eager-memory.json.gz",
    "sweep": ROOT / "sample_traces" / "compile_sweep" / "mlp_compile-sweep.json.gz",
}
DIFF = (ROOT / "sample_traces" / "mlp_eager.json.gz", ROOT / "sample_traces" / "mlp_compile.json.gz")
LIBRARIES = ("vl-convert", "matplotlib", "plotly")
BEGIN, END = "<!-- charts: bench/charts.py -->", "<!-- /charts -->"


def chart_data() -> dict[str, dict]:
    """Every chart's data rows, as :mod:`tracekit.render.charts` computes them."""
    import tracekit
    from tracekit.render import charts

    out: dict[str, dict] = {}
    for key, path in TRACES.items():
        report = tracekit.open(str(path)).report()
        rows, left = charts.class_time_rows(report)
        out[f"gpu_time_by_class:{key}"] = {"kind": "bars", "rows": rows, "left_out": left}
        points, ceilings, left = charts.roofline_data(report)
        if points:
            out[f"roofline:{key}"] = {"kind": "roofline", "points": points, "ceilings": ceilings, "left_out": left}
        mem = charts.memory_rows(report)
        if mem:
            out[f"memory:{key}"] = {"kind": "memory", "rows": mem}
    diff = tracekit.open(str(DIFF[0])).diff(tracekit.open(str(DIFF[1])))
    rows, sides = charts.class_ab_rows(diff)
    out["class_a_vs_b:diff"] = {"kind": "ab", "rows": rows, "sides": list(sides)}
    return out


# ------------------------------------------------------------------------------ per library (child)


def _vl_convert():
    from tracekit.render import charts

    def draw(d: dict) -> str:
        kind = d["kind"]
        if kind == "bars":
            spec = charts.gpu_time_by_class_spec(d["rows"], d["left_out"])
        elif kind == "roofline":
            spec = charts.roofline_spec(d["points"], {**d["ceilings"], "compute": [tuple(c) for c in
                                                                                   d["ceilings"]["compute"]]},
                                        d["left_out"])
        elif kind == "memory":
            spec = charts.memory_spec(d["rows"])
        else:
            spec = charts.class_ab_spec(d["rows"], tuple(d["sides"]))
        return charts.to_svg(spec)
    return draw


def _matplotlib():
    import io

    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams.update({"svg.hashsalt": "tracekit", "svg.fonttype": "none", "font.size": 9})
    from matplotlib.figure import Figure

    from tracekit.render.charts import CLASS_COLOURS, SIDE_COLOURS, class_colour

    def finish(fig, ax=None, xlabel=None, ylabel=None, title=None) -> str:
        if ax is not None:
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(title, loc="left")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
        return buf.getvalue()

    def bars(d):
        rows = d["rows"]
        units = [u for _, u in sorted({(r["order"], r["unit"]) for r in rows})]
        classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
        fig = Figure(figsize=(max(3.5, 0.5 * len(units)) + 2, 3.6))
        ax = fig.add_subplot()
        bottom = [0.0] * len(units)
        for k in classes:
            vals = [0.0] * len(units)
            for r in rows:
                if r["class"] == k:
                    vals[units.index(r["unit"])] = r["us"]
            ax.bar(range(len(units)), vals, bottom=bottom, color=class_colour(k), label=k)
            bottom = [a + b for a, b in zip(bottom, vals)]
        ax.set_xticks(range(len(units)), units, rotation=40 if len(units) > 3 else 0, ha="right")
        ax.set_ylabel("GPU time (µs)")
        ax.set_title("GPU time by kernel class per step", loc="left")
        ax.legend(title="kernel class", loc="upper left", bbox_to_anchor=(1.01, 1))
        return finish(fig)

    def roofline(d):
        pts, ceil = d["points"], d["ceilings"]
        fig = Figure(figsize=(7.5, 4.5))
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        hbm = ceil["hbm"]
        xs = [p["intensity"] for p in pts]
        lo, hi = min(xs) / 4, max(xs + [c[1] / hbm for c in ceil["compute"]]) * 4
        for (dtype, peak), colour in zip(ceil["compute"], ("#8c564b", "#7f7f7f", "#17becf")):
            ax.plot([lo, hi], [peak / 1e12] * 2, "--", color=colour, label=f"{dtype} compute {peak / 1e12:,.0f} TFLOP/s")
        top = max(c[1] for c in ceil["compute"])
        ax.plot([lo, top / hbm], [lo * hbm / 1e12, top / 1e12], "--", color="#333333", label=f"HBM {hbm / 1e12:.2f} TB/s")
        for k in sorted({p["class"] for p in pts}, key=lambda k: list(CLASS_COLOURS).index(k)):
            sel = [p for p in pts if p["class"] == k]
            ax.scatter([p["intensity"] for p in sel], [p["tflops"] for p in sel], color=class_colour(k), label=k, s=30)
        return finish(fig, ax, "arithmetic intensity (FLOP/byte)", "achieved TFLOP/s",
                      "Achieved throughput against the device's ceilings (roofline)")

    def memory(d):
        fig = Figure(figsize=(7.5, 3.4))
        ax = fig.add_subplot()
        for series, style in (("allocated", "-"), ("reserved", "--")):
            sel = [r for r in d["rows"] if r["series"] == series]
            ax.step([r["ms"] for r in sel], [r["gb"] for r in sel], style, where="post", label=series)
        return finish(fig, ax, "time since the first memory event (ms)", "GB", "Memory over time")

    def ab(d):
        rows, sides = d["rows"], d["sides"]
        classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
        fig = Figure(figsize=(6.5, 0.5 + 0.4 * len(classes)))
        ax = fig.add_subplot()
        for order, side in enumerate(sides):
            vals = {r["class"]: r["us"] for r in rows if r["order"] == order}
            ax.barh([i + 0.4 * order for i in range(len(classes))], [vals[k] for k in classes], height=0.4,
                    color=SIDE_COLOURS[order], label=side)
        ax.set_yticks([i + 0.2 for i in range(len(classes))], classes)
        ax.invert_yaxis()
        ax.set_xlabel("GPU time per step (µs)")
        ax.set_title("GPU time per kernel class, A vs B", loc="left")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
        return finish(fig)

    table = {"bars": bars, "roofline": roofline, "memory": memory, "ab": ab}
    return lambda d: table[d["kind"]](d)


def _plotly():
    import kaleido
    import plotly.graph_objects as go

    from tracekit.render.charts import CLASS_COLOURS, SIDE_COLOURS, class_colour

    kaleido.start_sync_server(silence_warnings=True)

    def finish(fig) -> str:
        return fig.to_image(format="svg").decode()

    def bars(d):
        rows = d["rows"]
        units = [u for _, u in sorted({(r["order"], r["unit"]) for r in rows})]
        classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
        fig = go.Figure([go.Bar(x=[r["unit"] for r in rows if r["class"] == k],
                                y=[r["us"] for r in rows if r["class"] == k], name=k,
                                marker_color=class_colour(k)) for k in classes])
        fig.update_layout(barmode="stack", title="GPU time by kernel class per step", yaxis_title="GPU time (µs)",
                          xaxis={"categoryorder": "array", "categoryarray": units},
                          width=max(420, 40 * len(units) + 260), height=380, template="plotly_white")
        return finish(fig)

    def roofline(d):
        pts, ceil = d["points"], d["ceilings"]
        hbm = ceil["hbm"]
        xs = [p["intensity"] for p in pts]
        lo, hi = min(xs) / 4, max(xs + [c[1] / hbm for c in ceil["compute"]]) * 4
        traces = [go.Scatter(x=[lo, hi], y=[peak / 1e12] * 2, mode="lines", line_dash="dash",
                             name=f"{dtype} compute {peak / 1e12:,.0f} TFLOP/s") for dtype, peak in ceil["compute"]]
        top = max(c[1] for c in ceil["compute"])
        traces.append(go.Scatter(x=[lo, top / hbm], y=[lo * hbm / 1e12, top / 1e12], mode="lines",
                                 line_dash="dash", name=f"HBM {hbm / 1e12:.2f} TB/s"))
        for k in sorted({p["class"] for p in pts}, key=lambda k: list(CLASS_COLOURS).index(k)):
            sel = [p for p in pts if p["class"] == k]
            traces.append(go.Scatter(x=[p["intensity"] for p in sel], y=[p["tflops"] for p in sel], mode="markers",
                                     name=k, marker_color=class_colour(k), text=[p["kernel"] for p in sel]))
        fig = go.Figure(traces)
        fig.update_layout(title="Achieved throughput against the device's ceilings (roofline)",
                          xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
                          yaxis={"type": "log", "title": "achieved TFLOP/s"}, width=800, height=460,
                          template="plotly_white")
        return finish(fig)

    def memory(d):
        traces = []
        for series, dash in (("allocated", "solid"), ("reserved", "dash")):
            sel = [r for r in d["rows"] if r["series"] == series]
            traces.append(go.Scatter(x=[r["ms"] for r in sel], y=[r["gb"] for r in sel], mode="lines",
                                     line_shape="hv", line_dash=dash, name=series))
        fig = go.Figure(traces)
        fig.update_layout(title="Memory over time", xaxis_title="time since the first memory event (ms)",
                          yaxis_title="GB", width=800, height=340, template="plotly_white")
        return finish(fig)

    def ab(d):
        rows, sides = d["rows"], d["sides"]
        classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
        fig = go.Figure([go.Bar(y=classes, x=[{r["class"]: r["us"] for r in rows if r["order"] == o}[k] for k in classes],
                                orientation="h", name=side, marker_color=SIDE_COLOURS[o])
                         for o, side in enumerate(sides)])
        fig.update_layout(barmode="group", title="GPU time per kernel class, A vs B",
                          xaxis_title="GPU time per step (µs)", yaxis={"autorange": "reversed"},
                          width=640, height=120 + 40 * len(classes), template="plotly_white")
        return finish(fig)

    table = {"bars": bars, "roofline": roofline, "memory": memory, "ab": ab}
    return lambda d: table[d["kind"]](d)


def child(library: str, data_path: str, repeat: int, out_dir: str | None) -> dict:
    """Import ``library``, draw every chart; the figures as a dict (printed as JSON by the child)."""
    import xml.etree.ElementTree as ET

    data = json.loads(Path(data_path).read_text())
    start = time.perf_counter()
    draw = {"vl-convert": _vl_convert, "matplotlib": _matplotlib, "plotly": _plotly}[library]()
    imported = time.perf_counter()
    names = list(data)
    first = draw(data[names[0]])
    first_s = time.perf_counter() - start
    charts = {}
    for name in names:
        svg = draw(data[name]) if name != names[0] else first
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            again = draw(data[name])
            times.append(time.perf_counter() - t)
        try:
            ET.fromstring(svg)
            valid = True
        except ET.ParseError:
            valid = False
        charts[name] = {"bytes": len(svg.encode()), "median_s": statistics.median(times), "same_bytes": again == svg,
                        "valid": valid}
        if out_dir:
            Path(out_dir, f"{library}-{name.replace(':', '-')}.svg").write_text(svg)
    return {"library": library, "import_s": imported - start, "first_s": first_s, "charts": charts}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("vl-convert-python", "matplotlib", "plotly", "kaleido", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def render_section(results: list[dict], repeat: int, when: str, load: tuple[float, float]) -> str:
    names = list(results[0]["charts"])
    lines = [BEGIN, "## Charts: which library draws the SVG charts", "",
             "Generated by `python bench/charts.py` — rerun the script to refresh this section.", "",
             f"- Run: {when}, tracekit commit `{_commit()}`; {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores (shared with other work: 1-minute load average {load[0]:.1f} before, "
             f"{load[1]:.1f} after); Python {platform.python_version()}; "
             + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
             "- Each library in a fresh child process. *first*: import + first chart (the reports are built "
             f"before, not counted); *per chart*: median of {repeat} renders after it; bytes of the SVG; "
             "*same bytes*: two renders byte-identical; every SVG parsed as XML.",
             "- Offline needs: vl-convert-python is one wheel, no dependency, no browser; matplotlib needs "
             "numpy, pillow, fonttools, kiwisolver, contourpy, cycler, pyparsing, python-dateutil; plotly "
             "needs kaleido and a Chrome/Chromium on the machine (kept open for the run: "
             "`kaleido.start_sync_server`).", "",
             "| library | import | first chart | " + " | ".join(f"`{n}`" for n in names) + " | total bytes | same bytes |",
             "|---|---:|---:|" + "---:|" * len(names) + "---:|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['library']} | failed: {r['error']} |" + " |" * (len(names) + 3))
            continue
        cells = [f"{c['bytes'] / 1000:,.1f} kB / {1000 * c['median_s']:,.0f} ms" for c in r["charts"].values()]
        same = all(c["same_bytes"] for c in r["charts"].values())
        valid = all(c["valid"] for c in r["charts"].values())
        total = sum(c["bytes"] for c in r["charts"].values())
        lines.append(f"| {r['library']} | {r['import_s']:.2f} s | {r['first_s']:.2f} s | " + " | ".join(cells)
                     + f" | {total / 1000:,.1f} kB | {'yes' if same else 'no'}{'' if valid else ' (invalid XML)'} |")
    lines += ["", "Cells: SVG size / median time per chart.", END]
    return "\n".join(lines)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    ap.add_argument("--no-results", action="store_true", help="print only")
    ap.add_argument("--svg-dir", default=None, help="also write every library's SVGs here (to look at)")
    ap.add_argument("--child", nargs=2, metavar=("LIBRARY", "DATA"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.repeat, args.svg_dir)))
        return
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        data_path = Path(tmp, "data.json")
        data_path.write_text(json.dumps(chart_data()))
        results = []
        for library in LIBRARIES:
            cmd = [sys.executable, __file__, "--child", library, str(data_path), "--repeat", str(args.repeat)]
            if args.svg_dir:
                cmd += ["--svg-dir", args.svg_dir]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if proc.returncode:
                last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                results.append({"library": library, "error": last[:200]})
            else:
                results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    section = render_section(results, args.repeat, when, (load_before, os.getloadavg()[0]))
    print(section)
    if not args.no_results:
        write_section(args.results, section, BEGIN, END)
        print(f"wrote the Charts section of {args.results}")


if __name__ == "__main__":
    main()
