"""Benchmark the Chrome trace JSON importer side by side with HolisticTraceAnalysis (HTA) loading the same file.

A synthetic PyTorch-profiler-shaped trace is generated (Kineto's event shapes and sizes: nested CPU operators,
``cudaLaunchKernel`` runtime calls, GPU kernels on two streams, ``ac2g`` flow pairs, metadata), then each loader
runs in its own process, timed from outside, with its peak RSS taken from ``wait4``:

- ``trnprof``: :class:`profiler.importers.chrome_json.ChromeJsonSource` read to the end (every table produced),
  with the compiled JSON kernel (the default for inputs of 32 MiB and more), loaded from numba's on-disk cache
  (warmed once before the runs);
- ``trnprof-nocache``: the same with an empty numba cache (``NUMBA_CACHE_DIR`` set to a new directory), so the
  kernels are compiled in the run, as on the first import after an install;
- ``trnprof-vectorised``: the same with ``TRNPROF_JSON_KERNEL=0`` (the numpy scanner only, as before the kernel);
- ``trnprof-ingest``: ``profiler.open`` — the importer plus the DuckDB ingest and index;
- ``hta``: ``hta.trace_analysis.TraceAnalysis`` with its default JSON parser backend;
- ``hta-ijson``: HTA with its streaming ``ijson_batch_and_compress`` backend.

Times: ``wall`` and ``cpu`` are the child process from outside (interpreter start-up and imports included, as for
HTA); ``read`` (and ``read_cpu``) is the import alone, timed inside the child from the first byte to the last
batch, after the imports (``imports``) and the kernel's load or compilation (``kernel``); ``main_cpu``,
``scan_thread_cpu`` and ``end_pass_cpu`` split the import's CPU time between the main thread (decoding, filing,
then the end-of-input pass, which is also given alone) and the background thread that reads and parses.  The
1-minute load average when each run started is recorded (the machine may be shared).

HTA is not a dependency of trnprof: install it in a separate virtualenv and pass its interpreter::

    python3 -m venv /work/hta-venv && /work/hta-venv/bin/pip install holistictraceanalysis ijson
    .venv/bin/python benchmarks/bench_import.py --events 1000000 --hta-python /work/hta-venv/bin/python --repeat 3
    .venv/bin/python benchmarks/bench_import.py --events 10000000 --loaders trnprof,trnprof-ingest

``--real DIR`` also times the real traces in DIR (e.g. tests/data/pytorch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Events per "iteration" of the synthetic pattern: see _iteration.
_OPS_PER_STEP = 40


def _iteration(step: int, t0: int, corr0: int) -> tuple[list[str], int, int]:
    """One profiler step as Kineto writes it: a ProfilerStep slice, nested operators, launches, kernels, flows."""
    ev = []
    cpu = '"pid": 4037, "tid": 4037'
    gpu = '"pid": 0, "tid": {stream}'
    t = t0
    ev.append(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", {cpu}, "ts": {t}.000, '
              f'"dur": {_OPS_PER_STEP * 30 + 10}.250, "args": {{"External id": {corr0}, "Record function id": 0, '
              f'"Ev Idx": {corr0}}}}}')
    corr = corr0
    gpu_t = t + 20
    for j in range(_OPS_PER_STEP):
        t += 1
        corr += 1
        op = ("aten::linear", "aten::relu", "aten::add", "aten::mm", "aten::copy_")[j % 5]
        ev.append(f'{{"ph": "X", "cat": "cpu_op", "name": "{op}", {cpu}, "ts": {t}.125, "dur": 27.500, '
                  f'"args": {{"External id": {corr}, "Record function id": 0, "Ev Idx": {corr}, '
                  f'"Input Dims": [[64, 1024], [1024, 1024], []], "Input type": ["float", "float", ""], '
                  f'"Sequence number": {corr}, "Fwd thread id": 0}}}}')
        ev.append(f'{{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", {cpu}, "ts": {t + 2}.375, "dur": 20.125, '
                  f'"args": {{"External id": {corr}, "Ev Idx": {corr}, "Input Dims": [[1024], [64, 1024]], '
                  f'"Input type": ["float", "float"]}}}}')
        ev.append(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", {cpu}, "ts": {t + 5}.500, '
                  f'"dur": 8.750, "args": {{"External id": {corr}, "cbid": 211, "correlation": {corr}}}}}')
        ev.append(f'{{"ph": "s", "id": {corr}, {cpu}, "ts": {t + 5}.500, "cat": "ac2g", "name": "ac2g"}}')
        stream = 7 if j % 4 else 20
        kt = max(gpu_t, t + 16)
        ev.append(f'{{"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float, 128, 64>(Params)", '
                  f'{gpu.format(stream=stream)}, "ts": {kt}.000, "dur": 21.000, "args": {{"External id": {corr}, '
                  f'"queued": 0, "device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, '
                  f'"registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.2, '
                  f'"warps per SM": 4.8, "grid": [128, 4, 1], "block": [128, 1, 1], '
                  f'"est. achieved occupancy %": 6}}}}')
        ev.append(f'{{"ph": "f", "id": {corr}, {gpu.format(stream=stream)}, "ts": {kt}.000, "cat": "ac2g", '
                  f'"name": "ac2g", "bp": "e"}}')
        gpu_t = kt + 22
        t += 29
    return ev, max(t, gpu_t) + 50, corr + 1


def generate(path: Path, events: int) -> int:
    """Write a synthetic Kineto-shaped trace with about ``events`` events; returns the exact count."""
    header = ('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, '
              '"deviceProperties": [{"id": 0, "name": "NVIDIA A100", "totalGlobalMem": 42297524224}], '
              '"traceEvents": [\n')
    meta = [
        '{"ph": "M", "name": "process_name", "pid": 4037, "tid": 0, "ts": 0, "args": {"name": "python3.10"}}',
        '{"ph": "M", "name": "process_labels", "pid": 4037, "tid": 0, "ts": 0, "args": {"labels": "CPU"}}',
        '{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 0, "args": {"name": "python3.10"}}',
        '{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "ts": 0, "args": {"labels": "GPU 0"}}',
        '{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "ts": 0, "args": {"name": "stream 7 "}}',
        '{"ph": "M", "name": "thread_name", "pid": 0, "tid": 20, "ts": 0, "args": {"name": "stream 20 "}}',
    ]
    count = len(meta)
    t, corr, step = 1_695_835_572_000_000, 1, 0
    with open(path, "w") as f:
        f.write(header)
        f.write(",\n".join(meta))
        while count < events:
            ev, t, corr = _iteration(step, t, corr)
            f.write(",\n")
            f.write(",\n".join(ev))
            count += len(ev)
            step += 1
        f.write('\n], "traceName": "synthetic"}\n')
    return count


# -- loaders (run in a child process) ---------------------------------------------------------------------------
_TRNPROF = """
import json, sys, time, warnings
t0 = time.perf_counter()
warnings.simplefilter("ignore")
from pathlib import Path
from profiler.importers import chrome_build, chrome_json, json_kernel
from profiler.importers.json_stream import kernel_pays_off
t1 = time.perf_counter()
kernel = kernel_pays_off(Path(sys.argv[1])) and json_kernel.available()   # numba import + load or compile
t2 = time.perf_counter()
c2, m2 = time.process_time(), time.thread_time()
# Per-thread CPU: the background thread that reads and parses (the kernel), and the main thread's end-of-input pass.
cpu = {}
_prefetched, _finish = chrome_json.prefetched, chrome_build.ChromeTraceBuilder.finish
def prefetched(items, **kwargs):
    def timed():
        s = time.thread_time()
        try:
            yield from items
        finally:
            cpu["scan_thread_cpu_s"] = time.thread_time() - s
    return _prefetched(timed(), **kwargs)
