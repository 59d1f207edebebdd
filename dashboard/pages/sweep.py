"""The Sweep page (``/sweep``): a sweep served from its folder (``trnprof serve DIR`` on a sweep's ``--trace-dir``),
its chart and one row per point linking to that point's pages (:mod:`dashboard.sweep_view`); a click on a bar opens
that point's timeline."""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Dash, Input, Output

from dashboard.pages import PageContext
from dashboard.registry import TraceRegistry
from dashboard.sweep_view import CHART_TYPE, clicked_point_href, sweep_page


def layout(ctx: PageContext) -> Any:
    """The served sweeps, the page's trace's first."""
    return sweep_page(ctx.registry, ctx.trace_id)


def register_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """A click on a bar of a sweep chart opens that point's timeline."""

    # the path and the query, not ``href``: a Location's href set with refresh off changes the address bar only,
    # and the router follows pathname and search
    @app.callback(Output("url", "pathname"), Output("url", "search", allow_duplicate=True),
                  Input({"type": CHART_TYPE, "index": ALL}, "clickData"), prevent_initial_call=True)
    def _open_point(clicks: Any) -> Any:
        chosen = dash.ctx.triggered[0]["value"] if dash.ctx.triggered else None
        href = clicked_point_href(registry, chosen)
        if href is None:
            return dash.no_update, dash.no_update
        path, _, query = href.partition("?")
        return path, "?" + query
