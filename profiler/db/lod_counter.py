"""Level-of-detail index of Counter tracks (``counter_lod``): per power-of-two bucket, a summary of the counter's
step function, built streaming like the interval index (:mod:`profiler.db.lod_build`).

A counter is a step function: each sample's value holds from its timestamp until the next sample of the same
counter; it is defined from the first sample to the last one (so the last sample's value holds for no time).
Samples with equal timestamps keep their arrival order (the last one is the value that holds).  Per bucket:

``count``       samples whose timestamp lies in the bucket;
``min_value``, ``max_value``
                over the samples in the bucket and the value carried into it (the last earlier sample);
``mean_value``  time-weighted mean of the step function over the part of the bucket between the first and the
                last sample (where that part is empty — a bucket holding only the last sample — the last value);
``last_value``  the step function's value at the end of the bucket (the last sample at or before it).

Levels are dense from the track's first to its last sample's bucket, from ``k_min`` (at most half as many buckets
as samples) to :data:`profiler.db.lod.MAX_LEVEL`, like the interval index.  Integrals are float64 sums of
``value * ns`` products computed per bucket (no running sums across buckets), coarser levels add them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db import lod, lod_rows
from profiler.db.lod_build import RANGE_BUCKETS, Coarsener

_INF = np.inf


@dataclass
class CounterRows:
    """Bucket arrays of one counter level over ``[b0, b0 + len)``."""

    k: int
    b0: int
    count: np.ndarray      # int64
    vmin: np.ndarray       # float64, +inf where the bucket has no value
    vmax: np.ndarray       # float64, -inf where none
    integral: np.ndarray   # float64 value * ns over the bucket (within [first, last sample])
    last: np.ndarray       # float64 value at the bucket's end (nan where none yet)

    def __len__(self) -> int:
        return len(self.count)

    @property
    def b1(self) -> int:
        """One past the last bucket."""
        return self.b0 + len(self.count)


def _idle(k: int, b0: int, n: int) -> CounterRows:
    return CounterRows(k, b0, np.zeros(n, np.int64), np.full(n, _INF), np.full(n, -_INF), np.zeros(n),
                       np.full(n, np.nan))


def _concat(a: CounterRows, b: CounterRows) -> CounterRows:
    return CounterRows(a.k, a.b0, *(np.concatenate([x, y]) for x, y in (
        (a.count, b.count), (a.vmin, b.vmin), (a.vmax, b.vmax), (a.integral, b.integral), (a.last, b.last))))


def _split(rows: CounterRows, n: int) -> tuple[CounterRows, CounterRows]:
    def part(sl: slice, b0: int) -> CounterRows:
        return CounterRows(rows.k, b0, rows.count[sl], rows.vmin[sl], rows.vmax[sl], rows.integral[sl],
                           rows.last[sl])
    return part(slice(0, n), rows.b0), part(slice(n, None), rows.b0 + n)


def _coarsen(rows: CounterRows) -> CounterRows:
    last = rows.last.reshape(-1, 2)
    return CounterRows(rows.k + 1, rows.b0 >> 1, rows.count.reshape(-1, 2).sum(axis=1),
                       rows.vmin.reshape(-1, 2).min(axis=1), rows.vmax.reshape(-1, 2).max(axis=1),
                       rows.integral.reshape(-1, 2).sum(axis=1),
                       np.where(np.isnan(last[:, 1]), last[:, 0], last[:, 1]))


@dataclass
class _Open:
    """The bucket holding the last sample fed (more samples may follow in it)."""

    bucket: int
    carried: float = np.nan     # value at the bucket's start (nan before the first sample)
    count: int = 0
    vmin: float = _INF
    vmax: float = -_INF
    steps: float = 0.0          # sum over its samples of (value - previous value) * (bucket end - timestamp)


def counter_rows(t: np.ndarray, v: np.ndarray, k: int, b0: int, b1: int, *, carried: float) -> CounterRows:
    """Rows of buckets [b0, b1) from samples ``t`` (sorted, all within them) and the value carried into b0."""
    nb = b1 - b0
    sb = t >> k
    rel = sb - b0
    width = float(1 << k)
    prev = np.r_[carried, v[:-1]] if len(v) else v
    with np.errstate(over="ignore", invalid="ignore"):  # values near ±1e308: the mean is made finite later
        steps = (v - np.nan_to_num(prev, nan=0.0)) * (((sb + 1) << k) - t).astype(np.float64)
    count = np.bincount(rel, minlength=nb).astype(np.int64)
    starts = np.arange(b0, b1, dtype=np.int64)
    before = np.searchsorted(sb, starts, side="left") - 1
    carried_in = np.where(before >= 0, v[np.maximum(before, 0)] if len(v) else carried, carried)
    at_end = np.searchsorted(sb, starts, side="right") - 1
    last = np.where(at_end >= 0, v[np.maximum(at_end, 0)] if len(v) else carried, carried)
    with np.errstate(over="ignore", invalid="ignore"):
        integral = np.nan_to_num(carried_in, nan=0.0) * width + np.bincount(rel, weights=steps, minlength=nb)
    vmin = np.where(np.isnan(carried_in), _INF, carried_in)
    vmax = np.where(np.isnan(carried_in), -_INF, carried_in)
    if len(t):
        gs = lod_rows.group_starts(rel)
        vmin[rel[gs]] = np.minimum(vmin[rel[gs]], np.minimum.reduceat(v, gs))
        vmax[rel[gs]] = np.maximum(vmax[rel[gs]], np.maximum.reduceat(v, gs))
    return CounterRows(k, b0, count, vmin, vmax, integral, last)


class CounterLodBuilder:
    """Every stored level of one counter track, from its samples fed in timestamp order in chunks.

    Args:
        k_min: the finest stored level.
        first_ts, last_ts: the track's first and last sample timestamps (its domain).
        sink: receives each final run of rows, any level, in increasing bucket order per level.
    """

    def __init__(self, k_min: int, first_ts: int, last_ts: int, sink: Callable[[CounterRows], None]) -> None:
        self.k = k_min
        self.first_ts, self.last_ts = first_ts, last_ts
        self.sink = sink
        self.open = _Open(first_ts >> k_min)
        self.value = np.nan         # the last sample's value so far
        self.coarser: list[Coarsener[CounterRows]] = []
        self.samples = 0

    def feed(self, t: np.ndarray, v: np.ndarray) -> None:
        """The next samples, in timestamp order, after every sample fed before."""
        if len(t) == 0:
            return
        t = np.asarray(t, np.int64)
        v = np.asarray(v, np.float64)
        self.samples += len(t)
        sb = t >> self.k
        b_open = int(sb[-1])
        if b_open > self.open.bucket:
            j = int(np.searchsorted(sb, b_open, side="left"))
            self._finalize(t[:j], v[:j], b_open)
            carried = float(v[j - 1]) if j else self.value
            self.open = _Open(b_open, carried)
            self._fold(t[j:], v[j:], carried)
        else:
            self._fold(t, v, self.value)
        self.value = float(v[-1])

    def finish(self) -> None:
        """Emit every remaining bucket of every level (call once, after the last feed)."""
        if self.samples == 0:
            return
        self._finalize(np.zeros(0, np.int64), np.zeros(0), (self.last_ts >> self.k) + 1)
        d = 0
        while d < len(self.coarser):
            level = self.coarser[d]
            rows = level.finish()
            if rows is not None:
                self.sink(rows)
            if level.emitted == 1 and level.last_rows is not None:
                top = d
                while top + 1 < len(self.coarser) and self.coarser[top + 1].emitted:
                    top += 1
                single = level.last_rows
                for k in range(self.coarser[top].last_rows.k + 1, lod.MAX_LEVEL + 1):
                    self.sink(CounterRows(k, single.b0 >> (k - single.k), single.count, single.vmin, single.vmax,
                                          single.integral, single.last))
                return
            if rows is not None:
                self._up(rows, d + 1)
            d += 1

    def _fold(self, t: np.ndarray, v: np.ndarray, before: float) -> None:
        """Samples all in the open bucket; ``before`` is the value just before the first."""
        if len(t) == 0:
            return
        o = self.open
        prev = np.r_[before, v[:-1]]
        end = (o.bucket + 1) << self.k
        with np.errstate(over="ignore", invalid="ignore"):  # (values near ±1e308: the mean is made finite later)
            o.steps += float(((v - np.nan_to_num(prev, nan=0.0)) * (end - t).astype(np.float64)).sum())
        o.count += len(t)
        o.vmin = min(o.vmin, float(v.min()))
        o.vmax = max(o.vmax, float(v.max()))

    def _finalize(self, t: np.ndarray, v: np.ndarray, b1: int) -> None:
        """Emit buckets [open bucket, b1); ``t``/``v`` are the samples fed after the open bucket's, before b1."""
        o = self.open
        b0 = o.bucket
        sb = t >> self.k
        last_bucket = self.last_ts >> self.k
        width = float(1 << self.k)
        for c0 in range(b0, b1, RANGE_BUCKETS):
            c1 = min(b1, c0 + RANGE_BUCKETS)
            a = int(np.searchsorted(sb, c0, side="left"))
            z = int(np.searchsorted(sb, c1, side="left"))
            carried = float(v[a - 1]) if a else self.value
            rows = counter_rows(t[a:z], v[a:z], self.k, c0, c1, carried=carried)
            if c0 == b0:
                # The open bucket's earlier samples were folded into ``o``; the value carried into it is
                # o.carried, not the last sample (which min/max already include, being one of o's samples).
                rows.count[0] += o.count
                known = o.carried if not np.isnan(o.carried) else _INF
                rows.vmin[0] = min(rows.vmin[0], o.vmin, known)
                rows.vmax[0] = max(rows.vmax[0], o.vmax, -known if np.isinf(known) else known)
                wrong = 0.0 if np.isnan(self.value) else self.value * width
                right = 0.0 if np.isnan(o.carried) else o.carried * width
                rows.integral[0] += right + o.steps - wrong
            if c0 <= last_bucket < c1:
                # The step function ends at the last sample: drop what its value would add after it.
                i = last_bucket - c0
                tail = float(((last_bucket + 1) << self.k) - self.last_ts)
                rows.integral[i] -= (0.0 if np.isnan(rows.last[i]) else rows.last[i]) * tail
            self._emit(rows)

    def _emit(self, rows: CounterRows) -> None:
        self.sink(rows)
        self._up(rows, 0)

    def _up(self, rows: CounterRows | None, depth: int) -> None:
        while rows is not None and rows.k < lod.MAX_LEVEL:
            if depth == len(self.coarser):
                self.coarser.append(Coarsener(_idle, _concat, _split, _coarsen))
            parent = self.coarser[depth].push(rows)
            if parent is None:
                return
            self.sink(parent)
            rows, depth = parent, depth + 1


