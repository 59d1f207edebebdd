"""Benchmark the simulated NeuronCore: simulated instructions per second, tracing overhead, trace size.

For each kernel (sized to run about a second or more), runs ``--no-trace`` and traced recordings in alternating
pairs (so the machine's noise hits both alike) and reports medians: instructions/s (wall and CPU time), the share
of instructions the loop fast path scheduled, the traced/untraced wall-time ratio, the simulating process's extra
CPU time when tracing, the trace-writing child's CPU time, DMA packets per instruction and bytes per Instruction
row on disk.  ``--fresh`` runs every recording in a new interpreter, as ``trnprof record`` does (so start-up costs
of either kind are in), timing ``run_kernel`` inside it; ``--scale`` makes every recording N times longer.
``--fast-path off`` measures the general path alone.  ``--first-write`` measures how soon a recording
of millions of instructions has its first rows on disk.  Each line also carries the 1-minute load average: this
machine has 2 vCPUs shared with other work, so wall-clock ratios are only meaningful on a quiet machine.
``--neighbour`` times untraced runs alone and beside busy neighbours in another process (a Python loop, numpy
copies of growing buffers): on this machine the two vCPUs slow each other, mostly through memory traffic, so the
trace writer's work costs the simulation time even on the other CPU.
``--compare-env NAME=VALUE ...`` runs untraced, traced, and traced with the variables set (the writer process
inherits them), in rotating order, and reports medians, means and the runs that waited for the writer at their end.
``--stages`` splits what tracing costs into the writer process's stages: traced runs whose writer only receives
the chunks, or also builds the tables without writing the big ones (``benchmarks/writer_stages/``), beside
untraced and fully traced runs, rotating.
``--against CHECKOUT`` times fresh untraced runs of this code and of another checkout's, alternating, and reports
the speed-up.  ``--symbolic off`` runs ``nc.affine_range`` bodies once per iteration (concrete indices) instead of
tracing them once and expanding them; ``--compare-symbolic`` times untraced runs of both, alternating, and reports
their instructions per CPU second and per wall second side by side.

    .venv/bin/python benchmarks/bench_tracer.py --pairs 5
    .venv/bin/python benchmarks/bench_tracer.py --pairs 5 --fresh            # each run a new process
    .venv/bin/python benchmarks/bench_tracer.py --pairs 3 --fresh --scale 4  # 4x longer recordings
    .venv/bin/python benchmarks/bench_tracer.py --pairs 3 --fast-path off
    .venv/bin/python benchmarks/bench_tracer.py --compare-symbolic --pairs 5
    .venv/bin/python benchmarks/bench_tracer.py --first-write
    .venv/bin/python benchmarks/bench_tracer.py --neighbour --pairs 3 --scale 4 --kernels matmul_rowload
    .venv/bin/python benchmarks/bench_tracer.py --stages --pairs 6 --scale 4 --kernels matmul_rowload matmul_naive
    .venv/bin/python benchmarks/bench_tracer.py --compare-env ARROW_DEFAULT_MEMORY_POOL=mimalloc --pairs 16 \
        --kernels matmul_naive                                            # the writer's allocator, side by side
    git worktree add -f /tmp/wt-before HEAD~1 --detach
    .venv/bin/python benchmarks/bench_tracer.py --against /tmp/wt-before --pairs 4 --scale 4  # a change's speed-up
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tracer import TraceReader, aot
from tracer.sim import emit_process, malloc_tuning, run_kernel
from tracer.sim.fastpath import schedule_jit, schedule_kernel

CASES = [
    ("matmul_rowload", {"M": 16384, "N": 16384, "K": 4096}, "trn2"),
    ("matmul_naive", {"M": 8192, "N": 8192, "K": 8192}, "trn2"),
    ("attention", {"seq": 16384, "head_dim": 128}, "trn2"),
    ("mlp", {"layers": 384, "d_model": 512, "d_ff": 2048, "tokens": 512}, "trn1"),
    ("softmax", {"rows": 2 ** 23, "cols": 1024}, "trn1"),
]
ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> tuple[float, float, float]:
    """CPU seconds of this process and of its reaped children, and the children's system time alone."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime, kids.ru_stime


