"""The SQL page's logic: run one read-only query through ``Trace.sql_arrow`` and shape the result for the grid.

The dashboard writes no SQL of its own: the user's text goes to the sandboxed ``Trace.sql_arrow`` (read-only, no file
access, timeout, one statement), and this module only bounds what comes back — a row limit and a byte budget, both
applied while the result streams so the rest is never built — and converts values to what a browser grid can show
exactly (integers beyond 2**53 and binary values become strings, very long values are cut, saying how long).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from dashboard.errors import public_message
from dashboard.inputs import as_float
from dashboard.query_slots import UserQuerySlots
from profiler.db.user_sql import rows_within
from tracer.errors import TrnprofError

#: Rows shown by default and at most.
DEFAULT_ROW_LIMIT = 1000
MAX_ROW_LIMIT = 100_000
#: Seconds a query may run by default and at most.
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
#: Longest query text accepted.
MAX_QUERY_CHARS = 100_000
#: Most Arrow data a result may bring into the server (rows beyond it are not fetched, and not shown).
MAX_RESULT_BYTES = 32 << 20
#: Longest text shown in one cell (longer strings, binary values and lists are cut, saying how long they were).
MAX_CELL_CHARS = 10_000
_JS_SAFE_INT = 2**53


@dataclass
class QueryResult:
    """What the grid shows: column names, rows as dicts keyed by :attr:`fields` (``c0``, ``c1``, ...: ids any
    grid can use whatever the names hold — dots, brackets, repeats), whether and why rows were cut, timing, or an
    error."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    elapsed_s: float = 0.0
    error: str | None = None
    #: Why rows are missing when ``truncated`` (what to do for more).
    note: str = ""
    #: A setting that could not be used as given (a row limit out of range), and what was used instead.
    warning: str = ""
    #: Each column's grid data type (AG Grid ``cellDataType``: ``number``, ``boolean`` or ``text``), from the values
    #: as sent; it is part of the column's row key (:func:`field_id`).
    kinds: list[str] = field(default_factory=list)

    @property
    def fields(self) -> list[str]:
        """The row keys of the columns, in order."""
        kinds = self.kinds or ["text"] * len(self.columns)
        return [field_id(i, kind) for i, kind in enumerate(kinds)]


def field_id(index: int, kind: str) -> str:
    """The row key of column ``index`` holding values of grid data type ``kind`` (``c0n``, ``c1t``, ...): a column
    whose type changes from one result to the next gets a new key, so the grid makes it a new column (AG Grid keeps
    a column's data type for its key: text where it had numbers would show as "Invalid Number")."""
    return f"c{index}{kind[0]}"


def cell_kind(values: list[Any]) -> str:
    """The grid data type of a column holding ``values`` (grid values: None, bool, int, float or str)."""
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int, float}:
        return "number"
    if kinds == {bool}:
        return "boolean"
    return "text"


def bounded(value: Any, default: float, low: float, high: float) -> float:
    """``value`` as a number clamped to ``[low, high]`` (``default`` when it is not a finite number)."""
    v = as_float(value)
    return default if v is None else min(max(v, low), high)


def _cut(text: str, length: int, unit: str) -> str:
    return text if length <= MAX_CELL_CHARS else f"{text[:MAX_CELL_CHARS]}… ({length:,} {unit})"


