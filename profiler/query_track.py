"""Query tracks (Perfetto's debug tracks): the rows of a SQL query over a trace, drawn as timeline rows.

Any read-only query whose result has a ``start_ts`` column (ns) becomes one or more timeline rows:

* ``end_ts``, else ``start_ts + duration_ns``, ends each row's interval (neither: instants);
* ``name`` (else ``opcode``) names and colours it (else every interval is named ``query``);
* ``track`` splits the result into one timeline row per value (at most :data:`MAX_QUERY_TRACKS`), in the order
  the values first appear;
* ``table_name`` and ``id`` naming an event of the trace (``'Instruction' AS table_name, id``) link the interval to
  it: clicking the interval on the timeline selects that event;
* a ``value`` column makes the result a **counter** instead (Perfetto's counter tracks): each row a sample at
  ``start_ts``, a step function per ``track`` value, drawn as a lane under the rows (maximum and time-weighted
  mean per bucket) like the trace's own Counter tracks, with the counter index's definitions
  (:func:`profiler.db.lod_counter.counter_bucketize`; :meth:`QueryTracks.counter_window`).

For example the instructions that waited more than a microsecond, one row per engine::

    SELECT 'Instruction' AS table_name, id, start_ts, end_ts, opcode AS name, engine AS track
    FROM Instruction WHERE evt_wait_time_ns > 1000

The query runs once, through the sandbox of :meth:`profiler.Trace.sql_arrow` (read-only, no files, a timeout), and
at most :data:`MAX_QUERY_ROWS` rows are kept in memory, sorted per row.  Each zoom then cuts its window from them
with the database's own definitions (:mod:`profiler.db.lod`): at most one interval per pixel in view are drawn as
exact events (overlapping ones on lanes of their own), more as per-pixel buckets (busy time as the union of the
intervals, the dominant name, the longest interval as the representative) on the window's grid, so the rows merge
into :meth:`profiler.Trace.window`'s result (:meth:`QueryTracks.merged`) and draw like any other.  Their track ids
are negative (``-1``, ``-2``, ...), so they never meet a trace's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.lanes import lanes as event_lanes
from profiler.db.lod_counter import counter_bucketize
from profiler.db.window_query import RAW_EVENTS_PER_PIXEL
from profiler.errors import QueryError
from profiler.figures.raster import TimelineRow
from profiler.window import Window
from tracer import schema as ts

#: Most result rows a query track keeps (beyond: a one-line error asking for a WHERE or a LIMIT).
MAX_QUERY_ROWS = 2_000_000
#: Most bytes of Arrow data a query track fetches (beyond: a one-line error); the result is kept while it is drawn,
#: so a query of huge text values must not fill the memory of a server that keeps a few per trace.
MAX_QUERY_BYTES = 128 * 1024 * 1024
#: Most timeline rows one query may split into (the distinct values of its ``track`` column).
MAX_QUERY_TRACKS = 64
#: Longest query text accepted (a URL value).
MAX_QUERY_CHARS = 8000
#: The group the query's rows are drawn under, and the name of intervals without a name.
QUERY_GROUP = "SQL"
DEFAULT_NAME = "query"
#: Columns that may name the intervals, in order of preference.
NAME_COLUMNS = (ts.NAME, ts.OPCODE)


@dataclass(frozen=True)
class QueryRow:
    """One timeline row of a query: its label, track id and intervals (sorted, names coded; ``ids`` are the result's
    row numbers)."""

    label: str
    track_id: int
    events: lod.TrackEvents
    max_dur_ns: int


@dataclass(frozen=True)
class QueryCounter:
    """One counter of a query with a ``value`` column: its label, track id and samples sorted by time."""

    label: str
    track_id: int
    t: np.ndarray        # int64
    v: np.ndarray        # float64

    def track(self) -> dict[str, Any]:
        """The counter as a row of the ``track`` table (what :func:`profiler.figures.lane_data.counter_lanes` and
        the row filter read): its name is ``SQL · label``, its domain its first to last sample."""
        return {dbs.TRACK_ID: self.track_id, dbs.CORE: None, dbs.KIND: "counter", ts.NAME: f"{QUERY_GROUP} · "
                f"{self.label}", dbs.GROUP_NAME: QUERY_GROUP, dbs.SORT_ORDER: 0, ts.START_TS: int(self.t[0]),
                ts.END_TS: int(self.t[-1])}


@dataclass(frozen=True)
class QueryTracks:
    """A query's result as timeline rows, or as counters when it has a ``value`` column (:func:`query_tracks`)."""

    sql: str
    result: pa.Table
    rows: list[QueryRow]
    #: What was left out (rows without a start), for the status line; "" when nothing was.
    note: str = ""
    counters: list[QueryCounter] = dataclasses.field(default_factory=list)

    @property
    def n_intervals(self) -> int:
        """Intervals drawn (rows of the result with a start)."""
        return sum(r.events.n for r in self.rows)

    @property
    def summary(self) -> str:
        """What the query draws, for the status line: ``24 intervals on 4 rows``, ``900 samples on 2 lanes``."""
        def plural(n: int, word: str) -> str:
            return f"{n:,} {word}{'' if n == 1 else 's'}"

        if self.counters:
            text = f"{plural(sum(len(c.t) for c in self.counters), 'sample')} on {plural(len(self.counters), 'lane')}"
        else:
            text = f"{plural(self.n_intervals, 'interval')} on {plural(len(self.rows), 'row')}"
        return text + (f" ({self.note})" if self.note else "")

    def counter_tracks(self) -> list[dict[str, Any]]:
        """The counters as ``track`` rows (:meth:`QueryCounter.track`), in order."""
        return [c.track() for c in self.counters]

    def counter_window(self, start_ns: int, end_ns: int, width_px: int,
                       tracks: list[int] | None = None) -> pa.Table:
        """:meth:`profiler.Trace.counter_window` of the query's counters: per counter and bucket of the window's
        grid the sample count, min, max, time-weighted mean and last value (null where the counter is undefined:
        before its first or after its last sample), :data:`profiler.db_schema.COUNTER_BUCKETS`."""
        k = lod.resolution_level(start_ns, end_ns, width_px)
        b_lo, b_hi = start_ns >> k, ((end_ns - 1) >> k) + 1
        wanted = [c for c in self.counters if tracks is None or c.track_id in tracks]
        if not wanted:
            return dbs.COUNTER_BUCKETS.empty_table()
        wanted.sort(key=lambda c: c.track_id)
        starts = np.arange(b_lo, b_hi, dtype=np.int64) << k
        parts = []
        for c in wanted:
            table = counter_bucketize(c.t, c.v, k, b_lo, b_hi, first_ts=int(c.t[0]), last_ts=int(c.t[-1]))
            columns = {}
            for name in (dbs.MIN_VALUE, dbs.MAX_VALUE, dbs.MEAN_VALUE, dbs.LAST_VALUE):
                values = np.asarray(table.column(name).to_numpy(zero_copy_only=False), np.float64)
                columns[name] = pa.array(values, mask=~np.isfinite(values))
            parts.append(pa.table({
                dbs.TRACK_ID: pa.array(np.full(len(starts), c.track_id, np.int64)),
                ts.START_TS: pa.array(starts), ts.END_TS: pa.array(starts + (1 << k)),
                dbs.COUNT: table.column(dbs.COUNT).cast(pa.int64()), **columns}, schema=dbs.COUNTER_BUCKETS))
        return pa.concat_tables(parts)

    def timeline_rows(self) -> list[TimelineRow]:
        """The rows to draw, first to last (each a span-like row of the :data:`QUERY_GROUP` group)."""
        # (no span_name: a query row named "layer" must not be taken for the trace's layer row)
        return [TimelineRow(r.label, (r.track_id,), "span", None, QUERY_GROUP, "Span")
                for r in self.rows]

    @property
    def track_ids(self) -> list[int]:
        """The rows' track ids, first row first (-1, -2, ...)."""
        return [r.track_id for r in self.rows]

    def window_tables(self, start_ns: int, end_ns: int, width_px: int,
                      resolution_ns: int) -> tuple[pa.Table, pa.Table]:
        """``(events, buckets)`` of every query row in ``[start_ns, end_ns)`` on the grid of ``resolution_ns`` (a
        power of two, as a window's): rows with at most ``width_px`` intervals in view as exact events, the others
        as buckets tiling the grid (:data:`profiler.db_schema.WINDOW_EVENTS` / ``WINDOW_BUCKETS``)."""
        k = max(int(resolution_ns), 1).bit_length() - 1
        b_lo, b_hi = start_ns >> k, ((end_ns - 1) >> k) + 1
        limit = RAW_EVENTS_PER_PIXEL * width_px
        events: list[pa.Table] = []
        buckets: list[pa.Table] = []
        for row in sorted(self.rows, key=lambda r: r.track_id):      # track id order, as windows are
            ev = row.events
            a = int(np.searchsorted(ev.start, min(start_ns, b_lo << k) - row.max_dur_ns, side="left"))
            b = int(np.searchsorted(ev.start, max(end_ns, b_hi << k), side="left"))
            s, e = ev.start[a:b], ev.end[a:b]
            in_view = np.flatnonzero((s < end_ns) & ((e > start_ns) | (s >= start_ns))) + a
            if not len(in_view):
                continue
            if len(in_view) <= limit:
                events.append(_events_table(row, in_view))
                continue
            sub = lod.TrackEvents(ev.start[a:b], ev.end[a:b], ev.ids[a:b], ev.codes[a:b], ev.names)
            table = lod.bucketize(sub, k, b_lo, b_hi)
            starts = np.arange(b_lo, b_hi, dtype=np.int64) << k
            buckets.append(pa.table({
                dbs.TRACK_ID: pa.array(np.full(b_hi - b_lo, row.track_id, np.int64)),
                ts.START_TS: pa.array(starts), ts.END_TS: pa.array(starts + (1 << k)),
                dbs.BUSY_NS: table.column(dbs.BUSY_NS).cast(pa.int64()),
                dbs.COUNT: table.column(dbs.COUNT).cast(pa.int64()),
                dbs.LONGEST_ID: table.column(dbs.LONGEST_ID).cast(pa.int64()),
                dbs.TOP_NAME: table.column(dbs.TOP_NAME).cast(pa.string()),
            }, schema=dbs.WINDOW_BUCKETS))
        return (pa.concat_tables(events) if events else dbs.WINDOW_EVENTS.empty_table(),
                pa.concat_tables(buckets) if buckets else dbs.WINDOW_BUCKETS.empty_table())

    def merged(self, window: Window) -> Window:
        """``window`` (a :meth:`profiler.Trace.window` result) with the query rows' events and buckets added on its
        grid, before the trace's (their track ids are lower)."""
        events, buckets = self.window_tables(window.start_ns, window.end_ns, window.width_px, window.resolution_ns)
        return dataclasses.replace(window, events=pa.concat_tables([events, window.events]),
                                   buckets=pa.concat_tables([buckets, window.buckets]))

    def empty_window(self, start_ns: int, end_ns: int, width_px: int) -> Window:
        """The window of the query rows alone (a timeline showing no row of the trace)."""
        k = lod.resolution_level(start_ns, end_ns, width_px)
        events, buckets = self.window_tables(start_ns, end_ns, width_px, 1 << k)
        return Window(start_ns, end_ns, width_px, 1 << k, events, buckets)

    def pick(self, track_id: int, t_ns: int, resolution_ns: int) -> int | None:
        """The result row a click at ``t_ns`` on row ``track_id`` means: the shortest interval containing it, else
        the nearest within a pixel either side; None when there is none (or no such row)."""
        row = next((r for r in self.rows if r.track_id == track_id), None)
        if row is None:
            return None
        ev, pad = row.events, max(int(resolution_ns), 1)
        a = int(np.searchsorted(ev.start, t_ns - pad - row.max_dur_ns, side="left"))
        b = int(np.searchsorted(ev.start, t_ns + pad, side="right"))
        s, e = ev.start[a:b], np.maximum(ev.end[a:b], ev.start[a:b] + 1)
        near = np.flatnonzero((s < t_ns + pad) & (e > t_ns - pad))
        if not len(near):
            return None
        inside = near[(s[near] <= t_ns) & (t_ns < e[near])]
        if len(inside):
            i = int(inside[np.argmin(e[inside] - s[inside])])
        else:
            i = int(near[np.argmin(np.minimum(np.abs(s[near] - t_ns), np.abs(e[near] - t_ns)))])
        return int(ev.ids[a + i])

    def row_fields(self, index: int) -> dict[str, Any]:
        """Every column of result row ``index``."""
        if not 0 <= index < self.result.num_rows:
            raise QueryError(f"the query has no row {index} (it has {self.result.num_rows:,})")
        return self.result.slice(index, 1).to_pylist()[0]

    def event_ref(self, index: int) -> tuple[str, int] | None:
        """``(table, id)`` of the trace's event result row ``index`` names with ``table_name`` and ``id``, or None."""
        fields = self.row_fields(index)
        table, event_id = fields.get(dbs.TABLE), fields.get(ts.ID)
        if isinstance(table, str) and isinstance(event_id, int) and not isinstance(event_id, bool):
            return table, event_id
        return None


