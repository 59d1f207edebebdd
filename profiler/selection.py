"""Summary of a time range of a trace — what the dashboard shows for a box selection or the visible range.

:func:`selection_summary` is a pure function of a ``Trace`` and a range: per-engine busy time and percentage
(``Trace.busy_ns``, exact union of intervals), the names with the most time in the range (exact -- their events'
durations clipped to the range -- when the range holds at most :data:`EXACT_NAMES_LIMIT` events, else estimated
from one ``Trace.window``, cost set by pixels, and marked so), and the DMA bytes, throughput, FLOPs and HFU of the
range (``Trace.summary(start, end)``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from profiler import db_schema as dbs
from profiler.db.raw_rows import time_by_name
from profiler.summary import tensor_flops
from tracer import schema as ts
from tracer.errors import TrnprofError

#: Pixels of the window used to estimate the names' time in a range of more than EXACT_NAMES_LIMIT events.
RANKING_WIDTH_PX = 1024
TOP_N = 10
#: Events (starting in the range) up to which the names' time is summed exactly from the rows (~0.1 s a million).
EXACT_NAMES_LIMIT = 2_000_000


@dataclass
class SelectionSummary:
    """What one range of a trace did."""

    start_ns: int
    end_ns: int
    #: ``(track name, core, busy_ns, busy fraction)`` per engine track.
    engines: list[tuple[str, int | None, int, float]] = field(default_factory=list)
    #: ``(name, ns)``: the names with the most time in the range (their events' durations clipped to it, summed
    #: over the engine tracks; every track of a trace without engines), most first.
    top_names: list[tuple[str, float]] = field(default_factory=list)
    #: Every name's time in the range together (the shares' denominator).
    names_total_ns: float = 0.0
    #: Whether ``top_names`` is exact; False past :data:`EXACT_NAMES_LIMIT` events: each index bucket's busy time
    #: credited to the name dominating it (an estimate the dashboard labels as one).
    names_exact: bool = True
    #: Events starting in the range on those tracks.
    names_events: int = 0
    dma_bytes: float | None = None
    dma_throughput_bytes_per_s: float | None = None
    flops: float | None = None
    hfu_percent: float | None = None
    #: Every figure ``Trace.summary(start, end)`` returned.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        """Length of the range."""
        return self.end_ns - self.start_ns


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(_flatten(v, key + "."))
            else:
                out[key] = v
    return out


def _rank_names(trace: Any, out: SelectionSummary, engine_ids: list[int]) -> None:
    """``out.top_names`` and the rest: exact up to :data:`EXACT_NAMES_LIMIT` events, else from the index."""
    a, b = out.start_ns, out.end_ns
    ids = engine_ids or [t[dbs.TRACK_ID] for t in trace.tracks().to_pylist()
                         if trace.track_info(t[dbs.TRACK_ID]).is_interval]
    out.names_events = sum(int(trace.event_count(i, a, b)) for i in ids)
    if out.names_events <= EXACT_NAMES_LIMIT:
        infos = [trace.track_info(i) for i in ids]
        out.top_names, out.names_total_ns = time_by_name(trace._cursor(), infos, a, b, TOP_N)
        return
    out.names_exact = False
    window = trace.window(a, b, RANKING_WIDTH_PX, tracks=ids, attributes=False)
    credit: dict[str, float] = defaultdict(float)
    for r in window.buckets.to_pylist():
        if r[dbs.TOP_NAME]:   # the busy time of the bucket's part inside the range (edge buckets stick out)
            s0, s1 = r[ts.START_TS], r[ts.END_TS]
            inside = max(0, min(s1, b) - max(s0, a))
            credit[r[dbs.TOP_NAME]] += r[dbs.BUSY_NS] * inside / max(s1 - s0, 1)
    for r in window.events.to_pylist():
        if r[ts.NAME]:
            credit[r[ts.NAME]] += max(0, min(r[ts.END_TS], b) - max(r[ts.START_TS], a))
    out.top_names = sorted(credit.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_N]
    out.names_total_ns = sum(credit.values())


def selection_summary(trace: Any, start_ns: int, end_ns: int) -> SelectionSummary:
    """Summarise ``[start_ns, end_ns)`` of ``trace``.

    Args:
        trace: an opened ``Trace``.
        start_ns: start of the range (clipped to the trace).
        end_ns: end of the range (clipped to the trace).

    Returns:
        The summary; figures the trace cannot provide are None.
    """
    t0, t1 = (int(t) for t in trace.time_range)
    a, b = max(int(start_ns), t0), min(int(end_ns), t1)
    if b <= a:
        a, b = int(start_ns), max(int(end_ns), int(start_ns) + 1)
    out = SelectionSummary(a, b)
    tracks = [t for t in trace.tracks().to_pylist() if t["kind"] == "engine"]
    for t in tracks:
        busy = int(trace.busy_ns(t[dbs.TRACK_ID], a, b))   # exact union of the track's intervals
        out.engines.append((t[ts.NAME], t["core"], busy, busy / (b - a)))
    _rank_names(trace, out, [t[dbs.TRACK_ID] for t in tracks])
    try:
        summary = trace.summary(a, b)
    except (TypeError, ImportError, TrnprofError):  # a Trace without range summaries: engines and names only
        return out
    out.extra = _flatten(summary)
    dma = summary.get("dma") or {}
    out.dma_bytes = dma.get("transfer_bytes")
    if out.dma_bytes is not None and b > a:
        out.dma_throughput_bytes_per_s = float(out.dma_bytes) / ((b - a) / 1e9)
    out.hfu_percent = summary.get("hfu_pct")
    try:
        out.flops = tensor_flops(trace, a, b)[0]
    except (TypeError, AttributeError, TrnprofError):
        out.flops = None
    return out
