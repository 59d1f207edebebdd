"""Benchmark the loop fast path on triangular loop nests: wall time with it on and off, and what it replayed.

A triangular nest (an inner loop whose length follows the outer index, growing or shrinking, as a causal
attention's kv loop) is the fast path's hardest case: with an ``nc.sequential_range`` inner loop its segments repeat
once learnt (a promoted loop, docs/cost-model.md "Segments"); with a plain ``range`` or an ``nc.affine_range`` inner
loop they never do, and the ledger pauses the learning (docs/cost-model.md, "Learning that does not pay pauses").
Each case runs in a fresh interpreter, untraced, with the fast path on and off (and on in ``--against``'s checkout),
rotating, ``--reps`` times; the table has the best wall time of each.  ``--totals`` instead reports how far the
progress total (``run_kernel``'s prediction of the run's instructions) is from the run's length once a tenth, a
quarter and half of the run is done (the worst report after each), here and in ``--against``'s checkout.

    .venv/bin/python benchmarks/bench_fastpath_nests.py
    .venv/bin/python benchmarks/bench_fastpath_nests.py --outer 200 --reps 3 --kernels   # shipped kernels too
    git worktree add -f /tmp/wt-before HEAD~1 --detach
    .venv/bin/python benchmarks/bench_fastpath_nests.py --against /tmp/wt-before
    .venv/bin/python benchmarks/bench_fastpath_nests.py --totals --kernels --against /tmp/wt-before
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NESTS = [(shape, inner) for inner in ("range", "affine_range", "sequential_range") for shape in ("grow", "shrink")]
#: Nests whose iterations follow no line (``--totals``): a sawtooth, and lengths hashed from the index.
IRREGULAR = [("sawtooth", "sequential_range"), ("hashed", "sequential_range")]
SHAPES = {"grow": "i + 1", "shrink": "n_outer - i", "sawtooth": "i % 50 + 1", "hashed": "(i * 37) % 101 + 1",
          "phases": "(i * 7) % 13 + 1 if i < 600 else 3"}
#: One loop that loses for 600 iterations (ragged plain-range inner runs), then turns regular for 3,400 (the ledger
#: must not pause its regular phase away).
PHASES = {"shape": "phases", "inner": "range", "outer": 4000}
#: Shipped kernels at sizes where their loops are long (``--kernels``): the ledger must leave them alone.
KERNELS = [("attention", {"seq": 16384, "causal": True}), ("attention", {"seq": 8192, "causal": True}),
           ("attention", {"seq": 16384}), ("matmul_rowload", {"M": 16384, "N": 16384, "K": 4096}),
           ("mlp", {"layers": 384, "d_model": 512, "d_ff": 2048, "tokens": 512})]

CHILD = r"""
import json, sys, time
from tracer.sim import run_kernel

def nest(shape, inner_kind, n_outer):
    def kern(nc):
        x = nc.input("x", (128, 64), "bf16")
        y = nc.output("y", (128, 64), "fp32")
        t = nc.sbuf_tile((128, 64), "bf16", name="t"); nc.dma_copy(t, x)
        u = nc.sbuf_tile((128, 64), "bf16", name="u"); nc.tensor_copy(u, t)
        col = nc.sbuf_tile((128, 1), "fp32", name="col"); nc.iota(col, base=1.0, partition_step=0.01)
        acc = nc.sbuf_tile((128, 64), "fp32", name="acc"); nc.memset(acc, 0.0)
        inner = range if inner_kind == "range" else getattr(nc, inner_kind)
        for i in nc.sequential_range(n_outer):
            w = nc.sbuf_tile((128, 64), "fp32", name="w")
            nc.tensor_scalar(w, t, "multiply", 0.5)
            for _j in inner(eval(SHAPES[shape])):
                s = nc.sbuf_tile((128, 64), "fp32", name="s")
                nc.tensor_tensor(s, w, u, "multiply")
                nc.activation(s, s, "exp")
                nc.tensor_reduce(col, s, "max")
                nc.tensor_scalar(w, s, "subtract", col, op1="multiply", operand1=col)
                nc.tensor_copy(s, w)
                nc.tensor_tensor(w, w, s, "add")
                nc.tensor_tensor(acc, acc, s, "add", engine="GpSimd")
        nc.dma_copy(y, acc)
    return kern

