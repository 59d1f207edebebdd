"""Benchmark how long ``trnprof`` commands take to start: whole processes, timed from outside.

Each case is one ``python -m profiler ...`` process (the same code the ``trnprof`` script runs) started in an
empty directory (``python -m`` puts the working directory first on the path); the runs of all
cases -- and of ``python -c pass``, the interpreter's own start-up -- rotate, so a noisy machine slows them alike.
``--against DIR`` also runs every case with another checkout's code first on ``PYTHONPATH`` (e.g. a
``git worktree`` of the commit before a change), in the same rotation, and reports the ratios.  Medians over
``--repeat`` runs; ``imports`` lists the heavy modules each case loaded (from ``-X importtime``, one extra run).
See BENCHMARKS.md ("CLI start-up").

    .venv/bin/python benchmarks/bench_cli_startup.py --repeat 15
    git worktree add -f /tmp/wt-before HEAD~1 --detach
    .venv/bin/python benchmarks/bench_cli_startup.py --repeat 15 --against /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "matmul_naive-trn2.trace"

#: name -> arguments after ``python -m profiler`` (``{tmp}`` is a fresh directory per run).
CASES: dict[str, list[str]] = {
    "--help": ["--help"],
    "--version": ["--version"],
    "kernels": ["kernels"],
    "record --help": ["record", "--help"],
    "record (tiny kernel, --no-trace)": ["record", "dma_stream", "-p", "rows=128", "-p", "cols=2048", "--no-trace"],
    "record (tiny kernel, traced)": ["record", "dma_stream", "-p", "rows=128", "-p", "cols=2048", "-o", "{tmp}/t"],
    "info (sample trace)": ["info", str(SAMPLE)],
    "summary (sample trace, cached DB)": ["summary", str(SAMPLE)],
}
#: Modules reported in ``imports`` when a case loads them.
HEAVY = ("numpy", "pyarrow", "duckdb", "plotly", "dash", "numba", "tracer.sim.runner", "profiler.trace")


def _env(code: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run(argv: list[str], env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("{tmp}", tmp) for a in argv]
        t0 = time.perf_counter()
        proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False, cwd=tmp)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_cli_startup: {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    return wall


def _imports(argv: list[str], env: dict[str, str]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.replace("{tmp}", tmp) for a in argv]
        proc = subprocess.run([args[0], "-X", "importtime", *args[1:]], env=env, capture_output=True, text=True,
                              check=False, cwd=tmp)
    names = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", proc.stderr, re.M))
    return [m for m in HEAVY if m in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=11, help="runs per case and code (default 11)")
    parser.add_argument("--against", type=Path, help="another checkout to compare with, run in the same rotation")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), help="only these cases")
    args = parser.parse_args(argv)
    codes: dict[str, Path | None] = {"this": None}
    if args.against is not None:
        codes["against"] = args.against.resolve()
    cases = {k: v for k, v in CASES.items() if not args.cases or k in args.cases}
    if any("summary" in k for k in cases):  # the cached database is built once, outside the timed runs
        _run([sys.executable, "-m", "profiler", "summary", str(SAMPLE)], _env(None))
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        times.setdefault(("python -c pass", "this"), []).append(_run([sys.executable, "-c", "pass"], _env(None)))
        for name, case in cases.items():
            for code_name, code in codes.items():
                times.setdefault((name, code_name), []).append(
                    _run([sys.executable, "-m", "profiler", *case], _env(code)))
    floor = statistics.median(times[("python -c pass", "this")])
    print(json.dumps({"case": "python -c pass", "median_s": round(floor, 4)}))
    for name, case in cases.items():
        row: dict = {"case": name}
        for code_name, code in codes.items():
            med = statistics.median(times[(name, code_name)])
            row[f"{code_name}_median_s"] = round(med, 4)
            row[f"{code_name}_imports"] = _imports([sys.executable, "-m", "profiler", *case], _env(code))
        if "against" in codes:
            row["ratio_this_over_against"] = round(row["this_median_s"] / row["against_median_s"], 3)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
