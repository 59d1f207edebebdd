"""The server process of ``bench_dashboard.py``: the dashboard (or the trivial floor app) served as ``trnprof serve``
serves it (werkzeug, threaded), with per-request phase timings.

    .venv/bin/python benchmarks/bench_dashboard_server.py --db /work/bench_data/e1000000.duckdb
    .venv/bin/python benchmarks/bench_dashboard_server.py --floor

Prints ``READY <url>`` on stdout once listening.  ``GET /_bench/stats`` returns the timings recorded since the last
``GET /_bench/reset`` and this process's memory (VmRSS now, VmHWM peak) as JSON.  Phases of each timeline update
request (ms): ``request`` (Flask sees the request -> response built, i.e. Dash's dispatch, the callback, JSON
encoding), ``callback`` (``update_timeline``), ``window`` (``Trace.window``), ``rasterize``, ``lanes`` (the counter
lanes' queries and arrays, summed over their jobs, which run concurrently with the window), ``lanes_wait`` (how
long the request waited for the lanes once its strips were ready), plus the response ``bytes``.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def memory_mb() -> dict[str, float]:
    """This process's resident memory now and its peak (MB)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(line.split()[1]) / 1024
    return out


class PhaseTimer:
    """Phase durations of the request being served (a context variable: the lanes' jobs, which run on the
    dashboard's query pool in a copy of the request's context, add to the same request); finished requests are
    kept in a list."""

    def __init__(self) -> None:
        self.phases: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("phases", default=None)
        self.t0: contextvars.ContextVar[float] = contextvars.ContextVar("t0", default=0.0)
        self.requests: list[dict[str, float]] = []
        self.lock = threading.Lock()

    def current(self) -> dict[str, float] | None:
        return self.phases.get()

    def wrap(self, owner: Any, attr: str, phase: str) -> None:
        """Replace ``owner.attr`` by a version adding its wall time to ``phase`` of the current request."""
        fn = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases = self.current()
                if phases is not None:
                    with self.lock:
                        phases[phase] = phases.get(phase, 0.0) + (time.perf_counter() - t) * 1e3

        setattr(owner, attr, timed)


def instrument(app: Any, timer: PhaseTimer) -> None:
    """Time the phases of every ``/_dash-update-component`` request that returns a timeline figure."""
    from flask import jsonify, request

    import profiler.trace
    from dashboard import timeline_logic
    from profiler.figures import lane_data

    timer.wrap(profiler.trace.Trace, "window", "window")
    timer.wrap(timeline_logic, "rasterize", "rasterize")
    timer.wrap(timeline_logic, "update_timeline", "callback")
    # The lanes' queries (summed over the jobs, which run concurrently with the window) and the time the request
    # waited for them once the strips were ready.
    # (Wrapped where they exist, so the same server measures older trees side by side.)
    for fn in ("engine_utilization_lanes", "series_lane", "counter_lanes"):
        timer.wrap(lane_data, fn, "lanes")
    if hasattr(lane_data, "PendingLanes"):
        timer.wrap(lane_data.PendingLanes, "wait", "lanes_wait")

    @app.server.before_request
    def _start() -> None:
        timer.phases.set(defaultdict(float))
        timer.t0.set(time.perf_counter())

    @app.server.after_request
    def _finish(resp: Any) -> Any:
        phases = timer.current()
        timer.phases.set(None)
        if phases is not None and request.path == "/_dash-update-component" and resp.status_code == 200:
            body = resp.get_data()
            if b'"tl-draw"' in body and b'"source"' in body:   # a fetch: new strips (in a figure or an update)
                phases["request"] = (time.perf_counter() - timer.t0.get()) * 1e3
                phases["bytes"] = len(body)
                with timer.lock:
                    timer.requests.append(dict(phases))
        return resp

    @app.server.route("/_bench/stats")
    def _stats() -> Any:
        with timer.lock:
            return jsonify({"requests": list(timer.requests), **memory_mb()})

    @app.server.route("/_bench/reset")
    def _reset() -> Any:
        with timer.lock:
            timer.requests.clear()
        return jsonify({"ok": True})


def floor_app() -> Any:
    """A trivial Dash app: one heatmap; each relayout answers with a one-value Patch."""
    import dash
    from dash import Input, Output, Patch, dcc, html

    app = dash.Dash(__name__, update_title=None)
    app.layout = html.Div([dcc.Graph(id="timeline-graph", figure={
        "data": [{"type": "heatmap", "z": [[1, 2, 3]], "showscale": False}],
        "layout": {"width": 1400, "height": 300, "autosize": False}})])

    @app.callback(Output("timeline-graph", "figure"), Input("timeline-graph", "relayoutData"),
                  prevent_initial_call=True)
    def _patch(_r: Any) -> Any:
        p = Patch()
        p["data"][0]["z"] = [[time.time() % 7, 2, 3]]
        return p

    return app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, help="database (or trace) to serve")
    ap.add_argument("--floor", action="store_true", help="serve the trivial floor app instead")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    from werkzeug.serving import make_server

    if args.floor:
        app = floor_app()
    else:
        import profiler
        from dashboard.app import create_app
        from dashboard.registry import TraceRegistry

        trace = profiler.open(args.db)
        app = create_app(TraceRegistry([args.db], opener=lambda _p: trace))
        instrument(app, PhaseTimer())
    server = make_server("127.0.0.1", args.port, app.server, threaded=True)
    print(f"READY http://127.0.0.1:{server.server_port}", flush=True)
    print(json.dumps(memory_mb()), file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