#: The parameter each case's size scales with (``--scale``), and the power of the scale it is multiplied by so that
#: the instructions grow about ``scale``-fold (attention's grow with seq squared).
SCALE_KEY = {"matmul_rowload": "M", "matmul_naive": "M", "attention": "seq", "mlp": "layers", "softmax": "rows"}
SCALE_POWER = {"attention": 0.5}


def scaled(kernel: str, params: dict, scale: int) -> dict:
    """``params`` with the kernel's size parameter grown so the recording has about ``scale`` times the
    instructions."""
    key = SCALE_KEY[kernel]
    return {**params, key: round(params[key] * scale ** SCALE_POWER.get(kernel, 1.0))}


def run_once(kernel: str, params: dict, arch: str, trace: Path | None, emit: str, fast_path: bool,  # noqa: PLR0917
             symbolic: bool) -> dict:
    """One recording in this process: wall and CPU seconds (own, and the trace writer child's) of run_kernel."""
    if trace is not None and trace.exists():
        shutil.rmtree(trace)
    c0 = _cpu()
    t0 = time.perf_counter()
    result = run_kernel(kernel, params, arch=arch, trace_path=trace, emit=emit, fast_path=fast_path,
                        expand_symbolic=symbolic)
    wall = time.perf_counter() - t0
    emit_process._reap(wait=True)  # the run does not wait for its writer process to exit: reap it to count its CPU
    c1 = _cpu()
    return {"wall": wall, "cpu": c1[0] - c0[0], "child_cpu": c1[1] - c0[1], "child_sys": c1[2] - c0[2],
            "instructions": result.instructions,
            "fast_path_instructions": result.fast_path_instructions, "dma_packets": result.dma_packets,
            "compiled_loop": schedule_jit._loaded.get("via")}


