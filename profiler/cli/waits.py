"""``trnprof waits``: what the engines waited for (semaphore waits resolved through Flow), per engine or per wait."""

from __future__ import annotations

import argparse
import sys
from typing import Any

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
            notes = _notes(trace)
        if args.format == "table":
            for sentence in wait_sentences(summary, 5):
                print(sentence)
            if summary.num_rows:
                print()
        print_table(summary, args.format, limit)
        for note in notes:
            print(f"trnprof: note: {note}", file=sys.stderr)
        return 0


def _notes(trace: Any) -> list[str]:
    """What the trace does not record that the waits need (a Neuron profile has no Flow table)."""
    from profiler.db.sqlutil import quote
    from tracer import schema as ts

    waits = trace.sql(f"SELECT count({quote(ts.EVT_WAIT_TIME_NS)}) FROM {quote(ts.INSTRUCTION.name)}").fetchall()
    if not waits[0][0]:
        return ["the trace records no semaphore waits (Instruction.evt_wait_time_ns), so there is nothing to "
                "attribute"]
    if not trace.sql(f"SELECT 1 FROM {quote(ts.FLOW.name)} LIMIT 1").fetchall():
        return ["the trace has no Flow rows (dependencies, which Neuron profiles do not record), so what each wait "
                "waited for is unknown"]
    return []


COMMAND = WaitsCommand()
