"""The memory page (``/memory``): SBUF or PSUM addresses over time, what was read, written and held live.

Neuron Explorer's Memory viewer, from the operands of a simulator recording (``profiler.analyses.memory_map``).
Zoom by dragging across the graph (time only; a double-click shows the whole trace again); ``?mem=`` and
``?start=&end=`` open a view, and the page links to the same range on the timeline.  The content is
:func:`dashboard.memory_view.build_view`.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html

from dashboard import memory_view as mv
from dashboard.app import query_values, resolve_trace_id
from dashboard.graph_config import graph_config
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from profiler.analyses.memory_map import MEMORIES


def layout(ctx: PageContext) -> Any:
    """Title, memory picker, links, headline and the graph (filled by a callback)."""
    return html.Div([
        html.H2(f"Memory of {ctx.registry.entry(ctx.trace_id).label}"),
        html.Div(className="toolbar", children=[
            dcc.RadioItems(id="mem-mem", options=[{"label": f" {m}", "value": m} for m in MEMORIES],
                           value=mv.url_mem(ctx.query), inline=True, className="radio"),
            html.A("this range on the timeline", id="mem-timeline-link", href="/", className="muted"),
            html.A("link to this view", id="mem-view-link", href=mv.MEMORY_PATH, className="muted"),
        ]),
        html.Div(id="mem-status", className="muted mem-status"),
        html.P("Each cell: an address range of one partition (y) at a time (x). Written or read: an instruction or "
               "DMA transfer wrote or read it then; live: it held data a later instruction reads. Drag across the "
               "graph to zoom in time, double-click for the whole trace.", className="muted mem-help"),
        dcc.Store(id="mem-window", data=mv.url_window(ctx.query)),
        dcc.Loading(dcc.Graph(id="mem-graph", config=graph_config(scrollZoom=False),
                              style={"height": "640px"}), delay_show=300),
    ], className="memory-page")


def page_outputs(registry: TraceRegistry, search: str | None, mem: Any, relayout: Any,
                 window: Any) -> tuple[Any, Any, Any, Any, Any]:
    """Figure, status line, timeline link, view link and window for the URL ``search``, the picked memory and a
    graph relayout (``window``: the one shown before it)."""
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return {}, html.Span(str(exc), className="error", id="mem-error"), "/", mv.MEMORY_PATH, None
    mem = mem if mem in MEMORIES else mv.url_mem(query_values(search))
    current = mv.url_window(query_values(search)) if window is None and relayout is None else \
        (tuple(window) if isinstance(window, list | tuple) and len(window) == 2 else None)
    if relayout is not None:
        current = mv.zoomed_window(relayout, trace.time_range[0], trace.time_range, current)
    view = mv.build_view(trace, mem, current)
    if view.error is not None:
        return {}, html.Span(view.error, className="error", id="mem-error"), mv.timeline_href(trace_id, current), \
            mv.memory_href(trace_id, mem, current), current
    kept = None if current is None else list(view.window)
    return view.figure, view.status, mv.timeline_href(trace_id, view.window), mv.memory_href(trace_id, mem, kept), \
        kept


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The graph follows the URL, the memory picker and zooms on the graph."""

    @app.callback(Output("mem-graph", "figure"), Output("mem-status", "children"),
                  Output("mem-timeline-link", "href"), Output("mem-view-link", "href"), Output("mem-window", "data"),
                  Input("url", "search"), Input("mem-mem", "value"), Input("mem-graph", "relayoutData"),
                  State("mem-window", "data"))
    def _show(search: str | None, mem: Any, relayout: Any, window: Any) -> Any:
        return page_outputs(registry, search, mem, relayout, window)
