"""Benchmark how much slower the simulation itself runs while its trace is written beside it, by the writer's stage.

``bench_tracer.py --stages`` splits a traced recording's *wall* time by how far the writer process goes.  This
splits the simulating process's own *CPU time outside the hand-over calls* (``ProcessEmitter.submit``, ``pump``
and ``close`` are timed and left out): what the writer's presence costs the simulation on the other CPU, through
the caches, memory and the host.  Every mode runs in this one process, alternating, after a warm-up run:

* ``none``: untraced (the reference);
* ``copy``: no writer process; each chunk's columns are copied into a shared-memory ring here and dropped (what
  the hand-over's copy alone does to the simulation's caches);
* ``noread``: a writer process that acknowledges each chunk without reading it;
* ``receive``: one that copies each chunk out of the ring and drops it;
* ``build``: one that also builds the tables but does not write the big ones;
* ``traced``: a normal recording.

The writer's stages come from ``benchmarks/writer_stages/sitecustomize.py`` (``TRNPROF_BENCH_WRITER_STAGE``).

    .venv/bin/python benchmarks/bench_tracer_interference.py                          # matmul_rowload at 4x
    .venv/bin/python benchmarks/bench_tracer_interference.py --kernel softmax --reps 8
    .venv/bin/python benchmarks/bench_tracer_interference.py --chunk 4096             # a chunk every 4096 instructions
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tracer import CASES, scaled

MODES = ("none", "copy", "noread", "receive", "build", "traced")
STAGE_HOOKS = Path(__file__).resolve().parent / "writer_stages"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="matmul_rowload", choices=[c[0] for c in CASES])
    parser.add_argument("--scale", type=int, default=4, help="recording length, as bench_tracer.py --scale")
    parser.add_argument("--reps", type=int, default=10, help="runs per mode")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--chunk", type=int, default=None,
                        help="hand a chunk over every this many instructions (default: every 50 ms)")
    args = parser.parse_args(argv)
    if "none" not in args.modes:
        parser.error("--modes needs none (the reference)")

    from tracer.sim import core as core_module
    from tracer.sim import emit_process, emit_ring, malloc_tuning, run_kernel, runner

    malloc_tuning.tune_this_process()  # as trnprof record does
    if args.chunk is not None:
        core_module.CHUNK_INSTRUCTIONS, core_module.HANDOFF_INTERVAL_S, core_module.END_WINDOW_S = \
            args.chunk, 1e9, -1.0
    inside = [0.0]

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **kw: Any) -> Any:
            c = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                inside[0] += time.process_time() - c
        return call

    for name in ("submit", "pump", "close"):
        setattr(emit_process.ProcessEmitter, name, timed(getattr(emit_process.ProcessEmitter, name)))

    class CopySink:
        """Copies each chunk's buffers into a ring (as ProcessEmitter.submit does) and drops them."""

        def __init__(self, core: Any, *_args: Any) -> None:
            self.ring = emit_ring.RingWriter()

        @timed
        def submit(self, chunk: Any) -> None:
            buffers, _header = emit_process.split_chunk(chunk)
            self.ring.put(buffers)
            self.ring.release(self.ring.head)

        def close(self, complete: bool, sources: Any = None) -> None:
            self.ring.close()

    real_open = runner._open_sink
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(STAGE_HOOKS), os.environ.get("PYTHONPATH")]))
    kernel, params, arch = next(c for c in CASES if c[0] == args.kernel)
    params = scaled(kernel, params, args.scale)
    run_kernel(kernel, params, arch=arch)  # warm-up: imports, the loop's compiled code
    cpu: dict[str, list[float]] = {m: [] for m in args.modes}
    in_calls: dict[str, list[float]] = {m: [] for m in args.modes}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for mode in args.modes:
                runner._open_sink = CopySink if mode == "copy" else real_open
                if mode in ("noread", "receive", "build"):
                    os.environ["TRNPROF_BENCH_WRITER_STAGE"] = mode
                else:
                    os.environ.pop("TRNPROF_BENCH_WRITER_STAGE", None)
                path = None if mode == "none" else Path(tmp) / f"{mode}{rep}.trace"
                inside[0] = 0.0
                c0 = time.process_time()
                run_kernel(kernel, params, arch=arch, trace_path=path)
                cpu[mode].append(time.process_time() - c0 - inside[0])
                in_calls[mode].append(inside[0])
    runner._open_sink = real_open
    base = statistics.median(cpu["none"])
    print(json.dumps({
        "kernel": kernel, "params": params, "reps": args.reps, "chunk": args.chunk,
        "cpu_s_outside_handover_median": {m: round(statistics.median(v), 4) for m, v in cpu.items()},
        "slower_than_untraced": {m: round(statistics.median(v) / base - 1, 4) for m, v in cpu.items()},
        "handover_calls_ms_median": {m: round(1e3 * statistics.median(v), 1) for m, v in in_calls.items()},
        "load_average_1min": round(os.getloadavg()[0], 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
