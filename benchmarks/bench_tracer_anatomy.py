"""Benchmark what an untraced recording's time is made of: matched kernel calls per instruction and commits.

For each kernel (the sizes of ``bench_tracer.py``, ``--scale`` as there), one untraced run in this process with
two measuring wrappers: every generated match function of the loop fast path is wrapped to count the kernel calls
it accepts, by kind (allocations, releases, operations, scopes), and ``commit`` (the end of a matched segment:
templates, the compiled scheduling, lazy records, spans) is timed, with the compiled scheduling call and the
template look-ups apart.  The wrappers add their own cost, so the run's wall time is reported only to give the
commits' share; take instructions/s from ``bench_tracer.py``.  See BENCHMARKS.md ("Tracer", round 14).

    .venv/bin/python benchmarks/bench_tracer_anatomy.py
    .venv/bin/python benchmarks/bench_tracer_anatomy.py --scale 4 --kernels softmax mlp
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tracer import CASES, scaled


def anatomy(kernel: str, params: dict, arch: str) -> dict:
    """One untraced run of ``kernel`` with the counting and timing wrappers installed (and removed after)."""
    from tracer.sim import run_kernel
    from tracer.sim.fastpath import commit as commit_mod
    from tracer.sim.fastpath import controller, match, schedule_jit
    from tracer.sim.fastpath.trie import ALLOC, FREE, OP

    kinds = {ALLOC: "allocations", FREE: "releases", OP: "operations"}
    calls: collections.Counter[str] = collections.Counter()
    spent = {"commit": 0.0, "schedule": 0.0, "templates": 0.0}
    commits = 0
    real = {"finish": match._Gen.finish, "commit": controller.commit, "schedule": schedule_jit.schedule,
            "templates": commit_mod.templates, "scope": controller.FastPath._scope_match}

    def finish(gen: Any, fast: Any, nargs: int, result: str) -> tuple[Any, tuple[Any, ...]]:
        fn, params_ = real["finish"](gen, fast, nargs, result)
        kind = kinds[gen.node.kind]

        def counted(*args: Any) -> Any:
            out = fn(*args)
            if out is not None:
                calls[kind] += 1
            return out

        return counted, params_

    def scope_match(fast: Any, kind: int, scope: Any) -> bool:  # scope events are matched without generated code
        matched = real["scope"](fast, kind, scope)
        if matched:
            calls["scopes"] += 1
        return matched

    def timed(name: str) -> Any:
        def wrapper(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real[name](*args)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapper

    def commit(fast: Any, var: Any) -> None:
        nonlocal commits
        commits += 1
        timed("commit")(fast, var)

    match._Gen.finish = finish
    controller.FastPath._scope_match = scope_match
    controller.commit = commit
    schedule_jit.schedule = timed("schedule")
    commit_mod.templates = timed("templates")
    try:
        t0 = time.perf_counter()
        result = run_kernel(kernel, params, arch=arch)
        wall = time.perf_counter() - t0
    finally:
        match._Gen.finish = real["finish"]
        controller.FastPath._scope_match = real["scope"]
        controller.commit = real["commit"]
        schedule_jit.schedule = real["schedule"]
        commit_mod.templates = real["templates"]
    n = result.instructions
    return {
        "kernel": kernel, "arch": arch, "params": params, "instructions": n,
        "matched_calls_per_instruction": round(sum(calls.values()) / n, 2),
        "by_kind_per_instruction": {k: round(v / n, 2) for k, v in sorted(calls.items())},
        "commits": commits, "instructions_per_commit": round(n / max(commits, 1)),
        "commit_us_each": round(spent["commit"] / max(commits, 1) * 1e6),
        "compiled_scheduling_us_each": round(spent["schedule"] / max(commits, 1) * 1e6),
        "templates_us_each": round(spent["templates"] / max(commits, 1) * 1e6),
        "commit_share_of_run": round(spent["commit"] / wall, 3), "wall_s_with_wrappers": round(wall, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="*", help="only these kernels")
    parser.add_argument("--scale", type=int, default=1, help="recording length, as bench_tracer.py --scale")
    args = parser.parse_args()
    for kernel, base, arch in CASES:
        if args.kernels and kernel not in args.kernels:
            continue
        print(json.dumps(anatomy(kernel, scaled(kernel, base, args.scale), arch)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
