"""``trnprof waits``: what the engines waited for (semaphore waits resolved through Flow), per engine or per wait."""

from __future__ import annotations

import argparse

from profiler.analyses.waits import dependency_waits, wait_sentences, wait_summary
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


class WaitsCommand:
    """Dependency waits: for every semaphore wait, the instruction or DMA queue it waited for.

    By default the waits are summed per (waiting engine, what it waited on) — "Tensor spent 41% of its time
    waiting on DMA queue qSyncIO2".  --detail lists every wait instead.
    """

    name = "waits"
    help = "what each engine waited for (dependency waits)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--detail", action="store_true", help="list every wait, not the totals")
        parser.add_argument("--queue-groups", action="store_true",
                            help="count the queues of a group (qSyncIO0..15) as one (qSyncIO)")
        add_format_arguments(parser, limit=20)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        with open_trace(args.db) as trace, working("adding up the waits"):
            note_merged_cores(trace, args.core)
            if args.detail:
                print_table(dependency_waits(trace, args.start, args.end, args.core), args.format, limit)
                return 0
            summary = wait_summary(trace, args.start, args.end, args.core, queue_groups=args.queue_groups)
        if args.format == "table":
            for sentence in wait_sentences(summary, 5):
                print(sentence)
            if summary.num_rows:
                print()
        print_table(summary, args.format, limit)
        return 0


COMMAND = WaitsCommand()
