"""The timeline page's logic as plain functions: what a zoom, a pan, a reset or a jump sends to the browser.

:func:`update_timeline` is the whole level-of-detail loop of the page.  Given the browser's state (what it has
buffered, at which resolution) and what just happened (a relayout, a jump, an option change), it decides whether
anything must be fetched; if so it asks ``Trace.window`` for the buffer at the graph's pixel width, rasterises it
(:mod:`profiler.figures.raster`) and returns either a whole figure (first view, new trace, new rows or colours) or
only the changes: the strip codes (a palette PNG) and the lanes (and the x range when the server moved the view).
The lanes' queries run on a small thread pool (:data:`QUERY_POOL`) while the strips' window is read.  The timeline
page draws them with ``Plotly.update`` (``assets/trnprof.js``); a ``dcc.Graph`` gets them as a ``dash.Patch``
(:meth:`TimelineUpdate.graph_output`).  The server keeps nothing between calls: what the browser sends back is
checked by :mod:`dashboard.timeline_state`.
"""

from __future__ import annotations

import contextlib
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import dash
import plotly.graph_objects as go
from dash import Patch

from dashboard.inputs import as_time_range
from dashboard.query_slots import UserQuerySlots
from dashboard.timeline_picks import Selection, decoration_shapes
from dashboard.timeline_state import TimelineOptions, clamp_width, clean_state, nav_range
from profiler.figures import lane_data
from profiler.figures import lanes as lanes_mod
from profiler.figures import palette as pal
from profiler.figures import viewport as vp
from profiler.figures.fetch import drawing_window
from profiler.figures.raster import StripFrame, TimelineRow, rasterize, row_labels, timeline_rows
from profiler.figures.row_filter import (
    RowFilter,
    RowFilterError,
    filter_counters,
    filter_rows,
    no_match_message,
)
from profiler.figures.strip_png import code_colours
from profiler.figures.timefmt import ns_to_axis
from profiler.figures.timeline import range_select_trace, strip_update, timeline_figure
from profiler.query_track import QueryTracks, query_tracks
from profiler.trace import DEFAULT_SQL_TIMEOUT_S
from tracer.errors import TrnprofError

#: Triggers that always rebuild the whole figure (others rebuild only when rows, colours or width changed).
#: ``live``: a followed recording has new rows (:mod:`dashboard.live_view`): its rows may have changed too.
REBUILD_TRIGGERS = frozenset({"trace", "initial", "live"})



@dataclass
class TimelineUpdate:
    """What one call decided: a rebuilt figure, or the changes a zoom makes to the drawn one, and the new state.

    Exactly one of ``figure`` and ``changes`` is set when something must be drawn, neither when the view is
    already drawn (a pan inside the buffer).  ``changes`` is ``{"data": {trace index: {attribute: value}},
    "layout": {attribute path: value}}``: the strips' codes (a ``uint8`` typed array), ``x0`` and ``dx``, each lane's
    ``x`` and ``y`` (typed arrays), and the x range when the server moved the view (a jump, a reset, a clamp).
    """

    figure: go.Figure | None
    changes: dict[str, Any] | None
    state: dict[str, Any]
    view: Any = dash.no_update
    legend: Any = dash.no_update
    status: Any = dash.no_update
    fetched: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def graph_output(self) -> Any:
        """For a ``dcc.Graph``'s ``figure``: the figure, a ``dash.Patch`` of the changes, or ``dash.no_update``."""
        if self.figure is not None:
            return self.figure
        if not self.changes:
            return dash.no_update
        patch = Patch()
        for index, values in self.changes["data"].items():
            for key, value in values.items():
                patch["data"][index][key] = value
        for path, value in self.changes["layout"].items():
            target = patch["layout"]
            *parents, leaf = path.split(".")
            for part in parents:
                target = target[part]
            target[leaf] = value
        if "xaxis.range" in self.changes["layout"]:
            # (a dcc.Graph keeps a double-click's autorange over a range the server sets, and plotly's autorange of
            # the strip image ends on the resolution grid, past the trace's end: the compare page's reset did)
            patch["layout"]["xaxis"]["autorange"] = False
        return patch

    def draw_payload(self, config: dict[str, Any] | None = None) -> Any:
        """For the timeline page's ``tl-draw`` store (drawn by ``assets/trnprof.js``): ``{"kind": "figure",
        "figure", "config", "seq", "colours"}`` (``colours``: the RGB of each strip code, for hover), ``{"kind":
        "update", "data", "layout", "seq"}`` or ``dash.no_update``."""
        seq = self.state.get("seq", 0)
        if self.figure is not None:
            return {"kind": "figure", "figure": self.figure, "config": config or {}, "seq": seq,
                    "colours": [list(rgb) for rgb in code_colours()]}
        if not self.changes:
            return dash.no_update
        return {"kind": "update", "data": {str(k): v for k, v in self.changes["data"].items()},
                "layout": self.changes["layout"], "seq": seq}


