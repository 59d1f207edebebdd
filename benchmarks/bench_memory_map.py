"""Benchmark the memory map (profiler.analyses.memory_map) on a long simulator recording.

Records matmul_rowload (1.15 M instructions at the default size; reused from --workdir when present), ingests it,
then times ``memory_map`` for SBUF and PSUM over windows of 100%, 10%, 1% and 0.1% of the trace at the dashboard's
raster size (900 x 256), median of --repeat runs on an already-open trace, with the part spent reading the
accesses (the SQL) apart.

    .venv/bin/python benchmarks/bench_memory_map.py --workdir /tmp/trnprof-bench --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import profiler
from profiler.analyses import memory_map as mmap
from tracer.sim import run_kernel

SIZE = {"M": 65536, "N": 16384, "K": 4096}
FRACTIONS = (1.0, 0.1, 0.01, 0.001)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/trnprof-bench"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / "memory-matmul_rowload.trace"
    if not path.exists():
        run_kernel("matmul_rowload", SIZE, arch="trn2", trace_path=path)
    t = time.perf_counter()
    with profiler.open(path) as trace:
        print(f"{path}: opened (ingested if new) in {time.perf_counter() - t:.1f} s; "
              f"{trace.overview()['events']['Instruction']:,} instructions")
        t0, t1 = trace.time_range
        print(f"{'memory':<6} {'window':>7} {'accesses':>10} {'read them':>10} {'map':>8}  peak live")
        for frac in FRACTIONS:
            end = t0 + max(1, int((t1 - t0) * frac))
            for mem in mmap.MEMORIES:
                read, total, mm = [], [], None
                for _ in range(args.repeat):
                    a = time.perf_counter()
                    mmap.accesses(trace, mem, t0, end)
                    b = time.perf_counter()
                    mm = mmap.memory_map(trace, mem, t0, end, width=900, height=256)
                    c = time.perf_counter()
                    read.append(b - a)
                    total.append(c - b)
                assert mm is not None
                print(f"{mem:<6} {frac:>7.1%} {mm.accesses:>10,} {statistics.median(read):>9.2f}s "
                      f"{statistics.median(total):>7.2f}s  {mm.peak_live_bytes / 1024:,.1f} KiB"
                      f"{'' if mm.whole_trace else ' (context: the window and its neighbours)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