case, fast, SHAPES = json.loads(sys.argv[1]), sys.argv[2] == "on", json.loads(sys.argv[3])
kernel, params = (nest(case["shape"], case["inner"], case["outer"]), {}) if "shape" in case else \
    (case["kernel"], case["params"])
totals = []
t0 = time.perf_counter()
result = run_kernel(kernel, params, fast_path=fast, progress=lambda n, ns, total: totals.append((n, total)))
print(json.dumps({"wall": time.perf_counter() - t0, "instructions": result.instructions,
                  "replayed": result.fast_path_instructions, "simulated_ns": result.simulated_ns,
                  "totals": totals}))
"""


def _run(checkout: Path, case: dict, fast: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case), "on" if fast else "off", json.dumps(SHAPES)],
                         cwd=checkout, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _worst_error(r: dict, share: float) -> str:
    """The largest distance of the progress total from the run's length in the reports after ``share`` of it."""
    n_all = r["instructions"]
    late = [t for n, t in r["totals"] if n >= share * n_all]
    if not late:
        return "-"
    if any(t is None for t in late):
        return "none"
    return f"{max(abs(t / n_all - 1) for t in late):.0%}"


def _totals(cases: list[dict], against: Path | None) -> None:
    checkouts = [("this checkout", ROOT)] + ([("against", against.resolve())] if against else [])
    print("| case | instructions | checkout | worst error after 10% | after 25% | after 50% |")
    print("|---|---:|---|---:|---:|---:|")
    for case in cases:
        for name, checkout in checkouts:
            r = _run(checkout, case, True)
            errors = " | ".join(_worst_error(r, share) for share in (0.1, 0.25, 0.5))
            print(f"| {_label(case)} | {r['instructions']:,} | {name} | {errors} |", flush=True)


def _label(case: dict) -> str:
    if "shape" not in case:
        return f"{case['kernel']} {case['params']}"
    if case["shape"] == "phases":
        return "losing then regular (one loop)"
    return f"{case['shape']} nest, {case['inner']} inner"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outer", type=int, default=200, help="outer iterations of each nest (default 200)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each configuration (default 3)")
    parser.add_argument("--kernels", action="store_true", help="also time shipped kernels at long sizes")
    parser.add_argument("--against", type=Path, help="another checkout, timed with the fast path on beside this one")
    parser.add_argument("--totals", action="store_true", help="report the progress total's error instead of times")
    args = parser.parse_args(argv)
    cases = [{"shape": s, "inner": i, "outer": args.outer} for s, i in NESTS + (IRREGULAR if args.totals else [])]
    if not args.totals:
        cases.append(PHASES)
    if args.kernels:
        cases += [{"kernel": k, "params": p} for k, p in KERNELS]
    if args.totals:
        _totals(cases, args.against)
        return 0
    configs = [("on", ROOT, True), ("off", ROOT, False)]
    if args.against:
        configs.insert(0, ("against on", args.against.resolve(), True))
    head = " | ".join(f"{name} (s)" for name, _, _ in configs)
    print(f"| case | instructions | {head} | on / off | replayed |")
    print("|---|---:|" + "---:|" * len(configs) + "---:|---:|")
    for case in cases:
        best: dict[str, dict] = {}
        for _ in range(args.reps):
            for name, checkout, fast in configs:
                r = _run(checkout, case, fast)
                if name not in best or r["wall"] < best[name]["wall"]:
                    best[name] = r
        label = _label(case)
        on = best["on"]
        times = " | ".join(f"{best[name]['wall']:.2f}" for name, _, _ in configs)
        print(f"| {label} | {on['instructions']:,} | {times} | {on['wall'] / best['off']['wall']:.2f} | "
              f"{on['replayed'] / on['instructions']:.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
