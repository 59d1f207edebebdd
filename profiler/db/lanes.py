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


def _lanes_of_group(start: np.ndarray, held: np.ndarray) -> np.ndarray:
    """FIFO lanes of one group's events sorted by start (``held`` = the instant each frees its lane)."""
    n = len(start)
    by_end = np.argsort(held, kind="stable")
    ended_before = np.searchsorted(held[by_end], start, side="right")     # events freed at or before each start
    peak = int((np.arange(n) - ended_before).max()) + 1
    j = np.arange(n)
    parent = np.where(j < peak, j, by_end[np.maximum(j - peak, 0)])
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return parent
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
    out = np.zeros(n, dtype=np.int32)
    if n < 2:
        return out
    start = np.asarray(start, dtype=np.int64)
    held = np.maximum(np.asarray(end, dtype=np.int64), start + 1)
    cuts = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True])
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        if b - a > 1:
            out[a:b] = _lanes_of_group(start[a:b], held[a:b])
    return out


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane per event of one track (sorted by start); see :func:`assign_lanes`."""
    return assign_lanes(np.zeros(len(start), dtype=np.int64), start, end)
