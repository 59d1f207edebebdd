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
#: 2.0: ``lod.value_sum``, ``counter_lod``, ``track.value_name``; keyed tables clustered by track in chunks.
#: 3.0: spans are keyed by their depth too (``track.span_depth``): each nesting level of a thread is a track of its own.
#: 3.1: an importer's span rows in its order (``slice.track_order``: Chrome's process and thread sort indexes).
#: 3.2: ``Metadata.table_rows`` (trace format 2.3).
#: 3.3: ``Metadata.hbm_tensors`` (trace format 2.4).
DB_FORMAT_VERSION = "3.3"
#: Columns a minor version added: (table, column) -> the (major, minor) that added it.  A database of an earlier
#: minor version lacks them and is still read (queries that name them fail there, as on a trace without them).
COLUMNS_SINCE: dict[tuple[str, str], tuple[int, int]] = {("Metadata", "table_rows"): (3, 2),
                                                         ("Metadata", "hbm_tensors"): (3, 3)}

TRACK_ID = "track_id"
TABLE = "table_name"
DUR_NS = "dur_ns"
BUSY_NS = "busy_ns"
COUNT = "count"
LONGEST_ID = "longest_id"
TOP_NAME = "top_name"
VALUE_SUM = "value_sum"              # lod: exact integral of the track's per-event value over the bucket
BUSY_FRACTION = "busy_fraction"

#: The database's own tables (Neuron-named trace tables keep their names from :mod:`tracer.schema`).
INFO_TABLE = "trnprof_info"          # key/value rows: format version, ingest source, cache key
TRACK_TABLE = "track"
SLICE_TABLE = "slice"
LOD_TABLE = "lod"                    # the level-of-detail interval index, see docs/database.md
COUNTER_LOD_TABLE = "counter_lod"    # the level-of-detail index of Counter tracks (step functions)

#: Query tracks (:mod:`profiler.query_track`, Perfetto's debug tracks): a SQL result drawn on the timeline.  Its
#: window events name this pseudo-table (their ``id`` is the result's row number), and a result column of this name
#: splits the result into one timeline row per value.
QUERY_TABLE = "query"
QUERY_TRACK = "track"

#: ``trnprof_info`` columns and keys.
INFO_KEY = "key"
INFO_VALUE = "value"
INFO_FORMAT_VERSION = "format_version"
INFO_TOOL_VERSION = "tool_version"
INFO_SOURCE_PATH = "source_path"
INFO_SOURCE_FORMAT = "source_format"
INFO_CACHE_KEY = "cache_key"
INFO_CREATED_AT = "created_at"

#: ``trnprof_info``: one row per key.
INFO = pa.schema([
    pa.field(INFO_KEY, pa.string(), nullable=False),
    pa.field(INFO_VALUE, pa.string(), nullable=False),
])

#: Extra ``track`` columns filled by the ingest (statistics of the track's rows, used by the query planner).
CORE = "core"
KIND = "kind"
GROUP_NAME = "group_name"
SORT_ORDER = "sort_order"
EVENT_COUNT = "event_count"
MAX_DUR_NS = "max_dur_ns"
LOD_MIN_LEVEL = "lod_min_level"      # finest level stored in ``lod`` for the track (null: no index)
OVERLAPPING = "overlapping"          # true when two of the track's intervals overlap
VALUE_NAME = "value_name"            # column whose per-event values lod.value_sum integrates (null: none)
SPAN_DEPTH = "span_depth"            # span tracks: the depth of their slices (a thread has a track per depth)

#: ``lod`` columns.
LEVEL = "level"                      # bucket width is 2**level ns
BUCKET = "bucket"                    # bucket index: the bucket covers [bucket << level, (bucket + 1) << level)

#: ``counter_lod`` columns (per bucket of a counter's step function; see docs/database.md).
MIN_VALUE = "min_value"
MAX_VALUE = "max_value"
MEAN_VALUE = "mean_value"            # time-weighted mean over the part of the bucket after the first sample
LAST_VALUE = "last_value"            # the step function's value at the end of the bucket

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
    pa.field(SPAN_DEPTH, pa.int32()),        # span tracks: the depth of their slices (null: other kinds)
])

#: ``track`` as stored: :data:`TRACK` plus the statistics the ingest computes per track.
TRACK_STORED = pa.schema([
    *TRACK,
    pa.field(EVENT_COUNT, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64()),       # first start (null for an empty track)
    pa.field(ts.END_TS, pa.int64()),         # last end
    pa.field(MAX_DUR_NS, pa.int64()),
    pa.field(LOD_MIN_LEVEL, pa.int32()),
    pa.field(OVERLAPPING, pa.bool_()),
    pa.field(VALUE_NAME, pa.string()),      # e.g. transfer_bytes (DMA queues), adjusted_flops (Tensor engines)
])

