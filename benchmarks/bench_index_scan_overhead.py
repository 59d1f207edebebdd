"""DuckDB's fixed cost per scanned table as the database grows: tiny queries that return a handful of rows.

For each database: a 3 µs ``start_ts`` range on ``DmaPacket`` (zone maps prune all but a few row groups), a
100-row ``rowid`` range on ``DmaPacket``, one level of the index for the DMA queues over 1,600 buckets, and
``SELECT 1``.  Each is run once untimed, then ``--repeat`` times; medians of wall and process CPU time are printed
with the table's row-group count.  If the cost of pruning were logarithmic the first three would not grow with
the trace; they grow with its number of row groups.

    .venv/bin/python benchmarks/bench_index_scan_overhead.py /work/bench_data/e100000000.duckdb \\
        /work/bench_data/e9.duckdb
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import duckdb


def _time(con: duckdb.DuckDBPyConnection, sql: str, repeat: int) -> tuple[float, float]:
    con.sql(sql).fetchall()
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        con.sql(sql).fetchall()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("db", nargs="+")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    print("| database | query | row groups of its table | wall (ms) | CPU (ms) |")
    print("|---|---|---|---|---|")
    for db in args.db:
        con = duckdb.connect(db, read_only=True)
        lo, hi = con.sql('SELECT min(start_ts), max(end_ts) FROM "track"').fetchall()[0]
        mid = (lo + hi) // 2
        dma = con.sql("SELECT min(track_id), max(track_id), max(lod_min_level) FROM track "
                      "WHERE kind = 'dma_queue'").fetchall()[0]
        groups = {t: con.sql(f"SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('{t}')").fetchall()[0][0]
                  for t in ("DmaPacket", "lod")}
        bucket = mid >> dma[2]
        queries = [
            ("DmaPacket", "3 µs start_ts range",
             f"SELECT count(*) FROM DmaPacket WHERE start_ts >= {mid} AND start_ts < {mid + 3000}"),
            ("DmaPacket", "100-row rowid range",
             "SELECT count(*) FROM DmaPacket WHERE rowid >= 1000000 AND rowid < 1000100"),
            ("lod", "one level, DMA queues, 1,600 buckets",
             f"SELECT count(*) FROM lod WHERE level = {dma[2]} AND track_id BETWEEN {dma[0]} AND {dma[1]} "
             f"AND bucket >= {bucket} AND bucket < {bucket + 1600}"),
            (None, "SELECT 1", "SELECT 1"),
        ]
        for table, label, sql in queries:
            wall, cpu = _time(con, sql, args.repeat)
            print(f"| {os.path.basename(db)} | {label} | {groups.get(table, '') if table else ''} | "
                  f"{wall:.1f} | {cpu:.1f} |")
        con.close()


if __name__ == "__main__":
    main()
