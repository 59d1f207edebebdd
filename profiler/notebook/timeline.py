"""Timeline and utilization figures of a :class:`~profiler.Trace` for notebooks, built by the dashboard's builders.

Nothing here draws a timeline of its own: rows come from :func:`profiler.figures.raster.timeline_rows`, the data
from ``Trace.window`` (level of detail: raw events when few are in view, per-pixel buckets otherwise), the strips
from :func:`profiler.figures.raster.rasterize` and the figure from :func:`profiler.figures.timeline.
timeline_figure` — exactly the dashboard's path.  What notebooks add is what the dashboard does with its own
JavaScript: a hover layer naming the events under the pointer (:func:`hover_trace`) and a status line in the title.

:class:`TimelineBuild` keeps what a live widget needs to redraw the same figure at another zoom
(:mod:`profiler.notebook.widget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from profiler.db.window_query import MAX_WIDTH_PX
from profiler.errors import QueryError
from profiler.figures import lane_data
from profiler.figures import lanes as lanes_mod
from profiler.figures import palette as pal
from profiler.figures.fetch import drawing_window
from profiler.figures.raster import StripFrame, TimelineRow, rasterize, row_labels, timeline_rows
from profiler.figures.row_filter import RowFilter, filter_counters, filter_rows, no_match_message
from profiler.figures.selected_event import selected_event_shapes
from profiler.figures.timefmt import TIME_AXIS, format_duration, format_time, ns_to_axis
from profiler.figures.timeline import MARGIN, legend_traces, timeline_figure
from profiler.query_track import QueryTracks, query_tracks
from profiler.window import Window

if TYPE_CHECKING:
    from profiler.trace import Trace

#: Default raster width of notebook timelines (pixels across the time range; the figure follows the cell width).
DEFAULT_WIDTH_PX = 1600
#: Hover points are spread this many pixels apart along each event (plotly hovers the nearest point, within 20 px).
HOVER_STEP_PX = 16
#: At most this many hover points per figure (each carries its event's text: the bulk of a zoom's payload).
MAX_HOVER_POINTS = 2000
#: Name of the hover layer trace (the last trace of a notebook timeline).
HOVER_TRACE_NAME = "events"
#: Top margin that leaves room for the status line shown as the title.
TITLE_MARGIN_PX = 36
#: Legend wrapping estimate: entries wrap at this width (narrow enough for a 700 px notebook cell or image),
#: each entry is its symbol plus its text.
LEGEND_WIDTH_PX = 560
LEGEND_ITEM_PX = 44
LEGEND_CHAR_PX = 7
LEGEND_ROW_PX = 21


@dataclass(frozen=True)
class TimeRange:
    """A time range ``[start_ns, end_ns)``."""

    start_ns: int
    end_ns: int


@dataclass
class TimelineBuild:
    """A notebook timeline figure and what drew it."""

    figure: go.Figure
    frame: StripFrame
    rows: list[TimelineRow]
    palette: pal.CategoryPalette
    origin_ns: int
    #: Names of the lane traces, in figure order (data[1 : 1 + len(lane_names)]).
    lane_names: list[str]
    view_ns: tuple[int, int]
    #: The Counter tracks drawn as lanes (those the row filter keeps).
    counters: list[dict[str, Any]] = field(default_factory=list)
    #: The query drawn as rows above the trace's (:mod:`profiler.query_track`), if any.
    query: QueryTracks | None = None


def resolve_range(trace: Trace, start_ns: int | None, end_ns: int | None) -> tuple[int, int]:
    """``[start_ns, end_ns)`` with None replaced by the trace's own range (its end one ns further, so an instant
    at the trace's last time is drawn too); QueryError for an empty trace."""
    t0, t1 = (int(t) for t in trace.time_range)
    if t1 <= t0 and start_ns is None and end_ns is None:
        raise QueryError(f"{trace.path}: the trace has no timed events to draw")
    start = t0 if start_ns is None else start_ns
    end = t1 + 1 if end_ns is None else end_ns
    from profiler.trace import check_time

    start, end = check_time(start, "start_ns"), check_time(end, "end_ns")
    if end <= start:
        raise QueryError(f"empty time range: end_ns ({end}) must be greater than start_ns ({start})")
    return start, end


