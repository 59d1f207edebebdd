"""``trnprof bounds``: the performance bounds of a trace or a window (memory, compute, pipeline; gaps; bottleneck)."""

from __future__ import annotations

import argparse
from typing import Any

from profiler.analyses import schema as rs
from profiler.analyses.bounds import bounds_table, performance_bounds
from profiler.cli._analysis import (
    add_trace_argument,
    add_window_arguments,
    format_table,
    format_value,
    note_merged_cores,
    open_trace,
    print_json,
    print_table,
    window_text,
)
from profiler.cli._progress import working
from profiler.errors import CommandError


def format_bounds(bounds: dict[str, Any]) -> str:
    """The bounds as text: a table of bounds, gaps and speedups, then the bottleneck, engine times and notes."""
    total = bounds[rs.TOTAL_TIME_NS]
    lines = [f"window {window_text(bounds[rs.START_NS], bounds[rs.END_NS])}",
             f"total time {total:,} ns", ""]
    lines.append(format_table(bounds_table(bounds)))
    lines.append("")
    active = bounds[rs.ENGINE_ACTIVE_NS]
    if bounds[rs.BOTTLENECK] is None:
        lines.append("bottleneck: none (nothing was active in the window)")
    else:
        lines.append(f"bottleneck: {bounds[rs.BOTTLENECK]} (active {active[bounds[rs.BOTTLENECK]]:,} ns, "
                     f"{100 * active[bounds[rs.BOTTLENECK]] / max(total, 1):.1f}% of the window)")
    lines.append("active time: " + ", ".join(f"{e} {format_value(v)} ns" for e, v in active.items()))
    inputs = bounds[rs.INPUTS]
    lines.append("inputs: " + ", ".join(f"{k} {format_value(v)}" for k, v in inputs.items()))
    lines += [f"note: {n}" for n in bounds[rs.NOTES]]
    return "\n".join(lines)


#: Largest --necessary-bytes accepted (an exbibyte: more than any trace's kernel moves).
MAX_NECESSARY_BYTES = 1 << 60


class BoundsCommand:
    """Performance bounds of a trace: how long it would take under idealising assumptions, and what each gap costs.

    Memory family: DMA active time, bytes moved at peak DMA bandwidth, necessary bytes at peak.  Compute family:
    Tensor active time, its FLOPs at peak, the same without transposes.  Pipeline: the busiest engine (the
    bottleneck).  Default window: first DMA start to last DMA end.  See docs/analyses.md.
    """

    name = "bounds"
    help = "performance bounds, their gaps and the bottleneck engine"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        add_window_arguments(parser)
        parser.add_argument("--necessary-bytes", type=int, metavar="BYTES",
                            help="bytes the kernel must move at least (default: derived from the DMA regions)")
        parser.add_argument("--json", action="store_true", help="print the bounds as JSON")
        parser.add_argument("--csv", action="store_true", help="print the bounds table as CSV")

    def run(self, args: argparse.Namespace) -> int:
        if args.necessary_bytes is not None and not 0 <= args.necessary_bytes <= MAX_NECESSARY_BYTES:
            raise CommandError(f"--necessary-bytes must be 0..{MAX_NECESSARY_BYTES:,} (1 EiB), not "
                               f"{args.necessary_bytes:,}")
        if args.json and args.csv:
            raise CommandError("choose one of --json and --csv")
        with open_trace(args.db) as trace, working("computing the performance bounds"):
            note_merged_cores(trace, args.core)
            bounds = performance_bounds(trace, args.start, args.end, args.core, necessary_bytes=args.necessary_bytes)
        if args.json:
            print_json(bounds)
        elif args.csv:
            print_table(bounds_table(bounds), "csv")
        else:
            print(format_bounds(bounds))
        return 0


COMMAND = BoundsCommand()
