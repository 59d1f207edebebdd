"""``trnprof synth``: write a synthetic trace of any size (benchmarks, demos)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from tqdm import tqdm

from profiler.cli import int_arg, seed_arg
from profiler.errors import CommandError
from profiler.synth import TRACKS_PER_CORE, synth_trace

#: Most events one run writes (about 2 TB and two days of generating).
MAX_EVENTS = 100_000_000_000
#: Trace bytes per event, rounded up: measured 12.3-16.1 B/event (2e5-2e6 events, 1-100000 tracks).
BYTES_PER_EVENT = 20
#: Bytes of a trace besides its events (metadata, layer spans, Arrow framing; measured under 50 kB), rounded up.
BYTES_FIXED = 1 << 20


def _size_text(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def check_free_space(output: str, events: int) -> None:
    """CommandError when the trace of ``events`` events would not fit on the filesystem of ``output``."""
    where = Path(output).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    need = events * BYTES_PER_EVENT + BYTES_FIXED
    if need > free:
        raise CommandError(f"--events {events:,}: the trace would take about {_size_text(need)} but {where} has "
                           f"{_size_text(free)} free; write fewer events or choose another output directory (-o)")


class SynthCommand:
    """Write a synthetic trace directory: per core 5 engines of sequential instructions and 16 DMA queues of
    overlapping packets, with bursts, idle gaps, layers and operators.  Generated in chunks (bounded memory).
    """

    name = "synth"
    help = "write a synthetic trace"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--events", type=int_arg("a number of events", 1, MAX_EVENTS), required=True,
                            help="instructions + DMA packets to write (about 20 bytes each on disk)")
        parser.add_argument("--tracks", type=int_arg("a number of tracks", 1, 100_000), default=TRACKS_PER_CORE,
                            help=f"engine + DMA queue tracks, {TRACKS_PER_CORE} per core (default: one core)")
        parser.add_argument("--seed", type=seed_arg, default=0,
                            help="random seed, 0 or more (default: 0)")
        parser.add_argument("-o", "--output", required=True, help="trace directory to create")
        parser.add_argument("--force", action="store_true", help="replace an existing trace")

    def run(self, args: argparse.Namespace) -> int:
        check_free_space(args.output, args.events)
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
