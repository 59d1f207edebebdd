"""``trnprof sql``: run read-only SQL on a trace database and print the result as a table, CSV or JSON.

The result is streamed: batches of at most 2,048 rows go from DuckDB to the output as they are produced, so CSV and
JSON print any number of rows in constant memory.  The text table shows the first :data:`DEFAULT_TABLE_ROWS` rows
unless ``--max-rows`` says otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from abc import ABC, abstractmethod
from typing import Any, TextIO

import pyarrow as pa

import profiler
from profiler.cli import shown_value
from profiler.cli._analysis import one_line
from profiler.cli._progress import ingest_bars
from profiler.db.user_sql import TEXT_TYPES
from profiler.trace import DEFAULT_SQL_TIMEOUT_S

FORMATS = ("table", "csv", "json")
MAX_CELL = 60
#: Longest ``--timeout`` accepted, in seconds (one day; far below what threading.Timer can wait).
MAX_TIMEOUT_S = 86_400.0
#: Rows the text table shows unless ``--max-rows`` says otherwise (CSV and JSON print every row by default).
DEFAULT_TABLE_ROWS = 1000
#: Rows the text table reads before it fixes its column widths (later rows are padded to them).
TABLE_WIDTH_ROWS = 1000


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


def row_count(text: str) -> int:
    """argparse ``type`` of ``--max-rows``: a row count >= 0 (0: no limit)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or value >= 1 << 63:
        raise argparse.ArgumentTypeError(f"expected a row count (0 for no limit), not {shown_value(text)!r}")
    return value


def _cell(value: Any) -> str:
    text = "NULL" if value is None else one_line(str(value))
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def unique_names(names: list[str]) -> list[str]:
    """Column names made unique (``a``, ``a_2``) for JSON objects, whose keys cannot repeat."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        key = name
        while key in seen:
            seen[name] += 1
            key = f"{name}_{seen[name]}"
        seen.setdefault(key, 1)
        out.append(key)
    return out


def json_value(value: Any) -> Any:
    """``value`` with NaN and +-Infinity (which JSON lacks) as null, in nested lists and structs too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


class ResultWriter(ABC):
    """Prints a streamed result: :meth:`write` per Arrow batch, then :meth:`finish`; at most ``limit`` rows
    (0: all).  ``cut`` tells whether rows were left out."""

    def __init__(self, out: TextIO, limit: int) -> None:
        self.out = out
        self.limit = limit
        self.rows = 0
        self.cut = False
        self.names: list[str] | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Print the rows of ``batch`` that are within the limit."""
        if self.names is None:
            self.names = list(batch.schema.names)
            self.begin()
        if self.limit and self.rows + batch.num_rows > self.limit:
            self.cut = True
            batch = batch.slice(0, self.limit - self.rows)
        if batch.num_rows:
            self.rows += batch.num_rows
            self.rows_out(self.python_rows(batch))

    def finish(self, schema: pa.Schema) -> None:
        """End the output (``schema`` names the columns of a result without rows)."""
        if self.names is None:
            self.names = list(schema.names)
            self.begin()
        self.end()

    @abstractmethod
    def begin(self) -> None:
        """Start the output (``self.names`` is known)."""

    def python_rows(self, batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
        """The batch's rows as tuples, by position (so columns of the same name all appear)."""
        return list(zip(*(column.to_pylist() for column in batch.columns), strict=True))

    @abstractmethod
    def rows_out(self, rows: list[tuple[Any, ...]]) -> None:
        """Print rows."""

    @abstractmethod
    def end(self) -> None:
        """End the output."""


class CsvWriter(ResultWriter):
    """CSV with a header row; NULL is an empty field."""

    def begin(self) -> None:
        self._csv = csv.writer(self.out)
        self._csv.writerow(self.names or [])

    def rows_out(self, rows: list[tuple[Any, ...]]) -> None:
        self._csv.writerows([["" if v is None else v for v in row] for row in rows])

    def end(self) -> None:
        self.out.flush()


