"""Export a trace database as a Neuron-Explorer-shaped Parquet directory: one ``<Table>.parquet`` per table.

Trace tables keep their Neuron Explorer names and columns (``Instruction``, ``DmaPacket``, ``SemaphoreUpdate``,
``Flow``, ``Metadata``, ...), without the database's own ``track_id``; tables larger than ``split_rows`` are split
as Neuron Explorer does (``<Table>_0.parquet``, ``<Table>_1.parquet``, ...).  trnprof's own tables go out under
their trace-format names: ``slice`` as ``Span`` (with ``track_group``/``track_name`` from its track) and
``Counter``.  Tables the database kept from an import (``Summary``, ``ActiveTime``, ...) are written as they are.
The result reads back with ``trnprof ingest`` (:mod:`profiler.importers.neuron_parquet`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from profiler.errors import CommandError
from profiler.exporters.common import (
    TimeWindow,
    atomic_output,
    count_rows,
    empty_schema,
    paged,
    table_columns,
    table_names,
)
from profiler.trace import Trace
from tracer import schema as ts

#: Rows per Parquet file before a table is split into numbered parts.
DEFAULT_SPLIT_ROWS = 10_000_000
ROW_GROUP_ROWS = 1 << 17
#: Neuron Explorer's whole-profile aggregates: a windowed export leaves them out (their figures are the whole
#: profile's, not the window's).
AGGREGATE_TABLES = ("Summary", "OpcodeSummary", "ThrottleSummary", "HbmUsageSummaryByType", "DmaUsageSummary")
#: Metadata's first and last timestamps (a windowed export's are those of the rows it holds).
_EXTENT = ("first_hw_timestamp", "last_hw_timestamp")

Progress = Callable[[int], None]


@dataclass
class ParquetStats:
    """Rows written per table (tables without rows are not written, as Neuron Explorer writes a table only when
    the profile has that activity), and the whole-profile tables a windowed export left out."""

    rows: dict[str, int] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def _extent(trace: Trace, tables: list[tuple[str, str, list[int]]]) -> tuple[int, int] | None:
    """The first and last time of the rows a windowed export holds (None when it holds none)."""
    lows, highs = [], []
    for table, where, params in tables:
        cols = table_columns(trace, table)
        lo, hi = ((ts.START_TS, ts.END_TS) if ts.START_TS in cols and ts.END_TS in cols else
                  (ts.TIMESTAMP, ts.TIMESTAMP) if ts.TIMESTAMP in cols else (None, None))
        if lo is None or table == ts.METADATA.name:
            continue
        row = trace.sql(f"SELECT min({quote(lo)}), max({quote(hi)}) FROM {quote(table)} WHERE {where}",
                        timeout_s=None, params=params or None).fetchall()[0]
        if row[0] is not None:
            lows.append(int(row[0]))
            highs.append(int(row[1]))
    return (min(lows), max(highs)) if lows else None


def _select(trace: Trace, table: str, extent: tuple[int, int] | None = None) -> tuple[str, str]:
    """(output table name, SELECT list) for database table ``table`` (Metadata's first and last timestamps
    ``extent`` when given: a windowed export's)."""
    cols = [c for c in table_columns(trace, table) if c != dbs.TRACK_ID]
    if table == ts.METADATA.name and extent is not None:
        bound = dict(zip(_EXTENT, extent, strict=True))
        # (the row counts a recording's writer noted are the whole trace's files')
        return table, ", ".join(f"{int(bound[c])}::BIGINT AS {quote(c)}" if c in bound else
                                f"NULL::VARCHAR AS {quote(c)}" if c == ts.TABLE_ROWS else f"s.{quote(c)}"
                                for c in cols)
    if table == dbs.SLICE_TABLE:
        track = quote(dbs.TRACK_TABLE)
        parts = []
        for c in ts.SPAN.names:
            if c == ts.DURATION_NS:
                parts.append(f"{quote(dbs.DUR_NS)} AS {quote(c)}")
            elif c == ts.TRACK_GROUP:
                parts.append(f"(SELECT {quote(dbs.GROUP_NAME)} FROM {track} k WHERE k.{quote(dbs.TRACK_ID)} = "
                             f"s.{quote(dbs.TRACK_ID)}) AS {quote(c)}")
            elif c == ts.TRACK_NAME:
                parts.append(f"(SELECT k.{quote(ts.NAME)} FROM {track} k WHERE k.{quote(dbs.TRACK_ID)} = "
                             f"s.{quote(dbs.TRACK_ID)}) AS {quote(c)}")
            elif c == ts.PCORE_IDX:
                parts.append(f"(SELECT {quote(dbs.CORE)} FROM {track} k WHERE k.{quote(dbs.TRACK_ID)} = "
                             f"s.{quote(dbs.TRACK_ID)}) AS {quote(c)}")
            elif c in cols:
                parts.append(f"s.{quote(c)}")
        parts += [f"s.{quote(c)}" for c in cols if c not in ts.SPAN and c != dbs.DUR_NS]
        return ts.SPAN.name, ", ".join(parts)
    return table, ", ".join(f"s.{quote(c)}" for c in cols)


def export_parquet(trace: Trace, output: str | os.PathLike[str], *, window: TimeWindow | None = None,
                   force: bool = False, split_rows: int = DEFAULT_SPLIT_ROWS,
                   progress: Progress | None = None, expected: Callable[[int], None] | None = None) -> ParquetStats:
    """Write ``trace`` (or the part in ``window``) as a Neuron-shaped Parquet directory at ``output``.

    The directory is built beside ``output`` and renamed over it when complete; an existing ``output`` needs
    ``force``.  ``expected`` is told the rows to write before the first (a progress bar's total).  With a window,
    Metadata's first and last timestamps are cut to it and :data:`AGGREGATE_TABLES` are left out.
    """
    if isinstance(split_rows, bool) or not isinstance(split_rows, int) or split_rows < 1:
        raise CommandError(f"split_rows must be a whole number of rows, 1 or more, not {str(split_rows)[:40]!r}")
    window = window or TimeWindow()
    out_dir = Path(output)
    stats = ParquetStats()
    with atomic_output(out_dir, force=force, directory=True, inputs=(trace.path, trace.db_path),
                       suffix=".parquet") as tmp:
        tables = []
        for table in table_names(trace):
            if not window.is_all and table in AGGREGATE_TABLES:
                stats.left_out.append(table)
                continue
            where, params = _window_condition(trace, table, window)
            tables.append((table, where, params))
        if expected is not None:
            expected(sum(count_rows(trace, table, where, params) for table, where, params in tables))
        extent = None if window.is_all else _extent(trace, tables)
        for table, where, params in tables:
            name, select = _select(trace, table, extent)
            rows = _write_table(trace, tmp, name, select, table, where=where, params=params,
                                split_rows=split_rows, progress=progress)
            if rows or table == ts.METADATA.name:
                stats.rows[name] = rows
        stats.files = sorted(out_dir / f.name for f in tmp.iterdir())
    return stats


def _window_condition(trace: Trace, table: str, window: TimeWindow) -> tuple[str, list[int]]:
    if window.is_all:
        return "TRUE", []
    if table == ts.FLOW.name:
        # Edges between rows that are both exported.
        parts, params = [], []
        for side_id, side_table in ((ts.IN_ID, ts.IN_TABLE), (ts.OUT_ID, ts.OUT_TABLE)):
            alternatives = []
            for db_table, names in ((dbs.SLICE_TABLE, (ts.SPAN.name, dbs.SLICE_TABLE)),
                                    (ts.INSTRUCTION.name, (ts.INSTRUCTION.name,)),
                                    (ts.DMA_PACKET.name, (ts.DMA_PACKET.name,))):
                if db_table not in table_names(trace):
                    continue
                cond, p = window.interval_sql()
                quoted = ", ".join(f"'{n}'" for n in names)
                alternatives.append(f"({quote(side_table)} IN ({quoted}) AND {quote(side_id)} IN "
                                    f"(SELECT id FROM {quote(db_table)} WHERE {cond}))")
                params += p
            parts.append("(" + (" OR ".join(alternatives) or "FALSE") + ")")
        return " AND ".join(parts), params
    if table == ts.METADATA.name:
        return "TRUE", []
    return window.condition(trace, table)


class _SplitWriter:
    """Writes ``<name>.parquet``, or ``<name>_0.parquet``, ``<name>_1.parquet``, ... past ``split_rows`` rows."""

    def __init__(self, directory: Path, name: str, split_rows: int) -> None:
        self.directory = directory
        self.name = name
        self.split_rows = split_rows
        self.parts: list[Path] = []
        self.writer: pq.ParquetWriter | None = None
        self.in_part = 0
        self.total = 0

    def write(self, batch: pa.RecordBatch) -> None:
        batch = _plain_batch(batch)
        while batch.num_rows:
            if self.writer is None or self.in_part >= self.split_rows:
                self._next_part(batch.schema)
            assert self.writer is not None
            head = batch.slice(0, self.split_rows - self.in_part)
            batch = batch.slice(head.num_rows)
            self.writer.write_batch(head)
            self.in_part += head.num_rows
            self.total += head.num_rows

    def _next_part(self, schema: pa.Schema) -> None:
        if self.writer is not None:
            self.writer.close()
        path = self.directory / f"{self.name}_{len(self.parts)}.parquet"
        self.parts.append(path)
        self.writer = pq.ParquetWriter(path, schema, compression="zstd")
        self.in_part = 0

    def close(self, empty_schema: pa.Schema, *, keep_empty: bool = False) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if not self.parts:
            if keep_empty:
                pq.write_table(empty_schema.empty_table(), self.directory / f"{self.name}.parquet")
        elif len(self.parts) == 1:
            self.parts[0].rename(self.directory / f"{self.name}.parquet")


def _write_table(trace: Trace, directory: Path, name: str, select: str, table: str, *, where: str,
                 params: list[int], split_rows: int, progress: Progress | None) -> int:
    """Stream one table into ``<name>.parquet`` (or numbered parts); returns the rows written."""
    out = _SplitWriter(directory, name, split_rows)
    for page in paged(trace, select, table, where=where, params=params, page_rows=ROW_GROUP_ROWS):
        for batch in page.to_batches():
            out.write(batch)
        if progress is not None:
            progress(page.num_rows)
    out.close(_plain(empty_schema(trace, select, table)), keep_empty=table == ts.METADATA.name)
    return out.total


def _plain(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                      for f in schema])


def _plain_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    cols = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(cols, schema=_plain(batch.schema))
