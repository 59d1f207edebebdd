"""Ingest throughput (events/s, index included), CPU time and peak memory, side by side with DuckDB's own floor.

Each size is synthesised once (``trnprof synth``), then, ``--repeat`` times and alternating so both see the same
machine load:

* **ingest**: ``trnprof ingest --force`` in a fresh process (wall time, the child's CPU time and peak RSS from
  ``wait4``), the index included;
* **store only**: a fresh process that streams the same trace's Instruction and DmaPacket record batches into a
  DuckDB file with the same layout (16,384-row groups, dictionary columns stored as VARCHAR) by one
  ``CREATE TABLE AS`` per table, then checkpoints — no track ids, no ordering, no index: the floor of any ingest
  into DuckDB on this machine.

Medians are reported, and the ratios ingest / store-only in wall and in CPU time (the CPU ratio is what a busy
machine distorts least).

    .venv/bin/python benchmarks/bench_ingest.py --events 1000000 10000000 100000000 --workdir /work/bench_data \\
        --repeat 3
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
reader = TraceReader(sys.argv[1])
con = duckdb.connect()
con.execute(f"ATTACH '{sys.argv[2]}' AS b (ROW_GROUP_SIZE 16384)")
con.execute("USE b")
con.execute("SET enable_progress_bar = false")
for name in ("Instruction", "DmaPacket"):
    batches = reader.batches(name)
    first = next(batches)
    def chain(first=first, batches=batches):
        yield first
        yield from batches
    stream = pa.RecordBatchReader.from_batches(first.schema, chain())
    cols = ", ".join(f'CAST("{f.name}" AS VARCHAR) AS "{f.name}"' if pa.types.is_dictionary(f.type)
                     else f'"{f.name}"' for f in first.schema)
    con.execute(f'CREATE TABLE "{name}" AS SELECT {cols} FROM stream')
con.execute("CHECKPOINT")
"""


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


def measure(workdir: Path, events: int, repeat: int) -> dict[str, object]:
    trace = workdir / f"e{events}.trace"
    if not trace.exists():
        subprocess.run([TRNPROF, "synth", "--events", str(events), "-o", str(trace)], check=True)
    db = workdir / f"e{events}.bench.duckdb"
    floor_db = workdir / f"e{events}.floor.duckdb"
    ingest, floor = [], []
    for _ in range(repeat):
        ingest.append(run_child([TRNPROF, "ingest", str(trace), "-o", str(db), "--force", "--quiet"]))
        floor_db.unlink(missing_ok=True)
        floor.append(run_child([sys.executable, "-c", FLOOR_SCRIPT, str(trace), str(floor_db)]))
    floor_bytes = floor_db.stat().st_size
    floor_db.unlink(missing_ok=True)
    size = sum(f.stat().st_size for f in trace.iterdir())
    med = {k: statistics.median(x[i] for x in ingest) for i, k in enumerate(("wall", "cpu", "rss"))}
    fmed = {k: statistics.median(x[i] for x in floor) for i, k in enumerate(("wall", "cpu", "rss"))}
    out = {"events": events, "trace_bytes": size, "db_bytes": db.stat().st_size, "store_only_db_bytes": floor_bytes,
           "ingest_wall_s": med["wall"], "ingest_cpu_s": med["cpu"], "peak_rss_mib": max(x[2] for x in ingest),
           "events_per_s": events / med["wall"], "store_only_wall_s": fmed["wall"], "store_only_cpu_s": fmed["cpu"],
           "store_only_events_per_s": events / fmed["wall"], "runs": {"ingest": ingest, "store_only": floor},
           "load_average": os.getloadavg()}
    db.unlink()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--workdir", default=str(ROOT / ".bench"))
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = [measure(workdir, n, args.repeat) for n in args.events]
    print("| events | trace | database | ingest wall | events/s | ingest CPU | peak RSS | store-only wall | "
          "store-only events/s | store-only CPU | ingest / store-only: wall, CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['events']:,} | {r['trace_bytes'] / 1e6:,.0f} MB | {r['db_bytes'] / 1e6:,.0f} MB | "
              f"{r['ingest_wall_s']:.1f} s | {r['events_per_s'] / 1e6:.2f} M | {r['ingest_cpu_s']:.1f} s | "
              f"{r['peak_rss_mib']:,.0f} MiB | {r['store_only_wall_s']:.1f} s | "
              f"{r['store_only_events_per_s'] / 1e6:.2f} M | {r['store_only_cpu_s']:.1f} s | "
              f"{r['ingest_wall_s'] / r['store_only_wall_s']:.2f}x, {r['ingest_cpu_s'] / r['store_only_cpu_s']:.2f}x |")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