#: Threads running the lanes' queries next to the strips' window query (started on first use; each thread gets its
#: own cursor of every trace it queries).
QUERY_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="trnprof-lanes")



@dataclass(frozen=True)
class TimelineRows:
    """The rows and Counter tracks drawn under some options, and what the row filter and the query made of them:
    ``note`` says how many rows the filter kept (or why it kept them all: a malformed filter, or one no row
    matches) and what the query drew (or why it drew nothing); ``query``: the query's rows (drawn first) and
    counters (drawn last)."""

    rows: list[TimelineRow]
    counters: list[dict[str, Any]]
    note: str = ""
    query: QueryTracks | None = None


def rows_for(trace: Any, options: TimelineOptions, counters: list[dict[str, Any]] | None = None,
             query: QueryTracks | str | None = None) -> TimelineRows:
    """The timeline rows of ``trace`` under ``options`` -- ``query``'s rows (its :class:`QueryTracks`, or the
    one-line error of running it) first -- and its Counter tracks (given, or read from ``trace``; the query's
    last) the row filter keeps.  A filter that is malformed or keeps no row draws every row, and says why."""
    every = timeline_rows(trace.tracks(), collapse_dma=not options.expand_dma, span_levels=options.span_levels)
    every_counter = lane_data.counter_tracks(trace.tracks()) if counters is None else list(counters)
    notes: list[str] = []
    tracks = query if isinstance(query, QueryTracks) else None
    if tracks is not None:
        every = tracks.timeline_rows() + every
        every_counter += tracks.counter_tracks()
        notes.append(f"query: {tracks.summary}")
    elif isinstance(query, str) and query:
        notes.append(f"query: {query}")
    rows, kept_counters = every, every_counter
    if options.row_filter:
        try:
            row_filter = RowFilter.parse(options.row_filter)
        except RowFilterError as exc:
            notes.append(f"{exc}; every row drawn")
        else:
            kept = filter_rows(every, row_filter)
            if kept:
                rows, kept_counters = kept, filter_counters(every_counter, row_filter)
                notes.append(f"{len(kept)} of {len(every)} rows match {row_filter.text!r}")
            else:
                notes.append(f"{no_match_message(row_filter, every)}; every row drawn")
    return TimelineRows(rows, kept_counters, " · ".join(notes), tracks)


#: Row sets a served trace keeps (options and filters a user tried); the oldest is dropped beyond it.
MAX_CACHED_ROW_SETS = 32
#: Query results a served trace keeps (each up to profiler.query_track.MAX_QUERY_ROWS rows); the oldest is dropped.
MAX_CACHED_QUERIES = 4


class _QueryRun:
    """A query track's run under way: its result once ``finished`` is set."""

    __slots__ = ("finished", "result")

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.result: QueryTracks | str | None = None


