"""The ingest's second phase: the level-of-detail indexes (``lod``, ``counter_lod``) and the ``track`` table,
built from the stored tables with memory bounded by chunks, never by a track.

Each interval table (Instruction, DmaPacket, slice) is read once in storage order — a sequential scan of five or
six columns — and every track whose rows were stored in time order (the common case; see
:class:`profiler.db.tracks.TrackStats`) feeds its :class:`~profiler.db.lod_build.IntervalLodBuilder` in slices
of :data:`FEED_EVENTS` events.  A track whose rows arrived out of time order is read back afterwards with
``ORDER BY start_ts, id`` (DuckDB sorts, spilling beyond its memory limit).  Counter tracks go the same way
into :class:`~profiler.db.lod_counter.CounterLodBuilder`.

Index rows are appended by :class:`LodWriter`, which buffers each (track, level) until it has a run of
:data:`RUN_ROWS` rows, so the index table is stored as long runs of one track and level in bucket order (zone
maps on ``(track_id, level, bucket)`` prune a window's read to its few row groups), with all rows buffered over
every track bounded by :data:`MAX_BUFFERED_ROWS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.db import lod, lod_rows
from profiler.db.lod_build import IntervalLodBuilder
from profiler.db.lod_counter import CounterLodBuilder, CounterRows, counter_table_many
from profiler.db.sqlutil import quote, registered
from profiler.db.tracks import TRACK_KEYS, TrackRegistry, TrackStats, value_name
from profiler.prefetch import prefetched
from tracer import schema as ts

#: Events handed to a track's builder at once.
FEED_EVENTS = 1 << 16
#: Events buffered for feeding over all tracks before the largest buffers are fed early.
MAX_PENDING_EVENTS = 1 << 22
#: Rows per record batch of the storage-order scans.
SCAN_BATCH_ROWS = 1 << 18
#: Index rows of one (track, level) written as one run.
RUN_ROWS = 1 << 16
#: Index rows per INSERT.
INSERT_ROWS = 1 << 20
#: Batches of index rows produced ahead of DuckDB while it stores.
PREFETCH_BATCHES = 2
#: Index rows buffered over all (track, level) runs before the largest are written early.
MAX_BUFFERED_ROWS = 1 << 22

#: Called as ``progress(phase, done, total)``.
Progress = Callable[[str, int, int], None]

#: Interval tables carrying tracks, and the column naming an event in the index (first non-null wins).
INTERVAL_NAME_COLUMNS: dict[str, tuple[str, ...]] = {
    ts.INSTRUCTION.name: (ts.OPCODE,),
    ts.DMA_PACKET.name: (ts.VARIABLE, ts.QUEUE_NAME),
    dbs.SLICE_TABLE: (ts.NAME,),
}

#: Interval tables with a per-event value, and the SQL of that value (see tracks.value_name for which tracks).
_VALUE_SQL: dict[str, str] = {
    ts.INSTRUCTION.name: f"coalesce({quote(ts.ADJUSTED_FLOPS)}, {quote(ts.RAW_FLOPS)}, 0)::DOUBLE",
    ts.DMA_PACKET.name: f"coalesce({quote(ts.TRANSFER_BYTES)}, 0)::DOUBLE",
}


def name_sql(table: str) -> str:
    """The SQL expression of an interval table's event name."""
    cols = [quote(c) for c in INTERVAL_NAME_COLUMNS[table]]
    return cols[0] if len(cols) == 1 else f"coalesce({', '.join(cols)})"


