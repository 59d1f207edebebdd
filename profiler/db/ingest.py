"""Ingest: stream any :class:`~profiler.sources.TraceSource` into one DuckDB file, atomically, and build the index.

The build never holds the trace in Python objects.  Record batches of the track-keyed tables (Instruction,
DmaPacket, Span -> slice, Counter) are split by track as they stream in and staged per track
(:mod:`profiler.db.staging`), then appended to DuckDB track by track, so each table is stored sorted by
``(track_id, start_ts)`` (zone maps prune) without a global sort; other tables stream straight into DuckDB.  The
level-of-detail index is then built one track at a time from that track's columns in numpy.  Everything is
written into a temporary file beside the target and renamed over it only when complete, so an interrupted
ingest never leaves a database that looks valid.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.sqlutil import fetch_one, quote, registered
from profiler.db.staging import TrackStage, plain_strings
from profiler.db.tracks import TRACK_KEYS, TrackKeySpec, TrackRegistry
from profiler.sources import TraceSource
from tracer import schema as ts
from tracer._version import __version__
from tracer.errors import TraceFormatError

#: Called as ``progress(phase, done, total)``; phases: ``read`` (input bytes), ``index`` (tracks).
IngestProgress = Callable[[str, int, int], None]

#: Tables every database has (empty when the source had none), so queries and the API never miss one.
STANDARD_TABLES: tuple[str, ...] = (ts.INSTRUCTION.name, ts.DMA_PACKET.name, ts.SEMAPHORE_UPDATE.name,
                                    ts.FLOW.name, ts.METADATA.name, ts.COUNTER.name, dbs.SLICE_TABLE)

#: Interval tables carrying tracks, and the column naming an event in the index (first non-null wins).
INTERVAL_NAME_COLUMNS: dict[str, tuple[str, ...]] = {
    ts.INSTRUCTION.name: (ts.OPCODE,),
    ts.DMA_PACKET.name: (ts.VARIABLE, ts.QUEUE_NAME),
    dbs.SLICE_TABLE: (ts.NAME,),
}


def _db_arrow_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def db_table_schema(name: str) -> pa.Schema:
    """The Arrow schema of database table ``name`` as the ingest creates it when the source has no rows for it."""
    if name == dbs.SLICE_TABLE:
        return dbs.SLICE
    spec = ts.table_spec(name)
    fields = [pa.field(c.name, _db_arrow_type(c.type)) for c in spec.columns]
    if name in TRACK_KEYS:
        fields.insert(0, pa.field(dbs.TRACK_ID, pa.int64()))
    return pa.schema(fields)


def _slice_batch(batch: pa.RecordBatch, track_ids: np.ndarray) -> pa.RecordBatch:
    """A Span batch as ``slice`` rows (keeping any extra columns the source added)."""
    cols = {n: batch.column(n) for n in batch.schema.names}
    n = batch.num_rows
    start = cols[ts.START_TS]
    end = cols[ts.END_TS]
    out: dict[str, pa.Array] = {
        ts.ID: cols[ts.ID],
        dbs.TRACK_ID: pa.array(track_ids, pa.int64()),
        ts.START_TS: start,
        ts.END_TS: end,
        dbs.DUR_NS: pc.subtract(end, start),
    }
    for f in dbs.SLICE:
        if f.name not in out:
            out[f.name] = cols[f.name] if f.name in cols else pa.nulls(n, f.type)
    consumed = {ts.DURATION_NS, ts.TRACK_GROUP, ts.TRACK_NAME, ts.PCORE_IDX, *out}
    for name, col in cols.items():
        if name not in consumed:
            out[name] = col
    return pa.RecordBatch.from_pydict(out)


def _check_batch(source: TraceSource, table: str, batch: pa.RecordBatch, time_columns: tuple[str, ...]) -> None:
    for col in time_columns:
        if col not in batch.schema.names:
            raise TraceFormatError(f"{source.path}: table {table} has no {col} column")
        if batch.num_rows == 0:
            continue
        mm = pc.min_max(batch.column(col)).as_py()
        if mm["min"] is None:
            raise TraceFormatError(f"{source.path}: table {table} has null {col} values")
        if mm["min"] < -lod.TIME_LIMIT or mm["max"] >= lod.TIME_LIMIT:
            raise TraceFormatError(f"{source.path}: table {table} has {col} values beyond +-2**62 ns; timestamps "
                                   "must be nanoseconds (did the source write a different unit?)")


class _Runs:
    """Splits a source's ``(table, batch)`` stream into runs of consecutive batches of one table."""

    def __init__(self, stream: Iterator[tuple[str, pa.RecordBatch]]) -> None:
        self._stream = stream
        self._pending: tuple[str, pa.RecordBatch] | None = None
        self._done = False

    def next_run(self) -> tuple[str, Iterator[pa.RecordBatch]] | None:
        """The next run as (table name, its batches), or None at the end of the stream.

        The previous run's iterator must be exhausted first.
        """
        if self._pending is None and not self._done:
            self._pending = next(self._stream, None)
            self._done = self._pending is None
        if self._pending is None:
            return None
        name, first = self._pending
        self._pending = None

        def rest() -> Iterator[pa.RecordBatch]:
            yield first
            for item in self._stream:
                if item[0] != name:
                    self._pending = item
                    return
                yield item[1]
            self._done = True
        return name, rest()


