"""Tables and columns the profiler adds on top of the trace format: the database's own tables and the shapes
of what the query API returns.

:mod:`tracer.schema` owns the trace tables (``Instruction``, ``DmaPacket``, ...), which the database keeps under
the same names with the same columns plus ``track_id``.  This module owns everything else the profiler names:
the ``track`` and ``slice`` tables, and the Arrow schemas of :class:`profiler.window.Window` results.  No other
module invents a column name.
"""

from __future__ import annotations

import pyarrow as pa

from tracer import schema as ts

#: Version of the trnprof DuckDB layout, MAJOR.MINOR, stored in the database's ``trnprof_info`` table.
DB_FORMAT_VERSION = "1.0"

TRACK_ID = "track_id"
TABLE = "table_name"
DUR_NS = "dur_ns"
BUSY_NS = "busy_ns"
COUNT = "count"
LONGEST_ID = "longest_id"
TOP_NAME = "top_name"
BUSY_FRACTION = "busy_fraction"

#: Track kinds (``track.kind``).
TRACK_KINDS: tuple[str, ...] = ("engine", "dma_queue", "span", "counter", "thread")

#: ``track``: one row per timeline row.
TRACK = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field("core", pa.int64()),            # pcore_idx, or null for host tracks
    pa.field("kind", pa.string(), nullable=False),
    pa.field(ts.NAME, pa.string(), nullable=False),   # e.g. Tensor, qSyncIO0, operator, thread 1234
    pa.field("group_name", pa.string()),     # e.g. NeuronCore 0, or a process
    pa.field("sort_order", pa.int64(), nullable=False),
    pa.field(TABLE, pa.string(), nullable=False),  # table of its rows: Instruction, DmaPacket, slice, Counter
])

#: ``slice``: generic intervals (framework spans, imported host/GPU slices), Perfetto-style.
SLICE = pa.schema([
    pa.field(ts.ID, pa.int64(), nullable=False),
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(DUR_NS, pa.int64(), nullable=False),
    pa.field(ts.NAME, pa.string(), nullable=False),
    pa.field(ts.CATEGORY, pa.string()),
    pa.field(ts.DEPTH, pa.int32()),
    pa.field(ts.ARGS, pa.string()),          # JSON object
])

#: ``Window.events``: raw events of the tracks with few events in view.
WINDOW_EVENTS = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(TABLE, pa.string(), nullable=False),   # Instruction, DmaPacket or slice: where `id` lives
    pa.field(ts.ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(ts.NAME, pa.string()),                 # opcode / DMA variable or queue / slice name
    pa.field(ts.LAYER, pa.string()),
    pa.field("operator", pa.string()),              # Instruction.hlo_name
    pa.field("source", pa.string()),                # Instruction.nki_source_location
    pa.field(ts.DEPTH, pa.int32()),                 # lane within the track for overlapping events
])

#: ``Window.buckets``: per-track level-of-detail buckets tiling the window.
WINDOW_BUCKETS = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(BUSY_NS, pa.int64(), nullable=False),      # union of the track's intervals within the bucket
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(LONGEST_ID, pa.int64()),                   # id of a representative (longest) event
    pa.field(TOP_NAME, pa.string()),                    # dominant opcode / name
])

#: ``Trace.utilization``: busy fraction per track per bucket.
UTILIZATION = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(BUSY_FRACTION, pa.float64(), nullable=False),
])
