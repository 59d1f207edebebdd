"""Opening a trnprof database: recognising and validating the file, and the locked-down DuckDB instance.

Every database is opened read-only in a DuckDB instance whose configuration is locked before any user SQL can
run: external access (files, URLs, ATTACH of other files, COPY) off, extension autoload/autoinstall off, the
buffer pool capped (:func:`default_memory_limit`), ``lock_configuration`` on so no ``SET`` can undo that.
Internal queries and user SQL use cursors of that one instance (a cursor per thread); user SQL runs through
:mod:`profiler.db.user_sql` (one read-only statement, under a timer that interrupts it).

One file, one instance per process: DuckDB keeps a single instance per database file and hands every further
``duckdb.connect`` of the file a connection to it, so a second :func:`open_database` of the same file (a notebook
trace and the dashboard it starts, ``trnprof diff A A``) gets its own connection to the already locked instance.
The instance is opened with nothing but ``read_only`` and locked down with ``SET`` right away, so the ingest
cache's own read-only look at the file shares it too.  A file replaced (re-ingested) while an older version is
still open in the process cannot be opened until that older version is closed (DuckDB would keep answering from
the old file); that is a one-line error.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path

import duckdb
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.ingest import STANDARD_TABLES, db_table_schema
from profiler.db.sqlutil import fetch_one, quote
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


#: Leading bytes of files often mistaken for a database, and what to call them.
_OTHER_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", "a Parquet file"),
    (b"ARROW1", "an Arrow IPC file"),
    (b"\xff\xff\xff\xff", "an Arrow IPC stream"),
    (b"\x1f\x8b", "a gzip file"),
    (b"SQLite format 3\0", "an SQLite database"),
)


def reingest_hint(path: Path) -> str:
    """The fix for a database that cannot be used: how to re-create it."""
    return f"delete it, then re-create it with `trnprof ingest TRACE -o {path}`"


def describe_non_database(path: Path) -> str:
    """What ``path`` (a file that is not a DuckDB database) looks like: ``empty``, ``a Parquet file``, ..."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if not head:
        return "the file is empty"
    for magic, what in _OTHER_MAGICS:
        if head.startswith(magic):
            return f"it is {what}"
    if all(b >= 0x20 or b in b"\t\r\n" for b in head):
        return "it is a text file"
    return "unrecognised binary content"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: Settings of the user-SQL sandbox, applied with ``SET`` before ``lock_configuration``.
SANDBOX_SETTINGS: dict[str, bool] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
}

#: Environment variable that sets the DuckDB buffer-pool limit of each opened trace (a DuckDB size: ``2GiB``,
#: ``500MB``); :func:`default_memory_limit` when unset.
MEMORY_LIMIT_ENV = "TRNPROF_DB_MEMORY_LIMIT"
#: The default limit: a quarter of physical memory, at most this much.
MAX_DEFAULT_MEMORY_BYTES = 4 << 30


def default_memory_limit() -> str:
    """DuckDB's ``memory_limit`` for an opened trace: ``$TRNPROF_DB_MEMORY_LIMIT`` or 1/4 of RAM (<= 4 GiB).

    DuckDB's own default (80% of RAM) lets a long-running server's buffer pool grow with every region of a large
    trace it has read; with a limit it evicts (the file is read-only, so eviction is free) and serving memory is
    bounded whatever the trace size.
    """
    env = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if env:
        return env
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 4 * MAX_DEFAULT_MEMORY_BYTES
    return f"{min(ram // 4, MAX_DEFAULT_MEMORY_BYTES) >> 20}MiB"


_open_lock = threading.RLock()     # re-entrant: a finalizer may run (garbage collection) while it is held
#: Per resolved database path opened by this process: (file identity when opened, live connections).
_live: dict[str, tuple[tuple[int, int], int]] = {}
#: Release callbacks of the connections :func:`open_database` returned, by ``id``.
_finalizers: dict[int, weakref.finalize] = {}


