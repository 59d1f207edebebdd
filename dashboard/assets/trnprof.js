/* trnprof dashboard, browser side: clientside callbacks (graph width, hover tooltip) and keyboard navigation.
 *
 * Keys (as in Perfetto): W/S zoom in/out around the mouse (or the centre), A/D pan, R reset; N / Shift+N next /
 * previous search match; Ctrl+Enter runs the SQL editor.  Zoom and pan call Plotly.relayout on the timeline, which
 * reaches the server as an ordinary relayout (the server then decides whether its buffer still covers the view).
 */
(function () {
  "use strict";
  var GRAPH_ID = "timeline-graph";
  var ZOOM = 0.8;       // W: the span shrinks to 80%; S: grows by 1/0.8
  var PAN = 0.2;        // A/D: a fifth of the span
  var SHADES = 8;
  var mouseFrac = null; // last mouse x as a fraction of the plot width, null when outside

  function graphDiv() {
    var outer = document.getElementById(GRAPH_ID);
    return outer ? outer.querySelector(".js-plotly-plot") : null;
  }

  function fmtDuration(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
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
    var gd = graphDiv();
    if (!gd) return;
    var k = ev.key.toLowerCase();
    if (k === "w") zoomPan(gd, ZOOM, 0);
    else if (k === "s") zoomPan(gd, 1 / ZOOM, 0);
    else if (k === "a") zoomPan(gd, 1, -PAN);
    else if (k === "d") zoomPan(gd, 1, PAN);
    else if (k === "r") { var b = document.getElementById("tl-reset"); if (b) b.click(); }
    else if (k === "n") {
      var btn = document.getElementById(ev.shiftKey ? "search-prev" : "search-next");
      if (btn) btn.click();
    } else return;
    ev.preventDefault();
  }

  document.addEventListener("keydown", onKey);
  document.addEventListener("mousemove", function (ev) {
    var gd = graphDiv();
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
    resizeTimer = setTimeout(function () {
      if (window.dash_clientside && window.dash_clientside.set_props && document.getElementById("tl-size")) {
        window.dash_clientside.set_props("tl-size", {data: {width: plotWidth()}});
      }
    }, 300);
  });

  function hoverText(point, view) {
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
        var lines = [ev.name[best] || "?", label,
          "start +" + fmtDuration(ev.start[best]) + "  duration " + fmtDuration(ev.end[best] - ev.start[best])];
        if (ev.source[best]) lines.push("source " + ev.source[best]);
        lines.push(ev.table[best] + " " + ev.id[best] + " · click for details");
        return lines.join("\n");
      }
    }
    var z = point.z;
    if (!z) return label + "\nidle at +" + fmtDuration(tNs);
    var slot = Math.floor((z - 1) / SHADES), shade = (z - 1) % SHADES;
    var name = (view.legend || {})[String(slot)] || "other";
    var busy = shade >= SHADES - 1 ? "event start" :
      "busy " + Math.round(100 * shade / (SHADES - 1)) + "–" + Math.round(100 * (shade + 1) / (SHADES - 1)) + "%";
    return name + "\n" + label + "\n+" + fmtDuration(tNs) + " · " + busy + " of " + fmtDuration(view.res || 1) +
      "\n(mostly " + name + "; zoom in for single instructions)";
  }

  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    trnprof: {
      graphWidth: function () {
        return {width: plotWidth()};
      },
      hover: function (hoverData, view) {
        var nu = window.dash_clientside.no_update;
        if (!hoverData || !hoverData.points || !hoverData.points.length || !view) return [false, nu, nu];
        var p = hoverData.points[0];
        if (p.curveNumber !== 0) return [false, nu, nu];
        return [true, p.bbox, hoverText(p, view)];
      }
    }
  });
})();
