"""One step's timeline as a standalone SVG: the picture engineers look at in Perfetto, with the
analysis drawn on it. The one module that draws timelines (HTML pages inline it, ``--format svg``
writes it to a file).

Contract: :func:`draw` takes a :class:`~tracekit.analyses.timeline.StepTimeline` and returns one
``<svg>`` document, XML-valid, readable on its own (title, time axis in µs/ms, lane labels, a legend of
the kernel classes and idle causes shown) and the same bytes for the same step. It words and lays
out what the analysis kept; it decides nothing (the caps are the analysis', and what they left out
is stated in a ``g.tk-left-out`` note).

DOM (read by the HTML page's script and by tests):

* root ``<svg class="tk-timeline" data-step="N" data-start-ns=".." data-end-ns=".." viewBox="0 0 W H">``;
  ``data-x0``/``data-x1``: the user-space x of ``data-start-ns``/``data-end-ns`` (the page's script
  redraws the time axis for the zoomed window from them);
* ``<g class="tk-lane" data-lane="cpu:123">`` / ``data-lane="gpu:0:7"`` / ``data-lane="compile"`` /
  ``data-lane="host"`` (the step decomposition's host state),
  each with its label (``text.tk-lane-label``) and its marks;
* marks, each with a ``<title>`` child (the hover text) and ``data-ts``/``data-dur`` in ns:
  ``rect.tk-op`` (``data-depth``), ``rect.tk-launch`` (``data-depth``), ``rect.tk-kernel``
  (``data-class``, ``data-id``), ``rect.tk-memcpy``/``rect.tk-memset`` (``data-id``), ``rect.tk-gap``
  (``data-cause``, shaded over its device's stream lanes), ``rect.tk-compile`` (``data-kind``),
  ``rect.tk-host`` (``data-state``: blocked | data | dispatch | op_free, painted in reverse order),
  ``rect.tk-merged`` (``data-count``: a run of marks the caps left out, drawn grey under the others),
  ``path.tk-link`` (launch call → the first activity it launched; ``data-id`` of that activity),
  ``path.tk-roundtrip`` (producer kernel's end → consumer kernel's start, ``data-bytes``);
* ``g.tk-legend``, ``g.tk-axis``, and ``g.tk-left-out`` when the caps left marks out.

Time is x, in one user-space coordinate system for the whole drawing (no per-lane transforms on x),
so the page zooms by rewriting the root ``viewBox``'s x and width. Colours are presentation
attributes, not a stylesheet: an SVG inlined in a page cannot restyle the page.

Escaping: every name passes through :func:`~tracekit.render.text.for_display` (control and bidi
characters, surrogates and noncharacters made visible — so no character XML cannot hold is left —,
long names cut) and then XML's five entities (:func:`_xml`).
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from tracekit.render.text import DISPLAY_LIMIT, for_display, size

if TYPE_CHECKING:
    from tracekit.analyses.timeline import StepTimeline

#: Width of the lane-label column and right margin (user units = CSS px at zoom 1).
LABEL_WIDTH = 150
RIGHT_MARGIN = 14
ROW = 13          # one nesting level of a CPU lane
GPU_LANE = 26     # one GPU stream
BUSY_LANE = 28    # a GPU device's utilisation strip, above its streams
COMPILE_LANE = 14
ROUND_TRIP_BAND = 34  # under the GPU lanes, where round-trip arcs hang
LANE_GAP = 6
FONT = "font-family=\"ui-sans-serif,system-ui,sans-serif\""
#: Narrowest a mark is drawn (a 2 µs kernel in a 100 ms step would otherwise be invisible); its
#: ``data-dur`` keeps the true duration.
MIN_MARK = 0.6
#: Marks wide enough to carry their name as text, at most this many per drawing.
MIN_TEXT_WIDTH = 36
MAX_TEXTS = 400
#: Longest line of hover text (a templated C++ kernel name runs to thousands of characters).
HOVER_LIMIT = 300
#: A round trip's byte label: font size and the width of one character of it, over-estimated so
#: that label boxes laid out from it never overlap in a browser (page.js uses the same figures).
LABEL_FONT = 9
LABEL_CHAR = 5.6
LABEL_PAD = 4
BUSY_COLOUR = "#35608f"

#: Kernel class colours (the classes of :data:`tracekit.classify.rules.CLASSES`); an unknown class
#: gets :data:`OTHER_COLOUR`.
CLASS_COLOURS: dict[str, str] = {
    "gemm": "#4e79a7", "triton_fused": "#f28e2b", "triton_custom": "#e15759", "elementwise": "#76b7b2",
    "reduction": "#59a14f", "copy": "#edc948", "memcpy": "#b07aa1", "memset": "#ff9da7",
    "attention": "#9c755f", "normalization": "#8cd17d", "communication": "#d37295", "other": "#bab0ac",
}
OTHER_COLOUR = "#bab0ac"
#: Idle-gap causes (:data:`tracekit.analyses.launch_gaps.CAUSES`): colour and the words of the legend.
CAUSE_STYLE: dict[str, tuple[str, str]] = {
    "sync": ("#d62728", "waiting on a synchronisation"),
    "profiler_overhead": ("#8c564b", "profiler overhead"),
    "cpu_bound": ("#ff7f0e", "waiting for the CPU"),
    "back_to_back": ("#c7c7c7", "between queued kernels (< 5 µs)"),
    "other": ("#7f7f7f", "other (e.g. a cross-stream wait)"),
}
COMPILE_COLOURS: dict[str, str] = {
    "compile": "#6a3d9a", "recompile": "#e31a1c", "autotune": "#cab2d6", "graph_record": "#1f78b4",
    "runtime": "#b2abd2",
}
#: Host states (:data:`tracekit.analyses.decomposition.STATES`): colour and the words of the legend.
HOST_STYLE: dict[str, tuple[str, str]] = {
    "blocked": ("#d62728", "host blocked (sync, blocking copy)"),
    "data": ("#ff7f0e", "host waiting for data (DataLoader)"),
    "dispatch": ("#4e79a7", "host dispatching (in an op or launch call)"),
    "op_free": ("#e3e3e3", "host in no op (Python, sleeps)"),
}
HOST_LANE = 12
OP_COLOURS = ("#c9d3df", "#a9bcd0", "#8fa9c4", "#d8cfc0", "#c4b9a5")
LAUNCH_COLOUR = "#2ca02c"
LINK_COLOUR = "#5b8def"
MERGED_COLOUR = "#8a939c"
ROUND_TRIP_COLOUR = "#c2185b"


@lru_cache(maxsize=1 << 16)  # names repeat across marks and steps
def _xml(value: object, limit: int = DISPLAY_LIMIT) -> str:
    """Text or attribute value showing exactly ``value`` (module docstring)."""
    return html.escape(for_display(value, limit), quote=True)


def _num(x: float) -> str:
    """A coordinate with at most 3 decimals, no trailing zeros (deterministic text)."""
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def duration(ns: int | float) -> str:
    """A duration for people: ``850 ns``, ``12.3 µs``, ``4.56 ms``, ``1.23 s``."""
    ns = float(ns)
    if abs(ns) < 1_000:
        return f"{ns:,.0f} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:,.1f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e9:,.2f} s"


def _tick_step(span_ns: float, room_px: float) -> float:
    """A round tick interval (1, 2, 5 × 10^k ns) giving about one tick per 100 px."""
    target = span_ns / max(1.0, room_px / 100)
    power = 10 ** math.floor(math.log10(max(target, 1)))
    for m in (1, 2, 5, 10):
        if m * power >= target:
            return m * power
    return 10 * power


#: Time units of an axis, largest first: an axis is labelled in the largest unit the span shown
#: holds at least once (a 200 ms span in ms, a 2.4 s one in s, a 900 µs one in µs).
UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def axis_unit(span_ns: float) -> tuple[float, str]:
    """The unit (ns per unit, its symbol) an axis over ``span_ns`` is labelled in."""
    return next(((size, name) for size, name in UNITS if span_ns >= size), UNITS[-1])


def _tick_label(ns: float, step: float, span: float) -> str:
    """A tick at ``ns`` on an axis of ticks ``step`` apart over ``span``: in the span's unit, with
    as many decimals as the step needs (``0.5 ms``, ``120 ms``, ``1.2 s``)."""
    size, name = axis_unit(span)
    decimals = max(0, -math.floor(math.log10(step / size) + 1e-9))
    return f"{ns / size:,.{decimals}f} {name}"


def _lane_label(lane: str) -> str:
    parts = lane.split(":")
    if parts[0] == "cpu":
        return f"CPU thread {':'.join(parts[1:])}"
    if parts[0] == "gpu" and len(parts) == 3:
        return f"GPU {parts[1]} stream {parts[2]}"
    return lane


def _gpu_lane_key(lane: str) -> tuple:
    parts = lane.split(":")
    return tuple(int(p) if p.lstrip("-").isdigit() else 0 for p in parts[1:]) + (lane,)


def _text_fit(text: str, width: float, char_px: float = 5.6) -> str | None:
    """``text`` cut to fit ``width`` px (None when not even a few characters fit)."""
    room = int((width - 4) / char_px)
    if room < 3:
        return None
    return text if len(text) <= room else text[: room - 1] + "…"


class _Canvas:
    """Maps ns to x for one step and collects the SVG pieces."""

    def __init__(self, start: int, end: int, width: int) -> None:
        self.start, self.end = start, max(end, start + 1)
        self.x0, self.x1 = float(LABEL_WIDTH), float(max(width, LABEL_WIDTH + 100) - RIGHT_MARGIN)
        self.scale = (self.x1 - self.x0) / (self.end - self.start)
        self.texts = 0

    def x(self, ns: int) -> float:
        return self.x0 + (ns - self.start) * self.scale

    def span(self, ts: int, end: int) -> tuple[float, float]:
        """x and width of ``[ts, end)`` clipped to the window, at least :data:`MIN_MARK` wide."""
        a, b = self.x(max(ts, self.start)), self.x(min(end, self.end))
        return a, max(b - a, MIN_MARK)

    def label(self, text: str, x: float, width: float, y: float) -> str:
        """A name inside a mark when it fits (at most :data:`MAX_TEXTS` per drawing)."""
        if width < MIN_TEXT_WIDTH or self.texts >= MAX_TEXTS:
            return ""
        fitted = _text_fit(text, width)
        if fitted is None:
            return ""
        self.texts += 1
        return (f'<text class="tk-mark-label" x="{_num(x + 2)}" y="{_num(y)}" font-size="9" fill="#1a1a1a" '
                f'pointer-events="none">{_xml(fitted)}</text>')


def _hover(*lines: object) -> str:
    """Hover text: each line escaped on its own (a newline in a name stays visible as ``\\x0a``) and
    cut at :data:`HOVER_LIMIT` characters."""
    return "\n".join(_xml(line, HOVER_LIMIT) for line in lines)


def _rect(cls: str, x: float, y: float, w: float, h: float, fill: str, hover: tuple, ts: int, dur: int,
          extra: str = "", more: str = "") -> str:
    return (f'<rect class="{cls}" x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
            f'fill="{fill}" data-ts="{ts}" data-dur="{dur}"{extra}{more}><title>{_hover(*hover)}</title></rect>')


#: Where a kernel was drawn, for the arrows to it: (x, x end, top, ts, end, name shown).
_Drawn = tuple[float, float, float, int, int, str]


def foldable(step: StepTimeline) -> bool:
    """Whether folding ``step``'s CPU lanes to their launching depth hides or moves any mark (then a
    page offers both drawings, the folded one first)."""
    return any(fold is None or fold != depth for depth, fold in step.cpu.select("depth", "fold_depth").iter_rows())


def draw(step: StepTimeline, *, width: int = 1200, full: bool = False) -> str:
    """The SVG document of ``step``'s timeline, ``width`` user units (CSS px) wide; see the module
    docstring for its DOM. ``full``: every CPU mark at its nesting depth; else each CPU lane is
    folded to its launching depth (the analysis' ``fold_depth``: the outermost marks, annotations
    and top ops that launch GPU work, and the launch calls; the others are hidden).

    Laid out top to bottom: the title, the time axis' labels, the compile lane, the host-state lane
    (the step decomposition: blocked, data, dispatch, op-free over the CPU span), the CPU lanes, the
    GPU lanes (idle gaps shaded behind them) and the round trips' band under them, the legend and
    the left-out note; the launch links and round-trip arcs are drawn over the lanes, the axis'
    ticks across the whole height.
    """
    c = _Canvas(step.start_ns, step.end_ns, width)
    title = (f"{step.name} — window {duration(step.end_ns - step.start_ns)} · {step.gpu.height:,} GPU activities · "
             f"{step.cpu.height:,} CPU marks")
    body = [f'<text class="tk-title" x="4" y="18" font-size="13" font-weight="600" fill="#1a1a1a">{_xml(title)}</text>']
    axis_y, y = 26.0, 48.0
    compile_lane, y = _compile_lane(c, step, y)
    body += compile_lane
    host_lane, y = _host_lane(c, step, y)
    body += host_lane
    # Each frame read once into rows per lane (a frame operation per lane costs more than the marks).
    runs_by = _by_lane(step.merged.sort(["group", "lane", "depth", "ts"]).select(
        "lane", "depth", "ts", "end", "count", "busy_ns").rows())
    cpu_lanes, launch_at, y = _cpu_lanes(c, step, runs_by, y, full)
    body += cpu_lanes
    gpu_lanes, gaps, kernel_at, gpu_bottom, y = _gpu_lanes(c, step, runs_by, y)
    body += gpu_lanes
    overlay = [_links(c, step, launch_at, kernel_at), _round_trips(step, kernel_at, gpu_bottom)]
    legend, y = _legend(step, y + 6, width)
    note, y = _left_out(step, y, width)
    height = y + 8
    axis = _axis(c, axis_y, height - 4, step.end_ns - step.start_ns)
    svg_open = (f'<svg xmlns="http://www.w3.org/2000/svg" class="tk-timeline" data-step="{step.number}" '
                f'data-start-ns="{step.start_ns}" data-end-ns="{step.end_ns}" data-x0="{_num(c.x0)}" '
                f'data-x1="{_num(c.x1)}" data-cpu-depth="{"full" if full else "launch"}" width="{width}" '
                f'height="{_num(height)}" viewBox="0 0 {width} {_num(height)}" {FONT} font-size="10" '
                f'role="img" aria-label="{_xml(f"timeline of {step.name}")}">')
    return "".join([
        '<?xml version="1.0" encoding="UTF-8"?>\n', svg_open,
        f"<title>{_xml(f'{step.name}: step timeline')}</title>",
        f'<rect x="0" y="0" width="{width}" height="{_num(height)}" fill="#ffffff"/>',
        axis, gaps, *body, *overlay, legend, note, "</svg>\n",
    ])


def _compile_lane(c: _Canvas, step: StepTimeline, y: float) -> tuple[list[str], float]:
    """Compile / graph-record spans: a lane of their own above the CPU lanes (none without any);
    the lane and the y under it."""
    if not step.compile_spans.height:
        return [], y
    marks = []
    for ts, end, kind, label in step.compile_spans.select("ts", "end", "kind", "label").iter_rows():
        x, w = c.span(ts, end)
        marks.append(_rect("tk-compile", x, y + 1, w, COMPILE_LANE - 2, COMPILE_COLOURS.get(kind, OTHER_COLOUR),
                           (f"{kind}: {label}", duration(end - ts)), ts, end - ts, f' data-kind="{_xml(kind)}"'))
        marks.append(c.label(label, x, w, y + COMPILE_LANE - 4))
    lane = _lane("compile", "compile / graph record", y, COMPILE_LANE, marks, c.x1 + RIGHT_MARGIN)
    return [lane], y + COMPILE_LANE + LANE_GAP


def _host_lane(c: _Canvas, step: StepTimeline, y: float) -> tuple[list[str], float]:
    """The host state over the unit's CPU span (the analysis' ``host`` rows, painted in their order:
    op-free under dispatch under data under blocked); the lane and the y under it (none without rows)."""
    if not step.host.height:
        return [], y
    marks = []
    for ts, end, state in step.host.select("ts", "end", "state").iter_rows():
        x, w = c.span(ts, end)
        colour, words = HOST_STYLE.get(state, (OTHER_COLOUR, state))
        marks.append(_rect("tk-host", x, y + 1, w, HOST_LANE - 2, colour, (words, duration(end - ts)), ts, end - ts,
                           f' data-state="{_xml(state)}"'))
    lane = _lane("host", "host state", y, HOST_LANE, marks, c.x1 + RIGHT_MARGIN)
    return [lane], y + HOST_LANE + LANE_GAP


def _cpu_lanes(c: _Canvas, step: StepTimeline, runs_by: dict[str, list[tuple]],
               y: float, full: bool) -> tuple[list[str], dict[tuple[str, int], float], float]:
    """CPU lanes: one per thread, a row per nesting depth (``full``) or per folded depth (else: the
    marks the analysis gives no ``fold_depth`` are not drawn, nor the merged runs below the
    outermost row). Returns the lanes, where each launch call was drawn (``(lane, launch ts)`` ->
    y of the launch row's bottom) and the y under them."""
    lanes = []
    launch_at: dict[tuple[str, int], float] = {}
    cpu = _by_lane(step.cpu.sort(["lane", "ts", "depth", "idx"]).select(
        "lane", "depth", "name", "ts", "end", "kind", "correlation", "fold_depth").rows())
    for lane in _cpu_lane_order(cpu, [k for k in runs_by if k.startswith("cpu:")], step.name):
        every, runs = cpu.get(lane, []), runs_by.get(lane, [])
        depth_all = max([r[0] for r in every] + [r[0] for r in runs] + [0])
        if full:
            rows = [r[:6] for r in every]
        else:
            rows = [(r[6], *r[1:6]) for r in every if r[6] is not None]
            runs = [r for r in runs if r[0] == 0]
        depth_max = max([r[0] for r in rows] + [r[0] for r in runs] + [0])
        height = (depth_max + 1) * ROW
        marks = [_run(c, r, y + r[0] * ROW + 0.5, ROW - 1.5, "CPU marks") for r in runs]
        for depth, name, ts, end, kind, corr in rows:
            x, w = c.span(ts, end)
            top = y + depth * ROW
            if kind == "launch":
                marks.append(_rect("tk-launch", x, top + 3, w, ROW - 5, LAUNCH_COLOUR,
                                   (name, f"{duration(end - ts)} · correlation {corr}"), ts, end - ts,
                                   f' data-depth="{depth}"'))
                launch_at[(lane, ts)] = top + ROW - 2
            else:
                marks.append(_rect("tk-op", x, top + 0.5, w, ROW - 1.5, OP_COLOURS[depth % len(OP_COLOURS)],
                                   (name, f"{duration(end - ts)} · depth {depth} · {_lane_label(lane)}"), ts,
                                   end - ts, f' data-depth="{depth}"'))
                marks.append(c.label(name, x, w, top + ROW - 3.5))
        note = None
        if depth_max < depth_all:
            note = f"{depth_max + 1} of {depth_all + 1} rows"
        lanes.append(_lane(lane, _lane_label(lane), y, height, marks, c.x1 + RIGHT_MARGIN, note=note,
                           extra=f' data-rows="{depth_max + 1}" data-rows-full="{depth_all + 1}"'))
        y += height + LANE_GAP
    return lanes, launch_at, y


def _gpu_lanes(c: _Canvas, step: StepTimeline, runs_by: dict[str, list[tuple]],
               y: float) -> tuple[list[str], str, dict[int, _Drawn], float, float]:
    """GPU lanes: one per (device, stream), and the idle gaps shaded over each device's lanes.
    Returns the lanes, the gaps (drawn behind everything), where each GPU activity was drawn (by
    id), the y of the lanes' bottom (where round trips hang) and the y under the round trips' band."""
    gpu = _by_lane(step.gpu.sort(["lane", "ts", "id"]).select(
        "lane", "name", "short", "klass", "library", "kind", "ts", "end", "correlation", "id").rows())
    gpu_lanes = sorted(set(gpu) | {k for k in runs_by if not k.startswith("cpu:")}, key=_gpu_lane_key)
    busy = _by_lane(step.busy.sort(["device", "ts"]).select("device", "ts", "end", "busy_ns").rows())
    gpu_top: dict[str, float] = {}
    lanes = []
    y += 4
    device = None
    for lane in gpu_lanes:
        if _gpu_lane_key(lane)[0] != device:
            device = _gpu_lane_key(lane)[0]
            if device in busy:
                lanes.append(_busy_lane(c, step, device, busy[device], y))
                y += BUSY_LANE + 2
        gpu_top[lane] = y
        y += GPU_LANE + 2
    gaps = _gaps(c, step, gpu_top, y)
    kernel_at: dict[int, _Drawn] = {}
    for lane in gpu_lanes:
        top = gpu_top[lane]
        marks = [_run(c, r, top + 1, GPU_LANE - 2, "GPU activities") for r in runs_by.get(lane, [])]
        for name, short, klass, library, kind, ts, end, corr, ident in gpu.get(lane, []):
            x, w = c.span(ts, end)
            cls = {"memcpy": "tk-memcpy", "memset": "tk-memset"}.get(kind, "tk-kernel")
            extra = f' data-class="{_xml(klass)}" data-id="{ident}"' if cls == "tk-kernel" else f' data-id="{ident}"'
            hover = (name, f"{kind} · class {klass} · library {library}",
                     f"{duration(end - ts)} · {_lane_label(lane)} · correlation {corr}")
            marks.append(_rect(cls, x, top + 1, w, GPU_LANE - 2, CLASS_COLOURS.get(klass, OTHER_COLOUR), hover,
                               ts, end - ts, extra))
            marks.append(c.label(short or name, x, w, top + GPU_LANE - 6))
            kernel_at[ident] = (x, x + w, top, ts, end, short or name)
        lanes.append(_lane(lane, _lane_label(lane), top, GPU_LANE, marks, c.x1 + RIGHT_MARGIN))
    gpu_bottom = y
    if step.round_trips.height and gpu_lanes:
        y += ROUND_TRIP_BAND
    if gpu_lanes:
        y += LANE_GAP
    return lanes, gaps, kernel_at, gpu_bottom, y


def _busy_lane(c: _Canvas, step: StepTimeline, device: int, bins: list[tuple], y: float) -> str:
    """GPU ``device``'s utilisation strip: one bar per bin of the window, as tall as the fraction
    of the bin the device was busy (``rect.tk-busy``, ``data-busy-ns``), so a step that keeps the
    GPU busy 12 % of the time reads as low bars, not as the solid block its kernels' marks make."""
    window = max(1, step.end_ns - step.start_ns)
    total = sum(b[2] for b in bins)
    room = BUSY_LANE - 3
    marks = []
    for ts, end, busy_ns in bins:
        x, w = c.span(ts, end)
        frac = busy_ns / max(1, end - ts)
        h = max(0.5, room * frac)
        marks.append(_rect("tk-busy", x, y + BUSY_LANE - 1 - h, w, h, BUSY_COLOUR,
                           (f"GPU {device} busy {frac:.0%} of {duration(end - ts)}",
                            f"at {duration(ts - step.start_ns)} from the window's start"), ts, end - ts,
                           f' data-busy-ns="{busy_ns}"'))
    note = f"busy {total / window:.0%} of the window"
    return _lane(f"busy:{device}", f"GPU {device} utilisation", y, BUSY_LANE, marks, c.x1 + RIGHT_MARGIN,
                 note=note, extra=f' data-busy-ns="{total}" data-window-ns="{window}"')


def _gaps(c: _Canvas, step: StepTimeline, gpu_top: dict[str, float], below: float) -> str:
    """The GPU's idle gaps, each shaded over its device's lanes (``gpu_top``: each lane's top; a
    device without a lane gets a band at ``below``); empty without gaps."""
    device_rows: dict[int, tuple[float, float]] = {}
    for lane, top in gpu_top.items():
        device = _gpu_lane_key(lane)[0]
        lo, hi = device_rows.get(device, (top, top + GPU_LANE))
        device_rows[device] = (min(lo, top), max(hi, top + GPU_LANE))
    marks = []
    for ts, end, cause, device in step.gaps.select("ts", "end", "cause", "device").iter_rows():
        lo, hi = device_rows.get(device if device is not None else 0, (below, below + GPU_LANE))
        colour, words = CAUSE_STYLE.get(cause, (OTHER_COLOUR, cause))
        x, w = c.span(ts, end)
        marks.append(_rect("tk-gap", x, lo - 1, w, hi - lo + 2, colour,
                           (f"GPU {device} idle {duration(end - ts)}: {words} ({cause})",), ts, end - ts,
                           f' data-cause="{_xml(cause)}"', ' fill-opacity="0.28"'))
    return '<g class="tk-gaps">' + "".join(marks) + "</g>" if marks else ""


def _links(c: _Canvas, step: StepTimeline, launch_at: dict[tuple[str, int], float],
           kernel_at: dict[int, _Drawn]) -> str:
    """Launch → work links, drawn over the lanes (empty without any)."""
    links = []
    opacity = _num(min(0.7, max(0.12, 40 / max(1, step.links.height))))
    for corr, launch_ts, launch_lane, _depth, kernel_id in step.links.select(
            "correlation", "launch_ts", "launch_lane", "launch_depth", "kernel_id").iter_rows():
        start = launch_at.get((launch_lane, launch_ts))
        target = kernel_at.get(kernel_id)
        if start is None or target is None:
            continue  # the analysis keeps a link only with both ends; a renderer never fails on one
        hover = (f"launch call (correlation {corr}) → {target[5]}",
                 f"the work started {duration(target[3] - launch_ts)} after the call began")
        x1, y1 = c.x(launch_ts), start
        x2, y2 = target[0], target[2] + 1
        mid = (y1 + y2) / 2
        links.append(f'<path class="tk-link" d="M{_num(x1)} {_num(y1)} C{_num(x1)} {_num(mid)} {_num(x2)} '
                     f'{_num(mid)} {_num(x2)} {_num(y2)}" fill="none" stroke="{LINK_COLOUR}" stroke-width="0.7" '
                     f'stroke-opacity="{opacity}" data-ts="{launch_ts}" data-dur="0" data-id="{kernel_id}">'
                     f"<title>{_hover(*hover)}</title></path>")
    return '<g class="tk-links">' + "".join(links) + "</g>" if links else ""


def _round_trips(step: StepTimeline, kernel_at: dict[int, _Drawn], gpu_bottom: float) -> str:
    """Round trips: arcs in a band under the GPU lanes, from the producer's end to the consumer's
    start, and each one's byte label at its arc's apex; labels that would overlap a larger round
    trip's are hidden and counted on it (:func:`place_labels`), empty without any."""
    if not step.round_trips.height:
        return ""
    trips, labels = [], []
    opacity = _num(min(0.85, max(0.25, 30 / max(1, step.round_trips.height))))
    ordered = step.round_trips.sort(["bytes", "producer_id", "consumer_id"], descending=[True, False, False])
    biggest = max(1, int(ordered["bytes"].max() or 1))
    for prod, cons, nbytes, label in ordered.select("producer_id", "consumer_id", "bytes", "label").iter_rows():
        a, b = kernel_at.get(prod), kernel_at.get(cons)
        if a is None or b is None:
            continue
        x1, x2 = a[1], b[0]
        y1 = y2 = gpu_bottom
        top_y = gpu_bottom + 6 + (ROUND_TRIP_BAND - 14) * math.sqrt(nbytes / biggest)
        stroke = 0.8 + 1.6 * (nbytes / biggest)
        hover = (f"round trip {size(nbytes)}: {label}", f"written by {a[5]}", f"read back by {b[5]}")
        trips.append(f'<path class="tk-roundtrip" d="M{_num(x1)} {_num(y1)} C{_num(x1)} {_num(top_y)} '
                     f'{_num(x2)} {_num(top_y)} {_num(x2)} {_num(y2)}" fill="none" stroke="{ROUND_TRIP_COLOUR}" '
                     f'stroke-width="{_num(stroke)}" stroke-opacity="{opacity}" data-ts="{a[4]}" '
                     f'data-dur="0" data-bytes="{nbytes}" data-producer="{prod}" data-consumer="{cons}">'
                     f"<title>{_hover(*hover)}</title></path>")
        # The apex of the cubic arc is 3/4 of the way from the ends to the control points.
        labels.append(((x1 + x2) / 2, gpu_bottom + 0.75 * (top_y - gpu_bottom) + 3.5, size(nbytes)))
    shown = place_labels(labels)
    for rank, ((x, y, text), more) in enumerate(zip(labels, shown)):
        hidden = ' display="none"' if more is None else ""
        trips.append(f'<text class="tk-roundtrip-label" x="{_num(x)}" y="{_num(y)}" font-size="{LABEL_FONT}" '
                     f'fill="{ROUND_TRIP_COLOUR}" text-anchor="middle" pointer-events="none" data-rank="{rank}" '
                     f'data-size="{_xml(text)}"{hidden}>{_xml(_with_more(text, more or 0))}</text>')
    return '<g class="tk-roundtrips">' + "".join(trips) + "</g>" if trips else ""


def _with_more(text: str, more: int) -> str:
    return f"{text} +{more:,} more" if more else text


def _label_box(x: float, y: float, text: str) -> tuple[float, float, float, float]:
    """The box a centred label of ``text`` with its baseline at ``y`` covers (over-estimated)."""
    half = (len(text) * LABEL_CHAR + LABEL_PAD) / 2
    return x - half, y - LABEL_FONT - 1, x + half, y + 4


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(labels: list[tuple[float, float, str]]) -> list[int | None]:
    """Which labels ``(x, y, text)`` (most important first) are shown so that no two overlap: for
    each, None (hidden) or how many hidden labels it stands for (shown as ``+N more``).

    Greedy in order: a label overlapping a shown one is hidden and counted on the first it
    overlaps. Then each shown label is widened by its ``+N more``; one that now overlaps an earlier
    shown label is hidden in turn, it and its count moving to that label, until nothing overlaps.
    The page's script runs the same rule for the window it shows (page.js ``placeLabels``)."""
    more: list[int | None] = [None] * len(labels)
    shown: list[int] = []
    for i, (x, y, text) in enumerate(labels):
        box = _label_box(x, y, text)
        hit = next((j for j in shown if _overlap(box, _label_box(*labels[j][:2], labels[j][2]))), None)
        if hit is None:
            shown.append(i)
            more[i] = 0
        else:
            more[hit] = (more[hit] or 0) + 1
    changed = True
    while changed:
        changed = False
        boxes = {j: _label_box(labels[j][0], labels[j][1], _with_more(labels[j][2], more[j] or 0)) for j in shown}
        for n, j in enumerate(shown):
            hit = next((k for k in shown[:n] if _overlap(boxes[j], boxes[k])), None)
            if hit is not None:
                more[hit] = (more[hit] or 0) + 1 + (more[j] or 0)
                more[j] = None
                shown.remove(j)
                changed = True
                break
    return more


def _by_lane(rows: list[tuple]) -> dict[str, list[tuple]]:
    """Rows whose first field is a lane, grouped by it (the rest of each row kept, in order)."""
    lanes: dict[str, list[tuple]] = {}
    for row in rows:
        lanes.setdefault(row[0], []).append(row[1:])
    return lanes


def _cpu_lane_order(cpu: dict[str, list[tuple]], more: list[str], step_name: str) -> list[str]:
    """CPU lanes: the thread holding the unit's own span first, then those launching the most GPU
    work, then the busiest (longest outermost marks), then by name. ``cpu``: lane -> rows of
    (depth, name, ts, end, kind, correlation); ``more``: lanes holding only merged runs."""
    def key(lane: str) -> tuple:
        rows = cpu.get(lane, [])
        own = any(r[1] == step_name for r in rows)
        launches = sum(r[4] == "launch" for r in rows)
        busy = sum(r[3] - r[2] for r in rows if r[0] == 0)
        return (not own, -launches, -busy, lane)

    return sorted(set(cpu) | set(more), key=key)


def _run(c: _Canvas, run: tuple, y: float, h: float, what: str) -> str:
    """A run of marks the caps left out (``rect.tk-merged``), hatched grey under the drawn marks."""
    _depth, ts, end, count, busy = run
    x, w = c.span(ts, end)
    return _rect("tk-merged", x, y, w, h, MERGED_COLOUR,
                 (f"{count:,} {what} not drawn one by one (the step's caps), merged into one run",
                  f"{duration(busy)} of them in {duration(end - ts)}"), ts, end - ts,
                 f' data-count="{count}"', ' fill-opacity="0.45"')


def _lane(lane: str, label: str, y: float, height: float, marks: Iterable[str], width: float, *,
          note: str | None = None, extra: str = "") -> str:
    """A lane: its background, its label (and ``note`` under it, in smaller type, where the lane
    is two rows tall), its marks."""
    under = ""
    if note and height >= 2 * ROW:
        under = (f'<text class="tk-lane-label" x="4" y="{_num(y + 2 * ROW - 3)}" font-size="9" '
                 f'fill="#5b6675">{_xml(note, 40)}</text>')
    return (f'<g class="tk-lane" data-lane="{_xml(lane)}"{extra}>'
            f'<rect class="tk-lane-bg" x="0" y="{_num(y)}" width="{_num(width)}" height="{_num(height)}" fill="#f6f7f9" '
            f'fill-opacity="0.6"/>'
            f'<text class="tk-lane-label" x="4" y="{_num(y + min(height, ROW) - 3)}" font-size="10" '
            f'fill="#333333">{_xml(label, 40)}</text>{under}'
            + "".join(marks) + "</g>")


def _axis(c: _Canvas, y: float, bottom: float, window: int) -> str:
    step = _tick_step(window, c.x1 - c.x0)
    parts = [f'<g class="tk-axis"><line x1="{_num(c.x0)}" y1="{_num(y + 16)}" x2="{_num(c.x1)}" '
             f'y2="{_num(y + 16)}" stroke="#888888" stroke-width="0.6"/>']
    t = 0.0
    while t <= window + 1e-9:
        x = c.x(int(c.start + t))
        parts.append(f'<line x1="{_num(x)}" y1="{_num(y + 12)}" x2="{_num(x)}" y2="{_num(bottom)}" '
                     f'stroke="#dddddd" stroke-width="0.5"/>')
        parts.append(f'<text x="{_num(x)}" y="{_num(y + 9)}" font-size="9" fill="#555555" '
                     f'text-anchor="middle">{_xml(_tick_label(t, step, window))}</text>')
        t += step
    parts.append(f'<text x="4" y="{_num(y + 9)}" font-size="9" fill="#555555">time from step start</text></g>')
    return "".join(parts)


def _legend(step: StepTimeline, y: float, width: int) -> tuple[str, float]:
    """Swatches for the kernel classes and gap causes present, and for the mark kinds."""
    from tracekit.analyses.launch_gaps import CAUSES
    from tracekit.classify.rules import CLASSES

    present = set(step.gpu["klass"].to_list())
    classes = [k for k in CLASSES if k in present] + sorted(present - set(CLASSES))
    causes_present = set(step.gaps["cause"].to_list())
    causes = [k for k in CAUSES if k in causes_present] + sorted(causes_present - set(CAUSES))
    entries: list[tuple[str, str, str]] = []  # (kind of swatch, colour, words)
    entries += [("rect", CLASS_COLOURS.get(k, OTHER_COLOUR), k) for k in classes]
    entries += [("gap", CAUSE_STYLE.get(k, (OTHER_COLOUR, k))[0], f"idle: {CAUSE_STYLE.get(k, ('', k))[1]}")
                for k in causes]
    states = set(step.host["state"].to_list())
    entries += [("rect", colour, words) for state, (colour, words) in HOST_STYLE.items() if state in states]
    entries += [("rect", OP_COLOURS[1], "CPU op (nested by depth)"), ("rect", LAUNCH_COLOUR, "launch call")]
    if step.merged.height:
        entries.append(("rect", MERGED_COLOUR, "marks left out by the caps, merged into runs"))
    if step.links.height:
        entries.append(("line", LINK_COLOUR, "launch → GPU work"))
    if step.round_trips.height:
        entries.append(("line", ROUND_TRIP_COLOUR, "memory round trip (producer → consumer, bytes)"))
    kinds = sorted(set(step.compile_spans["kind"].to_list()))
    entries += [("rect", COMPILE_COLOURS.get(k, OTHER_COLOUR), k.replace("_", " ")) for k in kinds]
    parts = ['<g class="tk-legend">']
    x, row_y = 4.0, y + 10
    for kind, colour, words in entries:
        text_w = 12 + 5.6 * len(words) + 14
        if x + text_w > width - 4 and x > 4:
            x, row_y = 4.0, row_y + 15
        if kind == "line":
            parts.append(f'<line x1="{_num(x)}" y1="{_num(row_y - 3)}" x2="{_num(x + 10)}" y2="{_num(row_y - 3)}" '
                         f'stroke="{colour}" stroke-width="2"/>')
        else:
            opacity = ' fill-opacity="0.45"' if kind == "gap" else ""
            parts.append(f'<rect x="{_num(x)}" y="{_num(row_y - 8)}" width="10" height="10" fill="{colour}"{opacity}/>')
        parts.append(f'<text x="{_num(x + 13)}" y="{_num(row_y)}" font-size="10" fill="#333333">{_xml(words)}</text>')
        x += text_w
    parts.append("</g>")
    return "".join(parts), row_y + 8


def _left_out(step: StepTimeline, y: float, width: int) -> tuple[str, float]:
    if not step.left_out:
        return "", y
    words = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in sorted(step.left_out.items()))
    runs = " (the CPU and GPU ones are drawn as grey runs)" if step.merged.height else ""
    text = f"Not drawn one by one (this step has more marks than a picture can hold; the longest are kept): {words}{runs}"
    lines = textwrap.wrap(text, max(40, int((width - 8) / 5.6)))
    parts = [f'<text x="4" y="{_num(y + 12 + 13 * n)}" font-size="10" fill="#a33">{_xml(line)}</text>'
             for n, line in enumerate(lines)]
    return f'<g class="tk-left-out">{"".join(parts)}</g>', y + 6 + 13 * len(lines)
