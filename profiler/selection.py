"""Summary of a time range of a trace — what the dashboard shows for a box selection or the visible range.

:func:`selection_summary` is a pure function of a ``Trace`` and a range: per-engine busy time and percentage
(``Trace.busy_ns``, exact union of intervals), the names that dominate the range (one ``Trace.window``, cost
set by pixels), and the DMA bytes, throughput, FLOPs and HFU of the range (``Trace.summary(start, end)``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from profiler import db_schema as dbs
from profiler.summary import tensor_flops
from tracer import schema as ts
from tracer.errors import TrnprofError

#: Pixels of the window used to rank names in the range.
RANKING_WIDTH_PX = 1024
TOP_N = 10


@dataclass
class SelectionSummary:
    """What one range of a trace did."""

    start_ns: int
    end_ns: int
    #: ``(track name, core, busy_ns, busy fraction)`` per engine track.
    engines: list[tuple[str, int | None, int, float]] = field(default_factory=list)
    #: ``(name, dominated_ns)``: names by the time they dominate the range, most first.
    top_names: list[tuple[str, float]] = field(default_factory=list)
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
    window = trace.window(a, b, RANKING_WIDTH_PX, attributes=False)
    credit: dict[str, float] = defaultdict(float)
    engine_ids = {t[dbs.TRACK_ID] for t in tracks}
    for r in window.buckets.to_pylist():
        if r[dbs.TOP_NAME] and (not engine_ids or r[dbs.TRACK_ID] in engine_ids):
            credit[r[dbs.TOP_NAME]] += r[dbs.BUSY_NS]
    for r in window.events.to_pylist():
        if r[ts.NAME] and (not engine_ids or r[dbs.TRACK_ID] in engine_ids):
            credit[r[ts.NAME]] += min(r[ts.END_TS], b) - max(r[ts.START_TS], a)
    out.top_names = sorted(credit.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_N]
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
