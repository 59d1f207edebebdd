"""The SQL page: an editor with example queries, results in a sortable grid, errors inline, read-only.

Queries run through the sandboxed ``Trace.sql`` (see :mod:`dashboard.sql_logic`); the page adds a row limit and a
timeout the user can set within bounds.
"""

from __future__ import annotations

from typing import Any

import dash_ag_grid as dag
from dash import Dash, Input, Output, State, dcc, html

from dashboard.app import resolve_trace_id
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from dashboard.sql_logic import DEFAULT_ROW_LIMIT, DEFAULT_TIMEOUT_S, MAX_ROW_LIMIT, MAX_TIMEOUT_S, run_query
from profiler.sql_examples import EXAMPLE_QUERIES


def layout(ctx: PageContext) -> Any:
    """Editor, examples, limits, run button, status line and result grid."""
    examples = [{"label": title, "value": i} for i, (title, _q) in enumerate(EXAMPLE_QUERIES)]
    return html.Div(className="sql-page", children=[
        html.Div(className="sql-toolbar", children=[
            dcc.Dropdown(id="sql-example", options=examples, placeholder="Example queries…", clearable=True,
                         className="sql-example"),
            html.Label(["Row limit ", dcc.Input(id="sql-limit", type="number", min=1, max=MAX_ROW_LIMIT, step=1,
                                                value=DEFAULT_ROW_LIMIT, className="num-input")]),
            html.Label(["Timeout (s) ", dcc.Input(id="sql-timeout", type="number", min=0.1, max=MAX_TIMEOUT_S,
                                                   value=DEFAULT_TIMEOUT_S, className="num-input")]),
            html.Button("Run (Ctrl+Enter)", id="sql-run", n_clicks=0, className="btn primary"),
        ]),
        dcc.Textarea(id="sql-query", value=EXAMPLE_QUERIES[0][1], className="sql-editor", spellCheck=False),
        html.Div(id="sql-status", className="sql-status"),
        dag.AgGrid(id="sql-grid", rowData=[], columnDefs=[],
                   defaultColDef={"sortable": True, "filter": True, "resizable": True},
                   dashGridOptions={"pagination": True, "paginationPageSize": 100,
                                    "enableCellTextSelection": True},
                   className="ag-theme-alpine sql-grid", style={"height": "60vh"}),
    ])


def example_query(index: Any) -> str | None:
    """The text of example ``index`` (None for no selection or a bad index)."""
    try:
        return EXAMPLE_QUERIES[int(index)][1]
    except (TypeError, ValueError, IndexError):
        return None


def query_outputs(registry: TraceRegistry, search: str | None, query: str | None, limit: Any,
                  timeout: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    """Grid rows, grid column definitions and the status line for one run of the query."""
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return [], [], html.Span(str(exc), className="error", id="sql-error")
    result = run_query(trace, query, limit, timeout)  # Trace is thread-safe: a slow query blocks no one else
    if result.error:
        return [], [], html.Span(result.error, className="error", id="sql-error")
    cols = [{"field": c, "headerName": c} for c in result.columns]
    more = f" (first {len(result.rows):,} shown: raise the row limit for more)" if result.truncated else ""
    status = html.Span(f"{len(result.rows):,} rows in {result.elapsed_s * 1000:.0f} ms{more}", id="sql-ok")
    return result.rows, cols, status


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Example picker and query runner."""

    @app.callback(Output("sql-query", "value"), Input("sql-example", "value"), prevent_initial_call=True)
    def _pick_example(index: Any) -> Any:
        text = example_query(index)
        if text is None:
            from dash import no_update

            return no_update
        return text

    @app.callback(Output("sql-grid", "rowData"), Output("sql-grid", "columnDefs"), Output("sql-status", "children"),
                  Input("sql-run", "n_clicks"), State("sql-query", "value"), State("sql-limit", "value"),
                  State("sql-timeout", "value"), State("url", "search"), prevent_initial_call=True)
    def _run(_n: int, query: str | None, limit: Any, timeout: Any, search: str | None) -> Any:
        return query_outputs(registry, search, query, limit, timeout)