def run_script_fresh(script: str, payload: Any, env: dict[str, str] | None = None) -> dict:
    """Run benchmark ``script`` with ``--one <payload as JSON>`` in a new interpreter (``env``: variables to add to
    its environment); the JSON object its last line of output holds."""
    out = subprocess.run([sys.executable, script, "--one", json.dumps(payload)], check=True, capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run_fresh(args: list, env: dict[str, str] | None = None) -> dict:
    """:func:`run_once` in a new interpreter (as ``trnprof record`` runs), timed from inside it; ``env``: variables
    to add to its environment."""
    return run_script_fresh(__file__, [*args[:3], str(args[3]) if args[3] else None, *args[4:]], env)


def bench_case(kernel: str, params: dict, arch: str, pairs: int, tmp: Path, emit: str,  # noqa: PLR0917
               fast_path: bool, symbolic: bool = True, fresh: bool = False) -> dict:
    """Alternating untraced/traced pairs of one kernel; medians and ratios."""
    runs: dict[bool, list[dict]] = {False: [], True: []}
    loads: list[float] = []
    path = tmp / f"{kernel}.trace"
    for i in range(pairs):
        for trace in ((False, True) if i % 2 == 0 else (True, False)):
            args = [kernel, params, arch, path if trace else None, emit, fast_path, symbolic]
            runs[trace].append(_run_fresh(args) if fresh else run_once(*args))
            loads.append(os.getloadavg()[0])
    size = (path / "Instruction.arrows").stat().st_size
    rows = TraceReader(path).num_rows("Instruction")
    total_size = sum(f.stat().st_size for f in path.iterdir())
    last = runs[False][-1]
    n = last["instructions"]

    def med(trace: bool, key: str) -> float:
        return statistics.median(r[key] for r in runs[trace])

    ratios = [t["wall"] / u["wall"] for t, u in zip(runs[True], runs[False], strict=True)]
    cpu_ratios = [t["cpu"] / u["cpu"] for t, u in zip(runs[True], runs[False], strict=True)]
    child = med(True, "child_cpu")
    return {
        "kernel": kernel, "arch": arch, "params": params, "emit": emit, "fast_path": fast_path,
        "symbolic": symbolic, "fresh_process": fresh, "instructions": n,
        "fast_path_share": round(last["fast_path_instructions"] / n, 3),
        "packets_per_instruction": round(last["dma_packets"] / n, 1),
        "wall_s_no_trace_median": round(med(False, "wall"), 3),
        "wall_s_traced_median": round(med(True, "wall"), 3),
        "instr_per_s_no_trace": round(n / med(False, "wall")),
        "instr_per_cpu_s_no_trace": round(n / med(False, "cpu")),
        "instr_per_s_traced": round(n / med(True, "wall")),
        "wall_overhead_median": round(statistics.median(ratios) - 1, 4),
        "wall_overhead_min_max": [round(min(ratios) - 1, 4), round(max(ratios) - 1, 4)],
        "sim_process_cpu_overhead_median": round(statistics.median(cpu_ratios) - 1, 4),
        "sim_process_cpu_overhead_min_max": [round(min(cpu_ratios) - 1, 4), round(max(cpu_ratios) - 1, 4)],
        "writer_child_cpu_s_median": round(child, 3),
        "writer_child_cpu_per_instruction_us": round(child / n * 1e6, 2),
        "instruction_bytes_per_row": round(size / rows, 2), "trace_mb": round(total_size / 1e6, 2),
        "compiled_loop": sorted({str(r["compiled_loop"]) for rs in runs.values() for r in rs}),
        "pairs": pairs, "load_average_1min": [round(min(loads), 2), round(max(loads), 2)],
    }


def compare_symbolic(kernel: str, params: dict, arch: str, pairs: int) -> dict:
    """Untraced runs with affine loops expanded symbolically and run concretely, alternating: instructions/s."""
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    loads: list[float] = []
    n = 0
    for i in range(pairs):
        for symbolic in ((True, False) if i % 2 == 0 else (False, True)):
            c0 = _cpu()[0]
            t0 = time.perf_counter()
            n = run_kernel(kernel, params, arch=arch, expand_symbolic=symbolic).instructions
            wall[symbolic].append(time.perf_counter() - t0)
            cpu[symbolic].append(_cpu()[0] - c0)
            loads.append(os.getloadavg()[0])
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in (True, False)}
    return {
        "kernel": kernel, "arch": arch, "params": params, "instructions": n,
        "symbolic_instr_per_cpu_s": round(n / med[True][1]), "symbolic_instr_per_wall_s": round(n / med[True][0]),
        "concrete_instr_per_cpu_s": round(n / med[False][1]), "concrete_instr_per_wall_s": round(n / med[False][0]),
        "cpu_time_ratio_symbolic_over_concrete": round(med[True][1] / med[False][1], 3),
        "pairs": pairs, "load_average_1min": [round(min(loads), 2), round(max(loads), 2)],
    }


#: The neighbours ``--neighbour`` runs the simulation beside: a pure-Python loop (CPU work that stays in the core's
#: own caches), and numpy copying a buffer of 128 KiB, 1 MiB or 32 MiB over and over (the source and the copy
#: together fit the other core's 2 MiB L2 cache, about fill it, or stream through the shared L3 and memory).
NEIGHBOURS = {
    "python_loop": "while True: pass",
    "copy_128k": "import numpy as np\na = np.ones(1 << 14); b = np.empty_like(a)\nwhile True: np.copyto(b, a)",
    "copy_1m": "import numpy as np\na = np.ones(1 << 17); b = np.empty_like(a)\nwhile True: np.copyto(b, a)",
    "copy_32m": "import numpy as np\na = np.ones(1 << 22); b = np.empty_like(a)\nwhile True: np.copyto(b, a)",
}


