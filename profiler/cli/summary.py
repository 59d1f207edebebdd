"""``trnprof summary``: total time, engine active time and utilization, HFU/MFU, DMA figures; for a host trace (no
instructions or DMA), its rows and the names with the most self time."""

from __future__ import annotations

import argparse
import json
from typing import Any

import profiler
from profiler.cli._analysis import jsonable, time_ns
from profiler.cli._progress import ingest_bars
from profiler.errors import QueryError
from profiler.summary import format_summary


class SummaryCommand:
    """Summarise a trace: engine active time (union of busy intervals), HFU/MFU, DMA time, bytes and throughput.

    DB may be a database or anything `trnprof ingest` accepts (ingested once into the cache).
    """

    name = "summary"
    help = "summarise a trace (engines, HFU/MFU, DMA)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("db", metavar="DB", help="database, trace directory or importable profile")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")
        parser.add_argument("--start", type=time_ns, metavar="TIME",
                            help="start of the range: ns, or 1.5us, 20ms (default: trace start)")
        parser.add_argument("--end", type=time_ns, metavar="TIME", help="end of the range (default: trace end)")

    def run(self, args: argparse.Namespace) -> int:
        with ingest_bars() as progress, profiler.open(args.db, progress=progress) as trace:
            if args.start is not None or args.end is not None:
                check_range(trace, args.start, args.end)
            summary = trace.summary(args.start, args.end)
            device = bool(summary.get("engines") or (summary.get("dma") or {}).get("transfer_bytes"))
            if args.json:
                if not device:  # a host trace: what the text shows of it (the device keys alone were all empty)
                    parts = host_parts(trace, args.start, args.end)
                    if parts is not None:
                        summary["host"] = {"spans": parts[0], "rows": jsonable(parts[1]),
                                           "top_self": jsonable(parts[2])}
                print(json.dumps(summary, indent=2))
                return 0
            if device:
                print(format_summary(summary))
            else:   # a host trace (PyTorch, JAX): its spans, not an empty engine table
                print(host_summary(trace, args.db, summary, args.start, args.end))
        return 0


#: Names the host summary lists.
HOST_NAMES = 10


def host_parts(trace: profiler.Trace, start: int | None, end: int | None) -> tuple[int, Any, Any] | None:
    """A host trace's spans, its rows (time in their outermost spans, share of the range) and the names with the
    most self time; None when it has no spans."""
    from profiler.analyses.call_tree import call_tree
    from profiler.analyses.call_tree_views import root_summary, top_frames

    try:
        tree = call_tree(trace, start, end)
    except QueryError:
        return None
    lo, hi = trace.time_range
    duration = (hi if end is None else end) - (lo if start is None else start)
    return tree.spans, root_summary(tree, duration), top_frames(tree).slice(0, HOST_NAMES)


def host_summary(trace: profiler.Trace, db: str, summary: dict, start: int | None, end: int | None) -> str:
    """A trace without instructions or DMA: its total time, its rows with their spans and time in their outermost
    spans, and the names with the most self time (the call tree's; ``trnprof calltree`` has the stacks)."""
    from profiler.cli._analysis import format_table

    lines = [f"total time        {summary['total_time_ns'] / 1e3:,.3f} us",
             "no instructions or DMA packets: the engine and DMA figures need a device trace"]
    parts = host_parts(trace, start, end)
    if parts is None:
        return "\n".join(lines)
    spans, rows, top = parts
    lines += ["", f"{spans:,} spans; per row: its spans (count), the time in its outermost spans (total_ns) and "
                  "that time's share of the range (fraction):",
              format_table(rows),
              "", f"names with the most self time; fraction: share of the self time of all spans "
                  f"(`trnprof calltree {db}` gives their stacks):",
              format_table(top)]
    return "\n".join(lines)


def check_range(trace: profiler.Trace, start: int | None, end: int | None) -> None:
    """Refuse a ``--start``/``--end`` range that is empty or holds no event of the trace (most likely a unit
    mistake: times are nanoseconds).

    Raises:
        QueryError: naming the trace and its span.
    """
    first, last = trace.time_range
    a = first if start is None else start
    b = last if end is None else end
    if b <= a:
        raise QueryError(f"summary range is empty: --end ({b} ns) must be greater than --start ({a} ns)")
    if last > first and (b <= first or a >= last):
        raise QueryError(f"{trace.path}: the range [{a:,}, {b:,}) ns holds no event: the trace spans "
                         f"[{first:,}, {last:,}) ns (times are nanoseconds)")


COMMAND = SummaryCommand()
