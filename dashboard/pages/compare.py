"""The compare page: two traces' timelines stacked with their zoom synchronised, and their comparison.

A is the trace the URL names, B is chosen in the page (or ``?b=<id>``).  Each timeline runs the timeline page's
level-of-detail loop (:func:`dashboard.timeline_logic.update_timeline`) on its own trace; a zoom or pan on one is
forwarded to the other as the same offsets from its own start (:func:`dashboard.compare_logic.sync_relayout`).
Under them: total time and bottleneck A -> B, per-engine active time and the bounds side by side, and the time per
operator, opcode or source line aligned by identity (:func:`profiler.analyses.diff.diff`).
"""

from __future__ import annotations

import json
from typing import Any

import dash
from dash import Dash, Input, Output, State, ctx, dcc, html

from dashboard import compare_logic as cl
from dashboard import search_logic as srch
from dashboard import timeline_logic as tl
from dashboard.graph_config import graph_config
from dashboard.links import TRACKS_PARAM
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry
from profiler.analyses import schema as rs
from profiler.figures import palette as pal
from profiler.figures.row_filter import MAX_FILTER_CHARS
from profiler.figures.strip_png import code_colours

SIDES = ("a", "b")
GRAPH_CONFIG = graph_config(scrollZoom=True, doubleClick="autosize", responsive=False,
                            modeBarButtonsToRemove=["lasso2d", "autoScale2d", "toImage", "select2d"])
WIDTH_JS = """function (_) {
    var c = document.getElementById("cmp-timelines");
    var w = c ? c.clientWidth : window.innerWidth;
    return {width: Math.max(100, w - 170 - 16)};
}"""


def graph_id(side: str) -> str:
    """Component id of one side's timeline graph."""
    return f"cmp-graph-{side}"


def layout(ctx_: PageContext) -> Any:
    """Trace pickers, the two timelines, the headline, the charts and the delta table."""
    a, b = cl.default_pair(ctx_.registry, ctx_.trace_id, ctx_.query)
    options = [{"label": e.label, "value": e.id} for e in ctx_.registry.entries]
    pickers = html.Div(className="toolbar", children=[
        html.Label("A", className="toolbar-label"),
        dcc.Dropdown(id="cmp-a", options=options, value=a, clearable=False, className="trace-dropdown"),
        html.Label("B", className="toolbar-label"),
        dcc.Dropdown(id="cmp-b", options=options, value=b, clearable=False, className="trace-dropdown"),
        html.Div(title="draw only the rows matching these comma-separated terms on both timelines (text or "
                       "/regex/, case-insensitive; - hides what a term matches); Enter applies",
                 children=dcc.Input(id="cmp-rows", type="search", debounce=True, value=ctx_.query.get(TRACKS_PARAM, ""),
                                    placeholder="rows: Tensor, NC1, -DMA, /regex/", maxLength=MAX_FILTER_CHARS,
                                    className="row-filter-input")),
    ])
    timelines = [html.Div([
        html.H3(f"{side.upper()}", id=f"cmp-title-{side}"),
        dcc.Graph(id=graph_id(side), figure=tl.empty_figure("loading…"), config=GRAPH_CONFIG),
        html.Div(id=f"cmp-status-{side}", className="status-line"),
        html.Div(id=f"cmp-legend-{side}", className="legend"),
    ]) for side in SIDES]
    return html.Div(className="compare-page", children=[
        dcc.Store(id="cmp-pair"), dcc.Store(id="cmp-size"),
        # the strips' palette (code -> colour), for trnprof.js to hide the legend swatches of colours not in view
        html.Div(id="cmp-colours", hidden=True, **{"data-colours": json.dumps([list(c) for c in code_colours()])}),
        *[dcc.Store(id=f"cmp-state-{s}") for s in SIDES], *[dcc.Store(id=f"cmp-sync-{s}") for s in SIDES],
        html.H2("Compare two traces"),
        pickers,
        html.Div(id="cmp-headline", className="cmp-headline"),
        html.Div(id="cmp-timelines", className="graph-container", children=timelines),
        html.Div(className="help-line", children="Zoom or pan either timeline: the other follows, aligned on each "
                                                  "kernel's start. Double-click resets both."),
        html.Div(id="cmp-charts", className="charts"),
        html.H3("Time per identity (B − A)"),
        dcc.RadioItems(id="cmp-by", options=[{"label": k, "value": k} for k in rs.GROUP_KEYS], value="opcode",
                       inline=True, className="radio"),
        html.Div(id="cmp-deltas"),
    ])


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Wire the compare page onto ``app``."""
    diffs = cl.DiffCache()
    palettes: dict[tuple[str, str], pal.CategoryPalette] = {}

    def palette_for(pair: tuple[str, str]) -> pal.CategoryPalette:
        # one palette for both sides, so an opcode has the same colour in A and B
        if pair not in palettes:
            names: list[str] = []
            for trace_id in pair:
                with registry.lock(trace_id):
                    names += srch.names_by_time(registry.open(trace_id))
            palettes[pair] = pal.CategoryPalette(dict.fromkeys(names))
        return palettes[pair]

    sides = cl.SideUpdater(registry, palette_for)
    app.clientside_callback(WIDTH_JS, Output("cmp-size", "data"), Input("cmp-timelines", "id"))

    @app.callback(Output("cmp-pair", "data"), Output("cmp-headline", "children"), Output("cmp-charts", "children"),
                  Output("cmp-deltas", "children"), Output("cmp-title-a", "children"),
                  Output("cmp-title-b", "children"),
                  Input("cmp-a", "value"), Input("cmp-b", "value"), Input("cmp-by", "value"))
    def _compare(a: Any, b: Any, by: Any) -> Any:
        return cl.compare_outputs(registry, diffs, a, b, by=by, by_only=ctx.triggered_id == "cmp-by")

    for side, other in (("a", "b"), ("b", "a")):
        _register_side(app, sides, side, other)


def _register_side(app: Dash, sides: cl.SideUpdater, side: str, other: str) -> None:
    graph = graph_id(side)

    @app.callback(Output(graph, "figure"), Output(f"cmp-state-{side}", "data"), Output(f"cmp-sync-{other}", "data"),
                  Output(f"cmp-status-{side}", "children"), Output(f"cmp-legend-{side}", "children"),
                  Input("cmp-pair", "data"), Input("cmp-size", "data"), Input(graph, "relayoutData"),
                  Input(f"cmp-sync-{side}", "data"), Input("cmp-rows", "value"), State(f"cmp-state-{side}", "data"),
                  prevent_initial_call=True)
    def _update(pair: Any, size: Any, relayout: Any, synced: Any, rows: Any, state: Any) -> Any:  # noqa: PLR0917
        triggered = set(ctx.triggered_prop_ids.values()) if isinstance(ctx.triggered_prop_ids, dict) else set()
        out = sides.update(side, triggered, pair=pair, size=size, relayout=relayout, synced=synced, state=state,
                           row_filter=rows)
        if out is None:
            raise dash.exceptions.PreventUpdate
        return out
