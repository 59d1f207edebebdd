"""CSV export of a timeline view: ``/export.csv?trace=t0&table=Instruction&start=NS&end=NS``.

Neuron Explorer's "Export to CSV": every row of one event table (Instruction, DmaPacket, or the spans' ``slice``)
overlapping the view, in start order, all of its columns, at most :data:`MAX_EXPORT_ROWS` rows (the response then
says so in an ``X-Trnprof-Rows-Cut`` header and the file ends with the last row kept).  The rows stream from
:meth:`profiler.Trace.export_window` into a temporary file, so memory stays bounded whatever the view.

The trace comes from the server's registry by id and the table from a fixed list: no path or SQL travels from the
browser.  Bad values get HTTP 400 (or 404 for an unknown trace) with one line of text.
"""

from __future__ import annotations

import re
import tempfile
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa
import pyarrow.csv as pacsv
from flask import Flask, Response, request, send_file

from dashboard.app import query_values
from dashboard.errors import public_message
from dashboard.inputs import as_time_range
from dashboard.links import TRACE_PARAM
from dashboard.registry import TraceRegistry, UnknownTraceError
from profiler import db_schema as dbs
from tracer import schema as ts
from tracer.errors import TrnprofError

EXPORT_PATH = "/export.csv"
#: The tables a view exports, as the link names them -> their database table.
EXPORT_TABLES: dict[str, str] = {ts.INSTRUCTION.name: ts.INSTRUCTION.name, ts.DMA_PACKET.name: ts.DMA_PACKET.name,
                                 dbs.SLICE_TABLE: dbs.SLICE_TABLE}
#: Most rows one export writes (~100-200 MB of CSV).
MAX_EXPORT_ROWS = 1_000_000
CUT_HEADER = "X-Trnprof-Rows-Cut"
_TEXT = {"Content-Type": "text/plain; charset=utf-8"}


def export_href(trace_id: str, table: str, start_ns: int, end_ns: int) -> str:
    """The URL exporting ``table``'s rows overlapping ``[start_ns, end_ns)`` of ``trace_id``."""
    return EXPORT_PATH + "?" + urlencode({TRACE_PARAM: trace_id, "table": table, "start": start_ns, "end": end_ns})


def view_export_hrefs(search: str | None, state: Any) -> list[str | None]:
    """One export URL per table of :data:`EXPORT_TABLES` for the view the timeline's ``state`` shows (None each
    without a view)."""
    view = as_time_range((state or {}).get("view")) if isinstance(state, dict) else None
    trace_id = query_values(search).get(TRACE_PARAM) or (state or {}).get("trace")
    if view is None or not isinstance(trace_id, str):
        return [None] * len(EXPORT_TABLES)
    return [export_href(trace_id, table, view[0], view[1]) for table in EXPORT_TABLES]


def _file_name(label: str, table: str, start: int, end: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:80] or "trace"
    return f"{safe}-{table}-{start}-{end}.csv"


def export_response(registry: TraceRegistry, args: Any) -> Any:
    """The response to an export request with query values ``args`` (a mapping)."""
    try:  # which trace first: a request for one that is not served says so whatever else it asks
        entry = registry.entry(args.get(TRACE_PARAM))
    except UnknownTraceError as exc:
        return f"{exc}\n", 404, _TEXT
    table = EXPORT_TABLES.get(str(args.get("table", "")))
    if table is None:
        return f"table must be one of {', '.join(EXPORT_TABLES)}\n", 400, _TEXT
    try:
        start, end = int(args.get("start", "")), int(args.get("end", ""))
    except ValueError:
        return "start and end must be integer nanoseconds\n", 400, _TEXT
    if as_time_range([start, end]) is None or end <= start:
        return "start and end must be nanoseconds within +-2**62, start before end\n", 400, _TEXT
    try:
        trace = registry.open(entry.id)
    except UnknownTraceError as exc:
        return f"{exc}\n", 404, _TEXT
    except TrnprofError as exc:
        return f"{public_message(exc)}\n", 404, _TEXT
    out = tempfile.TemporaryFile()  # noqa: SIM115 - send_file reads it after we return, and closes it
    state: dict[str, Any] = {"writer": None, "rows": 0, "cut": False}

    def sink(batch: pa.RecordBatch) -> None:
        room = MAX_EXPORT_ROWS - state["rows"]
        if batch.num_rows > room:
            state["cut"] = True
            batch = batch.slice(0, room)
        if state["writer"] is None:
            state["writer"] = pacsv.CSVWriter(out, batch.schema)
        if batch.num_rows:
            state["writer"].write_batch(batch)
            state["rows"] += batch.num_rows

    try:
        columns = trace.export_window(table, start, end, sink, max_rows=MAX_EXPORT_ROWS + 1)
    except TrnprofError as exc:
        out.close()
        return f"{public_message(exc, trace, label=entry.label)}\n", 400, _TEXT
    if state["writer"] is None:  # no row: a header line still names the columns
        pacsv.write_csv(columns.empty_table(), out)
    else:
        state["writer"].close()
    out.seek(0)
    response: Response = send_file(out, mimetype="text/csv", as_attachment=True,
                                   download_name=_file_name(entry.label, table, start, end))
    response.headers["X-Trnprof-Rows"] = str(state["rows"])
    if state["cut"]:
        response.headers[CUT_HEADER] = f"first {MAX_EXPORT_ROWS:,} rows of more"
    return response


def install_export_route(server: Flask, registry: TraceRegistry) -> None:
    """Serve :data:`EXPORT_PATH` from ``registry``'s traces."""

    @server.route(EXPORT_PATH)
    def _export() -> Any:
        return export_response(registry, request.args)
