"""The timeline page's marker callbacks: add (key M, snapped in the browser), remove and clear markers, the line
listing them with the time between them, and their CSV.  Thin wrappers over :mod:`dashboard.markers`."""

from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Dash, Input, Output, State, ctx

from dashboard import markers as mk
from dashboard import timeline_picks as picks
from dashboard.app import open_served
from dashboard.registry import NothingToShowYet, TraceRegistry, UnknownTraceError


def register_marker_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Wire the markers' store, line and CSV download onto ``app``."""

    def served(search: str | None) -> tuple[str, Any]:
        try:
            return open_served(registry, search)
        except (UnknownTraceError, NothingToShowYet):   # (the timeline itself says why)
            raise dash.exceptions.PreventUpdate from None

    @app.callback(Output("tl-markers", "data"), Input("tl-marker-add", "data"),
                  Input({"type": mk.REMOVE_TYPE, "index": ALL}, "n_clicks"), Input("tl-markers-clear", "n_clicks"),
                  State("tl-markers", "data"), State("tl-view", "data"), prevent_initial_call=True)
    def _edit_markers(add: Any, removes: list[Any], _clear: Any, markers: Any, view: Any) -> Any:
        trig = ctx.triggered_id
        if trig == "tl-markers-clear":
            return []
        if isinstance(trig, dict) and trig.get("type") == mk.REMOVE_TYPE:
            if not any(isinstance(n, int) and n for n in removes or []):
                raise dash.exceptions.PreventUpdate  # the buttons were (re)drawn, not clicked
            return mk.remove_marker(markers, trig.get("index"))
        t_ns = picks.marker_time(add, view)
        if t_ns is None:
            raise dash.exceptions.PreventUpdate
        return mk.add_marker(markers, t_ns)

    @app.callback(Output("tl-markers-line", "children"), Output("tl-markers-csv", "style"),
                  Output("tl-markers-clear", "style"), Input("tl-markers", "data"), State("url", "search"))
    def _markers_line(markers: Any, search: str | None) -> Any:
        _trace_id, trace = served(search)
        times = mk.clean_markers(markers)
        buttons = {} if times else {"display": "none"}   # nothing to export or clear yet
        return mk.markers_panel(times, int(trace.time_range[0])), buttons, buttons

    @app.callback(Output("tl-markers-download", "data"), Input("tl-markers-csv", "n_clicks"),
                  State("tl-markers", "data"), State("url", "search"), prevent_initial_call=True)
    def _markers_csv(_n: Any, markers: Any, search: str | None) -> Any:
        trace_id, trace = served(search)
        name = f"{registry.entry(trace_id).label}-markers.csv"
        return {"content": mk.markers_csv(mk.clean_markers(markers), int(trace.time_range[0])), "filename": name}
