"""``trnprof sql``: run read-only SQL on a trace database and print the result as a table, CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from typing import Any

import pyarrow as pa

import profiler
from profiler.cli import shown_value
from profiler.cli._progress import ingest_bars
from profiler.trace import DEFAULT_SQL_TIMEOUT_S

FORMATS = ("table", "csv", "json")
MAX_CELL = 60
#: Longest ``--timeout`` accepted, in seconds (one day; far below what threading.Timer can wait).
MAX_TIMEOUT_S = 86_400.0


def timeout_seconds(text: str) -> float:
    """argparse ``type`` of ``--timeout``: a finite number of seconds in (0, :data:`MAX_TIMEOUT_S`]."""
    shown = shown_value(text)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT_S:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0 and at most {MAX_TIMEOUT_S:g} "
                                         f"(one day), not {shown!r}")
    return value


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def format_table(table: pa.Table) -> str:
    """An aligned text table of ``table`` (long cells shortened)."""
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(lines)


class SqlCommand:
    """Run one read-only SQL query (DuckDB dialect) on a trace.

    Tables: Instruction, DmaPacket, SemaphoreUpdate, Flow, Metadata, Counter, slice, track, lod (see
    docs/database.md).  Files, URLs, extensions and writes are refused; a query running longer than --timeout
    seconds is interrupted.
    """

    name = "sql"
    help = "run read-only SQL on a trace"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("db", metavar="DB", help="database, trace directory or importable profile")
        parser.add_argument("query", metavar="QUERY", help="SQL query")
        parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
        parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_SQL_TIMEOUT_S,
                            help=f"seconds before the query is interrupted (default: {DEFAULT_SQL_TIMEOUT_S:g})")

    def run(self, args: argparse.Namespace) -> int:
        with ingest_bars() as progress, profiler.open(args.db, progress=progress) as trace:
            table = trace.sql(args.query, timeout_s=args.timeout).to_arrow_table()
        if args.format == "csv":
            writer = csv.writer(sys.stdout)
            writer.writerow(table.column_names)
            for row in table.to_pylist():
                writer.writerow(["" if v is None else v for v in row.values()])
        elif args.format == "json":
            print(json.dumps(table.to_pylist(), indent=2, default=str))
        else:
            print(format_table(table))
        return 0


COMMAND = SqlCommand()
