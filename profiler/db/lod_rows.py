"""Bucket rows of one level of the level-of-detail index (:class:`Rows`): combining them (pairs of buckets into the
next level, runs into longer runs) and converting them to the ``lod`` table's rows.

Bucket semantics are those of :mod:`profiler.db.lod`; the streaming build is :mod:`profiler.db.lod_build`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs

NONE = -1
_BIG = np.iinfo(np.int64).max
_EMPTY = np.zeros(0, np.int64)

#: ``lod`` rows as the ingest streams them to DuckDB: top names dictionary-coded (stored as VARCHAR).
LOD_STREAM = pa.schema([pa.field(dbs.TOP_NAME, pa.dictionary(pa.int32(), pa.string())) if f.name == dbs.TOP_NAME
                        else f for f in dbs.LOD])


@dataclass
class Rows:
    """Bucket arrays of one level over buckets ``[b0, b0 + len)``, with what coarser levels need to combine them."""

    k: int
    b0: int
    busy: np.ndarray        # int64 union length
    count: np.ndarray       # int64 events starting in the bucket
    ldur: np.ndarray        # int64 duration of the longest starter, -1 when none starts
    lid: np.ndarray         # int64 its id (meaningful where ldur >= 0)
    cid: np.ndarray         # int64 id of the covering event (meaningful where cok)
    ccode: np.ndarray       # int64 name code of the covering event
    cok: np.ndarray         # bool: an event started before the bucket
    value: np.ndarray | None    # float64 value sums, None for tracks without values
    pb: np.ndarray = field(default_factory=lambda: _EMPTY)   # (bucket, name code) -> total starter duration,
    pc: np.ndarray = field(default_factory=lambda: _EMPTY)   # sorted by (bucket, code)
    pd: np.ndarray = field(default_factory=lambda: _EMPTY)

    def __len__(self) -> int:
        return len(self.busy)

    @property
    def b1(self) -> int:
        """One past the last bucket."""
        return self.b0 + len(self.busy)

    def representative(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bucket: (longest_id or covering id, whether it is set, top name code or -1)."""
        started = self.count > 0
        covered = (~started) & (self.busy > 0) & self.cok
        rep = np.where(started, self.lid, self.cid)
        top = top_from_pairs(self.pb, self.pc, self.pd, self.b0, len(self))
        top = np.where(started, top, np.where(covered, self.ccode, NONE))
        return rep, started | covered, top


def idle_rows(k: int, b0: int, n: int, values: bool) -> Rows:
    """``n`` idle buckets (nothing started before them either)."""
    z = np.zeros(n, np.int64)
    return Rows(k, b0, z, z.copy(), np.full(n, NONE, np.int64), z.copy(), z.copy(), np.full(n, NONE, np.int64),
                np.zeros(n, bool), np.zeros(n, np.float64) if values else None)


