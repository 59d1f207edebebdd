"""The timeline figure: one row per track drawn as a per-pixel strip, counter lanes below, a shared time axis.

The strips of all rows are one plotly ``image`` trace: a palette PNG with one pixel per strip code (see
:mod:`profiler.figures.palette` and :mod:`profiler.figures.strip_png`).  The browser decodes and scales it natively,
so drawing costs the same whatever the zoom, and a zoom ships the compressed codes (:func:`strip_update`), a few
tens of KB.  The data come from :func:`profiler.figures.raster.rasterize`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from profiler.figures import palette as pal
from profiler.figures.lanes import Lane, lane_axes, lane_title_annotations, lane_traces
from profiler.figures.raster import StripFrame, TimelineRow, row_labels
from profiler.figures.strip_png import strip_data_uri
from profiler.figures.timefmt import TIME_AXIS, ns_to_axis

#: Height of one track row, in pixels.
ROW_HEIGHT_PX = 22
#: White gap between two rows of the same core, in pixels.
ROW_GAP_PX = 2
#: Margins of the timeline figure (px): the left one holds the row labels, the top one the modebar (which would
#: otherwise cover the first row's right end, all of it in a narrow window).
MARGIN = {"l": 170, "r": 16, "t": 30, "b": 36}
#: Axis setting that spares plotly measuring every tick label against the figure's edges on every redraw.
NO_LABEL_CHECK = {"ticklabeloverflow": "allow"}
#: Vertical gap above each lane, in pixels.
LANE_GAP_PX = 10


# ------------------------------------------------------------------------------------------------------------
# Figure
# ------------------------------------------------------------------------------------------------------------
def strip_update(frame: StripFrame, origin_ns: int) -> dict[str, Any]:
    """The strip trace's attributes a zoom changes: the codes as a palette PNG (``source``), ``x0`` and ``dx`` in
    axis seconds (pixel ``i`` of the image is centred on ``x0 + i * dx``)."""
    return {
        "source": strip_data_uri(frame.codes),
        "x0": ns_to_axis(frame.start_ns + frame.resolution_ns / 2, origin_ns),
        "dx": frame.resolution_ns / 1e9,
    }


def strip_trace(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int) -> go.Image:
    """The image trace drawing every row of ``frame``: one image pixel per strip code, one image row per timeline
    row (``y0=0, dy=1``), scaled up without smoothing (hover is handled by the caller)."""
    return go.Image(**strip_update(frame, origin_ns), y0=0, dy=1, hoverinfo="none", name="tracks")


def figure_height(n_rows: int, lane_heights_px: Sequence[int] = ()) -> int:
    """Height of a timeline figure with ``n_rows`` rows and lanes of the given heights."""
    lanes = sum(lane_heights_px) + LANE_GAP_PX * len(lane_heights_px)
    return MARGIN["t"] + MARGIN["b"] + n_rows * ROW_HEIGHT_PX + lanes


def separator_shapes(groups: Sequence[str]) -> list[dict[str, Any]]:
    """Horizontal lines between rows, given each row's group: dark between groups (cores), white (a gap) between
    rows of the same group."""
    return [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": i - 0.5, "y1": i - 0.5,
             "line": {"color": "#555", "width": 1} if groups[i] != groups[i - 1] else
             {"color": "#FFFFFF", "width": ROW_GAP_PX}}
            for i in range(1, len(groups))]


def timeline_layout(rows: Sequence[TimelineRow], origin_ns: int, x_range_ns: tuple[int, int],
                    lane_heights_px: Sequence[int] = (), plot_width_px: int | None = None) -> dict[str, Any]:
    """Layout of the timeline: the track axis on top, one small y axis per lane below, a shared time axis.

    With ``plot_width_px`` the figure has that fixed plot-area width (no autosize: plotly then emits no
    ``autosize`` relayout after each zoom, which would hide the zoom's own relayout from a Dash callback).
    """
    n = len(rows)
    n_lanes = len(lane_heights_px)
    height = figure_height(n, lane_heights_px)
    plot_h = height - MARGIN["t"] - MARGIN["b"]
    layout: dict[str, Any] = {
        "height": height,
        "margin": MARGIN,
        "dragmode": "zoom",
        "selectdirection": "h",  # Box Select picks a time range: rows are not part of it
        "hovermode": "closest",
        "plot_bgcolor": "#FFFFFF",
        "showlegend": False,
        "uirevision": "timeline",
        **({"autosize": False, "width": plot_width_px + MARGIN["l"] + MARGIN["r"]} if plot_width_px else {}),
        "xaxis": {**TIME_AXIS, "range": [ns_to_axis(x_range_ns[0], origin_ns), ns_to_axis(x_range_ns[1], origin_ns)],
                  "anchor": "y" if not n_lanes else f"y{n_lanes + 1}", "side": "bottom", **NO_LABEL_CHECK},
    }
    y_bottom = 1.0 - n * ROW_HEIGHT_PX / plot_h if plot_h else 0.0
    layout["yaxis"] = {
        # scaleanchor False: an image trace would otherwise tie the row axis's scale to the time axis's
        "domain": [max(y_bottom, 0.0), 1.0], "range": [n - 0.5, -0.5], "fixedrange": True, "scaleanchor": False,
        "tickmode": "array", "tickvals": list(range(n)), "ticktext": row_labels(rows), "showgrid": False,
        "zeroline": False, "ticks": "", "tickfont": {"size": 11}, **NO_LABEL_CHECK,
    }
    cursor = y_bottom
    for k, h_px in enumerate(lane_heights_px):
        top = cursor - LANE_GAP_PX / plot_h
        bottom = top - h_px / plot_h
        layout[f"yaxis{k + 2}"] = {"domain": [max(bottom, 0.0), max(top, 0.0)], "fixedrange": True,
                                   "zeroline": False, "tickfont": {"size": 9}, "nticks": 3, **NO_LABEL_CHECK}
        cursor = bottom
    layout["shapes"] = separator_shapes([r.group for r in rows])
    return layout


def range_select_trace(x_range_ns: tuple[int, int], origin_ns: int) -> go.Scatter:
    """An invisible trace that makes the figure box-selectable: plotly offers Box Select (and reports a selected
    time range) only when some trace has selectable points, which the strips image and the lanes' lines are not.
    Add it last, so the indices of the other traces do not move."""
    x = [ns_to_axis(x_range_ns[0], origin_ns), ns_to_axis(x_range_ns[1], origin_ns)]
    return go.Scatter(x=x, y=[0, 0], mode="markers", name="range select", showlegend=False, hoverinfo="skip",
                      marker={"opacity": 0, "size": 1}, selected={"marker": {"opacity": 0}},
                      unselected={"marker": {"opacity": 0}})


def legend_traces(frame: StripFrame) -> list[go.Scatter]:
    """Invisible traces whose legend entries name the colours in ``frame`` (for standalone figures)."""
    return [go.Scatter(x=[None], y=[None], mode="markers", name=name, showlegend=True,
                       marker={"color": pal.slot_colour(slot), "symbol": "square", "size": 10})
            for slot, name in sorted(frame.legend.items(), key=lambda kv: kv[1])]


def timeline_figure(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int, *,
                    x_range_ns: tuple[int, int] | None = None, lanes: Sequence[Lane] = (),
                    legend: bool = True, plot_width_px: int | None = None, grid_x: bool = False) -> go.Figure:
    """The whole timeline figure: the strips, counter lanes below them, a legend of the colours in view.

    Args:
        frame: the rasterised window (:func:`profiler.figures.raster.rasterize`).
        rows: the rows ``frame`` was rasterised for.
        origin_ns: time shown as 0 on the axis (usually the start of the trace).
        x_range_ns: visible range (default: the frame's range).
        lanes: counter lanes (:mod:`profiler.figures.lanes`) drawn under the rows.
        legend: add legend entries for the colours (off in the dashboard, which draws its own legend).
        plot_width_px: fixed width of the plot area (default: follow the page).
        grid_x: give evenly spaced lanes ``x0``/``dx`` instead of an ``x`` array (what the dashboard's zoom
            updates send: :func:`profiler.figures.lanes.x_attributes`).

    Returns:
        The figure; trace 0 is the strips heatmap, then one trace per lane series.
    """
    rng = x_range_ns or (frame.start_ns, frame.end_ns)
    layout = timeline_layout(rows, origin_ns, rng, [lane.height_px for lane in lanes], plot_width_px)
    for key, extra in lane_axes(lanes, titles=False).items():
        layout[key] = {**layout.get(key, {}), **extra}
    if lanes:  # titles in the left margin, horizontal: a vertical title is longer than a short lane
        layout["annotations"] = [*layout.get("annotations", []), *lane_title_annotations(lanes)]
    fig = go.Figure(data=[strip_trace(frame, rows, origin_ns), *lane_traces(lanes, origin_ns, grid_x=grid_x)],
                    layout=layout)
    if legend:
        for trace in legend_traces(frame):
            fig.add_trace(trace)
        fig.update_layout(showlegend=True, legend={"orientation": "h", "y": -0.15})
    return fig