def neighbour_cost(kernel: str, params: dict, arch: str, pairs: int) -> dict:
    """Untraced fresh runs alone and beside each of :data:`NEIGHBOURS` in another process, in rotating order: how
    much a second process's work slows the simulation on this machine, by the kind of work (the trace writer is
    such a process: numpy and Arrow building and compressing tables)."""
    kinds = ["alone", *NEIGHBOURS]
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    n = 0
    for i in range(pairs):
        for k in range(len(kinds)):
            kind = kinds[(i + k) % len(kinds)]
            loop = None
            if kind != "alone":
                loop = subprocess.Popen([sys.executable, "-c", NEIGHBOURS[kind]])
                time.sleep(0.3)  # its start-up (numpy's import) is not the steady work being measured
            try:
                run = _run_fresh([kernel, params, arch, None, "process", True, True])
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
            wall[kind].append(run["wall"])
            n = run["instructions"]
    alone = statistics.median(wall["alone"])
    return {"kernel": kernel, "arch": arch, "params": params, "instructions": n, "cpus": os.cpu_count(),
            "pairs": pairs, "wall_s": {k: [round(w, 3) for w in v] for k, v in wall.items()},
            "slowdown_median": {k: round(statistics.median(wall[k]) / alone - 1, 4) for k in NEIGHBOURS}}


def compare_env(kernel: str, params: dict, arch: str, runs: int, tmp: Path, *, env: dict[str, str]) -> dict:
    """Fresh untraced runs, traced runs, and traced runs with ``env`` added to the environment (the trace writer
    process inherits it), in rotating order: does a setting change what tracing costs, in the median and in the
    tail (runs that wait for the writer at their end)?"""
    modes = ("untraced", "traced", "traced_with_env")
    res: dict[str, list[dict]] = {m: [] for m in modes}
    path = tmp / f"{kernel}.trace"
    for i in range(runs):
        for k in range(3):
            mode = modes[(i + k) % 3]
            args = [kernel, params, arch, None if mode == "untraced" else path, "process", True, True]
            res[mode].append(_run_fresh(args, env if mode == "traced_with_env" else None))
    base = statistics.median(r["wall"] for r in res["untraced"])
    base_mean = statistics.mean(r["wall"] for r in res["untraced"])
    out: dict = {"kernel": kernel, "arch": arch, "params": params, "env": env, "runs_per_mode": runs,
                 "instructions": res["untraced"][-1]["instructions"]}
    for mode in modes:
        rs = res[mode]
        wall = [r["wall"] for r in rs]
        out[mode] = {
            "wall_s_median": round(statistics.median(wall), 3),
            "wall_vs_untraced_median": round(statistics.median(wall) / base - 1, 4),
            "wall_vs_untraced_mean": round(statistics.mean(wall) / base_mean - 1, 4),
            "wall_s_max": round(max(wall), 3),
            "waits_over_40ms": sum(r["wall"] - r["cpu"] > 0.04 for r in rs),
            "writer_cpu_s_median": round(statistics.median(r["child_cpu"] for r in rs), 3),
            "writer_system_s_median_max": [round(statistics.median(r["child_sys"] for r in rs), 3),
                                           round(max(r["child_sys"] for r in rs), 3)],
        }
    out["load_average_1min"] = round(os.getloadavg()[0], 2)
    return out


#: ``--stages``: the writer's work cut short by ``benchmarks/writer_stages/sitecustomize.py`` (see its docstring).
STAGE_HOOKS = ROOT / "benchmarks" / "writer_stages"