def _grid_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return v if -_JS_SAFE_INT < v < _JS_SAFE_INT else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        raw = bytes(v)
        if 2 * len(raw) <= MAX_CELL_CHARS:
            return raw.hex()
        return f"{raw[: MAX_CELL_CHARS // 2].hex()}… ({len(raw):,} bytes)"
    if isinstance(v, str):
        return _cut(v, len(v), "characters")
    text = str(v)
    return _cut(text, len(text), "characters")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def run_query(trace: Any, query: Any, row_limit: Any = DEFAULT_ROW_LIMIT, timeout_s: Any = DEFAULT_TIMEOUT_S,
              *, label: str | None = None, slots: UserQuerySlots | None = None) -> QueryResult:
    """Run ``query`` on ``trace`` (read-only sandbox) and return at most ``row_limit`` rows for the grid, and at most
    :data:`MAX_RESULT_BYTES` of data (cells cut to :data:`MAX_CELL_CHARS` characters).

    Errors — not text, syntax, unknown table, forbidden statement, timeout, a first row too large — come back in
    ``QueryResult.error`` as one line naming the trace by ``label`` (or its name), never its files; they never
    raise.  With ``slots``, the query first waits (up to its timeout) for one of the server's slots.
    """
    if query is not None and not isinstance(query, str):
        return QueryResult(error=f"The query must be text, not {type(query).__name__}.")
    text = (query or "").strip()
    if not text:
        return QueryResult(error="Enter a query, or pick an example.")
    if len(text) > MAX_QUERY_CHARS:
        return QueryResult(error=f"The query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}.")
    limit = int(bounded(row_limit, DEFAULT_ROW_LIMIT, 1, MAX_ROW_LIMIT))
    asked = as_float(row_limit)
    limit_note = "" if row_limit is None or (asked is not None and asked == limit) else (
        f"the row limit is a whole number from 1 to {MAX_ROW_LIMIT:,}: {limit:,} used")
    timeout = bounded(timeout_s, DEFAULT_TIMEOUT_S, 0.1, MAX_TIMEOUT_S)
    t0 = time.perf_counter()
    try:
        # at most limit + 1 rows and about MAX_RESULT_BYTES are fetched: the rest is never built in the server
        # (BIT and INTERVAL as DuckDB writes them; binary values are shown in hex below)
        with slots.slot(timeout) if slots is not None else contextlib.nullcontext():
            table = trace.sql_arrow(text, timeout_s=timeout, max_rows=limit + 1, max_bytes=MAX_RESULT_BYTES,
                                    text_types=("BIT", "INTERVAL"))
    except TrnprofError as exc:
        # (the library's hint names its own knobs)
        message = public_message(exc, trace, label=label, typed=text).replace(
            "raise timeout_s / --timeout", f"raise the page's Timeout, up to {MAX_TIMEOUT_S:g} s")
        return QueryResult(error=message, elapsed_s=time.perf_counter() - t0)
    except Exception as exc:  # an engine error the sandbox did not translate: still one line, never a traceback
        return QueryResult(error=public_message(f"{type(exc).__name__}: {exc}", trace, label=label),
                           elapsed_s=time.perf_counter() - t0)
    elapsed = time.perf_counter() - t0
    fits = rows_within(table, MAX_RESULT_BYTES)
    if fits == 0 and table.num_rows:
        big = table.slice(0, 1).nbytes
        return QueryResult(error=f"The first row alone holds {_mib(big)}, more than the {_mib(MAX_RESULT_BYTES)} "
                                 "a result may bring to the page: select less of it (e.g. left(col, 1000), "
                                 "list_slice(col, 1, 1000)) or fewer columns.", elapsed_s=elapsed)
    note = ""
    if fits < table.num_rows and fits < limit:
        note = (f"the result is larger than the {_mib(MAX_RESULT_BYTES)} the page shows: select fewer columns or "
                "shorter values (e.g. left(col, 1000)) for more rows")
    elif table.num_rows > limit:
        note = ("raise the row limit for more" if limit < MAX_ROW_LIMIT else
                f"the page shows at most {MAX_ROW_LIMIT:,} rows: `trnprof sql DB \"...\" --format csv` streams all")
    table = table.slice(0, min(fits, limit))
    columns = _unique_names(table.column_names)
    values = [[_grid_value(v) for v in col.to_pylist()] for col in table.columns]
    kinds = [cell_kind(vs) for vs in values]
    fields = [field_id(i, kind) for i, kind in enumerate(kinds)]
    rows = [dict(zip(fields, row, strict=True)) for row in zip(*values, strict=True)] if values else []
    return QueryResult(columns, rows, bool(note), elapsed, note=note, kinds=kinds, warning=limit_note)


def _unique_names(names: list[str]) -> list[str]:
    """Column names made unique (``SELECT a, a`` gives ``a``, ``a_2``) so no grid column hides another."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        key = name or "?column?"
        if key in seen:
            seen[key] += 1
            key = f"{key}_{seen[key]}"
        else:
            seen[key] = 1
        out.append(key)
    return out
