"""The details panel: every field of the selected event, its dependencies (each a link that jumps to it) and its
source location; and the encoding of those jump links.

A jump link is a button whose id carries where to go — ``{"type": "tl-jump", "index": "Table:id:start:end:track"}``
— so one pattern-matching callback serves flow links and search results alike, and the server needs no memory
of what it rendered.
"""

from __future__ import annotations

import json
from typing import Any

import dash
import pyarrow as pa
from dash import dcc, html

from dashboard.errors import public_message
from dashboard.inputs import as_int
from dashboard.links import source_href
from profiler import db_schema as dbs
from profiler.analyses.source_lines import split_location
from profiler.db.track_info import INTERVAL_TABLES
from profiler.figures.selected_event import PRED_COLOUR, SUCC_COLOUR
from profiler.figures.timefmt import format_duration, format_time
from tracer import schema as ts

JUMP_TYPE = "tl-jump"
#: The tables whose rows the details panel shows: the timeline's interval events (each has an ``id``), and ``Span``,
#: the trace format's name of ``slice``.
EVENT_TABLES = (*sorted(INTERVAL_TABLES), ts.SPAN.name)
#: The tables whose events the panel offers the dependency chain of ("What led here?").
CHAIN_TABLES = (ts.INSTRUCTION.name, ts.DMA_PACKET.name)
#: The table a row of the timeline's query tracks is selected as (its id: the result's row number).
QUERY_TABLE = dbs.QUERY_TABLE
#: Dependencies listed per direction before "and N more".
MAX_FLOWS_SHOWN = 50
_TIME_FIELDS = {ts.START_TS, ts.END_TS, ts.TIMESTAMP}
_DURATION_FIELDS = {ts.DURATION_NS, ts.EVT_WAIT_TIME_NS, ts.GAP_TIME, "dur_ns"}


def jump_index(table: str, event_id: int, start_ns: int | None, end_ns: int | None, track_id: int | None) -> str:
    """The ``index`` of a jump link's id."""
    def s(v: Any) -> str:
        return "" if v is None else str(int(v))

    return f"{table}:{s(event_id)}:{s(start_ns)}:{s(end_ns)}:{s(track_id)}"


def parse_jump_index(index: Any) -> dict[str, Any] | None:
    """Inverse of :func:`jump_index`; None for anything malformed (ids come back from the browser)."""
    if not isinstance(index, str) or len(index) > 200:
        return None
    parts = index.split(":")
    if len(parts) != 5 or not parts[0]:
        return None
    try:
        nums = [int(p) if p else None for p in parts[1:]]
    except ValueError:
        return None
    if nums[0] is None or any(n is not None and as_int(n) is None for n in nums):
        return None
    return {"table": parts[0], "id": nums[0], "start_ns": nums[1], "end_ns": nums[2], dbs.TRACK_ID: nums[3]}


def jump_link(label: str, table: str, event_id: int, start_ns: int | None, end_ns: int | None, *,
              track_id: int | None, title: str = "") -> html.Button:
    """A button that selects the event and zooms the timeline to it."""
    return html.Button(label, id={"type": JUMP_TYPE, "index": jump_index(table, event_id, start_ns, end_ns, track_id)},
                       className="link-button", title=title or "jump to it", n_clicks=0)


def _fmt_value(key: str, value: Any, origin_ns: int) -> str:
    if value is None:
        return "–"
    if key in _TIME_FIELDS and isinstance(value, int):
        return f"{value:,} ns ({format_time(value, origin_ns)})"
    if key in _DURATION_FIELDS and isinstance(value, int | float):
        return f"{value:,} ns ({format_duration(value)})"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(value)[:500]
    return str(value)[:500]


def _flow_list(title: str, flows: pa.Table | None, colour: str) -> html.Div:
    key = html.Span(" ━▶", style={"color": colour}, title="its arrows on the timeline (solid: read after "
                    "write, dashed: write after read, dotted: write after write)")
    if flows is None or flows.num_rows == 0:
        return html.Div([html.H4(title), html.Div("none", className="muted")], className="flow-list")
    items = []
    for row in flows.slice(0, MAX_FLOWS_SHOWN).to_pylist():
        gap = row.get(ts.GAP_TIME)
        label = f"{row.get(ts.NAME) or '?'} · {row[dbs.TABLE]} {row[ts.ID]}"
        extra = f" ({row.get(ts.DEPENDENCY_TYPE) or 'flow'}" + (f", gap {format_duration(gap)})" if gap is not None
                                                                   else ")")
        items.append(html.Li([jump_link(label, row[dbs.TABLE], row[ts.ID], row.get(ts.START_TS),
                                        row.get(ts.END_TS), track_id=row.get(dbs.TRACK_ID)), html.Span(extra)]))
    more = flows.num_rows - MAX_FLOWS_SHOWN
    if more > 0:
        items.append(html.Li(f"… and {more:,} more", className="muted"))
    return html.Div([html.H4([f"{title} ({flows.num_rows:,})", key]), html.Ul(items)], className="flow-list")


