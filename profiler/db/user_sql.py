"""User SQL on a trace database: the read-only statement check, the timeout, and fetching the result bounded by
rows and bytes, or streamed batch by batch.

Every user query goes through :func:`run_user_sql` on a cursor of the locked-down instance
(:mod:`profiler.db.connection`): it must be exactly one query statement, it runs under a timer that interrupts it,
and every failure is a one-line :class:`~profiler.errors.QueryError`.
"""

from __future__ import annotations

import numbers
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from profiler.db.connection import MEMORY_LIMIT_ENV
from profiler.db.sqlutil import quote
from profiler.errors import QueryError

#: Statements user SQL may run: queries (SELECT, and DESCRIBE / SHOW / SUMMARIZE, which DuckDB parses as SELECT),
#: EXPLAIN of a statement allowed here (``EXPLAIN ANALYZE`` runs what it explains), and the PRAGMA / CALL of
#: :data:`_READING_PRAGMAS`.  Anything else -- even a TEMP table or view, which would live in memory only -- is
#: refused before it runs.
_QUERY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL"})
#: PRAGMAs (and the table functions CALL runs) that only read: the catalog, sizes, versions.  Others change the
#: instance or the session (``checkpoint``, ``add_parquet_key``, ``enable_verification``, ...).
_READING_PRAGMAS = frozenset({
    "table_info", "show", "show_tables", "show_tables_expanded", "show_databases", "database_list", "database_size",
    "storage_info", "metadata_info", "version", "platform", "functions", "collations", "user_agent"})
#: ``EXPLAIN [ANALYZE] [(options)]`` before the statement it explains.
_GAP = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
_EXPLAIN = re.compile(rf"EXPLAIN\b{_GAP}(?:ANALY[SZ]E\b{_GAP})?(?:\([^()]*\){_GAP})?", re.IGNORECASE | re.DOTALL)
#: The name a PRAGMA or CALL runs.
_PRAGMA_NAME = re.compile(r"(?:PRAGMA|CALL)\s+(?:main\.|system\.|pg_catalog\.)*\"?([A-Za-z_][A-Za-z0-9_]*)",
                          re.IGNORECASE)
#: The words a statement DuckDB calls LOAD starts with (after any comments).
_LOAD_WORDS = re.compile(r"\b(?:FORCE\s+INSTALL|INSTALL|LOAD)\b", re.IGNORECASE)
#: Comments, blanks and opening parentheses before a statement's first word.
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*", re.DOTALL)
#: First words of a query.  DuckDB runs a ``PIVOT`` whose values come from the data (no ``IN`` list) as a "MULTI"
#: statement: a temporary ENUM type of the values, then the query; that is allowed when the statement is a query.
_QUERY_WORDS = frozenset({"SELECT", "FROM", "WITH", "PIVOT", "PIVOT_WIDER", "UNPIVOT", "EXPLAIN", "DESCRIBE",
                          "SUMMARIZE", "SHOW", "VALUES", "TABLE"})
_PIVOT_WORD = re.compile(r"\bPIVOT(?:_WIDER)?\b", re.IGNORECASE)
#: The temporary ENUM types such a PIVOT leaves behind (dropped after the query).
_PIVOT_TYPES = "__pivot_enum_"

#: Rows per Arrow batch when a capped result is streamed by rows only.
_CAPPED_BATCH_ROWS = 65_536
#: Rows per Arrow batch when bytes matter (``max_bytes`` or a sink): one DuckDB vector, so a batch of huge values
#: costs no more than DuckDB already holds for them.
_BYTES_BATCH_ROWS = 2048


def _first_word(statement: str) -> str:
    rest = statement[_LEADING.match(statement).end():]  # type: ignore[union-attr]  # matches the empty string
    m = re.match(r"[A-Za-z_]+", rest)
    return m.group(0).upper() if m else ""


def _refused(kind: str) -> QueryError:
    return QueryError(f"not allowed: {kind} statement (trace SQL is read-only: it runs queries -- SELECT, "
                      "EXPLAIN, DESCRIBE, SHOW, PIVOT, PRAGMA -- and cannot create, change or load anything)")


