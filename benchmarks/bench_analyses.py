"""Benchmark the analyses on simulator traces of the tiled-matmul progression (docs/analyses.md).

Records each kernel once (reused from --workdir when present), ingests it, then times every analysis on the whole
trace (median of --repeat runs, each on an already-open trace) and prints the bounds that decide the bottleneck.

    python benchmarks/bench_analyses.py --size 4096 --repeat 3 --workdir /tmp/trnprof-bench
    python benchmarks/bench_analyses.py --extra /tmp/syn7.duckdb   # also a bigger trace (trnprof synth + ingest)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import profiler
from profiler.analyses import (
    critical_path,
    dependency_waits,
    dma_efficiency,
    idle_gaps,
    performance_bounds,
    recommendations,
    time_by,
    wait_summary,
)
from profiler.analyses import schema as rs
from profiler.analyses.source_lines import source_files, source_listing
from tracer.sim import run_kernel

KERNELS = ("matmul_naive", "matmul_blocked", "matmul_rowload")
ANALYSES: dict[str, Callable[[Any], Any]] = {
    "bounds": performance_bounds,
    "waits (per wait)": dependency_waits,
    "waits (summary)": wait_summary,
    "critical path": critical_path,
    "idle gaps": idle_gaps,
    "operators": lambda t: time_by(t, "operator"),
    "opcodes": lambda t: time_by(t, "opcode"),
    "source files": source_files,
    "source listing (the busiest file)": source_listing,
    "dma efficiency": dma_efficiency,
    "recommendations": recommendations,
}


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    """Run the benchmark and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096, the reference size)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/trnprof-bench-analyses"))
    parser.add_argument("--extra", type=Path, action="append", default=[],
                        help="another trace or database to time too (e.g. a synthetic 10^7-event one)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    n = args.size
    results = {}
    cases = [(k, args.workdir / f"{k}-{n}.trace") for k in KERNELS] + [(p.name, p) for p in args.extra]
    for kernel, path in cases:
        if kernel in KERNELS and not (path / "Metadata.arrows").exists():
            run_kernel(kernel, {"M": n, "N": n, "K": n}, trace_path=path, overwrite=True)
        t0 = time.perf_counter()
        trace = profiler.open(path)
        opened = time.perf_counter() - t0
        counts = trace.sql("SELECT (SELECT count(*) FROM Instruction), (SELECT count(*) FROM DmaPacket)").fetchall()[0]
        b = performance_bounds(trace)
        row = {"open (ingest or cache)": opened}
        row.update({name: timed(lambda fn=fn, tr=trace: fn(tr), args.repeat) for name, fn in ANALYSES.items()})
        results[kernel] = (counts, b, row)
        trace.close()
    print(f"M = N = K = {n}\n")
    print("| kernel | instructions | DMA packets | bottleneck | total (us) | DMA active | Tensor active |"
          " ideal compute / total |")
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for kernel, (counts, b, _row) in results.items():
        a = b[rs.ENGINE_ACTIVE_NS]
        print(f"| {kernel} | {counts[0]:,} | {counts[1]:,} | {b[rs.BOTTLENECK]} | {b[rs.TOTAL_TIME_NS] / 1e3:,.1f} |"
              f" {a[rs.DMA] / 1e3:,.1f} | {a['Tensor'] / 1e3:,.1f} |"
              f" {b[rs.COMPUTE_BOUND_IDEAL_NS] / b[rs.TOTAL_TIME_NS]:.3f} |")
    print("\nmedian seconds per analysis (whole trace, open trace)\n")
    names = list(next(iter(results.values()))[2])
    print("| analysis | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{results[k][2][name]:.3f}" for k in results) + " |")


if __name__ == "__main__":
    main()
