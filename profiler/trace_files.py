"""The files a trace database holds beside its events: the kernel source files a recording kept (``SourceFile``)
and whole windows of event rows streamed out (the dashboard's CSV export of a view).

:class:`TraceFilesMixin` is a base class of :class:`profiler.Trace` (it uses the trace's cursor and guard).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.sqlutil import fetch_one, quote
from profiler.errors import QueryError
from profiler.trace_args import as_int, as_range, guarded
from tracer import schema as ts


class TraceFilesMixin:
    """Recorded kernel sources and window exports of a :class:`~profiler.Trace`."""

    _cursor: Callable[[], Any]
    sql_arrow: Callable[..., pa.Table]

    def export_window(self, table_name: str, start_ns: int, end_ns: int, sink: Callable[[pa.RecordBatch], None], *,
                      max_rows: int | None = None) -> pa.Schema:
        """Hand every row of ``table_name`` (Instruction, DmaPacket or slice) overlapping ``[start_ns, end_ns)`` to
        ``sink`` as Arrow batches, in start order, at most ``max_rows`` of them (what the dashboard's CSV export of
        a view streams); returns the rows' schema (their columns, also when there is no row).  QueryError for
        another table or a reversed range."""
        start, end = as_range(start_ns, end_ns)
        if table_name == ts.SPAN.name:
            table_name = dbs.SLICE_TABLE
        if table_name not in (ts.INSTRUCTION.name, ts.DMA_PACKET.name, dbs.SLICE_TABLE):
            raise QueryError(f"cannot export {str(table_name)[:40]!r}: choose Instruction, DmaPacket or slice")
        if max_rows is not None:
            max_rows = as_int(max_rows, "max_rows", "a whole number of rows")
        return self.sql_arrow(
            f"SELECT * FROM {quote(table_name)} WHERE {quote(ts.START_TS)} < $e AND {quote(ts.END_TS)} > $s "
            f"ORDER BY {quote(ts.START_TS)}, {quote(ts.ID)}", timeout_s=None, params={"s": start, "e": end},
            max_rows=max_rows, sink=sink).schema

    def _has_table(self, name: str) -> bool:
        return fetch_one(self._cursor(), "SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                         "current_database() AND schema_name = current_schema() AND table_name = $t",
                         {"t": name})[0] > 0

    @guarded
    def recorded_sources(self) -> dict[str, int]:
        """The kernel source files whose text the trace holds (``SourceFile``, recorded by the simulator), with
        their sizes in bytes; empty for a trace without any (an imported profile, a trace recorded before
        format 2.1)."""
        if not self._has_table(ts.SOURCE_FILE.name):
            return {}
        size = f"coalesce({quote(ts.SOURCE_SIZE_BYTES)}, strlen({quote(ts.SOURCE_TEXT)}))"
        rows = self._cursor().execute(f"SELECT {quote(ts.SOURCE_FILE_NAME)}, {size} "
                                      f"FROM {quote(ts.SOURCE_FILE.name)} ORDER BY 1").fetchall()
        return {str(f): int(n) for f, n in rows}

    @guarded
    def source_text(self, file: str) -> str | None:
        """The text of kernel source file ``file`` (named as ``nki_source_location`` names it: ``softmax.py``)
        as the trace recorded it, or None when the trace holds no text for it."""
        if not isinstance(file, str):
            raise QueryError(f"a source file name must be a string, not {str(file)[:40]!r}")
        if not self._has_table(ts.SOURCE_FILE.name):
            return None
        row = fetch_one(self._cursor(), f"SELECT {quote(ts.SOURCE_TEXT)} FROM {quote(ts.SOURCE_FILE.name)} "
                        f"WHERE {quote(ts.SOURCE_FILE_NAME)} = $f LIMIT 1", {"f": file})
        return None if row is None else row[0]
