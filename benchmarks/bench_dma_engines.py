"""How the simulated DMA engines use their time, and whether "what if" runs behave: two measurements of the cost
model (not of the simulator's speed).

``idle`` (the default): every shipped kernel at its default parameters on both presets, recorded; per DMA engine,
the time it sat idle while a packet of one of its queues was ready (its transfer's trigger had started
``dma_start_latency_ns`` before, and the packet before it in its queue had ended), summed over the engines and
divided by their number: the mean per engine, also as a share of the run.  Packet-by-packet placement leaves only
idle stretches shorter than the packet waiting (docs/cost-model.md, DMA "Engines").

``monotonic``: ``--pairs`` random pairs of runs (seeded: the same pairs on any checkout) of a shipped kernel at
random small parameters, changing one constant of the cost model the faster way (a higher clock or bandwidth, a
shorter latency, fewer overhead cycles); prints each pair whose faster run took longer, and the count.

``--against CHECKOUT`` runs the same measurement on another checkout's code (first on ``PYTHONPATH``, in a child
process) and prints both.

    .venv/bin/python benchmarks/bench_dma_engines.py idle
    .venv/bin/python benchmarks/bench_dma_engines.py monotonic --pairs 600 --seed 11
    git worktree add -f /tmp/wt-before 340bcda --detach     # the last commit placing shares whole
    .venv/bin/python benchmarks/bench_dma_engines.py monotonic --pairs 600 --seed 11 --against /tmp/wt-before
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from tracer import TraceReader
from tracer.sim import run_kernel
from tracer.sim.arch import PRESETS

KERNELS = ["matmul_naive", "matmul_blocked", "matmul_rowload", "linear", "softmax", "rmsnorm", "layernorm", "attention",
           "mlp", "dma_stream"]
#: Constants with a faster direction: +1, a higher value must not make a kernel slower; -1, a lower one.
FASTER = {"pe_clock_ghz": +1, "dve_clock_ghz": +1, "act_clock_ghz": +1, "pool_clock_ghz": +1,
          "dma_bandwidth_gbps": +1, "dma_start_latency_ns": -1, "access_overhead_cycles": -1,
          "min_instruction_cycles": -1}


def idle_while_ready(path: Path, latency_ns: int) -> int:
    """Engine time idle while a packet of the engine was ready, summed over the DMA engines of a recording."""
    reader = TraceReader(path)
    if not reader.has_table("DmaPacket"):
        return 0
    pk = reader.read_table("DmaPacket")
    ins, flow = reader.read_table("Instruction"), reader.read_table("Flow")
    trig = flow.filter(np.asarray(flow["in_table"].to_pylist()) == "DmaPacket")
    agg = np.asarray(pk["packet_aggregation_id"])
    trigger_start = dict(zip(agg[np.asarray(trig["in_id"])].tolist(),
                             np.asarray(ins["start_ts"])[np.asarray(trig["out_id"])].tolist(), strict=True))
    start, end = np.asarray(pk["start_ts"]).tolist(), np.asarray(pk["end_ts"]).tolist()
    engine, queue = np.asarray(pk["engine_idx"]).tolist(), pk["queue_name"].to_pylist()
    waiting: dict[int, list[tuple[int, int]]] = defaultdict(list)
    busy: dict[int, list[tuple[int, int]]] = defaultdict(list)
    queue_end: dict[str, int] = {}
    for i in range(len(start)):  # packet ids are in queue order
        ready = max(trigger_start[int(agg[i])] + latency_ns, queue_end.get(queue[i], 0))
        queue_end[queue[i]] = end[i]
        if start[i] > ready:
            waiting[engine[i]].append((ready, start[i]))
        busy[engine[i]].append((start[i], end[i]))
    total = 0
    for e, spans in waiting.items():
        idle = _gaps(busy[e])
        lo = [g[0] for g in idle]
        for s, t in _union(spans):
            k = max(bisect.bisect_right(lo, s) - 1, 0)
            while k < len(idle) and idle[k][0] < t:
                total += max(0, min(t, idle[k][1]) - max(s, idle[k][0]))
                k += 1
    return total


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, t in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], t)
        else:
            out.append([s, t])
    return [(s, t) for s, t in out]


def _gaps(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged = _union(spans)
    return [(a[1], b[0]) for a, b in itertools.pairwise(merged)]


def measure_idle() -> list[dict[str, Any]]:
    """The ``idle`` measurement (see the module docstring)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kernel in KERNELS:
            for arch in ("trn1", "trn2"):
                path = Path(tmp) / f"{kernel}-{arch}.trace"
                result = run_kernel(kernel, {}, arch=arch, trace_path=path, overwrite=True)
                total = idle_while_ready(path, result.cost.dma_start_latency_ns)
                per_engine = total / result.cost.dma_queues
                rows.append({"kernel": kernel, "arch": arch, "simulated_ns": result.simulated_ns,
                             "idle_while_ready_ns_per_engine": round(per_engine),
                             "share_of_run": round(per_engine / result.simulated_ns, 4)})
    return rows


