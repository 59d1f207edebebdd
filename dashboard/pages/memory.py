"""The memory page (``/memory``): SBUF or PSUM addresses over time, what was read, written and held live.

Neuron Explorer's Memory viewer, from the operands of a simulator recording (``profiler.analyses.memory_map``).
Zoom by dragging across the graph (time only; a double-click shows the whole trace again); a click on a cell
lists who touched its bytes then, who wrote the data they held and who read it (``profiler.analyses.memory_cell``),
each linked to the timeline and its source line; ``?mem=`` and
``?start=&end=`` open a view, and the page links to the same range on the timeline.  The content is
:func:`dashboard.memory_view.build_view`.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, callback_context, dcc, html, no_update

from dashboard import memory_view as mv
from dashboard.app import query_values, resolve_trace_id
from dashboard.graph_config import graph_config
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from profiler.analyses.memory_map import MEMORIES, capacity


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
               "graph to zoom in time, double-click for the whole trace; click a cell to see who wrote and read "
               "its bytes.", className="muted mem-help"),
        dcc.Store(id="mem-window"),
        dcc.Store(id="mem-zoom"),
        dcc.Store(id="mem-top"),
        dcc.Loading(dcc.Graph(id="mem-graph", config=graph_config(scrollZoom=False),
                              style={"height": "640px"}), delay_show=300),
        dcc.Loading(html.Div(html.P("Click the map to see who wrote and read the bytes there.", className="muted"),
                             id="mem-cell", className="panel mem-cell"), delay_show=300),
    ], className="memory-page")


def page_outputs(registry: TraceRegistry, search: str | None, mem: Any, relayout: Any,
                 window: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Figure, status line, timeline link, view link, window and the map's top address (what a click's row stands
    for) for the URL ``search``, the picked memory and a
    graph relayout (``window``: the one shown before it, :data:`dashboard.memory_view.WHOLE` for the whole trace,
    None before the first).  A relayout that does not change the time axis (the
    graph's first autosize, ...) changes nothing (the browser drops those already: :data:`ZOOM_JS`)."""
    if relayout is not None and not mv.is_zoom(relayout):
        return (no_update,) * 6
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return {}, html.Span(str(exc), className="error", id="mem-error"), "/", mv.MEMORY_PATH, None, None
    mem = mem if mem in MEMORIES else mv.url_mem(query_values(search))
    current = mv.shown_window(window, search)
    if relayout is not None:
        current = mv.zoomed_window(relayout, trace.time_range[0], trace.time_range, current)
    view = mv.build_view(trace, mem, current)
    if view.error is not None:
        return view.figure or {}, html.Span(view.error, className="error", id="mem-error"), \
            mv.timeline_href(trace_id, current), mv.memory_href(trace_id, mem, current), \
            mv.WHOLE if current is None else list(current), None
    kept = None if current is None else list(view.window)
    return view.figure, view.status, mv.timeline_href(trace_id, view.window), mv.memory_href(trace_id, mem, kept), \
        mv.WHOLE if kept is None else kept, view.top


#: In the browser: a graph relayout that changes the time axis goes to ``mem-zoom``, any other (the graph's first
#: autosize, ...) is dropped there.  Sent to the server, the autosize of a first draw could overtake a zoom made
#: at once: Dash keeps only the latest request's answer, which would be the autosize's "nothing changed".
ZOOM_JS = """function (relayout) {
    var keys = relayout ? Object.keys(relayout) : [];
    for (var i = 0; i < keys.length; i++) {
        if (keys[i].indexOf('xaxis.range') === 0 || keys[i] === 'xaxis.autorange') { return relayout; }
    }
    return window.dash_clientside.no_update;
}"""


def cell_outputs(registry: TraceRegistry, search: str | None, mem: Any, window: Any, click: Any,  # noqa: PLR0917
                 top: Any = None) -> Any:
    """The cell panel for a click on the graph (``window``: the page's window store; ``top``: the map's, by
    default the memory's capacity)."""
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return html.Span(str(exc), className="error", id="mem-cell-error")
    mem = mem if mem in MEMORIES else mv.url_mem(query_values(search))
    shown = mv.shown_window(window, search) or trace.time_range
    rows_cover = top if isinstance(top, int) and not isinstance(top, bool) and top > 0 else capacity(trace, mem)
    cell = mv.clicked_cell(click, trace.time_range[0], shown, rows_cover)
    if cell is None:
        return no_update
    return mv.cell_panel(trace, trace_id, mem, cell)


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The graph follows the URL, the memory picker and zooms on the graph; a click explains a cell."""
    app.clientside_callback(ZOOM_JS, Output("mem-zoom", "data"), Input("mem-graph", "relayoutData"),
                            prevent_initial_call=True)

    @app.callback(Output("mem-graph", "figure"), Output("mem-status", "children"),
                  Output("mem-timeline-link", "href"), Output("mem-view-link", "href"), Output("mem-window", "data"),
                  Output("mem-top", "data"), Input("url", "search"), Input("mem-mem", "value"),
                  Input("mem-zoom", "data"), State("mem-window", "data"))
    def _show(search: str | None, mem: Any, zoom: Any, window: Any) -> Any:
        zoomed = any(t.get("prop_id") == "mem-zoom.data" for t in callback_context.triggered)
        return page_outputs(registry, search, mem, zoom if zoomed else None, window)

    @app.callback(Output("mem-cell", "children"), Input("mem-graph", "clickData"), State("url", "search"),
                  State("mem-mem", "value"), State("mem-window", "data"), State("mem-top", "data"),
                  prevent_initial_call=True)
    def _cell(click: Any, search: str | None, mem: Any, window: Any, top: Any) -> Any:
        return cell_outputs(registry, search, mem, window, click, top)
