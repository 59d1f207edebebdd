"""Window-query latency of the interval index vs the naive SQL a user would write, at several trace sizes.

For each database: random windows over the tracks of core 0 (5 engines + 16 DMA queues) at 1,600 px, spans
log-uniform from the whole trace down to ~2 us.  Each window is queried once cold (first touch of its data) and
then ``--repeat`` times warm; p50/p95 of both are reported, and for the warm runs also the process CPU time
(all threads), which stays meaningful when the shared machine is busy.  In the same run and on the same windows,
the naive per-pixel aggregation (GROUP BY pixel over the rows overlapping the window, per table) is timed.

    .venv/bin/python benchmarks/bench_index.py --events 1000000 10000000 100000000 --workdir /work/bench_data
    .venv/bin/python benchmarks/bench_index.py --db /work/bench_data/e8.duckdb

Databases are made with ``trnprof synth`` + ``trnprof ingest`` when missing (``<workdir>/e<N>.duckdb``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import profiler

ROOT = Path(__file__).resolve().parents[1]
TRNPROF = str(Path(sys.executable).with_name("trnprof"))


def ensure_db(workdir: Path, events: int) -> Path:
    """``<workdir>/e<events>.duckdb``, synthesised and ingested if missing."""
    db = workdir / f"e{events}.duckdb"
    if db.exists():
        return db
    trace = workdir / f"e{events}.trace"
    if not trace.exists():
        subprocess.run([TRNPROF, "synth", "--events", str(events), "-o", str(trace)], check=True)
    subprocess.run([TRNPROF, "ingest", str(trace), "-o", str(db), "--quiet"], check=True)
    return db


def naive_query(trace: profiler.Trace, tracks: dict[str, list[int]], start: int, end: int, width: int, *,
                timeout_s: float | None = None) -> int:
    """The per-pixel aggregation a user would write (one GROUP BY per table); returns the rows it produced."""
    rows = 0
    for table, ids in tracks.items():
        sql = (f'SELECT track_id, (greatest(start_ts, {start}) - {start}) * {width} // {end - start} AS px, '
               f'count(*) AS n, sum(least(end_ts, {end}) - greatest(start_ts, {start})) AS busy '
               f'FROM "{table}" WHERE track_id IN ({", ".join(map(str, ids))}) '
               f'AND start_ts < {end} AND end_ts > {start} GROUP BY ALL')
        rows += trace.sql(sql, timeout_s=timeout_s).to_arrow_table().num_rows
    return rows


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1e3, q))


def random_windows(lo: int, hi: int, n: int, seed: int) -> list[tuple[int, int]]:
    """``n`` windows over ``[lo, hi)``: spans log-uniform from the whole range down to 2 us, starts uniform (the
    windows every index benchmark times, so their figures compare)."""
    rng = np.random.default_rng(seed)
    spans = np.exp(rng.uniform(np.log(2_000), np.log(max(hi - lo, 2_001)), n)).astype(np.int64)
    starts = lo + (rng.uniform(0, 1, n) * np.maximum(1, hi - lo - spans)).astype(np.int64)
    return [(int(s), int(s + w)) for s, w in zip(starts, spans, strict=True)]


def bench(db: Path, windows: int, width: int, repeat: int, seed: int, *,
          naive_timeout: float | None = None) -> dict[str, object]:
    with profiler.open(db) as trace:
        tracks = trace.tracks().to_pylist()
        core0 = [t for t in tracks if t["core"] in (0, None) and t["kind"] in ("engine", "dma_queue")]
        ids = [t["track_id"] for t in core0]
        by_table: dict[str, list[int]] = {}
        for t in core0:
            by_table.setdefault(t["table_name"], []).append(t["track_id"])
        events = sum(t["event_count"] for t in tracks if t["kind"] in ("engine", "dma_queue"))
        lo, hi = trace.time_range
        cold, warm, warm_cpu, naive = [], [], [], []
        timeouts = 0
        shown = {"events": 0, "buckets": 0}
        for s, e in random_windows(lo, hi, windows, seed):
            t0 = time.perf_counter()
            w = trace.window(s, e, width, ids)
            cold.append(time.perf_counter() - t0)
            for _ in range(repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                w = trace.window(s, e, width, ids)
                warm.append(time.perf_counter() - t0)
                warm_cpu.append(time.process_time() - c0)
            shown["events"] += w.events.num_rows
            shown["buckets"] += w.buckets.num_rows
            t0 = time.perf_counter()
            try:
                naive_query(trace, by_table, s, e, width, timeout_s=naive_timeout)
                naive.append(time.perf_counter() - t0)
            except profiler.QueryError:          # timed out: counts as the timeout (a lower bound)
                naive.append(float(naive_timeout or 0))
                timeouts += 1
    return {
        "db": str(db), "events": events, "tracks": len(ids), "windows": windows, "width_px": width,
        "cold_p50_ms": percentile(cold, 50), "cold_p95_ms": percentile(cold, 95),
        "warm_p50_ms": percentile(warm, 50), "warm_p95_ms": percentile(warm, 95),
        "warm_cpu_p50_ms": percentile(warm_cpu, 50), "warm_cpu_p95_ms": percentile(warm_cpu, 95),
        "naive_p50_ms": percentile(naive, 50), "naive_p95_ms": percentile(naive, 95),
        "naive_timeouts": timeouts, "mean_events_per_window": shown["events"] / windows,
        "mean_buckets_per_window": shown["buckets"] / windows, "load_average": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="*", default=[], help="trace sizes to make/measure")
    parser.add_argument("--db", nargs="*", default=[], help="existing databases to measure")
    parser.add_argument("--workdir", default=str(ROOT / ".bench"), help="where synthetic traces/databases live")
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--repeat", type=int, default=3, help="warm repetitions per window")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--naive-timeout", type=float, default=None,
                        help="stop a naive query after this many seconds (counted as the timeout, a lower bound)")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dbs = [Path(d) for d in args.db] + [ensure_db(workdir, n) for n in args.events]
    results = [bench(db, args.windows, args.width, args.repeat, args.seed, naive_timeout=args.naive_timeout)
               for db in dbs]
    print("| events | cold p50 / p95 (ms) | warm p50 / p95 (ms) | warm CPU p50 / p95 (ms) | "
          "naive GROUP BY p50 / p95 (ms) | naive / index p95 | load avg (1 min) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['events']:,} | {r['cold_p50_ms']:.1f} / {r['cold_p95_ms']:.1f} | "
              f"{r['warm_p50_ms']:.1f} / {r['warm_p95_ms']:.1f} | "
              f"{r['warm_cpu_p50_ms']:.1f} / {r['warm_cpu_p95_ms']:.1f} | "
              f"{r['naive_p50_ms']:.1f} / {r['naive_p95_ms']:.1f} | {r['naive_p95_ms'] / r['warm_p95_ms']:.1f}x | "
              f"{r['load_average'][0]:.1f} |")
    if len(results) > 1:
        base = results[0]
        for r in results[1:]:
            print(f"p95 ratio {r['events']:,} / {base['events']:,}: warm {r['warm_p95_ms'] / base['warm_p95_ms']:.2f}, "
                  f"warm CPU {r['warm_cpu_p95_ms'] / base['warm_cpu_p95_ms']:.2f}, "
                  f"cold {r['cold_p95_ms'] / base['cold_p95_ms']:.2f}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
