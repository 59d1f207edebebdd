"""``Window``: what :meth:`profiler.Trace.window` returns — raw events and level-of-detail buckets of a time range."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from profiler import db_schema as dbs


@dataclass(frozen=True)
class Window:
    """The timeline between ``start_ns`` and ``end_ns`` at ``width_px`` pixels.

    Attributes:
        start_ns: requested start.
        end_ns: requested end (exclusive).
        width_px: requested width.
        resolution_ns: bucket width, a power of two: ns per pixel rounded down (Perfetto's choice).
        events: raw events (:data:`profiler.db_schema.WINDOW_EVENTS`) of the tracks with few events in view,
            every event overlapping [start_ns, end_ns), sorted by (track_id, start_ts, id).
        buckets: buckets (:data:`profiler.db_schema.WINDOW_BUCKETS`) of the other tracks; for each such track they
            tile [bucket_start_ns, bucket_end_ns) at ``resolution_ns`` without gaps or overlaps.
        counters: buckets (:data:`profiler.db_schema.COUNTER_BUCKETS`) of the Counter tracks asked for by id,
            tiling the same grid (empty unless ``Trace.window`` was given counter track ids).
    """

    start_ns: int
    end_ns: int
    width_px: int
    resolution_ns: int
    events: pa.Table
    buckets: pa.Table
    counters: pa.Table = field(default_factory=dbs.COUNTER_BUCKETS.empty_table)

    @property
    def bucket_start_ns(self) -> int:
        """Start of the bucket grid: ``start_ns`` rounded down to ``resolution_ns``."""
        return (self.start_ns // self.resolution_ns) * self.resolution_ns

    @property
    def bucket_end_ns(self) -> int:
        """End of the bucket grid: ``end_ns`` rounded up to ``resolution_ns``."""
        return -(-self.end_ns // self.resolution_ns) * self.resolution_ns
