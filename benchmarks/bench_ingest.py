"""Ingest throughput (events/s, index included), CPU time and peak memory, side by side with DuckDB's own floor.

Each size is synthesised once (``trnprof synth``), then, ``--repeat`` times and alternating so both see the same
machine load:

* **ingest**: ``trnprof ingest --force`` in a fresh process (wall time, the child's CPU time and peak RSS from
  ``wait4``), the index included;
* **store only** (``--floor``): a fresh process that streams the same trace's Instruction and DmaPacket record
  batches into a DuckDB file by one ``CREATE TABLE AS`` per table (appending Arrow), then checkpoints — no track
  ids, no ordering, no index.  Variants: ``same`` — the ingest's layout and settings (16,384-row groups,
  dictionary columns stored as VARCHAR); ``best`` — the same with ``preserve_insertion_order = false`` (DuckDB
  may compress on all threads); ``ints`` — only id, start_ts, end_ts, duration_ns, with ``best``'s setting.
  ``same`` is the floor of an ingest that keeps every field of the trace; ``ints`` bounds any DuckDB store.

Medians are reported, and the ratios ingest / store-only in wall and in CPU time (the CPU ratio is what a busy
machine distorts least).

    .venv/bin/python benchmarks/bench_ingest.py --events 1000000 10000000 --workdir /work/bench_data --repeat 3
    .venv/bin/python benchmarks/bench_ingest.py --events 100000000 --workdir /work/bench_data --floor same ints
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRNPROF = str(Path(sys.executable).with_name("trnprof"))

FLOOR_SCRIPT = """
import sys, duckdb, pyarrow as pa
from tracer import TraceReader
trace, db, variant = sys.argv[1:4]
reader = TraceReader(trace)
con = duckdb.connect()
con.execute(f"ATTACH '{db}' AS b (ROW_GROUP_SIZE 16384)")
con.execute("USE b")
con.execute("SET enable_progress_bar = false")
if variant != "same":
    con.execute("SET preserve_insertion_order = false")
for name in ("Instruction", "DmaPacket"):
    batches = reader.batches(name)
    first = next(batches)
    def chain(first=first, batches=batches):
        yield first
        yield from batches
    stream = pa.RecordBatchReader.from_batches(first.schema, chain())
    fields = [f for f in first.schema if variant != "ints" or f.name in ("id", "start_ts", "end_ts", "duration_ns")]
    cols = ", ".join(f'CAST("{f.name}" AS VARCHAR) AS "{f.name}"' if pa.types.is_dictionary(f.type)
                     else f'"{f.name}"' for f in fields)
    con.execute(f'CREATE TABLE "{name}" AS SELECT {cols} FROM stream')
con.execute("CHECKPOINT")
"""

#: Store-only variants: the ingest's layout and settings; the same with DuckDB free to store in parallel
#: (``preserve_insertion_order = false``); and only four int64 columns per table (id, start, end, duration: what
#: the index needs), in parallel — a floor below any ingest that keeps the trace's fields.
FLOOR_VARIANTS = ("same", "best", "ints")


def run_child(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.strip()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(workdir: Path, events: int, repeat: int, variants: tuple[str, ...]) -> dict[str, object]:
    trace = workdir / f"e{events}.trace"
    if not trace.exists():
        subprocess.run([TRNPROF, "synth", "--events", str(events), "-o", str(trace)], check=True)
    db = workdir / f"e{events}.bench.duckdb"
    floor_db = workdir / f"e{events}.floor.duckdb"
    ingest: list[tuple[float, float, float]] = []
    floor: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
    floor_bytes: dict[str, int] = {}
    for _ in range(repeat):
        ingest.append(run_child([TRNPROF, "ingest", str(trace), "-o", str(db), "--force", "--quiet"]))
        for v in variants:
            floor_db.unlink(missing_ok=True)
            floor[v].append(run_child([sys.executable, "-c", FLOOR_SCRIPT, str(trace), str(floor_db), v]))
            floor_bytes[v] = floor_db.stat().st_size
    floor_db.unlink(missing_ok=True)
    size = sum(f.stat().st_size for f in trace.iterdir())

    def median(runs: list[tuple[float, float, float]], i: int) -> float:
        return statistics.median(x[i] for x in runs)

    out = {"events": events, "trace_bytes": size, "db_bytes": db.stat().st_size,
           "ingest_wall_s": median(ingest, 0), "ingest_cpu_s": median(ingest, 1),
           "peak_rss_mib": max(x[2] for x in ingest), "events_per_s": events / median(ingest, 0),
           "store_only": {v: {"wall_s": median(r, 0), "cpu_s": median(r, 1), "events_per_s": events / median(r, 0),
                              "peak_rss_mib": max(x[2] for x in r), "db_bytes": floor_bytes[v]}
                          for v, r in floor.items()},
           "runs": {"ingest": ingest, **{f"store_only_{v}": r for v, r in floor.items()}},
           "load_average": os.getloadavg()}
    db.unlink()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--workdir", default=str(ROOT / ".bench"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--floor", nargs="+", choices=FLOOR_VARIANTS, default=list(FLOOR_VARIANTS),
                        help="store-only variants to run beside the ingest")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    for n in args.events:
        results.append(measure(workdir, n, args.repeat, tuple(args.floor)))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)     # partial results of long runs
    print("| events | trace | database | ingest wall | events/s | ingest CPU | peak RSS | load avg (1 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['events']:,} | {r['trace_bytes'] / 1e6:,.0f} MB | {r['db_bytes'] / 1e6:,.0f} MB | "
              f"{r['ingest_wall_s']:.1f} s | {r['events_per_s'] / 1e6:.2f} M | {r['ingest_cpu_s']:.1f} s | "
              f"{r['peak_rss_mib']:,.0f} MiB | {r['load_average'][0]:.1f} |")
    print()
    print("| events | store-only variant | wall | events/s | CPU | database | ingest / store-only: wall, CPU |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for v, f in r["store_only"].items():
            print(f"| {r['events']:,} | {v} | {f['wall_s']:.1f} s | {f['events_per_s'] / 1e6:.2f} M | "
                  f"{f['cpu_s']:.1f} s | {f['db_bytes'] / 1e6:,.0f} MB | "
                  f"{r['ingest_wall_s'] / f['wall_s']:.2f}x, {r['ingest_cpu_s'] / f['cpu_s']:.2f}x |")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
