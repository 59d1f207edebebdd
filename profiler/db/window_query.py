"""Window queries: what the timeline looks like in [start, end) at W pixels, at a cost set by W.

Per requested track the planner picks, at resolution ``r = 2**k`` (ns per pixel rounded down to a power of two):

* **stored buckets** when ``k`` is at or above the track's finest stored level: one query reads level ``k`` of
  every such track — ``O(W)`` contiguous rows each (the index is dense and sorted by (track, level, bucket));
* **raw events** when the track has at most :data:`RAW_EVENTS_PER_PIXEL` events per pixel in view: a scan of
  ``start_ts`` in ``[start - max_dur, end)`` on the (track_id, start_ts)-sorted table, so ``O(log n + k)``;
* **buckets from raw events** (:func:`profiler.db.lod.bucketize`) when the window is finer than the stored levels
  but still holds more events than that — the same bucket definitions, computed on the fly.

Buckets tile ``[start >> k << k, ((end - 1 >> k) + 1) << k)`` for every bucketed track; buckets outside the
track's data are idle rows (busy 0, count 0).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.lanes import assign_lanes
from profiler.db.raw_rows import (
    ATTRIBUTE_COLUMNS,
    RawRows,
    bucketize_tracks,
    fetch_raw,
    only,
)
from profiler.db.sqlutil import quote
from profiler.db.track_info import TrackInfo
from tracer import schema as ts

#: A track is shown as raw events when it has at most this many events per pixel in view.
RAW_EVENTS_PER_PIXEL = 1
#: Width limit of one window.
MAX_WIDTH_PX = 1 << 16


@dataclass(frozen=True)
class WindowResult:
    """Raw result of one window query (wrapped by :class:`profiler.window.Window`)."""

    level: int
    events: pa.Table
    buckets: pa.Table


def _overlapping(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return (start < hi) & ((end > lo) | (start >= lo))


def _events_table(raw: RawRows, rows: np.ndarray, infos: dict[int, TrackInfo], attributes: bool) -> pa.Table:
    """WINDOW_EVENTS of the raw rows at sorted positions ``rows``, with a lane per event as ``depth``."""
    n = len(rows)
    tid, start, end = raw.tid[rows], raw.start[rows], raw.end[rows]
    depth = np.array(raw.take(ts.DEPTH, rows).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int32)
    track_ids = np.unique(tid)
    lane_tracks = [t for t in track_ids.tolist() if infos[t].table != dbs.SLICE_TABLE and infos[t].overlapping]
    if lane_tracks:
        laned = np.isin(tid, lane_tracks)
        depth[laned] = assign_lanes(tid[laned], start[laned], end[laned])
    tables = sorted({infos[t].table for t in track_ids.tolist()})
    code_of_track = np.array([tables.index(infos[t].table) for t in track_ids.tolist()], np.int32)
    table_col = pa.DictionaryArray.from_arrays(
        pa.array(code_of_track[np.searchsorted(track_ids, tid)] if n else np.zeros(0, np.int32)),
        pa.array(tables, pa.string())).cast(pa.string())
    if attributes:
        extra = [raw.take(c, rows) for c in ATTRIBUTE_COLUMNS]
    else:
        extra = [pa.nulls(n, pa.string())] * len(ATTRIBUTE_COLUMNS)
    return pa.Table.from_arrays([
        pa.array(tid), table_col, pa.array(raw.ids[rows]), pa.array(start), pa.array(end),
        raw.take(ts.NAME, rows), *extra, pa.array(depth, pa.int32())], schema=dbs.WINDOW_EVENTS)


class _BucketPieces:
    """Accumulates per-track bucket columns and builds one WINDOW_BUCKETS table at the end."""

    def __init__(self, b_lo: int, b_hi: int, k: int, *, values: bool = False) -> None:
        self.b_lo, self.b_hi, self.k = b_lo, b_hi, k
        self.nb = b_hi - b_lo
        self.values: list[np.ndarray] | None = [] if values else None
        self.track_ids: list[int] = []
        self.busy: list[np.ndarray] = []
        self.count: list[np.ndarray] = []
        self.longest: list[pa.Array] = []
        self.top: list[pa.Array] = []

    def add(self, track_id: int, busy: np.ndarray, count: np.ndarray, longest: pa.Array, top: pa.Array, *,
            value: np.ndarray | None = None) -> None:
        if self.values is not None:
            self.values.append(np.zeros(self.nb) if value is None else np.nan_to_num(np.asarray(value, np.float64)))
        self.track_ids.append(track_id)
        self.busy.append(np.asarray(busy, np.int64))
        self.count.append(np.asarray(count, np.int64))
        if isinstance(longest, pa.ChunkedArray):
            longest = longest.combine_chunks()
        if isinstance(top, pa.ChunkedArray):
            top = top.combine_chunks()
        self.longest.append(longest.cast(pa.int64()))
        self.top.append(top.cast(pa.string()))

    def add_idle(self, track_id: int) -> None:
        nb = self.nb
        self.add(track_id, np.zeros(nb, np.int64), np.zeros(nb, np.int64), pa.nulls(nb, pa.int64()),
                 pa.nulls(nb, pa.string()))

    def table(self) -> pa.Table:
        schema = dbs.WINDOW_BUCKETS if self.values is None else _VALUED_BUCKETS
        if not self.track_ids:
            return schema.empty_table()
        order = np.argsort(self.track_ids, kind="stable")
        nb, k = self.nb, self.k
        starts = np.arange(self.b_lo, self.b_hi, dtype=np.int64) << k
        m = len(order)
        extra = {}
        if self.values is not None:
            extra[dbs.VALUE_SUM] = pa.array(np.concatenate([self.values[i] for i in order]))
        return pa.table({
            dbs.TRACK_ID: pa.array(np.repeat(np.asarray(self.track_ids, np.int64)[order], nb)),
            ts.START_TS: pa.array(np.tile(starts, m)),
            ts.END_TS: pa.array(np.tile(starts + (1 << k), m)),
            dbs.BUSY_NS: pa.array(np.concatenate([self.busy[i] for i in order])),
            dbs.COUNT: pa.array(np.concatenate([self.count[i] for i in order])),
            dbs.LONGEST_ID: pa.concat_arrays([self.longest[i] for i in order]),
            dbs.TOP_NAME: pa.concat_arrays([self.top[i] for i in order]),
            **extra,
        }, schema=schema)


def _add_stored(pieces: _BucketPieces, rows: pa.Table, stored: list[TrackInfo], raw: list[TrackInfo], *,
                limit: int | None) -> None:
    """Scatter the stored level rows of all tracks into dense per-track bucket arrays in one pass.

    Tracks with at most ``limit`` events starting in view go to ``raw`` instead; with ``limit`` None every track
    is bucketed (tracks without rows in view become idle rows).
    """
    ids = np.array(sorted(i.track_id for i in stored), dtype=np.int64)
    nb = pieces.nb
    tid = rows.column(dbs.TRACK_ID).to_numpy()
    ti = np.minimum(np.searchsorted(ids, tid), len(ids) - 1)
    valid = ids[ti] == tid
    ti, rel = ti[valid], rows.column(dbs.BUCKET).to_numpy()[valid] - pieces.b_lo
    pos = ti * nb + rel
    busy = np.zeros(len(ids) * nb, np.int64)
    count = np.zeros(len(ids) * nb, np.int64)
    count_col = rows.column(dbs.COUNT).to_numpy()[valid]
    busy[pos] = rows.column(dbs.BUSY_NS).to_numpy()[valid]
    count[pos] = count_col
    source = np.full(len(ids) * nb, -1, np.int64)
    source[pos] = np.flatnonzero(valid)
    value = None
    if pieces.values is not None:
        value = np.zeros(len(ids) * nb)
        value[pos] = np.nan_to_num(np.asarray(rows.column(dbs.VALUE_SUM).to_numpy(zero_copy_only=False),
                                              np.float64)[valid])
    starting = np.bincount(ti, weights=count_col, minlength=len(ids))
    present = np.bincount(ti, minlength=len(ids)) > 0
    keep = []
    for i, track_id in enumerate(ids.tolist()):
        if not present[i]:
            if limit is None:
                keep.append((i, track_id))
            continue
        if limit is not None and starting[i] <= limit:
            raw.append(next(info for info in stored if info.track_id == track_id))
            continue
        keep.append((i, track_id))
    if not keep:
        return
    take = np.concatenate([source[i * nb:(i + 1) * nb] for i, _ in keep])
    index = pa.array(np.maximum(take, 0), mask=take < 0)
    longest = rows.column(dbs.LONGEST_ID).take(index).combine_chunks()
    top = rows.column(dbs.TOP_NAME).take(index).combine_chunks()
    for j, (i, track_id) in enumerate(keep):
        pieces.add(track_id, busy[i * nb:(i + 1) * nb], count[i * nb:(i + 1) * nb],
                   longest.slice(j * nb, nb), top.slice(j * nb, nb),
                   value=None if value is None else value[i * nb:(i + 1) * nb])


def _read_level(cur: duckdb.DuckDBPyConnection, stored: list[TrackInfo], k: int, b_lo: int, b_hi: int, *,
                values: bool = False) -> pa.Table:
    """Rows of level ``k`` in buckets [b_lo, b_hi) of these tracks (and of tracks between them: callers select)."""
    ids = sorted(i.track_id for i in stored)
    value = f", {quote(dbs.VALUE_SUM)}" if values else ""
    return cur.sql(
        f"SELECT {quote(dbs.TRACK_ID)}, {quote(dbs.BUCKET)}, {quote(dbs.BUSY_NS)}, {quote(dbs.COUNT)}, "
        f"{quote(dbs.LONGEST_ID)}, {quote(dbs.TOP_NAME)}{value} FROM {quote(dbs.LOD_TABLE)} "
        f"WHERE {quote(dbs.LEVEL)} = $k AND {quote(dbs.TRACK_ID)} BETWEEN $t0 AND $t1 "
        f"AND {quote(dbs.BUCKET)} >= $b0 AND {quote(dbs.BUCKET)} < $b1",
        params={"k": k, "t0": ids[0], "t1": ids[-1], "b0": b_lo, "b1": b_hi}).to_arrow_table()


#: Buckets with each bucket's ``value_sum`` (what :func:`query_window` returns with ``values=True``).
_VALUED_BUCKETS = pa.schema([*dbs.WINDOW_BUCKETS, pa.field(dbs.VALUE_SUM, pa.float64(), nullable=False)])

#: Runs a query function on another thread with that thread's own cursor (see :func:`query_window`).
Submit = Callable[[Callable[[duckdb.DuckDBPyConnection], pa.Table]], "Future[pa.Table]"]


def query_window(cur: duckdb.DuckDBPyConnection, infos: dict[int, TrackInfo], start_ns: int, end_ns: int,
                 width_px: int, *, track_ids: list[int], buckets_only: bool = False,
                 attributes: bool = True, values: bool = False, submit: Submit | None = None) -> WindowResult:
    """Events and buckets of ``track_ids`` in [start_ns, end_ns) at ``width_px`` (see the module docstring).

    ``attributes=False`` leaves the events' layer/operator/source columns null instead of reading them.
    ``values=True`` (with ``buckets_only``) adds each bucket's ``value_sum`` (0 for tracks without values).
    With ``submit``, the index read and the raw-event scan of a window that needs both run concurrently.
    """
    k = lod.resolution_level(start_ns, end_ns, width_px)
    b_lo = start_ns >> k
    b_hi = ((end_ns - 1) >> k) + 1
    span_lo, span_hi = b_lo << k, b_hi << k
    limit = RAW_EVENTS_PER_PIXEL * width_px
    wanted = [infos[t] for t in track_ids if infos[t].is_interval]
    stored = [i for i in wanted if i.event_count and i.lod_min_level is not None and k >= i.lod_min_level]
    raw = [i for i in wanted if i not in stored]
    values = values and buckets_only
    pieces = _BucketPieces(b_lo, b_hi, k, values=values)

    fetch_attributes = attributes and not buckets_only
    raw = [info for info in raw if info.event_count]
    fetched: list[pa.Table] = []
    if stored:
        if raw and submit is not None:
            # The level read and the raw scan are independent: run them side by side.
            level_rows = submit(lambda c: _read_level(c, stored, k, b_lo, b_hi, values=values))
            fetched.append(fetch_raw(cur, raw, span_lo, span_hi, attributes=fetch_attributes, values=values))
            rows = level_rows.result()
        else:
            rows = _read_level(cur, stored, k, b_lo, b_hi, values=values)
        before = len(raw)
        _add_stored(pieces, rows, stored, raw, limit=None if buckets_only else limit)
        late = raw[before:] if fetched else raw
        if late:
            fetched.append(fetch_raw(cur, late, span_lo, span_hi, attributes=fetch_attributes, values=values))
            if len(fetched) == 2:   # each scan may include rows of tracks between its own: keep its own only
                fetched = [only(fetched[0], raw[:before]), only(fetched[1], late)]
    elif raw:
        fetched.append(fetch_raw(cur, raw, span_lo, span_hi, attributes=fetch_attributes, values=values))

    events = dbs.WINDOW_EVENTS.empty_table()
    if raw:
        rr = RawRows(fetched[0] if len(fetched) == 1 else pa.concat_tables(fetched))
        ids = np.array(sorted(i.track_id for i in raw), dtype=np.int64)
        ti = np.minimum(np.searchsorted(ids, rr.tid), len(ids) - 1)
        mine = ids[ti] == rr.tid
        in_view = _overlapping(rr.start, rr.end, start_ns, end_ns) & mine
        seen = np.bincount(ti[mine], minlength=len(ids)) > 0
        shown = np.bincount(ti, weights=in_view, minlength=len(ids))
        as_events = np.zeros(len(ids), dtype=bool) if buckets_only else shown <= limit
        shown_rows = np.flatnonzero(in_view & as_events[ti])
        if len(shown_rows):
            events = _events_table(rr, shown_rows, infos, attributes)
        to_bucket = []
        for i, track_id in enumerate(ids.tolist()):
            if as_events[i]:
                continue
            if not seen[i]:
                if buckets_only:
                    pieces.add_idle(track_id)
                continue
            a, b = (int(x) for x in np.searchsorted(rr.tid, [track_id, track_id + 1]))
            to_bucket.append((track_id, a, b))
        for track_id, bk in bucketize_tracks(rr, to_bucket, k, b_lo, b_hi):
            value = bk.column(dbs.VALUE_SUM).to_numpy() if values and dbs.VALUE_SUM in bk.column_names else None
            pieces.add(track_id, bk.column(dbs.BUSY_NS).to_numpy(), bk.column(dbs.COUNT).to_numpy(),
                       bk.column(dbs.LONGEST_ID), bk.column(dbs.TOP_NAME), value=value)
    if buckets_only:
        # Tracks without events still tile the window (idle).
        have = set(pieces.track_ids)
        for info in wanted:
            if info.track_id not in have:
                pieces.add_idle(info.track_id)
    return WindowResult(k, events, pieces.table())
