"""Dashboard speed in real headless Chromium: first paint, zoom/pan round trip, payload, server memory.

    .venv/bin/python benchmarks/bench_dashboard.py --db /work/bench_data/e1000000.duckdb \
        /work/bench_data/e100000000.duckdb --steps 40

Each database (made by ``trnprof synth`` + ``trnprof ingest``; ``--events N`` makes
``<workdir>/eN.duckdb`` that way, each step in its own process, when it does not exist) is served by
``bench_dashboard_server.py`` in a process of its own, so memory figures are the server's alone.  Chromium
(headless, as the browser tests start it) then measures:

* first paint: navigation start -> the timeline's strips drawn (JS bundles cached, as for a returning user), with
  the time the page's own requests took;
* round trip: ``Plotly.relayout`` (zoom in, zoom in, pan, zoom out, pan, ...) -> the new strips painted
  (``plotly_afterplot`` after the heatmap's data changed), split into *dispatch* (relayout -> the update request
  leaves; it includes plotly's redraw of the old data at the new range, reported as *relayout redraw*), *server*
  (request -> response received, from Resource Timing) and *client* (response -> painted: Dash sets the outputs,
  the draw callback applies the changes with Plotly.update); steps the prefetch buffer absorbs (the server sends no
  new strips) are counted apart;
* payload: bytes of every timeline update response;
* server: phase timings of those requests (window query, rasterise, lanes, whole request) and memory (RSS after the
  run, peak RSS), from the server process;
* floor: the same relayout -> Patch -> paint loop against a trivial Dash app (one 1-row heatmap, one-value Patch)
  in its own server process, in the same run.

Prints one JSON object per database and a Markdown table row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SERVER = Path(__file__).with_name("bench_dashboard_server.py")


def ensure_db(workdir: Path, n_events: int) -> Path:
    """``<workdir>/e<n>.duckdb``, made with ``trnprof synth`` and ``trnprof ingest`` (separate processes)."""
    db = workdir / f"e{n_events}.duckdb"
    if db.exists():
        return db
    trace = workdir / f"e{n_events}.trace"
    trnprof = [PY, "-m", "profiler"]
    if not (trace / "Metadata.arrows").exists():
        subprocess.run([*trnprof, "synth", "--events", str(n_events), "-o", str(trace), "--force"], check=True)
    subprocess.run([*trnprof, "ingest", str(trace), "-o", str(db), "--force"], check=True)
    return db


class ServerProcess:
    """``bench_dashboard_server.py`` in a child process; stopped by :meth:`stop`."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([PY, str(SERVER), *args], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split()[1]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


JS_SETUP = """
performance.setResourceTimingBufferSize(100000);
window.__marks = [];
var gd = document.querySelector('#timeline-graph .js-plotly-plot');
function strips() { return gd.data[0].source || gd.data[0].z; }   // the dashboard's image, the floor's heatmap
window.__z = strips();
gd.on('plotly_afterplot', function () {
  if (window.__t0 !== undefined && strips() !== window.__z) {
    var t1 = performance.now(), t0 = window.__t0;
    var reqs = performance.getEntriesByType('resource').filter(function (e) {
      return e.name.indexOf('_dash-update-component') >= 0 && e.startTime >= t0 && e.responseEnd <= t1;
    });
    var first = reqs.length ? reqs[0].startTime : NaN, last = NaN;
    reqs.forEach(function (e) { if (!(e.responseEnd <= last)) last = e.responseEnd; });
    window.__marks.push({total: t1 - t0, dispatch: first - t0, server: last - first, client: t1 - last,
                         relayout: window.__relayout, requests: reqs.length});
    window.__z = strips(); window.__t0 = undefined;
  }
});
"""

