"""The SQL page's logic: run one read-only query through ``Trace.sql`` and shape the result for the grid.

The dashboard writes no SQL of its own: the user's text goes to the sandboxed ``Trace.sql`` (read-only, no file
access, timeout), and this module only bounds what comes back (row limit) and converts values to what a browser
grid can show exactly (integers beyond 2**53 and binary values become strings).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tracer.errors import TrnprofError

#: Rows shown by default and at most.
DEFAULT_ROW_LIMIT = 1000
MAX_ROW_LIMIT = 100_000
#: Seconds a query may run by default and at most.
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
#: Longest query text accepted.
MAX_QUERY_CHARS = 100_000
_JS_SAFE_INT = 2**53


@dataclass
class QueryResult:
    """What the grid shows: column names, rows as dicts, whether rows were cut, timing, or an error."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    elapsed_s: float = 0.0
    error: str | None = None


def bounded(value: Any, default: float, low: float, high: float) -> float:
    """``value`` as a number clamped to ``[low, high]`` (``default`` when it is not a finite number)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return default
    if not math.isfinite(v):
        return default
    return min(max(v, low), high)


def _grid_value(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return v if -_JS_SAFE_INT < v < _JS_SAFE_INT else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).hex()
    if isinstance(v, str):
        return v
    return str(v)


def _to_arrow(result: Any, limit: int) -> pa.Table:
    """The first ``limit + 1`` rows of whatever ``Trace.sql`` returned, as an Arrow table."""
    if result is None:
        return pa.table({})
    if isinstance(result, pa.Table):
        return result.slice(0, limit + 1)
    if isinstance(result, pa.RecordBatchReader):
        batches, n = [], 0
        for batch in result:
            batches.append(batch)
            n += batch.num_rows
            if n > limit:
                break
        return pa.Table.from_batches(batches, schema=result.schema).slice(0, limit + 1)
    limited = result.limit(limit + 1) if hasattr(result, "limit") else result
    for method in ("to_arrow_table", "fetch_arrow_table", "arrow"):
        fn = getattr(limited, method, None)
        if callable(fn):
            out = fn()
            return _to_arrow(out, limit) if not isinstance(out, pa.Table) else out.slice(0, limit + 1)
    raise TypeError(f"Trace.sql returned an unsupported result type {type(result).__name__}")


def run_query(trace: Any, query: str | None, row_limit: Any = DEFAULT_ROW_LIMIT,
              timeout_s: Any = DEFAULT_TIMEOUT_S) -> QueryResult:
    """Run ``query`` on ``trace`` (read-only sandbox) and return at most ``row_limit`` rows for the grid.

    Errors — syntax, unknown table, forbidden statement, timeout — come back in ``QueryResult.error`` as one line;
    they never raise.
    """
    text = (query or "").strip()
    if not text:
        return QueryResult(error="Enter a query, or pick an example.")
    if len(text) > MAX_QUERY_CHARS:
        return QueryResult(error=f"The query is {len(text):,} characters long; the limit is {MAX_QUERY_CHARS:,}.")
    limit = int(bounded(row_limit, DEFAULT_ROW_LIMIT, 1, MAX_ROW_LIMIT))
    timeout = bounded(timeout_s, DEFAULT_TIMEOUT_S, 0.1, MAX_TIMEOUT_S)
    t0 = time.perf_counter()
    try:
        # at most limit + 1 rows are fetched: the rest of the result is never built in the server's memory
        table = _to_arrow(trace.sql(text, timeout_s=timeout, max_rows=limit + 1), limit)
    except TrnprofError as exc:
        return QueryResult(error=_one_line(str(exc)), elapsed_s=time.perf_counter() - t0)
    except Exception as exc:  # an engine error the sandbox did not translate: still one line, never a traceback
        return QueryResult(error=_one_line(f"{type(exc).__name__}: {exc}"), elapsed_s=time.perf_counter() - t0)
    elapsed = time.perf_counter() - t0
    truncated = table.num_rows > limit
    table = table.slice(0, limit)
    columns = _unique_names(table.column_names)
    rows = [
        {name: _grid_value(v) for name, v in zip(columns, values, strict=True)}
        for values in zip(*(col.to_pylist() for col in table.columns), strict=True)
    ] if table.num_columns else []
    return QueryResult(columns, rows, truncated, elapsed)


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


def _one_line(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "query failed")[:500]