def _finite_mean(mean: np.ndarray, vmin: np.ndarray, vmax: np.ndarray, last: np.ndarray) -> np.ndarray:
    """``mean`` where the time integral overflowed (values near ±1e308) replaced by the middle of the bucket's
    range, which holds it (NaN was stored, and numpy's overflow warnings reached the user)."""
    bad = ~np.isfinite(mean) & np.isfinite(vmin) & np.isfinite(vmax)
    if not bad.any():
        return mean
    out = mean.copy()
    out[bad] = vmin[bad] / 2 + vmax[bad] / 2
    return out


def counter_table(rows: CounterRows, first_ts: int, last_ts: int, track_id: int | None = None) -> pa.Table:
    """Rows as :data:`profiler.db_schema.COUNTER_LOD` rows (without track_id: the bucket columns only)."""
    n = len(rows)
    starts = np.arange(rows.b0, rows.b1, dtype=np.int64) << rows.k
    ends = (np.arange(rows.b0, rows.b1, dtype=np.int64) + 1) << rows.k
    covered = np.minimum(ends, last_ts) - np.maximum(starts, first_ts)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.where(covered > 0, rows.integral / np.maximum(covered, 1).astype(np.float64), rows.last)
    mean = _finite_mean(mean, rows.vmin, rows.vmax, rows.last)
    columns = {
        dbs.LEVEL: pa.array(np.full(n, rows.k, np.int32)),
        dbs.BUCKET: pa.array(np.arange(rows.b0, rows.b1, dtype=np.int64)),
        dbs.COUNT: pa.array(rows.count),
        dbs.MIN_VALUE: pa.array(rows.vmin),
        dbs.MAX_VALUE: pa.array(rows.vmax),
        dbs.MEAN_VALUE: pa.array(mean),
        dbs.LAST_VALUE: pa.array(rows.last),
    }
    if track_id is None:
        return pa.table(columns)
    return pa.table({dbs.TRACK_ID: pa.array(np.full(n, track_id, np.int64)), **columns}, schema=dbs.COUNTER_LOD)


