"""The timeline page: per-track strips with level-of-detail zoom, counter lanes, hover, details, flows, search,
selection summary, keyboard navigation.

The callbacks here are thin: each reads its inputs, calls a plain function (:mod:`dashboard.timeline_logic`,
:mod:`dashboard.timeline_picks`, :mod:`dashboard.details`, :mod:`dashboard.search_logic`,
:mod:`dashboard.selection_view`) and returns what it built; those functions check what the browser sent.

The graph is not a ``dcc.Graph``: ``assets/trnprof.js`` draws it with plotly.js in the ``timeline-graph`` div from
the ``tl-draw`` store (a whole figure, or the arrays a zoom changes, applied with one ``Plotly.update``) and reports
the graph's zooms, clicks and box selections into the ``tl-relayout``, ``tl-click`` and ``tl-range`` stores.  A
``dcc.Graph`` re-renders its whole figure after every zoom (it copies the new axis range into its ``figure`` prop,
which makes plotly draw everything again before the zoom's request even leaves); drawing it directly halves the
browser's work per zoom (BENCHMARKS.md, Dashboard).  Hover, the tooltip and the W/A/S/D keys run in the browser too.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any

import dash
from dash import ALL, ClientsideFunction, Dash, Input, Output, State, ctx, dcc, html

from dashboard import details as det
from dashboard import markers as mk
from dashboard import search_logic as srch
from dashboard import timeline_logic as tl
from dashboard import timeline_picks as picks
from dashboard import timeline_state as tls
from dashboard.analysis_views import ChainGraphs, CriticalPathOverlays, chain_panel
from dashboard.app import open_served, query_values
from dashboard.calltree_view import CALLTREE_PATH, view_calltree_href
from dashboard.errors import public_message
from dashboard.export import EXPORT_TABLES, MAX_EXPORT_ROWS, view_export_hrefs
from dashboard.graph_config import graph_config
from dashboard.inputs import is_checked
from dashboard.links import (
    CHAIN_PARAM,
    COLOUR_PARAM,
    CRITICAL_PARAM,
    DMA_PARAM,
    LEVELS_PARAM,
    MARKERS_PARAM,
    QUERY_PARAM,
    SEARCH_PARAM,
    SELECT_PARAM,
    TRACKS_PARAM,
    query_bar_hrefs,
    query_example_href,
)
from dashboard.memory_view import MEMORY_PATH, view_memory_href
from dashboard.pages import PageContext
from dashboard.pages.timeline_markers import register_marker_callbacks
from dashboard.pages.timeline_search import register_search_callbacks
from dashboard.registry import NothingToShowYet, TraceRegistry, UnknownTraceError
from dashboard.selection_view import selection_outputs
from profiler.figures import palette as pal
from profiler.figures.row_filter import MAX_FILTER_CHARS
from tracer.errors import TrnprofError

GRAPH_ID = "timeline-graph"
GRAPH_CONFIG = graph_config(scrollZoom=True, doubleClick="autosize", responsive=False,
                            modeBarButtonsToRemove=["lasso2d", "autoScale2d", "toImage"])


#: The view's CSV exports: (table, link text, what a row is), in :data:`dashboard.export.EXPORT_TABLES` order.
EXPORT_LINKS = [(t, label, what) for t, (label, what) in zip(EXPORT_TABLES, (
    ("instructions", "instruction"), ("DMA packets", "DMA packet"), ("spans", "span")), strict=True)]


def layout(ctx_: PageContext) -> Any:
    """Toolbar, legend, the graph, the hover tooltip, and the details / selection / search panels (the options as
    the URL sets them: a link to a view)."""
    url_options = options_from_url(ctx_.query)
    return html.Div(className="timeline-page", children=[
        dcc.Store(id="tl-state"),
        dcc.Store(id="tl-view"),
        dcc.Store(id="tl-nav"),
        dcc.Store(id="tl-selected"),
        dcc.Store(id="tl-size"),
        dcc.Store(id="tl-draw"),
        dcc.Store(id="tl-drawn"),
        dcc.Store(id="tl-relayout"),
        dcc.Store(id="tl-click"),
        dcc.Store(id="tl-range"),
        # an event the URL selects (?select=Instruction:42: a link to a view), selected once the timeline is drawn
        dcc.Store(id="tl-sel-auto", data=ctx_.query.get(SELECT_PARAM, "")[:100]),
        dcc.Store(id="tl-chain", data=url_options.chain),   # the event whose dependency chain is drawn ("": none)
        dcc.Store(id="tl-markers", data=mk.clean_markers(ctx_.query.get(MARKERS_PARAM, ""))),
        dcc.Store(id="tl-marker-add"),
        dcc.Store(id="tl-step-event"),   # . / , : the next / previous event on the selected one's track
        dcc.Download(id="tl-markers-download"),
        dcc.Store(id="search-results"),
        dcc.Store(id="search-index", data=0),
        dcc.Store(id="search-last"),   # the last search that found something (a link to the view carries it)
        # a search the URL asks for (?search=...: the source page's line links), run once the first figure is drawn
        dcc.Store(id="search-auto", data=ctx_.query.get(SEARCH_PARAM, "")[:200]),
        # set by trnprof.js after each whole figure is drawn (what the URL asks to select waits for the first)
        dcc.Store(id="tl-figure-drawn"),
        # the outline, arrows and markers as a layout change (its own store: a patch in tl-draw could be replaced
        # by a zoom's before the browser drew it)
        dcc.Store(id="tl-shapes"),
        html.Div(className="toolbar", children=[
            html.Label("Colour by", className="toolbar-label"),
            dcc.RadioItems(id="colour-by", options=[{"label": m, "value": m} for m in pal.COLOUR_MODES],
                           value=url_options.colour_by, inline=True, className="radio"),
            dcc.Checklist(id="dma-expand", options=[{"label": "expand DMA queues", "value": "expand"}],
                          value=["expand"] if url_options.expand_dma else [], inline=True, className="radio"),
            dcc.Checklist(id="cp-toggle", options=critical_path_options(url_options.chain),
                          value=["on"] if url_options.critical_path else [], inline=True, className="radio"),
            html.Label("span levels", htmlFor="span-levels", className="toolbar-label"),
            dcc.Dropdown(id="span-levels", options=[{"label": "all", "value": "all"}, *[
                {"label": str(n), "value": n} for n in tls.SPAN_LEVEL_CHOICES]],
                value=url_options.span_levels or "all", clearable=False,
                searchable=False, className="levels-dropdown"),
            html.Div(title="show only the rows matching these comma-separated terms (text or /regex/, "
                           "case-insensitive); a term starting with - hides the rows it matches; Enter applies",
                     children=dcc.Input(id="row-filter", type="search", value=url_options.row_filter, debounce=True,
                                        placeholder="rows: Tensor, NC1, -DMA, /regex/",
                                        maxLength=MAX_FILTER_CHARS, className="row-filter-input")),
            html.Button("Reset zoom", id="tl-reset", n_clicks=0, className="btn", title="show the whole trace (R)"),
            html.Button("Summarize view", id="tl-summarize", n_clicks=0, className="btn",
                        title="summary of the visible range (box-select for a sub-range)"),
            html.Div(className="search-box", title='text in any of these fields; "in quotes": a whole field; '
                     '/between slashes/: a regular expression', children=[
                dcc.Input(id="search-input", type="search", placeholder="Search opcode, hlo_name, layer, source…",
                          debounce=False, className="search-input", maxLength=200,
                          value=ctx_.query.get(SEARCH_PARAM, "")[:200]),
                html.Button("Search", id="search-go", n_clicks=0, className="btn"),
                html.Button("◀", id="search-prev", n_clicks=0, className="btn", title="previous match (Shift+N)"),
                html.Button("▶", id="search-next", n_clicks=0, className="btn", title="next match (N)"),
                html.Span(id="search-count", className="muted"),
            ]),
        ]),
        query_bar(url_options.query, ctx_.query),
        html.Div(id="tl-legend", className="legend"),
        html.Div(id="timeline-container", className="graph-container", children=[
            html.Div(id=GRAPH_ID, className="timeline-graph", children=html.Div("loading…", className="muted")),
            html.Div(id="tl-tooltip", className="tl-tooltip"),
            # Never shown: makes Dash load plotly.js (a dcc.Graph is what requests it) for assets/trnprof.js.
            dcc.Graph(id="tl-plotly-loader", figure={"data": [], "layout": {}}, style={"display": "none"},
                      config={"staticPlot": True}),
        ]),
        html.Div(className="status-row", children=[
            html.Div(id="tl-status", className="status-line"),
            # while the server draws (a zoom: a fraction of a second; the critical path or a dependency chain of a
            # large trace, computed once: tens of seconds) the page says so
            html.Span("", id="tl-busy", className="busy-note"),
            html.A("link to this view", id="tl-link", href="", className="view-link",
                   title="this page at the current zoom (copy it to share the view)"),
            dcc.Link("memory of this view", id="tl-memory-link", href=MEMORY_PATH, className="view-link",
                     title="SBUF and PSUM over the current view: what was read, written and held live"),
            dcc.Link("call tree of this view", id="tl-calltree-link", href=CALLTREE_PATH, className="view-link",
                     title="the spans of the current view by stack: a flame graph and the names with the most time"),
            html.Span(["CSV of the view: ", *[part for i, (table, label, what) in enumerate(EXPORT_LINKS) for part in (
                *([" · "] if i else []),
                html.A(label, id=f"tl-export-{table}", href="", download="",
                       title=f"every {what} overlapping the view, all columns (at most {MAX_EXPORT_ROWS:,} rows)"))]],
                      className="view-link export-links"),
        ]),
        html.Div(className="markers-row", children=[
            html.Div(id="tl-markers-line", className="markers-line"),
            html.Button("CSV", id="tl-markers-csv", n_clicks=0, className="btn btn-small",
                        title="the markers and the times between them, as CSV"),
            html.Button("clear", id="tl-markers-clear", n_clicks=0, className="btn btn-small",
                        title="remove every marker"),
        ]),
        html.Div(className="help-line", children=(
            "W/S zoom · A/D pan · R reset · M marker · F fit selected · . , next / previous on its row · drag to "
            "zoom · box-select (toolbar) to summarize a range · click an instruction for details")),
        html.Div(className="panels", children=[
            html.Section([html.H3("Details"), html.Div("Click an instruction.", id="tl-details", className="muted")],
                         className="panel details-panel"),
            html.Section([html.H3(["Selection ", html.Span("", id="tl-selection-busy", className="busy-note")]),
                          html.Div("Box-select a range or press “Summarize view”.", id="tl-selection",
                                   className="muted")],
                         className="panel selection-panel"),
            html.Section([html.H3("Search results"), html.Div(id="search-list")], className="panel search-panel"),
        ]),
    ])


def query_bar(sql: str, query: dict[str, str]) -> Any:
    """The line above the legend saying which SQL the query rows draw, with links to edit it in the SQL page and to
    remove it; without a query, a link to the SQL page with an example of one."""
    if not sql:
        return html.Div(id="tl-query-bar", className="query-bar", children=dcc.Link(
            "+ rows from a SQL query", href=query_example_href(query), id="tl-query-add", className="muted",
            title="any query with a start_ts column can be drawn as timeline rows (opens the SQL page with an "
                  "example)"))
    edit, remove = query_bar_hrefs(query)
    shown = sql if len(sql) <= 160 else sql[:160] + "…"
    return html.Div(id="tl-query-bar", className="query-bar", title=sql, children=[
        html.Span("rows of the query", className="muted"), html.Code(shown),
        dcc.Link("edit in the SQL page", href=edit), dcc.Link("remove", href=remove, id="tl-query-remove"),
    ])


def options_from_url(query: dict[str, str]) -> tls.TimelineOptions:
    """The timeline options a URL's values set (``colour``, ``dma``, ``critical``, ``levels``, ``tracks``,
    ``query``; anything else or malformed: the default)."""
    levels = query.get(LEVELS_PARAM, "")
    return tls.TimelineOptions.parse(query.get(COLOUR_PARAM), query.get(DMA_PARAM) == "expanded",
                                    query.get(CRITICAL_PARAM) == "on",
                                    int(levels) if re.fullmatch(r"[0-9]{1,3}", levels) else None,
                                    row_filter=query.get(TRACKS_PARAM), query=query.get(QUERY_PARAM),
                                    chain=query.get(CHAIN_PARAM))


def url_view(search: str | None) -> tuple[int, int] | None:
    """The ``(start, end)`` ns a URL's ``start`` and ``end`` values ask the timeline to show first (a link to a
    view); None when either is missing or not a whole number."""
    values = query_values(search)
    try:
        start, end = int(values["start"]), int(values["end"])
    except (KeyError, ValueError):
        return None
    return (start, end) if start < end else None


def selection_to_draw(trace: Any, selected: Any, search: str | None) -> picks.Selection | None:
    """The selected event to draw: the ``tl-selected`` store's; without one, the event the URL selects (a link to
    a view: the store is set beside the first figures, not before them)."""
    selection = picks.Selection.from_store(trace, selected)
    if selection is None:
        linked = query_values(search).get(SELECT_PARAM)
        selection = picks.Selection.from_store(trace, picks.linked_selection(trace, linked)) if linked else None
    return selection


def critical_path_options(chain: Any) -> list[dict[str, str]]:
    """The critical-path toggle's option: its label says when a dependency chain is drawn instead of the path (the
    box stayed ticked while the chain replaced the path)."""
    if isinstance(chain, str) and chain:
        return [{"label": f"critical path (the chain to {chain.replace(':', ' ')} is drawn instead)", "value": "on"}]
    return [{"label": "critical path", "value": "on"}]


def _trace(registry: TraceRegistry, search: str | None) -> tuple[str, Any]:
    return open_served(registry, search)


#: Component id -> trigger name, in priority order (several inputs can change in one call).
_TRIGGERS = (("url", "trace"), ("live-gen", "live"), ("tl-size", "size"), ("colour-by", "options"),
             ("dma-expand", "options"),
             ("cp-toggle", "options"), ("span-levels", "options"), ("row-filter", "options"), ("tl-chain", "options"),
             ("tl-reset", "reset"), ("tl-nav", "nav"),
             ("tl-relayout", "relayout"))


def trigger_name(triggered_prop_ids: Any) -> str:
    """The trigger :func:`dashboard.timeline_logic.update_timeline` should act on, from ``ctx.triggered_prop_ids``
    (``{"tl-size.data": "tl-size", ...}``): the most structural input that changed."""
    ids = set(triggered_prop_ids.values()) if isinstance(triggered_prop_ids, dict) else set()
    for component, name in _TRIGGERS:
        if component in ids:
            return name
    return "initial"


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Wire the timeline page onto ``app``."""
    palettes: dict[str, pal.CategoryPalette] = {}
    # (trace id, a URL's select= value) -> the selection it names (read once: _redecorate runs after every fetch)
    linked_selections: dict[tuple[str, str], picks.Selection | None] = {}
    layouts: dict[str, tl.TraceLayout] = {}
    layouts_lock = threading.Lock()
    overlays = CriticalPathOverlays()
    chains = ChainGraphs()

    def served(search: str | None) -> tuple[str, Any]:
        """The served trace the URL names (its id and opened ``Trace``); for one that is not served the callback
        changes nothing (PreventUpdate)."""
        try:
            return _trace(registry, search)
        except (UnknownTraceError, NothingToShowYet):   # (the timeline itself says why)
            raise dash.exceptions.PreventUpdate from None

    def layout_of(trace_id: str, trace: Any) -> tl.TraceLayout:
        """The served trace's cached layout (made on first use)."""
        with layouts_lock:
            if trace_id not in layouts or layouts[trace_id].trace is not trace:
                layouts[trace_id] = tl.TraceLayout(trace, registry.sql_slots)
            return layouts[trace_id]

    def query_of(trace_id: str, trace: Any, search: str | None) -> Any:
        """The query tracks the URL's ``?query=`` draws (None without one or when it failed)."""
        tracks = layout_of(trace_id, trace).query(tls.TimelineOptions.parse(
            None, False, query=query_values(search).get(QUERY_PARAM)).query)
        return tracks if isinstance(tracks, tl.QueryTracks) else None

    def palette_for(trace_id: str, trace: Any) -> pal.CategoryPalette:
        # One palette per served trace (not per session): colours stay put while zooming.
        if trace_id not in palettes:
            palettes[trace_id] = pal.CategoryPalette(srch.names_by_time(trace))
        return palettes[trace_id]

    app.clientside_callback(ClientsideFunction("trnprof", "graphWidth"), Output("tl-size", "data"),
                            Input("timeline-container", "id"))
    app.clientside_callback(ClientsideFunction("trnprof", "keepView"), Output("tl-drawn", "data", allow_duplicate=True),
                            Input("tl-link", "href"), prevent_initial_call=True)

    @app.callback(
        Output("tl-draw", "data"), Output("tl-state", "data"), Output("tl-view", "data"),
        Output("tl-legend", "children"), Output("tl-status", "children"), Output("tl-link", "href"),
        Input("url", "search"), Input("tl-size", "data"), Input("tl-relayout", "data"),
        Input("colour-by", "value"), Input("dma-expand", "value"), Input("tl-reset", "n_clicks"),
        Input("tl-nav", "data"), Input("cp-toggle", "value"), Input("span-levels", "value"),
        Input("row-filter", "value"), Input("tl-chain", "data"), Input("live-gen", "data"),
        State("tl-selected", "data"), State("tl-markers", "data"), State("search-last", "data"),
        State("tl-state", "data"), prevent_initial_call=True,
        running=[(Output("tl-busy", "children"), "working…", "")],
    )
    def _update(search: str | None, size: Any, relayout: Any, colour_by: Any, expand: Any, _reset: Any,  # noqa: PLR0917
                nav: Any, critical: Any, levels: Any, row_filter: Any, chain: Any, _live: Any, selected: Any,
                markers: Any, last_search: Any, state: Any) -> Any:
        trigger = trigger_name(ctx.triggered_prop_ids)
        try:
            trace_id, trace = _trace(registry, search)
        except TrnprofError as exc:   # (a trace not served, a followed recording with no event yet, ...)
            message = public_message(exc)
            return {"kind": "figure", "figure": tl.empty_figure(message), "config": GRAPH_CONFIG, "seq": -1}, \
                None, None, [], message, dash.no_update
        width = size.get("width") if isinstance(size, dict) else None
        options = tls.TimelineOptions.parse(colour_by, is_checked(expand, "expand"), is_checked(critical, "on"),
                                           levels, row_filter=row_filter,
                                           query=query_values(search).get(QUERY_PARAM), chain=chain)
        # a query's first run (seconds for a large result) goes without the trace's lock, as the summary page's
        # work does: each thread has its own cursor, and the trace's other requests go on meanwhile
        layout_of(trace_id, trace).query(options.query)
        # so is the critical path's first computation (tens of seconds on a large trace): under the lock every zoom
        # queued behind it, and a zoom made meanwhile could leave a stale figure (an audit)
        if options.critical_path and options.chain_event is None:
            with contextlib.suppress(TrnprofError):   # (drawn as no path, as the overlay does)
                overlays.path(trace_id, trace)
        with registry.lock(trace_id):
            update = tl.update_timeline(trace, trace_id, state=state, trigger=trigger, relayout=relayout,
                                        width_px=width, options=options, nav=nav,
                                        palette=palette_for(trace_id, trace),
                                        overlay=overlays.builder(trace_id, trace, options.chain_event, chains),
                                        layout=layout_of(trace_id, trace),
                                        initial_view=url_view(search),
                                        selection=selection_to_draw(trace, selected, search),
                                        markers=mk.clean_markers(markers))
        if update is None:
            raise dash.exceptions.PreventUpdate
        legend = dash.no_update if update.legend is dash.no_update else tl.legend_children(update.legend)
        link = tls.view_link(search, {**update.state, "search": last_search})
        return (update.draw_payload(GRAPH_CONFIG), update.state, update.view, legend, update.status,
                dash.no_update if link is None else link)

    @app.callback([Output(f"tl-export-{table}", "href") for table, _l, _w in EXPORT_LINKS],
                  Output("tl-memory-link", "href"), Output("tl-calltree-link", "href"),
                  Input("tl-state", "data"), State("url", "search"), prevent_initial_call=True)
    def _export_links(state: Any, search: str | None) -> Any:
        hrefs = [*view_export_hrefs(search, state), view_memory_href(search, state),
                 view_calltree_href(search, state)]
        return [h if h is not None else dash.no_update for h in hrefs]

    app.clientside_callback(ClientsideFunction("trnprof", "draw"), Output("tl-drawn", "data"),
                            Input("tl-draw", "data"), State("tl-view", "data"))

    @app.callback(Output("tl-selected", "data"), Input("tl-click", "data"), State("tl-view", "data"),
                  State("tl-state", "data"), State("url", "search"), prevent_initial_call=True)
    def _click(click: Any, view: Any, state: Any, search: str | None) -> Any:
        trace_id, trace = served(search)
        with registry.lock(trace_id):
            picked = picks.event_at_click(trace, click, view, state, query=query_of(trace_id, trace, search))
        if picked is None:
            raise dash.exceptions.PreventUpdate
        return picked

    @app.callback(Output("tl-selected", "data", allow_duplicate=True), Output("tl-nav", "data"),
                  Input({"type": det.JUMP_TYPE, "index": ALL}, "n_clicks"), prevent_initial_call=True)
    def _jump(clicks: list[Any]) -> Any:
        trig = ctx.triggered_id
        jump = det.jump_target(trig.get("index") if isinstance(trig, dict) else None, clicks)
        if jump is None:
            raise dash.exceptions.PreventUpdate
        return jump

    @app.callback(Output("details-chain", "children"), Input("details-chain-go", "n_clicks"),
                  State("tl-selected", "data"), State("url", "search"), prevent_initial_call=True)
    def _chain(clicks: Any, selected: Any, search: str | None) -> Any:
        event = det.selected_event(selected)
        if not clicks or not isinstance(event, tuple):
            raise dash.exceptions.PreventUpdate
        trace_id, trace = served(search)
        try:   # (without the trace's lock: building the graph takes seconds on a large trace; ChainGraphs has its own)
            chain, back = chains.chain(trace_id, trace, *event)
        except TrnprofError as exc:
            return html.Div(public_message(exc, trace), className="error")
        return chain_panel(chain, int(trace.time_range[0]), back)

    @app.callback(Output("cp-toggle", "options"), Input("tl-chain", "data"), prevent_initial_call=True)
    def _toggle_label(chain: Any) -> Any:
        return critical_path_options(chain)

    @app.callback(Output("tl-chain", "data"), Input("details-chain-draw", "n_clicks"), State("tl-selected", "data"),
                  State("tl-chain", "data"), prevent_initial_call=True)
    def _draw_chain(clicks: Any, selected: Any, drawn: Any) -> Any:
        event = det.selected_event(selected)
        if not clicks or not isinstance(event, tuple):
            raise dash.exceptions.PreventUpdate
        ref = f"{event[0]}:{event[1]}"
        return "" if ref == drawn else ref     # the same event again: hide its chain

    @app.callback(Output("tl-details", "children"), Input("tl-selected", "data"), State("url", "search"),
                  prevent_initial_call=True)
    def _details(selected: Any, search: str | None) -> Any:
        # (the outline and the dependency arrows are drawn by _decorate, and into every figure by _update)
        event = det.selected_event(selected)
        if event is None:
            raise dash.exceptions.PreventUpdate
        if isinstance(event, str):
            return html.Div(event, className="error")
        try:
            trace_id, trace = _trace(registry, search)
        except UnknownTraceError as exc:
            return str(exc)
        if event[0] == det.QUERY_TABLE:
            with registry.lock(trace_id):
                return det.query_row_details(query_of(trace_id, trace, search), event[1],
                                             int(trace.time_range[0]))
        with registry.lock(trace_id):
            return det.event_details(trace, *event, label=registry.entry(trace_id).label, trace_id=trace_id)

    app.clientside_callback(ClientsideFunction("trnprof", "relayout"), Output("tl-drawn", "data", allow_duplicate=True),
                            Input("tl-shapes", "data"), prevent_initial_call=True)

    @app.callback(Output("tl-shapes", "data"), Output("tl-link", "href", allow_duplicate=True),
                  Input("tl-selected", "data"), Input("tl-markers", "data"), Input("search-last", "data"),
                  State("tl-view", "data"), State("tl-state", "data"), State("url", "search"),
                  prevent_initial_call=True)
    def _decorate(selected: Any, markers: Any, last_search: Any, view: Any, state: Any,  # noqa: PLR0917
                  search: str | None) -> Any:
        # a new selection or markers on the drawn figure: the outline, arrows and marker lines, and the link to the
        # view naming them (a figure drawn later draws them itself: _update reads both too)
        trace_id, trace = served(search)
        selection = picks.Selection.from_store(trace, selected)
        times = mk.clean_markers(markers)
        with registry.lock(trace_id):
            patch = picks.decoration_layout(view, selection, times)
        if patch is None:
            raise dash.exceptions.PreventUpdate
        link = tls.view_link(search, {**state, "selected": selection.key if selection else None, "markers": times,
                                     "search": last_search}) if isinstance(state, dict) else None
        return patch, dash.no_update if link is None else link

    @app.callback(Output("tl-shapes", "data", allow_duplicate=True), Input("tl-view", "data"),
                  State("tl-selected", "data"), State("tl-markers", "data"), State("tl-state", "data"),
                  State("url", "search"), prevent_initial_call=True)
    def _redecorate(view: Any, selected: Any, markers: Any, state: Any, search: str | None) -> Any:
        # a figure whose request began before the latest selection or markers (a resize, a search the URL asks for)
        # was drawn without them, after _decorate drew them: draw them again (only then; this runs after every
        # fetch, so the check reads the trace only for a link's selection, once per link)
        if not isinstance(state, dict):
            raise dash.exceptions.PreventUpdate
        trace_id, trace = served(search)
        stored = picks.Selection.from_store(trace, selected)
        if stored is not None:
            selection: picks.Selection | None = stored
        else:
            link_key = (trace_id, str(query_values(search).get(SELECT_PARAM)))
            if link_key not in linked_selections:
                if len(linked_selections) > 256:
                    linked_selections.clear()
                with registry.lock(trace_id):
                    linked_selections[link_key] = selection_to_draw(trace, None, search)
            selection = linked_selections[link_key]
        times = mk.clean_markers(markers)
        if [state.get("selected"), state.get("markers") or []] == [selection.key if selection else None, times]:
            raise dash.exceptions.PreventUpdate
        with registry.lock(trace_id):
            patch = picks.decoration_layout(view, selection, times)
        if patch is None:
            raise dash.exceptions.PreventUpdate
        return patch

    @app.callback(Output("tl-selected", "data", allow_duplicate=True), Output("tl-nav", "data", allow_duplicate=True),
                  Input("tl-step-event", "data"), State("tl-selected", "data"), State("tl-state", "data"),
                  State("url", "search"), prevent_initial_call=True)
    def _step_event(step: Any, selected: Any, state: Any, search: str | None) -> Any:
        trace_id, trace = served(search)
        with registry.lock(trace_id):
            target = picks.adjacent_event(trace, selected, step.get("step") if isinstance(step, dict) else None)
        if target is None:
            raise dash.exceptions.PreventUpdate
        return target, picks.nav_if_outside(target, state)

    register_marker_callbacks(app, registry)

    @app.callback(Output("tl-selected", "data", allow_duplicate=True), Output("tl-sel-auto", "data"),
                  Input("tl-figure-drawn", "data"), State("tl-sel-auto", "data"), State("url", "search"),
                  prevent_initial_call=True)
    def _select_linked(_drawn: Any, value: Any, search: str | None) -> Any:
        # the first figure is drawn: select the event the URL names (?select=), once (the figure outlines it already)
        if not value:
            raise dash.exceptions.PreventUpdate
        try:
            trace_id, trace = _trace(registry, search)
        except UnknownTraceError:
            return dash.no_update, ""
        with registry.lock(trace_id):
            selected = picks.linked_selection(trace, value)
        return (selected if selected is not None else dash.no_update), ""

    register_search_callbacks(app, registry)

    @app.callback(Output("tl-selection", "children"), Input("tl-range", "data"),
                  Input("tl-summarize", "n_clicks"), State("tl-state", "data"), State("url", "search"),
                  prevent_initial_call=True,
                  running=[(Output("tl-summarize", "disabled"), True, False),
                           (Output("tl-selection-busy", "children"), "summarizing…", "")])
    def _selection(selected: Any, _n: Any, state: Any, search: str | None) -> Any:
        try:
            _trace_id, trace = _trace(registry, search)
        except UnknownTraceError as exc:
            return str(exc)
        # without the trace's lock (each thread has its own cursor): a summary of a large range takes seconds, and
        # the timeline's zooms waited for it (14.5 s for a redraw of 0.3 s)
        panel = selection_outputs(trace, selected if ctx.triggered_id == "tl-range" else None, state)
        if panel is None:
            raise dash.exceptions.PreventUpdate
        return panel

