"""Lane assignment for overlapping raw events (``Window.events.depth`` of DMA queues and other overlapping tracks).

Events of one track that overlap in time must be drawn on different lanes.  :func:`assign_lanes` gives every event
a lane such that events of one group on one lane never overlap, using exactly as many lanes per group as the peak
number of events in progress at once (the interval graph's chromatic number), vectorised:

Lanes are handed out first-in first-out.  With ``L`` the group's peak, the ``j``-th event by start takes lane ``j``
when ``j < L`` and otherwise the lane of the event whose end is the ``(j - L)``-th in end order.  That end is never
after the ``j``-th start: at that start at most ``L - 1`` earlier events are still in progress, so at least
``j - L + 1`` have ended.  Each event therefore inherits its lane from an earlier one, and following those links to
the first ``L`` events (pointer jumping, ``log2`` of the chain length rounds of one gather) resolves every lane.

A zero-length event holds its lane for 1 ns so that it stays visible beside its neighbours.
"""

from __future__ import annotations

import numpy as np


def _fifo_lanes(first: np.ndarray, start_key: np.ndarray, held_key: np.ndarray) -> np.ndarray:
    """FIFO lanes of events sorted by (group, start), with group-ordered keys.

    Every key of a group lies below every key of the next group, so one sort and one search serve all groups.
    ``first`` is the index of the first event of each event's group.
    """
    n = len(start_key)
    j = np.arange(n)
    by_end = np.argsort(held_key, kind="stable")
    # Events of earlier groups all end (in key order) before this group's first start: subtract them.
    ended_before = np.searchsorted(held_key[by_end], start_key, side="right") - first
    local = j - first
    in_progress = local - ended_before + 1
    cuts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
    peak = np.repeat(np.maximum.reduceat(in_progress, cuts), np.diff(np.r_[cuts, n]))
    parent = np.where(local < peak, j, by_end[np.maximum(first + local - peak, 0)])
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return (parent - first).astype(np.int32)
        parent = grand


def assign_lanes(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane per event such that events of one group on one lane never overlap.

    Args:
        group: int64 group key per event (a track id); events must be sorted by (group, start).
        start: int64 start per event.
        end: int64 end per event (an end before its start is treated as the start).

    Returns:
        int32 lane per event, in ``[0, peak)`` where ``peak`` is the group's largest number of events in progress
        at one instant.
    """
    n = len(start)
    if n < 2:
        return np.zeros(n, dtype=np.int32)
    group = np.asarray(group, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    held = np.maximum(np.asarray(end, dtype=np.int64), start + 1)
    new_group = np.r_[True, group[1:] != group[:-1]]
    first = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    group_no = np.cumsum(new_group) - 1
    base = int(start.min())
    shift = max(1, (int(held.max()) - base).bit_length())
    if shift + int(group_no[-1]).bit_length() <= 62:
        # One pass for every group: keys (group number, time since the earliest start) packed into an int64.
        key = group_no << shift
        return _fifo_lanes(first, key + (start - base), key + (held - base))
    out = np.zeros(n, dtype=np.int32)
    cuts = np.flatnonzero(np.r_[new_group, True])
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        out[a:b] = _fifo_lanes(np.zeros(b - a, dtype=np.int64), start[a:b], held[a:b])
    return out


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane per event of one track (sorted by start); see :func:`assign_lanes`."""
    return assign_lanes(np.zeros(len(start), dtype=np.int64), start, end)
