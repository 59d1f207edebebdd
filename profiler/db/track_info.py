"""What the query planner knows about each track: one row of the ``track`` table as :class:`TrackInfo`."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from tracer import schema as ts

#: Tables whose rows are intervals (the tracks windows draw).
INTERVAL_TABLES = frozenset({ts.INSTRUCTION.name, ts.DMA_PACKET.name, dbs.SLICE_TABLE})


@dataclass(frozen=True)
class TrackInfo:
    """What the planner needs to know about one track (a row of the ``track`` table)."""

    track_id: int
    table: str
    kind: str
    event_count: int
    max_dur_ns: int
    lod_min_level: int | None
    overlapping: bool
    core: int | None = None
    start_ts: int | None = None     # first start (None for an empty track)
    end_ts: int | None = None       # last end

    @property
    def is_interval(self) -> bool:
        """True for tracks of interval tables (the ones windows show)."""
        return self.table in INTERVAL_TABLES


def load_track_infos(cur: duckdb.DuckDBPyConnection) -> dict[int, TrackInfo]:
    """Every track's planning facts, from the ``track`` table."""
    names = (dbs.TRACK_ID, dbs.TABLE, dbs.KIND, dbs.EVENT_COUNT, dbs.MAX_DUR_NS, dbs.LOD_MIN_LEVEL, dbs.OVERLAPPING,
             dbs.CORE, ts.START_TS, ts.END_TS)
    rows = cur.execute(f"SELECT {', '.join(quote(n) for n in names)} FROM {quote(dbs.TRACK_TABLE)}").fetchall()

    def opt(v: object) -> int | None:
        return None if v is None else int(v)  # type: ignore[call-overload]

    return {int(r[0]): TrackInfo(int(r[0]), r[1], r[2], int(r[3] or 0), int(r[4] or 0), opt(r[5]), bool(r[6]),
                                 opt(r[7]), opt(r[8]), opt(r[9])) for r in rows}