def concat_rows(a: Rows, b: Rows) -> Rows:
    """``a`` followed by ``b`` (contiguous buckets of one level)."""
    def cat(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        return None if x is None or y is None else np.concatenate([x, y])
    return Rows(a.k, a.b0, cat(a.busy, b.busy), cat(a.count, b.count), cat(a.ldur, b.ldur), cat(a.lid, b.lid),
                cat(a.cid, b.cid), cat(a.ccode, b.ccode), cat(a.cok, b.cok), cat(a.value, b.value),
                cat(a.pb, b.pb), cat(a.pc, b.pc), cat(a.pd, b.pd))


def split_rows(rows: Rows, n: int) -> tuple[Rows, Rows]:
    """The first ``n`` buckets and the rest."""
    cut = int(np.searchsorted(rows.pb, rows.b0 + n, side="left"))

    def part(sl: slice, psl: slice, b0: int) -> Rows:
        return Rows(rows.k, b0, rows.busy[sl], rows.count[sl], rows.ldur[sl], rows.lid[sl], rows.cid[sl],
                    rows.ccode[sl], rows.cok[sl], None if rows.value is None else rows.value[sl],
                    rows.pb[psl], rows.pc[psl], rows.pd[psl])
    return part(slice(0, n), slice(0, cut), rows.b0), part(slice(n, None), slice(cut, None), rows.b0 + n)


def group_starts(keys: np.ndarray) -> np.ndarray:
    """Indices where a run of equal keys starts."""
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def top_from_pairs(pair_bucket: np.ndarray, pair_code: np.ndarray, pair_dur: np.ndarray,
                   b0: int, nb: int) -> np.ndarray:
    """Per bucket of [b0, b0 + nb): the code with the largest total duration (ties: smallest code), -1 if none."""
    top = np.full(nb, NONE, dtype=np.int64)
    if len(pair_bucket) == 0:
        return top
    gs = group_starts(pair_bucket)
    sizes = np.diff(np.r_[gs, len(pair_bucket)])
    best = np.maximum.reduceat(pair_dur, gs)
    cand = np.where(pair_dur == np.repeat(best, sizes), pair_code, _BIG)
    top[pair_bucket[gs] - b0] = np.minimum.reduceat(cand, gs)
    return top


def reduce_pairs(bucket: np.ndarray, code: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum ``dur`` per (bucket, code), sorted by (bucket, code); inputs nearly sorted, so the sort is nearly linear."""
    if len(bucket) == 0:
        return bucket, code, dur
    order = None
    span = int(code.max()) + 1
    lo = int(bucket.min())
    cells = (int(bucket.max()) - lo + 1) * span
    if cells <= max(4 * len(bucket), 1 << 16) and int(dur.sum()) < (1 << 53):
        # Few (bucket, code) cells: count and sum into a dense grid (exact: float64 holds these integer sums).
        key = (bucket - lo) * span + code
        present = np.flatnonzero(np.bincount(key, minlength=cells))
        sums = np.bincount(key, weights=dur, minlength=cells)[present]
        return present // span + lo, present % span, sums.astype(np.int64)
    if span * (int(bucket.max()) - lo + 1) < (1 << 62):
        key = (bucket - lo) * span + code
        if np.any(key[1:] < key[:-1]):
            order = np.argsort(key, kind="stable")
            key = key[order]
    else:   # huge (bucket, code) ranges: sort on the two keys
        key = None
        if np.any((bucket[1:] < bucket[:-1]) | ((bucket[1:] == bucket[:-1]) & (code[1:] < code[:-1]))):
            order = np.lexsort((code, bucket))
    if order is not None:
        bucket, code, dur = bucket[order], code[order], dur[order]
    if key is None:
        gs = np.flatnonzero(np.r_[True, (bucket[1:] != bucket[:-1]) | (code[1:] != code[:-1])])
    else:
        gs = group_starts(key)
    return bucket[gs], code[gs], np.add.reduceat(dur, gs)


def coarsen(rows: Rows) -> Rows:
    """The next level from an even-aligned, even-length run of buckets (pairs of children)."""
    assert rows.b0 % 2 == 0 and len(rows) % 2 == 0

    def pairs(a: np.ndarray) -> np.ndarray:
        return a.reshape(-1, 2)

    ld, li = pairs(rows.ldur), pairs(rows.lid)
    right_wins = (ld[:, 1] > ld[:, 0]) | ((ld[:, 1] == ld[:, 0]) & (li[:, 1] < li[:, 0]))
    # The parent's covering event (events started before it) is its left child's.
    pb, pc, pd = reduce_pairs(rows.pb >> 1, rows.pc, rows.pd)
    return Rows(rows.k + 1, rows.b0 >> 1, pairs(rows.busy).sum(axis=1), pairs(rows.count).sum(axis=1),
                np.where(right_wins, ld[:, 1], ld[:, 0]), np.where(right_wins, li[:, 1], li[:, 0]),
                rows.cid[0::2].copy(), rows.ccode[0::2].copy(), rows.cok[0::2].copy(),
                None if rows.value is None else pairs(rows.value).sum(axis=1), pb, pc, pd)


def rows_table(rows: Rows, names: pa.Array, track_id: int | None = None, *, dictionary: bool = False) -> pa.Table:
    """Rows as :data:`profiler.db_schema.LOD` rows (or, without track_id, the bucket columns only).

    ``dictionary``: top names as a dictionary array over ``names`` (no strings materialised) instead of strings.
    """
    nb = len(rows)
    rep, has_rep, top = rows.representative()
    columns: dict[str, pa.Array] = {
        dbs.LEVEL: pa.array(np.full(nb, rows.k, np.int32)),
        dbs.BUCKET: pa.array(np.arange(rows.b0, rows.b1, dtype=np.int64)),
        dbs.BUSY_NS: pa.array(rows.busy.astype(np.int64)),
        dbs.COUNT: pa.array(rows.count.astype(np.int64)),
        dbs.LONGEST_ID: pa.array(rep, pa.int64(), mask=~has_rep),
        dbs.TOP_NAME: names_of(top, names, dictionary=dictionary),
    }
    if track_id is None:
        if rows.value is not None:
            columns[dbs.VALUE_SUM] = pa.array(rows.value, pa.float64())
        return pa.table(columns)
    columns[dbs.VALUE_SUM] = pa.array(rows.value, pa.float64()) if rows.value is not None \
        else pa.nulls(nb, pa.float64())
    return pa.table({dbs.TRACK_ID: pa.array(np.full(nb, track_id, np.int64)), **columns},
                    schema=LOD_STREAM if dictionary else dbs.LOD)


def rows_table_many(items: list[tuple[int, Rows]], names: pa.Array) -> pa.Table:
    """Many tracks' and levels' rows as one :data:`LOD_STREAM` table (in the order given), converted at once."""
    lengths = np.array([len(r) for _, r in items], np.int64)
    total = int(lengths.sum())
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(r, name) for _, r in items])

    count = cat("count")
    busy = cat("busy")
    cok = cat("cok")
    started = count > 0
    covered = (~started) & (busy > 0) & cok
    rep = np.where(started, cat("lid"), cat("cid"))
    # The pairs of every item re-based onto one global row index, so one pass finds every row's top name.
    pb = np.concatenate([r.pb - r.b0 + off for (_, r), off in zip(items, offsets.tolist(), strict=True)])
    top = top_from_pairs(pb, cat("pc"), cat("pd"), 0, total)
    top = np.where(started, top, np.where(covered, cat("ccode"), NONE))
    valued = [r.value is not None for _, r in items]
    if any(valued):
        value = np.concatenate([r.value if r.value is not None else np.zeros(len(r)) for _, r in items])
        value_arr = pa.array(value, pa.float64(), mask=~np.repeat(np.array(valued), lengths))
    else:
        value_arr = pa.nulls(total, pa.float64())
    b0 = np.array([r.b0 for _, r in items], np.int64)
    return pa.table({
        dbs.TRACK_ID: pa.array(np.repeat(np.array([t for t, _ in items], np.int64), lengths)),
        dbs.LEVEL: pa.array(np.repeat(np.array([r.k for _, r in items], np.int32), lengths)),
        dbs.BUCKET: pa.array(np.repeat(b0 - offsets, lengths) + np.arange(total, dtype=np.int64)),
        dbs.BUSY_NS: pa.array(busy.astype(np.int64)),
        dbs.COUNT: pa.array(count.astype(np.int64)),
        dbs.LONGEST_ID: pa.array(rep, pa.int64(), mask=~(started | covered)),
        dbs.TOP_NAME: names_of(top, names, dictionary=True),
        dbs.VALUE_SUM: value_arr,
    }, schema=LOD_STREAM)


def names_of(code: np.ndarray, names: pa.Array, *, dictionary: bool = False) -> pa.Array:
    """Names of codes (null for -1): a plain string array, or a dictionary array over ``names``."""
    valid = code >= 0
    if len(names) == 0:
        names = pa.array([""], pa.string())
        valid = np.zeros(len(code), bool)
    idx = pa.array(np.maximum(code, 0).astype(np.int32), pa.int32(), mask=~valid)
    out = pa.DictionaryArray.from_arrays(idx, names)
    return out if dictionary else out.cast(pa.string())


__all__ = ["LOD_STREAM", "Rows", "coarsen", "concat_rows", "idle_rows", "names_of", "reduce_pairs", "rows_table",
           "rows_table_many", "split_rows", "top_from_pairs"]
