"""Shared plumbing of the analysis commands (bounds, waits, critical-path, gaps, operators, dma, recommend, diff):
common arguments, opening a trace with progress bars, and printing tables and dicts as text, CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

import profiler
from profiler.cli import int_arg, shown_value
from profiler.cli._progress import ingest_bars
from profiler.db.lod import TIME_LIMIT
from profiler.errors import CommandError
from profiler.trace import Trace

FORMATS = ("table", "csv", "json")
MAX_CELL = 100
#: Largest ``--core`` (physical core index) accepted.
MAX_CORE = 2**31 - 1
#: Largest ``--limit`` accepted (rows; anything larger than a table shows all of it anyway).
MAX_LIMIT = 2**62

#: ``--core N``: a physical core index.
core_index = int_arg("a core index (pcore_idx)", 0, MAX_CORE)
#: ``--limit N``: a row count, 0 for all.
row_limit = int_arg("a row count (0: all)", 0, MAX_LIMIT)


#: Units a time may carry (``1.5us``), in nanoseconds; a bare number is nanoseconds.
TIME_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME_RE = re.compile(r"^\s*(?P<num>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*(?P<unit>ns|us|µs|ms|s)?\s*$")


def parse_time_text(text: str) -> int:
    """``"1500"`` -> 1500 ns, ``"1.5us"`` -> 1500, ``"2ms"`` -> 2000000 (whole ns, rounded); ValueError with the
    reason for anything else, or a time beyond +-2**62 ns (what a trace can hold)."""
    from decimal import Decimal, localcontext

    shown = shown_value(text)
    m = _TIME_RE.match(text)
    if not m:
        raise ValueError(f"{shown!r}: expected a time such as 1500 (ns), 1.5us, 20ms or 2s")
    with localcontext() as ctx:
        ctx.prec = 60  # whole ns exact for every time in range, however many digits are typed
        value = int((Decimal(m.group("num")) * TIME_UNITS[m.group("unit") or "ns"]).to_integral_value())
    if not -TIME_LIMIT <= value <= TIME_LIMIT:
        raise ValueError(f"{shown!r}: beyond +-2**62 ns (about 146 years), the range a trace can hold; give a time "
                         "within the trace")
    return value


def time_ns(text: str) -> int:
    """argparse ``type`` of ``--start/--end``: nanoseconds (``1500``) or a time with a unit (``1.5us``, ``20ms``),
    within the database's +-2**62 ns."""
    try:
        return parse_time_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_trace_argument(parser: argparse.ArgumentParser, name: str = "db", help_text: str | None = None) -> None:
    """The positional trace argument."""
    parser.add_argument(name, metavar=name.upper(),
                        help=help_text or "database, trace directory or importable profile (ingested once, cached)")


def add_window_arguments(parser: argparse.ArgumentParser) -> None:
    """``--start``, ``--end`` (ns) and ``--core``."""
    parser.add_argument("--start", type=time_ns, metavar="TIME",
                        help="window start: ns, or with a unit (1.5us, 20ms) (default: trace start)")
    parser.add_argument("--end", type=time_ns, metavar="TIME", help="window end, exclusive (default: trace end)")
    parser.add_argument("--core", type=core_index, metavar="N", help="physical core (pcore_idx; default: every core)")


def add_format_arguments(parser: argparse.ArgumentParser, *, limit: int | None = None) -> None:
    """``--format`` (and ``--json`` as its shorthand), and ``--limit`` when the command lists rows."""
    group = parser.add_mutually_exclusive_group()  # `--json --format csv` would otherwise print CSV quietly
    group.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    group.add_argument("--json", action="store_const", const="json", dest="format", help="same as --format json")
    if limit is not None:
        parser.add_argument("--limit", type=row_limit, default=None, metavar="N",
                            help=f"show at most N rows (default: {limit} in the table, all in csv and json; 0: all)")
        parser.set_defaults(table_limit=limit)


