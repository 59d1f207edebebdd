"""Benchmark the timeline's critical-path overlay: figure size and build time with it on, and a zoom's patch.

    .venv/bin/trnprof record matmul_rowload -p M=65536 -p N=16384 -p K=2048 -o /tmp/big.trace
    .venv/bin/python benchmarks/bench_critical_path_overlay.py /tmp/big.trace

Prints one JSON line: the path's steps and the time to compute it (once per trace), the rebuilt figure's JSON size
and build time at ``--width`` pixels, and the JSON size and time of the patch a zoom to 1/20 of the trace sends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import plotly.utils

import profiler
from dashboard import timeline_logic as tl
from dashboard import timeline_state as tls
from dashboard.analysis_views import CriticalPathOverlays
from profiler.figures.palette import CategoryPalette


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace directory or trnprof database")
    parser.add_argument("--width", type=int, default=1200, help="plot width in pixels (default 1200)")
    args = parser.parse_args()
    with profiler.open(args.trace) as trace:
        overlays = CriticalPathOverlays()
        builder = overlays.builder("t0", trace)
        t0 = time.perf_counter()
        path = overlays.path("t0", trace)
        path_s = time.perf_counter() - t0
        on = tls.TimelineOptions.parse("opcode", False, True)
        palette = CategoryPalette()
        t0 = time.perf_counter()
        lit = tl.update_timeline(trace, "t0", state=None, trigger="initial", width_px=args.width, options=on,
                                 palette=palette, overlay=builder)
        build_s = time.perf_counter() - t0
        figure_bytes = len(lit.figure.to_json())
        s0, s1 = trace.time_range
        origin = lit.state["origin"]
        a, b = s0 + (s1 - s0) // 3, s0 + (s1 - s0) // 3 + (s1 - s0) // 20
        t0 = time.perf_counter()
        zoom = tl.update_timeline(trace, "t0", state=lit.state, trigger="relayout", width_px=args.width, options=on,
                                  palette=palette, overlay=builder,
                                  relayout={"xaxis.range[0]": (a - origin) / 1e9, "xaxis.range[1]": (b - origin) / 1e9})
        zoom_s = time.perf_counter() - t0
        patch_bytes = len(json.dumps(zoom.changes, cls=plotly.utils.PlotlyJSONEncoder)) if zoom.changes else 0
    print(json.dumps({"path_steps": path.num_rows, "path_s": round(path_s, 3), "figure_kb": figure_bytes // 1024,
                      "figure_build_s": round(build_s, 3), "zoom_patch_kb": patch_bytes // 1024,
                      "zoom_s": round(zoom_s, 3), "width_px": args.width}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
