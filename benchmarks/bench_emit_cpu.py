"""Benchmark the trace writer process's work alone: CPU time per simulated instruction to build and write the tables.

Records one kernel in this process with a sink that keeps every chunk the simulation hands over (the writer's
input), then runs, several times over the same chunks, exactly what the writer process runs on them: the
templates rebuilt from what the simulation sends (``emit_child._CoreView``), the
:class:`~tracer.sim.emitter.Emitter` and a one-thread :class:`~tracer.writer.TraceWriter`.  It reports the best
CPU time, without the process's start-up and the hand-over (``bench_tracer.py`` measures those, in whole
recordings).  The result does not depend on the other work on the machine as much as wall-clock ratios do, so two
checkouts can be compared by running this script in each (``PYTHONPATH=<checkout>``).  ``--chunk`` hands over a
chunk every that many instructions instead of every 50 ms (the per-chunk cost shows as the difference).

    .venv/bin/python benchmarks/bench_emit_cpu.py                                 # matmul_rowload at 4x
    .venv/bin/python benchmarks/bench_emit_cpu.py --kernel attention --chunk 8192
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracer.sim import core as core_module
from tracer.sim import malloc_tuning, run_kernel, runner
from tracer.sim.emit_child import _CoreView
from tracer.sim.emit_process import encode_template
from tracer.sim.emitter import Emitter
from tracer.writer import TraceWriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tracer import CASES, scaled


def capture(kernel: str, params: dict, arch: str, chunk: int | None) -> tuple[Any, list[Any]]:
    """Run the kernel once; the chunks it hands over, and the writer's view of its templates as the writer process
    rebuilds it."""
    chunks: list[Any] = []
    cores: list[Any] = []

    class Keep:
        def submit(self, ch: Any) -> None:
            chunks.append(ch)

        def close(self, complete: bool, sources: Any = None) -> None:
            pass

    real_open = runner._open_sink
    saved = (core_module.CHUNK_INSTRUCTIONS, core_module.HANDOFF_INTERVAL_S, core_module.END_WINDOW_S)
    runner._open_sink = lambda core, *a, **k: (cores.append(core), Keep())[1]
    if chunk is not None:  # every `chunk` instructions, never by time
        core_module.CHUNK_INSTRUCTIONS, core_module.HANDOFF_INTERVAL_S, core_module.END_WINDOW_S = chunk, 1e9, -1.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run_kernel(kernel, params, arch=arch, trace_path=Path(tmp) / "unused.trace")
    finally:
        runner._open_sink = real_open
        core_module.CHUNK_INSTRUCTIONS, core_module.HANDOFF_INTERVAL_S, core_module.END_WINDOW_S = saved
    core = cores[0]
    view = _CoreView(core.cm)
    view.add([encode_template(t) for t in core.templates])
    view.names.extend(core.names)
    view.variants.extend(SimpleNamespace(uid=v.uid, emit_table=v.emit_table) for v in core.variants)
    view.stream_names = list(core.stream_names)
    return view, chunks


def replay(view: Any, chunks: list[Any], out: Path) -> float:
    """CPU seconds to write ``chunks`` as the writer process does (its emitter and one-thread writer)."""
    if out.exists():
        shutil.rmtree(out)
    t0 = time.process_time()
    writer = TraceWriter(out, metadata={}, background_flush=False, compression_threads=False)
    emitter = Emitter(view, writer, threaded=False)
    for ch in chunks:
        emitter.emit(ch)
    writer.close(complete=True)
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="matmul_rowload", choices=[c[0] for c in CASES])
    parser.add_argument("--scale", type=int, default=4, help="recording length, as bench_tracer.py --scale")
    parser.add_argument("--chunk", type=int, default=None, help="instructions per chunk (default: every 50 ms)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    malloc_tuning.tune_this_process()  # as the writer process runs (its environment)
    kernel, params, arch = next(c for c in CASES if c[0] == args.kernel)
    params = scaled(kernel, params, args.scale)
    view, chunks = capture(kernel, params, arch, args.chunk)
    n = sum(len(c) for c in chunks)
    with tempfile.TemporaryDirectory() as tmp:
        times = [replay(view, chunks, Path(tmp) / "t.trace") for _ in range(args.repeat)]
    best = min(times)
    print(json.dumps({"kernel": kernel, "params": params, "instructions": n, "chunks": len(chunks),
                      "chunk": args.chunk, "cpu_s_best": round(best, 3), "cpu_s_all": [round(t, 3) for t in times],
                      "us_per_instruction": round(best / n * 1e6, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
