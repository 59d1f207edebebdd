"""The memory page's content, computed without a browser: the URL's choices, a zoom's window, the figure.

``?mem=SBUF|PSUM`` picks the memory and ``?start=&end=`` (ns) the window, as on the timeline; a zoom on the graph
(its x range, seconds since the trace start) asks for a new window, a double-click (autorange) for the whole
trace.  The figure is :func:`profiler.figures.memory_map.memory_map_figure` of
:func:`profiler.analyses.memory_map.memory_map`, the same as ``Trace.memory_figure`` in a notebook.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import plotly.graph_objects as go

from dashboard.inputs import as_float, as_time_range
from dashboard.links import TRACE_PARAM, source_href, timeline_select_href
from profiler.analyses import schema as rs
from profiler.analyses.memory_cell import cell_accesses
from profiler.analyses.memory_map import MEMORIES, TooManyAccesses, capacity, memory_map, memory_maps
from profiler.analyses.source_lines import split_location
from profiler.db.sqlutil import quote
from profiler.errors import TrnprofError
from profiler.figures.memory_map import headline, memory_map_figure
from profiler.figures.timefmt import TIME_AXIS, axis_to_ns, format_duration, format_time, ns_to_axis
from tracer import schema as ts

MEM_PARAM = "mem"
MEMORY_PATH = "/memory"
#: Instructions in a selected range above which the selection panel leaves the memory peaks to the memory page (the
#: map of 10^5 instructions takes ~0.7 s, of 10^6 ~3 s: the rest of the panel takes a fraction of that).
SELECTION_MAX_INSTRUCTIONS = 200_000
#: What the page's window store holds while the whole trace is shown (None: nothing shown yet).
WHOLE = "all"
#: Columns of the raster (about the graph's width in pixels) and address rows.
WIDTH = 900
HEIGHT = 256
#: The farthest an axis value (seconds since the trace start) may be: about the +-2**62 ns a database holds.
MAX_AXIS_S = 4.0e9
#: The narrowest window a zoom may ask for.
MIN_SPAN_NS = 16


@dataclass(frozen=True)
class MemoryView:
    """What the page shows: a figure and a headline, or an error line; the window and memory it is for."""

    figure: Any
    status: str
    error: str | None
    window: tuple[int, int] | None
    mem: str
    #: The addresses the map's rows cover, ``[0, top)`` (what a click's row stands for); None without a map.
    top: int | None = None


def url_mem(query: dict[str, str]) -> str:
    """The memory ``?mem=`` names (case-insensitive), SBUF for anything else."""
    value = str(query.get(MEM_PARAM, "")).upper()
    return value if value in MEMORIES else MEMORIES[0]


def shown_window(stored: Any, search: str | None) -> tuple[int, int] | None:
    """The window the page shows: the stored one (:data:`WHOLE`: the whole trace, None), else before anything was
    shown the URL's (``?start=&end=``)."""
    from dashboard.app import query_values  # (the app imports the pages, which import this module)

    if stored == WHOLE:
        return None
    window = as_time_range(stored)
    return window if window is not None and window[0] < window[1] else url_window(query_values(search))


def url_window(query: dict[str, str]) -> tuple[int, int] | None:
    """``?start=&end=`` as a window (ns), None when missing, malformed or empty."""
    try:
        start, end = int(query["start"]), int(query["end"])
    except (KeyError, ValueError):
        return None
    return (start, end) if start < end else None


def is_zoom(relayout: Any) -> bool:
    """Whether a graph relayout changes the time axis (a zoom, a pan or a reset), not only the size or the y axis."""
    return isinstance(relayout, dict) and any(
        isinstance(k, str) and (k.startswith("xaxis.range") or k == "xaxis.autorange") for k in relayout)


