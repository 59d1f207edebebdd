"""``trnprof memory``: SBUF and PSUM use of a simulator recording -- peak live bytes, when, what was accessed."""

from __future__ import annotations

import argparse

from profiler.analyses import schema as rs
from profiler.analyses.memory_map import MEMORIES, live_series, memory_map, memory_maps, summary_table
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    open_trace,
    print_json,
    print_table,
)
from profiler.cli._progress import working
from profiler.errors import CommandError
from profiler.figures.memory_map import headline


def _columns(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of time columns, not {text[:40]!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"--over-time takes 1 to 10000 columns, not {value}")
    return value


class MemoryCommand:
    """On-chip memory use: for SBUF and PSUM, the most bytes per partition holding live data (written and read
    later) at any moment, its share of the capacity and when, and the distinct bytes the instructions and DMA
    transfers accessed.  --over-time N lists the live bytes over N equal slices of the window instead.  The map
    itself is the dashboard's memory page (``trnprof serve``) or ``Trace.memory_figure()``.
    """

    name = "memory"
    help = "SBUF/PSUM use: peak live bytes, when, and the bytes accessed"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--mem", choices=MEMORIES, help="one memory (default: both)")
        parser.add_argument("--over-time", type=_columns, metavar="N",
                            help="list the most live bytes in each of N slices of the window (needs --mem)")
        add_format_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        mems = (args.mem,) if args.mem else MEMORIES
        with open_trace(args.db) as trace, working("mapping the memory"):
            if args.over_time is not None:
                if not args.mem:
                    raise CommandError("--over-time needs --mem SBUF or --mem PSUM")
                mm = memory_map(trace, args.mem, args.start, args.end, width=args.over_time, height=1,
                                core=args.core)
                print_table(live_series(mm), args.format)
                return 0
            maps = memory_maps(trace, args.start, args.end, width=1, height=1, core=args.core, mems=mems)
            origin = trace.time_range[0]
        if args.format == "table":
            for mm in maps:
                print(headline(mm, origin))
            return 0
        summary = summary_table(maps)
        if args.format == "json":
            print_json({row[rs.MEM]: row for row in summary.to_pylist()})
        else:
            print_table(summary, args.format)
        return 0


COMMAND = MemoryCommand()