def counter_table_many(items: list[tuple[int, CounterRows]], spans: dict[int, tuple[int, int]]) -> pa.Table:
    """Many counter tracks' and levels' rows as one COUNTER_LOD table, converted at once."""
    lengths = np.array([len(r) for _, r in items], np.int64)
    total = int(lengths.sum())
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    b0 = np.array([r.b0 for _, r in items], np.int64)
    k = np.repeat(np.array([r.k for _, r in items], np.int64), lengths)
    bucket = np.repeat(b0 - offsets, lengths) + np.arange(total, dtype=np.int64)
    first = np.repeat(np.array([spans[t][0] for t, _ in items], np.int64), lengths)
    last_ts = np.repeat(np.array([spans[t][1] for t, _ in items], np.int64), lengths)

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(r, name) for _, r in items])

    last = cat("last")
    covered = np.minimum((bucket + 1) << k, last_ts) - np.maximum(bucket << k, first)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.where(covered > 0, cat("integral") / np.maximum(covered, 1).astype(np.float64), last)
    mean = _finite_mean(mean, cat("vmin"), cat("vmax"), last)
    return pa.table({
        dbs.TRACK_ID: pa.array(np.repeat(np.array([t for t, _ in items], np.int64), lengths)),
        dbs.LEVEL: pa.array(k.astype(np.int32)),
        dbs.BUCKET: pa.array(bucket),
        dbs.COUNT: pa.array(cat("count")),
        dbs.MIN_VALUE: pa.array(cat("vmin")),
        dbs.MAX_VALUE: pa.array(cat("vmax")),
        dbs.MEAN_VALUE: pa.array(mean),
        dbs.LAST_VALUE: pa.array(last),
    }, schema=dbs.COUNTER_LOD)


