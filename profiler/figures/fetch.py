"""The window a timeline drawing asks ``Trace.window`` for, without reading strings it will not show.

A drawing coloured by opcode or engine needs only the events' names; the ``layer``/``operator``/``source``
attributes cost about as much again to read when a window holds tens of thousands of raw events.  They matter for
colour-by-layer and for the hover text of exactly drawn events, which lists each event's source line — and events
are listed for hover only when few are in view (:data:`profiler.figures.raster.HOVER_EVENT_LIMIT`).  So
:func:`drawing_window` reads the window without attributes and, when it turns out to hold that few events, reads
the attributes of just those events' tracks again (a second query: few events, but a query's fixed cost, about as
much as the first at 10^7-10^8 events).  A caller that expects a hover-sized window (the dashboard, when the previous
view at this resolution or a coarser one was) passes ``expect_few`` and gets both in one query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from profiler import db_schema as dbs
from profiler.figures.raster import HOVER_EVENT_LIMIT

if TYPE_CHECKING:
    from profiler.query_track import QueryTracks


def drawing_window(trace: Any, start_ns: int, end_ns: int, width_px: int, tracks: Sequence[int], *,
                   colour_by: str, expect_few: bool = False, query: QueryTracks | None = None) -> Any:
    """``trace.window(start_ns, end_ns, width_px, tracks)`` with the attributes the drawing shows.

    Args:
        expect_few: the caller expects a hover-sized window (e.g. the previous view, at this resolution or a coarser
            one, was): read the attributes in the one query instead of a second one.  The result is the same
            either way; a wrong guess only costs reading strings of events that are not listed.
        query: query tracks (:mod:`profiler.query_track`) whose rows ``tracks`` may name (negative ids): their
            events and buckets are merged in on the window's grid.

    Returns:
        The ``Window``; its events carry ``layer``/``operator``/``source`` when coloured by layer or when few
        enough for hover, null attributes otherwise (or, with ``expect_few``, whenever read).
    """
    if query is not None:
        own = [t for t in tracks if t >= 0]
        if not own:
            return query.empty_window(start_ns, end_ns, width_px)
        return query.merged(drawing_window(trace, start_ns, end_ns, width_px, own, colour_by=colour_by,
                                           expect_few=expect_few))
    if colour_by == "layer" or expect_few:
        return trace.window(start_ns, end_ns, width_px, tracks=list(tracks), attributes=True)
    window = trace.window(start_ns, end_ns, width_px, tracks=list(tracks), attributes=False)
    if not 0 < window.events.num_rows <= HOVER_EVENT_LIMIT:
        return window
    shown = sorted(set(window.events.column(dbs.TRACK_ID).to_pylist()))
    detailed = trace.window(start_ns, end_ns, width_px, tracks=shown, attributes=True)
    return dataclasses.replace(window, events=detailed.events)
