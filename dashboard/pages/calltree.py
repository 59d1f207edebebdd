"""The call-tree page (``/calltree``): the spans' stacks as an icicle, and the names with the most self time.

Perfetto's area-selection flame graph and HTA's operator breakdown, for every trace with spans (PyTorch/JAX
operators and Python functions, GPU kernels, a recording's layers and operators).  ``?start=&end=`` pick the window
(the timeline's "call tree of this view" sets them), ``?rows=merged`` merges the rows' stacks.  The content is
:func:`dashboard.calltree_view.build_view`.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from dashboard import calltree_view as cv
from dashboard.app import query_values, resolve_trace_id
from dashboard.computed import ComputedCache
from dashboard.graph_config import graph_config
from dashboard.inputs import is_checked
from dashboard.memory_view import timeline_href
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError


def layout(ctx: PageContext) -> Any:
    """Title, rows picker, links, status line, the graph and the per-name table (filled by a callback)."""
    kinds = [{"label": " spans", "value": cv.OF_SPANS}, {"label": " instructions", "value": cv.OF_INSTRUCTIONS},
             {"label": " GPU kernels by launch", "value": cv.OF_KERNELS}]
    return html.Div([
        html.H2(f"Call tree of {ctx.registry.entry(ctx.trace_id).label}"),
        html.Div(className="toolbar", children=[
            dcc.RadioItems(id="ct-of", options=kinds, value=ctx.query.get(cv.OF_PARAM), inline=True,
                           className="radio"),
            html.Span(id="ct-rows-box", children=dcc.RadioItems(
                id="ct-rows", options=[{"label": " one root per row", "value": cv.ROWS_SPLIT},
                                       {"label": " rows merged", "value": cv.ROWS_MERGED}],
                value=cv.url_rows(ctx.query), inline=True, className="radio")),
            html.Span(id="ct-levels-box", children=dcc.Dropdown(
                id="ct-levels", multi=True, clearable=False, className="ct-levels",
                options=[{"label": text, "value": level} for level, text in cv.LEVEL_LABELS.items()],
                value=list(cv.url_levels(ctx.query)), placeholder="levels…")),
            html.Span(id="ct-steps-box", children=dcc.Checklist(
                id="ct-steps", options=[{"label": " merge numbered steps (ProfilerStep#N)", "value": cv.STEPS_MERGED}],
                value=[cv.STEPS_MERGED] if cv.url_steps(ctx.query) else [], inline=True, className="radio")),
            dcc.Dropdown(id="ct-root", options=[], value=ctx.query.get(cv.ROOT_PARAM, cv.ALL_ROOTS),
                         clearable=False, searchable=True, placeholder="root…", className="ct-root"),
            html.A("this range on the timeline", id="ct-timeline-link", href="/", className="muted"),
            html.A("link to this view", id="ct-view-link", href=cv.CALLTREE_PATH, className="muted"),
        ]),
        html.Div(id="ct-status", className="muted ct-status"),
        html.P("Spans: each box a stack of nested spans (a row's root on top, then the outermost span, then the spans "
               "inside it), as wide as its spans' time in the window; a box's part not covered by boxes under it is "
               "its self time. Instructions: each box a layer, operator, kernel source line, engine or opcode under "
               "a NeuronCore, as wide as its instructions' engine time. GPU kernels by launch: each GPU kernel, copy "
               "or memset under the CPU stack that launched it, as wide as its GPU time. Where boxes under a box "
               "overlap in time (pipelined layers, concurrent kernels) they can add up to more than it: it is then "
               "drawn as wide as they are together. Hover for the numbers.",
               className="muted ct-help"),
        dcc.Loading(dcc.Graph(id="ct-graph", config=graph_config(scrollZoom=False), style={"height": "560px"}),
                    delay_show=300),
        html.Div(html.P(cv.FRAME_PROMPT, className="muted"), id="ct-frame", className="panel ct-frame"),
        dcc.Loading(html.Div(id="ct-top", className="panel"), delay_show=300),
    ], className="calltree-page")


def page_outputs(registry: TraceRegistry, search: str | None, rows: Any, root: Any = None, *, steps: Any = None,
                 of: Any = None, levels: Any = None, cache: ComputedCache | None = None) -> tuple[Any, ...]:
    """Figure, status line, per-name table, timeline link, view link, root options, root, tree kind and the styles
    of the rows, steps and levels options for the URL ``search``, the picked ``rows``, ``root``, ``of`` (spans,
    instructions or GPU kernels) and ``levels`` (the instructions' tree's) and the "merge numbered steps" box
    (``steps``: its value; None: the URL's ``?steps=``)."""
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return ({}, html.Span(str(exc), className="error", id="ct-error"), None, "/", cv.CALLTREE_PATH, [],
                cv.ALL_ROOTS, cv.OF_SPANS, {}, {}, {"display": "none"})
    query = query_values(search)
    merge = is_checked(steps, cv.STEPS_MERGED) if isinstance(steps, list) else None
    view = cv.build_view(trace, trace_id, query, rows, root, merge_steps=merge, of=of, levels=levels,
                         label=registry.entry(trace_id).label, cache=cache)
    rows = rows if rows in (cv.ROWS_SPLIT, cv.ROWS_MERGED) else cv.url_rows(query)
    shown_of = view.of if view.of != cv.url_of({}, trace) else None   # (the trace's default left out of the link)
    links = timeline_href(trace_id, view.window), cv.calltree_href(trace_id, view.window, rows, view.root,
                                                                   merge_steps=view.merge_steps, of=shown_of,
                                                                   levels=view.levels)
    # rows apply to the spans' tree only, numbered steps to the spans' and the kernels'
    hidden = {"display": "none"}
    rows_style = {} if view.of == cv.OF_SPANS else hidden
    steps_style = hidden if view.of == cv.OF_INSTRUCTIONS else {}
    levels_style = {} if view.of == cv.OF_INSTRUCTIONS else hidden
    if view.error is not None:
        return ({}, html.Span(view.error, className="error", id="ct-error"), None, *links, [], cv.ALL_ROOTS,
                view.of, rows_style, steps_style, levels_style)
    return (view.figure, view.status, view.table, *links, list(view.root_options), view.root, view.of,
            rows_style, steps_style, levels_style)


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The graph and the table follow the URL and the rows picker; the whole trace's trees are computed once per
    served trace."""
    cache = ComputedCache()

    @app.callback(Output("ct-graph", "figure"), Output("ct-status", "children"), Output("ct-top", "children"),
                  Output("ct-timeline-link", "href"), Output("ct-view-link", "href"), Output("ct-root", "options"),
                  Output("ct-root", "value"), Output("ct-of", "value"), Output("ct-rows-box", "style"),
                  Output("ct-steps-box", "style"), Output("ct-levels-box", "style"), Input("url", "search"),
                  Input("ct-rows", "value"), Input("ct-root", "value"), Input("ct-steps", "value"),
                  Input("ct-of", "value"), Input("ct-levels", "value"))
    def _show(search: str | None, rows: Any, root: Any, steps: Any, of: Any, levels: Any) -> Any:  # noqa: PLR0917
        # a change of rows names other roots: the picked one is kept only when the new tree has it
        out = page_outputs(registry, search, rows, root, steps=steps, of=of, levels=levels, cache=cache)
        return (*out[:-5], out[-5] if out[-5] != root else no_update, out[-4] if out[-4] != of else no_update,
                *out[-3:])

    @app.callback(Output("ct-frame", "children"), Input("ct-graph", "clickData"), State("url", "search"),
                  State("ct-of", "value"), prevent_initial_call=True)
    def _frame(click: Any, search: str | None, of: Any) -> Any:
        return frame_outputs(registry, search, click, of)


def frame_outputs(registry: TraceRegistry, search: str | None, click: Any, of: Any) -> Any:
    """The frame panel for a click on the graph (an error line for a URL naming no served trace)."""
    try:
        trace_id = resolve_trace_id(registry, search)
    except UnknownTraceError as exc:
        return html.Span(str(exc), className="error")
    return cv.frame_panel(trace_id, click, of)