def _select_list(schema: pa.Schema) -> str:
    parts = []
    for f in schema:
        q = quote(f.name)
        if pa.types.is_dictionary(f.type) or pa.types.is_large_string(f.type):
            parts.append(f"CAST({q} AS VARCHAR) AS {q}")
        else:
            parts.append(q)
    return ", ".join(parts)


class _Builder:
    """State of one ingest into an open temporary database."""

    def __init__(self, con: duckdb.DuckDBPyConnection, source: TraceSource, stage: TrackStage) -> None:
        self.con = con
        self.source = source
        self.stage = stage
        self.registry = TrackRegistry()
        self.created: set[str] = set()
        self.stream_error: BaseException | None = None

    def convert(self, name: str, spec: TrackKeySpec | None, batch: pa.RecordBatch) -> pa.RecordBatch:
        if spec is None:
            if name in ts.TABLES_BY_NAME and ts.TABLES_BY_NAME[name].kind == "interval":
                _check_batch(self.source, name, batch, (ts.START_TS, ts.END_TS))
            return batch
        time_cols = (ts.TIMESTAMP,) if spec.kind == "counter" else (ts.START_TS, ts.END_TS)
        _check_batch(self.source, name, batch, time_cols)
        ids = self.registry.assign(spec, batch)
        if spec.db_table == dbs.SLICE_TABLE:
            return _slice_batch(batch, ids)
        return pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()), *batch.columns],
                                          names=[dbs.TRACK_ID, *batch.schema.names])

    def _conform(self, name: str, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
        if batch.schema == schema:
            return batch
        try:
            return batch.select(schema.names).cast(schema)
        except (ValueError, KeyError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise TraceFormatError(f"{self.source.path}: table {name} changes its columns between record batches "
                                   f"({str(exc).splitlines()[0]})") from None

    def add_run(self, name: str, batches: Iterator[pa.RecordBatch]) -> None:
        """Consume one run of batches of table ``name``: stage track-keyed tables, load the others."""
        spec = TRACK_KEYS.get(name)
        if spec is not None:
            sort_column = _sort_column(spec)
            for batch in batches:
                converted = plain_strings(self.convert(name, spec, batch))
                schema = self.stage.schema(spec.db_table)
                if schema is not None:
                    converted = self._conform(name, converted, schema)
                self.stage.add(spec.db_table, converted, sort_column)
            return
        self._load_run(name, batches)

    def _load_run(self, name: str, batches: Iterator[pa.RecordBatch]) -> None:
        """Store a run of a table without tracks straight into DuckDB, in arrival order."""
        target = name
        iterator = iter(batches)
        converted_first = self.convert(name, None, next(iterator))
        schema = converted_first.schema

        def converted() -> Iterator[pa.RecordBatch]:
            try:
                yield from convert_rest()
            except BaseException as exc:  # DuckDB wraps errors of the stream; keep the original to re-raise
                self.stream_error = exc
                raise

        def convert_rest() -> Iterator[pa.RecordBatch]:
            yield converted_first
            for b in iterator:
                yield self._conform(name, self.convert(name, None, b), schema)

        reader = pa.RecordBatchReader.from_batches(schema, converted())
        self.stream_error = None
        with registered(self.con, reader) as view:
            select = f"SELECT {_select_list(schema)} FROM {view}"
            try:
                if target in self.created:
                    self.con.execute(f"INSERT INTO {quote(target)} BY NAME {select}")
                else:
                    self.con.execute(f"CREATE TABLE {quote(target)} AS {select}")
                    self.created.add(target)
            except duckdb.Error as exc:
                if self.stream_error is not None:
                    raise self.stream_error from None
                raise TraceFormatError(f"{self.source.path}: cannot store table {name}: "
                                       f"{' '.join(str(exc).split())[:300]}") from None

    def load_staged(self) -> None:
        """Append every staged track-keyed table to DuckDB in (track_id, time) order, track by track."""
        for target in list(self.stage.tables):
            sort_column = self.stage.tables[target].sort_column
            for tids in self.stage.groups(target, LOAD_GROUP_ROWS):
                # Staged track after track; a sort is needed only when a track arrived out of time order.
                in_order = self.stage.in_order(target, tids)
                order = "" if in_order else f" ORDER BY {quote(dbs.TRACK_ID)}, {quote(sort_column)}"
                with registered(self.con, self.stage.reader(target, tids)) as view:
                    if target in self.created:
                        self.con.execute(f"INSERT INTO {quote(target)} SELECT * FROM {view}{order}")
                    else:
                        self.con.execute(f"CREATE TABLE {quote(target)} AS SELECT * FROM {view}{order}")
                        self.created.add(target)

    def finish_tables(self) -> None:
        self.load_staged()
        for name in STANDARD_TABLES:
            if name not in self.created:
                with registered(self.con, db_table_schema(name).empty_table()) as view:
                    self.con.execute(f"CREATE TABLE {quote(name)} AS SELECT * FROM {view}")
                self.created.add(name)
            else:
                self._add_missing_columns(name)

    def _add_missing_columns(self, name: str) -> None:
        existing = {r[0] for r in self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND database_name = current_database()",
            [name]).fetchall()}
        for f in db_table_schema(name):
            if f.name not in existing:
                sql_type = _SQL_TYPES.get(f.type)
                if sql_type is None:
                    continue
                self.con.execute(f"ALTER TABLE {quote(name)} ADD COLUMN {quote(f.name)} {sql_type}")


_SQL_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.string(): "VARCHAR", pa.float32(): "FLOAT",
              pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}


