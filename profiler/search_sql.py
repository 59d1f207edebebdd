"""The SQL of the trace search (:meth:`profiler.Trace.search`, ``trnprof search``, the timeline's search box): which
fields of which tables it looks in, and how a text, a "whole field" or a /regular expression/ matches them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler import db_schema as dbs
from profiler.db.sqlutil import quote
from profiler.errors import QueryError
from tracer import schema as ts

#: Columns :meth:`Trace.search` looks in, per table.
SEARCH_FIELDS: dict[str, tuple[str, ...]] = {
    ts.INSTRUCTION.name: (ts.OPCODE, ts.HLO_NAME, ts.LAYER, ts.NKI_SOURCE_LOCATION),
    ts.DMA_PACKET.name: (ts.VARIABLE, ts.QUEUE_NAME),
    dbs.SLICE_TABLE: (ts.NAME,),
}
#: The SQL of an event's name, per table (what a match and a bucket's representative are called).
EVENT_NAME_SQL = {ts.INSTRUCTION.name: quote(ts.OPCODE),
                  ts.DMA_PACKET.name: f"coalesce({quote(ts.VARIABLE)}, {quote(ts.QUEUE_NAME)})",
                  dbs.SLICE_TABLE: quote(ts.NAME)}


def search_select(text: Any, check_regex: Callable[[str], None]) -> tuple[str, str]:
    """The UNION of the search's per-table queries -- each match once, with ``track_id``, ``table_name``, ``id``,
    ``start_ts``, ``end_ts``, ``name`` and the first field that matches (``matched_field``), the text as ``$q`` --
    and the text to bind to it (its quotes or slashes taken off).  ``check_regex`` raises QueryError for a
    regular expression DuckDB cannot compile."""
    if not isinstance(text, str) or not text:
        raise QueryError("search text must be a non-empty string")
    exact = len(text) > 2 and text[0] == text[-1] == '"'
    regex = len(text) > 2 and text[0] == text[-1] == "/"
    if exact or regex:
        text = text[1:-1]
    if regex:
        check_regex(text)

    def hit(field: str) -> str:
        if exact:
            return f"lower({quote(field)}) = lower($q)"
        if regex:
            return f"regexp_matches({quote(field)}, $q, 'i')"
        return f"contains(lower({quote(field)}), lower($q))"

    parts = []
    for table, fields in SEARCH_FIELDS.items():  # one row per event: the first of its fields that matches
        hits = [hit(field) for field in fields]
        which = "CASE " + " ".join(f"WHEN {hit} THEN '{field}'" for hit, field in zip(hits, fields, strict=True)) \
            + " END"
        parts.append(
            f"SELECT {quote(dbs.TRACK_ID)}, '{table}' AS {quote(dbs.TABLE)}, {quote(ts.ID)}, "
            f"{quote(ts.START_TS)}, {quote(ts.END_TS)}, {EVENT_NAME_SQL[table]} AS {quote(ts.NAME)}, "
            f"{which} AS {quote(dbs.MATCHED_FIELD)} FROM {quote(table)} WHERE {' OR '.join(hits)}")
    return " UNION ALL ".join(parts), text


__all__ = ["EVENT_NAME_SQL", "SEARCH_FIELDS", "search_select"]