def writer_stages(kernel: str, params: dict, arch: str, runs: int, tmp: Path) -> dict:
    """Fresh runs in rotating order: untraced; traced with the writer process only receiving the chunks; traced
    with it also building the tables but not writing the big ones; traced in full.  Each stage's median wall time
    over the untraced median: what receiving, building and writing add to a recording's wall time."""
    modes = ("untraced", "receive", "build", "traced")
    res: dict[str, list[float]] = {m: [] for m in modes}
    path = tmp / f"{kernel}.trace"
    n = 0
    for i in range(runs):
        for k in range(len(modes)):
            mode = modes[(i + k) % len(modes)]
            args = [kernel, params, arch, None if mode == "untraced" else path, "process", True, True]
            env = None
            if mode in ("receive", "build"):
                env = {"TRNPROF_BENCH_WRITER_STAGE": mode,
                       "PYTHONPATH": os.pathsep.join([str(STAGE_HOOKS), str(ROOT)])}
            run = _run_fresh(args, env)
            res[mode].append(run["wall"])
            n = run["instructions"]
    base = statistics.median(res["untraced"])
    return {"kernel": kernel, "arch": arch, "params": params, "instructions": n, "runs_per_mode": runs,
            "wall_s_median": {m: round(statistics.median(res[m]), 3) for m in modes},
            "wall_vs_untraced_median": {m: round(statistics.median(res[m]) / base - 1, 4) for m in modes[1:]},
            "load_average_1min": round(os.getloadavg()[0], 2)}


def compare_code(kernel: str, params: dict, arch: str, pairs: int, against: Path) -> dict:
    """Fresh untraced runs of this checkout's code and of the checkout ``against`` (first on ``PYTHONPATH``), in
    alternating order: a change's speed-up, side by side on a noisy machine.  (The other checkout's compiled
    scheduling loop is built ahead of time only if its kernel module's source matches this one's.)"""
    runs: dict[str, list[dict]] = {"this": [], "against": []}
    for i in range(pairs):
        for code in (("this", "against") if i % 2 == 0 else ("against", "this")):
            env = {"PYTHONPATH": str(against)} if code == "against" else None
            runs[code].append(_run_fresh([kernel, params, arch, None, "process", True, True], env))
    n = runs["this"][-1]["instructions"]
    if runs["against"][-1]["instructions"] != n:
        raise SystemExit(f"bench_tracer: {kernel} issues {n} instructions here but "
                         f"{runs['against'][-1]['instructions']} in {against}: not the same recording")
    med = {code: statistics.median(r["wall"] for r in rs) for code, rs in runs.items()}
    return {"kernel": kernel, "arch": arch, "params": params, "instructions": n, "against": str(against),
            "pairs": pairs, "wall_s_median": round(med["this"], 3), "against_wall_s_median": round(med["against"], 3),
            "instr_per_s": round(n / med["this"]), "against_instr_per_s": round(n / med["against"]),
            "speedup": round(med["against"] / med["this"], 3), "load_average_1min": round(os.getloadavg()[0], 2)}