def _sort_column(spec: TrackKeySpec) -> str:
    return ts.TIMESTAMP if spec.kind == "counter" else ts.START_TS


def _name_expression(table: str) -> str:
    cols = [quote(c) for c in INTERVAL_NAME_COLUMNS[table]]
    return cols[0] if len(cols) == 1 else f"coalesce({', '.join(cols)})"


def build_index(con: duckdb.DuckDBPyConnection, registry: TrackRegistry,
                progress: IngestProgress | None = None) -> pa.Table:
    """Build ``lod`` one track at a time; return the ``track`` table with its statistics."""
    with registered(con, dbs.LOD.empty_table()) as view:
        con.execute(f"CREATE TABLE {quote(dbs.LOD_TABLE)} AS SELECT * FROM {view}")
    rows = registry.track_rows()
    stats: list[dict[str, object]] = []
    for i, row in enumerate(rows):
        tid = int(row[dbs.TRACK_ID])
        table = str(row[dbs.TABLE])
        stat: dict[str, object] = {dbs.EVENT_COUNT: 0, ts.START_TS: None, ts.END_TS: None, dbs.MAX_DUR_NS: None,
                                   dbs.LOD_MIN_LEVEL: None, dbs.OVERLAPPING: None}
        if table in INTERVAL_NAME_COLUMNS:
            data = con.sql(f"SELECT {quote(ts.START_TS)}, {quote(ts.END_TS)}, {quote(ts.ID)}, "
                           f"{_name_expression(table)} AS name FROM {quote(table)} "
                           f"WHERE {quote(dbs.TRACK_ID)} = $tid", params={"tid": tid}).to_arrow_table()
            ev = lod.prepare(data.column(0).to_numpy(), data.column(1).to_numpy(), data.column(2).to_numpy(),
                             data.column(3))
            del data
            if ev.n:
                first, last = int(ev.start[0]), int(ev.run_max_end[-1])
                k_min = lod.finest_level(*ev.span(), ev.n)
                # Streamed: DuckDB pulls one level at a time, so a track's index is never whole in memory.
                levels = pa.RecordBatchReader.from_batches(
                    dbs.LOD, (b for level in lod.track_levels(ev, tid, k_min) for b in level.to_batches()))
                with registered(con, levels) as view:
                    con.execute(f"INSERT INTO {quote(dbs.LOD_TABLE)} SELECT * FROM {view}")
                stat.update({dbs.EVENT_COUNT: ev.n, ts.START_TS: first, ts.END_TS: last,
                             dbs.MAX_DUR_NS: int((ev.end - ev.start).max()), dbs.LOD_MIN_LEVEL: k_min,
                             dbs.OVERLAPPING: bool(ev.n > 1 and np.any(ev.start[1:] < ev.run_max_end[:-1]))})
            del ev
        elif table == ts.COUNTER.name:
            n, first, last = fetch_one(con,
                f"SELECT count(*), min({quote(ts.TIMESTAMP)}), max({quote(ts.TIMESTAMP)}) FROM {quote(table)} "
                f"WHERE {quote(dbs.TRACK_ID)} = ?", [tid])
            stat.update({dbs.EVENT_COUNT: n, ts.START_TS: first, ts.END_TS: last})
        stats.append({**row, **stat})
        if progress is not None:
            progress("index", i + 1, len(rows))
    if not stats:
        return dbs.TRACK_STORED.empty_table()
    return pa.Table.from_pylist(stats, schema=dbs.TRACK_STORED)


