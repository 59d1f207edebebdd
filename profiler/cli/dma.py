"""``trnprof dma``: DMA efficiency — size histogram, traffic per queue, reloads per tensor, small-transfer regions."""

from __future__ import annotations

import argparse

from profiler.analyses import schema as rs
from profiler.analyses.dma import SMALL_BYTES, dma_efficiency
from profiler.cli._analysis import (
    add_format_arguments,
    add_trace_argument,
    add_window_arguments,
    format_value,
    open_trace,
    output_limit,
    print_json,
    print_table,
    window_text,
)
from profiler.cli._progress import working
from profiler.errors import CommandError

SECTIONS = {"histogram": rs.EFF_HISTOGRAM, "queues": rs.EFF_QUEUES, "tensors": rs.EFF_TENSORS,
            "regions": rs.EFF_SMALL_REGIONS}


class DmaCommand:
    """DMA efficiency: packets per size bin, bytes and busy time per queue, bytes loaded per tensor against the
    distinct bytes (reload factor), and the regions where small packets take most of the DMA time."""

    name = "dma"
    help = "DMA efficiency: sizes, queues, reloads, small transfers"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--small-bytes", type=int, default=SMALL_BYTES, metavar="BYTES",
                            help=f"packets under this size are small (default: {SMALL_BYTES})")
        parser.add_argument("--section", choices=tuple(SECTIONS), action="append",
                            help="print only this table (repeatable; CSV needs exactly one)")
        add_format_arguments(parser, limit=20)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        if args.small_bytes <= 0:
            raise CommandError(f"--small-bytes must be positive, not {args.small_bytes}")
        sections = args.section or list(SECTIONS)
        if args.format == "csv" and len(sections) != 1:
            raise CommandError("--format csv prints one table: choose it with --section")
        with open_trace(args.db) as trace, working("measuring the DMA traffic"):
            eff = dma_efficiency(trace, args.start, args.end, args.core, small_bytes=args.small_bytes)
        if args.format == "json":
            print_json(eff if args.section is None else {s: eff[SECTIONS[s]] for s in sections})
            return 0
        if args.format == "table":
            print(f"window {window_text(eff[rs.START_NS], eff[rs.END_NS])}")
            headline = {k: v for k, v in eff.items() if not hasattr(v, "num_rows") and k not in (rs.START_NS,
                                                                                                  rs.END_NS)}
            print(", ".join(f"{k} {format_value(v)}" for k, v in headline.items()))
        for s in sections:
            title = f"\n{s}:" if args.format == "table" else None
            print_table(eff[SECTIONS[s]], args.format, limit, title=title)
        return 0


COMMAND = DmaCommand()
