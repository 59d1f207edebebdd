"""The level-of-detail (LOD) interval index of one track, as pure numpy: what a bucket holds, and the per-range
bucket computation shared by the ingest's streaming build (:mod:`profiler.db.lod_build`) and by on-the-fly
bucketing of raw events (:func:`bucketize`, used by the window planner for windows finer than the stored levels).

A track's intervals are summarised per power-of-two *level* ``k``: bucket ``b`` of level ``k`` covers
``[b << k, (b + 1) << k)``.  Levels are stored densely (one row per bucket from the track's first to its last
bucket) from a per-track finest level ``k_min`` — the finest level whose bucket count is at most half the track's
event count — up to :data:`MAX_LEVEL`, so the index holds at most about one row per event in all, and a window at
resolution ``2**k`` reads exactly its ``O(width)`` buckets.

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
``value_sum``
    For tracks with a per-event value (DMA ``transfer_bytes``, Tensor ``adjusted_flops``): the integral over the
    bucket of each event's value spread uniformly over its duration, ``sum(v * |[s, e) & bucket| / (e - s))``;
    a zero-length event puts its whole value in its start bucket.  float64: single-bucket events add their value
    exactly; crossing events are split at the bucket edges, with the full buckets inside an event filled from a
    running sum of per-bucket rates that is reset to exactly zero wherever no crossing event is active.  The
    error is a few ulps of the values involved (tested against exact rationals at a relative 1e-9).

Zero-length events count and can be longest but add no busy time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from profiler.db import bucket_kernel
from profiler.db.lod_rows import NONE, Rows, group_starts, reduce_pairs, rows_table

#: Coarsest level stored; buckets of level 61 span 2**61 ns (73 years).
MAX_LEVEL = 61
#: Timestamps must lie in [-TIME_LIMIT, TIME_LIMIT) so that bucket edges never overflow int64.
TIME_LIMIT = 1 << 62
#: The finest stored level has at most ``event_count // EVENTS_PER_FINEST_BUCKET`` buckets.
EVENTS_PER_FINEST_BUCKET = 2

_BIG = np.iinfo(np.int64).max
_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class TrackEvents:
    """One track's intervals sorted by (start, id), names as codes into a sorted dictionary, optional values."""

    start: np.ndarray         # int64
    end: np.ndarray           # int64, >= start
    ids: np.ndarray           # int64
    codes: np.ndarray         # int64 index into names, -1 for a null name; names are sorted, so codes order like names
    names: pa.Array           # string
    values: np.ndarray | None = None   # float64 per-event value (spread over the event's duration)

    @property
    def n(self) -> int:
        """Number of events."""
        return len(self.start)

    def span(self) -> tuple[int, int]:
        """[first start, end) covering every event, zero-length events at the last instant included."""
        return int(self.start[0]), max(int(self.end.max()), int(self.start[-1]) + 1)

    @property
    def run_max_end(self) -> np.ndarray:
        """max(end[:i + 1]) for every i."""
        return np.maximum.accumulate(self.end) if self.n else _EMPTY


