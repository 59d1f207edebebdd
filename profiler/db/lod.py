"""The level-of-detail (LOD) interval index of one track, as pure numpy: building it and bucketing raw events.

A track's intervals are summarised per power-of-two *level* ``k``: bucket ``b`` of level ``k`` covers
``[b << k, (b + 1) << k)``.  Levels are stored densely (one row per bucket from the track's first to its last
bucket) from a per-track finest level ``k_min`` — the finest level whose bucket count is at most half the track's
event count — up to :data:`MAX_LEVEL`, so the index holds at most about one row per event in all, and a window at
resolution ``2**k`` reads exactly its ``O(width)`` buckets.  Windows finer than ``k_min`` hold about two events per
pixel or fewer and are answered from raw events, with :func:`bucketize` where they still hold too many.

What a bucket holds (the same definitions for stored levels and for :func:`bucketize`):

``busy_ns``
    Length of the union of the track's intervals clipped to the bucket (overlaps counted once).  Exact.
``count``
    Number of events whose ``start_ts`` lies in the bucket (so the counts of a window's buckets add up to the
    events starting in it; an event crossing into a bucket is not counted again).
``longest_id``
    Among the events starting in the bucket, the id of the longest (ties: the smallest id).  When none starts in
    it but the bucket is busy, the covering event: of the events started before the bucket, the one that ends
    last (ties: the first in (start_ts, id) order).  Null for an idle bucket.
``top_name``
    Among the events starting in the bucket, the name with the largest total duration (ties: the smallest
    name); when none starts in it but it is busy, the covering event's name.  Null for an idle bucket.

Zero-length events count and can be longest but add no busy time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs

#: Coarsest level stored; buckets of level 61 span 2**61 ns (73 years).
MAX_LEVEL = 61
#: Timestamps must lie in [-TIME_LIMIT, TIME_LIMIT) so that bucket edges never overflow int64.
TIME_LIMIT = 1 << 62
#: The finest stored level has at most ``event_count // EVENTS_PER_FINEST_BUCKET`` buckets.
EVENTS_PER_FINEST_BUCKET = 2

_NONE = -1
_BIG = np.iinfo(np.int64).max


@dataclass(frozen=True)
class TrackEvents:
    """One track's intervals sorted by (start, id), with the derived arrays every bucketing needs."""

    start: np.ndarray         # int64
    end: np.ndarray           # int64, >= start
    ids: np.ndarray           # int64
    codes: np.ndarray         # int64 index into names, -1 for a null name; names are sorted, so codes order like names
    names: pa.Array           # string
    run_max_end: np.ndarray   # max(end[:i + 1])
    run_max_idx: np.ndarray   # first index achieving run_max_end
    union_start: np.ndarray   # disjoint union of the intervals, sorted
    union_end: np.ndarray
    union_before: np.ndarray  # total union length before union interval i

    @property
    def n(self) -> int:
        """Number of events."""
        return len(self.start)

    def span(self) -> tuple[int, int]:
        """[first start, end) covering every event, zero-length events at the last instant included."""
        return int(self.start[0]), max(int(self.run_max_end[-1]), int(self.start[-1]) + 1)

    def cumulative_busy(self, t: np.ndarray) -> np.ndarray:
        """Union length of the intervals within (-inf, t), for each t."""
        j = np.searchsorted(self.union_start, t, side="right") - 1
        jc = np.maximum(j, 0)
        if len(self.union_start) == 0:
            return np.zeros(len(t), dtype=np.int64)
        part = np.clip(np.minimum(t, self.union_end[jc]) - self.union_start[jc], 0, None)
        return np.where(j >= 0, self.union_before[jc] + part, 0).astype(np.int64)


