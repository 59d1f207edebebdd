"""``trnprof gaps``: idle gaps per engine (and of the DMA queues together), longest first, with their causes."""

from __future__ import annotations

import argparse

from profiler.analyses.idle_gaps import GAPS_FOUND, idle_gaps
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    note_merged_cores,
    open_trace,
    output_limit,
    print_table,
)
from profiler.cli._progress import working
from profiler.errors import CommandError


class GapsCommand:
    """Idle gaps: stretches where an engine did nothing, ranked by length, each with its cause — what the
    engine's next instruction waited for (an instruction on another engine, a DMA queue), or that nothing had been
    issued to it, or that its work had ended.  DMA stands for all DMA queues together."""

    name = "gaps"
    help = "idle gaps per engine, longest first, with their causes"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--engine", action="append", metavar="NAME",
                            help="engine to look at (repeatable: Tensor, Vector, Scalar, GpSimd, Sync, DMA; "
                                 "default: all that worked)")
        parser.add_argument("--min-ns", type=int, default=0, metavar="NS", help="leave out shorter gaps")
        add_format_arguments(parser, limit=20)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        if args.min_ns < 0:
            raise CommandError(f"--min-ns must be non-negative, not {args.min_ns}")
        with open_trace(args.db) as trace, working("finding the idle gaps and their causes"):
            note_merged_cores(trace, args.core)
            # only the gaps printed get their causes worked out (3.66 M gaps on 10^7 events: 16 s against 12.7 s)
            table = idle_gaps(trace, args.start, args.end, args.core, engines=args.engine, min_ns=args.min_ns,
                              limit=limit)
        print_table(table, args.format, limit)
        found = int((table.schema.metadata or {}).get(GAPS_FOUND.encode(), table.num_rows))
        if args.format == "table" and found > table.num_rows:
            print(f"({table.num_rows} of {found:,} rows; --limit 0 shows all)")
        return 0


COMMAND = GapsCommand()