def _events_table(row: QueryRow, at: np.ndarray) -> pa.Table:
    ev = row.events
    n = len(at)
    codes = ev.codes[at]
    names = ev.names.take(pa.array(np.where(codes < 0, 0, codes))) if len(ev.names) else pa.nulls(n, pa.string())
    if (codes < 0).any():
        names = pc.if_else(pa.array(codes < 0), pa.scalar(None, pa.string()), names)
    return pa.Table.from_arrays([
        pa.array(np.full(n, row.track_id, np.int64)), pa.array([dbs.QUERY_TABLE] * n, pa.string()),
        pa.array(ev.ids[at]), pa.array(ev.start[at]), pa.array(ev.end[at]), names.cast(pa.string()),
        pa.nulls(n, pa.string()), pa.nulls(n, pa.string()), pa.nulls(n, pa.string()),
        pa.array(event_lanes(ev.start[at], ev.end[at]), pa.int32())], schema=dbs.WINDOW_EVENTS)


def _column(result: pa.Table, name: str) -> str | None:
    """The result column called ``name`` (case-insensitive), or None."""
    return next((c for c in result.column_names if c.lower() == name), None)


def _times(result: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """A time column as int64 ns (integers exactly, other numbers rounded) and its validity (nulls and NaN
    invalid); QueryError for other types or times beyond the database's limit."""
    col = result.column(column)
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    typ = col.type
    if pa.types.is_integer(typ):
        largest = pc.max(col).as_py() if pa.types.is_uint64(typ) and len(col) else None
        if largest is not None and largest >= lod.TIME_LIMIT:   # (before the cast to int64 could overflow)
            raise QueryError(f"column {column} of the query holds times beyond ±2**62 ns")
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        values = np.asarray(col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    elif pa.types.is_decimal(typ) or pa.types.is_floating(typ):
        floats = np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        valid = np.isfinite(floats)
        if (np.abs(floats[valid]) >= lod.TIME_LIMIT).any():
            raise QueryError(f"column {column} of the query holds times beyond ±2**62 ns")
        values = np.where(valid, np.round(floats), 0).astype(np.int64)
    else:
        raise QueryError(f"column {column} of the query holds {typ} values; a query track needs ns as integers "
                         f"(CAST it, or use epoch_ns(...))")
    if (np.abs(values[valid]) >= lod.TIME_LIMIT).any():
        raise QueryError(f"column {column} of the query holds times beyond ±2**62 ns")
    return values, valid


def query_tracks(trace: Any, sql: Any, *, timeout_s: float | None = None,
                 max_rows: int = MAX_QUERY_ROWS, max_bytes: int = MAX_QUERY_BYTES) -> QueryTracks:
    """Run ``sql`` on ``trace`` (read-only) and make timeline rows of its result (see the module docstring).

    Raises:
        QueryError: the query fails or times out, returns more than ``max_rows`` rows or ``max_bytes`` bytes of
            Arrow data, or more than
            :data:`MAX_QUERY_TRACKS` track values, has no ``start_ts`` column, or time columns that are not numbers
            (each a one-line message).
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("a query track needs a SQL query with a start_ts column")
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(sql):,} characters long; a query track takes at most {MAX_QUERY_CHARS:,}")
    kwargs = {} if timeout_s is None else {"timeout_s": timeout_s}
    result = trace.sql_arrow(sql, max_rows=max_rows + 1, max_bytes=max_bytes, **kwargs)
    if result.num_rows > max_rows:
        raise QueryError(f"the query returned more than {max_rows:,} rows; a query track draws at most that many "
                         "(add a WHERE or a LIMIT)")
    if result.nbytes > max_bytes:
        raise QueryError(f"the query returned more than {max_bytes // 2**20:,} MiB; a query track keeps at most that "
                         "much (select fewer or shorter columns: start_ts, end_ts, a short name)")
    start_col = _column(result, ts.START_TS)
    if start_col is None:
        shown = ", ".join(result.column_names[:12]) or "none"
        raise QueryError(f"a query track needs a {ts.START_TS} column (ns), and end_ts or duration_ns for "
                         f"intervals; the query's columns are: {shown}")
    start, valid = _times(result, start_col)
    end_col, dur_col = _column(result, ts.END_TS), _column(result, ts.DURATION_NS)
    if end_col is not None:
        end, end_valid = _times(result, end_col)
        end = np.where(end_valid, end, start)
    elif dur_col is not None:
        dur, dur_valid = _times(result, dur_col)
        end = start + np.where(dur_valid, dur, 0)
    else:
        end = start.copy()
    name_col = next((c for c in (_column(result, n) for n in NAME_COLUMNS) if c is not None), None)
    names = (result.column(name_col).cast(pa.string()) if name_col is not None
             else pa.chunked_array([pa.array([DEFAULT_NAME] * result.num_rows, pa.string())]))
    names = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    value_col = _column(result, ts.VALUE)
    track_col = _column(result, dbs.QUERY_TRACK)
    if track_col is not None:
        kind = result.schema.field(track_col).type
        if pa.types.is_nested(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            raise QueryError(f"the query's {track_col} column holds {kind} values; a track is named by text or a "
                             "number (cast it: ... ::VARCHAR)")
        labels = result.column(track_col).cast(pa.string()).fill_null("(null)")
        enc = pc.dictionary_encode(labels.combine_chunks() if isinstance(labels, pa.ChunkedArray) else labels)
        values = enc.dictionary.to_pylist()
        if len(values) > MAX_QUERY_TRACKS:
            raise QueryError(f"the query's {track_col} column has {len(values):,} values; a query track draws at "
                             f"most {MAX_QUERY_TRACKS} rows (group them)")
        which = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        values, which = [DEFAULT_NAME], np.zeros(result.num_rows, np.int64)
    ids = np.arange(result.num_rows, dtype=np.int64)
    if value_col is not None:
        return _counters(sql, result, value_col, start=start, valid=valid, labels=values, which=which)
    rows = []
    for i, label in enumerate(values):
        mine = np.flatnonzero((which == i) & valid)
        if not len(mine):
            continue
        ev = lod.prepare(start[mine], end[mine], ids[mine], names.take(pa.array(mine)))
        rows.append(QueryRow(str(label), -1 - len(rows), ev, int((ev.end - ev.start).max())))
    dropped = int((~valid).sum())
    note = f"{dropped:,} rows without a {start_col} left out" if dropped else ""
    return QueryTracks(sql, result, rows, note)


def _counters(sql: str, result: pa.Table, value_col: str, *, start: np.ndarray, valid: np.ndarray,
              labels: list[Any], which: np.ndarray) -> QueryTracks:
    """The counters of a result with a ``value`` column: one per ``track`` value, samples sorted by time (rows
    without a start or a value left out)."""
    col = result.column(value_col)
    typ = col.type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ)
            or pa.types.is_boolean(typ)):
        raise QueryError(f"column {value_col} of the query holds {typ} values; a counter's values must be numbers")
    v = np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), np.float64)
    ok = valid & np.isfinite(v)
    counters = []
    for i, label in enumerate(labels):
        mine = np.flatnonzero((which == i) & ok)
        if not len(mine):
            continue
        order = mine[np.argsort(start[mine], kind="stable")]
        counters.append(QueryCounter(str(label), -1 - len(counters), start[order], v[order]))
    dropped = int((~ok).sum())
    note = f"{dropped:,} rows without a {ts.START_TS} or a {value_col} left out" if dropped else ""
    return QueryTracks(sql, result, [], note, counters)


__all__ = ["DEFAULT_NAME", "MAX_QUERY_CHARS", "MAX_QUERY_ROWS", "MAX_QUERY_TRACKS", "QUERY_GROUP", "QueryCounter",
           "QueryRow", "QueryTracks", "query_tracks"]
