/* trnprof dashboard, browser side: the timeline graph (drawn here with plotly.js, not by a dcc.Graph), its hover
 * tooltip, the clientside callbacks (graph width, draw, layout changes) and keyboard navigation.
 *
 * The server sends the timeline through the `tl-draw` store: a whole figure (`{kind: "figure", figure, config}`)
 * or the arrays a zoom changes (`{kind: "update", data: {traceIndex: {attr: value}}, layout}`), applied with one
 * Plotly.update.  The graph's zooms, clicks and box selections go back through the `tl-relayout`, `tl-click` and
 * `tl-range` stores (dash_clientside.set_props), which trigger the server callbacks.
 *
 * Keys (as in Perfetto): W/S zoom in/out around the mouse (or the centre), A/D pan, R reset, F fit the selected
 * event, . / , the next / previous event on its row; M a marker at the mouse (snapped to an event edge); N / Shift+N
 * next / previous search match; Ctrl+Enter runs the SQL editor.  On the source page, the line the URL marks (else the hottest line) is scrolled into view.
 * Zoom and pan call Plotly.relayout on the timeline, which reaches the server as an ordinary relayout (the server then
 * decides whether its buffer still covers the view).
 */
(function () {
  "use strict";
  var GRAPH_ID = "timeline-graph";
  var PLOT_CLASS = "tl-plot";
  var ZOOM = 0.8;       // W: the span shrinks to 80%; S: grows by 1/0.8
  var PAN = 0.2;        // A/D: a fifth of the span
  var SHADES = 8;
  var mouseFrac = null; // last mouse x as a fraction of the plot width, null when outside
  var hoverView = null; // the `tl-view` store of the drawn timeline (row labels, legend, exact events)
  var eventSeq = 0;
  var colourCodes = new Map();  // 0xRRGGBB -> strip code (the strips' PNG palette, sent with each whole figure)

  function plotDiv() {
    var outer = document.getElementById(GRAPH_ID);
    return outer ? outer.querySelector(".js-plotly-plot") : null;
  }

  // The graph the keys move: the timeline's, else the compare page's trace A (trace B follows it).
  function keyPlot() {
    var gd = plotDiv();
    if (gd) return gd;
    var a = document.getElementById("cmp-graph-a");
    return a ? a.querySelector(".js-plotly-plot") : null;
  }

  // Set a dcc.Store of the timeline page (stores render no element: the page is there when its graph is).
  function setProps(id, value) {
    var dc = window.dash_clientside;
    if (dc && dc.set_props && document.getElementById(GRAPH_ID)) dc.set_props(id, {data: value});
  }

  function fmtDuration(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
  }

  // A time offset with as many decimals as resolving `resNs` takes (a pixel's width, an event's exact ns):
  // "+35.500123 ms" at 1 ns per pixel where four significant digits read "+35.50 ms", 10 µs coarse.
  function fmtTime(ns, resNs) {
    var a = Math.abs(ns), unit = 1, name = " ns";
    if (a >= 1e9) { unit = 1e9; name = " s"; }
    else if (a >= 1e6) { unit = 1e6; name = " ms"; }
    else if (a >= 1e3) { unit = 1e3; name = " µs"; }
    var digits = Math.min(9, Math.max(0, Math.ceil(Math.log10(unit / Math.max(resNs || 1, 1)))));
    return (ns / unit).toFixed(digits) + name;
  }
  window.trnprofFmtTime = fmtTime;

  // Deep zoom far from the trace's start: where the time axis's own labels would need more than OFFSET_DIGITS
  // significant digits to tell its ticks apart ("1.23456725s"), the first tick reads its time and the others
  // their offset from it ("1.23456720 s", "+50 ns", "+100 ns", ...), as Perfetto labels them.  `r0`, `r1`: the
  // axis range (seconds since the trace's start); null where the axis's own labels read well.
  var OFFSET_DIGITS = 6;
  function offsetTicks(r0, r1, widthPx) {
    var span = r1 - r0;
    if (!(span > 0) || !isFinite(r0) || !isFinite(r1)) return null;
    var raw = span / Math.max(2, Math.floor(widthPx / 110));
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    var step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
    if (Math.log10(Math.max(Math.abs(r0), Math.abs(r1)) / step) + 1 <= OFFSET_DIGITS) return null;
    var first = Math.ceil(r0 / step - 1e-6) * step, stepNs = step * 1e9;
    var vals = [], text = [];
    for (var k = 0; first + k * step <= r1 + step * 1e-6 && k < 100; k++) {
      vals.push(first + k * step);
      text.push(k === 0 ? fmtTime(first * 1e9, stepNs) : "+" + fmtTime(k * stepNs, stepNs));
    }
    return {vals: vals, text: text};
  }
  window.trnprofOffsetTicks = offsetTicks;

  // The strips' palette (strip code -> colour) when no whole timeline figure brought it: the compare page carries it
  // in the data-colours attribute of #cmp-colours.
  function loadColourCodes() {
    var el = document.getElementById("cmp-colours");
    var text = el && el.getAttribute("data-colours");
    if (!text) return;
    JSON.parse(text).forEach(function (rgb, code) { colourCodes.set((rgb[0] << 16) | (rgb[1] << 8) | rgb[2], code); });
  }

  // The compare page's graphs (dcc.Graph, drawn by Dash): after each redraw, filter their legends like the
  // timeline's.
  function bindCompareGraphs() {
    ["a", "b"].forEach(function (side) {
      var outer = document.getElementById("cmp-graph-" + side);
      var gd = outer && outer.querySelector(".js-plotly-plot");
      if (!gd || gd.__trnprofCompareBound || !gd.on) return;
      gd.__trnprofCompareBound = true;
      gd.__trnprofLegend = "#cmp-legend-" + side;
      gd.on("plotly_afterplot", function () { setTimeout(function () { filterLegend(gd); }, 0); });
      var legend = document.getElementById("cmp-legend-" + side);
      if (legend && window.MutationObserver) {
        new MutationObserver(function () { filterLegend(gd); }).observe(legend, {childList: true});
      }
      filterLegend(gd);
    });
  }

  // The legend lists the colours of the drawn strips, which cover the fetched buffer (wider than the view): after
  // each redraw, hide the swatches of colours no pixel in view has.
  function filterLegend(gd) {
    var items = document.querySelectorAll((gd.__trnprofLegend || "#tl-legend") + " .legend-item[data-slot]");
    if (!items.length) return;
    if (!colourCodes.size) loadColourCodes();
    var trace = gd.data && gd.data[0], xa = gd._fullLayout && gd._fullLayout.xaxis;
    var s = decodedStrip(gd, function () { filterLegend(gd); });
    if (!s || !trace || !xa || !xa.range || !(trace.dx > 0)) return;
    var c0 = Math.max(0, Math.floor((Number(xa.range[0]) - trace.x0) / trace.dx));
    var c1 = Math.min(s.width, Math.ceil((Number(xa.range[1]) - trace.x0) / trace.dx));
    var present = {}, rows = Math.floor(s.codes.length / s.width);
    for (var r = 0; r < rows; r++) {
      var base = r * s.width;
      for (var c = c0; c < c1; c++) {
        var code = s.codes[base + c];
        if (code) present[Math.floor((code - 1) / SHADES)] = true;
      }
    }
    // the legend keeps the height it had with every swatch shown: hiding the colours out of view made it lose a
    // line and moved the plot up under the pointer in the middle of a wheel zoom
    // (the tallest it has been with every swatch shown, for this colour mode and width: a zoom's new legend, of
    // the names in its window, is often shorter too)
    // (measured only when the legend's swatches, the mode or the width changed: not a layout pass per zoom)
    var box = items[0].parentNode;
    var mode = document.querySelector("#colour-by input:checked");
    var key = (mode ? mode.value : "") + "|" + (box ? box.clientWidth : 0);
    var swatches = key + "|" + items.length + "|" + items[0].textContent + "|" + items[items.length - 1].textContent;
    if (box && box.getAttribute("data-swatches") !== swatches) {
      var kept = box.getAttribute("data-full-key") === key ? Number(box.getAttribute("data-full-height")) || 0 : 0;
      box.style.minHeight = "";
      Array.prototype.forEach.call(items, function (it) { it.style.display = ""; });
      var full = Math.max(kept, box.offsetHeight);
      box.setAttribute("data-full-key", key);
      box.setAttribute("data-full-height", String(full));
      box.setAttribute("data-swatches", swatches);
      box.style.minHeight = full + "px";
    }
    Array.prototype.forEach.call(items, function (it) {
      it.style.display = present[Number(it.getAttribute("data-slot"))] ? "" : "none";
    });
  }

  // After each redraw: offset ticks where they are needed, plotly's own labels elsewhere (one relayout of the
  // ticks when that changes, none when it does not).
  function syncTicks(gd) {
    var xa = gd._fullLayout && gd._fullLayout.xaxis;
    if (!xa || !xa.range || !window.Plotly) return;
    var r0 = Number(xa.range[0]), r1 = Number(xa.range[1]), width = xa._length || plotWidth();
    var ticks = offsetTicks(r0, r1, width);
    var arrayMode = !!(gd.layout.xaxis && gd.layout.xaxis.tickmode === "array");
    var key = r0 + ":" + r1 + ":" + width;
    if (ticks ? arrayMode && gd.__trnprofTicks === key : !arrayMode) return;
    gd.__trnprofTicks = key;
    window.Plotly.relayout(gd, ticks ? {"xaxis.tickmode": "array", "xaxis.tickvals": ticks.vals,
                                        "xaxis.ticktext": ticks.text}
                                     : {"xaxis.tickmode": "auto", "xaxis.tickvals": null, "xaxis.ticktext": null});
  }

  function plotWidth() {
    var c = document.getElementById("timeline-container");
    var w = c ? c.clientWidth : window.innerWidth;
    return Math.max(100, w - 170 - 16);   // figure margins (profiler.figures.timeline.MARGIN)
  }

  function zoomPan(gd, zoom, pan) {
    var xa = gd._fullLayout && gd._fullLayout.xaxis;
    if (!xa || !xa.range) return;
    var r0 = Number(xa.range[0]), r1 = Number(xa.range[1]);
    var span = r1 - r0;
    var f = mouseFrac === null ? 0.5 : mouseFrac;
    var anchor = r0 + f * span;
    var nspan = span * zoom;
    if (nspan < 1e-9 * 16) nspan = 1e-9 * 16;
    var n0 = anchor - f * nspan + pan * span;
    window.Plotly.relayout(gd, {"xaxis.range[0]": n0, "xaxis.range[1]": n0 + nspan});
  }

  // M: a marker at the time under the mouse (the view's centre when the mouse is elsewhere), snapped to the nearest
  // start or end of an event drawn exactly within SNAP_PX pixels (Neuron Explorer's markers snap to events).
  var SNAP_PX = 6;
  function markerTime(gd) {
    var xa = gd._fullLayout && gd._fullLayout.xaxis;
    if (!xa || !xa.range) return null;
    var r0 = Number(xa.range[0]), r1 = Number(xa.range[1]);
    var x = r0 + (mouseFrac === null ? 0.5 : mouseFrac) * (r1 - r0);
    var ev = hoverView && hoverView.events;
    if (ev && ev.start) {
      var best = null, bestDist = SNAP_PX * (r1 - r0) / Math.max(xa._length || plotWidth(), 1);
      [ev.start, ev.end].forEach(function (edges) {
        for (var i = 0; i < edges.length; i++) {
          var e = edges[i] / 1e9, d = Math.abs(e - x);   // (event times are ns since the axis origin)
          if (d <= bestDist) { best = e; bestDist = d; }
        }
      });
      if (best !== null) x = best;
    }
    return x;
  }

  function addMarker(gd) {
    var x = markerTime(gd);
    if (x !== null) setProps("tl-marker-add", {x: x, seq: ++eventSeq});
  }
  window.trnprofMarkerTime = function () { var gd = plotDiv(); return gd ? markerTime(gd) : null; };

  // F: fit the view to the selected event (its outline), with a third of its length either side (Perfetto's F).
  function fitSelected(gd) {
    var shapes = (gd.layout && gd.layout.shapes) || [];
    var sel = shapes.filter(function (sh) { return sh.name === "selected"; })[0];
    if (!sel) return;
    var x0 = Number(sel.x0), x1 = Number(sel.x1), pad = Math.max((x1 - x0) / 3, 4e-9);
    window.Plotly.relayout(gd, {"xaxis.range[0]": x0 - pad, "xaxis.range[1]": x1 + pad});
  }

  function onKey(ev) {
    var t = ev.target;
    var tag = t && t.tagName ? t.tagName.toLowerCase() : "";
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && t && t.id === "sql-query") {
      var run = document.getElementById("sql-run");
      if (run) { ev.preventDefault(); run.click(); }
      return;
    }
    if (tag === "input" || tag === "textarea" || tag === "select" || (t && t.isContentEditable)) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var gd = keyPlot();
    if (!gd) return;
    var k = ev.key.toLowerCase();
    if (k === "w") zoomPan(gd, ZOOM, 0);
    else if (k === "s") zoomPan(gd, 1 / ZOOM, 0);
    else if (k === "a") zoomPan(gd, 1, -PAN);
    else if (k === "d") zoomPan(gd, 1, PAN);
    else if (k === "r") {   // the timeline's Reset zoom; on the compare page, trace A's (B follows)
      var b = document.getElementById("tl-reset");
      if (b) b.click(); else window.Plotly.relayout(gd, {"xaxis.autorange": true});
    }
    else if (k === "m" && gd === plotDiv()) addMarker(gd);
    else if (k === "f" && gd === plotDiv()) fitSelected(gd);
    else if ((k === "." || k === ",") && gd === plotDiv()) {
      setProps("tl-step-event", {step: k === "." ? 1 : -1, seq: ++eventSeq});
    }
    else if (k === "n") {
      var btn = document.getElementById(ev.shiftKey ? "search-prev" : "search-next");
      if (btn) btn.click();
    } else return;
    ev.preventDefault();
  }

  // The source page: when a listing arrives, bring its marked line (?line=N), else its hottest line, into view,
  // once per listing.
  var scrolledListing = null;
  function scrollToMarkedLine() {
    var table = document.getElementById("src-table");
    if (!table || table === scrolledListing) return;
    scrolledListing = table;
    var row = table.querySelector(".src-target") || table.querySelector(".src-hottest");
    if (row && row.scrollIntoView) row.scrollIntoView({block: "center"});
  }
  if (window.MutationObserver) {
    new MutationObserver(function () { scrollToMarkedLine(); bindCompareGraphs(); })
      .observe(document.documentElement, {childList: true, subtree: true});
  }

  document.addEventListener("keydown", onKey);
  document.addEventListener("mousemove", function (ev) {
    var gd = plotDiv();
    if (!gd || !gd._fullLayout) { mouseFrac = null; return; }
    var drag = gd.querySelector(".nsewdrag");
    if (!drag) { mouseFrac = null; return; }
    var r = drag.getBoundingClientRect();
    if (ev.clientX < r.left || ev.clientX > r.right || ev.clientY < r.top || ev.clientY > r.bottom) {
      mouseFrac = null;
    } else {
      mouseFrac = (ev.clientX - r.left) / Math.max(r.width, 1);
    }
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { setProps("tl-size", {width: plotWidth()}); }, 300);
  });

  // The drawn strips' codes, decoded from their PNG once per drawing (then `done()`): null until they are.
  // The strip codes of a graph's strips PNG (decoded once per image, kept on the graph: the timeline's, or each of
  // the compare page's), null until decoded (``done`` runs then).
  function decodedStrip(gd, done) {
    var trace = gd.data && gd.data[0];
    if (!trace || !trace.source) return null;
    var strip = gd.__trnprofStrip || (gd.__trnprofStrip = {src: null, pending: null, codes: null, width: 0});
    if (strip.src === trace.source) return strip;
    if (strip.pending !== trace.source) {
      var src = trace.source, img = new Image();
      strip.pending = src;
      img.onload = function () {
        var c = document.createElement("canvas");
        c.width = img.width; c.height = img.height;
        var ctx = c.getContext("2d");
        ctx.drawImage(img, 0, 0);
        var px = ctx.getImageData(0, 0, img.width, img.height).data, codes = new Uint8Array(img.width * img.height);
        for (var i = 0; i < codes.length; i++) {
          codes[i] = colourCodes.get((px[4 * i] << 16) | (px[4 * i + 1] << 8) | px[4 * i + 2]) || 0;
        }
        if (gd.__trnprofStrip.pending === src) {
          gd.__trnprofStrip = {src: src, pending: null, codes: codes, width: img.width};
          if (done) done();
        }
      };
      img.src = src;
    }
    return null;
  }

  // The strip code under a hover point (null until the strips are decoded: the first hover starts that).
  function stripCode(gd, row, x) {
    var trace = gd.data && gd.data[0];
    var strip = decodedStrip(gd, function () { filterLegend(gd); });
    if (!strip) return null;
    var col = Math.round((x - trace.x0) / trace.dx);
    if (col < 0 || col >= strip.width || row < 0 || row * strip.width >= strip.codes.length) return 0;
    return strip.codes[row * strip.width + col];
  }

  function hoverText(point, view, code) {
    var row = Math.round(point.y);
    var label = (view.labels || [])[row] || "";
    var tNs = point.x * 1e9;   // ns since origin
    var ev = view.events;
    if (ev && ev.row) {
      var best = -1, bestLen = Infinity;
      for (var i = 0; i < ev.row.length; i++) {
        if (ev.row[i] !== row) continue;
        var s = ev.start[i], e = Math.max(ev.end[i], s + 1);
        var slack = (view.res || 1) / 2;
        if (s - slack <= tNs && tNs < e + slack && e - s < bestLen) { best = i; bestLen = e - s; }
      }
      if (best >= 0) {
        var strings = ev.strings || [];   // name, source and table are indices into the string table
        var source = strings[ev.source[best]];
        var lines = [strings[ev.name[best]] || "?", label,
          "start +" + fmtTime(ev.start[best], 1) + "  duration " + fmtTime(ev.end[best] - ev.start[best], 1)];
        if (source) lines.push("source " + source);
        lines.push(strings[ev.table[best]] + " " + ev.id[best] + " · click for details");
        return lines.join("\n");
      }
    }
    if (code === null || code === undefined) return label + "\n+" + fmtTime(tNs, view.res);
    if (!code) return label + "\nidle at +" + fmtTime(tNs, view.res);
    var slot = Math.floor((code - 1) / SHADES), shade = (code - 1) % SHADES;
    var name = (view.legend || {})[String(slot)] || "other";
    var busy = shade >= SHADES - 1 ? "event start" :
      "busy " + Math.round(100 * shade / (SHADES - 1)) + "–" + Math.round(100 * (shade + 1) / (SHADES - 1)) + "%";
    return name + "\n" + label + "\n+" + fmtTime(tNs, view.res) + " · " + busy + " of " + fmtDuration(view.res || 1) +
      "\n(mostly " + name + "; zoom in for single instructions)";
  }

  function tooltip() { return document.getElementById("tl-tooltip"); }

  function showTooltip(ev) {
    var tip = tooltip();
    if (!tip || !ev || !ev.points || !ev.points.length || !hoverView) return;
    var p = ev.points[0];
    if (p.curveNumber !== 0) { tip.style.display = "none"; return; }
    var gd = plotDiv();
    tip.textContent = hoverText(p, hoverView, gd ? stripCode(gd, Math.round(p.y), p.x) : null);
    var box = tip.parentElement.getBoundingClientRect();
    var x = (ev.event ? ev.event.clientX : box.left) - box.left, y = (ev.event ? ev.event.clientY : box.top) - box.top;
    tip.style.display = "block";
    var left = Math.min(x + 14, Math.max(box.width - tip.offsetWidth - 4, 0));
    tip.style.left = left + "px";
    tip.style.top = (y + 16) + "px";
  }

  function hideTooltip() { var tip = tooltip(); if (tip) tip.style.display = "none"; }

  // Plotly events of a freshly drawn graph -> the stores the server callbacks listen to.
  function bindEvents(gd) {
    if (gd.__trnprofBound) return;
    gd.__trnprofBound = true;
    var legend = document.getElementById("tl-legend");
    if (legend && window.MutationObserver) {   // a new legend from the server: filter it too
      new MutationObserver(function () { filterLegend(gd); }).observe(legend, {childList: true});
    }
    gd.on("plotly_relayout", function (ev) {
      if (!ev) return;
      var out = {}, any = false;
      Object.keys(ev).forEach(function (k) {
        if (k === "xaxis.autorange" || k.indexOf("xaxis.range") === 0) { out[k] = ev[k]; any = true; }
      });
      if (!any) return;   // our own shape and tick changes, y-only or drag-mode changes
      out.seq = ++eventSeq;
      setProps("tl-relayout", out);
    });
    gd.on("plotly_click", function (ev) {
      if (!ev || !ev.points || !ev.points.length) return;
      var p = ev.points[0];
      setProps("tl-click", {points: [{x: p.x, y: p.y, curveNumber: p.curveNumber}], seq: ++eventSeq});
    });
    gd.on("plotly_selected", function (ev) {
      if (!ev || !ev.range || !ev.range.x) return;
      setProps("tl-range", {range: {x: ev.range.x}, seq: ++eventSeq});
    });
    gd.on("plotly_afterplot", function () { setTimeout(function () { syncTicks(gd); filterLegend(gd); }, 0); });
    gd.on("plotly_hover", showTooltip);
    gd.on("plotly_unhover", hideTooltip);
  }

  function plotElement() {
    var outer = document.getElementById(GRAPH_ID);
    if (!outer) return null;
    var el = outer.querySelector("." + PLOT_CLASS);
    if (!el) {
      el = document.createElement("div");
      el.className = PLOT_CLASS;
      outer.appendChild(el);
    }
    Array.prototype.forEach.call(outer.children, function (c) { if (c !== el) c.style.display = "none"; });
    return el;
  }

  function whenPlotly(fn) {
    if (window.Plotly) { fn(); return; }
    var tries = 0;
    var timer = setInterval(function () {
      if (window.Plotly || ++tries > 500) { clearInterval(timer); if (window.Plotly) fn(); }
    }, 20);
  }

  // One Plotly.update for every changed trace: attribute -> one value per trace index (undefined = unchanged).
  function applyUpdate(el, payload) {
    var indices = Object.keys(payload.data || {}).map(Number).filter(function (i) { return i < el.data.length; });
    var attrs = {};
    indices.forEach(function (i, k) {
      var values = payload.data[String(i)];
      Object.keys(values).forEach(function (name) {
        if (!attrs[name]) attrs[name] = new Array(indices.length);
        attrs[name][k] = values[name];
      });
    });
    var layout = payload.layout || {};
    if (!indices.length && !Object.keys(layout).length) return;
    window.Plotly.update(el, attrs, layout, indices);
  }

  // What the tooltip says at (row, x in axis seconds) of the drawn timeline (null until the strips are decoded).
  window.trnprofHoverText = function (row, x) {
    var gd = plotDiv();
    if (!gd || !hoverView) return null;
    var code = stripCode(gd, row, x);
    return code === null ? null : hoverText({x: x, y: row}, hoverView, code);
  };

  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    trnprof: {
      graphWidth: function () {
        return {width: plotWidth()};
      },
      // `tl-link`'s href -> the address bar (history.replaceState: no navigation, no history entry), so a reload
      // keeps the view and its options (they were only in "link to this view").  Same page only.
      keepView: function (href) {
        var nu = window.dash_clientside.no_update;
        if (!href || !window.history || !window.history.replaceState) return nu;
        try {
          var u = new URL(href, window.location.href);
          if (u.origin === window.location.origin && u.pathname === window.location.pathname &&
              u.search !== window.location.search) {
            window.history.replaceState(window.history.state, "", u.pathname + u.search + window.location.hash);
          }
        } catch (e) { /* a malformed href: leave the address bar */ }
        return nu;
      },
      // `tl-draw` -> the graph.  Returns no_update: the `tl-drawn` output is only the callback's required sink
      // (setting it would cost one more store update, and a re-render pass, per zoom).
      draw: function (payload, view) {
        var nu = window.dash_clientside.no_update;
        if (view) hoverView = view;
        if (!payload) return nu;
        whenPlotly(function () {
          var el = plotElement();
          if (!el) return;
          if (payload.kind === "figure") {
            var fig = payload.figure || {};
            hideTooltip();
            if (payload.colours) {
              colourCodes = new Map();
              payload.colours.forEach(function (rgb, code) {
                colourCodes.set((rgb[0] << 16) | (rgb[1] << 8) | rgb[2], code);
              });
            }
            window.Plotly.react(el, fig.data || [], fig.layout || {}, payload.config || {}).then(function () {
              bindEvents(el);
              syncTicks(el);   // (the first draw's afterplot came before its handler)
              filterLegend(el);
              // what the URL asks to select (?search=, ?select=) waits for a drawn timeline
              setProps("tl-figure-drawn", {seq: ++eventSeq});
            });
          } else if (payload.kind === "update" && el.data) {
            applyUpdate(el, payload);
          }
        });
        return nu;
      },
      // `tl-shapes` (the outline, arrows and markers) -> Plotly.relayout on the drawn graph.
      relayout: function (layout) {
        var nu = window.dash_clientside.no_update;
        var el = plotDiv();
        if (el && el.data && layout && window.Plotly) window.Plotly.relayout(el, layout);
        return nu;
      }
    }
  });
})();