class TraceLayout:
    """What a served trace's timeline needs on every call and never changes: its time range, its rows (per DMA
    expansion, span levels, row filter and query) and its query tracks, read once (each is a query) and shared by
    every browser session."""

    def __init__(self, trace: Any, slots: UserQuerySlots | None = None) -> None:
        self.trace = trace
        #: The server's slots for users' queries (a query track's query takes one while it runs).
        self.slots = slots
        self.time_range: tuple[int, int] = (int(trace.time_range[0]), int(trace.time_range[1]))
        self._rows: dict[tuple[bool, int | None, str, str], TimelineRows] = {}
        self._counters: list[dict[str, Any]] | None = None
        #: Finished queries (least recently used first) and the runs under way, each with an event set when done.
        self._queries: dict[str, QueryTracks | str] = {}
        self._running: dict[str, _QueryRun] = {}
        self._query_lock = threading.Lock()   # held only to look up and store, never while a query runs

    @property
    def counters(self) -> list[dict[str, Any]]:
        """The trace's Counter tracks (drawn as lanes)."""
        if self._counters is None:
            self._counters = lane_data.counter_tracks(self.trace.tracks())
        return self._counters

    def query(self, sql: str) -> QueryTracks | str | None:
        """The query tracks of ``sql`` (run on first use), its one-line error, or None for no query.

        One run per query, whichever request asks first; a request asking for the same query meanwhile waits for
        that run and gets its result, and one asking for another query runs its own beside it (no lock is held while
        a query runs, so a slow query delays nobody else).  A timed-out query is not kept: it may run in time later.
        """
        if not sql:
            return None
        with self._query_lock:
            done = self._queries.pop(sql, None)
            if done is not None:
                self._queries[sql] = done  # most recently used
                return done
            run = self._running.get(sql)
            mine = run is None
            if mine:
                run = self._running[sql] = _QueryRun()
        assert run is not None
        if not mine:
            run.finished.wait()
            return run.result
        keep = False
        try:
            with self.slots.slot(DEFAULT_SQL_TIMEOUT_S) if self.slots is not None else contextlib.nullcontext():
                run.result = query_tracks(self.trace, sql)
            keep = True
        except TrnprofError as exc:
            run.result = (str(exc).splitlines()[0] if str(exc) else type(exc).__name__).replace(
                "raise timeout_s / --timeout, or narrow", "narrow")  # (the timeline has no timeout to raise)
            keep = not run.result.startswith(("query timed out", "the server is already running"))
        finally:
            if run.result is None:  # an unexpected error: the waiters get its name, the asker the exception
                run.result = "the query failed (the server log has the details)"
            with self._query_lock:
                del self._running[sql]
                if keep:
                    while len(self._queries) >= MAX_CACHED_QUERIES:
                        del self._queries[next(iter(self._queries))]
                    self._queries[sql] = run.result
            run.finished.set()
        return run.result

    def drawn(self, options: TimelineOptions) -> TimelineRows:
        """The rows and counters under ``options``, with the row filter's note (computed on first use)."""
        key = options.rows_key
        if key not in self._rows:
            if len(self._rows) >= MAX_CACHED_ROW_SETS:
                del self._rows[next(iter(self._rows))]
            self._rows[key] = rows_for(self.trace, options, self.counters, self.query(options.query))
        return self._rows[key]


def _expect_few(prev: dict[str, Any] | None, buffer: vp.Buffer | None, plan: vp.Buffer) -> bool:
    """Whether the new window is likely hover-sized (its events listed): the previous one was, and the new one is at
    the same resolution or a finer one (a pan or a zoom in), so it reads the events' attributes in its one query."""
    return bool(prev and prev.get("few_events")) and buffer is not None and plan.resolution_ns <= buffer.resolution_ns


def _track_ids(rows: list[TimelineRow]) -> list[int]:
    return [tid for r in rows for tid in r.track_ids]


def _legend_items(frame: StripFrame) -> list[dict[str, Any]]:
    return [{"name": name, "colour": pal.slot_colour(slot), "slot": slot}
            for slot, name in sorted(frame.legend.items(), key=lambda kv: (kv[1] == pal.OTHER, str(kv[1])))]


def legend_children(items: list[dict[str, Any]]) -> list[Any]:
    """Swatches of the colours drawn (the timeline's and the compare page's legends).  Each carries its colour slot
    (``data-slot``): the drawn strips cover the fetched buffer, wider than the view, and the timeline's script
    hides the swatches of colours not in view."""
    from dash import html

    return [html.Span([html.Span(className="swatch", style={"background": it["colour"]}), it["name"]],
                      className="legend-item", **({"data-slot": str(it["slot"])} if "slot" in it else {}))
            for it in items]


def view_data(frame: StripFrame, rows: list[TimelineRow], origin_ns: int) -> dict[str, Any]:
    """What the browser's hover tooltip needs: row labels, legend names by slot, events when few are in view."""
    return {
        "origin": origin_ns,
        "start": frame.start_ns - origin_ns,
        "labels": row_labels(rows),
        "rows": [list(r.track_ids) for r in rows],
        "groups": [r.group for r in rows],
        "legend": {str(slot): name for slot, name in frame.legend.items()},
        "shades": pal.SHADES,
        "res": frame.resolution_ns,
        "events": _relative_events(frame.hover_events, origin_ns),
    }


