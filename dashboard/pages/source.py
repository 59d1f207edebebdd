"""The source page (``/source``): a kernel source file with each line's instructions, time, waits and DMA.

Neuron Explorer's Code Viewer.  ``?file=`` picks the file (default: the one with the most instructions) and
``?line=`` marks a line and scrolls to it (``trnprof.js``); the details panel's source location links here.  The
content is :func:`dashboard.source_view.build_view`; a line's number links to the timeline, which searches for
that line and selects its first instruction.
"""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html, no_update

from dashboard.app import query_values, resolve_trace_id
from dashboard.computed import ComputedCache
from dashboard.inputs import is_checked
from dashboard.links import FILE_PARAM, LINE_PARAM
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from dashboard.source_view import build_view


def layout(ctx: PageContext) -> Any:
    """Title, file picker, "only lines with instructions" and "time on the critical path", status line and the
    listing (filled by a callback)."""
    return html.Div([
        html.H2(f"Source of {ctx.registry.entry(ctx.trace_id).label}"),
        html.Div(className="toolbar", children=[
            dcc.Dropdown(id="src-file", options=[], value=ctx.query.get(FILE_PARAM), clearable=False,
                         placeholder="source file…", className="src-file"),
            dcc.Checklist(id="src-busy", options=[{"label": " only lines with instructions", "value": "busy"},
                                                  {"label": " time on the critical path", "value": "critical"}],
                          value=[], className="radio", inline=True),
        ]),
        html.Div(id="src-status", className="muted src-status"),
        dcc.Loading(html.Div(id="src-listing"), delay_show=300),
    ], className="source-page")


def page_outputs(registry: TraceRegistry, search: str | None, file: Any, busy: Any,
                 cache: ComputedCache | None = None) -> tuple[Any, Any, Any, Any]:
    """Picker options, picked file, status line and listing for the URL ``search`` and the picked ``file``
    (listings kept in ``cache``)."""
    values = query_values(search)
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return [], None, html.Span(str(exc), className="error", id="src-error"), None
    chosen = file if isinstance(file, str) and file else values.get(FILE_PARAM)
    # the marked line belongs to the file the URL names
    line = values.get(LINE_PARAM) if chosen == values.get(FILE_PARAM) else None
    view = build_view(trace, trace_id, chosen, line, busy_only=is_checked(busy, "busy"),
                      critical=is_checked(busy, "critical"), label=registry.entry(trace_id).label, cache=cache)
    if view.error is not None:
        return [], None, html.Span(view.error, className="error", id="src-error"), None
    return view.options, view.file, view.status, view.table


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The listing follows the URL, the file picker and the "only lines with instructions" box; each file's
    listing is computed once per served trace."""
    cache = ComputedCache()

    @app.callback(Output("src-file", "options"), Output("src-file", "value"), Output("src-status", "children"),
                  Output("src-listing", "children"), Input("url", "search"), Input("src-file", "value"),
                  Input("src-busy", "value"))
    def _show(search: str | None, file: Any, busy: Any) -> Any:
        options, chosen, status, table = page_outputs(registry, search, file, busy, cache)
        return options, chosen if chosen != file else no_update, status, table
