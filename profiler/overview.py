"""What a trace is, in a few facts read without scanning its events: where it came from (format, file, when it was
ingested), the machine (arch, simulated or not), its duration and how many events of each kind it holds (from the
track table's counts, filled at ingest).  ``Trace.overview()`` returns it; the dashboard's Traces page and
``trnprof info`` show it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Track kinds -> what their events are called, in display order.
EVENT_NOUNS = {"engine": ("instruction", "instructions"), "dma_queue": ("DMA packet", "DMA packets"),
               "span": ("span", "spans"), "thread": ("span", "spans"), "counter": ("counter sample", "counter samples")}


def trace_overview(trace: Trace) -> dict[str, Any]:
    """``{"source_format", "source_path", "ingested_at", "arch", "is_simulation", "start_ns", "end_ns",
    "duration_ns", "events": {kind: count}}`` (None where the trace does not say)."""
    cursor = trace._cursor()
    info = dict(cursor.execute(f"SELECT {quote(dbs.INFO_KEY)}, {quote(dbs.INFO_VALUE)} "
                               f"FROM {quote(dbs.INFO_TABLE)}").fetchall())
    counts = cursor.execute(f"SELECT {quote(dbs.KIND)}, sum({quote(dbs.EVENT_COUNT)})::BIGINT "
                            f"FROM {quote(dbs.TRACK_TABLE)} GROUP BY 1").fetchall()
    meta = trace.metadata
    start, end = (int(t) for t in trace.time_range)
    return {
        "source_format": info.get(dbs.INFO_SOURCE_FORMAT),
        "source_path": info.get(dbs.INFO_SOURCE_PATH),
        "ingested_at": info.get(dbs.INFO_CREATED_AT),
        "arch": meta.get("arch"),
        "is_simulation": meta.get("is_simulation"),
        "start_ns": start, "end_ns": end, "duration_ns": end - start,
        "events": {kind: int(n) for kind, n in sorted(counts, key=lambda kc: list(EVENT_NOUNS).index(kc[0])
                                                        if kc[0] in EVENT_NOUNS else 99) if n},
    }


def events_text(events: dict[str, int]) -> str:
    """``2,177 instructions · 139,264 DMA packets`` (counter samples left out; ``no events`` for none)."""
    by_noun: dict[tuple[str, str], int] = {}
    for kind, n in events.items():
        if kind != "counter":
            noun = EVENT_NOUNS.get(kind, (kind, kind))
            by_noun[noun] = by_noun.get(noun, 0) + n   # (spans of threads and of span tracks alike)
    return " · ".join(f"{n:,} {one if n == 1 else many}" for (one, many), n in by_noun.items()) or "no events"