#: The database this process opened last (what an error met while reading data later names).
_opened: list[Path] = []


def last_opened_path() -> Path | None:
    """The database file :func:`open_database` opened last in this process (None before any)."""
    return _opened[-1] if _opened else None


def _file_identity(path: Path) -> tuple[int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino)


def _release(key: str, con_id: int) -> None:
    with _open_lock:
        _finalizers.pop(con_id, None)
        ident, n = _live.get(key, ((0, 0), 0))
        if n <= 1:
            _live.pop(key, None)
        else:
            _live[key] = (ident, n - 1)


def _lock_down(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Apply :data:`SANDBOX_SETTINGS` and lock them (unless the shared instance already is), then verify."""
    names = [*SANDBOX_SETTINGS, "lock_configuration", "access_mode"]
    select = ", ".join(f"current_setting('{n}')" for n in names)
    row = fetch_one(con, f"SELECT {select}")
    if row is not None and not row[-2]:
        limit = default_memory_limit()
        try:
            con.execute("SET memory_limit = ?", [limit])
        except duckdb.Error as exc:
            raise TraceFormatError(f"{path}: bad {MEMORY_LIMIT_ENV}={limit!r} ({_first_line(exc)}); use a size "
                                   "such as 2GiB or 500MB") from None
        # No temporary directory: DuckDB lets queries read and write files in it even with external access off
        # (COPY ... TO '<db>.tmp/x.csv', read_text, glob); without one, nothing can spill, and a query that would
        # needs more memory instead (a one-line error naming MEMORY_LIMIT_ENV).
        con.execute("SET temp_directory = ''")
        for name, value in SANDBOX_SETTINGS.items():
            con.execute(f"SET {name} = {str(value).lower()}")
        con.execute("SET lock_configuration = true")
        row = fetch_one(con, f"SELECT {select}")
    got = dict(zip(names, row or (), strict=False))
    wrong = [n for n, v in SANDBOX_SETTINGS.items() if got.get(n) != v]
    allowed = fetch_one(con, "SELECT current_setting('allowed_directories')")
    if allowed is not None and allowed[0]:  # a directory queries could still read and write
        wrong.append("allowed_directories")
    if wrong or not got.get("lock_configuration") or str(got.get("access_mode")).lower() != "read_only":
        raise TraceFormatError(f"{path}: already open in this process with other DuckDB settings "
                               f"({', '.join(wrong) or 'access_mode/lock_configuration'}); close that connection "
                               "and open the trace again")


def open_database(path: Path) -> duckdb.DuckDBPyConnection:
    """Open a trnprof database read-only in a locked-down instance; one-line errors for anything else.

    Opening a file this process already has open returns a new connection to the same locked instance.  Close
    the connection with :func:`close_database`.
    """
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file or directory")
    if not path.is_file():
        raise TraceFormatError(f"{path}: not a file; a trnprof database is one .duckdb file made by "
                               "`trnprof ingest TRACE -o FILE`")
    if not is_duckdb_file(path):
        raise TraceFormatError(f"{path}: not a DuckDB database ({describe_non_database(path)}); a trnprof "
                               f"database is made by `trnprof ingest TRACE -o {path}`")
    key = str(path.resolve())
    with _open_lock:
        ident = _file_identity(path)
        known = _live.get(key)
        if known is not None and known[1] > 0 and known[0] != ident:
            raise TraceFormatError(f"{path}: the file was replaced (re-ingested) while this process still has the "
                                   "previous version open; close it (Trace.close()) and open the trace again")
        try:
            con = duckdb.connect(key, read_only=True)
        except duckdb.ConnectionException as exc:
            if "different configuration" not in str(exc):
                raise TraceFormatError(f"{path}: cannot open the database ({_first_line(exc)})") from None
            raise TraceFormatError(f"{path}: already open in this process by other code with other DuckDB settings "
                                   f"({_first_line(exc)}); close that connection, or use Trace.sql") from None
        except duckdb.Error as exc:
            raise TraceFormatError(f"{path}: cannot open the database ({_first_line(exc)}); the file is damaged, "
                                   f"truncated or still being written: {reingest_hint(path)}") from None
        try:
            _lock_down(con, path)
            check_database(con, path)
        except BaseException:
            con.close()
            raise
        _live[key] = (ident, (known[1] if known is not None and known[0] == ident else 0) + 1)
        _opened.append(Path(key))
        del _opened[:-1]
        _finalizers[id(con)] = weakref.finalize(con, _release, key, id(con))
    return con


def close_database(con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection :func:`open_database` returned (other connections to the same file stay open)."""
    con.close()
    with _open_lock:
        fin = _finalizers.get(id(con))
    if fin is not None:
        fin()


def read_info(con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
    """The ``trnprof_info`` key/value rows, or None when the database has no such table."""
    exists = fetch_one(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = "
                         "current_database()", [dbs.INFO_TABLE])
    if not exists or not exists[0]:
        return None
    rows = con.execute(f"SELECT {quote(dbs.INFO_KEY)}, {quote(dbs.INFO_VALUE)} FROM {quote(dbs.INFO_TABLE)}").fetchall()
    return {str(k): str(v) for k, v in rows}


def check_database(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    """Raise TraceFormatError unless ``con`` holds a complete trnprof database this version reads; return its info.

    Checks, in order: the file is as long as its header says (not truncated), it has a ``trnprof_info`` table
    (trnprof wrote it), its format version, and every table and column the ingest always creates
    (:func:`expected_tables`) with a type of the right kind.  Only the catalog and the small info table are read,
    never the trace data, so the cost does not grow with the trace.
    """
    try:
        check_file_complete(con, path)
        columns = stored_columns(con)
        if dbs.INFO_TABLE.lower() not in columns:
            raise TraceFormatError(f"{path}: a DuckDB database, but not one trnprof wrote (no {dbs.INFO_TABLE} "
                                   f"table); create one with `trnprof ingest TRACE -o {path}`")
        _raise_schema_problems(path, schema_problems(columns, {dbs.INFO_TABLE: dbs.INFO}))
        info = read_info(con) or {}
        _check_format_version(info, path)
        _raise_schema_problems(path, schema_problems(columns, expected_tables(info.get(dbs.INFO_FORMAT_VERSION))))
    except duckdb.Error as exc:
        raise TraceFormatError(f"{path}: cannot read the database ({_first_line(exc)}); the file is damaged: "
                               f"{reingest_hint(path)}") from None
    return info


def _check_format_version(info: dict[str, str], path: Path) -> None:
    """Raise TraceFormatError unless the info's format version has the MAJOR this trnprof reads."""
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


#: Bytes before a DuckDB file's first block: the main header and the two alternating database headers.
_FILE_HEADER_BYTES = 3 * 4096


def check_file_complete(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Raise TraceFormatError when ``path`` is too short to hold the blocks its DuckDB header records in use.

    DuckDB reads blocks lazily, so a truncated file opens and fails only at the first query touching a lost
    block.  Its used blocks have distinct numbers, so the file must reach at least the end of block
    ``used_blocks - 1`` (``pragma_database_size``); trailing free blocks may legitimately be cut off by DuckDB.
    """
    row = fetch_one(con, "SELECT block_size, used_blocks FROM pragma_database_size() "
                         "WHERE database_name = current_database()")
    if row is None or row[0] is None or row[1] is None:
        return
    needed = _FILE_HEADER_BYTES + int(row[0]) * int(row[1])
    size = path.stat().st_size
    if size < needed:
        raise TraceFormatError(f"{path}: truncated DuckDB database ({size:,} bytes; the {int(row[1]):,} blocks its "
                               f"header records in use need at least {needed:,}); the file was cut short: "
                               f"{reingest_hint(path)}")


@functools.cache
def expected_tables(version: str | None = None) -> Mapping[str, pa.Schema]:
    """The tables ``trnprof ingest`` always creates, with the columns it always gives them.

    The trace tables of :data:`profiler.db.ingest.STANDARD_TABLES` (created empty, or completed with their
    missing columns, when the source has none) plus the profiler's own ``track``, ``lod``, ``counter_lod`` and
    ``trnprof_info``.  Other tables (``DmaQueuesInfo``) and the extra columns a source adds are optional; so are
    the columns a later minor version added (:data:`profiler.db_schema.COLUMNS_SINCE`) in a database of an
    earlier ``version`` (the one its ``trnprof_info`` gives).
    """
    tables = {name: db_table_schema(name) for name in STANDARD_TABLES}
    tables.update({dbs.TRACK_TABLE: dbs.TRACK_STORED, dbs.LOD_TABLE: dbs.LOD,
                   dbs.COUNTER_LOD_TABLE: dbs.COUNTER_LOD, dbs.INFO_TABLE: dbs.INFO})
    have = _version_tuple(version)
    for (table, column), since in dbs.COLUMNS_SINCE.items():
        if have is not None and have < since and table in tables and column in tables[table].names:
            schema = tables[table]
            tables[table] = schema.remove(schema.get_field_index(column))
    return tables


def _version_tuple(version: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (version or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def stored_columns(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """``{table: {column: DuckDB type}}`` of the database's main schema, names lower-cased (DuckDB resolves
    names case-insensitively); one catalog query, no data read."""
    rows = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                       "WHERE database_name = current_database() AND schema_name = current_schema()").fetchall()
    tables: dict[str, dict[str, str]] = {}
    for table, column, sql_type in rows:
        tables.setdefault(str(table).lower(), {})[str(column).lower()] = str(sql_type)
    return tables


#: DuckDB base types (``data_type`` up to any ``(``) by kind.
_SQL_KINDS: Mapping[str, str] = {
    **dict.fromkeys(("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                     "UBIGINT", "UHUGEINT"), "integer"),
    **dict.fromkeys(("FLOAT", "DOUBLE", "DECIMAL"), "floating-point"),
    "VARCHAR": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
}


_KIND_NAMES: Mapping[str, str] = {"integer": "an integer type", "floating-point": "a floating-point type"}


def _arrow_kind(t: pa.DataType) -> str | None:
    """The kind of :data:`_SQL_KINDS` an Arrow type is stored as; None for a type not checked."""
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "floating-point"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    return None


def schema_problems(columns: Mapping[str, Mapping[str, str]], expected: Mapping[str, pa.Schema]) -> list[str]:
    """What ``columns`` (:func:`stored_columns`) lacks of ``expected``: missing tables and columns, and columns
    whose DuckDB type is of another kind (an integer, a floating-point number, VARCHAR, BOOLEAN) than expected."""
    problems = []
    for table, schema in expected.items():
        have = columns.get(table.lower())
        if have is None:
            problems.append(f"table {table} is missing")
            continue
        for f in schema:
            sql_type = have.get(f.name.lower())
            want = _arrow_kind(f.type)
            if sql_type is None:
                problems.append(f"column {table}.{f.name} is missing")
            elif want is not None and _SQL_KINDS.get(sql_type.split("(")[0].strip()) != want:
                problems.append(f"column {table}.{f.name} is {sql_type}, expected {_KIND_NAMES.get(want, want)}")
    return problems


#: Problems named in the error; the rest are counted.
_MAX_PROBLEMS_SHOWN = 3


def _raise_schema_problems(path: Path, problems: list[str]) -> None:
    """Raise one TraceFormatError naming ``path`` and the first ``problems``, if there are any."""
    if not problems:
        return
    shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
    more = len(problems) - _MAX_PROBLEMS_SHOWN
    if more > 0:
        shown += f"; and {more} more"
    raise TraceFormatError(f"{path}: not a complete trnprof database ({shown}); it was damaged or altered after "
                           f"`trnprof ingest`: {reingest_hint(path)}")
