"""Where an untraced simulation's time goes, by sampling (py-spy), grouped by the fast path's layers.

cProfile distorts the fast path badly (it charges every one of the many small calls its own overhead: a run takes
2.6x as long under it, and dispatch looks dearer than it is).  This samples a fresh interpreter running the kernel
with py-spy (``pip install py-spy``; nothing of trnprof needs it) and groups the samples taken inside the kernel's
run:

* **match functions** -- the generated checks and live parts of each matched event (``<trnprof fast-path match>``);
* **API dispatch** -- the generated kernel-API methods that find the trie node for a call (``<string>``);
* **release path** -- a tile's ``__del__`` and the matcher's ``release_tile``;
* **expanded loop code** -- the compiled expansion of an ``nc.affine_range`` loop (``_expand``) itself;
* **commit** (inclusive) -- scheduling each segment: the compiled loop and the Python around it, span rows.

    .venv/bin/python benchmarks/bench_tracer_sampled.py softmax
    .venv/bin/python benchmarks/bench_tracer_sampled.py mlp --scale 4

The kernel runs three times in the child (the first warms the caches; all three are sampled, so the shares are of
steady runs and one warm-up).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tracer import CASES, scaled

CHILD = """
import sys, time
from tracer.sim.runner import run_kernel
params, arch = {params!r}, {arch!r}
for i in range(3):
    t = time.perf_counter(); r = run_kernel({kernel!r}, params, arch=arch)
    print(f"run {{i}}: {{r.instructions:,}} instructions in {{time.perf_counter() - t:.3f}} s", flush=True)
"""

GROUPS = {
    "match functions": lambda f: f.startswith("fn (<trnprof fast-path match>"),
    "API dispatch": lambda f: "(<string>)" in f,
    "release path": lambda f: "release_tile" in f or f.startswith("Tile.__del__"),
    "expanded loop code": lambda f: f.startswith("_expand ("),
}
INCLUSIVE = {"commit": "commit (tracer/sim/fastpath/commit.py)",
             "loop markers (commit points)": "FastPath.marker (tracer/sim/fastpath/controller.py)",
             "recording segments": "FastPath.record_call (tracer/sim/fastpath/controller.py)"}


def _frame(text: str) -> str:
    return re.sub(r":\d+\)$", ")", text)   # one entry per function, not per line


def aggregate(raw: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Samples inside ``_call_kernel``: their count, self counts and inclusive counts per function."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [_frame(f) for f in stack.split(";")]
        roots = [i for i, f in enumerate(frames) if f.startswith("_call_kernel (")]
        if not roots:
            continue
        frames = frames[roots[-1]:]
        n = int(count)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    return total, own, incl


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernel", choices=sorted(k for k, _p, _a in CASES))
    parser.add_argument("--scale", type=int, default=1, help="bench_tracer.py's --scale (default 1)")
    parser.add_argument("--rate", type=int, default=1000, help="samples per second (default 1000)")
    parser.add_argument("--top", type=int, default=15, help="functions listed by own time (default 15)")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("bench_tracer_sampled: needs py-spy (pip install py-spy)", file=sys.stderr)
        return 2
    base, arch = next((p, a) for k, p, a in CASES if k == args.kernel)
    params = scaled(args.kernel, base, args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "samples.txt"
        code = CHILD.format(kernel=args.kernel, params=params, arch=arch)
        subprocess.run([spy, "record", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--",
                        sys.executable, "-c", code], check=True)
        total, own, incl = aggregate(raw)
    if not total:
        print("no samples inside the kernel's run", file=sys.stderr)
        return 1
    print(f"{args.kernel} {params} on {arch}: {total:,} samples inside the run")
    for name, pick in GROUPS.items():
        print(f"  {name:30s} {100 * sum(n for f, n in own.items() if pick(f)) / total:5.1f}% (own time)")
    for name, frame in INCLUSIVE.items():
        print(f"  {name:30s} {100 * incl[frame] / total:5.1f}% (with what it calls)")
    print("own time by function:")
    for f, n in own.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
