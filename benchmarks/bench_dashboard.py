"""Dashboard speed in real headless Chromium: first paint, zoom/pan round trip, payload, server memory.

    .venv/bin/python benchmarks/bench_dashboard.py --events 1000000 --steps 30

Builds (once, cached in --workdir) a trace of --events Instruction/DmaPacket rows with numpy, ingests it with
``profiler.open``, serves the dashboard in this process, and drives Chromium:

* first paint: navigation start -> the strips drawn (first ``plotly_afterplot`` with row labels);
* round trip: ``Plotly.relayout`` (zoom in/out, pan) -> the new strips painted (``plotly_afterplot`` after the
  figure's data changed), for a sequence of W/S/A/D-like steps; steps answered from the buffer are reported apart;
* payload: bytes of each ``/_dash-update-component`` response that carried a figure update;
* floor: the same relayout -> Patch -> paint loop on a trivial Dash app (one 1-row heatmap) in the same run;
* server memory: this process's peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

ENGINES = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")
OPCODES = ("MATMUL", "LDWEIGHTS", "ACTIVATE", "TENSOR_TENSOR", "IOTA", "DMA_TRIGGER", "TENSOR_SCALAR")


def make_trace(path: Path, n_events: int) -> Path:
    """A trace of ``n_events`` rows: 80% instructions over 5 engines, 20% DMA packets over 4 queues."""
    from tracer import TraceWriter
    from tracer import schema as ts

    if (path / "Metadata.arrows").exists():
        return path
    rng = np.random.default_rng(7)
    n_inst = int(n_events * 0.8)
    n_dma = n_events - n_inst
    chunk = 1 << 20
    with TraceWriter(path, metadata={"arch": "trn2", "is_simulation": True}, background_flush=False) as w:
        for kind, total, lanes in (("inst", n_inst, ENGINES), ("dma", n_dma, ("qSyncIO0", "qSyncIO1", "qSyncIO2",
                                                                                   "qSyncIO3"))):
            per_lane = total // len(lanes)
            for li, lane in enumerate(lanes):
                t = 0
                for first in range(0, per_lane, chunk):
                    m = min(chunk, per_lane - first)
                    dur = rng.integers(20, 400, m)
                    gap = rng.integers(0, 200, m)
                    start = t + np.cumsum(gap + dur) - dur
                    t = int(start[-1] + dur[-1])
                    ids = np.arange(first, first + m, dtype=np.int64) + li * per_lane
                    if kind == "inst":
                        names = np.array(OPCODES)[(ids // 3) % len(OPCODES)]
                        w.append(ts.INSTRUCTION.name, {
                            ts.ID: ids, ts.START_TS: start, ts.END_TS: start + dur, ts.DURATION_NS: dur,
                            ts.ENGINE: [lane] * m, ts.OPCODE: names.tolist(), ts.OPERANDS: [""] * m,
                            ts.PC: ids, ts.PCORE_IDX: np.zeros(m, np.int64)})
                    else:
                        w.append(ts.DMA_PACKET.name, {
                            ts.ID: ids, ts.START_TS: start, ts.END_TS: start + dur, ts.DURATION_NS: dur,
                            ts.QUEUE_NAME: [lane] * m, ts.READ_BYTES: dur * 64, ts.WRITE_BYTES: dur * 64,
                            ts.TRANSFER_BYTES: dur * 64, ts.PCORE_IDX: np.zeros(m, np.int64)})
    return path


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Served:
    def __init__(self, flask_app):
        from werkzeug.serving import make_server

        self.server = make_server("127.0.0.1", 0, flask_app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def floor_app():
    """A trivial Dash app: one heatmap; each relayout answers with a one-value Patch."""
    import dash
    from dash import Input, Output, Patch, dcc, html

    app = dash.Dash(__name__)
    app.layout = html.Div([dcc.Graph(id="timeline-graph", figure={
        "data": [{"type": "heatmap", "z": [[1, 2, 3]], "showscale": False}],
        "layout": {"width": 1400, "height": 300, "autosize": False}})])

    @app.callback(Output("timeline-graph", "figure"), Input("timeline-graph", "relayoutData"),
                  prevent_initial_call=True)
    def _patch(_r):
        p = Patch()
        p["data"][0]["z"] = [[time.time() % 7, 2, 3]]
        return p

    return app


JS_SETUP = """
window.__marks = [];
var gd = document.querySelector('#timeline-graph .js-plotly-plot');
window.__z = gd.data[0].z;
gd.on('plotly_afterplot', function () {
  if (window.__t0 !== undefined && gd.data[0].z !== window.__z) {
    window.__marks.push(performance.now() - window.__t0); window.__z = gd.data[0].z; window.__t0 = undefined;
  }
});
"""


def run_steps(driver, steps, zoom_first=True):
    """Relayout -> repaint latencies (ms) for a sequence of zoom/pan steps; steps the buffer absorbs time out."""
    driver.execute_script(JS_SETUP)
    seq = []
    for i in range(steps):
        kind = ("in", "in", "pan", "out", "pan")[i % 5] if zoom_first else "pan"
        seq.append(kind)
    lat, absorbed = [], 0
    for kind in seq:
        before = len(driver.execute_script("return window.__marks"))
        driver.execute_script("""
          var gd = document.querySelector('#timeline-graph .js-plotly-plot');
          var r = gd._fullLayout.xaxis.range, s = r[1] - r[0], k = arguments[0];
          var a = r[0], b = r[1];
          if (k === 'in') { a = r[0] + s * 0.3; b = r[1] - s * 0.3; }
          else if (k === 'out') { a = r[0] - s * 0.6; b = r[1] + s * 0.6; }
          else { a = r[0] + s * 1.6; b = r[1] + s * 1.6; }
          window.__t0 = performance.now();
          Plotly.relayout(gd, {'xaxis.range[0]': a, 'xaxis.range[1]': b});""", kind)
        t_end = time.time() + 5
        while time.time() < t_end:
            marks = driver.execute_script("return window.__marks")
            if len(marks) > before:
                lat.append(marks[-1])
                break
            time.sleep(0.01)
        else:
            absorbed += 1
            driver.execute_script("window.__t0 = undefined;")
        time.sleep(0.05)
    return lat, absorbed


def pct(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "trnprof-bench-dashboard")
    args = ap.parse_args()

    import sys

    sys.path.insert(0, str(ROOT))
    import profiler
    from dashboard.app import create_app
    from tests.browser.conftest import CHROME_FLAGS, CHROMEDRIVER, CHROMIUM

    args.workdir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    trace_path = make_trace(args.workdir / f"bench{args.events}.trace", args.events)
    t_make = time.perf_counter() - t
    t = time.perf_counter()
    profiler.open(trace_path).close()
    t_ingest = time.perf_counter() - t

    app = create_app([trace_path])
    app.trnprof_registry.open("t0")
    sizes: list[int] = []

    from flask import request

    @app.server.after_request
    def _record(resp):
        if request.path == "/_dash-update-component" and resp.status_code == 200:
            body = resp.get_data()
            if b"timeline-graph" in body and b"bdata" in body:
                sizes.append(len(body))
        return resp

    served = Served(app.server)
    floor = Served(floor_app().server)

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tempfile.mkdtemp()}")
    opts.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        # Warm the browser cache of the JS bundles once (as a returning user), then measure first paint.
        driver.get(served.url + "/")
        time.sleep(3)
        paints = []
        for _ in range(3):
            driver.get(served.url + "/")
            t_end = time.time() + 30
            while time.time() < t_end:
                ok = driver.execute_script("var gd = document.querySelector('#timeline-graph .js-plotly-plot');"
                                           "return !!(gd && gd._fullLayout && gd._fullLayout.yaxis "
                                           "&& gd._fullLayout.yaxis.ticktext);")
                if ok:
                    paints.append(driver.execute_script("return performance.now()"))
                    break
                time.sleep(0.02)
        time.sleep(1)
        sizes.clear()
        lat, absorbed = run_steps(driver, args.steps)
        driver.get(floor.url + "/")
        time.sleep(3)
        floor_lat, _ = run_steps(driver, min(args.steps, 20), zoom_first=False)
    finally:
        driver.quit()
    fl50 = pct(floor_lat, 50)
    result = {
        "events": args.events, "make_trace_s": round(t_make, 1), "ingest_s": round(t_ingest, 1),
        "first_paint_ms_median": round(statistics.median(paints), 0) if paints else None,
        "roundtrip_ms_p50": round(pct(lat, 50), 0), "roundtrip_ms_p95": round(pct(lat, 95), 0),
        "fetching_steps": len(lat), "buffer_absorbed_steps": absorbed,
        "floor_ms_p50": round(fl50, 0), "floor_ms_p95": round(pct(floor_lat, 95), 0),
        "p50_ratio_to_floor": round(pct(lat, 50) / fl50, 2), "p95_ratio_to_floor_p95":
            round(pct(lat, 95) / pct(floor_lat, 95), 2),
        "payload_kb_max": round(max(sizes) / 1024, 1) if sizes else None,
        "payload_kb_median": round(statistics.median(sizes) / 1024, 1) if sizes else None,
        "server_peak_rss_mb": round(peak_rss_mb(), 0),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
