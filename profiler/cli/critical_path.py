"""``trnprof critical-path``: the chain of dependent work that sets the kernel's end (or, with ``--to``, one event's
start), and where its time goes."""

from __future__ import annotations

import argparse
import re

import pyarrow as pa

from profiler.analyses import schema as rs
from profiler.analyses.critical_path import chain_to, critical_path, critical_path_breakdown
from profiler.analyses.inputs import resolve_scope
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    open_trace,
    output_limit,
    print_table,
    window_text,
)
from profiler.cli._progress import working
from profiler.db.sqlutil import quote
from profiler.errors import CommandError
from profiler.trace import Trace
from tracer import schema as ts


class CriticalPathCommand:
    """The critical path through the dependency graph (instructions, DMA queue segments, Flow, stream order).

    By default prints the path's time per engine or DMA queue and opcode or tensor, with the gaps between steps
    per kind of dependency that held the step back (a DMA's trigger and its issue latency, a semaphore, ...);
    --steps lists the steps themselves (with track ids, for the timeline).  --to TABLE:ID does the same for the
    chain ending at one instruction or DMA packet: why it started when it did.
    """

    name = "critical-path"
    help = "the critical path and its time per engine and opcode"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--steps", action="store_true", help="list the path's steps instead of the breakdown")
        parser.add_argument("--to", type=event_ref, metavar="TABLE:ID",
                            help="the chain of dependent work ending at this event instead (Instruction:42, "
                                 "DmaPacket:7): why it started when it did")
        add_format_arguments(parser, limit=30)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        if args.to is not None and (args.start is not None or args.end is not None or args.core is not None):
            raise CommandError("--to follows one event's chain wherever it leads: leave out --start, --end and "
                               "--core")
        note = ""
        with open_trace(args.db) as trace, working("computing the critical path"):
            path = critical_path(trace, args.start, args.end, args.core) if args.to is None \
                else chain_to(trace, *args.to)
            if args.to is None and args.format == "table" and path.num_rows:
                note = _coverage_note(trace, path, args)
        if args.steps:
            print_table(path, args.format, limit)
            return 0
        breakdown = critical_path_breakdown(path)
        title = None
        if args.format == "table" and not path.num_rows:  # (an empty table alone said nothing)
            title = "critical path: 0 steps (no instruction or DMA transfer starts in the window)"
        if args.format == "table" and path.num_rows:
            first, last = path.column(rs.START_NS)[0].as_py(), path.column(rs.END_NS)[-1].as_py()
            busy = sum(path.column(rs.DUR_NS).to_pylist())
            what = "critical path" if args.to is None else f"chain to {args.to[0]} {args.to[1]}"
            title = (f"{what}: {path.num_rows:,} steps over {window_text(first, last)}, "
                     f"{100 * busy / max(last - first, 1):.1f}% of it busy\n{note}")
        print_table(breakdown, args.format, limit, title=title)
        return 0


#: Below this share of the window, the text says why the path is short.
SHORT_PATH = 0.5


def _coverage_note(trace: Trace, path: pa.Table, args: argparse.Namespace) -> str:
    """A line saying why the path covers little of the window, when it does and the trace records no dependency
    edges (a synthetic or imported trace without Flow rows: the path can only follow each engine's and queue's own
    order back from the last event); empty otherwise."""
    if trace.sql_arrow(f"SELECT 1 FROM {quote(ts.FLOW.name)} LIMIT 1").num_rows:  # any dependency edge at all
        return ""
    scope = resolve_scope(trace, args.start, args.end, args.core)
    first, last = path.column(rs.START_NS)[0].as_py(), path.column(rs.END_NS)[-1].as_py()
    share = (last - first) / max(scope.length_ns, 1)
    # said whatever the path covers (a Neuron profile's usually covers the window: one queue's own order)
    why = ("the trace has no Flow rows (dependencies, which Neuron profiles do not record), so the path follows "
           "only each engine's and queue's own order back from the last event to end\n")
    return f"it covers {100 * share:.1f}% of the window: {why}" if share < SHORT_PATH else f"note: {why}"


def event_ref(text: str) -> tuple[str, int]:
    """``TABLE:ID`` as ``(table, id)``; an argparse error otherwise."""
    found = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([0-9]{1,18})\s*", text)
    if found is None:
        raise argparse.ArgumentTypeError(f"expected TABLE:ID (Instruction:42, DmaPacket:7), not {text[:40]!r}")
    return found.group(1), int(found.group(2))


COMMAND = CriticalPathCommand()
