"""``trnprof critical-path``: the chain of dependent work that sets the kernel's end, and where its time goes."""

from __future__ import annotations

import argparse

from profiler.analyses import schema as rs
from profiler.analyses.critical_path import critical_path, critical_path_breakdown
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    check_limit,
    open_trace,
    print_table,
    window_text,
)


class CriticalPathCommand:
    """The critical path through the dependency graph (instructions, DMA queue segments, Flow, stream order).

    By default prints the path's time per engine or DMA queue and opcode or tensor, with the gaps between steps
    per kind of edge; --steps lists the steps themselves (with track ids, for the timeline).
    """

    name = "critical-path"
    help = "the critical path and its time per engine and opcode"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--steps", action="store_true", help="list the path's steps instead of the breakdown")
        add_format_arguments(parser, limit=30)

    def run(self, args: argparse.Namespace) -> int:
        limit = check_limit(args.limit)
        with open_trace(args.db) as trace:
            path = critical_path(trace, args.start, args.end, args.core)
        if args.steps:
            print_table(path, args.format, limit)
            return 0
        breakdown = critical_path_breakdown(path)
        title = None
        if args.format == "table" and path.num_rows:
            first, last = path.column(rs.START_NS)[0].as_py(), path.column(rs.END_NS)[-1].as_py()
            busy = sum(path.column(rs.DUR_NS).to_pylist())
            title = (f"critical path: {path.num_rows:,} steps over {window_text(first, last)}, "
                     f"{100 * busy / max(last - first, 1):.1f}% of it busy\n")
        print_table(breakdown, args.format, limit, title=title)
        return 0


COMMAND = CriticalPathCommand()
