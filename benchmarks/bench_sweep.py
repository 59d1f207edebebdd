"""A parameter sweep run one point at a time against several at once (``trnprof sweep -j``), side by side.

Each run is a fresh ``trnprof sweep`` process (so worker start-up is counted), alternating the variants; the
rows are checked to be the same whatever the number of jobs (the simulation is deterministic).

    .venv/bin/python benchmarks/bench_sweep.py                      # 12 matmul_rowload points at 2048^3
    .venv/bin/python benchmarks/bench_sweep.py --pairs 5 --jobs 1 2
"""

from __future__ import annotations

import argparse
import csv
import io
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["matmul_rowload", "-p", "M=2048", "-p", "N=2048", "-p", "K=2048", "-p", "block_m=1,2,4,8",
         "-p", "row_n=512,1024,2048"]


def run(jobs: int) -> tuple[float, list[tuple[str, ...]]]:
    """Wall seconds of one sweep with ``jobs`` workers, and its rows (values and simulated time)."""
    cmd = [str(ROOT / ".venv" / "bin" / "trnprof"), "sweep", *SWEEP, "-j", str(jobs), "-q", "--format", "csv"]
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t
    rows = [(r["block_m"], r["row_n"], r["simulated_us"], r["error"]) for r in csv.DictReader(io.StringIO(out))]
    return wall, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="rounds of every variant (default 3)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="variants (default 1 2)")
    args = parser.parse_args()
    times: dict[int, list[float]] = {j: [] for j in args.jobs}
    reference = None
    for _ in range(args.pairs):
        for jobs in args.jobs:
            wall, rows = run(jobs)
            if reference is None:
                reference = rows
            elif rows != reference:
                print(f"-j {jobs} gave other rows than -j {args.jobs[0]}", file=sys.stderr)
                return 1
            times[jobs].append(wall)
    base = statistics.median(times[args.jobs[0]])
    print(f"trnprof sweep {' '.join(SWEEP)}: {len(reference or [])} points, {args.pairs} rounds")
    for jobs, ts in times.items():
        med = statistics.median(ts)
        print(f"  -j {jobs}: median {med:.2f} s ({', '.join(f'{t:.2f}' for t in ts)}), {base / med:.2f}x "
              f"against -j {args.jobs[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
