/* tracekit HTML pages: step selection, zoom and hover details of the step timelines.
 * Contract (tracekit/render/timeline.py): svg.tk-timeline with a viewBox whose x range is time
 * (data-x0/data-x1: the x of data-start-ns/data-end-ns); marks carry a <title> (hover text).
 * Zoom rewrites the viewBox x/width only (y stays), with preserveAspectRatio="none"; text is
 * counter-scaled so it keeps its shape, the labels and legend stay in place, and the time axis is
 * redrawn for the window shown. */
(function () {
  "use strict";
  var MIN_SPAN = 1 / 2000;  // deepest zoom: 1/2000 of the window

  function parseBox(svg) {
    var vb = (svg.getAttribute("data-vb0") || svg.getAttribute("viewBox") || "").trim().split(/[\s,]+/).map(Number);
    return vb.length === 4 && vb.every(isFinite) ? vb : null;
  }

  var SVG_NS = "http://www.w3.org/2000/svg";

  function make(tag, attrs) {
    var el = document.createElementNS(SVG_NS, tag);
    for (var k in attrs) el.setAttribute(k, String(attrs[k]));
    return el;
  }

  // Set up a drawing for zooming, once: fix its drawn size (a narrower viewBox then stretches x
  // instead of changing the aspect ratio), and gather what labels the drawing rather than a time
  // (its title, lane labels, legend, left-out note, axis caption) into one group kept in place.
  function prepare(svg) {
    if (svg.tkZoom) return svg.tkZoom;
    var vb = parseBox(svg);
    if (!vb) return null;
    svg.setAttribute("data-vb0", vb.join(" "));
    if (!svg.getAttribute("width")) svg.setAttribute("width", String(vb[2]));
    if (!svg.getAttribute("height")) svg.setAttribute("height", String(vb[3]));
    svg.setAttribute("preserveAspectRatio", "none");
    var z = {vb: vb, x0: parseFloat(svg.getAttribute("data-x0")), x1: parseFloat(svg.getAttribute("data-x1")),
             axis: svg.querySelector("g.tk-axis"), zoomAxis: null};
    z.plot = isFinite(z.x0) && isFinite(z.x1) && z.x1 > z.x0;
    var start = svg.getAttribute("data-start-ns"), end = svg.getAttribute("data-end-ns");
    try { z.span = Number(BigInt(end) - BigInt(start)); } catch (e) { z.span = Number(end) - Number(start); }
    z.pinned = make("g", {"class": "tk-pinned"});
    z.cover = make("rect", {x: vb[0], y: vb[1], width: z.plot ? Math.max(0, z.x0 - vb[0]) : 0, height: vb[3],
                            fill: "#ffffff", display: "none"});
    z.pinned.appendChild(z.cover);
    z.coverRight = make("rect", {x: z.plot ? z.x1 : vb[0] + vb[2], y: vb[1], height: vb[3], fill: "#ffffff",
                                 width: z.plot ? Math.max(0, vb[0] + vb[2] - z.x1) : 0, display: "none"});
    z.pinned.appendChild(z.coverRight);
    var fixed = svg.querySelectorAll("text.tk-title, text.tk-lane-label, g.tk-legend, g.tk-left-out");
    for (var i = 0; i < fixed.length; i++) z.pinned.appendChild(fixed[i]);
    if (z.axis && z.plot) {
      var texts = z.axis.querySelectorAll("text");
      for (var j = 0; j < texts.length; j++) {
        if (parseFloat(texts[j].getAttribute("x")) < z.x0 && texts[j].getAttribute("text-anchor") !== "middle") {
          z.pinned.appendChild(texts[j]);
        }
      }
      z.zoomAxis = make("g", {"class": "tk-zoom-axis", display: "none"});
      z.axis.parentNode.insertBefore(z.zoomAxis, z.axis.nextSibling);
    }
    svg.appendChild(z.pinned);
    svg.tkZoom = z;
    return z;
  }

  function niceStep(span, ticks) {
    var raw = span / ticks, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  // The axis is labelled in the largest unit the span shown holds at least once (timeline.py
  // axis_unit): a 200 ms window in ms, a 900 µs one in µs.
  var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
  function tickLabel(ns, step, span) {
    var unit = UNITS[UNITS.length - 1];
    for (var u = 0; u < UNITS.length; u++) if (span >= UNITS[u][0]) { unit = UNITS[u]; break; }
    var digits = Math.max(0, -Math.floor(Math.log10(step / unit[0]) + 1e-9));
    return (ns / unit[0]).toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits}) +
      " " + unit[1];
  }

  // The time axis of the zoomed window: ticks at round times over the part of the plot shown.
  function drawZoomAxis(z, vx, w) {
    var g = z.zoomAxis, base = z.axis.querySelector("line"), tick = z.axis.querySelectorAll("line")[1];
    var label = z.axis.querySelector("text[text-anchor='middle']");
    while (g.firstChild) g.removeChild(g.firstChild);
    var lo = Math.max(vx, z.x0), hi = Math.min(vx + w, z.x1);
    if (!(hi > lo) || !(z.span > 0)) return;
    var perX = z.span / (z.x1 - z.x0), t0 = (lo - z.x0) * perX, t1 = (hi - z.x0) * perX;
    var step = niceStep(t1 - t0, 8);
    if (base) g.appendChild(make("line", {x1: lo, x2: hi, y1: base.getAttribute("y1"), y2: base.getAttribute("y2"),
                                          stroke: "#888888", "stroke-width": 0.6}));
    for (var t = Math.ceil(t0 / step) * step; t <= t1 + step * 1e-9; t += step) {
      var x = z.x0 + t / perX;
      if (x > vx + 0.97 * w) break;  // a label at the right edge would be cut
      if (tick) g.appendChild(make("line", {x1: x, x2: x, y1: tick.getAttribute("y1"), y2: tick.getAttribute("y2"),
                                            stroke: "#dddddd", "stroke-width": 0.5}));
      var text = make("text", {x: x, y: label ? label.getAttribute("y") : 12, "font-size": 9, fill: "#555555",
                               "text-anchor": "middle"});
      text.textContent = tickLabel(t, step, t1 - t0);
      g.appendChild(text);
    }
  }

  // Round-trip byte labels that never overlap (timeline.py place_labels, the same rule): in rank
  // order, a label overlapping a shown one is hidden and counted on it ("+N more"); a shown label
  // its count widens into an earlier one is hidden in turn. Boxes are in the units of the whole
  // window's drawing, where text keeps its size at every zoom (it is counter-scaled).
  var LABEL_FONT = 9, LABEL_CHAR = 5.6, LABEL_PAD = 4;
  function labelBox(x, y, text) {
    var half = (text.length * LABEL_CHAR + LABEL_PAD) / 2;
    return [x - half, y - LABEL_FONT - 1, x + half, y + 4];
  }
  function overlaps(a, b) { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]; }
  function withMore(text, more) { return more ? text + " +" + more.toLocaleString("en-US") + " more" : text; }

  function placeLabels(svg, z, vx, w) {
    var els = svg.querySelectorAll("text.tk-roundtrip-label"), items = [], k = z.vb[2] / w, i, j;
    for (i = 0; i < els.length; i++) {
      var x = z.vb[0] + (parseFloat(els[i].getAttribute("x")) - vx) * k;
      if (z.plot && (x < z.x0 || x > z.x1)) { els[i].setAttribute("display", "none"); continue; }
      items.push({el: els[i], x: x, y: parseFloat(els[i].getAttribute("y")),
                  text: els[i].getAttribute("data-size") || "", more: null});
    }
    var shown = [];
    for (i = 0; i < items.length; i++) {
      var box = labelBox(items[i].x, items[i].y, items[i].text), hit = null;
      for (j = 0; j < shown.length && hit === null; j++) {
        if (overlaps(box, labelBox(shown[j].x, shown[j].y, shown[j].text))) hit = shown[j];
      }
      if (hit === null) { items[i].more = 0; shown.push(items[i]); } else hit.more += 1;
    }
    for (var changed = true; changed;) {
      changed = false;
      var boxes = shown.map(function (it) { return labelBox(it.x, it.y, withMore(it.text, it.more)); });
      for (i = 0; i < shown.length && !changed; i++) {
        for (j = 0; j < i; j++) {
          if (overlaps(boxes[i], boxes[j])) {
            shown[j].more += 1 + shown[i].more;
            shown[i].more = null;
            shown.splice(i, 1);
            changed = true;
            break;
          }
        }
      }
    }
    for (i = 0; i < items.length; i++) {
      var it = items[i];
      if (it.more === null) { it.el.setAttribute("display", "none"); continue; }
      it.el.removeAttribute("display");
      it.el.textContent = withMore(it.text, it.more);
    }
  }

  function applyWindow(svg, f0, f1) {
    var z = prepare(svg);
    if (!z) return;
    var vb = z.vb, x = vb[0] + f0 * vb[2], w = (f1 - f0) * vb[2], s = w / vb[2], zoomed = s < 1 - 1e-9;
    svg.setAttribute("viewBox", [x, vb[1], w, vb[3]].join(" "));
    z.pinned.setAttribute("transform", "translate(" + (x - vb[0] * s) + " 0) scale(" + s + " 1)");
    z.cover.setAttribute("display", zoomed ? "inline" : "none");
    z.coverRight.setAttribute("display", zoomed ? "inline" : "none");
    if (z.zoomAxis) {
      z.axis.setAttribute("display", zoomed ? "none" : "inline");
      z.zoomAxis.setAttribute("display", zoomed ? "inline" : "none");
      if (zoomed) drawZoomAxis(z, x, w);
    }
    // Text would be stretched by 1/s: scale it back around its anchor (the pinned group is whole).
    var texts = svg.querySelectorAll("text");
    for (var i = 0; i < texts.length; i++) {
      var t = texts[i];
      if (z.pinned.contains(t)) continue;
      if (!t.hasAttribute("data-tf0")) t.setAttribute("data-tf0", t.getAttribute("transform") || "");
      var ax = parseFloat(t.getAttribute("x")) || 0, base = t.getAttribute("data-tf0");
      if (!zoomed) {
        if (base) t.setAttribute("transform", base); else t.removeAttribute("transform");
      } else {
        t.setAttribute("transform", "translate(" + ax + " 0) scale(" + s + " 1) translate(" + (-ax) + " 0)" +
                       (base ? " " + base : ""));
      }
    }
    placeLabels(svg, z, x, w);
  }

  // The CPU depth control: each step drawing whose CPU lanes fold has the folded drawing shown in
  // div.tk-fold and the full one in the template after it; showing the other swaps their contents.
  function applyDepth(view, full) {
    var want = full ? "full" : "launch", folds = view.querySelectorAll("div.tk-fold");
    for (var i = 0; i < folds.length; i++) {
      var div = folds[i], other = div.nextElementSibling;
      if (div.getAttribute("data-cpu-depth") === want || !other || other.tagName !== "TEMPLATE") continue;
      var keep = document.createElement("template");
      keep.className = "tk-fold-other";
      keep.setAttribute("data-cpu-depth", div.getAttribute("data-cpu-depth"));
      while (div.firstChild) keep.content.appendChild(div.firstChild);
      div.appendChild(document.importNode(other.content, true));
      div.setAttribute("data-cpu-depth", want);
      other.parentNode.replaceChild(keep, other);
    }
  }

  function initTimelines(box) {
    var view = box.querySelector(".tk-view");
    var select = box.querySelector("select.tk-step-select");
    var state = {f0: 0, f1: 1, full: false};
    var depth = box.querySelector("button.tk-depth");

    function svgs() { return view.querySelectorAll("svg.tk-timeline"); }
    function render() {
      var list = svgs();
      for (var i = 0; i < list.length; i++) applyWindow(list[i], state.f0, state.f1);
      box.setAttribute("data-zoom", (1 / (state.f1 - state.f0)).toFixed(3));
    }
    function setWindow(f0, f1) {
      var span = Math.min(1, Math.max(MIN_SPAN, f1 - f0));
      f0 = Math.min(Math.max(0, f0), 1 - span);
      state.f0 = f0; state.f1 = f0 + span;
      render();
    }
    function zoomAt(factor, at) {  // factor < 1 zooms in; at: fraction of the shown window
      var span = state.f1 - state.f0, next = Math.min(1, Math.max(MIN_SPAN, span * factor));
      var centre = state.f0 + at * span;
      setWindow(centre - at * next, centre - at * next + next);
    }
    function show(key) {
      var current = view.getAttribute("data-key");
      if (current === key) return;
      var target = box.querySelector('template[data-key="' + key + '"]');
      if (!target) return;
      var keep = document.createElement("template");
      keep.setAttribute("data-key", current);
      while (view.firstChild) keep.content.appendChild(view.firstChild);
      box.appendChild(keep);
      view.appendChild(document.importNode(target.content, true));
      target.parentNode.removeChild(target);
      view.setAttribute("data-key", key);
      state.f0 = 0; state.f1 = 1;
      applyDepth(view, state.full);
      render();
    }

    if (depth) depth.addEventListener("click", function () {
      state.full = !state.full;
      depth.setAttribute("aria-pressed", state.full ? "true" : "false");
      depth.textContent = state.full ? "CPU: launching ops only" : "CPU: all depths";
      applyDepth(view, state.full);
      render();
    });

    if (select) select.addEventListener("change", function () { show(select.value); });
    var buttons = box.querySelectorAll("button[data-zoom]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (ev) {
        var what = ev.currentTarget.getAttribute("data-zoom");
        if (what === "in") zoomAt(0.5, 0.5);
        else if (what === "out") zoomAt(2, 0.5);
        else setWindow(0, 1);
      });
    }
    // Ctrl/⌘ + wheel (and a trackpad's pinch, which browsers send as one) zooms around the pointer;
    // a sideways wheel or swipe (or shift + wheel) pans; a plain wheel scrolls the page as usual.
    view.addEventListener("wheel", function (ev) {
      var svg = ev.target.closest && ev.target.closest("svg.tk-timeline");
      if (!svg) return;
      var rect = svg.getBoundingClientRect(), width = rect.width || 1;
      if (ev.ctrlKey || ev.metaKey) {
        ev.preventDefault();
        zoomAt(ev.deltaY < 0 ? 0.8 : 1.25, (ev.clientX - rect.left) / width);
      } else if (state.f1 - state.f0 < 1 && (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY))) {
        ev.preventDefault();
        var along = ev.shiftKey && !ev.deltaX ? ev.deltaY : ev.deltaX;
        setWindow(state.f0 + along / width * (state.f1 - state.f0), state.f1 + along / width * (state.f1 - state.f0));
      }
    }, {passive: false});
    var drag = null;
    view.addEventListener("pointerdown", function (ev) {
      var svg = ev.target.closest && ev.target.closest("svg.tk-timeline");
      if (!svg || ev.button !== 0) return;
      drag = {svg: svg, x: ev.clientX, f0: state.f0, f1: state.f1, width: svg.getBoundingClientRect().width || 1};
      svg.classList.add("tk-dragging");
    });
    window.addEventListener("pointermove", function (ev) {
      if (!drag) return;
      var shift = (drag.x - ev.clientX) / drag.width * (drag.f1 - drag.f0);
      setWindow(drag.f0 + shift, drag.f1 + shift);
    });
    window.addEventListener("pointerup", function () {
      if (drag) drag.svg.classList.remove("tk-dragging");
      drag = null;
    });
    view.addEventListener("dblclick", function () { setWindow(0, 1); });
    render();
  }

  // Hover details: the mark's <title> in a tooltip that follows the pointer (the <title> is moved
  // into data-tip on first hover, so the browser's own tooltip does not show it twice).
  function initTooltip() {
    var tip = document.createElement("div");
    tip.id = "tk-tip";
    document.body.appendChild(tip);
    document.addEventListener("pointerover", function (ev) {
      var el = ev.target;
      if (!(el instanceof Element) || !el.closest("svg.tk-timeline")) { tip.style.display = "none"; return; }
      var title = null;
      for (var i = 0; i < el.children.length; i++) if (el.children[i].tagName === "title") title = el.children[i];
      if (title) { el.setAttribute("data-tip", title.textContent); el.removeChild(title); }
      var text = el.getAttribute("data-tip");
      if (!text) { tip.style.display = "none"; return; }
      tip.textContent = text;
      tip.style.display = "block";
    });
    document.addEventListener("pointermove", function (ev) {
      if (tip.style.display === "none") return;
      var x = ev.clientX + 14, y = ev.clientY + 14;
      if (x + tip.offsetWidth > window.innerWidth) x = Math.max(0, ev.clientX - tip.offsetWidth - 10);
      if (y + tip.offsetHeight > window.innerHeight) y = Math.max(0, ev.clientY - tip.offsetHeight - 10);
      tip.style.left = x + "px"; tip.style.top = y + "px";
    });
  }

  var boxes = document.querySelectorAll(".tk-timelines");
  for (var b = 0; b < boxes.length; b++) initTimelines(boxes[b]);
  initTooltip();
})();
