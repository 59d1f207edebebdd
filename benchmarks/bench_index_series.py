"""Series and counter windows (O(pixels)): ``Trace.series`` (DMA throughput, HFU) and ``Trace.counter_window``
latency over random windows at several trace sizes, beside the window query on the same windows.

    .venv/bin/python benchmarks/bench_index_series.py --db /work/bench_data/e1000000.duckdb \\
        /work/bench_data/e100000000.duckdb --counters 1000000 10000000 --workdir /work/bench_data

Interval databases come from ``benchmarks/bench_index.py`` (``trnprof synth`` + ``trnprof ingest``).  Counter
traces (``<workdir>/c<N>.trace``: 8 counters of one core, N samples in all, random walks sampled at irregular
intervals with bursts) are written here when missing and ingested on first open.  Each window is queried once
cold, then ``--repeat`` times warm; p50/p95 of the warm runs are reported with their process CPU time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from bench_index import random_windows

import profiler
from tracer import schema as ts
from tracer import write_trace

COUNTERS = 8


def counter_trace(workdir: Path, samples: int, seed: int = 7) -> Path:
    """``<workdir>/c<samples>.trace``: 8 random-walk counters with bursty sample spacing (written if missing)."""
    path = workdir / f"c{samples}.trace"
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    per = samples // COUNTERS
    names, times, values = [], [], []
    for c in range(COUNTERS):
        gaps = np.where(rng.random(per) < 0.1, rng.integers(1_000, 50_000, per), rng.integers(1, 200, per))
        times.append(np.cumsum(gaps).astype(np.int64))
        values.append(np.cumsum(rng.normal(0, 1e3, per)) + 1e6)
        names += [f"sbuf_usage_{c}"] * per
    write_trace(path, {"Counter": {ts.NAME: names, ts.TIMESTAMP: np.concatenate(times),
                                   ts.VALUE: np.concatenate(values), ts.PCORE_IDX: np.zeros(per * COUNTERS, np.int64),
                                   ts.UNIT: ["B"] * (per * COUNTERS)}}, metadata={"arch": "trn2"})
    return path


def _time(fn, windows: list[tuple[int, int]], repeat: int) -> dict[str, float]:
    wall, cpu = [], []
    for s, e in windows:
        fn(s, e)                                        # cold
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            fn(s, e)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    w, c = np.asarray(wall) * 1e3, np.asarray(cpu) * 1e3
    return {"p50_ms": float(np.percentile(w, 50)), "p95_ms": float(np.percentile(w, 95)),
            "cpu_p50_ms": float(np.percentile(c, 50)), "cpu_p95_ms": float(np.percentile(c, 95))}


def bench_db(db: Path, windows: int, width: int, repeat: int, seed: int) -> dict[str, object]:
    with profiler.open(db) as trace:
        tracks = trace.tracks().to_pylist()
        core0 = [t["track_id"] for t in tracks if t["core"] in (0, None) and t["kind"] in ("engine", "dma_queue")]
        events = sum(t["event_count"] for t in tracks if t["kind"] in ("engine", "dma_queue"))
        ws = random_windows(*trace.time_range, windows, seed)
        return {"db": str(db), "events": events, "width_px": width,
                "window": _time(lambda s, e: trace.window(s, e, width, core0), ws, repeat),
                "dma_throughput": _time(lambda s, e: trace.series("dma_throughput", s, e, width, core=0), ws, repeat),
                "hfu": _time(lambda s, e: trace.series("hfu", s, e, width, core=0), ws, repeat)}


def bench_counters(path: Path, windows: int, width: int, repeat: int, seed: int) -> dict[str, object]:
    with profiler.open(path) as trace:
        samples = sum(t["event_count"] for t in trace.tracks().to_pylist() if t["kind"] == "counter")
        ws = random_windows(*trace.time_range, windows, seed)
        return {"db": str(trace.db_path), "samples": samples, "width_px": width,
                "counter_window": _time(lambda s, e: trace.counter_window(s, e, width), ws, repeat)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="*", default=[], help="interval databases (from bench_index.py)")
    parser.add_argument("--counters", type=int, nargs="*", default=[], help="counter trace sizes (samples)")
    parser.add_argument("--workdir", default=str(Path(__file__).resolve().parents[1] / ".bench"))
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = [bench_db(Path(d), args.windows, args.width, args.repeat, args.seed) for d in args.db]
    results += [bench_counters(counter_trace(workdir, n), args.windows, args.width, args.repeat, args.seed)
                for n in args.counters]
    print("| trace | query | warm p50 / p95 (ms) | warm CPU p50 / p95 (ms) |")
    print("|---|---|---|---|")
    for r in results:
        size = f"{r['events']:,} events" if "events" in r else f"{r['samples']:,} samples"
        for q in ("window", "dma_throughput", "hfu", "counter_window"):
            if q in r:
                m = r[q]
                print(f"| {size} | {q} | {m['p50_ms']:.1f} / {m['p95_ms']:.1f} | "
                      f"{m['cpu_p50_ms']:.1f} / {m['cpu_p95_ms']:.1f} |")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