#: Enclosing slices listed above a slice's details, innermost last (a deeper stack shows its innermost ones).
MAX_ANCESTORS = 64


def slice_ancestors(trace: Any, event_id: int) -> list[dict[str, Any]]:
    """The slices enclosing slice ``event_id``, outermost first, at most :data:`MAX_ANCESTORS` of them
    (``Trace.enclosing_slices``)."""
    return trace.enclosing_slices(int(event_id), limit=MAX_ANCESTORS)


def _ancestors_line(ancestors: list[dict[str, Any]]) -> html.Div | None:
    """"Inside: step › forward › linear", each a jump link (None without enclosing slices)."""
    if not ancestors:
        return None
    parts: list[Any] = ["Inside: "]
    for i, a in enumerate(ancestors):
        if i:
            parts.append(" › ")
        parts.append(jump_link(str(a.get(ts.NAME) or "?"), dbs.SLICE_TABLE, a[ts.ID], a.get(ts.START_TS),
                               a.get(ts.END_TS), track_id=a.get(dbs.TRACK_ID), title="the enclosing slice"))
    return html.Div(parts, className="details-source", id="details-ancestors")


def event_json(fields: dict[str, Any], table: str, preds: pa.Table | None, succs: pa.Table | None) -> str:
    """The event, what it waited for and what waited on it as JSON (Neuron Explorer's "Copy as JSON"): every field
    as stored, and each dependency's table, id, name, times, type and gap."""
    return json.dumps({"table": table, "fields": fields,
                       "waited_for": preds.to_pylist() if preds is not None else None,
                       "waited_on_it": succs.to_pylist() if succs is not None else None},
                      default=str, indent=1)


def details_panel(fields: dict[str, Any], table: str, preds: pa.Table | None, succs: pa.Table | None,
                  origin_ns: int, *, ancestors: list[dict[str, Any]] | None = None,
                  trace_id: str | None = None) -> html.Div:
    """The panel for one event: header, the slices it lies in, source location, dependencies, then every field.

    Args:
        fields: ``Trace.event(table, id)``.
        table: the table the event lives in.
        preds: what it waited for (``Trace.flows`` predecessors, :data:`profiler.db_schema.FLOW_ENDS`).
        succs: what waited for it.
        origin_ns: the trace start (times are also shown relative to it).
        ancestors: for a slice, the slices enclosing it, outermost first (:func:`slice_ancestors`).
        trace_id: the served trace: its source location (``file.py:LINE``) links to the source page at that line.
    """
    name = fields.get(ts.OPCODE) or fields.get(ts.NAME) or fields.get(ts.VARIABLE) or fields.get(ts.QUEUE_NAME) or ""
    dur = fields.get(ts.DURATION_NS)
    if dur is None and fields.get(ts.START_TS) is not None and fields.get(ts.END_TS) is not None:
        dur = fields[ts.END_TS] - fields[ts.START_TS]
    header = html.Div([
        html.Span(f"{table} {fields.get(ts.ID, '')}", className="badge"),
        html.Strong(f" {name} "),
        html.Span(format_duration(dur) if dur is not None else "", className="muted"),
        dcc.Clipboard(content=event_json(fields, table, preds, succs), id="details-copy", className="copy-json",
                      title="copy the event, what it waited for and what waited on it as JSON"),
    ], className="details-header", id="details-title")
    source = fields.get(ts.NKI_SOURCE_LOCATION)
    where = split_location(str(source)) if source else None
    if where is not None and where[1] is not None and trace_id is not None:
        code: Any = dcc.Link(html.Code(str(source)), href=source_href(trace_id, where[0], where[1]),
                             title="show the line in its source file, with every line's instructions",
                             id="details-source-link")
    else:
        code = html.Code(str(source))
    source_div = html.Div(["Source: ", code] if source else "Source: not recorded",
                          className="details-source", id="details-source")
    rows = [html.Tr([html.Th(k), html.Td(_fmt_value(k, v, origin_ns))]) for k, v in fields.items()]
    return html.Div([
        header,
        *([line] if (line := _ancestors_line(ancestors or [])) is not None else []),
        source_div,
        html.Div([_flow_list("Waited for", preds, PRED_COLOUR), _flow_list("Waited on it", succs, SUCC_COLOUR)],
                 className="flows"),
        *([html.Div([
            html.Button("What led here?", id="details-chain-go", n_clicks=0, className="btn btn-small",
                        title="the chain of dependent work that ended with this event: why it started when it did "
                              "(trnprof critical-path --to)"),
            html.Div(id="details-chain")])] if table in CHAIN_TABLES else []),
        html.Table(html.Tbody(rows), className="fields", id="details-fields"),
    ], className="details")


