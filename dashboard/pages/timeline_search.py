"""The timeline page's search callbacks: run a search (the box, or the URL's ``?search=`` once the first figure is
drawn), list its matches (with a link drawing them all as a timeline row), step through them and follow the
selection.  Thin wrappers over :mod:`dashboard.search_logic`."""

from __future__ import annotations

from typing import Any

import dash
from dash import Dash, Input, Output, State, ctx

from dashboard import search_logic as srch
from dashboard import timeline_state as tls
from dashboard.app import open_served, query_values
from dashboard.errors import public_message
from dashboard.registry import NothingToShowYet, TraceRegistry, UnknownTraceError


def register_search_callbacks(app: Dash, registry: TraceRegistry) -> None:
    """Wire the search box, its results list and its ◀ ▶ steps onto ``app``."""

    @app.callback(Output("search-results", "data"), Output("search-index", "data"),
                  Output("search-list", "children"), Output("search-count", "children"), Output("search-auto", "data"),
                  Output("search-last", "data"),
                  Input("search-go", "n_clicks"), Input("search-input", "n_submit"), Input("tl-figure-drawn", "data"),
                  State("search-auto", "data"), State("search-input", "value"), State("url", "search"),
                  State("tl-state", "data"), prevent_initial_call=True)
    def _search(_n: Any, _s: Any, _drawn: Any, auto: Any, text: Any, search: str | None,
                state: Any) -> Any:
        consumed: Any = dash.no_update
        index = srch.FRESH
        if ctx.triggered_id == "tl-figure-drawn":
            # the first figure is drawn: run the search the URL asks for (once), so its first match is selected and
            # zoomed to on a drawn timeline; a link to a view (a range or a selected event of its own) only lists
            # the matches
            if not isinstance(auto, str) or not auto.strip():
                raise dash.exceptions.PreventUpdate
            text, consumed = auto, ""
            if srch.link_keeps_its_view(query_values(search)):
                index = srch.QUIET
        try:
            trace_id, trace = open_served(registry, search)
        except (UnknownTraceError, NothingToShowYet) as exc:
            return None, 0, public_message(exc), "", consumed, dash.no_update
        with registry.lock(trace_id):
            result = srch.run_search(trace, text)
            row_href = srch.matches_row_href(trace, text, tls.view_link(search, state) or search) \
                if result.matches else None
        last = text.strip()[:srch.MAX_CHARS] if isinstance(text, str) and result.matches else ""
        return (result.matches, index, srch.results_list(result, int(trace.time_range[0]), row_href), result.message,
                consumed, last)

    @app.callback(Output("search-index", "data", allow_duplicate=True),
                  Output("tl-selected", "data", allow_duplicate=True), Output("tl-nav", "data", allow_duplicate=True),
                  Output("search-count", "children", allow_duplicate=True),
                  Input("search-next", "n_clicks"), Input("search-prev", "n_clicks"),
                  Input("search-results", "data"), State("search-index", "data"), prevent_initial_call=True)
    def _step(_next: Any, _prev: Any, matches: Any, index: Any) -> Any:
        if ctx.triggered_id == "search-results" and index == srch.QUIET:
            raise dash.exceptions.PreventUpdate  # matches listed for a link that keeps its own view and selection
        step = -1 if ctx.triggered_id == "search-prev" else 1
        moved = srch.step_match(matches, index, step)
        if moved is None:
            raise dash.exceptions.PreventUpdate
        new_index, target, label = moved
        nav = {"start_ns": target["start_ns"], "end_ns": target["end_ns"], "seq": new_index}
        return new_index, target, nav, label

    @app.callback(Output("search-index", "data", allow_duplicate=True),
                  Output("search-count", "children", allow_duplicate=True),
                  Input("tl-selected", "data"), State("search-results", "data"), prevent_initial_call=True)
    def _selected_match(selected: Any, matches: Any) -> Any:
        # a match picked in the results list (or reached by stepping, or clicked on the timeline) is "k of n"
        found = srch.match_of(matches, selected)
        if found is None:
            raise dash.exceptions.PreventUpdate
        return found
