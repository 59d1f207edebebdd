"""``trnprof operators``: time, FLOPs, bytes and MFU per operator (layer -> operator), opcode or source line."""

from __future__ import annotations

import argparse

from profiler.analyses import schema as rs
from profiler.analyses.operators import time_by
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


class OperatorsCommand:
    """The operator table: per layer and operator (or per engine and opcode, or per kernel source line) the
    instruction count, time span, busy time, Tensor time, FLOPs, HBM bytes, MFU and HFU; busiest first."""

    name = "operators"
    help = "time, FLOPs, bytes and MFU per operator, opcode or source line"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--by", choices=tuple(rs.GROUP_KEYS), default="operator",
                            help="grouping (default: operator)")
        add_format_arguments(parser, limit=30)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        with open_trace(args.db) as trace, working("adding up the operators"):
            note_merged_cores(trace, args.core)
            table = time_by(trace, args.by, args.start, args.end, args.core)
        print_table(table, args.format, limit)
        return 0


COMMAND = OperatorsCommand()
