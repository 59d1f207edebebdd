"""Regenerate the bundled sample traces (deterministic: the same inputs give the same table contents).

    .venv/bin/python sample_traces/make_samples.py            # all samples
    .venv/bin/python sample_traces/make_samples.py mlp-trn2   # some of them
"""

from __future__ import annotations

import argparse
import sys

from tracer.samples import SAMPLES, make_sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="samples to rebuild (default: all)")
    args = parser.parse_args(argv)
    known = {s.name: s for s in SAMPLES}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"unknown sample(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    for sample in [known[n] for n in args.names] or SAMPLES:
        path = make_sample(sample)
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"{sample.name:<24} {size / 1e6:6.2f} MB  {sample.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
