"""``Trace``: the public query API over one trnprof database (``profiler.open(path)``).

Everything the dashboard, notebooks and commands read goes through here, so nobody above this layer writes SQL
against the database layout.  A ``Trace`` is safe to use from several threads (:mod:`profiler.db.cursors`): each
thread gets its own DuckDB cursor of the one read-only, locked-down instance, closed once the thread has ended, and
closing the trace while other threads query it gives them a QueryError.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.cache import resolve_database
from profiler.db.connection import open_database
from profiler.db.cursors import CursorPool
from profiler.db.ingest import IngestProgress
from profiler.db.ranges import track_totals, union_busy_ns
from profiler.db.series_query import query_counters, query_series
from profiler.db.sqlutil import fetch_one, literal, quote
from profiler.db.track_info import TrackInfo, load_track_infos
from profiler.db.user_sql import run_user_sql
from profiler.db.window_query import MAX_WIDTH_PX, query_window
from profiler.errors import QueryError, TraceFormatError
from profiler.notebook import NotebookMixin
from profiler.search_sql import EVENT_NAME_SQL, search_select
from profiler.trace_args import as_int as _as_int
from profiler.trace_args import as_range as _as_range
from profiler.trace_args import check_time
from profiler.trace_args import guarded as _guarded
from profiler.trace_files import TraceFilesMixin
from profiler.window import Window
from tracer import schema as ts

#: Default timeout of user SQL (Trace.sql, trnprof sql).
DEFAULT_SQL_TIMEOUT_S = 60.0

#: Events whose flows a Trace keeps (:meth:`Trace.flows`).
RECENT_FLOWS = 16



class Trace(NotebookMixin, TraceFilesMixin):
    """One trace database opened for reading.  Create it with :func:`profiler.open`.

    Notebook views (``timeline``, ``utilization_figure``, ``summary_figures``, ``widget``, ``dashboard``,
    ``source``, ``_repr_html_``) come from :class:`profiler.notebook.NotebookMixin`; the recorded kernel sources
    and exporting a window's rows from :class:`profiler.trace_files.TraceFilesMixin`.
    """

    def __init__(self, path: Path, db_path: Path) -> None:
        self.path = path
        self.db_path = db_path
        self.name = path.name.removesuffix(".duckdb").removesuffix(".trnprof") or str(path)
        self._pool = CursorPool(open_database(db_path), db_path)
        self._infos = load_track_infos(self._cursor())
        self._metadata: dict[str, Any] | None = None
        # the last events' flows (a database does not change once opened; the dashboard reads one event's twice)
        self._recent_flows: dict[tuple[str, int], tuple[pa.Table, pa.Table]] = {}

    # -- plumbing (threads, closing: profiler.db.cursors) ------------------------------------------------
    def _cursor(self) -> duckdb.DuckDBPyConnection:
        return self._pool.cursor()

    def _submit(self, fn: Callable[[duckdb.DuckDBPyConnection], pa.Table]) -> Future[pa.Table]:
        """Run ``fn(cursor)`` on the trace's helper thread, with that thread's own cursor."""
        return self._pool.submit(fn)

    def _call(self) -> contextlib.AbstractContextManager[None]:
        """The context a public call runs in (refused once closing; a query cut short by close says so)."""
        return self._pool.call()

    def close(self) -> None:
        """Close the database (idempotent, from any thread): calls under way in other threads are interrupted and
        get QueryError("... the trace was closed while this call ran"); later calls get QueryError too."""
        self._pool.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Trace({str(self.path)!r}, db={str(self.db_path)!r})"

    # -- facts -------------------------------------------------------------------------------------------
    @_guarded
    def overview(self) -> dict[str, Any]:
        """Where the trace came from, its machine, its duration and its events per track kind, read without
        scanning the events (:func:`profiler.overview.trace_overview`)."""
        from profiler.overview import trace_overview

        return trace_overview(self)

    @property
    @_guarded
    def metadata(self) -> dict[str, Any]:
        """The Metadata row (empty when the source had none)."""
        if self._metadata is None:
            rows = self._cursor().sql(f"SELECT * FROM {quote(ts.METADATA.name)} LIMIT 1").to_arrow_table().to_pylist()
            self._metadata = rows[0] if rows else {}
        return dict(self._metadata)

    @property
    @_guarded
    def time_range(self) -> tuple[int, int]:
        """(first start_ts, last end_ts) over all tracks; (0, 0) for an empty trace."""
        row = fetch_one(self._cursor(), f"SELECT min({quote(ts.START_TS)}), max({quote(ts.END_TS)}) "
                                     f"FROM {quote(dbs.TRACK_TABLE)}")
        if not row or row[0] is None:
            return (0, 0)
        return (int(row[0]), int(row[1]))

    @_guarded
    def tracks(self) -> pa.Table:
        """The ``track`` table (:data:`profiler.db_schema.TRACK_STORED`), in display order."""
        return self._cursor().sql(f"SELECT * FROM {quote(dbs.TRACK_TABLE)} "
                                  f"ORDER BY {quote(dbs.SORT_ORDER)}").to_arrow_table()

    @_guarded
    def track_info(self, track_id: int) -> TrackInfo:
        """Planner facts of one track; QueryError for an unknown id."""
        if isinstance(track_id, bool) or not isinstance(track_id, (int, np.integer)):
            raise QueryError(f"a track id must be an integer (see Trace.tracks()), not {repr(track_id)[:60]}")
        info = self._infos.get(int(track_id))
        if info is None:
            raise QueryError(f"{self.db_path}: no track {int(track_id)} (see Trace.tracks())")
        return info

    def _interval_info(self, track_id: object) -> TrackInfo:
        """track_info of an interval track (busy time and event counts exist only for those)."""
        info = self.track_info(track_id)
        if info.is_counter:
            raise QueryError(f"track {info.track_id} is a Counter track, which has samples, not busy time or "
                             "events; use Trace.counter_window for it")
        return info

    # -- the timeline --------------------------------------------------------------------------------------
    def _window_args(self, start_ns: object, end_ns: object, width_px: object,
                     tracks: object) -> tuple[int, int, int, list[int]]:
        start = check_time(start_ns, "start_ns")
        end = check_time(end_ns, "end_ns")
        width = _as_int(width_px, "width_px", "an integer number of pixels")
        if end <= start:
            raise QueryError(f"empty window: end_ns ({end}) must be greater than start_ns ({start})")
        if not 1 <= width <= MAX_WIDTH_PX:
            raise QueryError(f"width_px must be between 1 and {MAX_WIDTH_PX}, not {width}")
        if tracks is None:
            ids = sorted(t for t, info in self._infos.items() if info.is_interval)
        else:
            ids = self._track_ids(tracks)
        return start, end, width, ids

    def _track_ids(self, tracks: object) -> list[int]:
        if isinstance(tracks, (int, np.integer)) and not isinstance(tracks, bool):
            tracks = [tracks]
        if isinstance(tracks, (str, bytes, dict)) or not hasattr(tracks, "__iter__"):
            raise QueryError(f"tracks must be a track id or a list of track ids (see Trace.tracks()), "
                             f"not {str(tracks)[:40]!r}")
        return sorted({self.track_info(t).track_id for t in tracks})  # type: ignore[union-attr]

    @_guarded
    def window(self, start_ns: int, end_ns: int, width_px: int, tracks: list[int] | None = None, *,
               attributes: bool = True) -> Window:
        """The timeline in [start_ns, end_ns) at ``width_px`` pixels: raw events or buckets per track.

        Cost depends on ``width_px`` and the number of tracks, not on the number of events (see
        ``docs/database.md``).  Counter tracks are not part of windows (see :meth:`counter_window`).

        Args:
            start_ns: start of the range.
            end_ns: end of the range (exclusive).
            width_px: pixels across the range (1 to 65,536).
            tracks: track ids to include (default: every interval track).
            attributes: read the events' ``layer``/``operator``/``source`` strings; with False they are null
                (a drawing that colours by opcode needs only ``name``; :meth:`event` has every field of one).
        """
        start, end, width, ids = self._window_args(start_ns, end_ns, width_px, tracks)
        result = query_window(self._cursor(), self._infos, start, end, width, track_ids=ids,
                              attributes=bool(attributes), submit=self._submit)
        counters = [t for t in ids if self._infos[t].is_counter]
        if counters:
            _, table = query_counters(self._cursor(), self._infos, start, end, width, track_ids=counters)
            return Window(start, end, width, 1 << result.level, result.events, result.buckets, table)
        return Window(start, end, width, 1 << result.level, result.events, result.buckets)

    @_guarded
    def counter_window(self, start_ns: int, end_ns: int, width_px: int,
                       tracks: list[int] | None = None) -> pa.Table:
        """Counter tracks (SBUF usage, ...) in [start_ns, end_ns) at ``width_px``: per track and bucket the sample
        count, min, max, time-weighted mean and the value at the bucket's end
        (:data:`profiler.db_schema.COUNTER_BUCKETS`), on the same grid as :meth:`window`, from the counter index —
        O(pixels), like a window.  ``tracks``: counter track ids (default: every Counter track).
        """
        start, end, width, _ = self._window_args(start_ns, end_ns, width_px, [])
        if tracks is None:
            ids = sorted(t for t, info in self._infos.items() if info.is_counter)
        else:
            ids = self._track_ids(tracks)
            wrong = [t for t in ids if not self._infos[t].is_counter]
            if wrong:
                raise QueryError(f"track {wrong[0]} is not a Counter track (see Trace.tracks(), kind 'counter')")
        return query_counters(self._cursor(), self._infos, start, end, width, track_ids=ids)[1]

    @_guarded
    def series(self, kind: str, start_ns: int, end_ns: int, width_px: int, core: int | None = None) -> pa.Table:
        """A time series per core over [start_ns, end_ns) at ``width_px``, on the :meth:`window` grid, O(pixels).

        Args:
            kind: ``"dma_throughput"`` — bytes per second moved by the core's DMA queues (each packet's
                ``transfer_bytes`` spread evenly over its duration); ``"hfu"`` — percent of the Tensor engine's peak
                (each instruction's ``adjusted_flops``, else ``raw_flops``, spread over its duration, over
                peak FLOP/ns × bucket width; null values when the Metadata gives no Tensor clock). Per-engine busy
                fraction is :meth:`utilization`.
            start_ns: start of the range.
            end_ns: end of the range (exclusive).
            width_px: pixels across the range.
            core: one core (``pcore_idx``), or None for every core.

        Returns:
            :data:`profiler.db_schema.SERIES` rows (core, start_ts, end_ts, value), by core then time.
        """
        from profiler.summary import tensor_peak_flops_per_ns

        start, end, width, _ = self._window_args(start_ns, end_ns, width_px, [])
        if core is not None:
            core = _as_int(core, "core", "a core index (pcore_idx)")
            known = sorted({i.core for i in self._infos.values() if i.core is not None})
            if core not in known:
                cores = ", ".join(map(str, known)) or "none"
                raise QueryError(f"{self.path}: no core {core} (the trace has cores {cores})")
        peak = tensor_peak_flops_per_ns(self.metadata) if kind == "hfu" else None
        return query_series(self._cursor(), self._infos, start, end, width, kind=kind, core=core,
                            peak_flops_per_ns=peak, submit=self._submit)[1]

    @_guarded
    def utilization(self, start_ns: int, end_ns: int, width_px: int, tracks: list[int] | None = None) -> pa.Table:
        """Busy fraction per track per bucket (:data:`profiler.db_schema.UTILIZATION`), from the same index."""
        start, end, width, ids = self._window_args(start_ns, end_ns, width_px, tracks)
        for t in ids:
            self._interval_info(t)
        result = query_window(self._cursor(), self._infos, start, end, width, track_ids=ids,
                              buckets_only=True, submit=self._submit)
        b = result.buckets
        busy = b.column(dbs.BUSY_NS).to_numpy().astype(np.float64)
        return pa.table({dbs.TRACK_ID: b.column(dbs.TRACK_ID), ts.START_TS: b.column(ts.START_TS),
                         ts.END_TS: b.column(ts.END_TS), dbs.BUSY_FRACTION: pa.array(busy / (1 << result.level))},
                        schema=dbs.UTILIZATION)

    @_guarded
    def busy_ns(self, track_id: int | list[int], start_ns: int, end_ns: int) -> int:
        """Exact union busy time within [start_ns, end_ns) of one track, or of several tracks together.

        For one track, whole buckets come from the index and only the two edges from raw events.  For a list
        (e.g. every DMA queue of a core: "time any queue was moving data"), overlaps *between* the tracks count
        once; that reads the tracks' (start, end) columns over the range in bounded chunks.
        """
        start, end = _as_range(start_ns, end_ns)
        if isinstance(track_id, (list, tuple, set, frozenset, np.ndarray)):
            infos = [self._interval_info(t) for t in self._track_ids(list(track_id))]
            return union_busy_ns(self._cursor(), infos, start, end)
        return track_totals(self._cursor(), self._interval_info(track_id), start, end)[0]

    @_guarded
    def event_count(self, track_id: int, start_ns: int, end_ns: int) -> int:
        """Exact number of one track's events starting in [start_ns, end_ns) (from the index, edges from raw)."""
        info = self._interval_info(track_id)
        return track_totals(self._cursor(), info, *_as_range(start_ns, end_ns))[1]

    # -- SQL and look-ups ----------------------------------------------------------------------------------
    @_guarded
    def sql(self, query: str, timeout_s: float | None = DEFAULT_SQL_TIMEOUT_S, params: Any = None, *,
            max_rows: int | None = None, max_bytes: int | None = None) -> duckdb.DuckDBPyRelation:
        """Run read-only SQL; the result as a relation (``.to_arrow_table()``, ``.df()``, ``.fetchall()`` work).

        The query runs under ``timeout_s`` (then QueryError); the returned relation reads the fetched result, on
        this thread's cursor (use it on this thread).  Files, URLs, extensions and writes are refused, and so is
        more than one statement (QueryError).

        Args:
            query: one DuckDB SQL statement.
            timeout_s: seconds before the query is interrupted (None or 0: no limit; at most a year).
            params: values for ``?`` / ``$name`` placeholders.
            max_rows: fetch at most this many rows, streaming: the rest of the result is never produced or
                converted, so ``SELECT * FROM Instruction`` on a huge trace returns at once.  To learn whether
                a result has more than N rows, ask for N + 1.
            max_bytes: stop fetching once the rows fetched hold more than this many bytes of Arrow data (the
                first row past the budget is kept; :meth:`sql_arrow` tells exactly whether the result was cut).
        """
        with self._pool.scratch_cursor() as scratch:
            table = run_user_sql(scratch, query, timeout_s, params, max_rows=max_rows, max_bytes=max_bytes)
        return self._cursor().from_arrow(table)

    @_guarded
    def sql_arrow(self, query: str, timeout_s: float | None = DEFAULT_SQL_TIMEOUT_S, params: Any = None, *,
                  max_rows: int | None = None, max_bytes: int | None = None,
                  sink: Callable[[pa.RecordBatch], None] | None = None,
                  text_types: Collection[str] = ()) -> pa.Table:
        """:meth:`sql` with the fetched Arrow table itself as the result, or the result streamed to ``sink``.

        Args:
            query, timeout_s, params, max_rows: as for :meth:`sql`.
            max_bytes: stop fetching at the first row that takes the table's ``nbytes`` beyond ``max_bytes``; that
                row is kept, so ``result.nbytes > max_bytes`` exactly when the result was cut (the rows within the
                budget are :func:`profiler.db.user_sql.rows_within`).
            sink: hand each Arrow batch (at most 2,048 rows) to ``sink(batch)`` as it is fetched, keeping none:
                any result size in constant memory (what ``trnprof sql`` prints with).  The timeout then counts
                the query's time, not the sink's.  The returned table is empty, with the result's columns.
            text_types: columns of these DuckDB types (of ``BIT``, ``INTERVAL``, ``BLOB``) come as DuckDB's text
                for them (``0101``, ``01:30:00``, ``\\x00\\xFF``) instead of their Arrow forms, for printing (as
                ``trnprof sql`` prints them).
        """
        with self._pool.scratch_cursor() as scratch:  # what the query leaves in its connection goes with it
            return run_user_sql(scratch, query, timeout_s, params, max_rows=max_rows, max_bytes=max_bytes,
                                sink=sink, text_types=text_types)

    @_guarded
    def summary(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
        """The ``trnprof summary --json`` dict for the whole trace or [start_ns, end_ns)."""
        from profiler.summary import summarize

        return summarize(self, start_ns, end_ns)

    def _check_table(self, table_name: str) -> str:
        """The database table of ``table_name`` (``Span`` is stored as ``slice``), which must have an ``id``
        column (an event table: Instruction, DmaPacket, slice, ...); QueryError otherwise."""
        if not isinstance(table_name, str):
            raise QueryError(f"a table name must be a string, not {str(table_name)[:40]!r}")
        if table_name == ts.SPAN.name:
            table_name = dbs.SLICE_TABLE
        rows = self._cursor().execute(
            "SELECT table_name, bool_or(lower(column_name) = $id) FROM duckdb_columns() WHERE database_name = "
            "current_database() AND schema_name = current_schema() GROUP BY table_name", {"id": ts.ID}).fetchall()
        known = dict(rows)
        if table_name not in known:
            raise QueryError(f"{self.db_path}: no table {table_name[:80]!r} (tables: {', '.join(sorted(known))})")
        if not known[table_name]:
            with_id = ", ".join(sorted(t for t, has_id in known.items() if has_id))
            raise QueryError(f"{self.db_path}: table {table_name} has no {ts.ID} column, so it has no events to "
                             f"look up by id (tables with one: {with_id})")
        return table_name

    @_guarded
    def event(self, table_name: str, id: int) -> dict[str, Any]:
        """Every field of row ``id`` of ``table_name`` (Instruction, DmaPacket, slice: a table with an ``id``)."""
        table = self._check_table(table_name)
        if isinstance(id, bool) or not isinstance(id, (int, np.integer)):
            raise QueryError(f"an event id must be an integer, not {str(id)[:40]!r}")
        ident = int(id)
        if not -(1 << 63) <= ident < 1 << 63:
            raise QueryError(f"{self.db_path}: {table} has no row with id {ident}")
        rows = self._cursor().sql(f"SELECT * FROM {quote(table)} WHERE {quote(ts.ID)} = $id LIMIT 1",
                                  params={"id": ident}).to_arrow_table().to_pylist()
        if not rows:
            raise QueryError(f"{self.db_path}: {table} has no row with id {ident}")
        return rows[0]

    @_guarded
    def enclosing_slices(self, id: int, limit: int = 64) -> list[dict[str, Any]]:
        """The slices enclosing slice ``id`` (following ``parent_id``), outermost first: ``id``, ``parent_id``,
        ``name``, ``start_ts``, ``end_ts``, ``track_id`` each; at most ``limit`` of them, the innermost (one
        recursive query, so a ``parent_id`` cycle ends)."""
        ident, limit = _as_int(id, "a slice id", "an integer"), _as_int(limit, "limit", "a whole number of slices")
        cols = (ts.ID, ts.PARENT_ID, ts.NAME, ts.START_TS, ts.END_TS, dbs.TRACK_ID)
        table = quote(dbs.SLICE_TABLE)
        rows = self._cursor().sql(f"""
            WITH RECURSIVE up AS (
                SELECT {", ".join(quote(c) for c in cols)}, 0 AS hop FROM {table} WHERE {quote(ts.ID)} = $id
                UNION ALL
                SELECT {", ".join(f"s.{quote(c)}" for c in cols)}, up.hop + 1
                FROM {table} s JOIN up ON s.{quote(ts.ID)} = up.{quote(ts.PARENT_ID)} WHERE up.hop < $limit
            ) SELECT {", ".join(quote(c) for c in cols)} FROM up WHERE hop > 0 ORDER BY hop DESC""",
            params={"id": ident, "limit": max(limit, 0)}).to_arrow_table()
        return rows.to_pylist()

    @_guarded
    def search(self, text: str, limit: int = 100) -> pa.Table:
        r"""Events whose opcode, operator, layer, source line or name contains ``text`` (case-insensitive); with
        ``text`` in double quotes, events with a field equal to what is inside them (``"softmax.py:35"`` finds
        that line and not line 350); with ``text`` between slashes, events with a field the regular expression
        matches anywhere, case-insensitive (``/softmax\.py:3[0-9]$/``; ``/./`` finds every event with a
        searched field; RE2 syntax, run by DuckDB: no pattern can take exponential time).

        Returns :data:`profiler.db_schema.SEARCH_RESULTS`, ordered by start time, at most ``limit`` rows: each event
        once, ``matched_field`` naming the first of its fields (in :data:`profiler.search_sql.SEARCH_FIELDS` order) that
        matches.
        """
        select, text = search_select(text, self._check_regex)
        limit = _as_int(limit, "limit", "a whole number of rows")
        if limit < 0:
            raise QueryError(f"limit must be 0 or more rows, not {limit}")
        sql = select + f" ORDER BY {quote(ts.START_TS)}, {quote(ts.ID)} LIMIT $limit"
        table = self._cursor().sql(sql, params={"q": text, "limit": min(limit, 2**62)}).to_arrow_table()
        return table.cast(dbs.SEARCH_RESULTS)

    @_guarded
    def search_sql(self, text: str) -> str:
        """:meth:`search` as one read-only SQL statement, its text written in as a literal and without a limit:
        every match's ``table_name``, ``id``, ``start_ts``, ``end_ts``, ``name`` and ``matched_field``, and a
        ``track`` naming the search -- a query the timeline draws as a row of the matches
        (:mod:`profiler.query_track`; :meth:`sql` runs it)."""
        select, bound = search_select(text, self._check_regex)
        bound_literal = literal(bound)
        label = literal(f"search {text}"[:80])     # as typed: quotes and slashes kept
        return (f"SELECT *, {label} AS {quote(dbs.QUERY_TRACK)} FROM ({select.replace('$q', bound_literal)}) "
                f"ORDER BY {quote(ts.START_TS)}, {quote(ts.ID)}")

    def _check_regex(self, pattern: str) -> None:
        """QueryError naming the problem when DuckDB (RE2) cannot compile ``pattern``."""
        try:
            self._cursor().execute("SELECT regexp_matches('', $p, 'i')", {"p": pattern}).fetchall()
        except duckdb.Error as exc:
            detail = str(exc).splitlines()[0].split(":", 1)[-1].strip()
            raise QueryError(f"invalid regular expression /{pattern[:80]}/: {detail[:160]}") from None

    @_guarded
    def flows(self, table_name: str, id: int) -> tuple[pa.Table, pa.Table]:
        """(predecessors, successors) of one row from the ``Flow`` table (:data:`profiler.db_schema.FLOW_ENDS`)."""
        table = self._check_table(table_name)
        flow_name = ts.SPAN.name if table == dbs.SLICE_TABLE else table
        ident = _as_int(id, "an event id", "an integer")
        if (table, ident) in self._recent_flows:
            return self._recent_flows[(table, ident)]
        self.event(table, ident)  # QueryError for a row that does not exist, as event() gives
        out = []
        for mine, other in (("in", "out"), ("out", "in")):
            edges = self._cursor().execute(
                f"SELECT {other}_table AS t, {other}_id AS i, {quote(ts.DEPENDENCY_TYPE)} AS d, "
                f"{quote(ts.GAP_TIME)} AS g FROM {quote(ts.FLOW.name)} "
                f"WHERE {mine}_table = $t AND {mine}_id = $i", {"t": flow_name, "i": ident}).fetchall()
            rows = []
            for other_table, other_id, dep, gap in edges:
                db_table = dbs.SLICE_TABLE if other_table == ts.SPAN.name else other_table
                placed = None
                if db_table in EVENT_NAME_SQL:
                    placed = fetch_one(self._cursor(),
                        f"SELECT {quote(dbs.TRACK_ID)}, {quote(ts.START_TS)}, {quote(ts.END_TS)}, "
                        f"{EVENT_NAME_SQL[db_table]} FROM {quote(db_table)} WHERE {quote(ts.ID)} = $i LIMIT 1",
                        {"i": other_id})
                track_id, start, end, name = placed if placed else (None, None, None, None)
                rows.append({dbs.TABLE: db_table, ts.ID: other_id, dbs.TRACK_ID: track_id, ts.START_TS: start,
                             ts.END_TS: end, ts.NAME: name, ts.DEPENDENCY_TYPE: dep, ts.GAP_TIME: gap})
            out.append(pa.Table.from_pylist(rows, schema=dbs.FLOW_ENDS))
        if len(self._recent_flows) >= RECENT_FLOWS:
            self._recent_flows.clear()
        self._recent_flows[(table, ident)] = (out[0], out[1])
        return out[0], out[1]


def open(path: str | os.PathLike[str], *, force: bool = False,
         progress: IngestProgress | None = None) -> Trace:
    """Open a trace for querying: a trnprof ``.duckdb`` file, a trace directory, or any ingestible input.

    Inputs that are not a database are ingested once into a cache keyed by their files' sizes and mtimes and
    reused while they are unchanged (``force=True`` rebuilds).
    """
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise TraceFormatError(f"profiler.open needs a path (str or pathlib.Path), not {str(path)[:60]!r}")
    if not isinstance(force, (bool, np.bool_)):
        raise QueryError(f"force must be True or False, not {str(force)[:40]!r}")
    if progress is not None and not callable(progress):  # (it failed deep in the ingest, and only on a cache miss)
        raise QueryError(f"progress must be a function (or None), not {str(progress)[:40]!r}")
    p = Path(path)
    if not str(path):
        raise TraceFormatError("profiler.open needs a path: give a trace directory, a .duckdb file or an "
                               "importable trace file, not ''")
    try:
        db = resolve_database(p, force=bool(force), progress=progress)
    except OSError as exc:  # a name too long, a permission denied, ...: the file system's reason, on one line
        raise TraceFormatError(f"{str(p)[:200]}: cannot open ({exc.strerror or exc})") from None
    return Trace(p, db)
