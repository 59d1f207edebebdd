"""Window latency side by side: the window planner of a git revision against the working tree's, on one database.

The revision's modules named with ``--modules`` (default: the raw-row and window-planner modules) are loaded from
``git show REV:path`` (written to a temporary folder) under private names, with their imports of each other
pointed at those copies; everything else (DuckDB connection, index) is shared.  The same random windows as
``bench_index.py`` (core 0's tracks at 1,600 px, spans log-uniform from the whole trace down to 2 µs) are then
queried through ``Trace.window`` by both versions in one process, interleaved window by window and in alternating
order, so both see the same machine load.  Results of the two versions are compared (same buckets, same events)
on every window.

    .venv/bin/python benchmarks/bench_index_code_ab.py /work/bench_data/e100000000.duckdb --rev 90debfc \
        --modules profiler.db.bucket_kernel profiler.db.lod profiler.db.raw_rows profiler.db.window_query
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
from bench_index import random_windows

import profiler
from profiler import trace as trace_module

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODULES = ("profiler.db.raw_rows", "profiler.db.window_query")


def load_revision(rev: str, modules: list[str]) -> dict[str, types.ModuleType]:
    """The named modules as they are at ``rev``, importing each other's revision copies (in the order given)."""
    loaded: dict[str, types.ModuleType] = {}
    folder = Path(tempfile.mkdtemp(prefix="trnprof-rev-"))
    for name in modules:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{name.replace('.', '/')}.py"],
                                check=True, capture_output=True, text=True).stdout
        for earlier, module in loaded.items():
            package, _, leaf = earlier.rpartition(".")
            source = source.replace(f"from {earlier} import", f"from {module.__name__} import")
            source = source.replace(f"from {package} import {leaf}\n", f"import {module.__name__} as {leaf}\n")
        alias = f"_rev_{rev}_{name.replace('.', '_')}"
        path = folder / f"{alias}.py"       # a real file: numba's on-disk cache needs one to compile the kernel
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(alias, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        spec.loader.exec_module(module)
        loaded[name] = module
    return loaded


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("db", help="a trnprof database")
    parser.add_argument("--rev", required=True, help="git revision of the 'before' code")
    parser.add_argument("--modules", nargs="+", default=list(DEFAULT_MODULES),
                        help="modules taken from the revision (dependencies first; the last defines query_window)")
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    before = load_revision(args.rev, args.modules)[args.modules[-1]].query_window
    after = trace_module.query_window
    variants = {f"{args.rev} (before)": before, "working tree (after)": after}
    trace = profiler.open(args.db)
    ids = [t["track_id"] for t in trace.tracks().to_pylist()
           if t["core"] in (0, None) and t["kind"] in ("engine", "dma_queue")]
    lo, hi = trace.time_range
    names = list(variants)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    mismatches = 0
    try:
        for i, (s, e) in enumerate(random_windows(lo, hi, args.windows, args.seed)):
            results = {}
            for name in names:                              # first touch: not timed; results compared
                trace_module.query_window = variants[name]
                results[name] = trace.window(s, e, args.width, ids)
            a, b = (results[n] for n in names)
            if not (a.buckets.equals(b.buckets) and a.events.equals(b.events)):
                mismatches += 1
            for rep in range(args.repeat):
                for name in names if (rep + i) % 2 == 0 else names[::-1]:
                    trace_module.query_window = variants[name]
                    t0, c0 = time.perf_counter(), time.process_time()
                    trace.window(s, e, args.width, ids)
                    wall[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
    finally:
        trace_module.query_window = after
    print(f"{args.db}: {args.windows} windows x {args.repeat} warm repeats, interleaved; "
          f"windows whose results differ: {mismatches}")
    print("| code | warm p50 / p95 (ms) | warm CPU p50 / p95 (ms) |")
    print("|---|---|---|")
    for name in names:
        print(f"| {name} | {_p(wall[name], 50):.1f} / {_p(wall[name], 95):.1f} | "
              f"{_p(cpu[name], 50):.1f} / {_p(cpu[name], 95):.1f} |")
    ratio = _p(wall[names[1]], 95) / _p(wall[names[0]], 95)
    print(f"after / before, warm wall p95: {ratio:.2f}")


if __name__ == "__main__":
    main()
