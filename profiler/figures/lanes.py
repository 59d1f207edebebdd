"""Counter lanes under the timeline, drawn as small line charts: per-engine busy %, DMA throughput, HFU over time,
Counter tracks — any time series.

A lane is a :class:`Lane` (bucket centres and one or more named series); :func:`lane_traces` draws lanes on the
y axes ``y2``, ``y3``, ... of a timeline figure and :func:`lane_updates` / :func:`lane_updates_by_name` give the
values a zoom changes, as typed arrays.  The lanes' data come from :mod:`profiler.figures.lane_data`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from profiler.figures.timefmt import ns_to_axis
from profiler.figures.typed_arrays import decode_typed_array, typed_array

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


def trace_name(lane: Lane, series: str) -> str:
    """The name of the plotly trace drawing ``series`` of ``lane`` (unique within a figure)."""
    return f"{lane.title}: {series}"


#: A lane label's line length before it wraps (at a space or underscore), in characters.
LABEL_LINE_CHARS = 18


def _wrapped(text: str, width: int = LABEL_LINE_CHARS) -> str:
    """``text`` broken into lines of about ``width`` characters at spaces or after underscores (``<br>``)."""
    lines: list[str] = []
    line = ""
    for word in re.split(r"(?<=[ _])", text):
        if line and len(line) + len(word.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += word
    if line:
        lines.append(line.rstrip())
    return "<br>".join(lines)


def series_key(lane: Lane, width: int = LABEL_LINE_CHARS) -> str:
    """The names of a lane's series, each in its line's colour, wrapped (``""`` for a lane of one series: its
    title says it all)."""
    if len(lane.series) < 2:
        return ""
    lines: list[list[str]] = [[]]
    length = 0
    for name in lane.series:
        text = html.escape(str(name))
        if lines[-1] and length + 1 + len(str(name)) > width:
            lines.append([])
            length = 0
        colour = lane.colours.get(name, "#444")
        lines[-1].append(f'<span style="color:{colour}">{text}</span>')
        length += len(str(name)) + (1 if length else 0)
    return "<br>".join(" ".join(parts) for parts in lines)


def lane_title_annotations(lanes: Sequence[Lane], first_axis: int = 2,
                           tick_px: int = 34) -> list[dict[str, Any]]:
    """Each lane's title written horizontally in the left margin beside its lane, right-aligned like the rows'
    labels and wrapped to a few short lines (a vertical axis title longer than a short lane ran into its
    neighbours), with its series' names in their colours when it has several.  ``tick_px``: room left for the
    lane's tick labels."""
    out = []
    for k, lane in enumerate(lanes):
        axis = "y" if first_axis + k == 1 else f"y{first_axis + k}"
        key = series_key(lane)
        text = _wrapped(lane.title) + (f"<br>{key}" if key else "")
        out.append({"text": text, "xref": "paper", "x": 0, "xanchor": "right", "xshift": -tick_px,
                    "yref": f"{axis} domain", "y": 0.5, "yanchor": "middle", "showarrow": False,
                    "align": "right", "font": {"size": 9, "color": "#444"}})
    return out


def x_attributes(x_ns: np.ndarray, origin_ns: int, *, grid: bool = True) -> dict[str, Any]:
    """The x of a lane's traces in axis seconds: with ``grid``, ``x0`` and ``dx`` when the points are evenly spaced
    (a bucket grid, the usual case: nothing to ship but two numbers), else ``x`` as a float64 typed array.

    Either way every key a trace's x can have is set (``x`` to None with ``x0``/``dx``), so an update replaces
    whichever form the trace had.  Centres of integer-ns buckets may be off the grid by a nanosecond; that is
    still evenly spaced here (well under a pixel).
    """
    x = np.asarray(x_ns, dtype=np.int64)
    if grid and len(x) >= 2:
        step = (int(x[-1]) - int(x[0])) / (len(x) - 1)
        grid = x[0] + step * np.arange(len(x))
        if step > 0 and float(np.max(np.abs(x - grid))) <= max(1.0, 1e-3 * step):
            return {"x": None, "x0": ns_to_axis(int(x[0]), origin_ns), "dx": step / 1e9}
    return {"x": typed_array(np.asarray(ns_to_axis(x, origin_ns), dtype=np.float64)), "x0": 0, "dx": 1}


def decode_x(update: dict[str, Any], n_points: int) -> np.ndarray:
    """The axis x values an update or trace dict of :func:`x_attributes` form stands for (``n_points`` points)."""
    x = update.get("x")
    if x is None:
        return float(update["x0"]) + float(update["dx"]) * np.arange(n_points)
    return decode_typed_array(x) if isinstance(x, dict) else np.asarray(x, dtype=np.float64)


def lane_updates(lanes: Sequence[Lane], origin_ns: int, *, grid_x: bool = False) -> list[dict[str, Any]]:
    """Per trace drawn by :func:`lane_traces` (same order), its new x (:func:`x_attributes`; an explicit ``x``
    array unless ``grid_x``) and ``y`` (a float32 typed array)."""
    return list(lane_updates_by_name(lanes, origin_ns, grid_x=grid_x).values())


def lane_updates_by_name(lanes: Sequence[Lane], origin_ns: int, *, grid_x: bool = False) -> dict[str, dict[str, Any]]:
    """:func:`lane_updates` keyed by trace name (:func:`trace_name`), in drawing order."""
    out = {}
    for lane in lanes:
        x = x_attributes(lane.x_ns, origin_ns, grid=grid_x)
        for name, values in lane.series.items():
            out[trace_name(lane, name)] = {**x, "y": typed_array(np.asarray(values, dtype=np.float32))}
    return out


#: The update that empties a lane trace (its lane has no data at this zoom).
EMPTY_LANE = {"x": typed_array(np.zeros(0)), "x0": 0, "dx": 1, "y": typed_array(np.zeros(0, dtype=np.float32))}


def lane_traces(lanes: Sequence[Lane], origin_ns: int, first_axis: int = 2, *,
                grid_x: bool = False) -> list[go.Scatter]:
    """The line traces of ``lanes``, lane ``k`` on y axis ``y{first_axis + k}``, titled by a y-axis-like label
    (x as :func:`lane_updates` gives it)."""
    traces = []
    updates = iter(lane_updates(lanes, origin_ns, grid_x=grid_x))
    for k, lane in enumerate(lanes):
        axis = f"y{first_axis + k}"
        for name in lane.series:
            u = next(updates)
            traces.append(go.Scatter(
                **u, yaxis=axis, mode="lines", name=trace_name(lane, name),
                line={"width": 1.2, "shape": "hv", "color": lane.colours.get(name)},
                hovertemplate=f"{name}: %{{y:.3g}}{lane.unit}<extra>{lane.title}</extra>",
            ))
    return traces


def lane_axes(lanes: Sequence[Lane], first_axis: int = 2, *, titles: bool = True) -> dict[str, dict[str, Any]]:
    """Extra y-axis settings of each lane (title, range), to merge into a figure layout.  ``titles=False`` leaves
    the axis titles out (a figure of short lanes labels them with :func:`lane_title_annotations` instead)."""
    out = {}
    for k, lane in enumerate(lanes):
        key = "yaxis" if first_axis + k == 1 else f"yaxis{first_axis + k}"
        axis: dict[str, Any] = {"ticksuffix": lane.unit}
        if titles:
            axis["title"] = {"text": lane.title, "font": {"size": 10}}
        if lane.y_range is not None:
            axis["range"] = list(lane.y_range)
        else:
            axis["rangemode"] = "tozero"
        out[key] = axis
    return out