def finish(self, complete=True):
    s = time.thread_time()
    yield from _finish(self, complete)
    cpu["end_pass_cpu_s"] = time.thread_time() - s
chrome_json.prefetched, chrome_build.ChromeTraceBuilder.finish = prefetched, finish
rows = 0
for name, batch in chrome_json.ChromeJsonSource(sys.argv[1]).read():
    rows += batch.num_rows
print(json.dumps({"imports_s": t1 - t0, "kernel_s": t2 - t1, "read_s": time.perf_counter() - t2,
                  "read_cpu_s": time.process_time() - c2, "main_cpu_s": time.thread_time() - m2, **cpu,
                  "kernel": kernel, "rows": rows}))
"""
_TRNPROF_INGEST = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import profiler
t0 = time.perf_counter()
with profiler.open(sys.argv[1], force=True) as t:
    n = t.sql("select count(*) from slice").fetchall()[0][0]
print(json.dumps({"read_s": time.perf_counter() - t0, "rows": n}))
"""
_HTA = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.common.trace_parser import set_default_trace_parsing_backend
from hta.configs.parser_config import ParserBackend
set_default_trace_parsing_backend(ParserBackend(sys.argv[2]))
from hta.trace_analysis import TraceAnalysis
import json
a = TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps({"rows": sum(len(df) for df in a.t.traces.values())}))
"""


def run_loader(kind: str, path: Path, hta_python: str | None) -> dict[str, float]:
    """Run one loader in a child process: wall and CPU seconds and peak RSS (MiB) of it and its children (from
    ``wait4``), the load average when it started, and what the child reports (its import time, ...)."""
    if kind.startswith("hta"):
        if not hta_python:
            raise SystemExit("--hta-python is required for the HTA loaders")
        backend = "json" if kind == "hta" else "ijson_batch_and_compress"
        cmd = [hta_python, "-c", _HTA, str(path.parent), backend]
    else:
        code = _TRNPROF_INGEST if kind == "trnprof-ingest" else _TRNPROF
        cmd = [sys.executable, "-c", code, str(path)]
    env = dict(os.environ)
    if kind == "trnprof-vectorised":
        env["TRNPROF_JSON_KERNEL"] = "0"
    cache = None
    if kind == "trnprof-nocache":
        # An empty numba cache: the kernels are compiled in this run, as on the first import after an install.
        cache = tempfile.mkdtemp(prefix="trnprof-numba-cache-")
        env["NUMBA_CACHE_DIR"] = cache
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out = proc.stdout.read().decode().strip() if proc.stdout else ""
        err = proc.stderr.read().decode().strip() if proc.stderr else ""
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
    if status != 0:
        raise SystemExit(f"{kind} failed ({status}): {err[-2000:]}")
    report = json.loads(out.splitlines()[-1])
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
            "load_avg": load, **report}


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def measure(path: Path, events: int, loaders: list[str], *, repeat: int, hta_python: str | None,
            hta_repeat: int | None = None) -> dict:
    """Run the loaders in turn (interleaved, ``repeat`` rounds, HTA ``hta_repeat`` of them); medians per loader.

    ``read_s`` is the import alone, timed inside the child (after start-up, imports and the kernel's load or
    compilation, which are ``imports_s`` and ``kernel_s``); ``wall_s`` is the whole child process from outside.
    """
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in loaders}
    for i in range(repeat):
        for kind in loaders:
            if kind.startswith("hta") and hta_repeat is not None and i >= hta_repeat:
                continue
            runs[kind].append(run_loader(kind, path, hta_python))
            print(f"{path.name} {kind}: {runs[kind][-1]}", file=sys.stderr, flush=True)
    out: dict[str, dict] = {}
    for kind, rs in runs.items():
        if not rs:
            continue
        med = {k: _median(rs, k) for k in ("wall_s", "cpu_s", "read_s", "read_cpu_s", "imports_s", "kernel_s",
                                           "main_cpu_s", "scan_thread_cpu_s", "end_pass_cpu_s")}
        row = {k: round(v, 3) for k, v in med.items() if v is not None}
        row["best_wall_s"] = round(min(r["wall_s"] for r in rs), 3)
        if med["read_s"] is not None:
            row["best_read_s"] = round(min(r["read_s"] for r in rs), 3)
            row["import_events_per_s"] = round(events / med["read_s"])
            row["best_import_events_per_s"] = round(events / row["best_read_s"])
        if med["read_cpu_s"] is not None:
            row["import_events_per_cpu_s"] = round(events / med["read_cpu_s"])
        row["events_per_s"] = round(events / med["wall_s"])
        row["peak_rss_mib"] = round(max(r["peak_rss_mib"] for r in rs))
        row["load_avg"] = [round(min(r["load_avg"] for r in rs), 2), round(max(r["load_avg"] for r in rs), 2)]
        row["runs"] = len(rs)
        row["rows"] = rs[0]["rows"]
        out[kind] = row
    for base in ("hta", "hta-ijson"):
        if base in out and "trnprof" in out:
            out[f"ratio_{base}_over_trnprof"] = {
                "wall": round(out[base]["wall_s"] / out["trnprof"]["wall_s"], 1),
                "cpu": round(out[base]["cpu_s"] / out["trnprof"]["cpu_s"], 1),
                "peak_rss": round(out[base]["peak_rss_mib"] / out["trnprof"]["peak_rss_mib"], 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="synthetic trace size (events)")
    ap.add_argument("--loaders", default="trnprof,trnprof-nocache,trnprof-vectorised,trnprof-ingest,hta,hta-ijson")
    ap.add_argument("--hta-python", help="python of a virtualenv with holistictraceanalysis and ijson")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hta-repeat", type=int, help="rounds for the (slow) HTA loaders (default: --repeat)")
    ap.add_argument("--real", type=Path, help="also time the *.json.gz traces in this directory")
    ap.add_argument("--keep", type=Path, help="directory to keep the generated trace in (default: temporary)")
    args = ap.parse_args()
    loaders = args.loaders.split(",")
    if "trnprof" in loaders:
        # Fill numba's default on-disk cache, so that ``trnprof`` runs load the kernels instead of compiling them.
        subprocess.run([sys.executable, "-c", "from profiler.importers import json_kernel; json_kernel.available()"],
                       check=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="trnprof-bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    try:
        trace_dir = work / f"synthetic-{args.events}"
        trace_dir.mkdir(exist_ok=True)
        path = trace_dir / "rank-0.json"
        if not path.exists():
            t0 = time.perf_counter()
            n = generate(path, args.events)
            print(f"generated {n:,} events, {path.stat().st_size / 2**20:,.0f} MiB in {time.perf_counter() - t0:.1f}s",
                  file=sys.stderr)
        with open(path) as f:
            n = sum(1 for _ in f) - 2   # one event per line
        results["synthetic"] = {"events": n, "mib": round(path.stat().st_size / 2**20),
                                "loaders": measure(path, n, loaders, repeat=args.repeat, hta_python=args.hta_python,
                                                  hta_repeat=args.hta_repeat)}
        for real in sorted(args.real.glob("*.json.gz")) if args.real else []:
            d = work / real.name.removesuffix(".json.gz")
            d.mkdir(exist_ok=True)
            shutil.copy(real, d / real.name)
            import gzip

            with gzip.open(real) as f:
                count = len(json.load(f)["traceEvents"])
            results[real.name] = {"events": count, "mib": round(real.stat().st_size / 2**20, 2),
                                  "loaders": measure(d / real.name, count, loaders, repeat=args.repeat,
                                                                  hta_python=args.hta_python,
                                                                  hta_repeat=args.hta_repeat)}
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