def _check_one(cursor: duckdb.DuckDBPyConnection, statement: Any, depth: int = 0) -> bool:
    """QueryError unless the parsed ``statement`` is a query; True when it is a PIVOT leaving a type behind."""
    kind = statement.type.name
    text = statement.query
    if kind == "LOAD":  # DuckDB parses INSTALL (and FORCE INSTALL) as LOAD: name it as the user wrote it
        said = _LOAD_WORDS.search(text)
        kind = " ".join(said.group(0).upper().split()) if said else kind
    if kind == "MULTI":
        if _first_word(text) in _QUERY_WORDS and _PIVOT_WORD.search(text):
            return True
        kind = _first_word(text) or kind
    if kind not in _QUERY_STATEMENTS:
        raise _refused(kind)
    rest = text[_LEADING.match(text).end():]  # type: ignore[union-attr]  # matches the empty string
    if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs the statement it explains: that one must be allowed too
        m = _EXPLAIN.match(rest)
        if m is None or depth:
            raise _refused("EXPLAIN")
        try:
            inner = cursor.extract_statements(rest[m.end():])
        except duckdb.Error as exc:
            raise QueryError(describe_error(exc)) from None
        if len(inner) != 1:
            raise _refused("EXPLAIN")
        return _check_one(cursor, inner[0], depth + 1)
    if kind in ("PRAGMA", "CALL"):
        m = _PRAGMA_NAME.match(rest)
        if m is None:  # CHECKPOINT, parsed as a CALL
            raise _refused(_first_word(rest) or kind)
        name = m.group(1).lower()
        if name.removeprefix("pragma_") not in _READING_PRAGMAS and not name.startswith("duckdb_"):
            raise QueryError(f"not allowed: {kind} {name} (trace SQL is read-only; the {kind}s it runs read "
                             f"the catalog: {', '.join(sorted(_READING_PRAGMAS))}, and the duckdb_* functions)")
    return False


def check_statements(cursor: duckdb.DuckDBPyConnection, query: str) -> bool:
    """QueryError unless ``query`` is exactly one query (:data:`_QUERY_STATEMENTS`); True when it is a PIVOT that
    leaves a temporary type behind (:func:`drop_pivot_types`)."""
    try:
        statements = cursor.extract_statements(query)
    except duckdb.Error as exc:  # a syntax error: reported as running it would
        raise QueryError(describe_error(exc)) from None
    pivot = False
    for statement in statements:
        pivot = _check_one(cursor, statement) or pivot
    if not statements:
        raise QueryError("empty SQL query: it has only comments or ';' (write one SELECT ...)")
    if len(statements) > 1:
        raise QueryError(f"one statement at a time: the query has {len(statements)} statements separated by ';' "
                         "(run them one by one)")
    return pivot


def drop_pivot_types(cursor: duckdb.DuckDBPyConnection) -> None:
    """Drop the temporary ENUM types a data-driven PIVOT created on ``cursor`` (they would pile up otherwise)."""
    try:
        names = cursor.execute("SELECT schema_name, type_name FROM duckdb_types() WHERE database_name = 'temp' "
                               "AND starts_with(type_name, ?)", [_PIVOT_TYPES]).fetchall()
        for schema, name in names:
            cursor.execute(f"DROP TYPE IF EXISTS temp.{quote(schema)}.{quote(name)}")
    except duckdb.Error:  # best effort: the cursor may be interrupted; its types go when it is closed
        pass


