"""``trnprof synth``: write a synthetic trace of any size (benchmarks, demos)."""

from __future__ import annotations

import argparse
import sys
import time

from tqdm import tqdm

from profiler.synth import TRACKS_PER_CORE, synth_trace


class SynthCommand:
    """Write a synthetic trace directory: per core 5 engines of sequential instructions and 16 DMA queues of
    overlapping packets, with bursts, idle gaps, layers and operators.  Generated in chunks (bounded memory).
    """

    name = "synth"
    help = "write a synthetic trace"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--events", type=int, required=True, help="instructions + DMA packets to write")
        parser.add_argument("--tracks", type=int, default=TRACKS_PER_CORE,
                            help=f"engine + DMA queue tracks, {TRACKS_PER_CORE} per core (default: one core)")
        parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
        parser.add_argument("-o", "--output", required=True, help="trace directory to create")
        parser.add_argument("--force", action="store_true", help="replace an existing trace")

    def run(self, args: argparse.Namespace) -> int:
        t0 = time.perf_counter()
        with tqdm(total=args.events, unit="ev", unit_scale=True, leave=False, file=sys.stderr,
                  disable=not sys.stderr.isatty()) as bar:
            def progress(done: int, total: int) -> None:
                bar.n = done
                bar.refresh()

            synth_trace(args.output, args.events, args.tracks, args.seed, overwrite=args.force, progress=progress)
        print(f"{args.output}: {args.events:,} events on {args.tracks} tracks "
              f"({time.perf_counter() - t0:.1f} s)")
        return 0


COMMAND = SynthCommand()
