"""Exact totals over a time range: one track's busy time and event count, and the union busy time of several tracks.

* :func:`track_totals` — busy time (union of the track's intervals) and events starting in ``[start, end)``: whole
  buckets of the track's finest stored level summed from the index (one row when the range covers the whole
  track), the two partial buckets at the ends from the raw events there.
* :func:`union_busy_ns` — the union over *several* tracks (every DMA queue of a core: "is any queue moving data"),
  which per-track sums cannot give.  The range is cut into chunks of about :data:`CHUNK_ROWS` events, using the
  index's counts at a coarse level, and each chunk's ``(start, end)`` columns are read, clipped to the chunk, sorted
  and merged with numpy: memory is bounded by the chunk, time is one read of the two columns.
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.raw_rows import fetch_raw
from profiler.db.sqlutil import fetch_one, quote
from profiler.db.track_info import TrackInfo
from tracer import schema as ts

#: Events read per chunk by :func:`union_busy_ns` (about 24 bytes each while merged).
CHUNK_ROWS = 2_000_000
#: Buckets of the coarse level used to place chunk boundaries.
_PLAN_BUCKETS = 4096


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of the intervals ``[start, end)`` (any order; an end before its start is empty)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum(end[order], s)
    reach = np.maximum.accumulate(e)
    covered_before = np.r_[np.iinfo(np.int64).min, reach[:-1]]
    return int(np.clip(e - np.maximum(s, covered_before), 0, None).sum())


def _pieces_per_track(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of each track's intervals as disjoint pieces, for rows sorted by start within each track.

    Vectorised over all tracks: the running maximum of the ends restarts at each track (ends are offset by the
    track's rank times the data's span, so one accumulate serves all).  Returns (piece starts, piece ends), not
    merged across tracks.
    """
    n = len(start)
    new_track = np.r_[True, tid[1:] != tid[:-1]]
    rank = np.cumsum(new_track) - 1
    base = int(start.min())
    span = int(max(int(end.max()), int(start.max())) - base) + 1
    if int(rank[-1]) >= (1 << 62) // span:     # offsets would overflow: no per-track merge
        return start, end
    offset = rank * span
    reach = np.maximum.accumulate(np.maximum(end, start) - base + offset)
    covered_before = np.r_[np.iinfo(np.int64).min, reach[:-1]]
    first = new_track | (start - base + offset > covered_before)
    starts = np.flatnonzero(first)
    last = np.r_[starts[1:] - 1, n - 1]
    return start[starts], reach[last] - offset[last] + base


def _covers_track(info: TrackInfo, start_ns: int, end_ns: int) -> bool:
    """True when [start_ns, end_ns) holds all of the track's busy time (zero-length events at its end aside)."""
    return info.start_ts is not None and info.end_ts is not None and start_ns <= info.start_ts \
        and end_ns >= info.end_ts


def track_totals(cur: duckdb.DuckDBPyConnection, info: TrackInfo, start_ns: int, end_ns: int) -> tuple[int, int]:
    """(busy_ns, events starting in the range) of one interval track within [start_ns, end_ns), exactly."""
    if end_ns <= start_ns or not info.event_count or info.lod_min_level is None:
        return 0, 0
    if _covers_track(info, start_ns, end_ns):
        # Every level holds the whole track; the coarsest has one or two rows.
        row = fetch_one(cur, f"SELECT coalesce(sum({quote(dbs.BUSY_NS)}), 0)::BIGINT FROM {quote(dbs.LOD_TABLE)} "
                             f"WHERE {quote(dbs.TRACK_ID)} = $t AND {quote(dbs.LEVEL)} = $k",
                        {"t": info.track_id, "k": lod.MAX_LEVEL})
        count = info.event_count
        if end_ns <= int(info.end_ts or 0):   # zero-length events starting at the very end are outside the range
            late = fetch_one(cur, f"SELECT count(*) FROM {quote(info.table)} WHERE {quote(dbs.TRACK_ID)} = $t "
                                  f"AND {quote(ts.START_TS)} >= $b", {"t": info.track_id, "b": end_ns})
            count -= int(late[0]) if late else 0
        return (int(row[0]) if row else 0), count
    k = info.lod_min_level
    a = -((-start_ns) >> k)        # first whole bucket
    b = end_ns >> k                # one past the last whole bucket
    busy = count = 0
    if a < b:
        row = fetch_one(cur, f"SELECT coalesce(sum({quote(dbs.BUSY_NS)}), 0)::BIGINT, "
                             f"coalesce(sum({quote(dbs.COUNT)}), 0)::BIGINT FROM {quote(dbs.LOD_TABLE)} "
                             f"WHERE {quote(dbs.TRACK_ID)} = $t AND {quote(dbs.LEVEL)} = $k "
                             f"AND {quote(dbs.BUCKET)} >= $a AND {quote(dbs.BUCKET)} < $b",
                        {"t": info.track_id, "k": k, "a": a, "b": b})
        if row:
            busy, count = int(row[0]), int(row[1])
        edges = [(start_ns, a << k), (b << k, end_ns)]
    else:
        edges = [(start_ns, end_ns)]
    for lo, hi in edges:
        if hi <= lo:
            continue
        data = fetch_raw(cur, [info], lo, hi, times_only=True)
        s = data.column(ts.START_TS).to_numpy()
        e = data.column(ts.END_TS).to_numpy()
        busy += union_length(np.clip(s, lo, hi), np.clip(e, lo, hi))
        count += int(np.count_nonzero((s >= lo) & (s < hi)))
    return busy, count


