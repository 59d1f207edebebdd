"""The timeline figure: one row per track drawn as a per-pixel strip, counter lanes below, a shared time axis.

A strip is one plotly heatmap of ``uint8`` codes (see :mod:`profiler.figures.palette`); it costs ~20 ms to draw in
the browser whatever the zoom, and a zoom ships one byte per pixel per row (:func:`strip_update`).  The data come
from :func:`profiler.figures.raster.rasterize`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from profiler.figures import palette as pal
from profiler.figures.raster import StripFrame, TimelineRow, row_labels
from profiler.figures.timefmt import TIME_AXIS, ns_to_axis
from profiler.figures.typed_arrays import typed_array

#: Height of one track row, in pixels.
ROW_HEIGHT_PX = 22
#: Margins of the timeline figure (the left one holds the row labels).
MARGIN = {"l": 170, "r": 16, "t": 8, "b": 36}


# ------------------------------------------------------------------------------------------------------------
# Figure
# ------------------------------------------------------------------------------------------------------------
def strip_update(frame: StripFrame, origin_ns: int) -> dict[str, Any]:
    """The heatmap attributes a zoom changes: codes as a uint8 typed array, x0 and dx in axis seconds."""
    return {
        "z": typed_array(frame.codes),
        "x0": ns_to_axis(frame.start_ns + frame.resolution_ns / 2, origin_ns),
        "dx": frame.resolution_ns / 1e9,
    }


def strip_heatmap(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int) -> go.Heatmap:
    """The heatmap trace drawing every row of ``frame`` (hover is handled by the caller)."""
    return go.Heatmap(
        **strip_update(frame, origin_ns),
        y0=0, dy=1,
        zmin=-0.5, zmax=pal.MAX_CODE + 0.5,
        colorscale=pal.strip_colorscale(),
        showscale=False,
        hoverinfo="none",
        xgap=0, ygap=2,
        name="tracks",
    )


def figure_height(n_rows: int, lane_heights_px: Sequence[int] = ()) -> int:
    """Height of a timeline figure with ``n_rows`` rows and lanes of the given heights."""
    return MARGIN["t"] + MARGIN["b"] + n_rows * ROW_HEIGHT_PX + sum(lane_heights_px) + 8 * len(lane_heights_px)


def timeline_layout(rows: Sequence[TimelineRow], origin_ns: int, x_range_ns: tuple[int, int],
                    n_lanes: int = 0, lane_heights_px: Sequence[int] = ()) -> dict[str, Any]:
    """Layout of the timeline: the track axis on top, one small y axis per lane below, shared time axis."""
    n = len(rows)
    height = figure_height(n, lane_heights_px)
    plot_h = height - MARGIN["t"] - MARGIN["b"]
    layout: dict[str, Any] = {
        "height": height,
        "margin": MARGIN,
        "dragmode": "zoom",
        "hovermode": "closest",
        "plot_bgcolor": "#FFFFFF",
        "showlegend": False,
        "uirevision": "timeline",
        "xaxis": {**TIME_AXIS, "range": [ns_to_axis(x_range_ns[0], origin_ns), ns_to_axis(x_range_ns[1], origin_ns)],
                  "anchor": "y" if not n_lanes else f"y{n_lanes + 1}", "side": "bottom"},
    }
    top_px = n * ROW_HEIGHT_PX
    y_top = 1.0
    y_bottom = 1.0 - top_px / plot_h if plot_h else 0.0
    labels = row_labels(rows)
    layout["yaxis"] = {
        "domain": [max(y_bottom, 0.0), y_top], "range": [n - 0.5, -0.5], "fixedrange": True,
        "tickmode": "array", "tickvals": list(range(n)), "ticktext": labels, "showgrid": False,
        "zeroline": False, "ticks": "", "tickfont": {"size": 11},
    }
    cursor = y_bottom
    for k in range(n_lanes):
        h = (lane_heights_px[k] if k < len(lane_heights_px) else 60) / plot_h
        gap = 8 / plot_h
        top = cursor - gap
        layout[f"yaxis{k + 2}"] = {"domain": [max(top - h, 0.0), max(top, 0.0)], "fixedrange": True,
                                   "zeroline": False, "tickfont": {"size": 10}, "nticks": 3}
        cursor = top - h
    # Separators between cores.
    shapes = []
    for i in range(1, n):
        if rows[i].group != rows[i - 1].group:
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": i - 0.5,
                           "y1": i - 0.5, "line": {"color": "#555", "width": 1}})
    layout["shapes"] = shapes
    return layout


def legend_traces(frame: StripFrame) -> list[go.Scatter]:
    """Invisible traces whose legend entries name the colours in ``frame`` (for standalone figures)."""
    return [go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                       marker={"color": pal.slot_colour(slot), "symbol": "square", "size": 10})
            for slot, name in sorted(frame.legend.items(), key=lambda kv: kv[1])]


def timeline_figure(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int, *,
                    x_range_ns: tuple[int, int] | None = None, lanes: Sequence[go.Scatter] = (),
                    lane_heights_px: Sequence[int] = (), legend: bool = True) -> go.Figure:
    """The whole timeline figure: the strips, counter lanes below them, a legend of the colours in view.

    Args:
        frame: the rasterised window (:func:`rasterize`).
        rows: the rows ``frame`` was rasterised for.
        origin_ns: time shown as 0 on the axis (usually the start of the trace).
        x_range_ns: visible range (default: the frame's range).
        lanes: traces of counter lanes (:func:`profiler.figures.lanes.lane_traces`), already on axes y2, y3, ...
        lane_heights_px: height of each lane axis.
        legend: add legend entries for the colours (off in the dashboard, which draws its own legend).

    Returns:
        The figure.
    """
    rng = x_range_ns or (frame.start_ns, frame.end_ns)
    n_lanes = len({getattr(t, "yaxis", "y2") for t in lanes})
    fig = go.Figure(data=[strip_heatmap(frame, rows, origin_ns), *lanes],
                    layout=timeline_layout(rows, origin_ns, rng, n_lanes, lane_heights_px))
    if legend:
        for trace in legend_traces(frame):
            fig.add_trace(trace)
        fig.update_layout(showlegend=True, legend={"orientation": "h", "y": -0.08})
    return fig
