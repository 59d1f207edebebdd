"""Serving memory of the timeline over a long session: RSS of one process answering zooms to random views.

    .venv/bin/python benchmarks/bench_dashboard_memory.py --db /work/bench_data/e100000000.duckdb --views 500

Each view is a random span (10^-6 of the trace to all of it, log-uniform) at a random place, asked as a relayout
of ``dashboard.timeline_logic.update_timeline`` exactly as the timeline page's callback asks it (the browser and
Dash add nothing per trace).  Prints this process's RSS (now and peak) every ``--every`` views.  What a session
keeps is the browser's state; what grows here is what the server process holds across requests whatever their
views (caches, the database engine's buffer pool).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def memory_mb() -> tuple[float, float]:
    """(RSS now, peak RSS) of this process, in MB."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(line.split()[1]) / 1024
    return values["VmRSS"], values["VmHWM"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="an ingested database")
    ap.add_argument("--views", type=int, default=500)
    ap.add_argument("--every", type=int, default=100, help="print memory every this many views")
    ap.add_argument("--width", type=int, default=1180, help="graph width in pixels")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()

    import profiler
    from dashboard import timeline_logic as tl

    trace = profiler.open(args.db)
    layout = tl.TraceLayout(trace)
    first = tl.update_timeline(trace, "t0", state=None, trigger="initial", width_px=args.width, layout=layout)
    state = first.state
    t0, t1 = layout.time_range
    rng = random.Random(args.seed)
    rss, peak = memory_mb()
    print(f"views 0: RSS {rss:.0f} MB, peak {peak:.0f} MB", flush=True)
    start = time.perf_counter()
    for i in range(1, args.views + 1):
        span = (t1 - t0) * 10 ** rng.uniform(-6, 0)
        a = rng.uniform(0, t1 - t0 - span) / 1e9
        update = tl.update_timeline(trace, "t0", state=state, trigger="relayout", width_px=args.width, layout=layout,
                                    relayout={"xaxis.range[0]": a, "xaxis.range[1]": a + span / 1e9})
        state = update.state if update is not None else state
        if i % args.every == 0 or i == args.views:
            rss, peak = memory_mb()
            print(f"views {i}: RSS {rss:.0f} MB, peak {peak:.0f} MB ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
