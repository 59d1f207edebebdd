"""The selected event on a timeline figure: its outline and its dependency arrows (what it waited for and what
waited on it) drawn as curves between the events' rows, as Perfetto draws a selected slice's flows.  The dashboard
and notebooks (``Trace.timeline(select=...)``) draw the same shapes.

Neuron Explorer's Perfetto export draws every dependency (``--show-perfetto-flows``) and is off by default because
the result is "visually overwhelming"; here only the selected event's edges are drawn, from ``Trace.flows`` (the
same rows the dashboard's details panel lists).  Plain functions producing plotly layout shapes, so they are tested
without a browser.

An arrow runs from the end of the event waited for to the start of the event that waited, as a cubic curve that
leaves and arrives horizontally (between events on the same row it arcs above the row), with a head of fixed size
in pixels at the waiting event, pointing right.  Predecessors are drawn in one colour, successors in another; the
dependency type sets the dash: read-after-write (``flow``) solid, write-after-read (``anti``) dashed,
write-after-write (``output``) dotted.  Events whose track is not drawn (a hidden row) or without times get no arrow.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.figures.timefmt import ns_to_axis
from tracer import schema as ts

#: Arrows drawn per direction at most (the details panel lists the rest).
MAX_ARROWS = 64
#: Colours of the arrows into the selected event (what it waited for) and out of it (what waited on it).
PRED_COLOUR = "#D55E00"
SUCC_COLOUR = "#0072B2"
#: Line dash per dependency type (``Flow.dependency_type``); anything else is drawn solid.
DASH = {"flow": "solid", "anti": "dash", "output": "dot"}
#: How far above its row an arrow between two events of the same row arcs (in rows).
SAME_ROW_ARC = 0.42
#: The arrow head: a triangle pointing right, in pixels from its tip (mirrored for an arrow pointing left).
HEAD_PX = (9, 4)


def event_outline(rows_track_ids: list[list[int]], selected: dict[str, Any], origin_ns: int) -> list[dict[str, Any]]:
    """A black rectangle around the ``selected`` event (``{"track_id", "start_ns", "end_ns"}``) on its row (none
    when no row draws its track or it has no times)."""
    row = _row_of(rows_track_ids, selected.get(dbs.TRACK_ID))
    s, e = selected.get("start_ns"), selected.get("end_ns")
    if row is None or not isinstance(s, int) or not isinstance(e, int):
        return []
    return [{"type": "rect", "xref": "x", "yref": "y", "x0": ns_to_axis(s, origin_ns),
             "x1": ns_to_axis(max(e, s + 1), origin_ns), "y0": row - 0.5, "y1": row + 0.5,
             "line": {"color": "#000", "width": 2}, "fillcolor": "rgba(0,0,0,0)", "name": "selected"}]


def selected_event_shapes(rows_track_ids: list[list[int]], selected: dict[str, Any],
                          flows: tuple[pa.Table | None, pa.Table | None], origin_ns: int) -> list[dict[str, Any]]:
    """The outline of the ``selected`` event, then its dependency arrows (:func:`flow_arrow_shapes`)."""
    return [*event_outline(rows_track_ids, selected, origin_ns),
            *flow_arrow_shapes(rows_track_ids, selected, flows, origin_ns)]


def _row_of(rows_track_ids: list[list[int]], track_id: Any) -> int | None:
    """The timeline row drawing ``track_id`` (None when no row does)."""
    if track_id is None:
        return None
    return next((i for i, ids in enumerate(rows_track_ids) if track_id in ids), None)


def arrow_shapes(tail: tuple[float, float], tip: tuple[float, float], *, colour: str, dash: str, name: str,
                 bend: float = 0.0) -> list[dict[str, Any]]:
    """A curve from ``tail`` to ``tip`` (each ``(axis seconds, row index)``) and its head at ``tip``.

    The curve leaves the tail and reaches the tip horizontally, its control points at least ``bend`` (axis
    seconds) to the right of the tail and left of the tip, so an arrow between events that touch (no gap) is an S
    between their rows rather than a vertical line along their edges.
    """
    (x0, y0), (x1, y1) = tail, tip
    reach = max(abs(x1 - x0) / 2, bend)
    if y0 == y1:
        yc = y0 - SAME_ROW_ARC  # the row axis is reversed: a smaller value is higher up
        path = f"M {x0!r},{y0!r} C {x0 + reach!r},{yc!r} {x1 - reach!r},{yc!r} {x1!r},{y1!r}"
    else:
        path = f"M {x0!r},{y0!r} C {x0 + reach!r},{y0!r} {x1 - reach!r},{y1!r} {x1!r},{y1!r}"
    length, half = HEAD_PX
    back = -length  # the curve always arrives from the left
    curve = {"type": "path", "xref": "x", "yref": "y", "path": path, "layer": "above", "name": name,
             "line": {"color": colour, "width": 1.5, "dash": dash}}
    head = {"type": "path", "xref": "x", "yref": "y", "xsizemode": "pixel", "ysizemode": "pixel",
            "xanchor": x1, "yanchor": y1, "path": f"M 0,0 L {back},{half} L {back},{-half} Z", "layer": "above",
            "name": name, "fillcolor": colour, "line": {"color": colour, "width": 1}}
    return [curve, head]


def flow_arrow_shapes(rows_track_ids: list[list[int]], selected: dict[str, Any],
                      flows: tuple[pa.Table | None, pa.Table | None], origin_ns: int, *,
                      limit: int = MAX_ARROWS) -> list[dict[str, Any]]:
    """Layout shapes for the arrows into and out of the ``selected`` event (``{"track_id", "start_ns", "end_ns",
    ...}`` as the timeline stores it), given its ``Trace.flows`` (predecessors, successors; rows of
    :data:`profiler.db_schema.FLOW_ENDS`, either None when unknown).

    Arrows into it run from each predecessor's end to its start; arrows out of it from its end to each successor's
    start.  At most ``limit`` per direction, in the order ``Trace.flows`` gives them.  Each curve reaches out
    horizontally at least half the shorter event's duration (:func:`arrow_shapes`): visible wherever the two
    events are, at a zoom that shows them.
    """
    row = _row_of(rows_track_ids, selected.get(dbs.TRACK_ID))
    start, end = selected.get("start_ns"), selected.get("end_ns")
    if row is None or not isinstance(start, int) or not isinstance(end, int):
        return []
    shapes: list[dict[str, Any]] = []
    for edges, into in ((flows[0], True), (flows[1], False)):
        if edges is None or not edges.num_rows:
            continue
        for other in edges.slice(0, limit).to_pylist():
            other_row = _row_of(rows_track_ids, other.get(dbs.TRACK_ID))
            o_start, o_end = other.get(ts.START_TS), other.get(ts.END_TS)
            if other_row is None or o_start is None or o_end is None:
                continue
            dash = DASH.get(str(other.get(ts.DEPENDENCY_TYPE) or "flow"), "solid")
            bend = min(end - start, o_end - o_start) / 2e9
            if into:
                shapes += arrow_shapes((ns_to_axis(o_end, origin_ns), other_row), (ns_to_axis(start, origin_ns), row),
                                       colour=PRED_COLOUR, dash=dash, name="waited for", bend=bend)
            else:
                shapes += arrow_shapes((ns_to_axis(end, origin_ns), row), (ns_to_axis(o_start, origin_ns), other_row),
                                       colour=SUCC_COLOUR, dash=dash, name="waited on it", bend=bend)
    return shapes