def check_width(width_px: object) -> int:
    """``width_px`` if it is a whole number of pixels the window query accepts; QueryError otherwise."""
    if isinstance(width_px, bool) or not isinstance(width_px, int | np.integer):
        raise QueryError(f"width_px must be an integer number of pixels, not {str(width_px)[:40]!r}")
    if not 1 <= int(width_px) <= MAX_WIDTH_PX:
        raise QueryError(f"width_px must be between 1 and {MAX_WIDTH_PX}, not {int(width_px)}")
    return int(width_px)


def check_span_levels(span_levels: object) -> int | None:
    """``span_levels`` if it is None or a positive whole number of levels; QueryError otherwise."""
    if span_levels is None:
        return None
    if isinstance(span_levels, bool) or not isinstance(span_levels, int | np.integer) or int(span_levels) < 1:
        raise QueryError(f"span_levels must be a positive integer (levels of each span row) or None for all, "
                         f"not {str(span_levels)[:40]!r}")
    return int(span_levels)


def check_colour_mode(color_by: object) -> str:
    """``color_by`` if it is a colour mode; QueryError naming the choices otherwise."""
    if color_by not in pal.COLOUR_MODES:
        raise QueryError(f"color_by must be one of {', '.join(pal.COLOUR_MODES)}, not {color_by!r}")
    return str(color_by)


def ranked_names(trace: Trace) -> list[str]:
    """Names (opcodes, DMA names, spans) by the time they dominate; see :func:`profiler.figures.palette.names_by_time`.
    """
    return pal.names_by_time(trace)


def track_ids(rows: Sequence[TimelineRow]) -> list[int]:
    """Every track drawn by ``rows``."""
    return [tid for r in rows for tid in r.track_ids]


def fetch_frame(trace: Trace, rows: Sequence[TimelineRow], palette: pal.CategoryPalette, color_by: str, *,
                start_ns: int, end_ns: int, width_px: int,
                query: QueryTracks | None = None) -> tuple[Window, StripFrame]:
    """``Trace.window`` of the rows' tracks over ``[start_ns, end_ns)`` at ``width_px`` (``query``'s rows merged
    in), rasterised."""
    window = drawing_window(trace, start_ns, end_ns, width_px, track_ids(rows), colour_by=color_by, query=query)
    return window, rasterize(window, rows, palette, color_by)


def hover_points(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int,
                 step_px: int = HOVER_STEP_PX) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Points along every exactly drawn event (x in axis seconds, y the row) and the hover text of each.

    Plotly hovers the nearest point, so each event gets a point in the middle of every ``step_px`` pixels it
    covers (one for a narrow event); the step widens so that there are at most :data:`MAX_HOVER_POINTS`.  Empty
    when the frame drew no events exactly or too many to list (``frame.hover_events`` is None beyond
    :data:`profiler.figures.raster.HOVER_EVENT_LIMIT`).
    """
    ev = frame.hover_events
    if not ev or not ev["start"]:
        return np.zeros(0), np.zeros(0), []
    labels = row_labels(rows)
    start = np.asarray(ev["start"], dtype=np.int64)
    end = np.maximum(np.asarray(ev["end"], dtype=np.int64), start)
    lo = np.maximum(start, frame.start_ns)
    hi = np.maximum(np.minimum(end, frame.end_ns), lo)
    step_ns = float(max(frame.resolution_ns * step_px, 1))
    counts = np.maximum(np.ceil((hi - lo) / step_ns), 1).astype(np.int64)
    if counts.sum() > MAX_HOVER_POINTS:  # keep the payload bounded: fewer points per long event
        step_ns *= counts.sum() / MAX_HOVER_POINTS
        counts = np.maximum(np.ceil((hi - lo) / step_ns), 1).astype(np.int64)
    owner = np.repeat(np.arange(len(start)), counts)
    offset = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    t = lo[owner] + (offset + 0.5) / counts[owner] * (hi[owner] - lo[owner])
    texts = []
    for i in range(len(start)):
        name = ev["name"][i] if ev["name"][i] is not None else "(unnamed)"
        source = ev["source"][i]
        text = (f"<b>{_escape(name)}</b> · {_escape(labels[ev['row'][i]])}<br>"
                f"start {format_time(int(start[i]), origin_ns)} · {format_duration(int(end[i] - start[i]))}<br>"
                f"{ev['table'][i]} id {ev['id'][i]}" + (f"<br>{_escape(source)}" if source else ""))
        texts.append(text)
    x = ns_to_axis(t, origin_ns)
    y = np.asarray(ev["row"], dtype=np.float64)[owner]
    return np.asarray(x, dtype=np.float64), y, [texts[i] for i in owner.tolist()]


def _escape(text: object) -> str:
    """Plain text for plotly hover labels (which read a little HTML)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def hover_trace(frame: StripFrame, rows: Sequence[TimelineRow], origin_ns: int) -> go.Scattergl:
    """An invisible WebGL marker layer whose hover labels name the events under the pointer."""
    x, y, text = hover_points(frame, rows, origin_ns)
    return go.Scattergl(x=x, y=y, text=text, mode="markers", name=HOVER_TRACE_NAME, showlegend=False,
                        marker={"size": 10, "opacity": 0}, hovertemplate="%{text}<extra></extra>")


