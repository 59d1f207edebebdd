"""The live timeline: a ``plotly.graph_objects.FigureWidget`` that re-queries ``Trace.window`` when the user zooms
or pans, so a trace of any size is explorable in a notebook at a cost set by pixels, not events.

The widget observes its x-axis range.  On a change, :func:`update_widget` (a plain function: tests call it, or
just set ``widget.layout.xaxis.range``, without any notebook front end) decides whether the data in hand still
serve the new view — a *buffer* three times the view wide, at the view's resolution rounded up to a power of two,
planned by :mod:`profiler.figures.viewport` exactly as the dashboard plans it — and if not fetches a new buffer,
rasterises it with the dashboard's builders and replaces the strips (one byte per pixel per row), the lanes, the
hover layer and the status line in one batch update.  A double click (autorange) goes back to the whole trace.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from profiler.errors import CommandError, QueryError
from profiler.figures import lane_data
from profiler.figures import lanes as lanes_mod
from profiler.figures.palette import CategoryPalette
from profiler.figures.raster import StripFrame
from profiler.figures.timefmt import ns_to_axis
from profiler.figures.timeline import strip_update
from profiler.figures.viewport import Buffer, clamp_view, needs_fetch, plan_buffer, view_from_axis_range
from profiler.notebook.timeline import (
    DEFAULT_WIDTH_PX,
    HOVER_TRACE_NAME,
    TimelineBuild,
    build_timeline,
    check_colour_mode,
    check_width,
    fetch_frame,
    hover_points,
    resolve_range,
    status_line,
)
from tracer.errors import TrnprofError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from profiler.trace import Trace

NOTEBOOK_EXTRA = "pip install 'trnprof[notebook]'"


class LiveTimeline:
    """What one live widget shows and holds: its trace, rows, colours, buffer and the last frame drawn.

    Attributes:
        view: the visible range, ns.
        buffer: the fetched range and its resolution.
        frame: the last rasterised buffer.
        fetches: number of ``Trace.window`` queries made since the widget was built.
        error: the last error a zoom hit (shown in the title too), or None.
    """

    def __init__(self, trace: Trace, build: TimelineBuild, buffer: Buffer, *, width_px: int, color_by: str,
                 lanes: bool) -> None:
        self.trace = trace
        self.rows = build.rows
        self.counters = build.counters
        self.query = build.query
        self.palette = build.palette
        self.origin_ns = build.origin_ns
        self.lane_names = build.lane_names
        self.trace_range = (int(trace.time_range[0]), int(trace.time_range[1]))
        self.width_px = width_px
        self.color_by = color_by
        self.lanes = lanes
        self.view = build.view_ns
        self.buffer = buffer
        self.frame: StripFrame = build.frame
        self.fetches = 1
        self.error: str | None = None
        self.setting_axis = False

    def view_from_axis(self, x_range: Any) -> tuple[int, int] | None:
        """The clamped ns view of a plotly x range (axis seconds); None for anything that is not a range."""
        view = view_from_axis_range(x_range, self.origin_ns)
        return None if view is None else clamp_view(*view, self.trace_range)


def update_widget(widget: go.FigureWidget, live: LiveTimeline, x_range: Any = None, *,
                  autorange: bool = False) -> bool:
    """Show ``x_range`` (axis seconds; ``autorange`` for the whole trace) on ``widget``, re-querying when needed.

    Returns:
        True when a new buffer was fetched and drawn.
    """
    if autorange:
        view: tuple[int, int] | None = live.trace_range
        axis = [ns_to_axis(live.trace_range[0], live.origin_ns), ns_to_axis(live.trace_range[1], live.origin_ns)]
        live.setting_axis = True  # our own axis change must not re-enter through the observer
        try:
            with widget.batch_update():
                widget.layout.xaxis.autorange = False
                widget.layout.xaxis.range = axis
        finally:
            live.setting_axis = False
    else:
        view = live.view_from_axis(x_range)
    if view is None:
        return False
    live.view = view
    if not needs_fetch(live.buffer, view, live.width_px):
        return False
    buffer = plan_buffer(view, live.width_px, live.trace_range)
    try:
        window, frame = fetch_frame(live.trace, live.rows, live.palette, live.color_by,
                                    start_ns=buffer.start_ns, end_ns=buffer.end_ns, width_px=buffer.width_px,
                                    query=live.query)
        lane_list = (lane_data.timeline_lanes(live.trace, live.rows, window, buffer.width_px, live.counters,
                                              query=live.query)
                     if live.lanes else [])
    except TrnprofError as exc:
        live.error = str(exc)
        widget.layout.title.text = f"cannot redraw this view: {live.error}"
        return False
    live.buffer, live.frame, live.error = buffer, frame, None
    live.fetches += 1
    _draw(widget, live, frame, lane_list)
    return True


def _draw(widget: go.FigureWidget, live: LiveTimeline, frame: StripFrame, lane_list: list[lanes_mod.Lane]) -> None:
    """Replace the strips, lanes, hover layer and status line of ``widget`` in one message to the front end."""
    lane_values = lanes_mod.lane_updates_by_name(lane_list, live.origin_ns)
    x, y, text = hover_points(frame, live.rows, live.origin_ns)
    with widget.batch_update():
        widget.data[0].update(strip_update(frame, live.origin_ns))
        for trace_ in widget.data[1:1 + len(live.lane_names)]:
            values = lane_values.get(trace_.name)
            if values is not None:
                trace_.update(values)
            else:  # the lane has no points at this zoom (a track with another bucket grid)
                trace_.update(x=[], y=[])
        hover = next(t for t in reversed(widget.data) if t.name == HOVER_TRACE_NAME)
        hover.update(x=x, y=y, text=text)
        widget.layout.title.text = status_line(live.trace, frame, live.view)


def _require_widgets() -> None:
    try:
        import anywidget  # noqa: F401
        import ipywidgets  # noqa: F401
    except ImportError as exc:
        raise CommandError(f"the live timeline needs ipywidgets and anywidget ({exc.name} is missing): "
                           f"{NOTEBOOK_EXTRA}") from None


def make_widget(trace: Trace, start_ns: int | None = None, end_ns: int | None = None, *,
                width_px: int = DEFAULT_WIDTH_PX, color_by: str = "opcode", expand_dma: bool = False,
                span_levels: int | None = None, rows: str | None = None, query: str | None = None,
                lanes: bool = True, palette: CategoryPalette | None = None) -> go.FigureWidget:
    """A live timeline of ``trace`` (see the module docstring); its state is ``widget.trnprof_live``."""
    _require_widgets()
    colour = check_colour_mode(color_by)
    trace_range = (int(trace.time_range[0]), int(trace.time_range[1]))
    asked = resolve_range(trace, start_ns, end_ns)
    if asked[1] <= trace_range[0] or asked[0] >= trace_range[1]:
        raise QueryError(f"the view [{asked[0]}, {asked[1]}) ns is outside the trace's range [{trace_range[0]}, "
                         f"{trace_range[1]}) ns (see Trace.time_range); the live timeline only shows the trace")
    view = clamp_view(*asked, trace_range)
    width = check_width(width_px)
    buffer = plan_buffer(view, width, trace_range)
    build = build_timeline(trace, *view, width_px=width, color_by=colour, expand_dma=expand_dma,
                           span_levels=span_levels, rows=rows, query=query, lanes=lanes,
                           full_legend=True, palette=palette, fetch_ns=(buffer.start_ns, buffer.end_ns),
                           fetch_width_px=buffer.width_px)
    live = LiveTimeline(trace, build, buffer, width_px=width, color_by=colour, lanes=lanes)
    widget = _widget_class()(build.figure)
    widget._trnprof_live = live

    def on_axis(_layout: Any, x_range: Any, autorange: Any) -> None:
        if live.setting_axis:
            return
        if autorange is True:
            update_widget(widget, live, autorange=True)
        else:
            update_widget(widget, live, x_range)

    widget.layout.on_change(on_axis, "xaxis.range", "xaxis.autorange")
    return widget


@functools.cache
def _widget_class() -> type:
    """``FigureWidget`` with a ``trnprof_live`` property (plotly refuses unknown public attributes), made on first
    use so that importing this module does not import the widget libraries."""
    import plotly.graph_objects as go

    class TimelineWidget(go.FigureWidget):
        """A live trnprof timeline (:func:`make_widget`)."""

        @property
        def trnprof_live(self) -> LiveTimeline:
            """What the widget shows and holds: view, buffer, last frame, number of queries."""
            return self._trnprof_live

        def __repr__(self) -> str:  # plotly's repr dumps every data array; a notebook's text/plain wants a line
            live = self._trnprof_live
            return (f"TimelineWidget(trace={live.trace.name!r}, view_ns={live.view}, "
                    f"resolution_ns={live.buffer.resolution_ns}, fetches={live.fetches})")

    return TimelineWidget
