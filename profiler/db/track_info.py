"""What the query planner knows about each track: one row of the ``track`` table as :class:`TrackInfo`."""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    start_ts: int | None = None     # first start (counters: first sample; None for an empty track)
    end_ts: int | None = None       # last end (counters: last sample)
    value_name: str | None = None   # the per-event value the index integrates (lod.value_sum), if any

    @property
    def is_interval(self) -> bool:
        """True for tracks of interval tables (the ones windows show)."""
        return self.table in INTERVAL_TABLES

    @property
    def is_counter(self) -> bool:
        """True for Counter tracks (step functions, indexed in ``counter_lod``)."""
        return self.table == ts.COUNTER.name


def load_track_infos(cur: duckdb.DuckDBPyConnection) -> dict[int, TrackInfo]:
    """Every track's planning facts, from the ``track`` table (and ``counter_lod`` for counters' finest level)."""
    have = {r[0] for r in cur.execute(f"DESCRIBE {quote(dbs.TRACK_TABLE)}").fetchall()}
    names = [dbs.TRACK_ID, dbs.TABLE, dbs.KIND, dbs.EVENT_COUNT, dbs.MAX_DUR_NS, dbs.LOD_MIN_LEVEL, dbs.OVERLAPPING,
             dbs.CORE, ts.START_TS, ts.END_TS]
    select = [quote(n) for n in names] + [quote(dbs.VALUE_NAME) if dbs.VALUE_NAME in have else "NULL"]
    rows = cur.execute(f"SELECT {', '.join(select)} FROM {quote(dbs.TRACK_TABLE)}").fetchall()

    def opt(v: object) -> int | None:
        return None if v is None else int(v)  # type: ignore[call-overload]

    infos = {int(r[0]): TrackInfo(int(r[0]), r[1], r[2], int(r[3] or 0), int(r[4] or 0), opt(r[5]), bool(r[6]),
                                  opt(r[7]), opt(r[8]), opt(r[9]), r[10]) for r in rows}
    unknown = [t for t, i in infos.items() if i.is_counter and i.event_count and i.lod_min_level is None]
    if unknown and _has_table(cur, dbs.COUNTER_LOD_TABLE):
        levels = dict(cur.execute(
            f"SELECT {quote(dbs.TRACK_ID)}, min({quote(dbs.LEVEL)}) FROM {quote(dbs.COUNTER_LOD_TABLE)} "
            f"WHERE {quote(dbs.TRACK_ID)} IN ({', '.join(str(t) for t in unknown)}) GROUP BY ALL").fetchall())
        for t, level in levels.items():
            infos[int(t)] = replace(infos[int(t)], lod_min_level=int(level))
    return infos


def _has_table(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    rows = cur.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = "
                       "current_database()", [name]).fetchall()
    return bool(rows and rows[0][0])
