"""Charts as standalone SVG: GPU time by kernel class per step, the roofline, the memory timeline, and
a diff's per-class time A vs B.

Contract (read by the ``svg`` and ``html`` formats): each public chart function takes a report (or a
diff) and returns one standalone ``<svg>`` document as text — XML-valid, every name (kernel class,
step, kernel, device, trace label) escaped, no script, no external reference, nothing fetched — or
``None`` when the report lacks the data:

* :func:`gpu_time_by_class` — stacked bars, one bar per unit (step) and one segment per kernel class
  (the report's breakdown per unit: ``breakdown.shares``, scope ``unit``, group ``class``); the whole
  trace's row when the trace has no units. At most :data:`MAX_BARS` bars (the first ones; the
  title says how many were left out).
* :func:`roofline` — arithmetic intensity (FLOP/byte) against achieved FLOP/s, log-log, one point per
  row of ``throughput.kernels`` that has both figures above zero (a kernel without FLOPs, such as a
  copy, has no place on a log axis), at most :data:`MAX_POINTS` (the rows with the most time; the
  subtitle counts those left out); the HBM ceiling
  (``intensity × hbm_bytes_per_s``) and the compute ceiling of each dtype the points use drawn as
  lines. None without any such point.
* :func:`memory_timeline` — allocated and reserved bytes over time per GPU device (the report's
  ``memory.timeline``: each span's highest values); None without memory events on a GPU.
* :func:`rank_collectives` — the ranks × time picture of the matched collectives (drawn by hand
  as the step timeline is, :mod:`tracekit.render.rank_timeline`); None when none matched.
* :func:`class_time_a_vs_b` — per kernel class, the median GPU time per step of A and of B side by
  side (``Diff.classes``); None when neither has kernel time.

Rendering: Vega-Lite specifications compiled to SVG by ``vl-convert-python`` (Vega's own SVG
renderer in an embedded JavaScript runtime: one wheel, no dependency, no browser, nothing fetched at
run time). ``bench/charts.py`` chose it over matplotlib's SVG backend and plotly + kaleido by output
size and time (figures in ``bench/RESULTS.md``). The same data gives the same bytes: the data rows
are sorted with tiebreakers, and Vega writes no date or random id. Text goes into the specification
as data (never as markup), and Vega's SVG writer escapes it; :func:`label` additionally makes it
visible and XML-safe (:func:`~tracekit.render.text.for_display`: control and bidi characters,
surrogates and noncharacters as escapes) and cuts it to a readable length. :func:`to_svg` passes
every string of the specification through the same function once more before vl-convert sees it:
vl-convert measures text by parsing it as XML in native code, and a character XML forbids (U+FFFE
in a device name) makes it panic and abort the whole process, which no Python ``except`` catches. Each bar and point
carries its figures in its ``aria-label`` (Vega's ``description``: step, class, µs; kernel, dtype,
TFLOP/s, GB/s, FLOP/byte), for screen readers and for a page's hover. Kernel classes have the
timeline's colours (:data:`tracekit.render.timeline.CLASS_COLOURS`). Marks are Vega's: bars are the
paths of ``g.mark-rect.role-mark``, roofline points those of ``g.mark-symbol.role-mark.kernels_marks``.

The chart data (:func:`class_time_rows`, :func:`roofline_data`, :func:`memory_rows`,
:func:`class_ab_rows`) is plain lists of dicts, so ``bench/charts.py`` draws the very same figures
with other libraries.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from tracekit.render.text import for_display
from tracekit.render.timeline import CLASS_COLOURS, OTHER_COLOUR, axis_unit

if TYPE_CHECKING:
    from tracekit.results.diff import Diff
    from tracekit.results.ranks import RankReport
    from tracekit.results.report import Report

#: Bars drawn in :func:`gpu_time_by_class` (one per unit; the first ones).
MAX_BARS = 64
#: Points drawn in :func:`roofline` (the kernels with the most GPU time; the subtitle counts the rest).
MAX_POINTS = 400
#: Longest name shown in a chart (legends, descriptions); the full name stays in the report.
LABEL_LIMIT = 80
#: Longest step name under a bar: cut in the middle, so ``…#12`` still tells the steps apart.
UNIT_LIMIT = 28
#: Colours of A and B in :func:`class_time_a_vs_b`.
SIDE_COLOURS = ("#9c9c9c", "#4e79a7")


def label(value: object, limit: int = LABEL_LIMIT, *, keep_end: int = 0) -> str:
    """A name as a chart shows it: visible and XML-safe (:func:`~tracekit.render.text.for_display`) and
    at most ``limit`` characters, cut with ``…`` before its last ``keep_end`` characters."""
    text = for_display(value, limit=1000)
    if len(text) <= limit:
        return text
    return text[: limit - 1 - keep_end] + "…" + (text[-keep_end:] if keep_end else "")


# ---------------------------------------------------------------------------------------- data


def class_time_rows(report: Report) -> tuple[list[dict[str, Any]], int]:
    """GPU time per unit and kernel class: rows ``{"unit": label, "order": i, "class": str, "us":
    float}`` (units in trace order, classes by the trace's GPU time, most first), and how many units
    were left out (past :data:`MAX_BARS`)."""
    import polars as pl

    found = report.breakdown
    if found is None:
        return [], 0
    shares = found.shares.filter(pl.col("group") == "class")
    names = dict(zip(report.steps["number"].to_list(), report.steps["name"].to_list()))
    units = shares.filter(pl.col("scope") == "unit")
    if report.selected_step is not None:
        units = units.filter(pl.col("unit") == report.selected_step)
    if units.height:
        numbers = sorted(set(units["unit"].to_list()))
    else:  # no units: the whole trace as one bar
        units = shares.filter(pl.col("scope") == "trace").with_columns(unit=pl.lit(-1, pl.Int64))
        numbers, names = [-1], {-1: "whole trace"}
    kept, left_out = numbers[:MAX_BARS], max(0, len(numbers) - MAX_BARS)
    order = {n: i for i, n in enumerate(kept)}
    totals = (units.group_by("key").agg(pl.col("gpu_ns").sum()).sort(["gpu_ns", "key"], descending=[True, False]))
    rank = {k: i for i, k in enumerate(totals["key"].to_list())}
    rows = [{"unit": label(names.get(r["unit"]) or f"unit {r['unit']}", UNIT_LIMIT, keep_end=8),
             "order": order[r["unit"]],
             "class": label(r["key"]), "rank": rank[r["key"]], "us": r["gpu_ns"] / 1e3}
            for r in units.filter(pl.col("unit").is_in(kept)).iter_rows(named=True) if r["gpu_ns"] > 0]
    rows.sort(key=lambda r: (r["order"], r["rank"], r["class"]))
    for r in rows:
        r["what"] = f"{r['unit']}: {r['class']} {r['us']:,.1f} µs"
    return rows, left_out


def roofline_data(report: Report) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """The roofline's points, ceilings and the count of kernels left out.

    Points: one per ``throughput.kernels`` row with intensity and achieved FLOP/s above zero:
    ``{"kernel": short name, "class", "dtype", "intensity" (FLOP/B), "flops" (FLOP/s), "tflops",
    "gbps", "count"}``, most total time first. Ceilings: ``{"device", "hbm" (B/s or None), "compute":
    [(dtype, FLOP/s)…]}`` for the dtypes the points use (the device's headline dtype when none
    names one). Left out: the other rows (no FLOPs, no traffic model, or past :data:`MAX_POINTS`)."""
    from tracekit.classify.names import short_kernel_name

    rates = report.throughput
    if rates is None or rates.kernels.height == 0:
        return [], {}, 0
    decoded = dict(zip(report.kernels["name"].to_list(), report.kernels["decoded"].to_list()))
    points = []
    for r in rates.kernels.iter_rows(named=True):
        intensity, flops = r["intensity"], r["achieved_flops_per_s"]
        if intensity is None or flops is None or intensity <= 0 or flops <= 0 or len(points) == MAX_POINTS:
            continue
        points.append({"kernel": label(short_kernel_name(r["name"], decoded.get(r["name"]))),
                       "class": label(r["kernel_class"]), "dtype": label(r["math"] or r["dtype"] or "?"),
                       "intensity": float(intensity), "flops": float(flops), "tflops": float(flops) / 1e12,
                       "gbps": float(r["achieved_bytes_per_s"] or 0.0) / 1e9, "count": int(r["count"])})
        p = points[-1]
        p["what"] = (f"{p['kernel']} ({p['class']}, {p['dtype']}, {p['count']} calls): {p['tflops']:,.3g} TFLOP/s, "
                     f"{p['gbps']:,.0f} GB/s at {p['intensity']:,.3g} FLOP/byte")
    ceil = rates.ceilings or {}
    rates_by_dtype = ceil.get("flops") or {}
    from tracekit import devices

    dtypes = sorted({p["dtype"] for p in points} or {ceil.get("dtype") or ""})
    compute = []
    for dtype in dtypes:
        peak = rates_by_dtype.get(devices.DTYPE_RATE.get(dtype, dtype))
        if peak:
            compute.append((dtype, float(peak)))
    ceilings = {"device": label(ceil.get("device") or rates.device or "unknown device"),
                "hbm": float(ceil["hbm_bytes_per_s"]) if ceil.get("hbm_bytes_per_s") else None,
                "compute": sorted(set(compute), key=lambda c: (-c[1], c[0]))}
    return points, ceilings, rates.kernels.height - len(points)


def memory_rows(report: Report) -> list[dict[str, Any]]:
    """Allocated and reserved memory per GPU device over time: rows ``{"device", "ms"`` (from the
    trace's first memory point), ``"series"`` (allocated | reserved), ``"gib"}`` (GiB, the unit the
    report's tables use), in time order.
    CPU allocations are left out (another scale, and no reserve)."""
    import polars as pl

    mem = report.memory
    if mem is None or mem.timeline.height == 0:
        return []
    gpu = mem.timeline.filter(pl.col("device") != "cpu").sort(["device", "ts"])
    if gpu.height == 0:
        return []
    start = int(gpu["ts"].min())
    rows = []
    for r in gpu.iter_rows(named=True):
        ms = (r["ts"] - start) / 1e6
        # Traces without the allocator's totals (before PyTorch 1.10) have no reserved series.
        for series in ("allocated", "reserved"):
            if r[series] is not None:
                rows.append({"device": label(r["device"]), "ms": ms, "series": series, "gib": r[series] / (1 << 30)})
    return rows


def class_ab_rows(diff: Diff) -> tuple[list[dict[str, Any]], tuple[str, str]]:
    """Median GPU time per step of each kernel class in A and B: rows ``{"class", "side"`` (A's or
    B's label), ``"order"`` (0 for A), ``"us"}``, classes by the larger of the two, most first; and
    the two side labels."""
    sides = (label(f"A: {diff.a.label}", 60), label(f"B: {diff.b.label}", 60))
    classes = [q for q in diff.classes if q.a > 0 or q.b > 0]
    classes.sort(key=lambda q: (-max(q.a, q.b), q.label))
    rows = []
    for rank, q in enumerate(classes):
        for order, value in enumerate((q.a, q.b)):
            rows.append({"class": label(q.label), "rank": rank, "side": sides[order], "order": order,
                         "us": float(value) / 1e3, "what": f"{sides[order]}: {label(q.label)} {value / 1e3:,.1f} µs"})
    return rows, sides


def rank_rows(ranks: RankReport) -> list[dict[str, Any]]:
    """Step time per rank: rows ``{"rank": label, "order": i, "mean_us", "max_us", "slowest": bool,
    "what"}`` for the rank traces with steps, in the result's order (rank, then file). ``slowest``
    (drawn in red) marks the rank the others waited for (:attr:`RankReport.culprit`), never the
    longest step: that is most often the rank that waited."""
    rows = []
    culprit = ranks.culprit
    for r in ranks.ranks.iter_rows(named=True):
        if r["error"] or r["mean_step_ns"] is None:
            continue
        name = f"rank {r['rank']}" if r["rank"] is not None else label(r["file"], UNIT_LIMIT, keep_end=8)
        slowest = culprit is not None and r["rank"] == culprit
        rows.append({"rank": name + (" (waited for)" if slowest else ""), "order": len(rows),
                     "mean_us": r["mean_step_ns"] / 1e3, "max_us": r["max_step_ns"] / 1e3, "slowest": slowest,
                     "what": f"{name}: mean step {r['mean_step_ns'] / 1e3:,.1f} µs, longest {r['max_step_ns'] / 1e3:,.1f} µs"
                             f" over {r['steps']} steps ({label(r['file'])})"})
    return rows


def class_colour(klass: str) -> str:
    """The colour of kernel class ``klass``: the timeline's (:data:`tracekit.render.timeline.CLASS_COLOURS`),
    so a class has one colour in every picture."""
    return CLASS_COLOURS.get(klass, OTHER_COLOUR)


# ------------------------------------------------------------------------------ Vega-Lite specs

#: Vega-Lite version the specifications are written for (one of vl-convert's bundled versions).
VEGA_LITE = "6.4"
_CONFIG: dict[str, Any] = {
    "font": "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif",
    "background": "white", "view": {"stroke": "#dddddd"},
    "title": {"anchor": "start", "fontSize": 14, "subtitleColor": "#555555"},
    "axis": {"labelFontSize": 11, "titleFontSize": 12, "labelLimit": 240},
    "legend": {"labelFontSize": 11, "titleFontSize": 12, "labelLimit": 320},
}


def _class_scale(classes: list[str]) -> dict[str, Any]:
    return {"domain": classes, "range": [class_colour(k) for k in classes]}


def _title(text: str, subtitle: str | None = None) -> dict[str, Any]:
    return {"text": text, **({"subtitle": subtitle} if subtitle else {})}


def _in_unit(rows: list[dict[str, Any]], field: str, largest_us: float) -> tuple[list[dict[str, Any]], str]:
    """Copies of ``rows`` with ``field`` (µs) also as ``value`` in the unit an axis up to
    ``largest_us`` is labelled in (:func:`tracekit.render.timeline.axis_unit`: a 200 ms axis in
    ms), and the unit's symbol."""
    size, name = axis_unit(largest_us * 1e3)
    return [{**r, "value": r[field] * 1e3 / size} for r in rows], name


def gpu_time_by_class_spec(rows: list[dict[str, Any]], left_out: int) -> dict[str, Any]:
    """The Vega-Lite specification of :func:`gpu_time_by_class`."""
    totals: dict[int, float] = {}
    for r in rows:
        totals[r["order"]] = totals.get(r["order"], 0.0) + r["us"]
    rows, unit = _in_unit(rows, "us", max(totals.values(), default=0.0))
    units = sorted({(r["order"], r["unit"]) for r in rows})
    classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
    note = f"{len(units)} steps shown, {left_out} more left out" if left_out else None
    # Upright step names when each fits under its bar (about 7 px a character), else slanted.
    longest = max((len(u) for _, u in units), default=0)
    upright = 7 * longest + 8 <= 120 and len(units) <= 8
    step = max(7 * longest + 8, 30) if upright else max(16, min(40, 900 // max(len(units), 1)))
    return {
        "title": _title("GPU time by kernel class per step", note),
        "data": {"values": rows},
        "width": {"step": step}, "height": 280,
        "mark": {"type": "bar"},
        "encoding": {
            "x": {"field": "unit", "type": "nominal", "title": None, "sort": [u for _, u in units],
                  "axis": {"labelAngle": 0 if upright else -40, "labelAlign": "center" if upright else "right"}},
            "y": {"field": "value", "type": "quantitative", "title": f"GPU time ({unit})", "stack": "zero"},
            "color": {"field": "class", "type": "nominal", "title": "kernel class", "scale": _class_scale(classes),
                      "sort": classes},
            "order": {"field": "rank", "type": "quantitative", "sort": "ascending"},
            "description": {"field": "what"},
        },
    }


def roofline_spec(points: list[dict[str, Any]], ceilings: dict[str, Any], left_out: int) -> dict[str, Any]:
    """The Vega-Lite specification of :func:`roofline` (intensity in FLOP/B, rate in TFLOP/s)."""
    hbm, compute = ceilings.get("hbm"), ceilings.get("compute") or []
    xs = [p["intensity"] for p in points] + [peak / hbm for _, peak in compute if hbm]
    ys = [p["flops"] for p in points] + [peak for _, peak in compute]
    x_lo, x_hi = min(xs) / 4, max(xs) * 4
    y_lo, y_hi = min(ys) / 4, max(ys) * 2
    lines: list[dict[str, Any]] = []
    for dtype, peak in compute:
        name = f"{dtype} compute {peak / 1e12:,.0f} TFLOP/s"
        lines += [{"ceiling": name, "i": 0, "intensity": x_lo, "tflops": peak / 1e12},
                  {"ceiling": name, "i": 1, "intensity": x_hi, "tflops": peak / 1e12}]
    if hbm:
        name = f"HBM {hbm / 1e12:,.2f} TB/s"
        top = max([peak for _, peak in compute] or [y_hi])
        lines += [{"ceiling": name, "i": 0, "intensity": x_lo, "tflops": x_lo * hbm / 1e12},
                  {"ceiling": name, "i": 1, "intensity": top / hbm, "tflops": top / 1e12}]
    classes = sorted({p["class"] for p in points}, key=lambda k: (list(CLASS_COLOURS).index(k)
                                                                   if k in CLASS_COLOURS else 99, k))
    subtitle = f"{ceilings.get('device')}: one point per kernel and problem"
    if not lines:
        subtitle += " (no ceilings known for this device: pass --ceiling)"
    if left_out:
        subtitle += f"; {left_out} not drawn (no FLOPs or traffic model, or past the {MAX_POINTS} with the most time)"
    x = {"field": "intensity", "type": "quantitative", "title": "arithmetic intensity (FLOP/byte)",
         "scale": {"type": "log", "domain": [x_lo, x_hi], "nice": False},
         "axis": {"values": _decades(x_lo, x_hi), "labelExpr": _LOG_LABEL}}
    y = {"field": "tflops", "type": "quantitative", "title": "achieved TFLOP/s",
         "scale": {"type": "log", "domain": [y_lo / 1e12, y_hi / 1e12], "nice": False},
         "axis": {"values": _decades(y_lo / 1e12, y_hi / 1e12), "labelExpr": _LOG_LABEL}}
    names = list(dict.fromkeys(line["ceiling"] for line in sorted(lines, key=lambda c: not c["ceiling"].startswith("HBM"))))
    layers: list[dict[str, Any]] = []
    if lines:
        layers.append(
            {"name": "ceilings", "data": {"values": lines}, "mark": {"type": "line", "strokeDash": [6, 3]},
             "encoding": {"x": x, "y": y, "order": {"field": "i"},
                          "color": {"field": "ceiling", "type": "nominal", "title": "ceiling",
                                    "scale": {"domain": names,
                                              "range": ["#333333", "#8c564b", "#7f7f7f", "#17becf", "#bcbd22"]},
                                    "legend": {"orient": "bottom", "direction": "vertical"}}}})
    return {
        "title": _title("Achieved throughput against the device's ceilings (roofline)", subtitle),
        "width": 560, "height": 360,
        "resolve": {"scale": {"color": "independent"}},
        "layer": layers + [
            {"name": "kernels", "data": {"values": points},
             "mark": {"type": "point", "filled": True, "size": 70, "opacity": 0.85},
             "encoding": {"x": x, "y": y,
                          "color": {"field": "class", "type": "nominal", "title": "kernel class",
                                    "scale": _class_scale(classes)},
                          "description": {"field": "what"}}},
        ],
    }


#: A log axis' label: plain figures from 0.001 to 99,999, powers of ten (``1e-7``) beyond.
_LOG_LABEL = ("datum.value >= 0.001 && datum.value < 100000 ? format(datum.value, '~g') "
              ": format(datum.value, '.0e')")


def _decades(lo: float, hi: float) -> list[float]:
    """The powers of ten within ``[lo, hi]``: a log axis' ticks and grid lines."""
    import math

    return [10.0 ** e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1)]


def memory_spec(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Vega-Lite specification of :func:`memory_timeline`."""
    devices = sorted({r["device"] for r in rows})
    colour: dict[str, Any] = ({"field": "series", "type": "nominal", "title": None,
                               "scale": {"domain": ["allocated", "reserved"], "range": ["#4e79a7", "#f28e2b"]}}
                              if len(devices) == 1 else {"field": "device", "type": "nominal", "title": "device"})
    return {
        "title": _title("Memory over time", f"{', '.join(devices)}: allocated and reserved (highest per span)"),
        "data": {"values": rows}, "width": 640, "height": 260,
        "mark": {"type": "line", "interpolate": "step-after"},
        "encoding": {
            "x": {"field": "ms", "type": "quantitative", "title": "time since the first memory event (ms)"},
            "y": {"field": "gib", "type": "quantitative", "title": "GiB"},
            "color": colour,
            "strokeDash": {"field": "series", "type": "nominal", "title": None,
                           "scale": {"domain": ["allocated", "reserved"], "range": [[1, 0], [6, 3]]}},
            "detail": {"field": "device"},
        },
    }


def class_ab_spec(rows: list[dict[str, Any]], sides: tuple[str, str]) -> dict[str, Any]:
    """The Vega-Lite specification of :func:`class_time_a_vs_b`."""
    classes = [k for _, k in sorted({(r["rank"], r["class"]) for r in rows})]
    rows, unit = _in_unit(rows, "us", max((r["us"] for r in rows), default=0.0))
    return {
        "title": _title("GPU time per kernel class, A vs B", "median per step"),
        "data": {"values": rows}, "width": 480, "height": {"step": 14},
        "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": "class", "type": "nominal", "title": None, "sort": classes},
            "yOffset": {"field": "side", "type": "nominal", "sort": list(sides)},
            "x": {"field": "value", "type": "quantitative", "title": f"GPU time per step ({unit})"},
            "color": {"field": "side", "type": "nominal", "title": None,
                      "scale": {"domain": list(sides), "range": list(SIDE_COLOURS)},
                      "legend": {"orient": "bottom"}},
            "description": {"field": "what"},
        },
    }


SLOWEST_COLOUR, RANK_COLOUR = "#c0392b", "#4e79a7"


def rank_step_times_spec(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Vega-Lite specification of :func:`rank_step_times`."""
    size, unit = axis_unit(1e3 * max((r["max_us"] for r in rows), default=0.0))
    rows = [{**r, "mean": r["mean_us"] * 1e3 / size, "longest": r["max_us"] * 1e3 / size} for r in rows]
    ranks = [r["rank"] for r in sorted(rows, key=lambda r: r["order"])]
    y = {"field": "rank", "type": "nominal", "title": None, "sort": ranks}
    return {
        "title": _title("Step time per rank", "bar: mean step (CPU span) · tick: longest step · red: the rank the others waited for"),
        "data": {"values": rows}, "width": 560, "height": {"step": 22},
        "layer": [
            {"mark": {"type": "bar"},
             "encoding": {"y": y, "x": {"field": "mean", "type": "quantitative", "title": f"step time ({unit})"},
                          "color": {"field": "slowest", "type": "nominal", "legend": None,
                                    "scale": {"domain": [False, True], "range": [RANK_COLOUR, SLOWEST_COLOUR]}},
                          "description": {"field": "what"}}},
            {"mark": {"type": "tick", "thickness": 2, "color": "#1d232b"},
             "encoding": {"y": y, "x": {"field": "longest", "type": "quantitative"}, "description": {"field": "what"}}},
        ],
    }


def to_svg(spec: dict[str, Any]) -> str:
    """``spec`` (Vega-Lite) as standalone SVG text, offline: no URL may be fetched. Each mark's
    ``aria-label`` is also its ``<title>``, so a browser shows the figures on hover. Under an
    address-space limit the chart is a note saying why it was not drawn (:func:`not_drawn`)."""
    title = spec.get("title")
    if address_space_limited():
        return not_drawn(title.get("text", "chart") if isinstance(title, dict) else str(title or "chart"),
                         UNDER_ADDRESS_LIMIT)
    import vl_convert

    full = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "config": _CONFIG, **_safe(spec)}
    return _hover_titles(vl_convert.vegalite_to_svg(full, vl_version=VEGA_LITE, allowed_base_urls=[]))


def _safe(value: Any) -> Any:
    """``value`` (a specification, or part of one) with every string, key or value, through
    :func:`~tracekit.render.text.for_display` (module docstring: what vl-convert cannot take aborts
    the process). The labels already went through it, and it changes nothing the second time; the
    specification's own words (fields, types, expressions) hold no character it changes."""
    if isinstance(value, str):
        return for_display(value)
    if isinstance(value, dict):
        return {_safe(k): _safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    return value


#: A self-closing mark with its figures in ``aria-label`` (Vega's SVG writer: attribute text escaped,
#: so the same text is valid element content).
_LABELLED_MARK = re.compile(r'<(path|rect|line)\b([^<>]*?\baria-label="([^"]*)"[^<>]*?)/>')


def _hover_titles(svg: str) -> str:
    """Every labelled mark of ``svg`` given a ``<title>`` child holding its label (hover text)."""
    return _LABELLED_MARK.sub(lambda m: f"<{m.group(1)}{m.group(2)}><title>{m.group(3)}</title></{m.group(1)}>", svg)


#: Why a chart is not drawn in a process with an address-space limit.
UNDER_ADDRESS_LIMIT = ("not drawn: this process runs under an address-space limit (ulimit -v), and the chart "
                       "renderer's JavaScript engine (vl-convert's V8) aborts the process under any such limit")


def address_space_limited() -> bool:
    """Whether this process has an address-space limit (``RLIMIT_AS``), under which vl-convert's
    embedded V8 aborts the whole process (it reserves a large caged heap up front) — measured:
    already at 16 GB. Charts are then not drawn, never a crash."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return False
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def not_drawn(title: str, why: str) -> str:
    """A small standalone SVG in place of a chart: its title and why it is not drawn (escaped)."""
    head, reason = escape(label(title)), escape(for_display(why))
    return ('<svg xmlns="http://www.w3.org/2000/svg" class="tk-not-drawn" width="720" height="56" '
            f'viewBox="0 0 720 56" role="img" aria-label="{reason}"><title>{reason}</title>'
            '<rect width="720" height="56" fill="white" stroke="#cccccc"/>'
            f'<text x="10" y="22" font-family="sans-serif" font-size="13" font-weight="bold">{head}</text>'
            f'<text x="10" y="42" font-family="sans-serif" font-size="11" fill="#555555">{reason}</text></svg>')


# ----------------------------------------------------------------------------------- charts


def gpu_time_by_class(report: Report) -> str | None:
    """Stacked bars: GPU time per kernel class in each step (module docstring)."""
    rows, left_out = class_time_rows(report)
    return to_svg(gpu_time_by_class_spec(rows, left_out)) if rows else None


def roofline(report: Report) -> str | None:
    """Intensity vs achieved FLOP/s per kernel, with the device's ceilings (module docstring)."""
    points, ceilings, left_out = roofline_data(report)
    return to_svg(roofline_spec(points, ceilings, left_out)) if points else None


def memory_timeline(report: Report) -> str | None:
    """Allocated and reserved memory over time per GPU device (module docstring)."""
    rows = memory_rows(report)
    return to_svg(memory_spec(rows)) if rows else None


def rank_step_times(ranks: RankReport) -> str | None:
    """Per rank, the mean step as a bar and the longest step as a tick on one time axis, the rank
    the others waited for in red (``tracekit report DIR``); None when no rank trace has a step."""
    rows = rank_rows(ranks)
    return to_svg(rank_step_times_spec(rows)) if rows else None


def rank_collectives(ranks: RankReport) -> str | None:
    """One row per rank, each matched collective from the rank's arrival to its end, the wait
    shaded, the last arriver marked (``tracekit report DIR``; drawn by
    :mod:`tracekit.render.rank_timeline`); None when no collective matched across the ranks."""
    from tracekit.render import rank_timeline

    return rank_timeline.draw(ranks.skew) if ranks.skew is not None else None


def class_time_a_vs_b(diff: Diff) -> str | None:
    """Per kernel class, the median GPU time per step of A and B (module docstring)."""
    rows, sides = class_ab_rows(diff)
    return to_svg(class_ab_spec(rows, sides)) if rows else None
