"""Streaming build of one interval track's level-of-detail index, with memory bounded by the chunk fed.

:class:`IntervalLodBuilder` receives a track's events in (start, id) order, chunk by chunk, and emits the rows of
every stored level (see :mod:`profiler.db.lod` for what a bucket holds) as soon as they are final:

* the finest level ``k_min`` from the events: after a chunk, every bucket before the one holding the chunk's last
  start is final (later events start at or after it).  Between chunks the builder keeps O(1) state: the open
  piece of the union of the intervals, the covering (running-maximum) event, the busy time of closed pieces in
  the open bucket, the starter statistics of the open bucket (count, longest, name totals) and the value
  contributions of events still running into later buckets;
* each coarser level from the finer one (:class:`Coarsener`), pairs of buckets at a time, keeping at most one
  unpaired child.

So memory is O(chunk + buckets of the chunk's range), whatever the track's length; bucket ranges are processed
at most :data:`RANGE_BUCKETS` at a time (long idle stretches or long events cost no more).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from profiler.db import lod, lod_rows
from profiler.db.lod import EventContext, Prefix, ValueSpread
from profiler.db.lod_rows import NONE, Rows

R = TypeVar("R", bound=Any)

#: Buckets computed per step (bounds the arrays of one step when a chunk spans a long range).
RANGE_BUCKETS = 1 << 20

#: Receives every final run of rows of one level (contiguous, in increasing bucket order per level).
RowSink = Callable[[Rows], None]


@dataclass
class _OpenBucket:
    """Starter statistics of the bucket holding the last start fed (more events may still start in it)."""

    bucket: int
    count: int = 0
    ldur: int = NONE
    lid: int = 0
    codes: np.ndarray = field(default_factory=lambda: lod_rows._EMPTY)
    durs: np.ndarray = field(default_factory=lambda: lod_rows._EMPTY)
    closed_busy: int = 0     # union length of closed pieces inside the bucket

    def add(self, s: np.ndarray, e: np.ndarray, ids: np.ndarray, codes: np.ndarray) -> None:
        """Fold starters (all in this bucket) in."""
        if len(s) == 0:
            return
        dur = e - s
        best = int(dur.max())
        best_id = int(ids[dur == best].min())
        if best > self.ldur or (best == self.ldur and best_id < self.lid):
            self.ldur, self.lid = best, best_id
        self.count += len(s)
        named = codes >= 0
        self.codes = np.concatenate([self.codes, codes[named]])
        self.durs = np.concatenate([self.durs, dur[named]])
        if len(self.codes) > 4096:      # keep the name totals small in a burst
            _, self.codes, self.durs = lod_rows.reduce_pairs(np.zeros(len(self.codes), np.int64), self.codes, self.durs)

    def merge_into(self, rows: Rows) -> None:
        """Add these statistics to the first bucket of ``rows`` (which must be this bucket)."""
        assert rows.b0 == self.bucket and len(rows)
        rows.count[0] += self.count
        if self.count and (self.ldur > rows.ldur[0] or (self.ldur == rows.ldur[0] and self.lid < rows.lid[0])):
            rows.ldur[0], rows.lid[0] = self.ldur, self.lid
        if len(self.codes):
            pb = np.concatenate([np.full(len(self.codes), self.bucket, np.int64), rows.pb])
            rows.pb, rows.pc, rows.pd = lod_rows.reduce_pairs(pb, np.concatenate([self.codes, rows.pc]),
                                                         np.concatenate([self.durs, rows.pd]))


class Coarsener(Generic[R]):
    """Builds level ``k`` from the rows of level ``k - 1`` as they arrive (at most one unpaired child kept).

    Generic over the row type: ``idle(k, b0, n)`` makes ``n`` idle buckets, ``concat``/``split`` join and cut
    contiguous rows, ``coarsen`` pairs an even run of children into their parents (interval rows here, counter
    rows in :mod:`profiler.db.lod_counter`).
    """

    def __init__(self, idle: Callable[[int, int, int], R], concat: Callable[[R, R], R],
                 split: Callable[[R, int], tuple[R, R]], coarsen: Callable[[R], R]) -> None:
        self._idle, self._concat, self._split, self._coarsen = idle, concat, split, coarsen
        self.pending: R | None = None
        self.started = False
        self.emitted = 0
        self.last_rows: R | None = None

    def push(self, child: R) -> R | None:
        """Children [b0, b1) of level k - 1 (continuing the previous push); the complete parents, if any."""
        if len(child) == 0:
            return None
        if not self.started:
            self.started = True
            if child.b0 & 1:     # the left sibling lies before the track: idle
                child = self._concat(self._idle(child.k, child.b0 - 1, 1), child)
        rows = child if self.pending is None else self._concat(self.pending, child)
        self.pending = None
        if len(rows) & 1:
            rows, self.pending = self._split(rows, len(rows) - 1)
        return self._out(self._coarsen(rows)) if len(rows) else None

    def finish(self) -> R | None:
        """The last parent (its right child idle) when a child is left unpaired."""
        if self.pending is None:
            return None
        rows = self._concat(self.pending, self._idle(self.pending.k, self.pending.b1, 1))
        self.pending = None
        return self._out(self._coarsen(rows))

    def _out(self, rows: R) -> R:
        self.emitted += len(rows)
        self.last_rows = rows
        return rows


def interval_coarsener(with_values: bool) -> Coarsener[Rows]:
    """A :class:`Coarsener` of interval-track rows (value sums kept when ``with_values``)."""
    return Coarsener(lambda k, b0, n: lod_rows.idle_rows(k, b0, n, with_values), lod_rows.concat_rows,
                     lod_rows.split_rows, lod_rows.coarsen)


class IntervalLodBuilder:
    """Every stored level of one interval track, from its events fed in (start, id) order in chunks.

    Args:
        k_min: the track's finest stored level (:func:`profiler.db.lod.finest_level` of its span and count).
        first_bucket, last_bucket: the track's first and last bucket at ``k_min`` (from its span).
        with_values: whether events carry values whose sums are indexed.
        sink: receives each final run of rows, any level, in increasing bucket order per level.
    """

    def __init__(self, k_min: int, first_bucket: int, last_bucket: int, with_values: bool, sink: RowSink) -> None:
        self.k = k_min
        self.last_bucket = last_bucket
        self.with_values = with_values
        self.sink = sink
        self.prefix: Prefix | None = None
        self.open = _OpenBucket(first_bucket)
        self.spread = ValueSpread(k_min) if with_values else None
        self.coarser: list[Coarsener[Rows]] = []
        self.overlapping = False
        self.events = 0
        self._last_key: tuple[int, int] | None = None

    def feed(self, s: np.ndarray, e: np.ndarray, ids: np.ndarray, codes: np.ndarray,
             values: np.ndarray | None = None) -> None:
        """The next events of the track, sorted by (start, id) and after every event fed before."""
        n = len(s)
        if n == 0:
            return
        s = np.asarray(s, np.int64)
        e = np.maximum(np.asarray(e, np.int64), s)
        ids = np.asarray(ids, np.int64)
        codes = np.asarray(codes, np.int64)
        if self._last_key is not None and (int(s[0]), int(ids[0])) < self._last_key:
            raise ValueError("events must be fed in (start, id) order")
        self._last_key = (int(s[-1]), int(ids[-1]))
        self.events += n
        ctx = EventContext(s, e, ids, codes, k=self.k, prefix=self.prefix)
        self.overlapping = self.overlapping or ctx.overlapping
        if self.spread is not None:
            self.spread.add(s, e, np.asarray(values, np.float64) if values is not None else np.zeros(n))
        b_open = int(ctx.sb[-1])
        b0 = self.open.bucket
        if b_open > b0:
            j = int(np.searchsorted(ctx.sb, b_open, side="left"))
            self._finalize(ctx, b0, b_open, j)
            closed = ctx.closed_busy_in(b_open << self.k, int(ctx.union_start[-1]))
            self.open = _OpenBucket(b_open, closed_busy=closed)
            self.open.add(s[j:], e[j:], ids[j:], codes[j:])
        else:
            self.open.closed_busy += ctx.closed_busy_in(b0 << self.k, int(ctx.union_start[-1]))
            self.open.add(s, e, ids, codes)
        self.prefix = ctx.prefix_after()

    def finish(self) -> None:
        """Emit every remaining bucket of every level (call once, after the last feed)."""
        if self.events == 0:
            return
        none = lod_rows._EMPTY
        ctx = EventContext(none, none, none, none, k=self.k, prefix=self.prefix)
        self._finalize(ctx, self.open.bucket, self.last_bucket + 1, 0)
        d = 0
        while d < len(self.coarser):
            level = self.coarser[d]
            rows = level.finish()
            if rows is not None:
                self.sink(rows)
            if level.emitted == 1 and level.last_rows is not None:
                self._repeat_top(level.last_rows, d)
                return
            if rows is not None:
                self._emit_coarser(rows, d + 1)
            d += 1

    def _repeat_top(self, single: Rows, d: int) -> None:
        """Level ``single.k`` holds the whole track in one bucket: so does every coarser level (same content)."""
        top = d
        while top + 1 < len(self.coarser) and self.coarser[top + 1].emitted:
            top += 1        # levels already emitted as that single row (odd buckets pair with an idle sibling)
        level = self.coarser[top].last_rows     # emitted (above), so set; its rows are at the coarsener's level
        assert level is not None
        for k in range(level.k + 1, lod.MAX_LEVEL + 1):
            self.sink(_relevel(single, k))
        del self.coarser[top + 1:]

    def _finalize(self, ctx: EventContext, b0: int, b1: int, j: int) -> None:
        """Emit buckets [b0, b1): their starters are ctx's events [0, j), plus the open bucket's (at b0)."""
        first = True
        for c0 in range(b0, b1, RANGE_BUCKETS):
            c1 = min(b1, c0 + RANGE_BUCKETS)
            i0 = int(np.searchsorted(ctx.sb[:j], c0, side="left"))
            i1 = int(np.searchsorted(ctx.sb[:j], c1, side="left"))
            values = self.spread.take(c0, c1) if self.spread is not None else None
            rows = ctx.rows(c0, c1, i0, i1, values=values, first_busy=self.open.closed_busy if first else 0)
            if first:
                self.open.merge_into(rows)
                first = False
            self._emit(rows)

    def _emit(self, rows: Rows) -> None:
        self.sink(rows)
        self._emit_coarser(rows, 0)

    def _emit_coarser(self, rows: Rows, depth: int) -> None:
        """Pass level-(k_min + depth) rows up the cascade."""
        while rows is not None and rows.k < lod.MAX_LEVEL:
            if depth == len(self.coarser):
                self.coarser.append(interval_coarsener(self.with_values))
            parent = self.coarser[depth].push(rows)
            if parent is None:
                return
            self.sink(parent)
            rows, depth = parent, depth + 1


def _relevel(rows: Rows, k: int) -> Rows:
    """A one-bucket row holding the whole track, at coarser level ``k``."""
    shift = k - rows.k
    return Rows(k, rows.b0 >> shift, rows.busy, rows.count, rows.ldur, rows.lid, rows.cid, rows.ccode, rows.cok,
                rows.value, rows.pb >> shift, rows.pc, rows.pd)


def track_levels(ev: lod.TrackEvents, track_id: int, k_min: int, chunk: int | None = None) -> Iterator[pa.Table]:
    """Every stored level of one (prepared) track, finest first, as :data:`profiler.db_schema.LOD` tables.

    ``chunk`` feeds the events that many at a time (the ingest's streaming path); default: all at once.
    """
    if ev.n == 0:
        return
    lo, hi = ev.span()
    levels: dict[int, list[Rows]] = {}
    builder = IntervalLodBuilder(k_min, lo >> k_min, (hi - 1) >> k_min, ev.values is not None,
                                 lambda rows: levels.setdefault(rows.k, []).append(rows))
    step = chunk or ev.n
    for a in range(0, ev.n, step):
        b = min(ev.n, a + step)
        builder.feed(ev.start[a:b], ev.end[a:b], ev.ids[a:b], ev.codes[a:b],
                     None if ev.values is None else ev.values[a:b])
    builder.finish()
    for k in sorted(levels):
        parts = [lod_rows.rows_table(r, ev.names, track_id) for r in levels[k]]
        yield pa.concat_tables(parts)


__all__ = ["RANGE_BUCKETS", "IntervalLodBuilder", "track_levels"]
