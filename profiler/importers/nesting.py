"""Nesting of intervals on timeline rows: depth and parent of every slice, begin/end pairing, flow binding.

Pure numpy functions over whole columns (no per-slice Python loop on the common path), used by the importers of
formats that give flat events (Chrome ``X``, ``B``/``E``, instants) rather than a call tree.

Conventions: intervals are half-open ``[start, end)``; a zero-length interval (an instant) at ``t`` lies inside
``[a, b)`` when ``a <= t < b``, and holds nothing (instants at one time are siblings). On one track, slices sorted
by (start, longer first, id) nest when each lies inside the previous still-open one; ``depth`` is then the number of
slices open around it and ``parent`` the innermost of them. Tracks whose slices overlap without nesting (which the
Chrome format forbids but producers write anyway) get a greedy lane layout instead: each slice takes the lowest
depth free at its start, and a parent only when the slice at the depth above really contains it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from profiler.importers.json_kernel import nest_track, order_by_track


@dataclass(frozen=True)
class Nesting:
    """Depth and parent of each interval, and how many needed the overlap fallback."""

    depth: np.ndarray         # int32
    parent: np.ndarray        # int64 index of the enclosing interval, -1 for none
    overlapping_tracks: int   # tracks laid out as lanes because their slices overlap without nesting
    overlapping_slices: int   # slices on those tracks crossing another (starting inside it, ending after it)
    order: np.ndarray         # indices sorting the intervals by (track, start, end descending, index)
    segments: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    """One row per track: (track, first, end) positions of its intervals in ``order``."""


def track_order(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Indices sorting the intervals by (track, start, end descending, index).

    One compiled counting sort by track when each track's intervals already come in (start, end descending) order,
    as they do in most traces; three stable sorts, each nearly linear on mostly sorted columns, otherwise.
    """
    order = order_by_track(track, start, end)   # compiled, when loaded: one pass, no temporaries
    if order is not None:
        return order
    order = np.argsort(-end, kind="stable")
    order = order[np.argsort(start[order], kind="stable")]
    tr = track[order]
    if len(tr) and tr.min() >= 0 and tr.max() < 2**16:
        tr = tr.astype(np.uint16)  # radix sort
    return order[np.argsort(tr, kind="stable")]


