"""Raw interval rows of a window: the bounded range scan, the rows in (track, start, id) order, and bucketing
them on the fly — several tracks in one :func:`profiler.db.lod.bucketize` — for windows finer than the index.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db import index_build, lod
from profiler.db.sqlutil import quote
from profiler.db.track_info import TrackInfo
from tracer import schema as ts

#: Per interval table: SQL expressions for the WINDOW_EVENTS columns name, depth, and the attribution strings
#: layer, operator, source (fetched only when asked for).
_NAME_SQL: dict[str, str] = {
    ts.INSTRUCTION.name: quote(ts.OPCODE),
    ts.DMA_PACKET.name: f"coalesce({quote(ts.VARIABLE)}, {quote(ts.QUEUE_NAME)})",
    dbs.SLICE_TABLE: quote(ts.NAME),
}
_DEPTH_SQL: dict[str, str] = {dbs.SLICE_TABLE: f"{quote(ts.DEPTH)}::INTEGER"}
_ATTRIBUTE_SQL: dict[str, tuple[str, str, str]] = {
    ts.INSTRUCTION.name: (quote(ts.LAYER), quote(ts.HLO_NAME), quote(ts.NKI_SOURCE_LOCATION)),
}
#: WINDOW_EVENTS attribution columns, in the order of :data:`_ATTRIBUTE_SQL`'s expressions.
ATTRIBUTE_COLUMNS: tuple[str, str, str] = (ts.LAYER, dbs.OPERATOR, dbs.SOURCE)
#: Column of the per-event value in raw rows fetched with ``values=True``.
VALUE = ts.VALUE


def value_sql(table: str) -> str | None:
    """The SQL of a table's per-event value exactly as the index build integrates it (None: the table has none)."""
    return index_build._VALUE_SQL.get(table)   # the build owns the definition


def fetch_raw(cur: duckdb.DuckDBPyConnection, infos: list[TrackInfo], lo: int, hi: int, *,
              attributes: bool = False, times_only: bool = False, values: bool = False) -> pa.Table:
    """Rows of these tracks (any interval tables) that overlap [lo, hi), zero-length rows at lo included.

    One query: a UNION ALL of one range scan per table (in order of their first track id), each bounded below by
    its tracks' maximum duration.  Columns: track_id, id, start_ts, end_ts, name, depth, with ``attributes`` also
    :data:`ATTRIBUTE_COLUMNS`, with ``values`` also :data:`VALUE` (the per-event value the index's ``value_sum``
    integrates, the same SQL as the index build; null for tables without one); with ``times_only`` just track_id,
    start_ts, end_ts.  Rows of tracks between the wanted ones in a table may be included; callers select by track.
    """
    parts = []
    params: dict[str, object] = {"hi": hi, "lo": lo}
    by_table: dict[str, list[TrackInfo]] = {}
    for info in infos:
        by_table.setdefault(info.table, []).append(info)
    groups = sorted(by_table.items(), key=lambda item: min(i.track_id for i in item[1]))
    for j, (table, group) in enumerate(groups):
        ids = sorted(i.track_id for i in group)
        params.update({f"t0_{j}": ids[0], f"t1_{j}": ids[-1], f"scan_{j}": lo - max(i.max_dur_ns for i in group)})
        if times_only:
            select = f"{quote(dbs.TRACK_ID)}, {quote(ts.START_TS)}, {quote(ts.END_TS)}"
        else:
            select = (f"{quote(dbs.TRACK_ID)}, {quote(ts.ID)}, {quote(ts.START_TS)}, {quote(ts.END_TS)}, "
                      f"{_NAME_SQL[table]}::VARCHAR AS {quote(ts.NAME)}, {_DEPTH_SQL.get(table, 'NULL::INTEGER')} AS "
                      f"{quote(ts.DEPTH)}")
            if attributes:
                exprs = _ATTRIBUTE_SQL.get(table, ("NULL", "NULL", "NULL"))
                select += "".join(f", {e}::VARCHAR AS {quote(c)}"
                                  for e, c in zip(exprs, ATTRIBUTE_COLUMNS, strict=True))
            if values:
                select += f", {value_sql(table) or 'NULL'}::DOUBLE AS {quote(VALUE)}"
        parts.append(
            f"SELECT {select} FROM {quote(table)} WHERE {quote(dbs.TRACK_ID)} BETWEEN $t0_{j} AND $t1_{j} "
            f"AND {quote(ts.START_TS)} >= $scan_{j} AND {quote(ts.START_TS)} < $hi AND {quote(ts.END_TS)} >= $lo")
    return cur.sql(" UNION ALL ".join(parts), params=params).to_arrow_table()