#: Hover event columns of strings, sent as indices into one string table (``"strings"``): a window's events repeat
#: a few opcodes, source lines and table names, so this halves the hover list's bytes.
HOVER_STRING_COLUMNS = ("name", "source", "table")


def _relative_events(events: dict[str, list[Any]] | None, origin_ns: int) -> dict[str, list[Any]] | None:
    """Hover events with times relative to the axis origin (what the browser's x values are) and the
    :data:`HOVER_STRING_COLUMNS` as indices into ``"strings"``."""
    if events is None:
        return None
    table: dict[Any, int] = {}
    out = {**events, "start": [s - origin_ns for s in events["start"]],
           "end": [e - origin_ns for e in events["end"]]}
    for column in HOVER_STRING_COLUMNS:
        if column in events:
            out[column] = [table.setdefault(value, len(table)) for value in events[column]]
    out["strings"] = list(table)
    return out


def hover_strings(events: dict[str, list[Any]], column: str) -> list[Any]:
    """The values of a string column of the hover events :func:`view_data` sends (decoded from the string table)."""
    return [events["strings"][i] for i in events[column]]


def status_detail(frame: StripFrame, rows_note: str = "") -> str:
    """The part of the status line the drawn frame sets: its resolution, how exactly it is drawn, and what the
    row filter kept (``rows_note``, :class:`TimelineRows`'s note)."""
    from profiler.figures.timefmt import format_duration

    exact = int(frame.exact.sum())
    detail = (f"{frame.n_events:,} events drawn exactly" if exact == len(frame.exact)
              else f"{exact} of {len(frame.exact)} rows exact, others per-pixel summaries")
    if exact and frame.n_events and frame.hover_events is None:   # (the hover lists events below a bound)
        from profiler.figures.raster import HOVER_EVENT_LIMIT

        detail += f"; hover per event under {HOVER_EVENT_LIMIT:,} in view"
    note = f" · {rows_note}" if rows_note else ""
    return f"{format_duration(frame.resolution_ns)}/px · {detail}{note}"


def status_line(view: tuple[int, int], detail: str) -> str:
    """One line under the graph: what is in view and at which level of detail."""
    from profiler.figures.timefmt import format_duration

    return f"view {format_duration(view[1] - view[0])} · {detail}"


