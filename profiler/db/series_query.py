"""Time series over a window at a cost set by pixels, not events: DMA throughput and Tensor HFU per bucket from the
index's value sums, and Counter tracks (SBUF usage, ...) per bucket from the counter index.

Both use the window planner's grid — resolution ``2**k`` with ``k = floor(log2(ns per pixel))``, buckets tiling
``[start >> k << k, ((end - 1 >> k) + 1) << k)`` — and its plan: stored levels where the window is at or above a
track's finest stored level, raw rows bucketed with the build's own code where it is finer.

* :func:`query_series` — ``dma_throughput``: per core, Σ over its DMA queues of ``lod.value_sum`` (each packet's
  ``transfer_bytes`` spread uniformly over its duration) / bucket width, in bytes per second; ``hfu``: per core,
  100 × Σ Tensor ``value_sum`` (``adjusted_flops``, else ``raw_flops``, spread over each instruction's duration)
  / (Tensor peak FLOP/ns × bucket width), in percent.
* :func:`query_counters` — per Counter track and bucket: sample count, min / max (over the samples in the bucket
  and the value carried into it), time-weighted mean and the value at the bucket's end, from ``counter_lod``
  (see :mod:`profiler.db.lod_counter` for the definitions); null values where the counter is undefined (before
  its first sample, after its last).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db import lod
from profiler.db.lod_counter import counter_bucketize
from profiler.db.sqlutil import quote
from profiler.db.track_info import TrackInfo
from profiler.db.window_query import Submit, query_window
from profiler.errors import QueryError
from tracer import schema as ts

#: Series kinds and their units.
SERIES_KINDS: dict[str, str] = {
    "dma_throughput": "bytes per second moved by the core's DMA queues",
    "hfu": "percent of the Tensor engine's peak FLOP rate (hardware FLOPs utilization)",
}


def series_tracks(infos: dict[int, TrackInfo], kind: str, core: int | None) -> list[TrackInfo]:
    """The tracks whose value sums make series ``kind`` (of one core, or of every core with ``core`` None)."""
    if not isinstance(kind, str) or kind not in SERIES_KINDS:
        raise QueryError(f"unknown series kind {str(kind)[:40]!r} (choose one of: {', '.join(SERIES_KINDS)})")
    table = ts.DMA_PACKET.name if kind == "dma_throughput" else ts.INSTRUCTION.name   # Tensor tracks carry FLOPs
    return sorted((i for i in infos.values() if i.table == table and i.value_name is not None
                   and (core is None or i.core == core)), key=lambda i: i.track_id)


def query_series(cur: duckdb.DuckDBPyConnection, infos: dict[int, TrackInfo], start_ns: int, end_ns: int,
                 width_px: int, *, kind: str, core: int | None = None, peak_flops_per_ns: float | None = None,
                 submit: Submit | None = None) -> tuple[int, pa.Table]:
    """(level, :data:`profiler.db_schema.SERIES` rows): series ``kind`` per core and bucket of the window.

    ``peak_flops_per_ns`` is the Tensor engine's peak of one core (``hfu``; without it the values are null).
    """
    tracks = series_tracks(infos, kind, core)
    k = lod.resolution_level(start_ns, end_ns, width_px)
    if not tracks:
        return k, dbs.SERIES.empty_table()
    result = query_window(cur, infos, start_ns, end_ns, width_px, track_ids=[t.track_id for t in tracks],
                          buckets_only=True, values=True, submit=submit)
    b = result.buckets
    b_lo, b_hi = start_ns >> k, ((end_ns - 1) >> k) + 1
    nb = b_hi - b_lo
    core_of = {t.track_id: t.core for t in tracks}
    cores = sorted({t.core for t in tracks}, key=lambda c: (c is None, c or 0))
    slot = {c: i for i, c in enumerate(cores)}
    uniq, inverse = np.unique(b.column(dbs.TRACK_ID).to_numpy(), return_inverse=True)
    row_slot = np.array([slot[core_of[int(t)]] for t in uniq], np.int64)[inverse]
    rel = (b.column(ts.START_TS).to_numpy() >> k) - b_lo
    total = np.bincount(row_slot * nb + rel, weights=b.column(dbs.VALUE_SUM).to_numpy(), minlength=len(cores) * nb)
    width_ns = float(1 << k)
    if kind == "dma_throughput":
        value = pa.array(total * (1e9 / width_ns))
    elif peak_flops_per_ns:
        value = pa.array(100.0 * total / (peak_flops_per_ns * width_ns))
    else:
        value = pa.nulls(len(total), pa.float64())
    starts = np.arange(b_lo, b_hi, dtype=np.int64) << k
    return k, pa.table({
        dbs.CORE: pa.array(np.repeat(np.array([c if c is not None else 0 for c in cores], np.int64), nb),
                           mask=np.repeat(np.array([c is None for c in cores]), nb)),
        ts.START_TS: pa.array(np.tile(starts, len(cores))),
        ts.END_TS: pa.array(np.tile(starts + (1 << k), len(cores))),
        ts.VALUE: value,
    }, schema=dbs.SERIES)


def _stored_counter_rows(cur: duckdb.DuckDBPyConnection, stored: list[TrackInfo], k: int, b_lo: int,
                         b_hi: int) -> pa.Table:
    ids = sorted(i.track_id for i in stored)
    cols = (dbs.TRACK_ID, dbs.BUCKET, dbs.COUNT, dbs.MIN_VALUE, dbs.MAX_VALUE, dbs.MEAN_VALUE, dbs.LAST_VALUE)
    return cur.sql(
        f"SELECT {', '.join(quote(c) for c in cols)} FROM {quote(dbs.COUNTER_LOD_TABLE)} "
        f"WHERE {quote(dbs.LEVEL)} = $k AND {quote(dbs.TRACK_ID)} BETWEEN $t0 AND $t1 "
        f"AND {quote(dbs.BUCKET)} >= $b0 AND {quote(dbs.BUCKET)} < $b1",
        params={"k": k, "t0": ids[0], "t1": ids[-1], "b0": b_lo, "b1": b_hi}).to_arrow_table()


def _raw_counter_rows(cur: duckdb.DuckDBPyConnection, raw: list[TrackInfo], k: int, b_lo: int,
                      b_hi: int) -> list[tuple[int, pa.Table]]:
    """Buckets of counters finer than their stored levels, from their samples, in one query.

    Per track the samples are read from the start of its finest stored bucket holding the window's start (so the
    read is bounded by the index, not by the counter's history), and the value carried into that bucket is the
    previous finest bucket's ``last_value``.
    """
    firsts, prev = {}, {}
    for info in raw:
        k_min = int(info.lod_min_level or 0)
        firsts[info.track_id] = ((b_lo << k) >> k_min) << k_min
        prev[info.track_id] = (k_min, (firsts[info.track_id] >> k_min) - 1)
    ids = sorted(firsts)
    pairs = sorted(set(prev.values()))
    rows = cur.sql(
        f"SELECT {quote(dbs.TRACK_ID)}, {quote(ts.TIMESTAMP)}, {quote(ts.VALUE)}::DOUBLE AS v, NULL::INTEGER AS l, "
        f"NULL::BIGINT AS b FROM {quote(ts.COUNTER.name)} WHERE {quote(dbs.TRACK_ID)} BETWEEN $t0 AND $t1 "
        f"AND {quote(ts.TIMESTAMP)} >= $a AND {quote(ts.TIMESTAMP)} < $hi UNION ALL "
        f"SELECT {quote(dbs.TRACK_ID)}, NULL, {quote(dbs.LAST_VALUE)}, {quote(dbs.LEVEL)}, {quote(dbs.BUCKET)} "
        f"FROM {quote(dbs.COUNTER_LOD_TABLE)} WHERE {quote(dbs.TRACK_ID)} BETWEEN $t0 AND $t1 AND ("
        + " OR ".join(f"({quote(dbs.LEVEL)} = {int(lv)} AND {quote(dbs.BUCKET)} = {int(bk)})" for lv, bk in pairs)
        + ")", params={"t0": ids[0], "t1": ids[-1], "a": min(firsts.values()), "hi": b_hi << k}).to_arrow_table()
    tid = rows.column(0).to_numpy()
    times = rows.column(1)
    carried_row = np.asarray(times.is_null().to_numpy(zero_copy_only=False))
    t_all = np.asarray(times.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    v_all = np.asarray(rows.column(2).to_numpy(zero_copy_only=False), np.float64)
    lv_all = np.asarray(rows.column(3).fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    bk_all = np.asarray(rows.column(4).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    out = []
    for info in raw:
        mine = tid == info.track_id
        samples = mine & ~carried_row & (t_all >= firsts[info.track_id])
        t, v = t_all[samples], v_all[samples]
        if len(t) > 1 and np.any(np.diff(t) < 0):    # storage order is time order; keep ties' order
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
        level, bucket = prev[info.track_id]
        carried = v_all[mine & carried_row & (lv_all == level) & (bk_all == bucket)]
        if len(carried) and not np.isnan(carried[0]):
            # The value holding when the fetched samples begin, as a sample just before them: it only sets the
            # value carried into the window's first bucket (it lies before every bucket computed).
            t = np.r_[np.int64(firsts[info.track_id] - 1), t]
            v = np.r_[carried[0], v]
        out.append((info.track_id, counter_bucketize(t, v, k, b_lo, b_hi, first_ts=int(info.start_ts or 0),
                                                     last_ts=int(info.end_ts or 0))))
    return out


def query_counters(cur: duckdb.DuckDBPyConnection, infos: dict[int, TrackInfo], start_ns: int, end_ns: int,
                   width_px: int, *, track_ids: list[int]) -> tuple[int, pa.Table]:
    """(level, :data:`profiler.db_schema.COUNTER_BUCKETS` rows) of these Counter tracks, tiling the window."""
    k = lod.resolution_level(start_ns, end_ns, width_px)
    b_lo, b_hi = start_ns >> k, ((end_ns - 1) >> k) + 1
    nb = b_hi - b_lo
    counters = sorted({infos[t].track_id for t in track_ids if infos[t].is_counter})
    if not counters:
        return k, dbs.COUNTER_BUCKETS.empty_table()
    m = len(counters)
    pos_of = {t: i for i, t in enumerate(counters)}
    count = np.zeros(m * nb, np.int64)
    cols = {c: np.full(m * nb, np.nan) for c in (dbs.MIN_VALUE, dbs.MAX_VALUE, dbs.MEAN_VALUE, dbs.LAST_VALUE)}

    def scatter(track_id: int, rel: np.ndarray, rows: pa.Table) -> None:
        at = pos_of[track_id] * nb + rel
        count[at] = rows.column(dbs.COUNT).to_numpy()
        for c, out in cols.items():
            out[at] = np.asarray(rows.column(c).to_numpy(zero_copy_only=False), np.float64)

    with_data = [infos[t] for t in counters if infos[t].event_count and infos[t].lod_min_level is not None]
    stored = [i for i in with_data if k >= int(i.lod_min_level or 0)]
    if stored:
        rows = _stored_counter_rows(cur, stored, k, b_lo, b_hi)
        tid = rows.column(dbs.TRACK_ID).to_numpy()
        rel = rows.column(dbs.BUCKET).to_numpy() - b_lo
        for info in stored:
            mine = np.flatnonzero(tid == info.track_id)
            scatter(info.track_id, rel[mine], rows.take(pa.array(mine)))
    raw = [i for i in with_data if i not in stored]
    if raw:
        for track_id, table in _raw_counter_rows(cur, raw, k, b_lo, b_hi):
            scatter(track_id, np.arange(nb), table)
    starts = np.arange(b_lo, b_hi, dtype=np.int64) << k

    def values(a: np.ndarray) -> pa.Array:
        return pa.array(a, mask=~np.isfinite(a))    # undefined (no sample yet / any more): null

    return k, pa.table({
        dbs.TRACK_ID: pa.array(np.repeat(np.array(counters, np.int64), nb)),
        ts.START_TS: pa.array(np.tile(starts, m)),
        ts.END_TS: pa.array(np.tile(starts + (1 << k), m)),
        dbs.COUNT: pa.array(count),
        **{c: values(a) for c, a in cols.items()},
    }, schema=dbs.COUNTER_BUCKETS)