def counter_levels(t: np.ndarray, v: np.ndarray, track_id: int, chunk: int | None = None) -> list[pa.Table]:
    """Every stored level of one counter track (samples sorted by timestamp), finest first."""
    t = np.asarray(t, np.int64)
    if len(t) == 0:
        return []
    first, last = int(t[0]), int(t[-1])
    k_min = lod.finest_level(first, last + 1, len(t))
    levels: dict[int, list[CounterRows]] = {}
    builder = CounterLodBuilder(k_min, first, last, lambda r: levels.setdefault(r.k, []).append(r))
    step = chunk or len(t)
    for a in range(0, len(t), step):
        builder.feed(t[a:a + step], np.asarray(v, np.float64)[a:a + step])
    builder.finish()
    return [pa.concat_tables([counter_table(r, first, last, track_id) for r in levels[k]]) for k in sorted(levels)]


def counter_bucketize(t: np.ndarray, v: np.ndarray, k: int, b0: int, b1: int, *, first_ts: int,
                      last_ts: int) -> pa.Table:
    """Buckets [b0, b1) of level ``k`` from raw samples (sorted by timestamp; those before b0 give the carried value).

    ``first_ts`` / ``last_ts`` are the track's first and last sample (its domain), e.g. from the ``track`` table.
    Buckets outside the domain are returned like the rest (count 0, no value: min inf, max -inf, last nan).
    """
    t = np.asarray(t, np.int64)
    v = np.asarray(v, np.float64)
    lo = int(np.searchsorted(t >> k, b0, side="left"))
    hi = int(np.searchsorted(t >> k, b1, side="left"))
    carried = float(v[lo - 1]) if lo else np.nan
    rows = counter_rows(t[lo:hi], v[lo:hi], k, b0, b1, carried=carried)
    last_bucket = last_ts >> k
    if b0 <= last_bucket < b1:
        i = last_bucket - b0
        tail = float(((last_bucket + 1) << k) - last_ts)
        rows.integral[i] -= (0.0 if np.isnan(rows.last[i]) else rows.last[i]) * tail
    after = np.arange(b0, b1) > last_bucket
    if after.any():     # beyond the last sample the step function is undefined
        rows.vmin[after], rows.vmax[after], rows.last[after], rows.integral[after] = _INF, -_INF, np.nan, 0.0
    return counter_table(rows, first_ts, last_ts)


__all__ = ["CounterLodBuilder", "CounterRows", "counter_bucketize", "counter_levels", "counter_table",
           "counter_table_many"]
