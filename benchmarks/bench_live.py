"""Benchmark following a recording while it runs (``profiler.live.LiveTrace``, what the dashboard does).

Each pair records the same kernel twice with ``trnprof record`` in a child process, in alternating order: once
alone, once while this process follows it as the dashboard would (look at the directory every
``dashboard.live_view.POLL_MS``, re-ingest when due, in a thread of its own).  It reports:

- the recording's wall time alone and followed, and their ratio (what following costs the recording, on the
  machine's shared CPUs);
- per follow: the reads made, each read's rows and duration (or "given up": the recording ended during it, and
  the last read started at once), and the *lag*: the longest time rows flushed to disk waited before a read showed
  them (from a change of the directory to the end of the read that took it in), and from the recording's end to
  the complete trace being shown.

    .venv/bin/python benchmarks/bench_live.py                       # mlp, 3 pairs
    .venv/bin/python benchmarks/bench_live.py --kernel softmax -p rows=2097152 -p cols=1024 --arch trn1
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dashboard.live_view import POLL_MS  # noqa: E402
from profiler.live import LiveTrace, input_signature  # noqa: E402
from tracer.trace_dir import METADATA_FILE_NAME  # noqa: E402


def record(kernel: str, params: list[str], arch: str, out: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "profiler", "record", kernel, "--arch", arch, "-q", "-o", str(out)]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)


def follow(out: Path, proc: subprocess.Popen[bytes], result: dict) -> None:
    """Follow the recording at ``out`` until it is complete and shown (the dashboard's loop, without Dash)."""
    while not (out / METADATA_FILE_NAME).exists():
        time.sleep(0.01)
    live = LiveTrace(out)
    reads = [(live.status().instructions, live.status().last_refresh_s or 0.0)]
    changed_at: float | None = None
    last_sig = input_signature(out)
    lag = 0.0
    try:
        while True:
            now = time.monotonic()
            sig = input_signature(out)
            if sig != last_sig and changed_at is None:
                changed_at = now      # the oldest change not shown yet
            last_sig = sig
            if live.poll():
                started = changed_at
                changed_at = None
                swapped = live.refresh()
                st = live.status()
                # a read given up (the recording ended during it) shows as None instructions
                reads.append((st.instructions if swapped else None, st.last_refresh_s or 0.0))
                if not swapped:
                    changed_at = started   # (its changes are still not shown)
                elif started is not None:
                    lag = max(lag, time.monotonic() - started)
                if st.complete:
                    result["shown_complete_at"] = time.monotonic()
                    break
            time.sleep(POLL_MS / 1000)
    finally:
        live.close()
    result["reads"] = reads
    result["lag_s"] = lag


def one(kernel: str, params: list[str], arch: str, followed: bool, work: Path) -> dict:
    out = work / f"{'followed' if followed else 'alone'}.trace"
    shutil.rmtree(out, ignore_errors=True)
    for f in work.glob(out.name + ".trnprof*"):
        f.unlink()
    result: dict = {}
    t0 = time.monotonic()
    proc = record(kernel, params, arch, out)
    thread = None
    if followed:
        thread = threading.Thread(target=follow, args=(out, proc, result))
        thread.start()
    proc.wait()
    result["record_s"] = time.monotonic() - t0
    ended = time.monotonic()
    if thread is not None:
        thread.join()
        result["complete_after_end_s"] = result["shown_complete_at"] - ended
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="mlp")
    parser.add_argument("-p", action="append", dest="params", default=None)
    parser.add_argument("--arch", default="trn1")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    params = args.params if args.params is not None else ["layers=1500"]
    work = Path(tempfile.mkdtemp(prefix="trnprof-bench-live-"))
    alone, followed, runs = [], [], []
    try:
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            for f in order:
                r = one(args.kernel, params, args.arch, f, work)
                (followed if f else alone).append(r["record_s"])
                if f:
                    runs.append(r)
                    sizes = ", ".join(f"{n:,} in {s:.2f} s" if n is not None else f"given up after {s:.2f} s"
                                      for n, s in r["reads"])
                    print(f"followed: recording {r['record_s']:.2f} s; reads (instructions, duration): {sizes}; "
                          f"longest lag {r['lag_s']:.2f} s; complete shown {r['complete_after_end_s']:.2f} s "
                          "after the recording ended")
                else:
                    print(f"alone:    recording {r['record_s']:.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    a, f = statistics.median(alone), statistics.median(followed)
    print(f"\n{args.kernel} {' '.join(params)} ({args.arch}), {args.pairs} pairs: recording alone {a:.2f} s, followed "
          f"{f:.2f} s (median), ratio {f / a:.2f}; reads per follow {statistics.median(len(r['reads']) for r in runs)}"
          f", longest lag {max(r['lag_s'] for r in runs):.2f} s, complete shown "
          f"{statistics.median(r['complete_after_end_s'] for r in runs):.2f} s after the end (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
