"""Links between the dashboard's pages: the URL values a page reads and the URLs that carry them.

* the timeline page (``/``) searches for ``?search=`` when it opens (in double quotes: a whole field, so
  ``"softmax.py:35"`` finds that line, not line 350) and selects the first match;
* the timeline page opens at ``?start=&end=`` (ns) with the options of ``?colour=`` (``engine``, ``layer``),
  ``?dma=expanded``, ``?critical=on``, ``?levels=N``, ``?tracks=`` (the row filter), ``?query=`` (SQL whose
  result is drawn as rows: :mod:`profiler.query_track`) and ``?chain=Instruction:42`` (that event's dependency
  chain drawn over the strips), and with
  ``?select=Instruction:42`` selected (outlined, its details shown, its dependencies drawn), ``?markers=T1,T2``
  (ns) pinned and ``?search=`` run (its matches listed; with no range or selected event in the URL, the first one
  selected and zoomed to): its "link to this view" carries all of them;
* the source page (``/source``) shows ``?file=`` and marks ``?line=``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from profiler.figures.row_filter import MAX_FILTER_CHARS

TRACE_PARAM = "trace"
SEARCH_PARAM = "search"
FILE_PARAM = "file"
LINE_PARAM = "line"
SOURCE_PATH = "/source"
COLOUR_PARAM = "colour"
DMA_PARAM = "dma"
CRITICAL_PARAM = "critical"
LEVELS_PARAM = "levels"
SELECT_PARAM = "select"
MARKERS_PARAM = "markers"
#: The timeline's row filter (:mod:`profiler.figures.row_filter`; "rows" is the call tree page's row merging).
TRACKS_PARAM = "tracks"
#: SQL drawn on the timeline as rows (the timeline's query tracks; the SQL page opens with it in its editor).
QUERY_PARAM = "query"
#: The event whose dependency chain the timeline draws (``Instruction:42``).
CHAIN_PARAM = "chain"
#: The timeline's view values a link carries besides the trace and the range (each left out at its default).
VIEW_OPTION_PARAMS = (COLOUR_PARAM, DMA_PARAM, CRITICAL_PARAM, LEVELS_PARAM, TRACKS_PARAM, QUERY_PARAM,
                      CHAIN_PARAM, SELECT_PARAM, MARKERS_PARAM, SEARCH_PARAM)


def view_option_values(state: dict[str, Any]) -> dict[str, str]:
    """The URL values of a timeline state's options and selection that differ from the defaults."""
    values: dict[str, str] = {}
    if state.get("colour_by") not in (None, "opcode"):
        values[COLOUR_PARAM] = str(state["colour_by"])
    if state.get("expand_dma") is True:
        values[DMA_PARAM] = "expanded"
    if state.get("critical_path") is True:
        values[CRITICAL_PARAM] = "on"
    if isinstance(state.get("span_levels"), int):
        values[LEVELS_PARAM] = str(state["span_levels"])
    if isinstance(state.get("row_filter"), str) and state["row_filter"].strip():
        values[TRACKS_PARAM] = state["row_filter"].strip()[:MAX_FILTER_CHARS]
    if isinstance(state.get("query"), str) and state["query"].strip():
        values[QUERY_PARAM] = state["query"].strip()
    if isinstance(state.get("chain"), str) and state["chain"]:
        values[CHAIN_PARAM] = state["chain"][:40]
    selected = state.get("selected")
    if isinstance(selected, list) and len(selected) == 2:
        values[SELECT_PARAM] = f"{selected[0]}:{selected[1]}"
    markers = state.get("markers")
    if isinstance(markers, list) and markers and all(isinstance(t, int) for t in markers):
        values[MARKERS_PARAM] = ",".join(str(t) for t in markers)
    if isinstance(state.get("search"), str) and state["search"].strip():
        values[SEARCH_PARAM] = state["search"][:200]
    return values


SQL_PATH = "/sql"


def query_bar_hrefs(query: dict[str, str]) -> tuple[str, str]:
    """For a timeline URL's values that draw ``?query=``: the SQL page with that query in its editor, and the same
    timeline without it."""
    sql = query.get(QUERY_PARAM, "")
    trace = {TRACE_PARAM: query[TRACE_PARAM]} if TRACE_PARAM in query else {}
    rest = {k: v for k, v in query.items() if k != QUERY_PARAM}
    return f"{SQL_PATH}?{urlencode({**trace, QUERY_PARAM: sql})}", "/?" + urlencode(rest)


def query_example_href(query: dict[str, str]) -> str:
    """The SQL page of the URL's trace with an example of a query the timeline draws as rows in its editor."""
    from profiler.sql_examples import TIMELINE_EXAMPLE

    trace = {TRACE_PARAM: query[TRACE_PARAM]} if TRACE_PARAM in query else {}
    return f"{SQL_PATH}?{urlencode({**trace, QUERY_PARAM: TIMELINE_EXAMPLE})}"


def parse_select(value: Any) -> tuple[str, int] | None:
    """``"Instruction:42"`` -> ``("Instruction", 42)``; None for anything else (the table is checked by the
    caller)."""
    if not isinstance(value, str) or ":" not in value or len(value) > 100:
        return None
    table, _sep, ident = value.rpartition(":")
    try:
        return (table, int(ident)) if table else None
    except ValueError:
        return None


def timeline_search_href(trace_id: str, location: str) -> str:
    """The timeline page of ``trace_id`` searching for exactly ``location`` (its first match selected)."""
    return "/?" + urlencode({TRACE_PARAM: trace_id, SEARCH_PARAM: f'"{location}"'})


def timeline_select_href(trace_id: str, table: str, ident: int, start_ns: int, end_ns: int) -> str:
    """The timeline page of ``trace_id`` showing an event (``start_ns``..``end_ns``, with as much again either side)
    selected: its details, outline and dependency arrows."""
    pad = max(1, end_ns - start_ns)
    return "/?" + urlencode({TRACE_PARAM: trace_id, "start": start_ns - pad, "end": end_ns + pad,
                             SELECT_PARAM: f"{table}:{ident}"})


def source_href(trace_id: str, file: str, line: int | None = None) -> str:
    """The source page of ``trace_id`` showing ``file`` (scrolled to ``line``, marked)."""
    values: dict[str, Any] = {TRACE_PARAM: trace_id, FILE_PARAM: file}
    if line is not None:
        values[LINE_PARAM] = line
    return SOURCE_PATH + "?" + urlencode(values)
