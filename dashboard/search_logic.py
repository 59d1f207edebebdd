"""Search on the timeline page: run ``Trace.search``, list the matches as jump links, step through them.

Also :func:`names_by_time`, the ranking of names that gives the most visible opcodes of a trace their own colours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dash import dcc, html

from dashboard.details import jump_link
from dashboard.errors import public_message
from dashboard.inputs import as_int, as_time_range
from dashboard.links import QUERY_PARAM, SELECT_PARAM
from profiler import db_schema as dbs
from profiler.figures import palette as pal
from profiler.figures.timefmt import format_duration, format_time
from profiler.query_track import MAX_QUERY_CHARS
from tracer import schema as ts
from tracer.errors import TrnprofError

#: Matches fetched per search.
SEARCH_LIMIT = 500
#: Shortest and longest search text.
MIN_CHARS = 1
MAX_CHARS = 200


@dataclass
class SearchResult:
    """Matches in time order (plain dicts, JSON-able for a ``dcc.Store``) and a one-line message."""

    matches: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""


def run_search(trace: Any, text: Any) -> SearchResult:
    """Search opcodes, hlo_name, layer and source lines (``Trace.search``); matches sorted by start time."""
    query = text.strip() if isinstance(text, str) else ""
    if len(query) < MIN_CHARS:
        return SearchResult(message="type something to search for")
    if len(query) > MAX_CHARS:
        return SearchResult(message=f"search text longer than {MAX_CHARS} characters")
    try:
        table = trace.search(query, limit=SEARCH_LIMIT + 1)
    except TrnprofError as exc:
        return SearchResult(message=public_message(exc, trace))
    rows = table.to_pylist()
    more = len(rows) > SEARCH_LIMIT
    rows = sorted(rows[:SEARCH_LIMIT], key=lambda r: (r[ts.START_TS], r[ts.ID]))
    tracks = dict(zip(*(trace.tracks().column(c).to_pylist() for c in (dbs.TRACK_ID, "name")), strict=True))
    matches = [{"table": r[dbs.TABLE], "id": r[ts.ID], "start_ns": r[ts.START_TS], "end_ns": r[ts.END_TS],
                dbs.TRACK_ID: r.get(dbs.TRACK_ID), "name": r.get(ts.NAME), "field": r.get(dbs.MATCHED_FIELD, ""),
                "track": tracks.get(r.get(dbs.TRACK_ID)) or ""}
               for r in rows]
    if not matches:
        return SearchResult(message=f"no match for {query!r}")
    if more:  # the list stops here: counts read "of 500+" (see :func:`count_text`)
        matches[-1][MORE] = True
    return SearchResult(matches, f"{len(matches):,}{'+' if more else ''} matches"
                        + (f" (the first {len(matches):,} in time are listed)" if more else ""))


#: Key set on the last match of a list the search limit cut.
MORE = "more"


def count_text(matches: list[Any]) -> str:
    """How many matches ``matches`` holds, ``500+`` when the search limit cut the list."""
    more = bool(matches) and isinstance(matches[-1], dict) and bool(matches[-1].get(MORE))
    return f"{len(matches):,}{'+' if more else ''}"


def results_list(result: SearchResult, origin_ns: int, row_href: str | None = None) -> Any:
    """The matches as a list of jump links (time, name, matched field), under a link drawing every match as a
    timeline row (``row_href``, :func:`matches_row_href`) when given."""
    if not result.matches:
        return html.Div(result.message, className="muted")
    items = [
        html.Li([jump_link(f"{format_time(m['start_ns'], origin_ns)} · {m['name'] or '?'}", m["table"], m["id"],
                           m["start_ns"], m["end_ns"], track_id=m.get(dbs.TRACK_ID)),
                 html.Span(f" {m['field']}{' on ' + m['track'] if m.get('track') else ''} · "
                           f"{format_duration(m['end_ns'] - m['start_ns'])}", className="muted")])
        for m in result.matches
    ]
    listed = html.Ol(items, className="search-results", id="search-results-list")
    if row_href is None:
        return listed
    link = dcc.Link("draw every match as a timeline row", href=row_href, id="search-as-row", className="view-link",
                    title="the search as a query whose rows the timeline draws above the trace's (all matches, "
                          "not only those listed)")
    return html.Div([link, listed])


def matches_row_href(trace: Any, text: Any, view_query: str | None) -> str | None:
    """The timeline URL (``view_query``: the query part of the link to the current view, else none) with the search
    ``text`` drawn as a row of its matches (``?query=`` :meth:`profiler.Trace.search_sql`); None when the search
    cannot be written so (it failed)."""
    from urllib.parse import urlencode

    from dashboard.app import query_values  # (the app imports the pages, which import this module)

    try:
        sql = trace.search_sql(text.strip())
    except (TrnprofError, AttributeError):
        return None
    if len(sql) > MAX_QUERY_CHARS:
        return None
    return "/?" + urlencode({**query_values(view_query), QUERY_PARAM: sql})


#: ``search-index`` of a fresh result list: the first step selects the first match.
FRESH = -1
#: ``search-index`` of matches listed without selecting one (a link to a view keeps its own range and selection);
#: the first step still goes to the first match.
QUIET = -2


def link_keeps_its_view(query: dict[str, str]) -> bool:
    """Whether a URL's search should only list its matches: the URL names a range or a selected event of its own
    (a link to a view), which the first match must not replace."""
    return bool(query.get(SELECT_PARAM)) or (bool(query.get("start")) and bool(query.get("end")))


def step_match(matches: Any, index: Any, step: int) -> tuple[int, dict[str, Any], str] | None:
    """Move ``step`` matches from ``index`` (wrapping around); the new index, its target and a label."""
    if not isinstance(matches, list) or not matches:
        return None
    i = as_int(index, -1, len(matches))
    i = -1 if i is None else i
    fresh = i < 0 or i >= len(matches)
    new = (0 if step > 0 else len(matches) - 1) if fresh else (i + step) % len(matches)
    m = matches[new]
    if not isinstance(m, dict):
        return None
    span = as_time_range([m.get("start_ns"), m.get("end_ns")])
    ident = as_int(m.get("id"), -(2**63), 2**63 - 1)
    if span is None or ident is None or not isinstance(m.get("table"), str):
        return None
    target = {"table": m["table"], "id": ident, "start_ns": span[0], "end_ns": span[1],
              dbs.TRACK_ID: as_int(m.get(dbs.TRACK_ID), 0, 2**63 - 1)}
    return new, target, f"match {new + 1:,} of {count_text(matches)}"


def match_of(matches: Any, selected: Any) -> tuple[int, str] | None:
    """The index of the selected event (``tl-selected`` data: ``table`` and ``id``) among ``matches`` and its
    "match k of n" label; None when it is not one of them (or either is malformed)."""
    if not isinstance(matches, list) or not isinstance(selected, dict):
        return None
    table, ident = selected.get("table"), as_int(selected.get("id"), -(2**63), 2**63 - 1)
    if not isinstance(table, str) or ident is None:
        return None
    for k, m in enumerate(matches):
        if isinstance(m, dict) and m.get("table") == table and as_int(m.get("id"), -(2**63), 2**63 - 1) == ident:
            return k, f"match {k + 1:,} of {count_text(matches)}"
    return None


def names_by_time(trace: Any) -> list[str]:
    """Names ranked by the time they dominate (:func:`profiler.figures.palette.names_by_time`, shared with the
    notebook figures so a trace gets the same colours in both)."""
    return pal.names_by_time(trace)
