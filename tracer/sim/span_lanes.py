"""Lanes of a recording's Span rows: the ``depth`` that keeps spans of one timeline row from overlapping.

A recording's layers and operators run pipelined (the next one's first instruction starts before the previous
one's last ends), so the spans of one row (category) overlap; the writer process's emitter
(:mod:`tracer.sim.emitter`) gives each a lane, written as ``Span.depth``, and the profiler draws every lane as a
row of its own.
"""

from __future__ import annotations

import numpy as np


class SpanLanes:
    """The ``depth`` of each Span row: its lane on its timeline row (one row per category: layer, operator).

    Spans of one row overlap when the kernel's layers or operators run pipelined (the next one's first instruction
    starts before the previous one's last ends), or when a scope nests in one of its own category.  Each span, in
    the order the scopes closed (the same however the rows are cut into chunks), takes the lowest lane free at its
    start, so spans of one lane never overlap; the profiler draws every lane as a row of its own.
    """

    def __init__(self) -> None:
        #: Per row (category code): the end of the last span on each lane.
        self.ends: dict[int, list[int]] = {}

    def assign(self, row: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """int32 lane of each span (``row``: its category code)."""
        lane = np.zeros(len(row), np.int32)
        for r in np.unique(row).tolist():  # rows are independent: each in one pass over its spans
            at = np.flatnonzero(row == r)
            ends = self.ends.setdefault(r, [])
            lanes = []
            for s, e in zip(start[at].tolist(), end[at].tolist(), strict=True):
                for j, busy_until in enumerate(ends):
                    if busy_until <= s:
                        ends[j] = e
                        lanes.append(j)
                        break
                else:
                    lanes.append(len(ends))
                    ends.append(e)
            lane[at] = lanes
        return lane