def check_window(trace: Trace, start: int | None, end: int | None, *, hint: str = "") -> None:
    """CommandError when ``--start``/``--end`` are empty or select nothing of ``trace`` (for commands that would
    otherwise write an empty output and succeed); ``hint`` is added to the message."""
    if start is not None and end is not None and end <= start:
        raise CommandError(f"empty window: --end ({end}) must be greater than --start ({start})")
    t0, t1 = trace.time_range
    if t0 == t1 == 0:
        return
    if (start is not None and start >= t1) or (end is not None and end <= t0):
        shown = f"[{'-' if start is None else f'{start:,}'}, {'-' if end is None else f'{end:,}'})"
        raise CommandError(f"{trace.path}: the window {shown} ns holds none of the trace, whose events span "
                           f"[{t0:,}, {t1:,}) ns{hint}")


@contextmanager
def open_trace(path: str) -> Iterator[Trace]:
    """``profiler.open(path)`` with ingest progress bars on a terminal; closed on exit."""
    with ingest_bars() as progress, profiler.open(path, progress=progress) as trace:
        yield trace


def output_limit(args: argparse.Namespace) -> int | None:
    """The rows to print (``None``: all): ``--limit`` as given, else the command's table default for the table
    format and every row for csv and json, which scripts read whole (a default cut there went unsaid)."""
    if args.limit is None:
        return args.table_limit if args.format == "table" else None
    return check_limit(args.limit)


def note_merged_cores(trace: Trace, core: int | None) -> None:
    """On stderr, one line when ``trace`` has several cores and ``--core`` is not given: the per-engine analyses
    (bounds, gaps, waits, operators, recommend) then count each engine's work on every core as one engine's."""
    if core is not None:
        return
    from profiler.analyses.inputs import cores

    found = cores(trace)
    if len(found) > 1:
        print(f"trnprof: note: {trace.path} has {len(found)} cores (pcore_idx {', '.join(map(str, found[:8]))}"
              f"{', ...' if len(found) > 8 else ''}) and this counts each engine's work on all of them as one "
              "engine's, against one core's peaks; pass --core N for one core", file=sys.stderr)


def check_limit(limit: int | None) -> int | None:
    """``--limit`` as a row count (``None``: all)."""
    if limit is None or limit == 0:
        return None
    if limit < 0:
        raise CommandError(f"--limit must be 0 (all) or positive, not {limit}")
    return limit


def jsonable(value: Any) -> Any:
    """``value`` with Arrow tables as lists of row dicts and non-finite floats as null."""
    if isinstance(value, pa.Table):
        return [jsonable(r) for r in value.to_pylist()]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON with sorted keys."""
    print(json.dumps(jsonable(value), indent=2, sort_keys=True, default=str))


def format_value(value: Any) -> str:
    """One cell as text: thousands separators for integers, 4 significant digits for fractions."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-3):
            return f"{value:.4g}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    text = one_line(str(value))
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def one_line(text: str) -> str:
    """``text`` for one table cell: line breaks and tabs written as backslash escapes (a name holding a newline
    broke the table's rows)."""
    if "\n" in text or "\r" in text or "\t" in text:
        return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text


def format_table(table: pa.Table) -> str:
    """An aligned text table (numbers right-aligned)."""
    names = table.column_names
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    rows = [[format_value(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric, strict=True)).rstrip()

    out = [line(names), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def print_table(table: pa.Table, fmt: str, limit: int | None = None, *, title: str | None = None) -> None:
    """Print ``table`` (its first ``limit`` rows) as text, CSV or JSON."""
    shown = table if limit is None else table.slice(0, limit)
    if fmt == "json":
        print_json(shown)
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(shown.column_names)
        for row in shown.to_pylist():
            writer.writerow(["" if v is None else v for v in row.values()])
    else:
        if title:
            print(title)
        print(format_table(shown))
        if shown.num_rows < table.num_rows:
            print(f"({shown.num_rows} of {table.num_rows} rows; --limit 0 shows all)")
        elif table.num_rows == 0:
            print("(no rows)")


def window_text(start_ns: int, end_ns: int) -> str:
    """``[start, end) ns (length us)`` for headers."""
    return f"[{start_ns:,}, {end_ns:,}) ns ({(end_ns - start_ns) / 1e3:,.3f} us)"