def prepare(start: np.ndarray, end: np.ndarray, ids: np.ndarray, names: pa.Array | pa.ChunkedArray) -> TrackEvents:
    """Sort one track's events and derive running maxima and the union of the intervals (all vectorised)."""
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    ids = np.asarray(ids, dtype=np.int64)
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks() if names.num_chunks else pa.array([], pa.string())
    if pa.types.is_dictionary(names.type):
        names = names.cast(pa.string())
    n = len(start)
    if n > 1 and not _sorted_by_start_id(start, ids):
        order = np.lexsort((ids, start))
        start, end, ids = start[order], end[order], ids[order]
        names = names.take(pa.array(order))
    enc = names.dictionary_encode() if n else pa.DictionaryArray.from_arrays(pa.array([], pa.int32()),
                                                                            pa.array([], pa.string()))
    dictionary = enc.dictionary
    rank = np.argsort(np.asarray(dictionary.to_numpy(zero_copy_only=False), dtype=object), kind="stable") \
        if len(dictionary) else np.zeros(0, np.int64)
    remap = np.empty(len(dictionary), dtype=np.int64)
    remap[rank] = np.arange(len(dictionary))
    idx = enc.indices
    raw = np.asarray(idx.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64) if n else np.zeros(0, np.int64)
    codes = remap[raw] if len(remap) else np.zeros(n, np.int64)
    if idx.null_count:
        codes = np.where(np.asarray(idx.is_null().to_numpy(zero_copy_only=False)), _NONE, codes)
    sorted_names = dictionary.take(pa.array(rank)) if len(dictionary) else pa.array([], pa.string())

    run_max_end = np.maximum.accumulate(end) if n else np.zeros(0, np.int64)
    rises = np.ones(n, dtype=bool)
    if n > 1:
        rises[1:] = end[1:] > run_max_end[:-1]
    run_max_idx = np.maximum.accumulate(np.where(rises, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    # Union: a new piece starts where an interval starts after everything before it has ended.
    new_piece = np.ones(n, dtype=bool)
    if n > 1:
        new_piece[1:] = start[1:] > run_max_end[:-1]
    piece_first = np.flatnonzero(new_piece)
    union_start = start[piece_first]
    piece_last = np.r_[piece_first[1:] - 1, n - 1] if n else np.zeros(0, np.int64)
    union_end = run_max_end[piece_last] if n else np.zeros(0, np.int64)
    lengths = union_end - union_start
    union_before = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64) if n else np.zeros(0, np.int64)
    return TrackEvents(start, end, ids, codes, sorted_names, run_max_end, run_max_idx,
                       union_start, union_end, union_before)


def _sorted_by_start_id(start: np.ndarray, ids: np.ndarray) -> bool:
    ds = np.diff(start)
    if np.any(ds < 0):
        return False
    ties = ds == 0
    return not np.any(ties & (np.diff(ids) < 0))


def finest_level(first_start: int, end: int, n: int) -> int:
    """The finest level whose bucket count over [first_start, end) is at most n / EVENTS_PER_FINEST_BUCKET."""
    budget = max(1, n // EVENTS_PER_FINEST_BUCKET)
    hi = max(end, first_start + 1) - 1
    k = 0
    while k < MAX_LEVEL and (hi >> k) - (first_start >> k) + 1 > budget:
        k += 1
    return k


@dataclass
class Level:
    """Dense bucket arrays of one level over buckets [b0, b0 + len)."""

    k: int
    b0: int
    busy: np.ndarray        # int64
    count: np.ndarray       # int64
    longest: np.ndarray     # event index of the longest starter, -1 when none starts in the bucket
    longest_dur: np.ndarray  # its duration, -1 when none
    cover: np.ndarray       # event index of the covering event (meaningful where count == 0 and busy > 0)
    top: np.ndarray         # name code of the dominant starter name, -1 when none
    pair_bucket: np.ndarray  # (bucket, name) -> total starter duration, sorted by (bucket, code)
    pair_code: np.ndarray
    pair_dur: np.ndarray

    @property
    def b1(self) -> int:
        """One past the last bucket."""
        return self.b0 + len(self.busy)


def _group_starts(keys: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def _top_from_pairs(pair_bucket: np.ndarray, pair_code: np.ndarray, pair_dur: np.ndarray,
                    b0: int, nb: int) -> np.ndarray:
    top = np.full(nb, _NONE, dtype=np.int64)
    if len(pair_bucket) == 0:
        return top
    gs = _group_starts(pair_bucket)
    sizes = np.diff(np.r_[gs, len(pair_bucket)])
    best = np.maximum.reduceat(pair_dur, gs)
    cand = np.where(pair_dur == np.repeat(best, sizes), pair_code, _BIG)
    top[pair_bucket[gs] - b0] = np.minimum.reduceat(cand, gs)
    return top


def _reduce_pairs(bucket: np.ndarray, code: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum ``dur`` per (bucket, code); the inputs are sorted by bucket, so the stable sort is nearly linear."""
    if len(bucket) == 0:
        return bucket, code, dur
    span = int(code.max()) + 1
    key = (bucket - bucket[0]) * span + code
    if np.any(key[1:] < key[:-1]):
        order = np.argsort(key, kind="stable")
        key, bucket, code, dur = key[order], bucket[order], code[order], dur[order]
    gs = _group_starts(key)
    return bucket[gs], code[gs], np.add.reduceat(dur, gs)


def level_from_events(ev: TrackEvents, k: int, b0: int, b1: int) -> Level:
    """Bucket arrays of level ``k`` over buckets [b0, b1), computed from the events.

    ``ev`` must hold every event overlapping ``[b0 << k, b1 << k)`` and every event starting in it.
    """
    nb = b1 - b0
    sb = ev.start >> k
    i0 = int(np.searchsorted(sb, b0, side="left"))
    i1 = int(np.searchsorted(sb, b1, side="left"))
    rel = sb[i0:i1] - b0
    count = np.bincount(rel, minlength=nb).astype(np.int64) if nb else np.zeros(0, np.int64)
    edges = np.arange(b0, b1 + 1, dtype=np.int64) << k
    busy = np.diff(ev.cumulative_busy(edges))
    longest = np.full(nb, _NONE, dtype=np.int64)
    longest_dur = np.full(nb, _NONE, dtype=np.int64)
    if i1 > i0:
        dur = ev.end[i0:i1] - ev.start[i0:i1]
        gs = _group_starts(rel)
        sizes = np.diff(np.r_[gs, len(rel)])
        best = np.maximum.reduceat(dur, gs)
        cand = np.where(dur == np.repeat(best, sizes), ev.ids[i0:i1], _BIG)
        min_id = np.minimum.reduceat(cand, gs)
        # The event index of (bucket, min id among the longest): first row of the group holding that id.
        hit = (dur == np.repeat(best, sizes)) & (ev.ids[i0:i1] == np.repeat(min_id, sizes))
        first_hit = np.minimum.reduceat(np.where(hit, np.arange(i1 - i0), _BIG), gs)
        longest[rel[gs]] = first_hit + i0
        longest_dur[rel[gs]] = best
        named = ev.codes[i0:i1] >= 0
        pb, pc, pd = _reduce_pairs((rel + b0)[named], ev.codes[i0:i1][named], dur[named])
    else:
        pb = pc = pd = np.zeros(0, dtype=np.int64)
    before = i0 + np.cumsum(count) - count          # events starting before each bucket
    cover = np.where(before > 0, ev.run_max_idx[np.maximum(before - 1, 0)] if ev.n else 0, _NONE)
    top = _top_from_pairs(pb, pc, pd, b0, nb)
    return Level(k, b0, busy, count, longest, longest_dur, cover, top, pb, pc, pd)


def coarser(level: Level, ev: TrackEvents) -> Level:
    """The next level (buckets twice as wide), combined from ``level``'s buckets."""
    pad_left = level.b0 & 1
    n = len(level.busy) + pad_left
    pad_right = n & 1

    def padded(a: np.ndarray, fill: int) -> np.ndarray:
        parts = [np.full(pad_left, fill, a.dtype), a, np.full(pad_right, fill, a.dtype)]
        return np.concatenate(parts).reshape(-1, 2)

    busy = padded(level.busy, 0).sum(axis=1)
    count = padded(level.count, 0).sum(axis=1)
    ld = padded(level.longest_dur, _NONE)
    li = padded(level.longest, _NONE)
    lid = np.where(li >= 0, ev.ids[np.maximum(li, 0)] if ev.n else 0, _BIG)
    right_wins = (ld[:, 1] > ld[:, 0]) | ((ld[:, 1] == ld[:, 0]) & (lid[:, 1] < lid[:, 0]))
    longest = np.where(right_wins, li[:, 1], li[:, 0])
    longest_dur = np.where(right_wins, ld[:, 1], ld[:, 0])
    cov = padded(level.cover, _NONE)
    # An empty parent's covering event is its left child's; a padded left child precedes every event.
    cover = cov[:, 0].copy()
    if pad_left:
        cover[0] = cov[0, 1]
    b0 = level.b0 >> 1
    pb, pc, pd = _reduce_pairs(level.pair_bucket >> 1, level.pair_code, level.pair_dur)
    top = _top_from_pairs(pb, pc, pd, b0, len(busy))
    return Level(level.k + 1, b0, busy, count, longest, longest_dur, cover, top, pb, pc, pd)


def level_table(level: Level, ev: TrackEvents, track_id: int | None = None) -> pa.Table:
    """The level's buckets as rows of :data:`profiler.db_schema.LOD` (or, without track_id, bucket columns)."""
    nb = len(level.busy)
    started = level.count > 0
    covered = (~started) & (level.busy > 0) & (level.cover >= 0)
    rep = np.where(started, level.longest, np.where(covered, level.cover, _NONE))
    has_rep = rep >= 0
    ids = ev.ids[np.maximum(rep, 0)] if ev.n else np.zeros(nb, np.int64)
    longest_id = pa.array(ids, pa.int64(), mask=~has_rep)
    code = np.where(started, level.top, np.where(covered, ev.codes[np.maximum(level.cover, 0)] if ev.n else _NONE,
                                                 _NONE))
    top_name = _names_of(code, ev.names)
    columns = {
        dbs.LEVEL: pa.array(np.full(nb, level.k, np.int32)),
        dbs.BUCKET: pa.array(np.arange(level.b0, level.b1, dtype=np.int64)),
        dbs.BUSY_NS: pa.array(level.busy.astype(np.int64)),
        dbs.COUNT: pa.array(level.count.astype(np.int64)),
        dbs.LONGEST_ID: longest_id,
        dbs.TOP_NAME: top_name,
    }
    if track_id is None:
        return pa.table(columns)
    return pa.table({dbs.TRACK_ID: pa.array(np.full(nb, track_id, np.int64)), **columns}, schema=dbs.LOD)


def _names_of(code: np.ndarray, names: pa.Array) -> pa.Array:
    if len(names) == 0:
        return pa.nulls(len(code), pa.string())
    valid = code >= 0
    idx = pa.array(np.maximum(code, 0).astype(np.int32), pa.int32(), mask=~valid)
    return pa.DictionaryArray.from_arrays(idx, names).cast(pa.string())


def track_levels(ev: TrackEvents, track_id: int, k_min: int) -> Iterator[pa.Table]:
    """Every stored level of one track, finest first, as :data:`profiler.db_schema.LOD` tables."""
    if ev.n == 0:
        return
    lo, hi = ev.span()
    level = level_from_events(ev, k_min, lo >> k_min, ((hi - 1) >> k_min) + 1)
    while True:
        table = level_table(level, ev, track_id)
        yield table
        if level.k >= MAX_LEVEL:
            return
        if len(level.busy) == 1 and level.b0 >> 1 == level.b0:
            # One bucket at index 0 or -1: every coarser level holds the same row.
            for k in range(level.k + 1, MAX_LEVEL + 1):
                yield table.set_column(1, dbs.LOD.field(dbs.LEVEL), pa.array([k], pa.int32()))
            return
        level = coarser(level, ev)


def bucketize(ev: TrackEvents, k: int, b0: int, b1: int) -> pa.Table:
    """Buckets [b0, b1) of level ``k`` computed from raw events (for windows finer than the stored levels)."""
    return level_table(level_from_events(ev, k, b0, b1), ev)


def resolution_level(start_ns: int, end_ns: int, width_px: int) -> int:
    """Perfetto's choice: log2 of ns-per-pixel rounded down to a power of two (at least 1 ns), at most MAX_LEVEL."""
    ns_per_px = max(1, (end_ns - start_ns) // max(1, width_px))
    return min(ns_per_px.bit_length() - 1, MAX_LEVEL)


__all__ = [
    "EVENTS_PER_FINEST_BUCKET",
    "MAX_LEVEL",
    "TIME_LIMIT",
    "TrackEvents",
    "bucketize",
    "finest_level",
    "prepare",
    "resolution_level",
    "track_levels",
]
