"""Ingest throughput (events/s, index included) and peak memory, on synthetic traces of several sizes.

Each size is synthesised once (``trnprof synth``), then ingested ``--repeat`` times in a fresh subprocess
(``trnprof ingest --force``) whose wall time and peak RSS (``ru_maxrss`` of the child) are recorded; the
floor is measured beside it: the time DuckDB alone needs to store the same Instruction and DmaPacket rows
(one ``CREATE TABLE AS`` per table from the Arrow stream, no sort, no index), in a fresh process too.

    .venv/bin/python benchmarks/bench_ingest.py --events 1000000 10000000 --workdir /work/bench_data
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRNPROF = str(Path(sys.executable).with_name("trnprof"))


def run_child(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process, which prints its own ru_maxrss (KiB) last."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return wall, int(done.stdout.split()[-1]) / 1024


FLOOR_SCRIPT = """
import sys, time, duckdb, pyarrow as pa, resource
from tracer import TraceReader
reader = TraceReader(sys.argv[1])
con = duckdb.connect(sys.argv[2])
con.execute("SET enable_progress_bar = false")
t0 = time.perf_counter()
for name in ("Instruction", "DmaPacket"):
    first = next(reader.batches(name))
    schema = pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                        for f in first.schema])
    stream = pa.RecordBatchReader.from_batches(schema, (b.cast(schema) for b in reader.batches(name)))
    con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM stream')
con.execute("CHECKPOINT")
print(time.perf_counter() - t0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure_floor(trace: Path, workdir: Path) -> float:
    """Seconds DuckDB alone takes to store the trace's Instruction and DmaPacket rows (no sort, no index)."""
    db = workdir / "floor.duckdb"
    db.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", FLOOR_SCRIPT, str(trace), str(db)], check=True,
                          capture_output=True, text=True)
    db.unlink(missing_ok=True)
    return float(done.stdout.split()[-2])


def measure(workdir: Path, events: int, repeat: int) -> dict[str, object]:
    trace = workdir / f"e{events}.trace"
    if not trace.exists():
        subprocess.run([TRNPROF, "synth", "--events", str(events), "-o", str(trace)], check=True)
    db = workdir / f"e{events}.bench.duckdb"
    walls, peaks = [], []
    for _ in range(repeat):
        # A fresh interpreter per run, so the peak RSS is this ingest's own.
        wall, peak = run_child([sys.executable, "-c", (
            "import resource, sys; from profiler.cli import main; rc = main(['ingest', sys.argv[1], '-o', "
            "sys.argv[2], '--force', '--quiet']); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); "
            "sys.exit(rc)"), str(trace), str(db)])
        walls.append(wall)
        peaks.append(peak)
    size = sum(f.stat().st_size for f in trace.iterdir())
    floor = measure_floor(trace, workdir)
    out = {"events": events, "trace_bytes": size, "db_bytes": db.stat().st_size,
           "wall_s": sorted(walls)[len(walls) // 2], "events_per_s": events / sorted(walls)[len(walls) // 2],
           "peak_rss_mib": max(peaks), "duckdb_store_only_s": floor}
    os.remove(db)
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
    print("| events | trace on disk | database | ingest wall (s) | events/s | peak RSS | DuckDB store only (s) | "
          "ingest / store only |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['events']:,} | {r['trace_bytes'] / 1e6:,.0f} MB | {r['db_bytes'] / 1e6:,.0f} MB | "
              f"{r['wall_s']:.1f} | {r['events_per_s'] / 1e6:.2f} M | {r['peak_rss_mib']:,.0f} MiB | "
              f"{r['duckdb_store_only_s']:.1f} | {r['wall_s'] / r['duckdb_store_only_s']:.1f}x |")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