def query_row_details(tracks: Any, index: int, origin_ns: int) -> html.Div:
    """The panel for a row of the timeline's query tracks (:class:`profiler.query_track.QueryTracks`): its
    interval and every column of the result row (an error line when the query or the row is gone)."""
    from tracer.errors import TrnprofError

    if tracks is None:
        return html.Div("The query drawing this row is no longer on the timeline.", className="error")
    try:
        fields = tracks.row_fields(int(index))
    except TrnprofError as exc:
        return html.Div(str(exc), className="error")
    name = next((fields[c] for c in fields if c.lower() in (ts.NAME, ts.OPCODE) and fields[c] is not None), "")
    rows = [html.Tr([html.Th(k), html.Td(_fmt_value(k, v, origin_ns))]) for k, v in fields.items()]
    return html.Div([
        html.Div([html.Span(f"query row {index}", className="badge"), html.Strong(f" {name} ")],
                 className="details-header", id="details-title"),
        html.Div("A row of the query drawn on the timeline; a table_name and id column would link it to its event.",
                 className="muted"),
        html.Table(html.Tbody(rows), className="fields", id="details-fields"),
    ], className="details")


def jump_target(index: Any, clicks: Any) -> tuple[dict[str, Any], Any] | None:
    """What a click on the jump link ``index`` selects and where the timeline goes (``tl-nav``, or no_update when
    the link has no times); None when no link was clicked or the index is malformed."""
    counts = [c for c in clicks if isinstance(c, int) and not isinstance(c, bool)] if isinstance(clicks, list) else []
    if not any(counts):
        return None
    target = parse_jump_index(index)
    if target is None:
        return None
    nav: Any = dash.no_update
    if target["start_ns"] is not None and target["end_ns"] is not None:
        nav = {"start_ns": target["start_ns"], "end_ns": target["end_ns"], "seq": sum(counts) % 2**31}
    return target, nav


def selected_event(selected: Any) -> tuple[str, int] | str | None:
    """``(table, id)`` of a ``tl-selected`` store (``("query", row number)`` for a row of the timeline's query
    tracks); a message when it names no event the panel can show; None when nothing is selected."""
    if not isinstance(selected, dict) or not selected.get("table"):
        return None
    table, ident = selected.get("table"), as_int(selected.get("id"), -(2**63), 2**63 - 1)
    if table == QUERY_TABLE:
        return (table, ident) if ident is not None else "No query row: the selection names none."
    if not isinstance(table, str) or table not in EVENT_TABLES:
        return (f"Details are shown for timeline events ({', '.join(sorted(INTERVAL_TABLES))}), not for "
                f"{str(table)[:40]!r}.")
    if ident is None:
        return f"No event: the selection names no {table} id."
    return table, ident


def event_details(trace: Any, table: str, event_id: int, label: str | None = None, *,
                  trace_id: str | None = None) -> html.Div:
    """Fetch the event and its flows from ``trace`` and render :func:`details_panel` (an error line otherwise;
    ``label``: the trace's name in messages, instead of its files; ``trace_id``: the served trace, whose source
    page its source location links to)."""
    from tracer.errors import TrnprofError

    try:
        fields = trace.event(table, int(event_id))
    except (TrnprofError, KeyError, ValueError, TypeError) as exc:
        return html.Div(public_message(exc, trace, label=label) if str(exc) else "no such event", className="error")
    try:
        preds, succs = trace.flows(table, int(event_id))
    except (TrnprofError, KeyError, ValueError) as exc:
        preds = succs = None
        fields = {**fields, "flows": f"unavailable: {public_message(exc, trace, label=label)}"}
    ancestors = None
    if table in (dbs.SLICE_TABLE, ts.SPAN.name) and fields.get(ts.PARENT_ID) is not None:
        try:
            ancestors = slice_ancestors(trace, int(event_id))
        except TrnprofError as exc:
            fields = {**fields, "enclosing slices": f"unavailable: {public_message(exc, trace, label=label)}"}
    return details_panel(fields, table, preds, succs, int(trace.time_range[0]), ancestors=ancestors,
                         trace_id=trace_id)
