"""What the timeline page's browser state and options are: the options chosen above the graph, the graph width a
client may claim, the ``tl-state`` store reduced to well-formed values, and the link to the view a state shows.

:mod:`dashboard.timeline_logic` (the level-of-detail loop) reads everything the browser sends through here, so a
malformed or hostile value is dropped in one place before any query is planned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dashboard.inputs import as_float, as_int, as_time_range
from dashboard.links import VIEW_OPTION_PARAMS, view_option_values
from profiler.figures import palette as pal
from profiler.figures.row_filter import MAX_FILTER_CHARS
from profiler.query_track import MAX_QUERY_CHARS

#: Graph width assumed until the browser reports its own.
DEFAULT_WIDTH_PX = 1200
#: Widest graph served (a bound on the payload whatever a client claims).
MAX_WIDTH_PX = 4096
MIN_WIDTH_PX = 100

#: The span-level limits offered above the graph (besides "all"): a deep stack's levels can run to hundreds of rows.
SPAN_LEVEL_CHOICES: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True)
class TimelineOptions:
    """What the user chose above the graph."""

    colour_by: str = "opcode"
    expand_dma: bool = False
    #: Highlight the critical path (:mod:`profiler.analyses.critical_path`) over the strips.
    critical_path: bool = False
    #: Levels shown of each span row (a thread's nested slices): one of :data:`SPAN_LEVEL_CHOICES`, None for all.
    span_levels: int | None = None
    #: The row filter's text (:mod:`profiler.figures.row_filter`; "" draws every row).
    row_filter: str = ""
    #: SQL whose result is drawn as rows above the trace's (:mod:`profiler.query_track`; "" for none).
    query: str = ""
    #: ``Table:id`` of the event whose dependency chain is drawn over the strips instead of the critical path
    #: (:func:`profiler.analyses.critical_path.chain_to`; "" for none).
    chain: str = ""

    @classmethod
    def parse(cls, colour_by: Any, expand: Any, critical_path: Any = False,
              span_levels: Any = None, *, row_filter: Any = None, query: Any = None,
              chain: Any = None) -> TimelineOptions:
        """Options from the raw component values (anything unexpected falls back to the default; a row filter
        and a query are kept as typed, up to :data:`~profiler.figures.row_filter.MAX_FILTER_CHARS` and
        :data:`~profiler.query_track.MAX_QUERY_CHARS`, and checked when the rows are drawn)."""
        colour = colour_by if colour_by in pal.COLOUR_MODES else "opcode"
        levels = span_levels if span_levels in SPAN_LEVEL_CHOICES and not isinstance(span_levels, bool) else None
        rows = row_filter.strip() if isinstance(row_filter, str) and len(row_filter) <= MAX_FILTER_CHARS else ""
        sql = query.strip() if isinstance(query, str) and len(query) <= MAX_QUERY_CHARS else ""
        ref = chain if isinstance(chain, str) and CHAIN_REF.fullmatch(chain) else ""
        return cls(colour, bool(expand) and expand not in ("false", "0"), critical_path is True, levels, rows, sql,
                   ref)

    @property
    def chain_event(self) -> tuple[str, int] | None:
        """``(table, id)`` of :attr:`chain`, or None."""
        if not self.chain:
            return None
        table, ident = self.chain.split(":")
        return table, int(ident)

    @property
    def overlay(self) -> bool:
        """Whether a path is drawn over the strips (the critical path, or a chain)."""
        return self.critical_path or bool(self.chain)

    @property
    def rows_key(self) -> tuple[bool, int | None, str, str]:
        """What the rows depend on."""
        return self.expand_dma, self.span_levels, self.row_filter, self.query



def clamp_width(width: Any) -> int:
    """The graph width a client reported, as a bounded int (the default for anything but a finite number)."""
    w = as_float(width)
    if w is None:
        return DEFAULT_WIDTH_PX
    return int(min(max(w, MIN_WIDTH_PX), MAX_WIDTH_PX))


#: Longest list of lane names a state may carry.
MAX_LANES = 1000


#: The longest status detail a browser's state may carry back (the server writes ~80 characters, up to ~700 with
#: the row filter's note).
MAX_STATUS_CHARS = 1000


def view_link(search: str | None, state: dict[str, Any] | None) -> str | None:
    """The URL query of a link to the view ``state`` shows: ``search``'s values with ``start`` and ``end`` (ns) set
    to the view, and the view's options and selected event where they are not the defaults
    (:func:`dashboard.links.view_option_values`; None without a view)."""
    from urllib.parse import urlencode

    from dashboard.app import query_values  # (the app imports the pages, which import this module)

    view = as_time_range((state or {}).get("view"))
    if view is None:
        return None
    kept = {k: v for k, v in query_values(search).items() if k not in VIEW_OPTION_PARAMS}
    return "?" + urlencode({**kept, "start": str(view[0]), "end": str(view[1]), **view_option_values(state or {})})


def clean_state(state: Any, trace_id: str) -> dict[str, Any] | None:
    """The browser's ``tl-state`` reduced to well-formed values: None when it is another trace's or not one the
    server wrote (no list of lane names); a malformed view, width or sequence number is dropped (the view then
    restarts at the whole trace, a missing width rebuilds the figure)."""
    if not isinstance(state, dict) or state.get("trace") != trace_id:
        return None
    lanes = state.get("lanes")
    if not isinstance(lanes, list) or len(lanes) > MAX_LANES or not all(isinstance(n, str) for n in lanes):
        return None
    clean: dict[str, Any] = {
        "trace": trace_id,
        "colour_by": state.get("colour_by") if isinstance(state.get("colour_by"), str) else None,
        "expand_dma": state.get("expand_dma") is True,
        "critical_path": state.get("critical_path") is True,
        "span_levels": state.get("span_levels") if state.get("span_levels") in SPAN_LEVEL_CHOICES else None,
        "row_filter": TimelineOptions.parse(None, False, row_filter=state.get("row_filter")).row_filter,
        "query": TimelineOptions.parse(None, False, query=state.get("query")).query,
        "chain": TimelineOptions.parse(None, False, chain=state.get("chain")).chain,
        "width": as_int(state.get("width"), MIN_WIDTH_PX, MAX_WIDTH_PX),
        "buffer": state.get("buffer"),   # vp.Buffer.from_dict checks it
        "seq": as_int(state.get("seq"), 0, 2**53) or 0,
        "few_events": state.get("few_events") is True,
        "whole": state.get("whole") is True,
        "end": as_int(state.get("end"), -(2**62), 2**62),
        "lanes": lanes,
    }
    view = as_time_range(state.get("view"))
    if view is not None:
        clean["view"] = list(view)
    if as_int(state.get("legend_key"), 0, 2**32) is not None:
        clean["legend_key"] = state["legend_key"]
    overlay_traces = as_int(state.get("overlay_traces"), 0, 2)   # the critical path's traces the figure has
    if overlay_traces is not None:
        clean["overlay_traces"] = overlay_traces
    detail = state.get("status_detail")
    if isinstance(detail, str) and len(detail) <= MAX_STATUS_CHARS:
        clean["status_detail"] = detail
    return clean


def nav_range(nav: Any) -> tuple[int, int] | None:
    """The ``(start_ns, end_ns)`` a ``tl-nav`` store asks to focus on; None when it is malformed."""
    if not isinstance(nav, dict):
        return None
    return as_time_range([nav.get("start_ns"), nav.get("end_ns")])



#: What a chain's event looks like in options, states and links: ``Instruction:42``, ``DmaPacket:7``.
CHAIN_REF = re.compile(r"(Instruction|DmaPacket):[0-9]{1,18}")
