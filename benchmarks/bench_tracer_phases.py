"""Benchmark where a traced recording's extra time goes, phase by phase: start, steady state, hand-over, end.

Runs one kernel untraced and traced in alternating fresh processes (as ``trnprof record`` runs).  Each run notes
the simulating process's CPU time at every hand-over of records (the ``progress`` callback, every ~50 ms), less
the time spent inside the writer process's hand-over calls (``ProcessEmitter.submit`` and ``pump``, reported on
their own); each run's curve is interpolated at every tenth of its instructions, and the medians per tenth are
compared.  The first tenth holds the run's start (tracing the kernel, recording the first loop segments, and,
traced, the writer process's start on the other CPU); tenths 2-9 are the steady state; wall minus CPU time is
mostly the wait for the writer at the end.  See BENCHMARKS.md ("Tracer", round 13) for what the phases showed.

    .venv/bin/python benchmarks/bench_tracer_phases.py                      # matmul_rowload at 4x, 6 pairs
    .venv/bin/python benchmarks/bench_tracer_phases.py --kernel matmul_naive --pairs 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tracer import CASES, run_script_fresh, scaled

TENTHS = np.linspace(0.0, 1.0, 11)


def run_one(kernel: str, params: dict, arch: str, traced: bool) -> dict:
    """One recording in this process: CPU time at each hand-over (outside the emitter's calls), totals."""
    from tracer.sim import emit_process, malloc_tuning, run_kernel

    malloc_tuning.tune_this_process()  # as trnprof record does
    in_emitter = [0.0]

    def timed(fn):
        def call(*args, **kwargs):
            c = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                in_emitter[0] += time.process_time() - c
        return call

    emit_process.ProcessEmitter.submit = timed(emit_process.ProcessEmitter.submit)
    emit_process.ProcessEmitter.pump = timed(emit_process.ProcessEmitter.pump)
    points: list[tuple[int, float]] = []
    out = tempfile.mkdtemp()
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        result = run_kernel(kernel, params, arch=arch, trace_path=Path(out) / "t" if traced else None,
                            progress=lambda n, _ns: points.append((n, time.process_time() - c0 - in_emitter[0])))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"traced": traced, "cpu": cpu, "wall": wall, "emitter_cpu": in_emitter[0],
            "instructions": result.instructions, "points": points}


def tenths(run: dict) -> np.ndarray:
    """CPU seconds (outside the emitter's calls) spent in each tenth of the run's instructions."""
    n = run["instructions"]
    xs = np.array([0, *(p[0] for p in run["points"]), n], np.float64) / n
    cs = np.array([0.0, *(p[1] for p in run["points"]), run["cpu"] - run["emitter_cpu"]])
    return np.diff(np.interp(TENTHS, xs, cs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="matmul_rowload", choices=[c[0] for c in CASES])
    parser.add_argument("--scale", type=int, default=4, help="recording length, as bench_tracer.py --scale")
    parser.add_argument("--pairs", type=int, default=6, help="untraced/traced pairs, alternating (default 6)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        kernel, params, arch, traced = json.loads(args.one)
        print(json.dumps(run_one(kernel, params, arch, traced)))
        return 0
    kernel, params, arch = next(c for c in CASES if c[0] == args.kernel)
    params = scaled(kernel, params, args.scale)
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for i in range(args.pairs):
        for traced in ((False, True) if i % 2 == 0 else (True, False)):
            runs[traced].append(run_script_fresh(__file__, [kernel, params, arch, traced]))
    med = {t: np.median(np.array([tenths(r) for r in runs[t]]), axis=0) for t in (False, True)}

    def median(traced: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[traced])

    u, t = med[False], med[True]
    print(json.dumps({
        "kernel": kernel, "arch": arch, "params": params, "instructions": runs[False][0]["instructions"],
        "pairs": args.pairs, "cpu_ms_per_tenth_untraced": np.round(u * 1e3, 1).tolist(),
        "cpu_ms_per_tenth_traced": np.round(t * 1e3, 1).tolist(),
        "start_extra_ms": round(float(t[0] - u[0]) * 1e3, 1),
        "steady_extra": round(float(t[1:9].sum() / u[1:9].sum() - 1), 4),
        "emitter_calls_ms": round(median(True, "emitter_cpu") * 1e3, 1),
        "wall_minus_cpu_ms_traced": round(statistics.median(r["wall"] - r["cpu"] for r in runs[True]) * 1e3, 1),
        "wall_s_untraced": round(median(False, "wall"), 3), "wall_s_traced": round(median(True, "wall"), 3),
        "load_average_1min": os.getloadavg()[0],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