def zoomed_window(relayout: Any, origin_ns: int, extent: tuple[int, int],
                  current: tuple[int, int] | None) -> tuple[int, int] | None:
    """The window a graph relayout asks for: its new x range cut to the trace (``extent``), None on a reset
    (autorange) or anything that is not an x-range change (``current`` is kept then)."""
    if not isinstance(relayout, dict):
        return current
    if relayout.get("xaxis.autorange") is True:
        return None
    x0, x1 = (as_float(relayout.get(f"xaxis.range[{i}]"), -MAX_AXIS_S, MAX_AXIS_S) for i in (0, 1))
    rng = relayout.get("xaxis.range")
    if (x0 is None or x1 is None) and isinstance(rng, list | tuple) and len(rng) == 2:
        x0, x1 = (as_float(v, -MAX_AXIS_S, MAX_AXIS_S) for v in rng)
    if x0 is None or x1 is None:
        return current
    a, b = sorted((axis_to_ns(x0, origin_ns), axis_to_ns(x1, origin_ns)))
    a, b = max(a, extent[0]), min(b, extent[1])
    if b - a < MIN_SPAN_NS:  # widened around its middle, moved inside the trace
        a = max(extent[0], min((a + b) // 2 - MIN_SPAN_NS // 2, extent[1] - MIN_SPAN_NS))
        b = min(extent[1], a + MIN_SPAN_NS)
    return (a, b) if b > a else current


def build_view(trace: Any, mem: str, window: tuple[int, int] | None) -> MemoryView:
    """The figure of ``mem`` over ``window`` (None: the whole trace), or the one-line reason there is none."""
    window = as_time_range(window) if window is not None else None
    origin = trace.time_range[0]
    try:
        mm = memory_map(trace, mem, *(window or (None, None)), width=WIDTH, height=HEIGHT)
    except TooManyAccesses as exc:  # an empty graph of the window, to zoom in on
        shown = window or trace.time_range
        return MemoryView(empty_figure(shown, origin, mem, trace), "", str(exc), shown, mem)
    except TrnprofError as exc:
        return MemoryView(None, "", str(exc), window, mem)
    return MemoryView(memory_map_figure(mm, origin, title=""), headline(mm, origin), None, (mm.start_ns, mm.end_ns),
                      mem, mm.top)


def empty_figure(window: tuple[int, int], origin_ns: int, mem: str, trace: Any) -> Any:
    """A graph of ``window`` with nothing drawn (no map: too much to draw), whose time axis can be zoomed."""
    x = [ns_to_axis(window[0], origin_ns), ns_to_axis(window[1], origin_ns)]
    fig = go.Figure(go.Scatter(x=x, y=[0, 0], mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False))
    fig.update_layout(height=640, margin={"l": 70, "r": 20, "t": 30, "b": 40}, plot_bgcolor="#ffffff",
                      xaxis={**TIME_AXIS, "range": x, "title": {"text": "time: drag across to zoom in"}},
                      yaxis={"range": [0, capacity(trace, mem) / 1024], "fixedrange": True,
                             "title": {"text": f"{mem} address (KiB per partition)"}})
    return fig


def timeline_href(trace_id: str, window: tuple[int, int] | None) -> str:
    """The timeline page of ``trace_id`` at ``window`` (the whole trace when None)."""
    values = {TRACE_PARAM: trace_id}
    if window is not None:
        values.update(start=str(window[0]), end=str(window[1]))
    return "/?" + urlencode(values)


def memory_section(trace: Any, trace_id: str) -> Any:
    """The summary page's "Memory": the whole trace's peak of live bytes in SBUF and PSUM (:func:`headline`),
    each a link to its memory map; nothing for a trace without on-chip operands; the reason for one too long to
    map at once."""
    from dash import dcc, html

    try:
        maps = memory_maps(trace, width=1, height=1)
    except TooManyAccesses as exc:
        lines = [html.Li([f"{exc} on ", dcc.Link("the memory page", href=memory_href(trace_id, MEMORIES[0], None))])]
        return html.Div([html.H3("Memory"), html.Ul(lines, id="summary-memory-lines")], className="analysis-section")
    except TrnprofError:  # no on-chip operands: not a recording of trnprof's simulator
        return html.Div()
    lines = [html.Li(dcc.Link(headline(mm, trace.time_range[0]), href=memory_href(trace_id, mm.mem, None)))
             for mm in maps]
    return html.Div([html.H3("Memory"), html.Ul(lines, id="summary-memory-lines")], className="analysis-section")


def selection_section(trace: Any, start_ns: int, end_ns: int) -> Any:
    """The selection panel's "Memory": the peaks of live SBUF and PSUM in ``[start_ns, end_ns)`` (nothing for a
    trace without on-chip operands; the reason when the range is too long to map)."""
    from dash import html

    try:
        n = trace.sql_arrow(f"SELECT count(*) FROM {quote(ts.INSTRUCTION.name)} WHERE {quote(ts.START_TS)} < $e "
                            f"AND {quote(ts.END_TS)} > $s", params={"s": int(start_ns), "e": int(end_ns)}
                            ).column(0)[0].as_py()
        if n > SELECTION_MAX_INSTRUCTIONS:  # seconds for a panel that answers in one: the memory page maps it
            return html.Div([html.H4("Memory"), html.Div(
                f"{n:,} instructions: too many to map here (at most {SELECTION_MAX_INSTRUCTIONS:,}); \"memory of "
                "this view\" maps them", className="muted")], id="selection-memory")
        maps = memory_maps(trace, start_ns, end_ns, width=1, height=1)
    except TooManyAccesses as exc:
        return html.Div([html.H4("Memory"), html.Div(str(exc), className="muted")], id="selection-memory")
    except TrnprofError:
        return html.Div(id="selection-memory")
    origin = trace.time_range[0]
    return html.Div([html.H4("Memory"), html.Ul([html.Li(headline(mm, origin)) for mm in maps])],
                    id="selection-memory")


#: The map's trace in the figure (:func:`profiler.figures.memory_map.memory_map_figure` draws it first).
MAP_CURVE = 0


def clicked_cell(click: Any, origin_ns: int, window: tuple[int, int], cap: int) -> tuple[tuple[int, int],
                                                                                        tuple[int, int]] | None:
    """The time and byte range of the raster cell a click on the graph landed in (``window``: the one shown;
    ``cap``: the addresses the rows cover, :attr:`MemoryView.top`), None for a click elsewhere or malformed click
    data."""
    points = click.get("points") if isinstance(click, dict) else None
    if not isinstance(points, list) or not points or not isinstance(points[0], dict):
        return None
    if points[0].get("curveNumber", 0) != MAP_CURVE:  # the live-bytes line: its y is bytes, not an address
        return None
    x = as_float(points[0].get("x"), -MAX_AXIS_S, MAX_AXIS_S)
    y = as_float(points[0].get("y"), 0.0, cap / 1024)
    if x is None or y is None:
        return None
    t0, t1 = window
    t = axis_to_ns(x, origin_ns)
    if not t0 <= t < t1:
        return None
    col = (t - t0) * WIDTH // (t1 - t0)
    row = min(HEIGHT - 1, int(y * 1024 * HEIGHT // cap))
    start, end = t0 + col * (t1 - t0) // WIDTH, t0 + -(-(col + 1) * (t1 - t0) // WIDTH)
    return (start, max(end, start + 1)), (row * cap // HEIGHT, max((row + 1) * cap // HEIGHT, row * cap // HEIGHT + 1))


def cell_panel(trace: Any, trace_id: str, mem: str, cell: tuple[tuple[int, int], tuple[int, int]]) -> Any:
    """The panel under the graph for a clicked cell: who touched its bytes then, who wrote the data they held and
    who read it (:func:`profiler.analyses.memory_cell.cell_accesses`), each linked to the timeline (selected) and
    its source line; or the one-line reason there is nothing."""
    from dash import dcc, html

    (t0, t1), (lo, hi) = cell
    origin = trace.time_range[0]
    try:
        table = cell_accesses(trace, mem, (t0, t1), (lo, hi))
    except TrnprofError as exc:
        return html.Div(str(exc), className="error", id="mem-cell-error")
    title = (f"{mem} bytes {lo:#x}-{hi:#x} at {format_time(t0, origin)} ({format_duration(t1 - t0)})")
    if table.num_rows == 0:
        return html.Div([html.H3(title), html.P("No instruction touched these bytes up to then.", className="muted")])
    body = []
    for r in table.to_pylist():
        where = split_location(r[rs.SOURCE]) if r[rs.SOURCE] else None
        source = dcc.Link(r[rs.SOURCE], href=source_href(trace_id, where[0], where[1])) \
            if where is not None and where[1] is not None else (r[rs.SOURCE] or "")
        body.append(html.Tr([
            html.Td(r[rs.ROLE]),
            html.Td(dcc.Link(r[rs.OPCODE] or f"#{r[rs.ID]}", href=timeline_select_href(
                trace_id, "Instruction", r[rs.ID], r[rs.START_NS], r[rs.END_NS]))),
            html.Td(r[rs.ENGINE] or ""), html.Td(r[rs.ACCESS]),
            html.Td(format_time(r[rs.START_NS], origin), className="num"),
            html.Td(format_duration(r[rs.END_NS] - r[rs.START_NS]), className="num"),
            html.Td(f"{r[rs.LO_BYTE]:#x}-{r[rs.HI_BYTE]:#x}", className="num"), html.Td(source),
        ]))
    head = ["", "instruction", "engine", "access", "start", "duration", "bytes", "source"]
    return html.Div([html.H3(title), html.Table([html.Thead(html.Tr([html.Th(h) for h in head])),
                                                 html.Tbody(body)], className="mini-table", id="mem-cell-table")])


def view_memory_href(search: str | None, state: Any) -> str | None:
    """The memory page for the view the timeline's ``state`` shows (the timeline's "memory of this view"; None
    without a view)."""
    from dashboard.app import query_values  # (the app imports the pages, which import this module)

    view = as_time_range(state.get("view")) if isinstance(state, dict) else None
    trace_id = query_values(search).get(TRACE_PARAM) or (state.get("trace") if isinstance(state, dict) else None)
    if view is None or view[0] >= view[1] or not isinstance(trace_id, str):
        return None
    return memory_href(trace_id, MEMORIES[0], view)


def memory_href(trace_id: str, mem: str, window: tuple[int, int] | None) -> str:
    """This page for ``trace_id``, ``mem`` and ``window``: the link to the view."""
    values = {TRACE_PARAM: trace_id, MEM_PARAM: mem}
    if window is not None:
        values.update(start=str(window[0]), end=str(window[1]))
    return MEMORY_PATH + "?" + urlencode(values)


__all__ = [
    "MEMORY_PATH",
    "MEM_PARAM",
    "MemoryView",
    "build_view",
    "cell_panel",
    "clicked_cell",
    "is_zoom",
    "memory_href",
    "memory_section",
    "selection_section",
    "shown_window",
    "timeline_href",
    "url_mem",
    "url_window",
    "view_memory_href",
    "zoomed_window",
]
