"""The trace picker: every served trace and bundled sample, each a link to its timeline and summary."""

from __future__ import annotations

from typing import Any

from dash import Dash, dcc, html

from dashboard.pages import PageContext
from dashboard.registry import ServedTrace, TraceRegistry


def _row(entry: ServedTrace, current: str) -> html.Tr:
    q = f"?trace={entry.id}"
    return html.Tr(className="current" if entry.id == current else "", children=[
        html.Td(html.Strong(entry.label) if entry.id == current else entry.label),
        html.Td("sample" if entry.sample else "served"),
        html.Td([dcc.Link("timeline", href="/" + q, id=f"pick-{entry.id}"), " · ",
                 dcc.Link("summary", href="/summary" + q), " · ", dcc.Link("SQL", href="/sql" + q)]),
    ])


def layout(ctx: PageContext) -> Any:
    """A table of the served traces, the current one in bold."""
    entries = ctx.registry.entries
    served = [e for e in entries if not e.sample]
    samples = [e for e in entries if e.sample]
    parts: list[Any] = [html.H2("Traces")]
    for title, group in (("Served", served), ("Samples", samples)):
        if not group:
            continue
        parts.append(html.H3(title))
        parts.append(html.Table(className="picker", children=[
            html.Thead(html.Tr([html.Th("trace"), html.Th("kind"), html.Th("open")])),
            html.Tbody([_row(e, ctx.trace_id) for e in group]),
        ]))
    return html.Div(parts, className="traces-page")


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """The picker is links only: switching traces is a URL change handled by the app's router."""
