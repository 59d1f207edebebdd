"""Ingest: stream any :class:`~profiler.sources.TraceSource` into one DuckDB file, atomically, and build the index.

The build never holds the trace in Python objects and reads its input once:

1. **Store.**  Each run of a source's batches of one table is appended by one ``INSERT`` that DuckDB pulls from
   a generator.  Track-keyed tables (Instruction, DmaPacket, Span -> slice, Counter) get their ``track_id``
   (:mod:`profiler.db.tracks`) and are ordered by ``(track_id, time, id)`` within bounded chunks
   (:mod:`profiler.db.staging`) on the way, so every DuckDB row group holds one track over a short time range;
   per-track statistics and the index's name dictionaries are gathered meanwhile.  Other tables stream straight
   in.  That Python work runs on a thread of its own (:mod:`profiler.prefetch`) while DuckDB compresses the
   batches before.
2. **Index.**  :mod:`profiler.db.index_build` reads the stored interval and counter tables back in storage order
   (a few columns, sequentially) into streaming per-track builders that emit the level-of-detail rows.
3. ``track`` and ``trnprof_info`` are written and the file is checkpointed.

Everything is written into a temporary file beside the target and renamed over it only when complete, so an
interrupted ingest never leaves a database that looks valid.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.db import ingest_warnings
from profiler.db.column_names import with_distinct_names
from profiler.db.index_build import INTERVAL_NAME_COLUMNS, IndexBuilder
from profiler.db.ingest_checks import IntervalRepairs, check_times
from profiler.db.sqlutil import literal, quote, registered
from profiler.db.staging import ChunkOrderer
from profiler.db.tracks import TRACK_KEYS, TrackKeySpec, TrackRegistry, TrackStats
from profiler.importers.common import TraceImportWarning
from profiler.leftovers import ingest_temporary_pid, remove_left_by_dead
from profiler.prefetch import prefetched
from profiler.sources import TraceSource
from tracer import schema as ts
from tracer._version import __version__
from tracer.errors import TraceFormatError

#: Called as ``progress(phase, done, total)``; phases: ``read`` (input bytes), ``index`` (rows indexed).
IngestProgress = Callable[[str, int, int], None]

#: Tables every database has (empty when the source had none), so queries and the API never miss one.
STANDARD_TABLES: tuple[str, ...] = (ts.INSTRUCTION.name, ts.DMA_PACKET.name, ts.SEMAPHORE_UPDATE.name,
                                    ts.FLOW.name, ts.METADATA.name, ts.COUNTER.name, dbs.SLICE_TABLE)

__all__ = ["INTERVAL_NAME_COLUMNS", "STANDARD_TABLES", "IngestProgress", "db_table_schema", "ingest",
           "temporary_path"]


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


def _slice_batch(batch: pa.RecordBatch, track_ids: pa.Array) -> pa.RecordBatch:
    """A Span batch as ``slice`` rows (keeping any extra columns the source added)."""
    cols = {n: batch.column(n) for n in batch.schema.names}
    n = batch.num_rows
    start = cols[ts.START_TS]
    end = cols[ts.END_TS]
    out: dict[str, pa.Array] = {
        ts.ID: cols[ts.ID],
        dbs.TRACK_ID: track_ids,
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


def select_list(schema: pa.Schema) -> str:
    """SELECT list storing every column, dictionary and large/view strings as plain VARCHAR."""
    parts = []
    for f in schema:
        q = quote(f.name)
        if pa.types.is_dictionary(f.type) or pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type):
            parts.append(f"CAST({q} AS VARCHAR) AS {q}")
        else:
            parts.append(q)
    return ", ".join(parts)


def _distinct(column: pa.Array) -> list[object]:
    values = column.dictionary if pa.types.is_dictionary(column.type) else pc.unique(column)
    return values.to_pylist()


class _Builder:
    """State of one ingest into an open temporary database."""

    def __init__(self, con: duckdb.DuckDBPyConnection, source: TraceSource) -> None:
        self.con = con
        self.source = source
        self.registry = TrackRegistry()
        self.stats = TrackStats()
        self.stream_error: BaseException | None = None
        self.created: set[str] = set()
        self.schemas: dict[str, pa.Schema] = {}
        self.buffers: dict[str, ChunkOrderer] = {}
        self.sources: dict[str, str] = {}        # database table -> the source table its rows come from
        self.names: dict[str, set[str]] = {}
        self.repairs = IntervalRepairs(source)
        #: Tables whose columns were renamed (warned once each).
        self.renamed: set[str] = set()
        #: (table, column) pairs of later batches left out (warned once each).
        self.dropped: set[tuple[str, str]] = set()

    def convert(self, name: str, spec: TrackKeySpec | None, batch: pa.RecordBatch) -> pa.RecordBatch:
        batch, renamed = with_distinct_names(name, batch)
        if renamed and name not in self.renamed:
            self.renamed.add(name)
            pairs = ", ".join(f"{a!r} -> {b!r}" for a, b in renamed[:5]) + (", ..." if len(renamed) > 5 else "")
            warnings.warn(TraceImportWarning(
                f"{self.source.path}: {name}: kept {len(renamed)} column(s) under new names ({pairs}): their names "
                "are empty, repeated or trnprof's own, which the database compares ignoring case"), stacklevel=2)
        if spec is None:
            if name in ts.TABLES_BY_NAME and ts.TABLES_BY_NAME[name].kind == "interval":
                check_times(self.source, name, batch, (ts.START_TS, ts.END_TS))
                batch = self.repairs.repair(name, batch)
            return batch
        time_cols = (ts.TIMESTAMP,) if spec.kind == "counter" else (ts.START_TS, ts.END_TS)
        check_times(self.source, name, batch, time_cols)
        if spec.kind != "counter":
            batch = self.repairs.repair(name, batch)
        ids = pa.array(self.registry.assign(spec, batch), pa.int64())
        if spec.db_table == dbs.SLICE_TABLE:
            return _slice_batch(batch, ids)
        return pa.RecordBatch.from_arrays([ids, *batch.columns], names=[dbs.TRACK_ID, *batch.schema.names])

    def _conform(self, name: str, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
        """``batch`` with the columns of the table's first batch (``schema``): a column it lacks is null, one the
        first lacked is left out with a warning (once per column), another type is cast when it can be."""
        if batch.schema == schema:
            return batch
        have = set(batch.schema.names)
        extra = [c for c in batch.schema.names if c not in schema.names and (name, c) not in self.dropped]
        if extra:
            self.dropped.update((name, c) for c in extra)
            warnings.warn(TraceImportWarning(
                f"{self.source.path}: {name}: column(s) {', '.join(map(repr, extra[:5]))}"
                f"{', ...' if len(extra) > 5 else ''} appear only after the table's first part and are left out (its "
                "first part sets the columns)"), stacklevel=2)
        columns = []
        for field in schema:
            if field.name not in have:
                columns.append(pa.nulls(batch.num_rows, field.type))
                continue
            col = batch.column(field.name)
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                    raise TraceFormatError(
                        f"{self.source.path}: {name}: column {field.name!r} holds {field.type} in the table's "
                        f"first part and {col.type} in a later one, which does not convert; export the parts "
                        "with one schema") from None
            columns.append(col)
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    def _collect_names(self, target: str, batch: pa.RecordBatch) -> None:
        """Remember the event names of an interval table (the index codes them against their sorted set)."""
        acc = self.names.setdefault(target, set())
        for column in INTERVAL_NAME_COLUMNS.get(target, ()):
            if column in batch.schema.names:
                acc.update(v for v in _distinct(batch.column(column)) if v is not None)

    def _buffer(self, name: str, spec: TrackKeySpec | None, target: str) -> ChunkOrderer:
        buffer = self.buffers.get(target)
        if buffer is None:
            if spec is None:
                buffer = ChunkOrderer(None, None, None, None)
            elif spec.kind == "counter":
                buffer = ChunkOrderer(ts.TIMESTAMP, None, None, self.stats, align_rows=ROW_GROUP_ROWS)
            else:
                buffer = ChunkOrderer(ts.START_TS, ts.ID, ts.END_TS, self.stats, align_rows=ROW_GROUP_ROWS)
            self.buffers[target] = buffer
            self.sources[target] = name
        return buffer

    def add_run(self, name: str, batches: Iterator[pa.RecordBatch]) -> None:
        """Consume one run of batches of table ``name``; store the chunks it completes with one statement.

        DuckDB pulls the chunks from a generator, so the Python work of the next batches (conversion, track ids,
        ordering) runs while DuckDB's other threads compress the previous ones.  A chunk left unfinished at the end
        of the run stays buffered for the table's next run (or the end of the stream).
        """
        spec = TRACK_KEYS.get(name)
        target = spec.db_table if spec else name
        iterator = iter(batches)
        first = self.convert(name, spec, next(iterator))
        if first.num_columns == 0:  # a table of no column (an importer's empty objects): nothing to store
            for _ in iterator:
                pass
            return
        schema = self.schemas.setdefault(target, first.schema)
        buffer = self._buffer(name, spec, target)
        interval = target in INTERVAL_NAME_COLUMNS

        def chunks() -> Iterator[pa.RecordBatch]:
            batch: pa.RecordBatch | None = first
            while batch is not None:
                batch = self._conform(name, batch, schema)
                if interval:
                    self._collect_names(target, batch)
                yield from buffer.add(batch)
                if buffer.bytes and sum(b.bytes for b in self.buffers.values()) > MAX_BUFFERED_BYTES:
                    yield from buffer.flush()
                nxt = next(iterator, None)
                batch = None if nxt is None else self.convert(name, spec, nxt)

        self._store(name, target, schema, chunks())

    def _store(self, name: str, target: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> None:
        """One statement appending ``batches`` to ``target`` (creating it first); stream errors re-raised as is."""
        def guarded(ahead: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            try:
                yield from ahead
            except BaseException as exc:  # DuckDB wraps errors of the stream; keep the original to re-raise
                self.stream_error = exc
                raise

        self.stream_error = None
        # The batches are produced on a thread of their own while DuckDB stores the previous ones.
        with prefetched(batches, depth=PREFETCH_BATCHES) as ahead, \
                registered(self.con, pa.RecordBatchReader.from_batches(schema, guarded(ahead))) as view:
            select = f"SELECT {select_list(schema)} FROM {view}"
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

    def finish_stream(self) -> None:
        """Store the unfinished chunks of every table."""
        for target, buffer in self.buffers.items():
            if buffer.rows:
                self._store(self.sources[target], target, self.schemas[target], iter(buffer.flush()))

    def has_events(self) -> bool:
        """True when a table of events (intervals, instants, counter samples) got at least one row."""
        for target in sorted({spec.db_table for spec in TRACK_KEYS.values()} & self.created):
            if self.con.execute(f"SELECT EXISTS (SELECT 1 FROM {quote(target)})").fetchall()[0][0]:
                return True
        return False

    def finish_tables(self) -> None:
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

    def sorted_names(self) -> dict[str, pa.Array]:
        """Each interval table's distinct event names, sorted (the index's name codes)."""
        return {t: pa.array(sorted(names), pa.string()) for t, names in self.names.items()}


_SQL_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.string(): "VARCHAR", pa.float32(): "FLOAT",
              pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}


def _write_info(con: duckdb.DuckDBPyConnection, source: TraceSource, cache_key: str | None,
                warned: list[ingest_warnings.Stored]) -> None:
    info = {
        dbs.INFO_FORMAT_VERSION: dbs.DB_FORMAT_VERSION,
        dbs.INFO_TOOL_VERSION: f"trnprof {__version__}",
        dbs.INFO_SOURCE_PATH: str(Path(source.path).resolve()),
        dbs.INFO_SOURCE_FORMAT: source.format_name,
        dbs.INFO_CACHE_KEY: cache_key or "",
        dbs.INFO_CREATED_AT: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if warned:
        info[ingest_warnings.INFO_WARNINGS] = ingest_warnings.encode(warned)
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

#: Bytes buffered over all tables' unfinished chunks before the largest is stored early.
MAX_BUFFERED_BYTES = 512 << 20

#: Record batches produced ahead of DuckDB while it stores (each up to staging.OUT_BATCH_ROWS rows).
PREFETCH_BATCHES = 4

#: DuckDB's memory limit during an ingest; larger sorts spill to a directory beside the database.
DEFAULT_MEMORY_LIMIT_MB = 4096


def _build(con: duckdb.DuckDBPyConnection, tmp: Path, source: TraceSource, *, on_bytes: Callable[[int], None],
           progress: IngestProgress | None, threads: int | None, memory_limit_mb: int) -> None:
    """Store ``source`` into a new database at ``tmp`` attached to ``con``, then its index and ``track`` table."""
    path_literal = literal(str(tmp))
    con.execute(f"ATTACH {path_literal} AS {quote(_BUILD_ALIAS)} (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
    con.execute(f"USE {quote(_BUILD_ALIAS)}")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{int(memory_limit_mb)}MB'")
    con.execute(f"SET temp_directory = '{str(tmp) + '.spill'}'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    builder = _Builder(con, source)
    runs = _Runs(iter(source.read(on_bytes)))
    while (run := runs.next_run()) is not None:
        builder.add_run(*run)
    builder.finish_stream()
    builder.repairs.warn()
    if not builder.has_events():
        raise TraceFormatError(f"{source.path}: holds no events (no instructions, DMA packets, spans or "
                               "counters; a recording stopped before it issued anything, or an empty profile)")
    builder.finish_tables()
    reader = con.cursor()
    try:
        reader.execute(f"USE {quote(_BUILD_ALIAS)}")
        track = IndexBuilder(con, reader, builder.registry, builder.stats, builder.sorted_names(),
                             progress=progress).build()
    finally:
        reader.close()
    with registered(con, track) as view:
        con.execute(f"CREATE TABLE {quote(dbs.TRACK_TABLE)} AS SELECT * FROM {view} ORDER BY {quote(dbs.TRACK_ID)}")


def ingest(source: TraceSource, db_path: str | os.PathLike[str], *, cache_key: str | None = None,
           progress: IngestProgress | None = None, threads: int | None = None,
           memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB,
           warned: Iterable[ingest_warnings.Stored] = ()) -> Path:
    """Ingest ``source`` into a new DuckDB file at ``db_path`` (replacing it atomically); return the path.

    Args:
        source: the input (a trace directory or any importer's source).
        db_path: the database to write.  Its directory is created if needed.
        cache_key: stored in the database's info table (the ingest cache compares it).
        progress: called with ``(phase, done, total)``.
        threads: DuckDB threads (default: all cores).
        memory_limit_mb: DuckDB's memory limit; sorts (of tracks stored out of time order) spill beyond it
            to a directory beside the database.
        warned: warnings already shown for this input (opening the source), stored with the ones the ingest
            shows (:mod:`profiler.db.ingest_warnings`) so that every later open of the database repeats them.
    """
    db_path = Path(db_path)
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceFormatError(f"{db_path.parent}: cannot create the database directory: {exc.strerror}") from None
    # what ingests of this database killed outright (SIGKILL, out of memory) left: gigabytes for a large trace
    remove_left_by_dead(db_path.parent, ingest_temporary_pid(db_path))
    tmp = temporary_path(db_path)
    total = source.input_size()
    done = 0

    def on_bytes(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress("read", min(done, total), total)

    con = duckdb.connect()
    try:
        with ingest_warnings.collecting() as seen:
            seen[:0] = list(warned)
            _build(con, tmp, source, on_bytes=on_bytes, progress=progress, threads=threads,
                   memory_limit_mb=memory_limit_mb)
        _write_info(con, source, cache_key, seen)
        con.execute("CHECKPOINT")
        con.close()
        os.replace(tmp, db_path)
        shutil.rmtree(tmp.with_name(tmp.name + ".spill"), ignore_errors=True)
    except BaseException:
        con.close()
        _remove_database_files(tmp)
        raise
    return db_path