STEP_JS = """
var kind = arguments[0], done = arguments[arguments.length - 1];
var gd = document.querySelector('#timeline-graph .js-plotly-plot');
var before = window.__marks.length;
var r = gd._fullLayout.xaxis.range, s = r[1] - r[0];
var a = r[0], b = r[1];
if (kind === 'in') { a = r[0] + s * 0.3; b = r[1] - s * 0.3; }
else if (kind === 'out') { a = r[0] - s * 0.6; b = r[1] + s * 0.6; }
else { a = r[0] + s * 1.6; b = r[1] + s * 1.6; }
var t0 = performance.now();
function answered() {   // the latest update request since the relayout has its response (ms ago), else -1
  var last = -1;
  performance.getEntriesByType('resource').forEach(function (e) {
    if (e.name.indexOf('_dash-update-component') >= 0 && e.startTime >= t0 && e.responseEnd > 0) {
      last = Math.max(last, e.responseEnd);
    }
  });
  return last < 0 ? -1 : performance.now() - last;
}
function check() {
  if (window.__marks.length > before) { done(window.__marks[window.__marks.length - 1]); return; }
  var since = answered(), waited = performance.now() - t0;
  // Answered 300 ms ago without a repaint: the buffer absorbed the step (the server sent no new strips).
  if (since > 300 || (since < 0 && waited > 1000) || waited > 10000) { window.__t0 = undefined; done(null); return; }
  setTimeout(check, 20);
}
window.__t0 = t0;
Plotly.relayout(gd, {'xaxis.range[0]': a, 'xaxis.range[1]': b});
window.__relayout = performance.now() - t0;
setTimeout(check, 20);
"""

PAINTED_JS = """
var gd = document.querySelector('#timeline-graph .js-plotly-plot');
return !!(gd && gd._fullLayout && gd._fullLayout.yaxis && gd._fullLayout.yaxis.ticktext);
"""

#: Zoom in twice, pan, zoom out, pan: the view narrows over the run, as when a user homes in on something.
SEQUENCE = ("in", "in", "pan", "out", "pan")


def run_steps(driver: Any, steps: int, kinds: tuple[str, ...] = SEQUENCE) -> tuple[list[dict[str, float]], int]:
    """Relayout -> repaint timings for ``steps`` steps; steps answered from the buffer (no new strips) are counted
    apart.  The page waits for each repaint itself (no polling from the driver during a step)."""
    driver.set_script_timeout(30)
    driver.execute_script(JS_SETUP)
    marks, absorbed = [], 0
    for i in range(steps):
        mark = driver.execute_async_script(STEP_JS, kinds[i % len(kinds)])
        if mark is None:
            absorbed += 1
        else:
            marks.append(mark)
        time.sleep(0.2)
    return marks, absorbed


def first_paints(driver: Any, url: str, n: int) -> list[dict[str, float]]:
    """Navigation start -> strips drawn, ``n`` times (after one warm-up load that caches the JS bundles)."""
    driver.get(url)
    time.sleep(3)
    out = []
    for _ in range(n):
        driver.get(url)
        t_end = time.time() + 60
        while time.time() < t_end:
            if driver.execute_script(PAINTED_JS):
                out.append(driver.execute_script("""
                  var t = performance.now();
                  var reqs = performance.getEntriesByType('resource').filter(function (e) {
                    return e.name.indexOf('_dash-') >= 0; });
                  var srv = 0; reqs.forEach(function (e) { srv = Math.max(srv, e.responseEnd); });
                  var nav = performance.getEntriesByType('navigation')[0];
                  return {total: t, dom_ready: nav ? nav.domContentLoadedEventEnd : NaN,
                          last_response: srv, requests: reqs.length};"""))
                break
            time.sleep(0.02)
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summary_of(marks: list[dict[str, float]], key: str) -> dict[str, float]:
    v = [m[key] for m in marks if m.get(key) is not None and m[key] == m[key]]
    return {"p50": round(pct(v, 50), 1), "p95": round(pct(v, 95), 1)}


