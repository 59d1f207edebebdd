"""Opening a trnprof database: recognising and validating the file, and the locked-down DuckDB instance.

Every database is opened read-only in a DuckDB instance whose configuration is locked before any user SQL can
run: external access (files, URLs, ATTACH of other files, COPY) off, extension autoload/autoinstall off,
``lock_configuration`` on so no ``SET`` can undo that.  Internal queries and user SQL use cursors of that one
instance (a cursor per thread); user SQL runs under a timer that interrupts it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.sqlutil import fetch_one, quote
from profiler.errors import QueryError
from tracer.errors import TraceFormatError

#: First bytes of a DuckDB database file: 8 bytes of checksum, then the magic.
_DUCKDB_MAGIC = b"DUCK"
_MAGIC_OFFSET = 8


def is_duckdb_file(path: Path) -> bool:
    """True when ``path`` is a file that starts like a DuckDB database."""
    try:
        with open(path, "rb") as f:
            head = f.read(_MAGIC_OFFSET + len(_DUCKDB_MAGIC))
    except (IsADirectoryError, PermissionError, FileNotFoundError):
        return False
    return head[_MAGIC_OFFSET:] == _DUCKDB_MAGIC


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_database(path: Path) -> duckdb.DuckDBPyConnection:
    """Open a trnprof database read-only in a locked-down instance; one-line errors for anything else."""
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file or directory")
    if not is_duckdb_file(path):
        raise TraceFormatError(f"{path}: not a DuckDB database (expected a trnprof .duckdb file or a trace)")
    config = {
        "access_mode": "READ_ONLY",
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "allow_community_extensions": False,
    }
    try:
        con = duckdb.connect(str(path), config=config)
    except duckdb.Error as exc:
        raise TraceFormatError(f"{path}: cannot open the database ({_first_line(exc)}); it may be damaged or "
                               "still being written — re-run `trnprof ingest`") from None
    try:
        check_database(con, path)
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def read_info(con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
    """The ``trnprof_info`` key/value rows, or None when the database has no such table."""
    exists = fetch_one(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = "
                         "current_database()", [dbs.INFO_TABLE])
    if not exists or not exists[0]:
        return None
    rows = con.execute(f"SELECT {quote(dbs.INFO_KEY)}, {quote(dbs.INFO_VALUE)} FROM {quote(dbs.INFO_TABLE)}").fetchall()
    return {str(k): str(v) for k, v in rows}


def check_database(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    """Raise TraceFormatError unless ``con`` holds a trnprof database this version reads; return its info."""
    info = read_info(con)
    if info is None:
        raise TraceFormatError(f"{path}: a DuckDB database, but not one trnprof wrote (no {dbs.INFO_TABLE} table); "
                               "create one with `trnprof ingest TRACE`")
    version = info.get(dbs.INFO_FORMAT_VERSION, "")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise TraceFormatError(f"{path}: unreadable database format version {version!r}") from None
    ours = int(dbs.DB_FORMAT_VERSION.split(".")[0])
    if major > ours:
        raise TraceFormatError(f"{path}: database format {version} is newer than this trnprof reads "
                               f"({dbs.DB_FORMAT_VERSION}); upgrade trnprof")
    if major < ours:
        raise TraceFormatError(f"{path}: database format {version} is older than this trnprof reads "
                               f"({dbs.DB_FORMAT_VERSION}); re-run `trnprof ingest --force` on the trace")
    return info


def run_user_sql(cursor: duckdb.DuckDBPyConnection, query: str, timeout_s: float | None,
                 params: Any = None) -> pa.Table:
    """Run one user query on ``cursor`` under a timeout; the result as an Arrow table; QueryError otherwise."""
    if not isinstance(query, str) or not query.strip():
        raise QueryError("empty SQL query")
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        cursor.interrupt()

    timer = threading.Timer(timeout_s, interrupt) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        relation = cursor.sql(query, params=params)
        if relation is None:
            return pa.table({})
        return relation.to_arrow_table()
    except duckdb.InterruptException:
        if timed_out.is_set():
            raise QueryError(f"query timed out after {timeout_s:g} s (raise timeout_s / --timeout, or narrow it "
                             "with WHERE start_ts BETWEEN ...)") from None
        raise QueryError("query interrupted") from None
    except duckdb.Error as exc:
        raise QueryError(_describe_error(exc)) from None
    finally:
        if timer is not None:
            timer.cancel()


def _describe_error(exc: duckdb.Error) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, duckdb.PermissionException) or "external access" in text.lower() \
            or "read-only" in text.lower() or "read only" in text.lower():
        return f"not allowed: {text} (trace SQL is read-only and cannot touch files, URLs or extensions)"
    return text