#: ``lod``: per track and power-of-two level, one row per bucket from the track's first to its last bucket.
LOD = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(LEVEL, pa.int32(), nullable=False),
    pa.field(BUCKET, pa.int64(), nullable=False),
    pa.field(BUSY_NS, pa.int64(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(LONGEST_ID, pa.int64()),
    pa.field(TOP_NAME, pa.string()),
    pa.field(VALUE_SUM, pa.float64()),      # null for tracks without a value (track.value_name is null)
])

#: ``counter_lod``: per Counter track and level, one row per bucket from its first to its last sample's bucket.
COUNTER_LOD = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(LEVEL, pa.int32(), nullable=False),
    pa.field(BUCKET, pa.int64(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),       # samples in the bucket
    pa.field(MIN_VALUE, pa.float64(), nullable=False),  # over the samples in the bucket and the value carried in
    pa.field(MAX_VALUE, pa.float64(), nullable=False),
    pa.field(MEAN_VALUE, pa.float64(), nullable=False),
    pa.field(LAST_VALUE, pa.float64(), nullable=False),
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
    pa.field(ts.PARENT_ID, pa.int64()),      # id of the enclosing slice (from Span.parent_id)
])

#: ``Window.events`` attribution columns (besides ``layer``).
OPERATOR = "operator"
SOURCE = "source"

#: ``Window.events``: raw events of the tracks with few events in view.
WINDOW_EVENTS = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(TABLE, pa.string(), nullable=False),   # Instruction, DmaPacket or slice: where `id` lives
    pa.field(ts.ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(ts.NAME, pa.string()),                 # opcode / DMA variable or queue / slice name
    pa.field(ts.LAYER, pa.string()),                # Instruction.layer (null with window(attributes=False))
    pa.field(OPERATOR, pa.string()),                # Instruction.hlo_name (idem)
    pa.field(SOURCE, pa.string()),                  # Instruction.nki_source_location (idem)
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

#: ``Trace.search`` results.
MATCHED_FIELD = "matched_field"
SEARCH_RESULTS = pa.schema([
    pa.field(TRACK_ID, pa.int64()),
    pa.field(TABLE, pa.string(), nullable=False),
    pa.field(ts.ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(ts.NAME, pa.string()),
    pa.field(MATCHED_FIELD, pa.string(), nullable=False),   # column that matched: opcode, hlo_name, layer, ...
])

#: ``Trace.flows`` results: one row per Flow edge, with the other end's placement.
FLOW_ENDS = pa.schema([
    pa.field(TABLE, pa.string(), nullable=False),    # table of the other end
    pa.field(ts.ID, pa.int64(), nullable=False),     # id of the other end
    pa.field(TRACK_ID, pa.int64()),
    pa.field(ts.START_TS, pa.int64()),
    pa.field(ts.END_TS, pa.int64()),
    pa.field(ts.NAME, pa.string()),
    pa.field(ts.DEPENDENCY_TYPE, pa.string()),
    pa.field(ts.GAP_TIME, pa.int64()),
])

#: ``Trace.utilization``: busy fraction per track per bucket.
UTILIZATION = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(BUSY_FRACTION, pa.float64(), nullable=False),
])

#: ``Trace.series``: one value per core and bucket (units by kind: see ``profiler.db.series_query.SERIES_KINDS``).
SERIES = pa.schema([
    pa.field(CORE, pa.int64()),                         # pcore_idx (null for tracks without a core)
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(ts.VALUE, pa.float64()),                   # null when unknown (HFU without a Tensor peak)
])

#: ``Trace.counter_window`` / ``Window.counters``: per Counter track and bucket, a summary of its step function.
COUNTER_BUCKETS = pa.schema([
    pa.field(TRACK_ID, pa.int64(), nullable=False),
    pa.field(ts.START_TS, pa.int64(), nullable=False),
    pa.field(ts.END_TS, pa.int64(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),        # samples in the bucket
    pa.field(MIN_VALUE, pa.float64()),                  # null where the counter is undefined (before its first or
    pa.field(MAX_VALUE, pa.float64()),                  # after its last sample)
    pa.field(MEAN_VALUE, pa.float64()),
    pa.field(LAST_VALUE, pa.float64()),
])
