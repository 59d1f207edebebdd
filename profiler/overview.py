"""What a trace is, in a few facts read without scanning its events: where it came from (format, file, when it was
ingested), the machine (arch, simulated or not), its duration and how many events of each table it holds (from the
track table's counts, filled at ingest), and what those events are called.  ``Trace.overview()`` returns it; the
dashboard's Traces page, ``trnprof info`` and the notebook view of a trace show it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from tracer import schema as ts

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Event tables -> what their events are called, in display order.
EVENT_LABELS: dict[str, str] = {
    ts.INSTRUCTION.name: "instructions",
    ts.DMA_PACKET.name: "DMA packets",
    dbs.SLICE_TABLE: "spans",
    ts.COUNTER.name: "counter samples",
}


def trace_overview(trace: Trace) -> dict[str, Any]:
    """``{"source_format", "source_path", "ingested_at", "arch", "is_simulation", "start_ns", "end_ns",
    "duration_ns", "events": {table: count}}`` (None where the trace does not say; ``events`` in
    :data:`EVENT_LABELS` order, tables without events left out)."""
    cursor = trace._cursor()
    info = dict(cursor.execute(f"SELECT {quote(dbs.INFO_KEY)}, {quote(dbs.INFO_VALUE)} "
                               f"FROM {quote(dbs.INFO_TABLE)}").fetchall())
    counts = dict(cursor.execute(f"SELECT {quote(dbs.TABLE)}, sum({quote(dbs.EVENT_COUNT)})::BIGINT "
                                 f"FROM {quote(dbs.TRACK_TABLE)} GROUP BY 1").fetchall())
    meta = trace.metadata
    start, end = (int(t) for t in trace.time_range)
    return {
        "source_format": info.get(dbs.INFO_SOURCE_FORMAT),
        "source_path": info.get(dbs.INFO_SOURCE_PATH),
        "ingested_at": info.get(dbs.INFO_CREATED_AT),
        "arch": meta.get("arch"),
        "is_simulation": meta.get("is_simulation"),
        "start_ns": start, "end_ns": end, "duration_ns": end - start,
        "events": {table: int(counts[table]) for table in sorted(counts, key=_label_order) if counts[table]},
    }


def has_device_events(trace: Trace) -> bool:
    """Whether the trace holds instructions or DMA packets (a device trace; from the track table's counts: no
    scan) -- a host trace of PyTorch or JAX holds neither."""
    events = trace.overview().get("events") or {}
    return bool(events.get(ts.INSTRUCTION.name) or events.get(ts.DMA_PACKET.name))


def _label_order(table: str) -> tuple[int, str]:
    keys = list(EVENT_LABELS)
    return (keys.index(table) if table in keys else len(keys), table)


def labelled_events(events: dict[str, int]) -> dict[str, int]:
    """``{"instructions": 2177, "DMA packets": 139264, ...}``: the overview's events by what they are called."""
    return {EVENT_LABELS.get(table, table): n for table, n in events.items()}


def events_text(events: dict[str, int]) -> str:
    """``2,177 instructions · 139,264 DMA packets`` (counter samples left out; ``no events`` for none)."""
    return " · ".join(f"{n:,} {label}" for label, n in labelled_events(events).items()
                      if label != EVENT_LABELS[ts.COUNTER.name]) or "no events"