def update_timeline(trace: Any, trace_id: str, *, state: dict[str, Any] | None, trigger: str,
                    relayout: dict[str, Any] | None = None, width_px: Any = None,
                    options: TimelineOptions | None = None, nav: dict[str, Any] | None = None,
                    palette: pal.CategoryPalette | None = None, lanes: bool = True,
                    overlay: Callable[[list[TimelineRow], int, tuple[int, int, int]], list[Any]] | None = None,
                    set_range: bool = False, layout: TraceLayout | None = None,
                    range_select: bool = True, initial_view: Any = None,
                    selection: Selection | None = None, markers: list[int] | None = None,
                    ) -> TimelineUpdate | None:
    """Decide and build what the browser needs after ``trigger``.

    Args:
        trace: the opened ``Trace``.
        trace_id: its registry id (kept in the state: a state of another trace is ignored).
        state: the browser's ``tl-state`` store (None at first).
        trigger: ``initial``, ``trace``, ``options``, ``size``, ``relayout``, ``reset``, ``nav`` or ``live`` (a
            followed recording's new rows: the figure is rebuilt; a view of the whole trace stays whole, a zoomed
            view reaching the trace's end keeps its width and moves to the new end, any other view stays put).
        relayout: plotly relayoutData for ``relayout``.
        width_px: the graph's plot-area width in pixels.
        options: colour mode and DMA expansion.
        nav: ``{"start_ns", "end_ns"}`` to focus, for ``nav``.
        palette: opcode/layer colours (stable per trace).
        lanes: draw the counter lanes.
        overlay: ``overlay(rows, origin_ns, (start_ns, end_ns, width_px))`` -> extra traces drawn over the strips
            for the fetched window (after the lanes; a zoom that fetches patches their x, y and text too); used
            with ``options.critical_path`` or ``options.chain`` (``options.overlay``).
        set_range: send the x range even when the relayout came from this graph (a graph that follows another).
        layout: the trace's cached time range and rows (read from ``trace`` when None).
        range_select: make Box Select available (an invisible selectable trace, last in the figure) so a dragged
            time range is reported for the selection summary.
        initial_view: ``(start_ns, end_ns)`` to show first instead of the whole trace (a link to a view: the
            URL's ``start`` and ``end``); used when there is no state yet, cut to the trace, ignored when
            malformed.
        selection: the selected event: every rebuilt figure outlines it and draws its dependency arrows (a new
            selection on a drawn figure is patched in by :func:`dashboard.timeline_picks.decoration_layout`); the
            state keeps its ``[table, id]`` (``"selected"``) for links to the view.
        markers: marker times (ns) drawn into every rebuilt figure, and kept in the state (``"markers"``) for links.

    Returns:
        The update, or None when nothing changes (a relayout that does not move the time axis).
    """
    options = options or TimelineOptions()
    palette = palette or pal.CategoryPalette()
    prev = clean_state(state, trace_id)
    width = clamp_width(width_px if width_px is not None else (state if isinstance(state, dict) else {}).get("width"))
    layout = layout if layout is not None and layout.trace is trace else TraceLayout(trace)
    t_range = layout.time_range
    origin = t_range[0]
    same_structure = (prev is not None and prev.get("colour_by") == options.colour_by
                      and bool(prev.get("expand_dma")) == options.expand_dma and prev.get("width") == width
                      and prev.get("span_levels") == options.span_levels
                      and (prev.get("row_filter") or "") == options.row_filter
                      and (prev.get("query") or "") == options.query
                      and (prev.get("chain") or "") == options.chain
                      and bool(prev.get("critical_path")) == options.critical_path)
    rebuild = prev is None or not same_structure or trigger in REBUILD_TRIGGERS
    buffer = vp.Buffer.from_dict(prev.get("buffer")) if prev else None
    prev_view = tuple(prev["view"]) if prev and "view" in prev else None

    asked: Any = None
    if trigger == "relayout":
        asked = vp.view_from_relayout(relayout, origin)
        if asked is None and prev is not None:
            return None
        asked = asked or "reset"
        view = t_range if asked == "reset" else asked
    elif prev_view is None and trigger != "reset" and as_time_range(initial_view) is not None:
        view = as_time_range(initial_view)  # (cut to the trace below)
    elif trigger == "nav" and nav_range(nav) is not None:
        # (also before the first figure: a search the URL asks for may select its first match before it is drawn)
        view = vp.focus_view(*nav_range(nav), t_range)  # type: ignore[misc]
    elif trigger in {"reset", "trace"} or prev_view is None or (trigger == "live" and prev.get("whole")):
        view = t_range   # (a followed recording's new rows: a view of the whole trace follows its end)
    elif trigger == "live" and prev.get("end") is not None and prev_view[1] >= prev["end"]:
        # a zoomed view at the trace's end (tail -f): the same width, moved to the new end
        view = (t_range[1] - (prev_view[1] - prev_view[0]), t_range[1])
    else:
        view = prev_view
    view = vp.clamp_view(int(view[0]), int(view[1]), t_range)
    asked = tuple(asked) if isinstance(asked, tuple) else asked

    new_state: dict[str, Any] = {
        "trace": trace_id, "view": list(view), "whole": view == t_range, "end": t_range[1], "width": width,
        "origin": origin,
        "colour_by": options.colour_by, "expand_dma": options.expand_dma, "critical_path": options.critical_path,
        "span_levels": options.span_levels, "row_filter": options.row_filter, "query": options.query,
        "chain": options.chain,
        "buffer": buffer.to_dict() if buffer else None, "seq": (prev or {}).get("seq", 0) + 1,
        "selected": selection.key if selection is not None else None, "markers": list(markers or []),
    }
    if prev is not None and not rebuild:
        # What the drawn figure has (its lane traces, its legend, whether its window was hover-sized) carries over
        # a step that fetches nothing, so the next fetch still updates every lane.
        new_state.update({key: prev[key] for key in ("lanes", "legend_key", "few_events", "overlay_traces",
                                                     "status_detail") if key in prev})
    axis_range = [ns_to_axis(view[0], origin), ns_to_axis(view[1], origin)]
    # The browser already shows the range it asked for; the server sets it only when it chose the view itself.
    moved = {} if trigger == "relayout" and asked == view and not set_range else {"xaxis.range": axis_range}
    if not rebuild and not vp.needs_fetch(buffer, view, width):
        # the drawn frame serves the view: only the status line's span changes
        detail = (prev or {}).get("status_detail")
        status = status_line(view, detail) if isinstance(detail, str) else dash.no_update
        return TimelineUpdate(None, {"data": {}, "layout": moved} if moved else None, new_state, status=status)

    drawn_rows = layout.drawn(options)
    rows = drawn_rows.rows
    plan = vp.plan_buffer(view, width, t_range)
    # The lanes' queries run on the pool while this thread reads and rasterises the strips' window.
    pending = lane_data.submit_timeline_lanes(QUERY_POOL, trace, rows, plan, plan.width_px,
                                              counters=drawn_rows.counters, query=drawn_rows.query) if lanes else None
    try:
        window = drawing_window(trace, plan.start_ns, plan.end_ns, plan.width_px, _track_ids(rows),
                                colour_by=options.colour_by, expect_few=_expect_few(prev, buffer, plan),
                                query=drawn_rows.query)
        frame = rasterize(window, rows, palette, options.colour_by)
    finally:
        if pending is not None:
            pending.wait()   # no query of this call outlives it (the caller holds the trace's lock)
    lane_list = pending.result() if pending is not None else []
    new_state["buffer"] = plan.to_dict()
    new_state["few_events"] = frame.hover_events is not None   # listed for hover: few enough
    legend: Any = _legend_items(frame)
    legend_key = zlib.crc32(repr(legend).encode())
    new_state["legend_key"] = legend_key
    if not rebuild and prev is not None and prev.get("legend_key") == legend_key:
        legend = dash.no_update  # the browser shows this legend already: no re-render
    hover = view_data(frame, rows, origin)
    new_state["status_detail"] = status_detail(frame, drawn_rows.note)
    status = status_line(view, new_state["status_detail"])
    info = {"window_events": frame.n_events, "rows": len(rows), "px": frame.width_px}

    if rebuild:
        fig = timeline_figure(frame, rows, origin, x_range_ns=view, legend=False, lanes=lane_list, plot_width_px=width,
                              grid_x=True)
        new_state["lanes"] = [t.name for t in fig.data[1:]]
        if options.overlay and overlay is not None:
            traces = overlay(rows, origin, (plan.start_ns, plan.end_ns, plan.width_px))
            fig.add_traces(traces)
            new_state["overlay_traces"] = len(traces)
        if range_select:  # last: Box Select summarises a dragged time range
            fig.add_trace(range_select_trace(t_range, origin))
        if selection is not None or markers:
            fig.update_layout(shapes=decoration_shapes(hover["rows"], hover["groups"], origin, selection, markers))
        return TimelineUpdate(fig, None, new_state, hover, legend, status, True, info)
    # Lanes by name: trace 1 + i of the drawn figure is the lane series named state["lanes"][i]; one without data
    # at this zoom is emptied, one the figure does not have is left out.
    drawn = (prev or {}).get("lanes") or []
    new_state["lanes"] = drawn
    updates = lanes_mod.lane_updates_by_name(lane_list, origin, grid_x=True)
    data: dict[int, dict[str, Any]] = {0: strip_update(frame, origin)}
    for i, name in enumerate(drawn):
        data[1 + i] = updates.get(name, lanes_mod.EMPTY_LANE)
    n_overlay = int((prev or {}).get("overlay_traces") or 0)
    new_state["overlay_traces"] = n_overlay
    if options.overlay and overlay is not None and n_overlay:
        # the overlay follows the fetched window too (drawn at its resolution: its size grows with the pixels)
        traces = overlay(rows, origin, (plan.start_ns, plan.end_ns, plan.width_px))
        for k, trace_obj in enumerate(traces[:n_overlay]):
            data[1 + len(drawn) + k] = overlay_update(trace_obj)
    return TimelineUpdate(None, {"data": data, "layout": moved}, new_state, hover, legend, status, True, info)


def overlay_update(trace_obj: Any) -> dict[str, Any]:
    """The ``x``, ``y`` and ``text`` of an overlay trace, as a zoom patch sends them."""
    return {"x": list(trace_obj.x or ()), "y": list(trace_obj.y or ()),
            "text": list(trace_obj.text) if trace_obj.text is not None else None}


def empty_figure(message: str) -> go.Figure:
    """A blank figure carrying a message (no trace, failed query)."""
    fig = go.Figure()
    fig.update_layout(xaxis={"visible": False}, yaxis={"visible": False}, height=200,
                      annotations=[{"text": message, "showarrow": False, "xref": "paper", "yref": "paper",
                                    "x": 0.5, "y": 0.5}])
    return fig
