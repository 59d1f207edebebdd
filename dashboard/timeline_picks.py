"""What the user points at on the timeline: the event under a click, the outline of the selected event, and the
time range to summarise.

Plain functions over the ``tl-view`` / ``tl-state`` stores and plotly's click and selection data, all of which come
back from the browser: anything malformed, non-finite or beyond the time limit gives None (the callback then
updates nothing) instead of an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dash
import numpy as np
import pyarrow as pa

from dashboard.inputs import as_float, as_int, as_time_range
from dashboard.markers import marker_shapes
from profiler import db_schema as dbs
from profiler.db.lod import TIME_LIMIT
from profiler.figures.selected_event import selected_event_shapes
from profiler.figures.timefmt import axis_to_ns
from profiler.figures.timeline import separator_shapes
from profiler.query_track import QueryTracks
from tracer import schema as ts
from tracer.errors import TrnprofError

#: Rows a view may list (a bound on what a client can make the server iterate over).
MAX_ROWS = 10_000
#: The lowest track id a view may name: query rows have negative ids (:mod:`profiler.query_track`).
MIN_TRACK_ID = -(2**31)


def _axis_ns(x: Any, origin_ns: int) -> int | None:
    """An axis value (seconds since ``origin_ns``) as a valid timestamp; None when it is not one."""
    seconds = as_float(x, -TIME_LIMIT / 1e9, TIME_LIMIT / 1e9)
    if seconds is None:
        return None
    return as_int(axis_to_ns(seconds, origin_ns))


def view_rows(view: Any) -> list[list[int]] | None:
    """The ``rows`` of a ``tl-view`` store (each a list of track ids), or None when malformed."""
    rows = view.get("rows") if isinstance(view, dict) else None
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        return None
    out = []
    for row in rows:
        if not isinstance(row, list):
            return None
        ids = [as_int(t, MIN_TRACK_ID, 2**63 - 1) for t in row]
        if any(i is None for i in ids):
            return None
        out.append([int(i) for i in ids if i is not None])
    return out


@dataclass
class Selection:
    """The selected event as the timeline draws it: its outline and its dependency arrows, in whichever rows the
    figure has (the timeline builds them into every rebuilt figure and patches them in when the selection
    changes).  Its flows are read once, on first use."""

    trace: Any
    table: str
    id: int
    track_id: int | None
    start_ns: int | None
    end_ns: int | None
    _flows: tuple[pa.Table | None, pa.Table | None] | None = field(default=None, repr=False)

    @classmethod
    def from_store(cls, trace: Any, selected: Any) -> Selection | None:
        """The selection a ``tl-selected`` store names (None for nothing, or anything malformed)."""
        if not isinstance(selected, dict) or not isinstance(selected.get("table"), str):
            return None
        ident = as_int(selected.get("id"), -(2**63), 2**63 - 1)
        if ident is None:
            return None
        track = as_int(selected.get(dbs.TRACK_ID), MIN_TRACK_ID, 2**63 - 1)
        return cls(trace, selected["table"], ident, track, as_int(selected.get("start_ns")),
                   as_int(selected.get("end_ns")))

    @property
    def key(self) -> list[Any]:
        """``[table, id]``: what a link to the view keeps of it."""
        return [self.table, self.id]

    def flows(self) -> tuple[pa.Table | None, pa.Table | None]:
        """``Trace.flows`` of the event (None, None when they cannot be read: no arrows then)."""
        if self._flows is None:
            try:
                self._flows = self.trace.flows(self.table, self.id)
            except (TrnprofError, KeyError, ValueError, TypeError):
                self._flows = (None, None)
        return self._flows

    def shapes(self, rows_track_ids: list[list[int]], origin_ns: int) -> list[dict[str, Any]]:
        """Its outline and arrows on the figure's rows (:func:`profiler.figures.selected_event.
        selected_event_shapes`)."""
        selected = {dbs.TRACK_ID: self.track_id, "start_ns": self.start_ns, "end_ns": self.end_ns}
        return selected_event_shapes(rows_track_ids, selected, self.flows(), origin_ns)


def linked_selection(trace: Any, value: Any) -> dict[str, Any] | None:
    """The ``tl-selected`` store of the event a link names (``?select=Instruction:42``, see
    :func:`dashboard.links.parse_select`): its table, id, track and times read from ``trace``; None when the value
    is malformed or names no event of a timeline table the trace has."""
    from dashboard.details import EVENT_TABLES
    from dashboard.links import parse_select

    parsed = parse_select(value)
    if parsed is None or parsed[0] not in EVENT_TABLES:
        return None
    table, ident = parsed
    try:
        fields = trace.event(table, ident)
    except (TrnprofError, KeyError, ValueError, TypeError):
        return None
    return {"table": table, "id": ident, dbs.TRACK_ID: fields.get(dbs.TRACK_ID),
            "start_ns": fields.get("start_ts"), "end_ns": fields.get("end_ts")}


def decoration_shapes(rows_track_ids: list[list[int]], groups: list[str], origin_ns: int,
                      selection: Selection | None, markers: list[int] | None = None) -> list[dict[str, Any]]:
    """Every layout shape of the timeline: row separators, the selected event's outline and dependency arrows
    (:meth:`Selection.shapes`), and the markers (:func:`dashboard.markers.marker_shapes`)."""
    chosen = selection.shapes(rows_track_ids, origin_ns) if selection is not None else []
    return [*separator_shapes(groups), *chosen, *marker_shapes(markers or [], len(rows_track_ids), origin_ns)]


def decoration_layout(view: Any, selection: Selection | None, markers: list[int] | None = None,
                      ) -> dict[str, Any] | None:
    """The layout change (``{"shapes": [...]}``, for ``Plotly.relayout``) drawing the selected event's outline and
    arrows and the markers on the drawn figure, whose rows the ``tl-view`` store ``view`` names; None before a
    figure is drawn (the first figure draws them itself) or for a malformed store."""
    rows = view_rows(view)
    origin = as_int(view.get("origin")) if isinstance(view, dict) else None
    if rows is None or origin is None:
        return None
    groups = view.get("groups")
    groups = groups if isinstance(groups, list) and all(isinstance(g, str) for g in groups) else []
    return {"shapes": decoration_shapes(rows, groups, origin, selection, markers)}


def adjacent_event(trace: Any, selected: Any, step: Any) -> dict[str, Any] | None:
    """The ``tl-selected`` store of the event after (``step`` 1) or before (-1) the selected one on its track, in
    start order (Perfetto's ``.`` and ``,``); None at the track's end, without a valid selection or step."""
    from dashboard.details import EVENT_TABLES
    from profiler.db.sqlutil import quote

    if step not in (1, -1) or isinstance(step, bool) or not isinstance(selected, dict):
        return None
    table = selected.get("table")
    table = dbs.SLICE_TABLE if table == "Span" else table
    ident, track = as_int(selected.get("id")), as_int(selected.get(dbs.TRACK_ID))
    start = as_int(selected.get("start_ns"))
    if table not in EVENT_TABLES or ident is None or track is None or start is None:
        return None
    cmp, order = (">", "ASC") if step == 1 else ("<", "DESC")
    sql = (f"SELECT {quote('id')}, {quote('start_ts')}, {quote('end_ts')} FROM {quote(table)} "
           f"WHERE {quote(dbs.TRACK_ID)} = $track AND ({quote('start_ts')}, {quote('id')}) {cmp} ($start, $id) "
           f"ORDER BY {quote('start_ts')} {order}, {quote('id')} {order} LIMIT 1")
    try:
        rows = trace.sql_arrow(sql, params={"track": track, "start": start, "id": ident}).to_pylist()
    except TrnprofError:
        return None
    if not rows:
        return None
    return {"table": table, "id": rows[0]["id"], dbs.TRACK_ID: track, "start_ns": rows[0]["start_ts"],
            "end_ns": rows[0]["end_ts"]}


def nav_if_outside(target: dict[str, Any], state: Any) -> Any:
    """The ``tl-nav`` store that brings ``target`` into view when the view ``state`` shows does not hold it
    (``dash.no_update`` when it does: stepping along a row does not zoom)."""
    view = as_time_range(state.get("view")) if isinstance(state, dict) else None
    start, end = as_int(target.get("start_ns")), as_int(target.get("end_ns"))
    if start is None or end is None or (view is not None and view[0] <= start and end <= view[1]):
        return dash.no_update
    return {"start_ns": start, "end_ns": end, "seq": start % 2**31}


def marker_time(add: Any, view: Any) -> int | None:
    """The time (ns) of a marker the browser asks to add (``tl-marker-add``: ``{"x": axis seconds, "seq"}``, the
    time under the mouse snapped to an event edge by ``trnprof.js``), on the drawn view's axis; None when either
    store is malformed."""
    origin = as_int(view.get("origin")) if isinstance(view, dict) else None
    if not isinstance(add, dict) or origin is None:
        return None
    return _axis_ns(add.get("x"), origin)


#: Pixels of the window a click looks in (see :func:`event_at_click`).
PICK_WIDTH_PX = 4096


def pixel_event_window(t_ns: int, resolution_ns: int) -> tuple[int, int]:
    """The time range to look for the event under a click at ``t_ns`` (one pixel either side)."""
    res = max(int(resolution_ns), 1)
    return t_ns - res, t_ns + res + 1


def pick_event(window: Any, t_ns: int) -> dict[str, Any] | None:
    """The event a click at ``t_ns`` means, from a narrow window around it.

    Exact events win: the one containing ``t_ns`` (the shortest when several do, as the innermost span), else
    the nearest.  When the window has only buckets, the bucket's representative (longest) event.
    """
    events = window.events
    if events.num_rows:
        start = events.column("start_ts").to_numpy()
        end = events.column("end_ts").to_numpy()
        inside = np.flatnonzero((start <= t_ns) & (t_ns < np.maximum(end, start + 1)))
        if len(inside):
            i = int(inside[np.argmin(end[inside] - start[inside])])
        else:
            dist = np.minimum(np.abs(start - t_ns), np.abs(end - t_ns))
            i = int(np.argmin(dist))
        row = events.slice(i, 1).to_pylist()[0]
        return {"table": row[dbs.TABLE], "id": row["id"], dbs.TRACK_ID: row[dbs.TRACK_ID],
                "start_ns": row["start_ts"], "end_ns": row["end_ts"]}
    buckets = window.buckets
    if buckets.num_rows:
        b = buckets.to_pylist()
        covering = [r for r in b if r["start_ts"] <= t_ns < r["end_ts"] and r[dbs.LONGEST_ID] is not None]
        best = covering[0] if covering else next((r for r in b if r[dbs.LONGEST_ID] is not None), None)
        if best is not None:
            return {"table": None, "id": best[dbs.LONGEST_ID], dbs.TRACK_ID: best[dbs.TRACK_ID],
                    "start_ns": None, "end_ns": None}
    return None


def query_pick(trace: Any, query: QueryTracks, track_id: int, t_ns: int, res: int) -> dict[str, Any] | None:
    """What a click at ``t_ns`` on the query row ``track_id`` selects (see :func:`event_at_click`)."""
    index = query.pick(track_id, t_ns, res)
    if index is None:
        return None
    ref = query.event_ref(index)
    if ref is not None:
        try:
            fields = trace.event(*ref)
        except TrnprofError:  # a result row naming no event of the trace: the row itself
            ref = None
        else:
            return {"table": ref[0], "id": ref[1], dbs.TRACK_ID: fields.get(dbs.TRACK_ID),
                    "start_ns": fields.get(ts.START_TS), "end_ns": fields.get(ts.END_TS)}
    row = next(r for r in query.rows if r.track_id == track_id)
    at = int(np.flatnonzero(row.events.ids == index)[0])   # (the row's intervals are sorted by start, not id)
    return {"table": dbs.QUERY_TABLE, "id": index, dbs.TRACK_ID: track_id,
            "start_ns": int(row.events.start[at]), "end_ns": int(row.events.end[at])}


def event_at_click(trace: Any, click: Any, view: Any, state: Any,
                   query: QueryTracks | None = None) -> dict[str, Any] | None:
    """The event under a click on the strips: ``{"table", "id", "track_id", "start_ns", "end_ns"}`` or None.

    The click's row and time come from plotly's ``clickData``; the event is looked up in a ``Trace.window`` of the
    pixel either side of it, at one ns per pixel (up to :data:`PICK_WIDTH_PX`): exact events there (the one
    under the click), or, on a row drawn from buckets, the representative of the finer bucket holding the click.
    On a row of ``query`` (the timeline's query tracks) it is the interval under the click: the trace's event its
    result row names (``table_name``, ``id``) when it names one, else the result row itself (table ``query``, id:
    its row number).  None for a click on nothing, or for click or view data that is not what the page sends.
    """
    if not isinstance(click, dict) or not isinstance(view, dict):
        return None
    points = click.get("points")
    if not isinstance(points, list) or not points or not isinstance(points[0], dict) \
            or points[0].get("curveNumber", 0) != 0:
        return None
    rows = view_rows(view)
    origin = as_int(view.get("origin"))
    res = as_int(view.get("res") or 1, 1, TIME_LIMIT // 4)
    y = as_float(points[0].get("y"), -1, MAX_ROWS)
    if rows is None or origin is None or res is None or y is None:
        return None
    row = round(y)
    t_ns = _axis_ns(points[0].get("x"), origin)
    if t_ns is None or not 0 <= row < len(rows) or not rows[row]:
        return None
    if rows[row][0] < 0:
        return None if query is None else query_pick(trace, query, rows[row][0], t_ns, res)
    lo, hi = pixel_event_window(t_ns, res)
    lo, hi = max(lo, -TIME_LIMIT), min(hi, TIME_LIMIT)
    try:
        # one pixel per ns (up to PICK_WIDTH_PX): the events of a row drawn from events come back as events (at 2 px
        # three of them were buckets, and a bucket's representative need not be under the click); a row drawn from
        # buckets gives finer buckets, whose representative is the longest event starting near the click
        window = trace.window(lo, hi, max(2, min(hi - lo, PICK_WIDTH_PX)), tracks=rows[row])
        picked = pick_event(window, t_ns)
        if picked is None:
            return None
        if picked["table"] is None or picked["start_ns"] is None:
            tracks = trace.tracks().to_pylist()
            table = picked["table"] or next((t[dbs.TABLE] for t in tracks
                                             if t[dbs.TRACK_ID] == picked[dbs.TRACK_ID]), None)
            if table is None:
                return None
            fields = trace.event(table, int(picked["id"]))
            picked = {**picked, "table": table, "start_ns": fields.get("start_ts"), "end_ns": fields.get("end_ts")}
    except TrnprofError:  # a track or range the view names but the trace does not have
        return None
    return picked


def selection_range(selected: Any, state: Any) -> tuple[int, int] | None:
    """The time range to summarise: a box selection's x range, else the visible range (None without either, or
    when they are malformed); always ordered."""
    if not isinstance(state, dict):
        return None
    origin = as_int(state.get("origin", 0))
    if origin is None:
        return None
    if isinstance(selected, dict) and isinstance(selected.get("range"), dict):
        xr = selected["range"].get("x")
        if isinstance(xr, list) and len(xr) == 2:
            a, b = _axis_ns(xr[0], origin), _axis_ns(xr[1], origin)
            if a is None or b is None or a == b:
                return None
            return min(a, b), max(a, b)
    return as_time_range(state.get("view"))


def clip_range(rng: tuple[int, int], trace_range: tuple[int, int]) -> tuple[int, int] | None:
    """``rng`` within the trace's ``[start, end]``; None when they do not overlap."""
    lo, hi = max(rng[0], trace_range[0]), min(rng[1], trace_range[1])
    return (lo, hi) if lo < hi else None