def first_write(tmp: Path) -> dict:
    """Seconds until a multi-million-instruction recording has its first Instruction batch on disk."""
    out = tmp / "huge.trace"
    params = ["-p", "M=65536", "-p", "N=65536", "-p", "K=4096"]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "profiler", "record", "matmul_rowload", *params, "-o", str(out),
                             "-q"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    inst = out / "Instruction.arrows"
    while not (inst.exists() and inst.stat().st_size > 4096):
        if proc.poll() is not None:
            raise RuntimeError("recording ended early")
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    time.sleep(2.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = TraceReader(out).num_rows("Instruction")
    return {"first_batch_on_disk_s": round(elapsed, 2), "rows_on_disk_after_2s_more": rows,
            "kernel": "matmul_rowload M=N=65536 K=4096 (~4.3 M instructions)",
            "load_average_1min": round(os.getloadavg()[0], 2)}


def _assignment(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (an argparse type)."""
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return name, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="paired runs per kernel (default 5)")
    parser.add_argument("--kernels", nargs="*", help="only these kernels")
    parser.add_argument("--first-write", action="store_true", help="measure time to the first rows on disk")
    parser.add_argument("--emit", choices=["process", "thread", "inline"], default="process",
                        help="where trace tables are built (default: a child process)")
    parser.add_argument("--fast-path", choices=["on", "off"], default="on",
                        help="the loop fast path (default on; off = every instruction through the general path)")
    parser.add_argument("--symbolic", choices=["on", "off"], default="on",
                        help="trace nc.affine_range bodies once and expand them (off: concrete iterations)")
    parser.add_argument("--compare-symbolic", action="store_true",
                        help="untraced runs, symbolic and concrete affine loops side by side")
    parser.add_argument("--fresh", action="store_true",
                        help="every run in a new interpreter, as `trnprof record` runs (timed inside it)")
    parser.add_argument("--neighbour", action="store_true",
                        help="untraced runs alone and beside busy neighbours in another process: a Python loop, "
                             "numpy copies of 128 KiB, 1 MiB, 32 MiB (do the CPUs interfere, and how?)")
    parser.add_argument("--scale", type=int, default=1,
                        help="make each recording about this many times longer (grows M, seq, layers or rows)")
    parser.add_argument("--compare-env", nargs="+", metavar="NAME=VALUE", type=_assignment,
                        help="fresh untraced, traced and traced-with-these-variables runs in rotating order "
                             "(e.g. ARROW_DEFAULT_MEMORY_POOL=mimalloc: the writer process's allocator)")
    parser.add_argument("--stages", action="store_true",
                        help="split what tracing costs: fresh untraced runs and traced runs whose writer process "
                             "only receives the chunks, also builds the tables, or does everything, rotating")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT",
                        help="untraced fresh runs of this code and of another checkout's (e.g. a git worktree of the "
                             "commit before a change), alternating: the speed-up")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        malloc_tuning.tune_this_process()  # as trnprof record does in its process
        kernel, params, arch, trace, emit, fast, symbolic = json.loads(args.one)
        print(json.dumps(run_once(kernel, params, arch, Path(trace) if trace else None, emit, fast, symbolic)))
        return 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.first_write:
            print(json.dumps(first_write(tmp)))
            return 0
        # the compiled scheduling loop's ahead-of-time build, as a user's second run finds it (TRNPROF_AOT=0: none)
        if aot.enabled() and not aot.wait_for_build(schedule_kernel, timeout=300):
            print(f"warning: no ahead-of-time build of the scheduling loop (see {aot.cache_dir()})", file=sys.stderr)
        # warm up (imports, pyarrow's lazy start-up) so the first measured pair is not penalised
        run_kernel("matmul_rowload", {"M": 512, "N": 1024, "K": 256}, trace_path=tmp / "warm.trace", emit=args.emit)
        for kernel, base, arch in CASES:
            if args.kernels and kernel not in args.kernels:
                continue
            params = scaled(kernel, base, args.scale)
            if args.neighbour:
                print(json.dumps(neighbour_cost(kernel, params, arch, args.pairs)), flush=True)
                continue
            if args.compare_env:
                env = dict(args.compare_env)
                print(json.dumps(compare_env(kernel, params, arch, args.pairs, tmp, env=env)), flush=True)
                continue
            if args.stages:
                print(json.dumps(writer_stages(kernel, params, arch, args.pairs, tmp)), flush=True)
                continue
            if args.against:
                print(json.dumps(compare_code(kernel, params, arch, args.pairs, args.against.resolve())), flush=True)
                continue
            if args.compare_symbolic:
                print(json.dumps(compare_symbolic(kernel, params, arch, args.pairs)), flush=True)
                continue
            print(json.dumps(bench_case(kernel, params, arch, args.pairs, tmp, args.emit, args.fast_path == "on",
                                        args.symbolic == "on", args.fresh)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