def status_line(trace: Trace, frame: StripFrame, view_ns: tuple[int, int]) -> str:
    """What is in view and at which level of detail (the figure's title)."""
    exact = int(frame.exact.sum())
    detail = (f"{frame.n_events:,} events drawn exactly" if exact == len(frame.exact)
              else f"{exact} of {len(frame.exact)} rows exact, the others per-pixel summaries")
    return (f"{trace.name} · view {format_duration(view_ns[1] - view_ns[0])} at "
            f"{format_duration(frame.resolution_ns)}/px · {detail}")


def build_timeline(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                   width_px: int = DEFAULT_WIDTH_PX, color_by: str = "opcode", expand_dma: bool = False,
                   span_levels: int | None = None, rows: str | None = None, query: str | None = None,
                   lanes: bool = True, critical_path: bool = False, chain: tuple[str, int] | None = None,
                   legend: bool = True,
                   full_legend: bool = False, palette: pal.CategoryPalette | None = None,
                   fetch_ns: tuple[int, int] | None = None, fetch_width_px: int | None = None,
                   select: tuple[str, int] | None = None, query_timeout_s: float | None = None) -> TimelineBuild:
    """The timeline figure of ``trace`` over ``[start_ns, end_ns)`` (default: all of it).

    Args:
        trace: the trace.
        start_ns: first ns shown (default: the trace's first event).
        end_ns: end of the view (default: the trace's last event end).
        width_px: raster width across the view.
        color_by: ``opcode``, ``engine`` or ``layer``.
        expand_dma: one row per DMA queue instead of one per core.
        span_levels: rows for at most this many levels of each span row (a thread's nested slices; None: all).
        rows: the row filter (:mod:`profiler.figures.row_filter`: ``"Tensor, -NC1"``, ``"/^thread/"``; None:
            every row); it picks the counter lanes drawn too.
        query: SQL whose result is drawn as rows above the trace's (:mod:`profiler.query_track`: ``start_ts``,
            ``end_ts`` or ``duration_ns``, ``name``, ``track``; ``table_name`` and ``id`` name its events).
        lanes: draw the per-engine busy % lanes under the rows.
        critical_path: overlay the critical path of the view (:func:`profiler.analyses.critical_path`).
        chain: ``(table, id)`` of an instruction or DMA packet: overlay the dependency chain that ended with it
            instead (:func:`profiler.analyses.chain_to`).
        legend: legend entries for the colours.
        full_legend: name the trace's top-ranked names in the legend too, not only those in this frame (for a
            live widget, whose legend is built once).
        palette: name -> colour assignment (default: ranked by time, as the dashboard's).
        fetch_ns: range to fetch and draw when wider than the view (the live widget's prefetch buffer).
        fetch_width_px: raster width across ``fetch_ns``.
        select: ``(table, id)`` of an event to outline, with its dependency arrows (what it waited for, what
            waited on it; :mod:`profiler.figures.selected_event`), as the dashboard draws a clicked event.
        query_timeout_s: seconds ``query`` may run (default: ``Trace.sql``'s).
    """
    view = resolve_range(trace, start_ns, end_ns)
    colour = check_colour_mode(color_by)
    width_px = check_width(width_px)
    palette = palette or pal.CategoryPalette(ranked_names(trace))
    every = timeline_rows(trace.tracks(), collapse_dma=not expand_dma, span_levels=check_span_levels(span_levels))
    tracks = None if query is None else query_tracks(trace, query, timeout_s=query_timeout_s)
    if tracks is not None:
        every = tracks.timeline_rows() + every
        if not every:   # a counter query on a trace without rows: its lanes under no row
            raise QueryError(f"{trace.path}: the trace has no timeline tracks to draw under the query's lanes")
    if not every:
        raise QueryError(f"{trace.path}: the trace has no timeline tracks to draw")
    row_filter = RowFilter.parse(rows)
    drawn = filter_rows(every, row_filter)
    if not drawn:
        raise QueryError(f"{trace.path}: {no_match_message(row_filter, every)}")
    counters = filter_counters(lane_data.counter_tracks(trace.tracks())
                               + (tracks.counter_tracks() if tracks is not None else []), row_filter)
    origin = int(trace.time_range[0])
    f0, f1 = fetch_ns or view
    f_width = int(fetch_width_px or width_px)
    window, frame = fetch_frame(trace, drawn, palette, colour, start_ns=f0, end_ns=f1, width_px=f_width,
                                query=tracks)
    lane_list = lane_data.timeline_lanes(trace, drawn, window, f_width, counters, query=tracks) if lanes else []
    fig = timeline_figure(frame, drawn, origin, x_range_ns=view, lanes=lane_list, legend=False)
    lane_names = [trace_.name for trace_ in fig.data[1:]]
    if chain is not None:
        from profiler.analyses import chain_to
        from profiler.figures.analyses import critical_path_overlay

        table, event_id = check_select(chain, "chain")
        # drawn at the view's resolution, like the strips: steps of a row closer than a pixel merge, links only
        # when few steps are in view (a 769,234-step path was a 119 MB file no browser opened)
        fig.add_traces(critical_path_overlay(chain_to(trace, table, event_id), drawn, origin,
                                             (view[0], view[1], int(width_px)),
                                             name=f"chain to {table} {event_id}"))
    elif critical_path:
        from profiler.analyses import critical_path as find_path
        from profiler.figures.analyses import critical_path_overlay

        fig.add_traces(critical_path_overlay(find_path(trace, view[0], view[1]), drawn, origin,
                                             (view[0], view[1], int(width_px))))
    for lane_trace in fig.data[1:1 + len(lane_names)]:
        lane_trace.showlegend = False  # the lane's hover names its engine; the legend is for the strip colours
    bottom = MARGIN["b"]
    if legend:
        keys = legend_traces(merged_legend(frame, palette, colour) if full_legend else frame)
        fig.add_traces(keys)
        legend_px = legend_height_px([k.name for k in keys])
        bottom += legend_px
        fig.update_layout(showlegend=True, legend={"orientation": "h", "yref": "container", "y": 0,
                                                   "yanchor": "bottom", "x": 0, "font": {"size": 11}})
    fig.add_trace(hover_trace(frame, drawn, origin))
    if select is not None:
        fig.update_layout(shapes=[*fig.layout.shapes, *selection_shapes(trace, drawn, select, origin)])
    fig.update_layout(title={"text": status_line(trace, frame, view), "font": {"size": 12}, "x": 0.01},
                      margin={**MARGIN, "t": TITLE_MARGIN_PX, "b": bottom},
                      height=fig.layout.height + TITLE_MARGIN_PX - MARGIN["t"] + bottom - MARGIN["b"],
                      xaxis={"autorange": False})
    return TimelineBuild(fig, frame, drawn, palette, origin, lane_names, view, counters, tracks)


