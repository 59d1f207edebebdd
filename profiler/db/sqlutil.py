"""Small SQL helpers shared by the database modules: identifier quoting and registering Arrow data."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import duckdb
import pyarrow as pa


def quote(identifier: str) -> str:
    """``identifier`` as a double-quoted SQL identifier."""
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as an SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, data: pa.Table | pa.RecordBatchReader) -> Iterator[str]:
    """Register ``data`` under a unique view name for the duration of the block; yields the quoted name."""
    name = f"_arrow_{uuid.uuid4().hex}"
    con.register(name, data)
    try:
        yield quote(name)
    finally:
        con.unregister(name)


def fetch_one(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> tuple[object, ...] | None:
    """The first row of ``sql`` (fetching the whole result, so the connection is free afterwards), or None."""
    rows = con.execute(sql, params).fetchall()
    return rows[0] if rows else None
