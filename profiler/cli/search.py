"""``trnprof search``: the events whose opcode, operator, layer, source line or name match a text, a whole field
("in quotes") or a regular expression (/between slashes/): ``Trace.search``, as the dashboard's search box runs it."""

from __future__ import annotations

import argparse

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.cli._analysis import add_format_arguments, add_trace_argument, open_trace, output_limit, print_table
from tracer import schema as ts


def search_rows(table: pa.Table, origin_ns: int) -> pa.Table:
    """``Trace.search`` results with each event's start since the trace start and its duration (ns) beside its
    absolute times, for reading in a terminal."""
    start = table.column(ts.START_TS).to_numpy()
    end = table.column(ts.END_TS).to_numpy()
    extra = {"since_start_ns": pa.array(start - origin_ns), "duration_ns": pa.array(end - start)}
    order = [dbs.TABLE, ts.ID, ts.NAME, "since_start_ns", "duration_ns", dbs.MATCHED_FIELD, ts.START_TS, ts.END_TS,
             dbs.TRACK_ID]
    return pa.table({name: extra[name] if name in extra else table.column(name) for name in order})


class SearchCommand:
    """List the events a text matches, in start order.

    TEXT is matched case-insensitively inside opcodes, operators (hlo_name), layers, source lines
    (nki_source_location), DMA variables and queues, and span names.  "In double quotes" it must equal a whole
    field ("softmax.py:35" is that line, not line 350); /between slashes/ it is a regular expression (RE2,
    case-insensitive: /softmax\\.py:3[0-9]$/; /./ lists every event with one of those fields).
    """

    name = "search"
    help = "find events by opcode, operator, layer, source line or name (text, \"whole field\" or /regex/)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_trace_argument(parser)
        parser.add_argument("text", metavar="TEXT", help='text to find; "in quotes": a whole field; /regex/')
        add_format_arguments(parser, limit=50)

    def run(self, args: argparse.Namespace) -> int:
        limit = output_limit(args)
        with open_trace(args.db) as trace:
            found = trace.search(args.text, limit=2**62 if limit is None else limit + 1)
            origin = int(trace.time_range[0])
        shown = found if limit is None else found.slice(0, limit)
        print_table(search_rows(shown, origin), args.format)
        if args.format == "table":
            more = f" (the first {limit:,}; --limit 0 lists all)" if limit is not None and found.num_rows > limit \
                else ""
            print(f"{shown.num_rows:,} matching event(s){more}")
        return 0


COMMAND = SearchCommand()