def check_select(value: Any, name: str) -> tuple[str, Any]:
    """``value`` as ``(table, id)``; QueryError naming the argument ``name`` for anything else."""
    if not isinstance(value, tuple | list) or len(value) != 2 or not isinstance(value[0], str):
        raise QueryError(f"{name} must be (table, id), e.g. ('Instruction', 42), not {str(value)[:60]!r}")
    return value[0], value[1]


def selection_shapes(trace: Trace, rows: list[TimelineRow], select: Any, origin_ns: int) -> list[dict[str, Any]]:
    """The outline and dependency arrows of the event ``select`` names (``(table, id)``, e.g. ``("Instruction",
    42)``) on the figure's ``rows``; QueryError for anything else or an event the trace does not have."""
    table, ident = check_select(select, "select")
    fields = trace.event(table, ident)
    selected = {"track_id": fields.get("track_id"), "start_ns": fields.get("start_ts"), "end_ns": fields.get("end_ts")}
    return selected_event_shapes([list(r.track_ids) for r in rows], selected, trace.flows(table, ident), origin_ns)


def legend_height_px(names: Sequence[str], width_px: int = LEGEND_WIDTH_PX) -> int:
    """Height of a horizontal legend of ``names`` wrapped at ``width_px`` (plotly packs entries left to right)."""
    if not names:
        return 0
    rows, used = 1, 0
    for name in names:
        item = LEGEND_ITEM_PX + LEGEND_CHAR_PX * len(name)
        if used and used + item > width_px:
            rows, used = rows + 1, 0
        used += item
    return rows * LEGEND_ROW_PX + LEGEND_ROW_PX // 2


