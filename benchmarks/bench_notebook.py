"""Notebook API speed on a large trace: figures, the rich HTML view, and the live widget's zoom/pan updates.

    .venv/bin/python benchmarks/bench_notebook.py --events 10000000 --steps 30

Writes (once, cached in --workdir) a synthetic trace of --events rows with ``trnprof synth`` and ingests it with
``trnprof ingest`` in a child process (so this process's memory is the notebook side only), then in this process:

* ``Trace._repr_html_()``, ``Trace.timeline()``, ``Trace.utilization_figure()`` and ``Trace.widget()``: time to
  build, and the size of the figure as a notebook ships it (plotly JSON);
* the widget's level-of-detail loop: a zoom/pan sequence driven by setting the widget's x-axis range (what a
  zoom in the browser does to the widget's model), timed from the range change to the widget's update message
  being serialised — the kernel's share of a round trip (the front end's paint is not included: no browser);
  steps the prefetch buffer absorbs send nothing and are counted apart;
* this process's peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRNPROF = [sys.executable, "-m", "profiler"]


def prepare(workdir: Path, events: int, tracks: int) -> Path:
    """The synthetic trace directory (written and ingested once)."""
    trace = workdir / f"synth-{events}-{tracks}.trace"
    if not (trace / "Metadata.arrows").exists():
        t0 = time.perf_counter()
        subprocess.run([*TRNPROF, "synth", "--events", str(events), "--tracks", str(tracks), "-o", str(trace)],
                       check=True)
        print(f"synth: {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    subprocess.run([*TRNPROF, "ingest", str(trace)], check=True, stdout=subprocess.DEVNULL)
    print(f"ingest (or cache check): {time.perf_counter() - t0:.1f} s", flush=True)
    return trace


def peak_rss_mb() -> float:
    """This process's peak resident set size, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    """Median wall time (s) of ``fn()`` over ``repeat`` calls, and its last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def figure_kb(fig) -> float:
    """Size of a figure as the notebook ships it (plotly JSON), KB."""
    return len(fig.to_json()) / 1024


def zoom_steps(full: tuple[float, float], steps: int) -> list[list[float]]:
    """A zoom/pan sequence in axis units: zoom in 4x at a time towards 40% of the trace, pan, zoom out."""
    a, b = full
    centre, span = a + 0.4 * (b - a), b - a
    seq = []
    for i in range(steps):
        phase = i % 10
        if phase < 5:
            span /= 4
        elif phase < 8:
            centre += 0.35 * span
        else:
            span *= 4
        seq.append([centre - span / 2, centre + span / 2])
    return seq


def message_bytes(value: object) -> int:
    """Bytes of a serialised widget message: its JSON plus its binary buffers (numpy arrays travel as buffers)."""
    buffers = 0

    def strip(v: object) -> object:
        nonlocal buffers
        if isinstance(v, memoryview | bytes | bytearray):
            buffers += memoryview(v).nbytes
            return None
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [strip(x) for x in v]
        return v

    return len(json.dumps(strip(value))) + buffers


def bench_widget(trace, steps: int, width_px: int) -> dict[str, object]:
    """Drive the widget through zoom_steps; per step: wall time and bytes of the update message."""
    import anywidget  # noqa: F401  (imported before timing: a kernel pays this once)
    import ipywidgets  # noqa: F401
    from plotly.serializers import custom_serializers

    t0 = time.perf_counter()
    trace.widget(width_px=width_px)  # the first FigureWidget of a process also loads plotly's widget bundle
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    widget = trace.widget(width_px=width_px)
    create_s = time.perf_counter() - t0
    sizes: list[int] = []

    def on_message(change: dict) -> None:
        if change["new"] is not None:
            sizes.append(message_bytes(custom_serializers["to_json"](change["new"], widget)))

    widget.observe(on_message, names=["_py2js_update", "_py2js_restyle", "_py2js_relayout"])
    live = widget.trnprof_live
    fetched, absorbed, payload = [], 0, []
    for rng in zoom_steps(tuple(widget.layout.xaxis.range), steps):
        before, n_msgs = live.fetches, len(sizes)
        t0 = time.perf_counter()
        widget.layout.xaxis.range = rng
        dt = time.perf_counter() - t0
        if live.fetches > before:
            fetched.append(dt)
            payload.append(sum(sizes[n_msgs:]))
        else:
            absorbed += 1
    fetched.sort()
    return {
        "first_widget_s": first_s, "create_s": create_s,
        "fetches": len(fetched), "absorbed": absorbed,
        "p50_ms": 1e3 * statistics.median(fetched), "p95_ms": 1e3 * fetched[int(0.95 * (len(fetched) - 1))],
        "payload_median_kb": statistics.median(payload) / 1024, "payload_max_kb": max(payload) / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a Markdown table row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--tracks", type=int, default=21)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--width", type=int, default=1600, help="widget raster width, px")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "trnprof-bench-notebook")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = prepare(args.workdir, args.events, args.tracks)

    import profiler

    t0 = time.perf_counter()
    trace = profiler.open(path)
    open_s = time.perf_counter() - t0
    html_s, page = timed(trace._repr_html_)
    timeline_s, fig = timed(trace.timeline)
    util_s, util = timed(trace.utilization_figure)
    w = bench_widget(trace, args.steps, args.width)
    result = {"events": args.events, "tracks": args.tracks, "open_s": open_s, "repr_html_ms": 1e3 * html_s,
              "repr_html_kb": len(page) / 1024, "timeline_s": timeline_s, "timeline_kb": figure_kb(fig),
              "utilization_s": util_s, "utilization_kb": figure_kb(util), **w, "peak_rss_mb": peak_rss_mb()}
    print(json.dumps(result, indent=1))
    print(f"| {args.events:.0e} | {1e3 * html_s:.0f} ms | {timeline_s:.2f} s / {figure_kb(fig):.0f} KB | "
          f"{util_s:.2f} s | {w['first_widget_s']:.2f} / {w['create_s']:.2f} s | "
          f"{w['p50_ms']:.0f} / {w['p95_ms']:.0f} ms | "
          f"{w['absorbed']} of {args.steps} | {w['payload_median_kb']:.0f} / {w['payload_max_kb']:.0f} KB | "
          f"{peak_rss_mb():.0f} MB |")
    trace.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
