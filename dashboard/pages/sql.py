"""The SQL page: an editor with example queries, results in a sortable grid, errors inline, read-only.

Queries run through the sandboxed ``Trace.sql_arrow`` (see :mod:`dashboard.sql_logic`); the page adds a row limit
and a timeout the user can set within bounds.  Grid columns are keyed by ids (``c0``, ``c1``, ...) with the result's
names as headers: AG Grid reads a field with a dot (``a.b``, ``(1.5 * 2)``) as a path into nested data, which would
show blank cells.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash_ag_grid as dag
from dash import Dash, Input, Output, State, dcc, html, no_update

from dashboard.app import resolve_trace_id
from dashboard.inputs import as_int
from dashboard.links import QUERY_PARAM, TRACE_PARAM
from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry, UnknownTraceError
from dashboard.sql_logic import (
    DEFAULT_ROW_LIMIT,
    DEFAULT_TIMEOUT_S,
    MAX_ROW_LIMIT,
    MAX_TIMEOUT_S,
    QueryResult,
    run_query,
)
from profiler.query_track import MAX_QUERY_CHARS
from profiler.sql_examples import EXAMPLE_QUERIES
from tracer import schema as ts

#: AG Grid options: pages of 100 rows, selectable text, and field names taken literally (never as paths).
GRID_OPTIONS = {"pagination": True, "paginationPageSize": 100, "enableCellTextSelection": True,
                "suppressFieldDotNotation": True}


def layout(ctx: PageContext) -> Any:
    """Editor, examples, limits, run button, status line and result grid."""
    examples = [{"label": title, "value": i} for i, (title, _q) in enumerate(EXAMPLE_QUERIES)]
    return html.Div(className="sql-page", children=[
        html.Div(className="sql-toolbar", children=[
            dcc.Dropdown(id="sql-example", options=examples, placeholder="Example queries…", clearable=True,
                         className="sql-example"),
            # no max on the inputs: the browser would send an empty value above it (and the page fall back to the
            # default); the server caps the values and the status line says so (sql_logic.run_query)
            html.Label(["Row limit ", dcc.Input(id="sql-limit", type="number", min=1, step=1,
                                                value=DEFAULT_ROW_LIMIT, className="num-input")],
                       title=f"rows to show (at most {MAX_ROW_LIMIT:,})"),
            html.Label(["Timeout (s) ", dcc.Input(id="sql-timeout", type="number", min=0.1,
                                                   value=DEFAULT_TIMEOUT_S, className="num-input")],
                       title=f"seconds (at most {MAX_TIMEOUT_S:g})"),
            html.Button("Run (Ctrl+Enter)", id="sql-run", n_clicks=0, className="btn primary"),
            html.Span("", id="sql-busy", className="busy-note"),
        ]),
        dcc.Textarea(id="sql-query", value=initial_query(ctx.query), className="sql-editor", spellCheck=False),
        html.Div(id="sql-status", className="sql-status"),
        dag.AgGrid(id="sql-grid", rowData=[], columnDefs=[],
                   defaultColDef={"sortable": True, "filter": True, "resizable": True},
                   dashGridOptions=GRID_OPTIONS,
                   className="ag-theme-alpine sql-grid", style={"height": "60vh"}),
    ])


def initial_query(query: dict[str, str]) -> str:
    """The editor's first text: the URL's ``?query=`` (the timeline's "edit in the SQL page"), else the first
    example."""
    sql = query.get(QUERY_PARAM, "")
    return sql if sql.strip() and len(sql) <= MAX_QUERY_CHARS else EXAMPLE_QUERIES[0][1]


def timeline_link(trace_id: str, query: str | None, result: QueryResult) -> Any:
    """A link drawing the query's rows on the timeline (:mod:`profiler.query_track`) when its result has a
    ``start_ts`` column; None otherwise."""
    if not query or len(query) > MAX_QUERY_CHARS or not any(c.lower() == ts.START_TS for c in result.columns):
        return None
    href = "/?" + urlencode({TRACE_PARAM: trace_id, QUERY_PARAM: query.strip()})
    return dcc.Link("draw these rows on the timeline", href=href, id="sql-timeline-link", className="view-link",
                    title="each row an interval from start_ts to end_ts (or start_ts + duration_ns), named by name "
                          "or opcode, one timeline row per value of a track column; table_name and id link a row "
                          "to its event")


def example_query(index: Any) -> str | None:
    """The text of example ``index`` (None for no selection or a bad index)."""
    i = as_int(index, 0, len(EXAMPLE_QUERIES) - 1)
    return None if i is None else EXAMPLE_QUERIES[i][1]


def column_defs(result: QueryResult) -> list[dict[str, Any]]:
    """The grid's column definitions: the row key of each column as its field, its name as its header, its data
    type (:attr:`QueryResult.kinds`) given, not guessed."""
    kinds = result.kinds or ["text"] * len(result.columns)
    return [{"field": key, "headerName": name, "headerTooltip": name, "cellDataType": kind}
            for key, name, kind in zip(result.fields, result.columns, kinds, strict=True)]


def query_outputs(registry: TraceRegistry, search: str | None, query: str | None, limit: Any,
                  timeout: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    """Grid rows, grid column definitions and the status line for one run of the query."""
    try:
        trace_id = resolve_trace_id(registry, search)
        trace = registry.open(trace_id)
    except UnknownTraceError as exc:
        return [], [], html.Span(str(exc), className="error", id="sql-error")
    # Trace is thread-safe: a slow query blocks no one else
    result = run_query(trace, query, limit, timeout, label=registry.entry(trace_id).label,
                       slots=registry.sql_slots)
    if result.error:
        return [], [], html.Span(result.error, className="error", id="sql-error")
    more = f" (first {len(result.rows):,} shown: {result.note})" if result.truncated else ""
    warning = f"; {result.warning}" if result.warning else ""
    rows = f"{len(result.rows):,} row{'' if len(result.rows) == 1 else 's'}"
    status: Any = html.Span(f"{rows} in {result.elapsed_s * 1000:.0f} ms{more}{warning}", id="sql-ok")
    link = timeline_link(trace_id, query, result)
    if link is not None:
        status = html.Span([status, " · ", link])
    return result.rows, column_defs(result), status


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Example picker and query runner."""

    @app.callback(Output("sql-query", "value"), Input("sql-example", "value"), prevent_initial_call=True)
    def _pick_example(index: Any) -> Any:
        text = example_query(index)
        return no_update if text is None else text

    @app.callback(Output("sql-grid", "rowData"), Output("sql-grid", "columnDefs"), Output("sql-status", "children"),
                  Input("sql-run", "n_clicks"), State("sql-query", "value"), State("sql-limit", "value"),
                  State("sql-timeout", "value"), State("url", "search"), prevent_initial_call=True,
                  # while a query runs: Run disabled (a second click queued another query behind it, holding a
                  # server slot after its answer was dropped) and the last result's status dimmed, not read as new
                  running=[(Output("sql-run", "disabled"), True, False), (Output("sql-busy", "children"),
                                                                          "running…", ""),
                           (Output("sql-status", "style"), {"opacity": 0.35}, {})])
    def _run(_n: int, query: str | None, limit: Any, timeout: Any, search: str | None) -> Any:
        return query_outputs(registry, search, query, limit, timeout)
