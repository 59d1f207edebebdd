"""``trnprof summary``: total time, engine active time and utilization, HFU/MFU, DMA figures."""

from __future__ import annotations

import argparse
import json

import profiler
from profiler.cli._analysis import time_ns
from profiler.cli._progress import ingest_bars
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
        parser.add_argument("--start", type=time_ns, help="start of the range (ns; default: trace start)")
        parser.add_argument("--end", type=time_ns, help="end of the range (ns; default: trace end)")

    def run(self, args: argparse.Namespace) -> int:
        with ingest_bars() as progress, profiler.open(args.db, progress=progress) as trace:
            summary = trace.summary(args.start, args.end)
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print(format_summary(summary))
        return 0


COMMAND = SummaryCommand()