def _row_order(tid: np.ndarray, start: np.ndarray, ids: np.ndarray) -> np.ndarray | None:
    """The permutation putting rows in (track_id, start_ts, id) order, or None when they already are.

    Scans return each track's rows in storage order, (start_ts, id) within a track, so a stable sort by track
    id is usually enough; the full sort is the fallback.
    """
    if len(tid) < 2:
        return None
    if np.all(tid[1:] >= tid[:-1]):
        order = None
    else:
        order = np.argsort(tid, kind="stable")
        tid, start, ids = tid[order], start[order], ids[order]
    dt, ds = np.diff(tid), np.diff(start)
    if np.all((dt > 0) | (ds > 0) | ((ds == 0) & (np.diff(ids) >= 0))):
        return order
    return np.lexsort((ids, start, tid))


class RawRows:
    """Raw rows of a window's tracks as numpy columns in (track_id, start_ts, id) order; strings taken lazily."""

    def __init__(self, data: pa.Table) -> None:
        self.data = data
        tid = data.column(dbs.TRACK_ID).to_numpy()
        start = data.column(ts.START_TS).to_numpy()
        end = data.column(ts.END_TS).to_numpy()
        ids = data.column(ts.ID).to_numpy()
        self.order = _row_order(tid, start, ids)
        if self.order is not None:
            tid, start, end, ids = tid[self.order], start[self.order], end[self.order], ids[self.order]
        self.tid, self.start, self.end, self.ids = tid, start, end, ids
        self.values: np.ndarray | None = None
        if VALUE in data.column_names:
            v = np.asarray(data.column(VALUE).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
            self.values = v if self.order is None else v[self.order]

    def source_rows(self, rows: np.ndarray) -> np.ndarray:
        """Row numbers in ``data`` of the given sorted positions."""
        return rows if self.order is None else self.order[rows]

    def take(self, column: str, rows: np.ndarray) -> pa.Array:
        """One column at the given sorted positions."""
        col = self.data.column(column)
        n = len(rows)
        if n == self.data.num_rows and self.order is None:
            out = col
        elif self.order is None and n and rows[-1] - rows[0] + 1 == n:     # a contiguous run: zero-copy
            out = col.slice(int(rows[0]), n)
        else:
            out = col.take(pa.array(self.source_rows(rows)))
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def _events(rr: RawRows, rows: np.ndarray, shift: np.ndarray | int = 0) -> lod.TrackEvents:
    """The raw rows at sorted positions ``rows`` (times moved by ``shift``) as events to bucket."""
    values = None if rr.values is None else rr.values[rows]
    return lod.prepare(rr.start[rows] + shift, rr.end[rows] + shift, rr.ids[rows], rr.take(ts.NAME, rows),
                       values=values)


def bucketize_tracks(rr: RawRows, runs: list[tuple[int, int, int]], k: int, b_lo: int,
                      b_hi: int) -> list[tuple[int, pa.Table]]:
    """Buckets [b_lo, b_hi) of level ``k`` of several tracks from their raw rows (``runs``: track id and its
    row range in ``rr``), with :func:`profiler.db.lod.bucketize`'s definitions.

    One bucketing serves all tracks: each track's events are shifted into a region of their own, a whole number
    of buckets apart and far enough apart that no event reaches another region, and the resulting buckets are
    cut per region.  Per bucket, every definition (union busy time, starters, longest starter, covering event —
    the event started before the bucket that ends last, which for a busy bucket is always of the bucket's own
    track — and dominant name) then only sees one track's events.  Tracks whose events reach far outside the
    window (a long carry-in) are bucketed on their own.
    """
    out: list[tuple[int, pa.Table]] = []
    nb = b_hi - b_lo
    packed: list[tuple[int, int, int, int, int]] = []
    for track_id, a, b in runs:
        reach_lo = max(0, -((rr.start[a] >> k) - b_lo))                # buckets before the window
        reach_hi = max(0, int((rr.end[a:b].max() - 1) >> k) + 1 - b_hi)  # buckets after it
        if reach_lo + reach_hi <= 2 * nb and len(runs) > 1:
            packed.append((track_id, a, b, reach_lo, reach_hi))
            continue
        out.append((track_id, lod.bucketize(_events(rr, np.arange(a, b)), k, b_lo, b_hi)))
    if not packed:
        return out
    stride = nb + max(p[3] for p in packed) + max(p[4] for p in packed) + 1       # buckets per region
    top = (b_hi + stride * len(packed)) << k
    if top >= lod.TIME_LIMIT or ((b_lo - stride) << k) <= -lod.TIME_LIMIT:
        for track_id, a, b, _, _ in packed:                                     # shifts would overflow
            out.append((track_id, lod.bucketize(_events(rr, np.arange(a, b)), k, b_lo, b_hi)))
        return out
    rows = np.concatenate([np.arange(a, b) for _, a, b, _, _ in packed])
    shift = np.repeat(np.arange(len(packed), dtype=np.int64) * (stride << k),
                      [b - a for _, a, b, _, _ in packed])
    table = lod.bucketize(_events(rr, rows, shift), k, b_lo, b_lo + stride * (len(packed) - 1) + nb)
    for j, (track_id, _, _, _, _) in enumerate(packed):
        out.append((track_id, table.slice(j * stride, nb)))
    return out


def only(data: pa.Table, infos: list[TrackInfo]) -> pa.Table:
    """The rows of ``data`` that belong to these tracks."""
    ids = np.array([i.track_id for i in infos], dtype=np.int64)
    return data.filter(pa.array(np.isin(data.column(dbs.TRACK_ID).to_numpy(), ids)))


def time_by_name(cur: duckdb.DuckDBPyConnection, infos: list[TrackInfo], lo: int, hi: int,
                 limit: int) -> tuple[list[tuple[str, int]], int]:
    """The ``limit`` names (an instruction's opcode, a slice's name, a packet's tensor or queue: the timeline's
    names) with the most time inside [lo, hi) on these tracks, each its events' durations clipped to the range and
    summed, most first (ties by name); and every name's time together.  Exact: it reads the rows of the range."""
    parts = []
    params: dict[str, object] = {"hi": hi, "lo": lo}
    by_table: dict[str, list[TrackInfo]] = {}
    for info in infos:
        by_table.setdefault(info.table, []).append(info)
    for j, (table, group) in enumerate(sorted(by_table.items())):
        params[f"scan_{j}"] = lo - max(i.max_dur_ns for i in group)
        ids = ", ".join(str(int(i.track_id)) for i in group)
        parts.append(
            f"SELECT {_NAME_SQL[table]}::VARCHAR AS name, least({quote(ts.END_TS)}, $hi) - "
            f"greatest({quote(ts.START_TS)}, $lo) AS t FROM {quote(table)} WHERE {quote(dbs.TRACK_ID)} IN ({ids}) "
            f"AND {quote(ts.START_TS)} >= $scan_{j} AND {quote(ts.START_TS)} < $hi AND {quote(ts.END_TS)} > $lo")
    if not parts:
        return [], 0
    rows = cur.sql(f"SELECT name, sum(t)::BIGINT AS t FROM ({' UNION ALL '.join(parts)}) WHERE name IS NOT NULL "
                   "GROUP BY name ORDER BY t DESC, name", params=params).fetchall()
    return [(str(n), int(t)) for n, t in rows[:limit]], sum(int(t) for _n, t in rows)

