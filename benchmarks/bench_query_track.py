"""Benchmark query tracks (``profiler.query_track``): a SQL result drawn as timeline rows, beside the database's
own window of a track of the same size.

On a device trace (default: the 10^8-event synthetic database of ``bench_index.py``, ``--db``), for queries keeping
every ``N``-th instruction of the trace (``--every``), one timeline row per engine:

- ``build``: :func:`query_tracks` -- the query through the sandbox, the result to numpy, sorting and coding each
  row (once per query; the dashboard caches it);
- ``window``: :meth:`QueryTracks.window_tables` of the whole trace, of 10%, 1%, 0.1% and 0.01% of it (from its
  middle) at 1,600 pixels, each the median of ``--repeat`` runs -- what every zoom adds to the timeline's request;
- ``db``: side by side, ``Trace.window`` of as many tracks of the trace over the same ranges, the level-of-detail
  index's answer (what the rest of the timeline costs at that zoom);
- ``counter``: the same rows as counters (a running total of busy time per engine, a ``value`` column), and
  :meth:`QueryTracks.counter_window` over the same ranges at a lane's 400 points.

    .venv/bin/python benchmarks/bench_query_track.py --db /tmp/trnprof-bench/synth100m.duckdb --every 20 100 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_notebook import timed

WIDTH = 1600
FRACTIONS = (1.0, 0.1, 0.01, 0.001, 0.0001)


def _median_ms(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in ms (:func:`bench_notebook.timed`)."""
    return timed(fn, repeat)[0] * 1000


def _ranges(lo: int, hi: int) -> list[tuple[float, int, int]]:
    """(fraction, start, end) of the whole trace and of each fraction of it around its middle."""
    mid = (lo + hi) // 2
    out = []
    for fraction in FRACTIONS:
        span = max(1, int((hi - lo) * fraction))
        out.append((fraction, *((lo, hi) if fraction == 1.0 else (mid - span // 2, mid + span // 2))))
    return out


def _built(trace, sql: str):
    """The query tracks of ``sql`` and the seconds building them took."""
    from profiler.query_track import query_tracks

    t0 = time.perf_counter()
    tracks = query_tracks(trace, sql)
    return tracks, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/trnprof-bench/synth100m.duckdb"))
    parser.add_argument("--every", type=int, nargs="+", default=[20, 100, 1000],
                        help="keep every N-th instruction (by id)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not args.db.exists():
        print(f"{args.db}: no such database; make it with benchmarks/bench_index.py (see BENCHMARKS.md)",
              file=sys.stderr)
        return 2

    import profiler

    with profiler.open(args.db) as trace:
        lo, hi = trace.time_range
        instructions = trace.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]
        print(f"{args.db}: {instructions:,} instructions, {(hi - lo) / 1e6:.1f} ms of trace")
        for every in args.every:
            sql = (f"SELECT 'Instruction' AS table_name, id, start_ts, end_ts, opcode AS name, engine AS track "
                   f"FROM Instruction WHERE id % {every} = 0")
            tracks, build = _built(trace, sql)
            ids = [t["track_id"] for t in trace.tracks().to_pylist() if t["kind"] == "engine"][:len(tracks.rows)]
            print(f"\nevery {every}th instruction: {tracks.n_intervals:,} intervals on {len(tracks.rows)} rows, "
                  f"built in {build:.2f} s")
            print(f"{'view':>8} {'query rows ms':>14} {'db window ms':>13} {'ratio':>6}")
            for fraction, a, b in _ranges(lo, hi):
                window = trace.window(a, b, WIDTH, tracks=ids)
                q = _median_ms(lambda a=a, b=b, w=window, t=tracks: t.window_tables(a, b, WIDTH, w.resolution_ns),
                               args.repeat)
                d = _median_ms(lambda a=a, b=b, i=ids: trace.window(a, b, WIDTH, tracks=i, attributes=False),
                               args.repeat)
                print(f"{fraction:>8.2%} {q:>14.1f} {d:>13.1f} {q / d:>6.2f}")
        for every in args.every:
            sql = (f"SELECT start_ts, sum(duration_ns) OVER (PARTITION BY engine ORDER BY start_ts, id) AS value, "
                   f"engine AS track FROM Instruction WHERE id % {every} = 0")
            tracks, build = _built(trace, sql)
            samples = sum(len(c.t) for c in tracks.counters)
            print(f"\ncounter of every {every}th instruction (running busy time per engine): {samples:,} samples on "
                  f"{len(tracks.counters)} lanes, built in {build:.2f} s")
            print(f"{'view':>8} {'counter_window ms':>18}")
            for fraction, a, b in _ranges(lo, hi):
                q = _median_ms(lambda a=a, b=b, t=tracks: t.counter_window(a, b, WIDTH // 4), args.repeat)
                print(f"{fraction:>8.2%} {q:>18.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