class JsonWriter(ResultWriter):
    """A JSON array of objects, one row per line (keys: the column names made unique), NaN and Infinity as null."""

    def begin(self) -> None:
        self._keys = unique_names(self.names or [])
        self._separator = "\n  "
        self._encode = json.JSONEncoder(default=str, allow_nan=False).encode
        self.out.write("[")

    def python_rows(self, batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
        """Rows with NaN and Infinity as None (only columns with a float type in them are looked at)."""
        columns = [column.to_pylist() if _nan_free(column.type) else [json_value(v) for v in column.to_pylist()]
                   for column in batch.columns]
        return list(zip(*columns, strict=True))

    def rows_out(self, rows: list[tuple[Any, ...]]) -> None:
        parts = []
        for row in rows:
            parts.append(self._separator + self._encode(dict(zip(self._keys, row, strict=True))))
            self._separator = ",\n  "
        self.out.write("".join(parts))

    def end(self) -> None:
        self.out.write("\n]\n" if self.rows else "]\n")


def _nan_free(t: pa.DataType) -> bool:
    """Whether values of Arrow type ``t`` cannot hold NaN or Infinity (no float anywhere in it)."""
    if pa.types.is_floating(t):
        return False
    if pa.types.is_dictionary(t):
        return _nan_free(t.value_type)
    return all(_nan_free(t.field(i).type) for i in range(t.num_fields))


class TableWriter(ResultWriter):
    """An aligned text table: column widths from the first :data:`TABLE_WIDTH_ROWS` rows, long cells shortened,
    and a last line with the row count (or how to see more)."""

    def begin(self) -> None:
        self._pending: list[list[str]] | None = []
        self._widths: list[int] = []

    def rows_out(self, rows: list[tuple[Any, ...]]) -> None:
        cells = [[_cell(v) for v in row] for row in rows]
        if self._pending is None:
            self._print(cells)
            return
        self._pending += cells
        if len(self._pending) >= TABLE_WIDTH_ROWS:
            self._flush_pending()

    def _flush_pending(self) -> None:
        names = self.names or []
        rows = self._pending or []
        self._widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
        self.out.write("  ".join(n.ljust(w) for n, w in zip(names, self._widths, strict=True)).rstrip() + "\n")
        self.out.write("  ".join("-" * w for w in self._widths) + "\n")
        self._pending = None
        self._print(rows)

    def _print(self, rows: list[list[str]]) -> None:
        self.out.write("".join("  ".join(c.ljust(w) for c, w in zip(r, self._widths, strict=True)).rstrip() + "\n"
                               for r in rows))

    def end(self) -> None:
        if self._pending is not None:
            self._flush_pending()
        if self.cut:
            self.out.write(f"(first {self.rows:,} rows shown; the result has more: raise --max-rows, 0 for all, "
                           "or use --format csv)\n")
        else:
            self.out.write(f"({self.rows:,} row{'s' if self.rows != 1 else ''})\n")


WRITERS: dict[str, type[ResultWriter]] = {"table": TableWriter, "csv": CsvWriter, "json": JsonWriter}


class SqlCommand:
    """Run one read-only SQL query (DuckDB dialect) on a trace.

    Tables: Instruction, DmaPacket, SemaphoreUpdate, Flow, Metadata, Counter, slice, track, lod (see
    docs/database.md).  One statement per run; files, URLs, extensions and writes are refused; a query running
    longer than --timeout seconds is interrupted (time spent writing the output does not count).

    The result is streamed to the output as DuckDB produces it: csv and json print every row, in constant memory
    whatever the result size; the text table shows the first 1,000 rows (--max-rows changes that).  In json, NaN
    and +-Infinity (which JSON has no numbers for) are null; repeated column names get a suffix (a, a_2).
    """

    name = "sql"
    help = "run read-only SQL on a trace"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("db", metavar="DB", help="database, trace directory or importable profile")
        parser.add_argument("query", metavar="QUERY", help="one SQL query")
        parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
        parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_SQL_TIMEOUT_S,
                            help=f"seconds before the query is interrupted (default: {DEFAULT_SQL_TIMEOUT_S:g})")
        parser.add_argument("--max-rows", type=row_count, default=None, metavar="N",
                            help=f"print at most N rows; 0: no limit (default: {DEFAULT_TABLE_ROWS:,} for the "
                                 "table format, every row for csv and json)")

    def run(self, args: argparse.Namespace) -> int:
        limit = args.max_rows if args.max_rows is not None else (DEFAULT_TABLE_ROWS if args.format == "table" else 0)
        writer = WRITERS[args.format](sys.stdout, limit)
        with ingest_bars() as progress, profiler.open(args.db, progress=progress) as trace:
            empty = trace.sql_arrow(args.query, timeout_s=args.timeout, max_rows=limit + 1 if limit else None,
                                    sink=writer.write,
                                    text_types=TEXT_TYPES)
        writer.finish(empty.schema)
        if writer.cut and args.format != "table":
            print(f"trnprof: warning: only the first {writer.rows:,} rows were written (--max-rows); the result has "
                  "more", file=sys.stderr)
        return 0


COMMAND = SqlCommand()