class LodWriter:
    """Collects index rows into long runs of one (track, level), in bucket order, ready to be stored.

    Each (track, level) is buffered until it has :data:`RUN_ROWS` rows; all buffers together hold at most
    :data:`MAX_BUFFERED_ROWS` rows (the largest are released early beyond that).  Released runs wait until
    :meth:`take` converts them all at once (one vectorised pass, however many small tracks) for the statement
    storing them.
    """

    def __init__(self, to_table: Callable[[list[tuple[int, object]]], pa.Table]) -> None:
        self.to_table = to_table
        self.buffers: dict[tuple[int, int], list] = {}
        self.sizes: dict[tuple[int, int], int] = {}
        self.buffered = 0
        self.ready: list[tuple[int, object]] = []
        self.ready_rows = 0

    def sink(self, track_id: int) -> Callable[[object], None]:
        """The row sink of one track's builder."""
        def add(rows: lod_rows.Rows | CounterRows) -> None:
            n = len(rows)
            if n == 0:
                return
            key = (track_id, rows.k)
            self.buffers.setdefault(key, []).append(rows)
            size = self.sizes.get(key, 0) + n
            self.sizes[key] = size
            self.buffered += n
            if size >= RUN_ROWS:
                self._release(key)
            if self.buffered > MAX_BUFFERED_ROWS:
                for _, k in sorted(((s, k) for k, s in self.sizes.items()), reverse=True):
                    if self.buffered <= MAX_BUFFERED_ROWS // 2:
                        break
                    self._release(k)
        return add

    def _release(self, key: tuple[int, int]) -> None:
        parts = self.buffers.pop(key, None)
        if not parts:
            return
        self.buffered -= self.sizes.pop(key)
        self.ready.extend((key[0], p) for p in parts)
        self.ready_rows += sum(len(p) for p in parts)

    def take(self, at_least: int = 0) -> list[pa.RecordBatch]:
        """The released rows as batches, once at least ``at_least`` rows are waiting (else nothing)."""
        if not self.ready or self.ready_rows < at_least:
            return []
        table = self.to_table(self.ready)
        self.ready, self.ready_rows = [], 0
        return table.to_batches()

    def close(self) -> list[pa.RecordBatch]:
        """Everything still buffered, in (track, level) order."""
        for key in sorted(self.buffers):
            self._release(key)
        return self.take()


@dataclass
class _Feed:
    """Events of one track waiting to be fed to its builder."""

    parts: list[tuple[np.ndarray, ...]]
    rows: int = 0


def _codes(names: pa.Array | pa.ChunkedArray, dictionary: pa.Array) -> np.ndarray:
    """Codes of names in the sorted dictionary (-1 for null)."""
    idx = pc.index_in(names, value_set=dictionary)
    return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