def _write_info(con: duckdb.DuckDBPyConnection, source: TraceSource, cache_key: str | None) -> None:
    info = {
        dbs.INFO_FORMAT_VERSION: dbs.DB_FORMAT_VERSION,
        dbs.INFO_TOOL_VERSION: f"trnprof {__version__}",
        dbs.INFO_SOURCE_PATH: str(Path(source.path).resolve()),
        dbs.INFO_SOURCE_FORMAT: source.format_name,
        dbs.INFO_CACHE_KEY: cache_key or "",
        dbs.INFO_CREATED_AT: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    rows = pa.table({dbs.INFO_KEY: list(info), dbs.INFO_VALUE: list(info.values())})
    with registered(con, rows) as view:
        con.execute(f"CREATE TABLE {quote(dbs.INFO_TABLE)} AS SELECT * FROM {view}")


def temporary_path(db_path: Path) -> Path:
    """A unique temporary file name beside ``db_path`` (same file system, so the final rename is atomic)."""
    return db_path.with_name(f".{db_path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _remove_database_files(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    shutil.rmtree(path.with_name(path.name + ".spill"), ignore_errors=True)


#: Rows per DuckDB row group.  Smaller than DuckDB's default (122,880) so that zone maps skip at a finer grain:
#: a window touches one or two row groups per track, and each costs a scan of its rows.
ROW_GROUP_ROWS = 16_384
_BUILD_ALIAS = "trnprof_build"

#: Staged tracks are appended to DuckDB in groups of consecutive tracks of at least this many rows, each group
#: by one INSERT (sorting only when a track arrived out of time order; a group bounds what a sort may spill).
LOAD_GROUP_ROWS = 8_000_000

#: DuckDB's memory limit during an ingest; larger sorts spill to a directory beside the database.
DEFAULT_MEMORY_LIMIT_MB = 4096


def ingest(source: TraceSource, db_path: str | os.PathLike[str], *, cache_key: str | None = None,
           progress: IngestProgress | None = None, threads: int | None = None,
           memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB) -> Path:
    """Ingest ``source`` into a new DuckDB file at ``db_path`` (replacing it atomically); return the path.

    Args:
        source: the input (a trace directory or any importer's source).
        db_path: the database to write.  Its directory is created if needed.
        cache_key: stored in the database's info table (the ingest cache compares it).
        progress: called with ``(phase, done, total)``.
        threads: DuckDB threads (default: all cores).
        memory_limit_mb: DuckDB's memory limit; sorts beyond it spill to disk beside the database.
    """
    db_path = Path(db_path)
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceFormatError(f"{db_path.parent}: cannot create the database directory: {exc.strerror}") from None
    tmp = temporary_path(db_path)
    total = source.input_size()
    done = 0

    def on_bytes(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress("read", min(done, total), total)

    stage = TrackStage(tmp.with_name(tmp.name + ".stage"))
    con = duckdb.connect()
    try:
        literal = "'" + str(tmp).replace("'", "''") + "'"
        con.execute(f"ATTACH {literal} AS {quote(_BUILD_ALIAS)} (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
        con.execute(f"USE {quote(_BUILD_ALIAS)}")
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET memory_limit = '{int(memory_limit_mb)}MB'")
        con.execute(f"SET temp_directory = '{str(tmp) + '.spill'}'")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        builder = _Builder(con, source, stage)
        runs = _Runs(iter(source.read(on_bytes)))
        while (run := runs.next_run()) is not None:
            builder.add_run(*run)
        builder.finish_tables()
        # The index build holds one track's columns in numpy: give DuckDB less room meanwhile.
        con.execute(f"SET memory_limit = '{max(512, int(memory_limit_mb) // 2)}MB'")
        track = build_index(con, builder.registry, progress)
        with registered(con, track) as view:
            con.execute(f"CREATE TABLE {quote(dbs.TRACK_TABLE)} AS SELECT * FROM {view} ORDER BY {quote(dbs.TRACK_ID)}")
        _write_info(con, source, cache_key)
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, db_path)
        shutil.rmtree(tmp.with_name(tmp.name + ".spill"), ignore_errors=True)
    except BaseException:
        con.close()
        _remove_database_files(tmp)
        raise
    finally:
        stage.cleanup()
    return db_path