def utilization_figure(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                       width_px: int = 800) -> go.Figure:
    """Busy % of every engine over time, one panel per NeuronCore (data from ``Trace.utilization``).

    The lanes are the dashboard's (:func:`profiler.figures.lanes.engine_utilization_lanes`), drawn full size:
    one point per :data:`~profiler.figures.lanes.PX_PER_POINT` pixels of ``width_px``.
    """
    view = resolve_range(trace, start_ns, end_ns)
    width = check_width(width_px)
    rows = timeline_rows(trace.tracks())
    lane_list = lane_data.engine_utilization_lanes(trace, rows, TimeRange(*view), width)
    if not lane_list:
        raise QueryError(f"{trace.path}: no engine tracks, so no engine utilization to draw")
    origin = int(trace.time_range[0])
    n = len(lane_list)
    panel_px = 160
    gap = 0.06 if n > 1 else 0.0
    height = 1.0 / n
    layout: dict[str, Any] = {
        "height": 90 + panel_px * n, "margin": {"l": 70, "r": 16, "t": 40, "b": 40},
        "title": {"text": f"{trace.name} · engine busy % ({format_duration(view[1] - view[0])})",
                  "font": {"size": 13}, "x": 0.01},
        "hovermode": "x unified", "legend": {"orientation": "h", "yanchor": "top", "y": -0.12},
        "xaxis": {**TIME_AXIS, "range": [ns_to_axis(view[0], origin), ns_to_axis(view[1], origin)],
                  "anchor": f"y{n}" if n > 1 else "y"},
    }
    for k in range(n):
        key = "yaxis" if k == 0 else f"yaxis{k + 1}"
        top = 1.0 - k * height
        layout[key] = {"domain": [max(top - height + gap / 2, 0.0), top - (gap / 2 if k else 0.0)],
                       "zeroline": False}
    for key, extra in lanes_mod.lane_axes(lane_list, first_axis=1).items():
        layout[key] = {**layout.get(key, {}), **extra}
    fig = go.Figure(data=lanes_mod.lane_traces(lane_list, origin, first_axis=1), layout=layout)
    for trace_ in fig.data:
        trace_.line.width = 1.6
    return fig


def merged_legend(frame: StripFrame, palette: pal.CategoryPalette, color_by: str,
                  top: int = len(pal.PALETTE)) -> StripFrame:
    """``frame`` with a legend naming the trace's top-ranked names too (a live widget's legend is built once and
    must name what later zooms show)."""
    if color_by != "opcode":
        return frame
    legend = {palette.slot(name): name for name in reversed(palette.ranked[:top])}
    legend.update(frame.legend)
    return replace(frame, legend=legend)