def nest_intervals(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> Nesting:
    """Depth and parent of every interval, per track (see the module docstring).

    Work and temporaries are per track, so memory beyond the result is proportional to the largest track.

    Args:
        track: track of each interval (int).
        start / end: int64 times, ``end >= start``.
    """
    n = len(start)
    depth = np.zeros(n, np.int32)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return Nesting(depth, parent, 0, 0, np.zeros(0, np.int64))
    order = track_order(track, start, end)
    t_sorted = track[order]
    bounds = np.flatnonzero(t_sorted[1:] != t_sorted[:-1]) + 1
    del t_sorted
    seg_start_np = np.concatenate(([0], bounds))
    seg_end_np = np.concatenate((bounds, [n]))
    segments = np.stack([track[order[seg_start_np]], seg_start_np, seg_end_np], axis=1).astype(np.int64)
    seg_start, seg_end = seg_start_np.tolist(), seg_end_np.tolist()
    overlapping_tracks = 0
    overlapping_slices = 0
    for a, b in zip(seg_start, seg_end, strict=True):
        rows = order[a:b]
        if nest_track(start, end, rows, depth, parent):   # one compiled pass, when loaded and the slices nest
            continue
        parent[rows] = -1
        s, e = start[rows], end[rows]
        d, p, ok = _nest_sorted(s, e)
        if not ok:
            overlapping_tracks += 1
            overlapping_slices += _crossing(s, e)
            d, p = _lanes(s, e)
        depth[rows] = d
        has = p >= 0
        parent[rows[has]] = rows[p[has]]
    return Nesting(depth, parent, overlapping_tracks, overlapping_slices, order, segments)


def _nest_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Depth, parent (local index or -1) and whether they nest, for one track sorted by (start, end desc)."""
    m = len(s)
    nonzero = e > s
    # closed before each interval: those ending at or before its start, and every zero-length one before it in the
    # order ([t, t) holds nothing, not even another instant at t)
    closed = (np.searchsorted(np.sort(e[nonzero]), s, side="right")
              + np.searchsorted(np.flatnonzero(~nonzero), np.arange(m), side="left"))
    d = np.arange(m, dtype=np.int64) - closed
    del closed
    # Parent: the nearest earlier interval one level up; grouping positions by depth makes it a binary search.
    by_depth = np.argsort(d, kind="stable")
    keys = d[by_depth] * m + by_depth
    child = np.flatnonzero(d > 0)
    p = np.full(m, -1, np.int64)
    ok = True
    if len(child):
        at = np.searchsorted(keys, (d[child] - 1) * m + child) - 1
        cand = keys[np.maximum(at, 0)]
        found = (at >= 0) & (cand // m == d[child] - 1)
        ok = bool(found.all())
        pc_ = cand[found] % m
        ci = child[found]
        p[ci] = pc_
        # Every child inside its parent ...
        ok = ok and not bool(((e[ci] > e[pc_]) | (s[ci] < s[pc_])).any())
    if ok and m > 1:
        # ... and no two slices of one depth overlapping (consecutive in by_depth order at equal depth).
        same = d[by_depth[1:]] == d[by_depth[:-1]]
        ok = not bool((same & (s[by_depth[1:]] < e[by_depth[:-1]])).any())
    return d.astype(np.int32), p, ok


def _crossing(start: np.ndarray, end: np.ndarray) -> int:
    """Slices of one track (sorted by start) that start inside an open slice and end after it: what keeps the track
    from nesting (the rest of its slices nest fine)."""
    open_ends: list[int] = []
    count = 0
    for s, e in zip(start.tolist(), end.tolist(), strict=True):
        while open_ends and open_ends[0] <= s:
            heapq.heappop(open_ends)
        if open_ends and e > open_ends[0]:
            count += 1
        heapq.heappush(open_ends, e)
    return count


def _lanes(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy lanes for one track's intervals (sorted by start): (depth, parent index or -1)."""
    n = len(start)
    depth = np.zeros(n, np.int64)
    parent = np.full(n, -1, np.int64)
    lane_last: list[int] = []          # index of the last interval on each lane
    free: list[int] = []               # heap of lanes free at the current start
    busy: list[tuple[int, int]] = []   # heap of (end, lane) of lanes in use
    s_list, e_list = start.tolist(), end.tolist()
    for i in range(n):
        s, e = s_list[i], e_list[i]
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane = len(lane_last)
            lane_last.append(-1)
        if lane > 0:
            above = lane_last[lane - 1]
            a_s, a_e = s_list[above], e_list[above]
            if a_s <= s and e <= a_e and s < a_e:  # (a zero-length slice holds nothing)
                parent[i] = above
        depth[i] = lane
        lane_last[lane] = i
        heapq.heappush(busy, (e, lane))
    return depth, parent


def match_begin_end(thread: np.ndarray, ts: np.ndarray, is_begin: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Pair ``B`` with ``E`` events per thread, as a stack: each ``E`` ends the latest unended ``B``.

    Events are taken in (thread, ts, input order).  Returns (for each event: index of its partner or -1,
    unmatched begins, unmatched ends).
    """
    n = len(ts)
    partner = np.full(n, -1, np.int64)
    if n == 0:
        return partner, 0, 0
    order = np.argsort(ts, kind="stable")
    order = order[np.argsort(thread[order], kind="stable")]
    th = thread[order]
    delta = np.where(is_begin[order], 1, -1)
    # Running depth per thread; an E that would go below zero is unmatched and does not count.
    bounds = np.flatnonzero(np.diff(th)) + 1
    seg_start = np.concatenate(([0], bounds))
    seg_end = np.concatenate((bounds, [n]))
    valid = np.ones(n, np.bool_)
    level = np.empty(n, np.int64)
    for a, b in zip(seg_start.tolist(), seg_end.tolist(), strict=True):
        raw = np.cumsum(delta[a:b])
        # An E that closes nothing takes the running depth to a new low below zero: drop it and count from there.
        low = np.minimum(np.minimum.accumulate(raw), 0)
        dropped = low < np.concatenate(([0], low[:-1]))
        valid[a:b] = ~dropped
        run = raw - low
        level[a:b] = np.where(delta[a:b] > 0, run, run + 1)
    # Within a thread, a B at level L pairs with the next valid E at level L: stable sort by (thread, level).
    idx = np.flatnonzero(valid)
    key_order = idx[np.lexsort((idx, level[idx], th[idx]))]
    kb = delta[key_order] > 0
    nxt_is_end = np.zeros(len(key_order), np.bool_)
    nxt_is_end[:-1] = (~kb[1:]) & (th[key_order[1:]] == th[key_order[:-1]]) & (
        level[key_order[1:]] == level[key_order[:-1]])
    pair_b = np.flatnonzero(kb & nxt_is_end)
    b_idx = order[key_order[pair_b]]
    e_idx = order[key_order[pair_b + 1]]
    partner[b_idx] = e_idx
    partner[e_idx] = b_idx
    begins = int(is_begin.sum())
    ends = n - begins
    return partner, begins - len(b_idx), ends - len(e_idx)


def enclosing(track_sorted_start: np.ndarray, sorted_end: np.ndarray, sorted_parent: np.ndarray,
              *, seg_lo: np.ndarray, seg_hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Deepest interval containing ``t`` within each query's track segment of a (track, start)-sorted layout.

    Args:
        track_sorted_start / sorted_end: starts and ends in sorted order.
        sorted_parent: parent of each interval as an index into the sorted order (-1 for none).
        seg_lo / seg_hi: per query, the sorted-order range of its track.
        t: per query, the time.

    Returns:
        per query, a sorted-order index or -1.
    """
    q = len(t)
    out = np.full(q, -1, np.int64)
    if q == 0 or len(track_sorted_start) == 0:
        return out
    # The last interval starting at or before t within the track, then up the parent chain until one contains t.
    cand = _searchsorted_segments(track_sorted_start, seg_lo, seg_hi, t) - 1
    cur = np.where(cand >= seg_lo, cand, -1)
    todo = np.flatnonzero(cur >= 0)
    while len(todo):
        c = cur[todo]
        s, e = track_sorted_start[c], sorted_end[c]
        inside = (t[todo] < e) | ((s == e) & (t[todo] == s))
        out[todo[inside]] = c[inside]
        todo = todo[~inside]
        cur[todo] = sorted_parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return out


def next_starting(sorted_start: np.ndarray, seg_lo: np.ndarray, seg_hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """First interval starting at or after ``t`` within each query's track segment (sorted-order index or -1)."""
    at = _searchsorted_segments(sorted_start, seg_lo, seg_hi, t, side="left")
    return np.where(at < seg_hi, at, -1)


def _searchsorted_segments(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, t: np.ndarray,
                           side: str = "right") -> np.ndarray:
    """``searchsorted`` of each ``t`` within ``values[lo:hi]`` (each segment sorted), as absolute indices."""
    out = np.empty(len(t), np.int64)
    if not len(t):
        return out
    order = np.lexsort((t, lo))
    lo_s = lo[order]
    bounds = np.flatnonzero(np.diff(lo_s)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(order)]))
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        q = order[a:b]
        seg_a, seg_b = int(lo[q[0]]), int(hi[q[0]])
        out[q] = seg_a + np.searchsorted(values[seg_a:seg_b], t[q], side=side)
    return out