def _random_params(kernel: str, rnd: random.Random) -> dict[str, Any]:
    c = rnd.choice
    if kernel == "matmul_naive":
        tn = c([128, 256, 512])
        return {"M": 128 * c([1, 2, 3]), "N": tn * c([1, 2]), "K": 128 * c([1, 2, 3]), "tile_n": tn,
                "dtype": c(["bf16", "fp32"])}
    if kernel in ("matmul_blocked", "matmul_rowload"):
        mt = c([1, 2, 4])
        params = {"M": 128 * mt, "K": 128 * c([1, 2, 3]), "block_m": c([d for d in (1, 2, 4) if mt % d == 0]),
                  "tile_n": c([256, 512]), "dtype": c(["bf16", "fp32"])}
        if kernel == "matmul_rowload":
            params["row_n"] = params["tile_n"] * c([1, 2])
            params["N"] = params["row_n"] * c([1, 2])
        else:
            params["N"] = c([512, 1024])
        return params
    if kernel == "linear":
        tn = c([128, 256, 512])
        return {"tokens": 128 * c([1, 2]), "d_in": 128 * c([1, 2]), "d_out": tn * c([1, 2]), "tile_n": tn,
                "transpose": c(["dma", "pe"])}
    if kernel in ("softmax", "rmsnorm", "layernorm"):
        return {"rows": c([64, 128, 200, 256, 384]), "cols": c([64, 256, 512, 1000, 2048]),
                "dtype": c(["bf16", "fp32"])}
    if kernel == "attention":
        return {"seq": 128 * c([1, 2, 3]), "head_dim": c([32, 64, 128]), "kv_block": c([32, 64, 128]),
                "probs_transpose": c(["pe", "dma"])}
    if kernel == "mlp":
        return {"layers": c([1, 2]), "d_model": 128 * c([1, 2]), "d_ff": 128 * c([1, 2, 4]), "tokens": c([64, 128])}
    tc = c([256, 1024, 2048, 4096])
    return {"rows": 128 * c([1, 2]), "cols": tc * c([1, 2]), "tile_cols": tc, "dtype": c(["bf16", "fp32"])}


def measure_monotonic(pairs: int, seed: int) -> dict[str, Any]:
    """The ``monotonic`` measurement (see the module docstring)."""
    rnd = random.Random(seed)
    slower = []
    for _ in range(pairs):
        kernel = rnd.choice(KERNELS)
        params = _random_params(kernel, rnd)
        arch = rnd.choice(["trn1", "trn2"])
        name = rnd.choice(sorted(FASTER))
        base = getattr(PRESETS[arch], name)
        if isinstance(base, int):
            lo, hi = sorted((rnd.randint(0 if "latency" in name else 1, 2 * base), rnd.randint(1, 2 * base)))
        else:
            lo, hi = sorted(round(base * rnd.uniform(0.3, 3), 3) for _ in range(2))
        if lo == hi:
            continue
        t_lo = run_kernel(kernel, params, arch=arch, overrides={name: lo}).simulated_ns
        t_hi = run_kernel(kernel, params, arch=arch, overrides={name: hi}).simulated_ns
        fast, slow = (t_hi, t_lo) if FASTER[name] > 0 else (t_lo, t_hi)
        if fast > slow:
            slower.append({"kernel": kernel, "params": params, "arch": arch, "constant": name, "values": [lo, hi],
                           "simulated_ns": [t_lo, t_hi], "slower_by": round(fast / slow - 1, 4)})
    return {"pairs": pairs, "seed": seed, "faster_but_slower": len(slower), "cases": slower}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", choices=["idle", "monotonic"], default="idle")
    parser.add_argument("--pairs", type=int, default=600, help="random pairs of runs (monotonic; default 600)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the pairs (monotonic; default 11)")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT", help="also measure another checkout's code")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRNPROF_EMIT", "inline")
    out = measure_idle() if args.what == "idle" else measure_monotonic(args.pairs, args.seed)
    if args.against is None:
        print(json.dumps(out, indent=1))
        return 0
    cmd = [sys.executable, __file__, args.what, "--pairs", str(args.pairs), "--seed", str(args.seed)]
    env = {**os.environ, "PYTHONPATH": str(args.against.resolve())}
    other = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    print(json.dumps({"this": out, "against": other, "against_checkout": str(args.against)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
