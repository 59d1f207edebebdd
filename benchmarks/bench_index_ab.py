"""Window latency side by side: two databases of the same trace x the vectorised and the compiled bucketing.

The same random windows as ``bench_index.py`` (core 0's tracks at 1,600 px, spans log-uniform from the whole trace
down to 2 µs) are queried in one process by every variant, interleaved window by window and in alternating order,
so all variants see the same machine load.  The bucketing is switched per call with ``TRNPROF_BUCKET_KERNEL``
(``0``: vectorised; unset: the compiled kernel for windows with at least 4,096 raw events to bucket).

    .venv/bin/python benchmarks/bench_index_ab.py /work/bench_data/r4/e100000000.pre-r4.duckdb \\
        /work/bench_data/e100000000.duckdb --names "format 2.0" "round 4 (aligned)"
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from bench_index import random_windows

import profiler
from profiler.db import bucket_kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("db", nargs=2, help="two databases of the same trace")
    parser.add_argument("--names", nargs=2, default=None, help="labels of the two databases")
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    names = args.names or args.db
    traces = {name: profiler.open(db) for name, db in zip(names, args.db, strict=True)}
    first = traces[names[0]]
    ids = [t["track_id"] for t in first.tracks().to_pylist()
           if t["core"] in (0, None) and t["kind"] in ("engine", "dma_queue")]
    lo, hi = first.time_range
    variants = [(name, switch) for name in names for switch in ("0", "")]
    wall: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    cpu: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    saved = os.environ.get(bucket_kernel.ENV_SWITCH)
    try:
        for s, e in random_windows(lo, hi, args.windows, args.seed):
            for trace in traces.values():
                trace.window(s, e, args.width, ids)          # first touch: not timed
            for rep in range(args.repeat):
                for name, switch in variants if rep % 2 == 0 else variants[::-1]:
                    os.environ[bucket_kernel.ENV_SWITCH] = switch
                    t0, c0 = time.perf_counter(), time.process_time()
                    traces[name].window(s, e, args.width, ids)
                    wall[(name, switch)].append(time.perf_counter() - t0)
                    cpu[(name, switch)].append(time.process_time() - c0)
    finally:
        if saved is None:
            os.environ.pop(bucket_kernel.ENV_SWITCH, None)
        else:
            os.environ[bucket_kernel.ENV_SWITCH] = saved
        for trace in traces.values():
            trace.close()
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    print("| database | bucketing | warm p50 / p95 (ms) | warm CPU p50 / p95 (ms) |")
    print("|---|---|---|---|")
    for name, switch in variants:
        w, c = np.asarray(wall[(name, switch)]) * 1e3, np.asarray(cpu[(name, switch)]) * 1e3
        print(f"| {name} | {'vectorised' if switch == '0' else 'compiled kernel'} | "
              f"{np.percentile(w, 50):.1f} / {np.percentile(w, 95):.1f} | "
              f"{np.percentile(c, 50):.1f} / {np.percentile(c, 95):.1f} |")


if __name__ == "__main__":
    main()