def name_codes(names: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Per-row codes into the sorted distinct names (-1 for null), and those names."""
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks() if names.num_chunks else pa.array([], pa.string())
    if pa.types.is_dictionary(names.type):
        names = names.cast(pa.string())
    n = len(names)
    if n == 0:
        return np.zeros(0, np.int64), pa.array([], pa.string())
    enc = names.dictionary_encode()
    dictionary = enc.dictionary
    rank = np.argsort(np.asarray(dictionary.to_numpy(zero_copy_only=False), dtype=object), kind="stable") \
        if len(dictionary) else np.zeros(0, np.int64)
    remap = np.empty(len(dictionary), dtype=np.int64)
    remap[rank] = np.arange(len(dictionary))
    idx = enc.indices
    raw = np.asarray(idx.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = remap[raw] if len(remap) else np.zeros(n, np.int64)
    if idx.null_count:
        codes = np.where(np.asarray(idx.is_null().to_numpy(zero_copy_only=False)), NONE, codes)
    sorted_names = dictionary.take(pa.array(rank)) if len(dictionary) else pa.array([], pa.string())
    return codes, sorted_names.cast(pa.string())


def prepare(start: np.ndarray, end: np.ndarray, ids: np.ndarray, names: pa.Array | pa.ChunkedArray,
            values: np.ndarray | None = None) -> TrackEvents:
    """One track's events sorted by (start, id), names coded, ends clamped to starts (all vectorised)."""
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    ids = np.asarray(ids, dtype=np.int64)
    vals = None if values is None else np.asarray(values, dtype=np.float64)
    codes, sorted_names = name_codes(names)
    if len(start) > 1 and not sorted_by_start_id(start, ids):
        order = np.lexsort((ids, start))
        start, end, ids, codes = start[order], end[order], ids[order], codes[order]
        vals = None if vals is None else vals[order]
    return TrackEvents(start, end, ids, codes, sorted_names, vals)


def sorted_by_start_id(start: np.ndarray, ids: np.ndarray) -> bool:
    """True when the events are in (start, id) order."""
    ds = np.diff(start)
    if np.any(ds < 0):
        return False
    return not np.any((ds == 0) & (np.diff(ids) < 0))


def finest_level(first_start: int, end: int, n: int) -> int:
    """The finest level whose bucket count over [first_start, end) is at most n / EVENTS_PER_FINEST_BUCKET."""
    budget = max(1, n // EVENTS_PER_FINEST_BUCKET)
    hi = max(end, first_start + 1) - 1
    k = 0
    while k < MAX_LEVEL and (hi >> k) - (first_start >> k) + 1 > budget:
        k += 1
    return k


def resolution_level(start_ns: int, end_ns: int, width_px: int) -> int:
    """Perfetto's choice: log2 of ns-per-pixel rounded down to a power of two (at least 1 ns), at most MAX_LEVEL."""
    ns_per_px = max(1, (end_ns - start_ns) // max(1, width_px))
    return min(ns_per_px.bit_length() - 1, MAX_LEVEL)


# ----------------------------------------------------------------------------------------------------------------
# The finest level from events


@dataclass
class Prefix:
    """What the events before a range leave for it: the open piece of their union and their covering event."""

    piece_start: int
    piece_end: int
    cover_id: int
    cover_code: int


class EventContext:
    """Union pieces and running maxima of a run of events sorted by (start, id), after an optional prefix."""

    def __init__(self, s: np.ndarray, e: np.ndarray, ids: np.ndarray, codes: np.ndarray, *, k: int,
                 prefix: Prefix | None) -> None:
        self.s, self.e, self.ids, self.codes, self.k = s, e, ids, codes, k
        self.sb = s >> k
        self.has_prefix = prefix is not None
        if prefix is not None:
            s0 = np.r_[np.int64(prefix.piece_start), s]
            e0 = np.r_[np.int64(prefix.piece_end), e]
            self.id0 = np.r_[np.int64(prefix.cover_id), ids]
            self.code0 = np.r_[np.int64(prefix.cover_code), codes]
        else:
            s0, e0, self.id0, self.code0 = s, e, ids, codes
        n0 = len(s0)
        self.run_max_end = np.maximum.accumulate(e0) if n0 else _EMPTY
        rises = np.ones(n0, dtype=bool)
        if n0 > 1:
            rises[1:] = e0[1:] > self.run_max_end[:-1]
        self.run_max_idx = np.maximum.accumulate(np.where(rises, np.arange(n0), 0)) if n0 else _EMPTY
        # Union: a new piece starts where an interval starts after everything before it has ended.
        new_piece = np.ones(n0, dtype=bool)
        if n0 > 1:
            new_piece[1:] = s0[1:] > self.run_max_end[:-1]
        first = np.flatnonzero(new_piece)
        self.union_start = s0[first]
        last = np.r_[first[1:] - 1, n0 - 1] if n0 else _EMPTY
        self.union_end = self.run_max_end[last] if n0 else _EMPTY
        lengths = self.union_end - self.union_start
        self.union_before = np.r_[0, np.cumsum(lengths)[:-1]].astype(np.int64) if n0 else _EMPTY
        self.overlapping = bool(n0 > 1 and np.any(s0[1:] < self.run_max_end[:-1]))

    def union_to(self, t: np.ndarray) -> np.ndarray:
        """Union length of the prefix piece and the events within (-inf, t), for each t."""
        if len(self.union_start) == 0:
            return np.zeros(len(t), dtype=np.int64)
        j = np.searchsorted(self.union_start, t, side="right") - 1
        jc = np.maximum(j, 0)
        part = np.clip(np.minimum(t, self.union_end[jc]) - self.union_start[jc], 0, None)
        return np.where(j >= 0, self.union_before[jc] + part, 0).astype(np.int64)

    def prefix_after(self) -> Prefix | None:
        """The prefix these events (with the old prefix) leave for later ranges."""
        if len(self.run_max_end) == 0:
            return None
        i = int(self.run_max_idx[-1])
        return Prefix(int(self.union_start[-1]), int(self.union_end[-1]), int(self.id0[i]), int(self.code0[i]))

    def closed_busy_in(self, lo: int, hi: int) -> int:
        """Union length of the closed pieces (all but the last) within [lo, hi)."""
        first = int(np.searchsorted(self.union_end[:-1], lo, side="right"))   # pieces are disjoint and sorted
        us, ue = self.union_start[first:-1], self.union_end[first:-1]
        if len(us) == 0:
            return 0
        return int(np.clip(np.minimum(ue, hi) - np.maximum(us, lo), 0, None).sum())

    def rows(self, b0: int, b1: int, i0: int, i1: int, *, values: np.ndarray | None,
             first_busy: int = 0) -> Rows:
        """Rows of buckets [b0, b1) whose starters are events [i0, i1); ``first_busy`` adds to bucket b0's busy."""
        k = self.k
        nb = b1 - b0
        rel = self.sb[i0:i1] - b0
        count = np.bincount(rel, minlength=nb).astype(np.int64) if nb else _EMPTY
        edges = np.arange(b0, b1 + 1, dtype=np.int64) << k
        busy = np.diff(self.union_to(edges))
        if nb:
            busy[0] += first_busy
        ldur = np.full(nb, NONE, dtype=np.int64)
        lid = np.zeros(nb, dtype=np.int64)
        if i1 > i0:
            dur = self.e[i0:i1] - self.s[i0:i1]
            ids = self.ids[i0:i1]
            gs = group_starts(rel)
            sizes = np.diff(np.r_[gs, len(rel)])
            best = np.maximum.reduceat(dur, gs)
            cand = np.where(dur == np.repeat(best, sizes), ids, _BIG)
            lid[rel[gs]] = np.minimum.reduceat(cand, gs)
            ldur[rel[gs]] = best
            named = self.codes[i0:i1] >= 0
            pb, pc, pd = reduce_pairs((rel + b0)[named], self.codes[i0:i1][named], dur[named])
        else:
            pb = pc = pd = _EMPTY
        # Covering event of bucket b: the running maximum over every event (and the prefix) started before it.
        before = np.searchsorted(self.s, edges[:-1], side="left") + (1 if self.has_prefix else 0) - 1
        cok = before >= 0
        ci = self.run_max_idx[np.maximum(before, 0)] if len(self.run_max_idx) else np.zeros(nb, np.int64)
        cid = np.where(cok, self.id0[ci], 0) if len(self.id0) else np.zeros(nb, np.int64)
        ccode = np.where(cok, self.code0[ci], NONE) if len(self.code0) else np.full(nb, NONE, np.int64)
        return Rows(k, b0, busy, count, ldur, lid, cid, ccode, cok, values, pb, pc, pd)


class ValueSpread:
    """Per-bucket integrals of event values spread uniformly over the events' durations, bucket range by range.

    Events are added in any order; :meth:`take` returns the dense sums of buckets [b0, b1) and forgets them, so
    ranges must be taken in increasing order.  Full buckets inside a crossing event are filled from a running sum
    of rate deltas, reset to exactly zero wherever no crossing event is active (no drift across idle time).
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.add_pos: list[np.ndarray] = []
        self.add_amt: list[np.ndarray] = []
        self.d_pos: list[np.ndarray] = []
        self.d_amt: list[np.ndarray] = []
        self.d_cnt: list[np.ndarray] = []
        self.run = 0.0
        self.run_count = 0

    def add(self, s: np.ndarray, e: np.ndarray, v: np.ndarray) -> None:
        """Spread values ``v`` of events [s, e) (e >= s)."""
        k = self.k
        bs = s >> k
        be = np.maximum(e - 1, s) >> k          # last bucket touched (a zero-length event: its start bucket)
        cross = be > bs
        if not cross.any():
            self.add_pos.append(bs)
            self.add_amt.append(v)
            return
        # Every event adds to its first bucket: its whole value, or for a crossing event the share before the edge.
        rate = v / np.maximum(e - s, 1).astype(np.float64)
        first = np.where(cross, rate * (((bs + 1) << k) - s).astype(np.float64), v)
        cbe, ce, cr = be[cross], e[cross], rate[cross]
        self.add_pos.extend([bs, cbe])
        self.add_amt.extend([first, cr * (ce - (cbe << k)).astype(np.float64)])
        cbs = bs[cross]
        inner = cbe - cbs > 1
        if inner.any():
            per_bucket = cr[inner] * float(1 << k)
            self.d_pos.extend([cbs[inner] + 1, cbe[inner]])
            self.d_amt.extend([per_bucket, -per_bucket])
            ones = np.ones(int(inner.sum()), np.int64)
            self.d_cnt.extend([ones, -ones])

    @staticmethod
    def _split(pos: list[np.ndarray], vals: list[list[np.ndarray]], b1: int
               ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Concatenate, keep entries at or after b1 pending; return (positions, values...) before b1."""
        p = np.concatenate(pos) if pos else _EMPTY
        cat = [np.concatenate(v) if v else np.zeros(0) for v in vals]
        now = p < b1
        later = ~now
        pos.clear()
        pos.append(p[later])
        for v, c in zip(vals, cat, strict=True):
            v.clear()
            v.append(c[later])
        return p[now], [c[now] for c in cat]

    def take(self, b0: int, b1: int) -> np.ndarray:
        """Dense value sums of buckets [b0, b1); entries before b0 are dropped (their rates carried)."""
        nb = b1 - b0
        ap, (aa,) = self._split(self.add_pos, [self.add_amt], b1)
        dp, (da, dc) = self._split(self.d_pos, [self.d_amt, self.d_cnt], b1)
        early = dp < b0
        if early.any():
            self.run += float(da[early].sum())
            self.run_count += int(dc[early].sum())
            if self.run_count == 0:
                self.run = 0.0
            dp, da, dc = dp[~early], da[~early], dc[~early]
        keep = ap >= b0
        out = np.bincount(ap[keep] - b0, weights=aa[keep], minlength=nb) if nb else np.zeros(0)
        if len(dp) or self.run_count:
            rate = self.run + np.cumsum(np.bincount(dp - b0, weights=da, minlength=nb))
            active = self.run_count + np.cumsum(np.bincount(dp - b0, weights=dc, minlength=nb)).astype(np.int64)
            idle = active == 0
            if idle.any():
                last_idle = np.maximum.accumulate(np.where(idle, np.arange(nb), -1))
                rate = rate - np.where(last_idle >= 0, rate[np.maximum(last_idle, 0)], 0.0)
            out = out + rate
            if nb:
                self.run, self.run_count = float(rate[-1]), int(active[-1])
        return out.astype(np.float64)


def bucket_rows(ev: TrackEvents, k: int, b0: int, b1: int) -> Rows:
    """Rows of level ``k`` over buckets [b0, b1), computed from the events.

    ``ev`` must hold every event overlapping ``[b0 << k, b1 << k)`` and every event starting in it (events
    starting before the range count for busy time, value sums and covering events).
    """
    ctx = EventContext(ev.start, ev.end, ev.ids, ev.codes, k=k, prefix=None)
    i0 = int(np.searchsorted(ctx.sb, b0, side="left"))
    i1 = int(np.searchsorted(ctx.sb, b1, side="left"))
    values = None
    if ev.values is not None:
        spread = ValueSpread(k)
        spread.add(ev.start[:i1], ev.end[:i1], ev.values[:i1])
        values = spread.take(b0, b1)
    return ctx.rows(b0, b1, i0, i1, values=values)


def track_levels(ev: TrackEvents, track_id: int, k_min: int) -> Iterator[pa.Table]:
    """Every stored level of one track, finest first (see :func:`profiler.db.lod_build.track_levels`)."""
    from profiler.db.lod_build import track_levels as build  # lod_build imports this module

    return build(ev, track_id, k_min)


def bucketize(ev: TrackEvents, k: int, b0: int, b1: int) -> pa.Table:
    """Buckets [b0, b1) of level ``k`` computed from raw events (for windows finer than the stored levels).

    Columns: level, bucket, busy_ns, count, longest_id, top_name, and value_sum when ``ev`` has values.
    Events without values are bucketed by the compiled kernel (:mod:`profiler.db.bucket_kernel`) when there are
    enough of them, with the same result.
    """
    if ev.values is None and bucket_kernel.available(ev.n):
        return bucket_kernel.bucketize(ev, k, b0, b1)
    return rows_table(bucket_rows(ev, k, b0, b1), ev.names)


__all__ = [
    "EVENTS_PER_FINEST_BUCKET",
    "MAX_LEVEL",
    "NONE",
    "TIME_LIMIT",
    "EventContext",
    "Prefix",
    "TrackEvents",
    "ValueSpread",
    "bucket_rows",
    "bucketize",
    "finest_level",
    "prepare",
    "resolution_level",
    "track_levels",
]
