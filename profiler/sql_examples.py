"""Example queries over a trnprof database, shown by the dashboard's SQL page and usable from notebooks.

Each example uses only the Neuron Explorer table and column names (:mod:`tracer.schema`) and the database's own
tables (:mod:`profiler.db_schema`), so it runs on any ingested trace.
"""

from __future__ import annotations

from profiler import db_schema as dbs
from profiler.analyses.dma import MIN_SMALL_FRACTION, REGION_BUCKETS, SMALL_BYTES
from tracer import schema as ts

_I = ts.INSTRUCTION.name
_D = ts.DMA_PACKET.name
_F = ts.FLOW.name

#: ``(title, query)`` pairs, most useful first.
EXAMPLE_QUERIES: tuple[tuple[str, str], ...] = (
    ("Busy time per engine",
     f"SELECT {ts.ENGINE}, count(*) AS instructions, sum({ts.DURATION_NS}) AS busy_ns\n"
     f"FROM {_I}\nGROUP BY {ts.ENGINE}\nORDER BY busy_ns DESC"),
    ("Top opcodes by time",
     f"SELECT {ts.OPCODE}, {ts.ENGINE}, count(*) AS n, sum({ts.DURATION_NS}) AS total_ns,\n"
     f"       avg({ts.DURATION_NS}) AS mean_ns\nFROM {_I}\nGROUP BY ALL\nORDER BY total_ns DESC\nLIMIT 20"),
    ("Longest instructions",
     f"SELECT {ts.ID}, {ts.ENGINE}, {ts.OPCODE}, {ts.START_TS}, {ts.DURATION_NS}, {ts.NKI_SOURCE_LOCATION}\n"
     f"FROM {_I}\nORDER BY {ts.DURATION_NS} DESC\nLIMIT 20"),
    ("Time per source line",
     f"SELECT {ts.NKI_SOURCE_LOCATION}, count(*) AS n, sum({ts.DURATION_NS}) AS total_ns\n"
     f"FROM {_I}\nGROUP BY {ts.NKI_SOURCE_LOCATION}\nORDER BY total_ns DESC\nLIMIT 20"),
    ("DMA bytes per queue",
     f"SELECT {ts.QUEUE_NAME}, count(*) AS packets, sum({ts.TRANSFER_BYTES}) AS bytes,\n"
     f"       sum({ts.TRANSFER_BYTES}) / nullif(sum({ts.DURATION_NS}), 0) AS bytes_per_ns\n"
     f"FROM {_D}\nGROUP BY {ts.QUEUE_NAME}\nORDER BY bytes DESC"),
    ("Largest dependency gaps",
     f"SELECT {ts.OUT_TABLE}, {ts.OUT_ID}, {ts.IN_TABLE}, {ts.IN_ID}, {ts.DEPENDENCY_TYPE}, {ts.GAP_TIME}\n"
     f"FROM {_F}\nORDER BY {ts.GAP_TIME} DESC\nLIMIT 20"),
    ("Slices per thread and nesting level",
     f"SELECT k.{ts.NAME} AS row_name, s.{ts.DEPTH}, s.{ts.NAME}, count(*) AS n,\n"
     f"       sum(s.{dbs.DUR_NS})::BIGINT AS total_ns\n"
     f"FROM {dbs.SLICE_TABLE} s JOIN {dbs.TRACK_TABLE} k USING ({dbs.TRACK_ID})\nGROUP BY ALL\n"
     f"ORDER BY total_ns DESC\nLIMIT 20"),
    ("Timeline rows: instructions that waited over 1 µs, per engine",
     f"-- the result has start_ts: its status line links to the timeline, drawing one row per track\n"
     f"SELECT '{_I}' AS {dbs.TABLE}, {ts.ID}, {ts.START_TS}, {ts.END_TS}, {ts.OPCODE} AS {ts.NAME},\n"
     f"       {ts.ENGINE} AS {dbs.QUERY_TRACK}\nFROM {_I}\nWHERE {ts.EVT_WAIT_TIME_NS} > 1000"),
    ("Timeline rows: small DMA transfers (under 4 KiB)",
     f"SELECT '{_D}' AS {dbs.TABLE}, {ts.ID}, {ts.START_TS}, {ts.END_TS}, {ts.QUEUE_NAME} AS {ts.NAME},\n"
     f"       'DMA under 4 KiB' AS {dbs.QUERY_TRACK}\nFROM {_D}\nWHERE {ts.TRANSFER_BYTES} < 4096"),
    ("Timeline rows: where small DMA transfers take most of the DMA time",
     f"-- Neuron Explorer's \"small DMA transfers\" band: the 200ths of the kernel where packets under\n"
     f"-- {SMALL_BYTES:,} bytes take most of the DMA time (trnprof dma's small-transfer regions)\n"
     f"WITH bounds AS (\n"
     f"    SELECT min(s) AS t0, max(e) AS t1 FROM (\n"
     f"        SELECT {ts.START_TS} AS s, {ts.END_TS} AS e FROM {_I}\n"
     f"        UNION ALL SELECT {ts.START_TS}, {ts.END_TS} FROM {_D})),\n"
     f"buckets AS (\n"
     f"    SELECT ({ts.START_TS} - t0) // greatest(1, ceil((t1 - t0) / {REGION_BUCKETS}))::BIGINT AS k,\n"
     f"           min({ts.START_TS}) AS {ts.START_TS}, max({ts.END_TS}) AS {ts.END_TS},\n"
     f"           sum({ts.DURATION_NS}) AS busy,\n"
     f"           sum({ts.DURATION_NS}) FILTER (WHERE coalesce({ts.TRANSFER_BYTES}, 0) < {SMALL_BYTES}) AS small\n"
     f"    FROM {_D}, bounds GROUP BY k)\n"
     f"SELECT {ts.START_TS}, {ts.END_TS}, 'mostly small DMA' AS {ts.NAME}, 'small DMA transfers' AS "
     f"{dbs.QUERY_TRACK}\nFROM buckets WHERE small > {MIN_SMALL_FRACTION} * busy ORDER BY {ts.START_TS}"),
    ("Timeline rows: the longest 1% of slices, per category",
     f"-- spans of a recording, PyTorch/JAX operators and GPU kernels: the longest, one timeline row per category\n"
     f"SELECT '{dbs.SLICE_TABLE}' AS {dbs.TABLE}, {ts.ID}, {ts.START_TS}, {ts.END_TS}, {ts.NAME},\n"
     f"       coalesce({ts.CATEGORY}, 'span') AS {dbs.QUERY_TRACK}\nFROM {dbs.SLICE_TABLE}\n"
     f"WHERE {dbs.DUR_NS} >= (SELECT quantile_cont({dbs.DUR_NS}, 0.99) FROM {dbs.SLICE_TABLE})"),
    ("Tracks",
     f"SELECT * FROM {dbs.TRACK_TABLE}\nORDER BY {dbs.SORT_ORDER}"),
)

#: The example the timeline's "+ rows from a SQL query" opens the SQL page with (a query drawn as timeline rows).
TIMELINE_EXAMPLE = dict(EXAMPLE_QUERIES)["Timeline rows: instructions that waited over 1 µs, per engine"]