def _chunk_edges(cur: duckdb.DuckDBPyConnection, infos: list[TrackInfo], start_ns: int, end_ns: int,
                 chunk_rows: int) -> list[int]:
    """Boundaries cutting [start_ns, end_ns) into pieces of about ``chunk_rows`` events of these tracks."""
    total = sum(i.event_count for i in infos)
    if total <= chunk_rows:
        return [start_ns, end_ns]
    finest = max(int(i.lod_min_level or 0) for i in infos)
    k = min(max(finest, ((end_ns - start_ns) // _PLAN_BUCKETS).bit_length()), lod.MAX_LEVEL)
    ids = sorted(i.track_id for i in infos)
    rows = cur.execute(
        f"SELECT {quote(dbs.BUCKET)}, sum({quote(dbs.COUNT)})::BIGINT FROM {quote(dbs.LOD_TABLE)} "
        f"WHERE {quote(dbs.LEVEL)} = ? AND {quote(dbs.TRACK_ID)} BETWEEN ? AND ? "
        f"AND {quote(dbs.TRACK_ID)} IN ({', '.join('?' * len(ids))}) "
        f"AND {quote(dbs.BUCKET)} >= ? AND {quote(dbs.BUCKET)} <= ? GROUP BY ALL ORDER BY 1",
        [k, ids[0], ids[-1], *ids, start_ns >> k, (end_ns - 1) >> k]).fetchall()
    edges = [start_ns]
    acc = 0
    for bucket, n in rows:
        acc += int(n)
        if acc >= chunk_rows:
            cut = (int(bucket) + 1) << k
            if start_ns < cut < end_ns and cut > edges[-1]:
                edges.append(cut)
            acc = 0
    edges.append(end_ns)
    return edges


def union_busy_ns(cur: duckdb.DuckDBPyConnection, infos: list[TrackInfo], start_ns: int, end_ns: int, *,
                  chunk_rows: int = CHUNK_ROWS) -> int:
    """Length of the union of the intervals of all these tracks within [start_ns, end_ns), exactly."""
    infos = [i for i in infos if i.event_count and i.lod_min_level is not None]
    if end_ns <= start_ns or not infos:
        return 0
    if len(infos) == 1:
        return track_totals(cur, infos[0], start_ns, end_ns)[0]
    wanted = np.array(sorted(i.track_id for i in infos), dtype=np.int64)
    edges = _chunk_edges(cur, infos, start_ns, end_ns, chunk_rows)
    total = 0
    for lo, hi in itertools.pairwise(edges):
        data = fetch_raw(cur, infos, lo, hi, times_only=True)
        tid = data.column(dbs.TRACK_ID).to_numpy()
        mine = np.isin(tid, wanted)
        s = np.clip(data.column(ts.START_TS).to_numpy()[mine], lo, hi)
        e = np.clip(data.column(ts.END_TS).to_numpy()[mine], lo, hi)
        if len(s) == 0:
            continue
        t = tid[mine]
        if np.all(t[1:] >= t[:-1]) and np.all((t[1:] > t[:-1]) | (s[1:] >= s[:-1])):
            s, e = _pieces_per_track(t, s, e)      # rows come sorted by (track, start): merge within tracks first
        total += union_length(s, e)
    return total