class _Deadline:
    """Interrupts ``cursor`` once the time spent inside :meth:`running` blocks reaches ``timeout_s`` in total, so a
    streamed result's time in its consumer (writing output) does not count."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, timeout_s: float | None) -> None:
        self.cursor = cursor
        self.remaining = float(timeout_s) if timeout_s else None
        self.timed_out = threading.Event()

    def _interrupt(self) -> None:
        self.timed_out.set()
        self.cursor.interrupt()

    @contextmanager
    def running(self) -> Iterator[None]:
        """Run the block under what is left of the timeout."""
        if self.remaining is None:
            yield
            return
        if self.remaining <= 0:
            self.timed_out.set()
            raise duckdb.InterruptException("timed out")
        timer = threading.Timer(self.remaining, self._interrupt)
        timer.daemon = True
        t0 = time.monotonic()
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            self.remaining -= time.monotonic() - t0


#: Caps above this many rows or bytes are no cap (pyarrow slices take C longs).
_NO_CAP = 2**62
#: Longest timeout accepted, in seconds (a year; threading.Timer needs a time the platform can hold).
MAX_TIMEOUT_S = 365 * 86_400.0


def _check_cap(value: Any, name: str) -> int | None:
    """``value`` (``max_rows``, ``max_bytes``) as an int, None for no cap; QueryError unless a non-negative
    integer (numpy's too) or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise QueryError(f"{name} must be a non-negative integer or None, not {str(value)[:40]!r}")
    return None if value > _NO_CAP else int(value)


def check_timeout(timeout_s: Any) -> float | None:
    """``timeout_s`` as seconds, None for no limit (None or 0); QueryError unless a number of seconds from 0 to
    :data:`MAX_TIMEOUT_S` (numpy's too)."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) \
            or not 0 <= float(timeout_s) <= MAX_TIMEOUT_S:  # (refuses nan and inf too)
        raise QueryError(f"timeout_s must be a number of seconds from 0 (no limit) to {MAX_TIMEOUT_S:g}, or None, "
                         f"not {str(timeout_s)[:40]!r}")
    return float(timeout_s) or None


def run_user_sql(cursor: duckdb.DuckDBPyConnection, query: str, timeout_s: float | None,
                 params: Any = None, max_rows: int | None = None, *, max_bytes: int | None = None,
                 sink: Callable[[pa.RecordBatch], None] | None = None,
                 text_types: Collection[str] = ()) -> pa.Table:
    """Run one user query on ``cursor`` under a timeout; the result as an Arrow table; QueryError otherwise.

    Args:
        cursor: a cursor of the locked-down instance.
        query: exactly one query statement.
        timeout_s: seconds of query time before it is interrupted (None or 0: no limit).
        params: values for the query's ``?`` / ``$name`` placeholders (DuckDB parameters), or None.
        max_rows: fetch at most this many rows, streaming: DuckDB stops producing rows once they are read, so
            ``SELECT * FROM Instruction`` costs what its first rows cost, not the table (a query that must see
            every row before its first — ORDER BY, GROUP BY — still runs to completion inside DuckDB, but only the
            first rows are converted and kept).
        max_bytes: stop fetching at the first row that takes the Arrow data fetched (``Table.nbytes``) beyond
            this many bytes; that row is kept, so a result whose ``nbytes`` exceeds ``max_bytes`` was cut there.
        sink: hand each Arrow batch of the result to ``sink`` as it is fetched instead of keeping it (constant
            memory whatever the result size); the timeout counts DuckDB's time, not the sink's; the returned table
            is then empty, with the result's columns.
        text_types: DuckDB types (of :data:`TEXT_TYPES`) whose columns come as DuckDB's text for them instead of
            their Arrow forms, for printing: BIT comes as its padded bytes, INTERVAL as a struct, BLOB as bytes.
    """
    if not isinstance(query, str):
        raise QueryError(f"a SQL query is text (a str), not {type(query).__name__}")
    if not query.strip():
        raise QueryError("empty SQL query")
    if sink is not None and not callable(sink):
        raise QueryError(f"sink must be a function taking each Arrow batch (or None), not {str(sink)[:40]!r}")
    if params is not None and (isinstance(params, str | bytes) or not isinstance(params, Mapping | list | tuple)):
        raise QueryError(f"params must be a list or dict of the query's placeholder values (or None), not "
                         f"{str(params)[:40]!r}")
    if isinstance(text_types, str):  # one type, not its letters
        text_types = (text_types,)
    max_rows = _check_cap(max_rows, "max_rows")
    max_bytes = _check_cap(max_bytes, "max_bytes")
    timeout_s = check_timeout(timeout_s)
    pivot = check_statements(cursor, query)
    deadline = _Deadline(cursor, timeout_s)
    try:
        with deadline.running():
            relation = cursor.sql(query, params=params)
            if relation is None:
                return pa.table({})
            if text_types:
                relation = _with_text_columns(relation, text_types)
            if max_rows is None and max_bytes is None and sink is None:
                return relation.to_arrow_table()
            small = max_bytes is not None or sink is not None
            batch = _BYTES_BATCH_ROWS if small else _CAPPED_BATCH_ROWS
            reader = relation.to_arrow_reader(max(1, min(max_rows or batch, batch)))
        try:
            return _fetch(reader, deadline, max_rows, max_bytes, sink)
        finally:
            reader.close()
    except duckdb.InterruptException:
        if deadline.timed_out.is_set():
            raise QueryError(f"query timed out after {timeout_s:g} s (raise timeout_s / --timeout, or narrow it "
                             "with WHERE start_ts BETWEEN ...)") from None
        raise QueryError("query interrupted") from None
    except duckdb.Error as exc:
        raise QueryError(describe_error(exc)) from None
    finally:
        if pivot:
            drop_pivot_types(cursor)


def _next_batch(reader: pa.RecordBatchReader, deadline: _Deadline) -> pa.RecordBatch | None:
    """The next batch (None at the end); errors while streaming arrive through Arrow and become DuckDB's."""
    try:
        with deadline.running():
            return reader.read_next_batch()
    except StopIteration:
        return None
    except (pa.ArrowException, OSError) as exc:
        if deadline.timed_out.is_set() or "interrupt" in str(exc).lower():
            raise duckdb.InterruptException(str(exc)) from None
        raise duckdb.Error(str(exc)) from None


def rows_within(batch: pa.RecordBatch | pa.Table, max_bytes: int) -> int:
    """How many leading rows of ``batch`` hold at most ``max_bytes`` bytes of Arrow data (``nbytes``)."""
    if batch.nbytes <= max_bytes:
        return batch.num_rows
    lo, hi = 0, batch.num_rows  # slice(0, lo) fits, slice(0, hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if batch.slice(0, mid).nbytes <= max_bytes:
            lo = mid
        else:
            hi = mid
    return lo


def _fetch(reader: pa.RecordBatchReader, deadline: _Deadline, max_rows: int | None, max_bytes: int | None,
           sink: Callable[[pa.RecordBatch], None] | None) -> pa.Table:
    """The result's rows within ``max_rows`` and ``max_bytes`` (see :func:`run_user_sql`), or to ``sink``."""
    kept: list[pa.RecordBatch] = []
    rows = size = 0
    done = False
    while not done and (max_rows is None or rows < max_rows):
        batch = _next_batch(reader, deadline)
        if batch is None:
            break
        if max_rows is not None:
            batch = batch.slice(0, max_rows - rows)
        if max_bytes is not None and size + batch.nbytes > max_bytes:
            batch = batch.slice(0, rows_within(batch, max_bytes - size) + 1)  # with the row that does not fit
            done = True
        rows += batch.num_rows
        size += batch.nbytes
        if sink is not None:
            sink(batch)
        else:
            kept.append(batch)
    return pa.Table.from_batches(kept, schema=reader.schema)


#: DuckDB types whose Arrow form prints badly, which ``run_user_sql(..., text_types=...)`` can fetch as text.
TEXT_TYPES = frozenset({"BIT", "INTERVAL", "BLOB"})


def _with_text_columns(relation: duckdb.DuckDBPyRelation, text_types: Collection[str]) -> duckdb.DuckDBPyRelation:
    """``relation`` with its columns of ``text_types`` cast to VARCHAR (by position: names may repeat)."""
    wanted = TEXT_TYPES.intersection(text_types)
    types = [str(t) for t in relation.types]
    if not wanted.intersection(types):
        return relation
    return relation.project(", ".join(
        (f"CAST(#{i} AS VARCHAR)" if t in wanted else f"#{i}") + f" AS {quote(name)}"
        for i, (t, name) in enumerate(zip(types, relation.columns, strict=True), start=1)))


def describe_error(exc: duckdb.Error) -> str:
    """DuckDB's error on one line, with the fix for the sandbox's and the memory limit's refusals."""
    text = " ".join(str(exc).split())
    if isinstance(exc, duckdb.PermissionException) or "external access" in text.lower() \
            or "read-only" in text.lower() or "read only" in text.lower():
        return f"not allowed: {text} (trace SQL is read-only and cannot touch files, URLs or extensions)"
    if isinstance(exc, duckdb.OutOfMemoryException) or text.startswith("Out of Memory Error"):
        return (f"{text.split(' (')[0]}: the query needs more than the trace's memory limit (nothing spills to disk); "
                f"narrow it (a time window, LIMIT, fewer columns) or raise {MEMORY_LIMIT_ENV}")
    install = _INSTALL_ADVICE.search(text)
    if install:  # DuckDB's advice to INSTALL and LOAD an extension, or to auto-load it: the sandbox refuses both
        return f"{text[:install.start()].rstrip(' .,')} (trace SQL cannot install or load extensions)"
    setting = _SET_ADVICE.search(text)
    if setting:  # DuckDB's advice to change a setting, which the sandbox refuses
        return (f"{text[:setting.start()].rstrip(' .')} (trace SQL cannot change settings such as "
                f"{setting.group(1)}: simplify the query)")
    return text


#: DuckDB's advice to install an extension: ``Please try installing and loading the excel extension by running:
#: INSTALL excel; LOAD excel; Alternatively, consider enabling auto-install ... SET ...;``
_INSTALL_ADVICE = re.compile(r"[.,]?\s*Please try installing and loading .*$", re.DOTALL)
#: DuckDB's advice to change a setting: ``Use "SET max_expression_depth TO x" to increase ... depth.``
_SET_ADVICE = re.compile(r'Use "SET (\w+) TO [^"]*"[^.]*\.?')
