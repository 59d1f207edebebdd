"""Benchmark the dependency chain to one event (``profiler.analyses.chain_to``, the dashboard's "What led here?").

On a long simulator recording (the memory-map benchmark's matmul_rowload, 1.15 M instructions and 11 M DMA packets,
recorded once into ``--workdir``), each in a fresh child process so its peak memory is its own:

- ``graph``: the whole trace's dependency graph (what the dashboard builds once per trace below
  ``dashboard.analysis_views.MAX_CHAIN_EVENTS`` events), then the chain to the last instruction and to one in the
  middle walked on it (each click);
- ``bounded``: the chain to the last instruction over the latest ``MAX_CHAIN_EVENTS`` events only (what the
  dashboard does per click on a larger trace), graph included.

    .venv/bin/python benchmarks/bench_chain.py
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SIZE = {"M": 65536, "N": 16384, "K": 4096}


def _child(path: str, mode: str) -> dict[str, float]:
    import profiler
    from dashboard.analysis_views import MAX_CHAIN_EVENTS, ChainGraphs
    from profiler.analyses import chain_to
    from profiler.analyses.event_graph import build_graph
    from profiler.analyses.inputs import resolve_scope

    out: dict[str, float] = {}
    with profiler.open(path) as trace:
        ids = [r[0] for r in trace.sql("SELECT id FROM Instruction ORDER BY start_ts").fetchall()]
        last, middle = ids[-1], ids[len(ids) // 2]
        t0 = time.perf_counter()
        if mode == "graph":
            graph = build_graph(trace, resolve_scope(trace))
            out["graph_s"] = time.perf_counter() - t0
            out["nodes"], out["edges"] = graph.num_nodes, len(graph.src)
            for name, event in (("last", last), ("middle", middle)):
                t0 = time.perf_counter()
                out[f"{name}_steps"] = chain_to(trace, "Instruction", event, graph=graph).num_rows
                out[f"{name}_s"] = time.perf_counter() - t0
        else:
            chain, back = ChainGraphs(MAX_CHAIN_EVENTS).chain("t0", trace, "Instruction", last)
            out["bounded_s"] = time.perf_counter() - t0
            out["bounded_steps"] = chain.num_rows
            out["back_ns"] = back if back is not None else -1
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/trnprof-bench"))
    parser.add_argument("--child", nargs=2, metavar=("TRACE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    from tracer.sim import run_kernel

    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / "memory-matmul_rowload.trace"
    if not path.exists():
        run_kernel("matmul_rowload", SIZE, arch="trn2", trace_path=path)
    for mode in ("graph", "bounded"):
        done = subprocess.run([sys.executable, __file__, "--child", str(path), mode], capture_output=True, text=True,
                              check=True)
        print(mode, json.loads(done.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
