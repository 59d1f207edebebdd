"""The rich HTML view of a :class:`~profiler.Trace` in a notebook (``Trace._repr_html_``).

Name, kernel, architecture, duration, event counts per table and a per-engine utilization table.  Every number
comes from the database's track statistics and its level-of-detail index (``Trace.utilization`` at a few
buckets), so showing a trace of 10^9 events costs a few small queries.  Every string is HTML-escaped: trace
names, metadata and track names come from files the user did not necessarily write.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from profiler import db_schema as dbs
from profiler.figures.timefmt import format_duration
from profiler.overview import labelled_events
from tracer import schema as ts
from tracer.errors import TrnprofError

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Buckets across the trace when summing busy time from the index (any count is exact; few is cheap).
UTILIZATION_BUCKETS = 16
#: Display names of the tables counted in the event counts, in display order.
_ENGINE_KIND = "engine"
_DMA_KIND = "dma_queue"
_STYLE = ("<style>.trnprof-trace table{border-collapse:collapse;margin:4px 0 8px 0}"
          ".trnprof-trace td,.trnprof-trace th{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}"
          ".trnprof-trace td:first-child,.trnprof-trace th:first-child{text-align:left}"
          ".trnprof-trace .bar{display:inline-block;height:9px;background:#4C78A8;vertical-align:middle}</style>")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def busy_by_track(trace: Trace, track_ids: list[int], start_ns: int, end_ns: int) -> dict[int, float]:
    """Union busy ns of each track over ``[start_ns, end_ns)``, summed from a few index buckets."""
    if not track_ids or end_ns <= start_ns:
        return {}
    util = trace.utilization(start_ns, end_ns, UTILIZATION_BUCKETS, tracks=track_ids)
    busy: dict[int, float] = defaultdict(float)
    for tid, s, e, frac in zip(util.column(dbs.TRACK_ID).to_pylist(), util.column(ts.START_TS).to_pylist(),
                               util.column(ts.END_TS).to_pylist(), util.column(dbs.BUSY_FRACTION).to_pylist(),
                               strict=True):
        busy[tid] += frac * (e - s)
    return dict(busy)


def trace_facts(trace: Trace) -> dict[str, Any]:
    """What the HTML view shows, as plain values: header facts, event counts, engine rows, DMA summary."""
    meta = trace.metadata
    overview = trace.overview()
    t0, t1 = overview["start_ns"], overview["end_ns"]
    tracks = trace.tracks().to_pylist()
    engines = [t for t in tracks if t[dbs.KIND] == _ENGINE_KIND]
    queues = [t for t in tracks if t[dbs.KIND] == _DMA_KIND]
    busy = busy_by_track(trace, [t[dbs.TRACK_ID] for t in engines + queues], t0, t1)
    span = max(t1 - t0, 1)
    cores = {t[dbs.CORE] for t in engines}
    engine_rows = [{
        "engine": t[ts.NAME] if len(cores) <= 1 else f"NC{t[dbs.CORE]} {t[ts.NAME]}",
        "active_ns": busy.get(t[dbs.TRACK_ID], 0.0),
        "busy_pct": 100.0 * busy.get(t[dbs.TRACK_ID], 0.0) / span,
        "instructions": int(t[dbs.EVENT_COUNT] or 0),
    } for t in engines]
    dma = None
    if queues:
        mean = sum(busy.get(t[dbs.TRACK_ID], 0.0) for t in queues) / len(queues)
        dma = {"queues": len(queues), "mean_busy_pct": 100.0 * mean / span,
               "packets": sum(int(t[dbs.EVENT_COUNT] or 0) for t in queues)}
    return {
        "name": trace.name, "path": str(trace.path), "kernel": meta.get("profile_name"),
        "arch": meta.get("arch"), "instance": meta.get("instance_type"),
        "simulated": meta.get("is_simulation"), "params": meta.get("kernel_params"),
        "duration_ns": t1 - t0, "start_ns": t0, "end_ns": t1, "tracks": len(tracks),
        "counts": labelled_events(overview["events"]),
        "engines": engine_rows, "dma": dma,
    }


def trace_html(trace: Trace) -> str:
    """The HTML view of ``trace``; a one-line message instead when the trace cannot be read (closed, damaged)."""
    try:
        f = trace_facts(trace)
    except TrnprofError as exc:
        return f"<div class='trnprof-trace'><b>{_e(trace.name)}</b>: {_e(str(exc).splitlines()[0])}</div>"
    head = [("trace", f["name"]), ("kernel", f["kernel"]), ("arch", f["arch"]),
            ("duration", format_duration(f["duration_ns"])),
            ("source", "simulated NeuronCore" if f["simulated"] else None), ("parameters", f["params"]),
            ("path", f["path"])]
    lines = "".join(f"<tr><th>{_e(k)}</th><td style='text-align:left'>{_e(v)}</td></tr>"
                    for k, v in head if v not in (None, ""))
    counts = ", ".join(f"{v:,} {_e(k)}" for k, v in f["counts"].items()) or "no events"
    parts = [_STYLE, "<div class='trnprof-trace'>", f"<table>{lines}",
             f"<tr><th>events</th><td style='text-align:left'>{counts} on {f['tracks']} tracks</td></tr></table>"]
    if f["engines"]:
        rows = "".join(
            f"<tr><td>{_e(r['engine'])}</td><td>{_e(format_duration(r['active_ns']))}</td>"
            f"<td>{r['busy_pct']:.1f}%</td><td><span class='bar' style='width:{min(r['busy_pct'], 100.0):.0f}px'>"
            f"</span></td><td>{r['instructions']:,}</td></tr>" for r in f["engines"])
        if f["dma"]:
            d = f["dma"]
            rows += (f"<tr><td>DMA ({d['queues']} queues, mean)</td><td></td><td>{d['mean_busy_pct']:.1f}%</td>"
                     f"<td><span class='bar' style='width:{min(d['mean_busy_pct'], 100.0):.0f}px'></span></td>"
                     f"<td>{d['packets']:,} packets</td></tr>")
        parts.append("<table><tr><th>engine</th><th>active</th><th>busy</th><th></th><th>instructions</th></tr>"
                     f"{rows}</table>")
    parts.append("</div>")
    return "".join(parts)