class IndexBuilder:
    """Builds ``lod``, ``counter_lod`` and the ``track`` table once every table is stored."""

    def __init__(self, con: duckdb.DuckDBPyConnection, reader: duckdb.DuckDBPyConnection, registry: TrackRegistry,
                 stats: TrackStats, names: dict[str, pa.Array], *, progress: Progress | None = None) -> None:
        self.con = con          # writes the index
        self.reader = reader    # a cursor of the same database, scanning the tables meanwhile
        self.registry = registry
        self.stats = stats
        self.names = names
        self.progress = progress
        self.done = 0
        self.keys = registry.key_of()
        self.tables: dict[str, list[int]] = {}
        for tid, (table, _) in sorted(self.keys.items()):
            self.tables.setdefault(TRACK_KEYS[table].db_table, []).append(tid)
        self.total = int(sum(int(stats.count[t]) for t in self.keys)) if self.keys else 0
        self.k_min: dict[int, int] = {}
        self.overlapping: dict[int, bool] = {}

    def build(self) -> pa.Table:
        """Create and fill the index tables; return the ``track`` table."""
        for table, schema in ((dbs.LOD_TABLE, dbs.LOD), (dbs.COUNTER_LOD_TABLE, dbs.COUNTER_LOD)):
            with registered(self.con, schema.empty_table()) as view:
                self.con.execute(f"CREATE TABLE {quote(table)} AS SELECT * FROM {view}")
        for table in INTERVAL_NAME_COLUMNS:
            if self.tables.get(table):
                self._store(dbs.LOD_TABLE, lod_rows.LOD_STREAM, self._interval_table(table))
        if self.tables.get(ts.COUNTER.name):
            self._store(dbs.COUNTER_LOD_TABLE, dbs.COUNTER_LOD, self._counter_table())
        return self._track_table()

    def _tick(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress("index", self.done, self.total)

    def _scan(self, sql: str) -> pa.RecordBatchReader:
        return self.reader.sql(sql).to_arrow_reader(SCAN_BATCH_ROWS)

    def _store(self, table: str, schema: pa.Schema, rows: Iterator[pa.RecordBatch]) -> None:
        """One INSERT into ``table`` pulling ``rows``: the builders run while DuckDB stores earlier rows."""
        error: list[BaseException] = []

        def guarded(ahead: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            try:
                yield from ahead
            except BaseException as exc:  # DuckDB wraps errors of the stream; keep the original to re-raise
                error.append(exc)
                raise

        # The read-back and the builders run on a thread of their own while DuckDB stores earlier rows.
        with prefetched(rows, depth=PREFETCH_BATCHES) as ahead, \
                registered(self.con, pa.RecordBatchReader.from_batches(schema, guarded(ahead))) as view:
            try:
                self.con.execute(f"INSERT INTO {quote(table)} SELECT * FROM {view}")
            except duckdb.Error:
                if error:
                    raise error[0] from None
                raise

    def _interval_table(self, table: str) -> Iterator[pa.RecordBatch]:
        names = self.names.get(table, pa.array([], pa.string()))
        writer = LodWriter(lambda items: lod_rows.rows_table_many(items, names))
        builders: dict[int, IntervalLodBuilder] = {}
        with_value: dict[int, bool] = {}
        for tid in self.tables[table]:
            lo, hi = self.stats.span(tid)
            k = lod.finest_level(lo, hi, int(self.stats.count[tid]))
            self.k_min[tid] = k
            with_value[tid] = value_name(*self.keys[tid]) is not None
            builders[tid] = IntervalLodBuilder(k, lo >> k, (hi - 1) >> k, with_value[tid], writer.sink(tid))
        value = _VALUE_SQL.get(table, "NULL::DOUBLE")
        select = (f"SELECT {quote(dbs.TRACK_ID)}, {quote(ts.START_TS)}, {quote(ts.END_TS)}, {quote(ts.ID)}, "
                  f"{name_sql(table)}, {value} FROM {quote(table)}")
        in_order = {t for t in builders if self.stats.in_order[t]}
        feeds: dict[int, _Feed] = {}
        pending = 0

        def feed(tid: int) -> None:
            nonlocal pending
            f = feeds.pop(tid)
            pending -= f.rows
            cols = [np.concatenate(c) if len(f.parts) > 1 else c[0] for c in zip(*f.parts, strict=True)]
            builders[tid].feed(cols[0], cols[1], cols[2], cols[3], cols[4] if with_value[tid] else None)

        for batch in self._scan(select):
            n = batch.num_rows
            tid = batch.column(0).to_numpy()
            cols = (batch.column(1).to_numpy(), batch.column(2).to_numpy(), batch.column(3).to_numpy(),
                    _codes(batch.column(4), names),
                    np.asarray(batch.column(5).fill_null(0).to_numpy(zero_copy_only=False), np.float64))
            cuts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1], True])
            for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                t = int(tid[a])
                if t not in in_order:
                    continue
                f = feeds.setdefault(t, _Feed([]))
                f.parts.append(tuple(c[a:b] for c in cols))
                f.rows += b - a
                pending += b - a
                if f.rows >= FEED_EVENTS:
                    feed(t)
            while pending > MAX_PENDING_EVENTS:
                feed(max(feeds, key=lambda x: feeds[x].rows))
            self._tick(n)
            yield from writer.take(INSERT_ROWS)
        for t in sorted(feeds):
            feed(t)
        yield from writer.take()
        for t in sorted(set(builders) - in_order):
            # Stored out of time order: DuckDB sorts this track (spilling beyond its memory limit).
            for batch in self._scan(f"{select} WHERE {quote(dbs.TRACK_ID)} = {int(t)} "
                                    f"ORDER BY {quote(ts.START_TS)}, {quote(ts.ID)}"):
                builders[t].feed(batch.column(1).to_numpy(), batch.column(2).to_numpy(),
                                 batch.column(3).to_numpy(), _codes(batch.column(4), names),
                                 np.asarray(batch.column(5).fill_null(0).to_numpy(zero_copy_only=False), np.float64)
                                 if with_value[t] else None)
                self._tick(batch.num_rows)
                yield from writer.take(INSERT_ROWS)
        for t in sorted(builders):
            builders[t].finish()
            self.overlapping[t] = builders[t].overlapping
            yield from writer.take(INSERT_ROWS)
        yield from writer.close()

    def _counter_table(self) -> Iterator[pa.RecordBatch]:
        spans = {tid: (int(self.stats.min_start[tid]), int(self.stats.max_start[tid]))
                 for tid in self.tables[ts.COUNTER.name]}
        writer = LodWriter(lambda items: counter_table_many(items, spans))
        builders = {}
        for tid, (first, last) in spans.items():
            k = lod.finest_level(first, last + 1, int(self.stats.count[tid]))
            builders[tid] = CounterLodBuilder(k, first, last, writer.sink(tid))
        select = (f"SELECT {quote(dbs.TRACK_ID)}, {quote(ts.TIMESTAMP)}, {quote(ts.VALUE)}::DOUBLE "
                  f"FROM {quote(ts.COUNTER.name)}")
        in_order = {t for t in builders if self.stats.in_order[t]}
        for batch in self._scan(select):
            tid = batch.column(0).to_numpy()
            t_col = batch.column(1).to_numpy()
            v_col = np.asarray(batch.column(2).to_numpy(zero_copy_only=False), np.float64)
            cuts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1], True])
            for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                if int(tid[a]) in in_order:
                    builders[int(tid[a])].feed(t_col[a:b], v_col[a:b])
            self._tick(batch.num_rows)
            yield from writer.take(INSERT_ROWS)
        for t in sorted(set(builders) - in_order):
            for batch in self._scan(f"{select} WHERE {quote(dbs.TRACK_ID)} = {int(t)} "
                                    f"ORDER BY {quote(ts.TIMESTAMP)}, rowid"):
                builders[t].feed(batch.column(1).to_numpy(),
                                 np.asarray(batch.column(2).to_numpy(zero_copy_only=False), np.float64))
                self._tick(batch.num_rows)
                yield from writer.take(INSERT_ROWS)
        for t in sorted(builders):
            builders[t].finish()
            yield from writer.take(INSERT_ROWS)
        yield from writer.close()

    def _track_table(self) -> pa.Table:
        rows = self.registry.track_rows()
        if not rows:
            return dbs.TRACK_STORED.empty_table()
        out = []
        for row in rows:
            tid = int(row[dbs.TRACK_ID])
            table, key = self.keys[tid]
            counter = TRACK_KEYS[table].kind == "counter"
            n = int(self.stats.count[tid]) if tid < self.stats.size else 0
            stat: dict[str, object] = {
                dbs.EVENT_COUNT: n,
                ts.START_TS: int(self.stats.min_start[tid]) if n else None,
                ts.END_TS: int(self.stats.max_end[tid]) if n else None,
                dbs.MAX_DUR_NS: None if counter or not n else int(self.stats.max_dur[tid]),
                dbs.LOD_MIN_LEVEL: self.k_min.get(tid),
                dbs.OVERLAPPING: None if counter else self.overlapping.get(tid),
                dbs.VALUE_NAME: value_name(table, key),
            }
            out.append({**row, **stat})
        return pa.Table.from_pylist(out, schema=dbs.TRACK_STORED)


__all__ = ["FEED_EVENTS", "INTERVAL_NAME_COLUMNS", "IndexBuilder", "LodWriter", "name_sql"]
