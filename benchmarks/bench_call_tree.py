"""Benchmark the call tree (``profiler.analyses.call_tree``) on a large PyTorch-profiler-shaped trace.

The trace is ``bench_import.py``'s synthetic Kineto trace (nested CPU operators, ``cudaLaunchKernel`` calls, GPU
kernels on two streams), written once to ``/tmp/trnprof-bench`` and ingested once (the database is cached beside
it).  Timed, each the median of ``--repeat`` runs in this process on the opened trace:

- ``tree``: :func:`call_tree` of the whole trace, of 10% and of 1% of it (from its middle);
- ``top`` and ``folded`` of the whole tree; ``figure``: :func:`call_tree_figure` of it;
- ``kernels``: :func:`profiler.analyses.kernel_tree.kernel_tree` (GPU time under the launching stacks), whole
  and 10%;
- ``sql``: side by side, what a user would write instead: one DuckDB recursive query building every span's stack
  of names and summing count and time per stack (no self time, no windows) -- the same totals, as a baseline.

``--instructions TRACE`` times :func:`profiler.analyses.instruction_tree.instruction_tree` on a device trace
instead (whole, 10%, 1%), beside the one ``GROUP BY`` query a user would write for its leaves.

    .venv/bin/python benchmarks/bench_call_tree.py --events 1000000
    .venv/bin/python benchmarks/bench_call_tree.py --instructions /tmp/trnprof-bench/memory-matmul_rowload.trace
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_import import generate
from bench_notebook import timed

SQL_BASELINE = """
WITH RECURSIVE stacks AS (
    SELECT id, name AS stack FROM slice WHERE parent_id IS NULL
    UNION ALL
    SELECT s.id, p.stack || ';' || s.name FROM slice s JOIN stacks p ON s.parent_id = p.id
)
SELECT stack, count(*) AS n, sum(s.end_ts - s.start_ts) AS total FROM stacks JOIN slice s USING (id) GROUP BY stack
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the synthetic trace")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/trnprof-bench"))
    parser.add_argument("--instructions", type=Path, metavar="TRACE", help="time the instruction tree of TRACE")
    args = parser.parse_args()
    if args.instructions is not None:
        instructions(args.instructions, args.repeat)
        return

    import profiler
    from profiler.analyses.call_tree import call_tree
    from profiler.analyses.call_tree_views import folded, top_frames
    from profiler.analyses.kernel_tree import kernel_tree
    from profiler.figures.call_tree import call_tree_figure

    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"calltree-{args.events}.json"
    if not path.exists():
        generate(path, args.events)
    t0 = time.perf_counter()
    with profiler.open(path) as trace:
        opened = time.perf_counter() - t0
        spans = trace.sql("SELECT count(*) FROM slice").fetchall()[0][0]
        lo, hi = trace.time_range
        mid = (lo + hi) // 2
        result: dict[str, object] = {"events": args.events, "spans": spans, "open_s": round(opened, 3),
                                     "load_1min": round(os.getloadavg()[0], 2)}
        whole_s, tree = timed(lambda: call_tree(trace), args.repeat)
        result["tree_whole_s"] = round(whole_s, 3)
        result["frames"] = tree.table.num_rows
        for share in (0.1, 0.01):
            half = int((hi - lo) * share / 2)
            s, part = timed(lambda h=half: call_tree(trace, mid - h, mid + h), args.repeat)
            result[f"tree_{share:.0%}_s"] = round(s, 3)
            result[f"spans_{share:.0%}"] = part.spans
        result["top_s"] = round(timed(lambda: top_frames(tree), args.repeat)[0], 3)
        result["folded_s"] = round(timed(lambda: folded(tree), args.repeat)[0], 3)
        result["figure_s"] = round(timed(lambda: call_tree_figure(tree), args.repeat)[0], 3)
        k_s, kernels = timed(lambda: kernel_tree(trace), args.repeat)
        result.update(kernels_whole_s=round(k_s, 3), kernels=kernels.spans, kernel_frames=kernels.table.num_rows)
        half = int((hi - lo) * 0.05)
        result["kernels_10%_s"] = round(timed(lambda: kernel_tree(trace, mid - half, mid + half),
                                                  args.repeat)[0], 3)
        sql_s, rows = timed(lambda: trace.sql(SQL_BASELINE, timeout_s=600).fetchall(), args.repeat)
        result["sql_recursive_s"] = round(sql_s, 3)
        result["sql_stacks"] = len(rows)
        result["sql_over_tree"] = round(sql_s / whole_s, 2)
    print(json.dumps(result))


def instructions(path: Path, repeat: int) -> None:
    """The instruction tree of ``path``: whole trace, 10% and 1% from its middle, and a GROUP BY of its leaves."""
    import profiler
    from profiler.analyses.instruction_tree import instruction_tree

    with profiler.open(path) as trace:
        n = trace.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]
        lo, hi = trace.time_range
        mid = (lo + hi) // 2
        result: dict[str, object] = {"trace": str(path), "instructions": n, "load_1min": round(os.getloadavg()[0], 2)}
        whole_s, tree = timed(lambda: instruction_tree(trace), repeat)
        result.update(tree_whole_s=round(whole_s, 3), frames=tree.table.num_rows)
        for share in (0.1, 0.01):
            half = int((hi - lo) * share / 2)
            s, _ = timed(lambda h=half: instruction_tree(trace, mid - h, mid + h), repeat)
            result[f"tree_{share:.0%}_s"] = round(s, 3)
        sql_s, _ = timed(lambda: trace.sql(
            "SELECT pcore_idx, layer, hlo_name, nki_source_location, engine, opcode, count(*), "
            "sum(end_ts - start_ts) FROM Instruction GROUP BY ALL").fetchall(), repeat)
        result.update(sql_group_by_s=round(sql_s, 3), sql_over_tree=round(sql_s / whole_s, 2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