def make_driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.browser.conftest import CHROME_FLAGS, CHROMEDRIVER, CHROMIUM

    opts = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tempfile.mkdtemp()}")
    opts.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def bench_db(db: Path, steps: int, paints: int) -> dict[str, Any]:
    """Every figure of one database (see the module docstring)."""
    server = ServerProcess("--db", str(db))
    floor = ServerProcess("--floor")
    driver = make_driver()
    try:
        paint = first_paints(driver, server.url + "/", paints)
        time.sleep(1)
        server.get("/_bench/reset")
        marks, absorbed = run_steps(driver, steps)
        stats = server.get("/_bench/stats")
        driver.get(floor.url + "/")
        time.sleep(3)
        floor_marks, _ = run_steps(driver, min(steps, 30), ("pan",))
    finally:
        driver.quit()
        server.stop()
        floor.stop()
    reqs = stats["requests"]
    total = [m["total"] for m in marks]
    floor_total = [m["total"] for m in floor_marks]
    sizes = [r["bytes"] for r in reqs]
    phases = {k: round(statistics.median([r.get(k, 0.0) for r in reqs]), 1) if reqs else None
              for k in ("request", "callback", "window", "rasterize", "lanes", "lanes_wait")}
    return {
        "db": str(db),
        "first_paint_ms": [round(p["total"]) for p in paint],
        "first_paint_ms_median": round(statistics.median(p["total"] for p in paint)) if paint else None,
        "first_paint_last_response_ms": [round(p["last_response"]) for p in paint],
        "roundtrip_ms": summary_of(marks, "total"),
        "dispatch_ms": summary_of(marks, "dispatch"),
        "relayout_redraw_ms": summary_of(marks, "relayout"),
        "server_ms": summary_of(marks, "server"),
        "client_ms": summary_of(marks, "client"),
        "fetching_steps": len(marks), "buffer_absorbed_steps": absorbed,
        "floor_ms": summary_of(floor_marks, "total"),
        "ratio_p50": round(pct(total, 50) / pct(floor_total, 50), 2),
        "ratio_p95": round(pct(total, 95) / pct(floor_total, 95), 2),
        "server_phase_median_ms": phases,
        "payload_kb_median": round(statistics.median(sizes) / 1024, 1) if sizes else None,
        "payload_kb_max": round(max(sizes) / 1024, 1) if sizes else None,
        "server_rss_mb": round(stats.get("VmRSS", float("nan"))),
        "server_peak_rss_mb": round(stats.get("VmHWM", float("nan"))),
    }


def markdown_row(r: dict[str, Any]) -> str:
    rt, fl = r["roundtrip_ms"], r["floor_ms"]
    return (f"| {Path(r['db']).stem} | {r['first_paint_ms_median']} ms | {rt['p50']:.0f} / {rt['p95']:.0f} ms | "
            f"{r['dispatch_ms']['p50']:.0f} / {r['server_ms']['p50']:.0f} / {r['client_ms']['p50']:.0f} ms | "
            f"{fl['p50']:.0f} / {fl['p95']:.0f} ms | {r['ratio_p50']}x / {r['ratio_p95']}x | "
            f"{r['buffer_absorbed_steps']} of {r['buffer_absorbed_steps'] + r['fetching_steps']} | "
            f"{r['payload_kb_median']} / {r['payload_kb_max']} KB | "
            f"{r['server_rss_mb']} / {r['server_peak_rss_mb']} MB |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, nargs="*", default=[], help="ingested databases to serve")
    ap.add_argument("--events", type=int, nargs="*", default=[], help="make (or reuse) <workdir>/eN.duckdb")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "trnprof-bench-dashboard")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--paints", type=int, default=3, help="first-paint measurements per database")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    dbs = list(args.db)
    if args.events:
        args.workdir.mkdir(parents=True, exist_ok=True)
        dbs += [ensure_db(args.workdir, n) for n in args.events]
    if not dbs:
        ap.error("give --db or --events")
    rows = []
    for db in dbs:
        result = bench_db(db, args.steps, args.paints)
        print(json.dumps(result, indent=1), flush=True)
        rows.append(markdown_row(result))
    print("| trace | first paint | round trip p50 / p95 | dispatch / server / client p50 | floor p50 / p95 | "
          "ratio p50 / p95 | absorbed by buffer | payload median / max | server RSS / peak |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
