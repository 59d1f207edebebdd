"""Counter lanes under the timeline: per-engine utilization, and any other time series, as small line charts.

A lane is a :class:`Lane` (bucket centres and one or more named series); :func:`lane_traces` draws lanes on the
y axes ``y2``, ``y3``, ... of a timeline figure and :func:`lane_updates` gives the values a zoom changes, as typed
arrays.  :func:`engine_utilization_lanes` computes the utilization lanes from a ``Trace`` (``Trace.utilization``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from profiler import db_schema as dbs
from profiler.figures import palette as pal
from profiler.figures.timefmt import ns_to_axis
from profiler.figures.typed_arrays import typed_array
from tracer import schema as ts

#: Pixels per lane point (a lane needs less detail than a strip).
PX_PER_POINT = 4
LANE_HEIGHT_PX = 56


@dataclass
class Lane:
    """One lane: a title, a unit, bucket centres (ns) and named series of the same length."""

    title: str
    unit: str
    x_ns: np.ndarray
    series: dict[str, np.ndarray] = field(default_factory=dict)
    colours: dict[str, str] = field(default_factory=dict)
    height_px: int = LANE_HEIGHT_PX
    #: Fixed y range (e.g. 0..100 for percentages); None to autoscale.
    y_range: tuple[float, float] | None = None


def lane_updates(lanes: Sequence[Lane], origin_ns: int) -> list[dict[str, Any]]:
    """Per trace drawn by :func:`lane_traces` (same order), its new ``x`` and ``y`` as typed arrays."""
    out = []
    for lane in lanes:
        x = typed_array(np.asarray(ns_to_axis(lane.x_ns, origin_ns), dtype=np.float64))
        for values in lane.series.values():
            out.append({"x": x, "y": typed_array(np.asarray(values, dtype=np.float32))})
    return out


def lane_traces(lanes: Sequence[Lane], origin_ns: int, first_axis: int = 2) -> list[go.Scatter]:
    """The line traces of ``lanes``, lane ``k`` on y axis ``y{first_axis + k}``, titled by a y-axis-like label."""
    traces = []
    updates = iter(lane_updates(lanes, origin_ns))
    for k, lane in enumerate(lanes):
        axis = f"y{first_axis + k}"
        for name in lane.series:
            u = next(updates)
            traces.append(go.Scatter(
                x=u["x"], y=u["y"], yaxis=axis, mode="lines", name=f"{lane.title}: {name}",
                line={"width": 1.2, "shape": "hv", "color": lane.colours.get(name)},
                hovertemplate=f"{name}: %{{y:.3g}}{lane.unit}<extra>{lane.title}</extra>",
            ))
    return traces


def lane_axes(lanes: Sequence[Lane], first_axis: int = 2) -> dict[str, dict[str, Any]]:
    """Extra y-axis settings of each lane (title, range), to merge into a figure layout."""
    out = {}
    for k, lane in enumerate(lanes):
        key = "yaxis" if first_axis + k == 1 else f"yaxis{first_axis + k}"
        axis: dict[str, Any] = {"title": {"text": lane.title, "font": {"size": 10}}, "ticksuffix": lane.unit}
        if lane.y_range is not None:
            axis["range"] = list(lane.y_range)
        out[key] = axis
    return out


def engine_utilization_lanes(trace: Any, rows: Sequence[Any], buffer: Any, width_px: int) -> list[Lane]:
    """One lane per core: the busy percentage of each of its engines over the buffer.

    Args:
        trace: an opened ``Trace`` (uses ``Trace.utilization``).
        rows: the timeline rows (:class:`profiler.figures.raster.TimelineRow`); their engine tracks are used.
        buffer: anything with ``start_ns``, ``end_ns`` (the time range).
        width_px: pixels across the range; a lane gets one point per PX_PER_POINT pixels.
    """
    engine_rows = [r for r in rows if r.kind == "engine"]
    if not engine_rows:
        return []
    n = max(int(width_px) // PX_PER_POINT, 1)
    ids = [r.track_ids[0] for r in engine_rows]
    util = trace.utilization(int(buffer.start_ns), int(buffer.end_ns), n, tracks=ids)
    tid = util.column(dbs.TRACK_ID).to_numpy()
    start = util.column(ts.START_TS).to_numpy()
    end = util.column(ts.END_TS).to_numpy()
    frac = util.column(dbs.BUSY_FRACTION).to_numpy()
    engine_palette = pal.CategoryPalette.for_engines()
    lanes: dict[Any, Lane] = {}
    for row in engine_rows:
        sel = tid == row.track_ids[0]
        if not sel.any():
            continue
        order = np.argsort(start[sel], kind="stable")
        x = ((start[sel] + end[sel]) // 2)[order]
        core = row.core
        lane = lanes.get(core)
        if lane is None:
            title = "busy %" if len({r.core for r in engine_rows}) == 1 else f"NC{core} busy %"
            lane = lanes[core] = Lane(title, "%", x, y_range=(0, 100))
        if len(x) != len(lane.x_ns):
            continue  # a track with different buckets cannot share the lane's x
        lane.series[row.label] = (100.0 * frac[sel][order]).astype(np.float32)
        lane.colours[row.label] = engine_palette.colour(row.engine_category)
    return [lane for lane in lanes.values() if lane.series]
