/* tracekit HTML pages: step selection, zoom and hover details of the step timelines.
 * Contract (tracekit/render/timeline.py): svg.tk-timeline with a viewBox whose x range is time;
 * marks carry a <title> (hover text). Zoom rewrites the viewBox x/width only (y stays), with
 * preserveAspectRatio="none"; text is counter-scaled so labels keep their shape. */
(function () {
  "use strict";
  var MIN_SPAN = 1 / 2000;  // deepest zoom: 1/2000 of the window

  function parseBox(svg) {
    var vb = (svg.getAttribute("data-vb0") || svg.getAttribute("viewBox") || "").trim().split(/[\s,]+/).map(Number);
    return vb.length === 4 && vb.every(isFinite) ? vb : null;
  }

  function prepare(svg) {
    if (svg.getAttribute("data-vb0")) return parseBox(svg);
    var vb = parseBox(svg);
    if (!vb) return null;
    svg.setAttribute("data-vb0", vb.join(" "));
    // Fix the drawn size so a narrower viewBox stretches x instead of changing the aspect ratio.
    if (!svg.getAttribute("width")) svg.setAttribute("width", String(vb[2]));
    if (!svg.getAttribute("height")) svg.setAttribute("height", String(vb[3]));
    svg.setAttribute("preserveAspectRatio", "none");
    return vb;
  }

  function applyWindow(svg, f0, f1) {
    var vb = prepare(svg);
    if (!vb) return;
    var x = vb[0] + f0 * vb[2], w = (f1 - f0) * vb[2];
    svg.setAttribute("viewBox", [x, vb[1], w, vb[3]].join(" "));
    var s = w / vb[2];  // text would be stretched by 1/s: scale it back around its anchor
    var texts = svg.querySelectorAll("text");
    for (var i = 0; i < texts.length; i++) {
      var t = texts[i];
      if (!t.hasAttribute("data-tf0")) t.setAttribute("data-tf0", t.getAttribute("transform") || "");
      var ax = parseFloat(t.getAttribute("x")) || 0, base = t.getAttribute("data-tf0");
      if (s === 1) {
        if (base) t.setAttribute("transform", base); else t.removeAttribute("transform");
      } else {
        t.setAttribute("transform", "translate(" + ax + " 0) scale(" + s + " 1) translate(" + (-ax) + " 0)" +
                       (base ? " " + base : ""));
      }
    }
  }

  function initTimelines(box) {
    var view = box.querySelector(".tk-view");
    var select = box.querySelector("select.tk-step-select");
    var state = {f0: 0, f1: 1};

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
      render();
    }

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
    view.addEventListener("wheel", function (ev) {
      var svg = ev.target.closest && ev.target.closest("svg.tk-timeline");
      if (!svg) return;
      ev.preventDefault();
      var rect = svg.getBoundingClientRect();
      zoomAt(ev.deltaY < 0 ? 0.8 : 1.25, rect.width ? (ev.clientX - rect.left) / rect.width : 0.5);
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
