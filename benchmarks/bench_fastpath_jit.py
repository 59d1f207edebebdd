"""Benchmark the loop fast path's compiled scheduling loop against its Python loop, side by side.

Same method as the scheduling-share measurement of BENCHMARKS.md (Tracer, round 5): every kernel of
``bench_tracer.CASES`` is simulated untraced in this process, alternately with ``TRNPROF_JIT=0`` (Python loop) and
``TRNPROF_JIT=1`` (compiled loop), ``--pairs`` times; each run's CPU time (``time.process_time``) and the wall time
spent inside the segment scheduler (``tracer.sim.fastpath.schedule.run``, as called by the fast path's commit) are
recorded, and medians, their ratios and the 1-minute load average are printed.  numba is loaded before the first
run and its start-up cost (import, LLVM, cached kernels) is measured separately in a fresh interpreter, since that
is what a single ``trnprof record`` pays.

    .venv/bin/python benchmarks/bench_fastpath_jit.py --pairs 3
    .venv/bin/python benchmarks/bench_fastpath_jit.py --pairs 3 --kernels matmul_naive softmax
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tracer import CASES  # noqa: E402

from tracer.sim.fastpath import commit, schedule_jit  # noqa: E402
from tracer.sim.runner import run_kernel  # noqa: E402

_STARTUP = """
import time
t0 = time.process_time()
import numba
t1 = time.process_time()
from tracer.sim.fastpath import schedule_jit
t2 = time.process_time()
assert schedule_jit._load()
t3 = time.process_time()
print(t1 - t0, t3 - t2)
"""


def startup_cost(repeat: int = 3) -> dict:
    """CPU seconds a fresh interpreter spends importing numba and loading the cached kernels (medians)."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _STARTUP], check=True, capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        runs.append([float(x) for x in out.stdout.split()])
    return {"numba_import_cpu_s": round(statistics.median(r[0] for r in runs), 3),
            "kernel_load_cpu_s": round(statistics.median(r[1] for r in runs), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="alternating Python/compiled runs per kernel")
    parser.add_argument("--kernels", nargs="*", help="only these kernels")
    args = parser.parse_args()
    print(json.dumps({"startup": startup_cost()}))
    if not schedule_jit._load():
        print("numba is not available", file=sys.stderr)
        return 1
    sched = [0.0]
    inner = commit.run

    def timed(*a: object, **k: object) -> object:
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            sched[0] += time.perf_counter() - t

    commit.run = timed
    for kernel, params, arch in CASES:
        if args.kernels and kernel not in args.kernels:
            continue
        runs: dict[str, list[tuple[float, float]]] = {"0": [], "1": []}
        loads = []
        n = 0
        for i in range(args.pairs):
            for mode in (("0", "1") if i % 2 == 0 else ("1", "0")):
                os.environ[schedule_jit.ENV_SWITCH] = mode
                sched[0] = 0.0
                t = time.process_time()
                n = run_kernel(kernel, params, arch=arch).instructions
                runs[mode].append((time.process_time() - t, sched[0]))
                loads.append(os.getloadavg()[0])
        med = {m: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for m, v in runs.items()}
        print(json.dumps({
            "kernel": kernel, "arch": arch, "params": params, "instructions": n, "pairs": args.pairs,
            "python_cpu_s": round(med["0"][0], 3), "compiled_cpu_s": round(med["1"][0], 3),
            "python_instr_per_cpu_s": round(n / med["0"][0]), "compiled_instr_per_cpu_s": round(n / med["1"][0]),
            "cpu_ratio": round(med["1"][0] / med["0"][0], 3),
            "python_sched_s": round(med["0"][1], 3), "compiled_sched_s": round(med["1"][1], 3),
            "python_sched_share": round(med["0"][1] / med["0"][0], 3),
            "compiled_sched_share": round(med["1"][1] / med["1"][0], 3),
            "sched_ratio": round(med["1"][1] / med["0"][1], 3),
            "load_average_1min": [round(min(loads), 2), round(max(loads), 2)],
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
