"""Names and Arrow schemas of everything the analyses return: the one owner of analysis result names.

:mod:`tracer.schema` owns the trace tables and :mod:`profiler.db_schema` the database's own tables and the query
API's results; this module owns the keys of the analysis dicts (``trnprof bounds --json``, ``trnprof diff
--json``) and the columns of the analysis tables.  The analyses, their commands, their figures and the dashboard
import the constants from here; none of them spells a result column as a string literal of its own.
"""

from __future__ import annotations

import pyarrow as pa

from profiler import db_schema as dbs
from tracer import schema as ts

#: Pseudo-engine name of the DMA queues taken together (the bottleneck when DMA is busiest).
DMA = "DMA"

# ------------------------------------------------------------------------------------------------------------
# Shared column names
# ------------------------------------------------------------------------------------------------------------
START_NS = "start_ns"
END_NS = "end_ns"
DUR_NS = "dur_ns"
ENGINE = ts.ENGINE
OPCODE = ts.OPCODE
QUEUE = ts.QUEUE_NAME
VARIABLE = ts.VARIABLE
LAYER = ts.LAYER
OPERATOR = "operator"
SOURCE = "source"
TABLE = dbs.TABLE
ID = ts.ID
TRACK_ID = dbs.TRACK_ID
COUNT = "count"
BYTES = "bytes"
TOTAL_NS = "total_ns"
FRACTION = "fraction"
RANK = "rank"

# ------------------------------------------------------------------------------------------------------------
# Performance bounds (``trnprof bounds --json``): keys fixed by issue 7 and performance-bounds.md
# ------------------------------------------------------------------------------------------------------------
TOTAL_TIME_NS = "total_time_ns"
MEMORY_BOUND_NS = "memory_bound_ns"
MEMORY_BOUND_IDEAL_NS = "memory_bound_ideal_ns"
MEMORY_BOUND_NO_RELOADS_NS = "memory_bound_no_reloads_ns"
COMPUTE_BOUND_NS = "compute_bound_ns"
COMPUTE_BOUND_IDEAL_NS = "compute_bound_ideal_ns"
COMPUTE_BOUND_IDEAL_USEFUL_NS = "compute_bound_ideal_useful_ns"
PERFECT_PIPELINE_NS = "perfect_pipeline_ns"
BOTTLENECK = "bottleneck"

#: The bounds in table order: (key, family, the bound before it in its family or total time).
BOUND_KEYS: tuple[str, ...] = (
    MEMORY_BOUND_NS, MEMORY_BOUND_IDEAL_NS, MEMORY_BOUND_NO_RELOADS_NS,
    COMPUTE_BOUND_NS, COMPUTE_BOUND_IDEAL_NS, COMPUTE_BOUND_IDEAL_USEFUL_NS,
    PERFECT_PIPELINE_NS,
)
BOUND_FAMILY: dict[str, str] = {
    MEMORY_BOUND_NS: "memory", MEMORY_BOUND_IDEAL_NS: "memory", MEMORY_BOUND_NO_RELOADS_NS: "memory",
    COMPUTE_BOUND_NS: "compute", COMPUTE_BOUND_IDEAL_NS: "compute", COMPUTE_BOUND_IDEAL_USEFUL_NS: "compute",
    PERFECT_PIPELINE_NS: "pipeline",
}

#: Gaps between consecutive bounds: key -> (upper, lower, what the gap means).
DMA_IDLE_GAP_NS = "dma_idle_gap_ns"
DMA_INEFFICIENCY_GAP_NS = "dma_inefficiency_gap_ns"
EXCESS_TRAFFIC_GAP_NS = "excess_traffic_gap_ns"
TENSOR_IDLE_GAP_NS = "tensor_idle_gap_ns"
TENSOR_UNDERUSE_GAP_NS = "tensor_underutilization_gap_ns"
TRANSPOSE_GAP_NS = "transpose_gap_ns"
SERIALIZATION_GAP_NS = "serialization_gap_ns"
GAPS: dict[str, tuple[str, str, str]] = {
    DMA_IDLE_GAP_NS: (TOTAL_TIME_NS, MEMORY_BOUND_NS, "DMA idle time"),
    DMA_INEFFICIENCY_GAP_NS: (MEMORY_BOUND_NS, MEMORY_BOUND_IDEAL_NS,
                              "DMA inefficiency: small transfers, low per-transfer throughput"),
    EXCESS_TRAFFIC_GAP_NS: (MEMORY_BOUND_IDEAL_NS, MEMORY_BOUND_NO_RELOADS_NS, "excess traffic: reloads and spills"),
    TENSOR_IDLE_GAP_NS: (TOTAL_TIME_NS, COMPUTE_BOUND_NS, "Tensor engine idle"),
    TENSOR_UNDERUSE_GAP_NS: (COMPUTE_BOUND_NS, COMPUTE_BOUND_IDEAL_NS,
                             "Tensor engine under-utilised while active (small tiles, start-up, throttling)"),
    TRANSPOSE_GAP_NS: (COMPUTE_BOUND_IDEAL_NS, COMPUTE_BOUND_IDEAL_USEFUL_NS, "time spent on transposes"),
    SERIALIZATION_GAP_NS: (TOTAL_TIME_NS, PERFECT_PIPELINE_NS, "serialisation: engines waiting on each other"),
}

#: Further keys of the bounds dict.
ENGINE_ACTIVE_NS = "engine_active_ns"      # {engine or DMA: union busy ns in the window}
SPEEDUPS = "speedups"                      # {bound key: bottleneck-aware speedup of removing that overhead}
INPUTS = "inputs"                          # the method's inputs (bytes, FLOPs, peaks)
NOTES = "notes"                            # why a bound is null, caveats that apply to this window
CORE = "core"

#: Keys of ``bounds[INPUTS]``.
DMA_ACTIVE_NS = "dma_active_ns"
DMA_TRANSFER_BYTES = "dma_transfer_bytes"
NECESSARY_BYTES = "necessary_bytes"
HW_FLOPS = "hw_flops"
TRANSPOSE_FLOPS = "transpose_flops"
DMA_BW_PEAK = "dma_bw_peak_bytes_per_s"
TE_PEAK_FLOPS = "te_peak_flops_per_s"

#: ``bounds_table``: the bounds as rows, for tables and charts.
FAMILY = "family"
BOUND = "bound"
VALUE_NS = "value_ns"
GAP_NS = "gap_ns"
GAP_MEANING = "gap_meaning"
SPEEDUP = "speedup"
BOUNDS_TABLE = pa.schema([
    pa.field(FAMILY, pa.string(), nullable=False),
    pa.field(BOUND, pa.string(), nullable=False),
    pa.field(VALUE_NS, pa.float64()),
    pa.field(GAP_NS, pa.float64()),        # previous bound (or total time) minus this one
    pa.field(GAP_MEANING, pa.string()),
    pa.field(SPEEDUP, pa.float64()),
])

# ------------------------------------------------------------------------------------------------------------
# Dependency waits
# ------------------------------------------------------------------------------------------------------------
WAIT_NS = "wait_ns"
WAITED_ON = "waited_on"                    # engine name or DMA queue name
WAITED_ON_KIND = "waited_on_kind"          # engine, dma_queue or unknown
WAITED_ON_TABLE = "waited_on_table"
WAITED_ON_ID = "waited_on_id"
WAITED_ON_NAME = "waited_on_name"          # opcode or DMA variable of the predecessor
DEPENDENCY_TYPE = ts.DEPENDENCY_TYPE
WAIT_KIND_ENGINE = "engine"
WAIT_KIND_DMA = "dma_queue"
WAIT_KIND_UNKNOWN = "unknown"

#: ``dependency_waits``: one row per instruction that waited on a semaphore.
WAITS = pa.schema([
    pa.field(ID, pa.int64(), nullable=False),
    pa.field(ENGINE, pa.string()),
    pa.field(OPCODE, pa.string()),
    pa.field(START_NS, pa.int64(), nullable=False),   # when the instruction started (the wait ends here)
    pa.field(WAIT_NS, pa.int64(), nullable=False),    # the part of the wait inside the window
    pa.field(WAITED_ON_KIND, pa.string(), nullable=False),
    pa.field(WAITED_ON, pa.string(), nullable=False),
    pa.field(WAITED_ON_TABLE, pa.string()),
    pa.field(WAITED_ON_ID, pa.int64()),
    pa.field(WAITED_ON_NAME, pa.string()),
    pa.field(DEPENDENCY_TYPE, pa.string()),
])

#: ``wait_summary``: waits aggregated per (waiting engine, what it waited on).
WAIT_SUMMARY = pa.schema([
    pa.field(ENGINE, pa.string()),
    pa.field(WAITED_ON_KIND, pa.string(), nullable=False),
    pa.field(WAITED_ON, pa.string(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(WAIT_NS, pa.int64(), nullable=False),
    pa.field(FRACTION, pa.float64(), nullable=False),  # of the window's length
])

# ------------------------------------------------------------------------------------------------------------
# Critical path
# ------------------------------------------------------------------------------------------------------------
STEP = "step"
KIND = "kind"                              # instruction or dma (a DMA transfer)
RESOURCE = "resource"                      # engine, or DMA queue group for a transfer
NAME = ts.NAME                             # opcode, or the transfer's variable
EDGE = "edge"                              # how the step was reached: flow, anti, output, stream, trigger, queue,
                                           # dma_engine, access
GAP_BEFORE_NS = "gap_before_ns"            # time between the previous step's end and this step's start
GAP_CAUSE = "gap_cause"                    # the kind of dependency that held the step back during that gap
NODE_INSTRUCTION = "instruction"
NODE_DMA = "dma"
EDGE_STREAM = "stream"                     # the previous instruction of the same in-order engine stream
EDGE_TRIGGER = "trigger"                   # the instruction that triggered a DMA transfer
EDGE_QUEUE = "queue"                       # the previous transfer on a shared DMA queue
EDGE_DMA_ENGINE = "dma_engine"             # the previous transfer (of any queue) on the same DMA engine
EDGE_ACCESS = "access"                     # the conflicting engine's last access to the same memory (trn1)
EDGE_START = "start"

#: ``critical_path``: the path's steps in time order.
CRITICAL_PATH = pa.schema([
    pa.field(STEP, pa.int64(), nullable=False),
    pa.field(KIND, pa.string(), nullable=False),
    pa.field(TABLE, pa.string(), nullable=False),     # Instruction or DmaPacket: where ``id`` lives
    pa.field(ID, pa.int64(), nullable=False),         # instruction id, or the id of the DMA segment's last packet
    pa.field(TRACK_ID, pa.int64()),                   # timeline row of ``id`` (for highlighting)
    pa.field(RESOURCE, pa.string()),
    pa.field(NAME, pa.string()),
    pa.field(START_NS, pa.int64(), nullable=False),
    pa.field(END_NS, pa.int64(), nullable=False),
    pa.field(DUR_NS, pa.int64(), nullable=False),
    pa.field(EDGE, pa.string(), nullable=False),
    pa.field(GAP_BEFORE_NS, pa.int64(), nullable=False),
    pa.field(GAP_CAUSE, pa.string()),                 # null without a gap
])

#: ``critical_path_breakdown``: the path's time per (resource, name), plus the gaps per edge kind.
CRITICAL_PATH_BREAKDOWN = pa.schema([
    pa.field(KIND, pa.string(), nullable=False),      # instruction, dma or gap
    pa.field(RESOURCE, pa.string()),
    pa.field(NAME, pa.string()),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(TOTAL_NS, pa.int64(), nullable=False),
    pa.field(FRACTION, pa.float64(), nullable=False),  # of the path's span
])
KIND_GAP = "gap"

# ------------------------------------------------------------------------------------------------------------
# Idle gaps
# ------------------------------------------------------------------------------------------------------------
NEXT_ID = "next_id"
NEXT_OPCODE = "next_opcode"
CAUSE = "cause"                            # dependency, no_wait, end_of_work
CAUSE_KIND = "cause_kind"                  # engine, dma_queue, unknown (for dependency causes)
CAUSE_RESOURCE = "cause_resource"
CAUSE_TABLE = "cause_table"
CAUSE_ID = "cause_id"
CAUSE_NAME = "cause_name"
CAUSE_DEPENDENCY = "dependency"            # the next instruction waited on a semaphore (see cause_*)
CAUSE_ACCESS = "access"                    # it waited for the engine it takes turns with on a memory (trn1)
CAUSE_NO_WAIT = "no_wait"                  # the next instruction did not wait: nothing was issued to the engine
CAUSE_END = "end_of_work"                  # the engine had no further instruction in the window
CAUSE_TRIGGER = "trigger"                  # DMA: the next transfer's trigger instruction came late

#: ``idle_gaps``: idle intervals per engine, longest first.
IDLE_GAPS = pa.schema([
    pa.field(RANK, pa.int64(), nullable=False),
    pa.field(ENGINE, pa.string(), nullable=False),     # an engine, or DMA for all queues taken together
    pa.field(START_NS, pa.int64(), nullable=False),
    pa.field(END_NS, pa.int64(), nullable=False),
    pa.field(DUR_NS, pa.int64(), nullable=False),
    pa.field(NEXT_ID, pa.int64()),
    pa.field(NEXT_OPCODE, pa.string()),
    pa.field(CAUSE, pa.string(), nullable=False),
    pa.field(CAUSE_KIND, pa.string()),
    pa.field(CAUSE_RESOURCE, pa.string()),
    pa.field(CAUSE_TABLE, pa.string()),
    pa.field(CAUSE_ID, pa.int64()),
    pa.field(CAUSE_NAME, pa.string()),
])

# ------------------------------------------------------------------------------------------------------------
# Operators, opcodes, source lines
# ------------------------------------------------------------------------------------------------------------
INSTRUCTIONS = "instructions"
TIME_NS = "time_ns"                        # span: first start to last end
BUSY_NS = dbs.BUSY_NS                      # union of the group's instruction intervals
INSTRUCTION_NS = "instruction_ns"          # sum of instruction durations (overlaps counted twice)
TENSOR_NS = "tensor_ns"                    # union of the group's Tensor-engine intervals
FLOPS = "flops"                            # raw FLOPs (one MAC = 2)
ADJUSTED_FLOPS = ts.ADJUSTED_FLOPS
MODEL_FLOPS = "model_flops"                # raw FLOPs of non-transpose matmuls
HBM_READ_BYTES = "hbm_read_bytes"
HBM_WRITE_BYTES = "hbm_write_bytes"
MFU = "mfu"                                # model_flops / (TE peak * time_ns)
HFU = "hfu"                                # adjusted_flops / (TE peak * time_ns)
SHARE = "share"                            # time_ns / window length

_GROUP_STATS = [
    pa.field(INSTRUCTIONS, pa.int64(), nullable=False),
    pa.field(START_NS, pa.int64()),
    pa.field(END_NS, pa.int64()),
    pa.field(TIME_NS, pa.int64(), nullable=False),
    pa.field(BUSY_NS, pa.int64(), nullable=False),
    pa.field(INSTRUCTION_NS, pa.int64(), nullable=False),
    pa.field(TENSOR_NS, pa.int64(), nullable=False),
    pa.field(FLOPS, pa.int64()),                # null: the trace records no FLOPs (a profile without the fields)
    pa.field(ADJUSTED_FLOPS, pa.int64()),
    pa.field(MODEL_FLOPS, pa.int64()),
    pa.field(HBM_READ_BYTES, pa.int64()),       # null: the trace records no HBM bytes
    pa.field(HBM_WRITE_BYTES, pa.int64()),
    pa.field(MFU, pa.float64()),
    pa.field(HFU, pa.float64()),
    pa.field(SHARE, pa.float64()),
]

#: Grouping keys of :func:`profiler.analyses.operators.time_by`.
GROUP_KEYS: dict[str, tuple[str, ...]] = {
    "operator": (LAYER, OPERATOR),
    "opcode": (ENGINE, OPCODE),
    "source": (SOURCE,),
}


def group_schema(by: str) -> pa.Schema:
    """Schema of ``time_by(trace, by)``: the grouping key columns, then the statistics."""
    return pa.schema([pa.field(k, pa.string()) for k in GROUP_KEYS[by]] + _GROUP_STATS)


OPERATOR_TABLE = group_schema("operator")

# ------------------------------------------------------------------------------------------------------------
# Source view: kernel source files and their lines
# ------------------------------------------------------------------------------------------------------------
FILE = ts.SOURCE_FILE_NAME
LINE = "line"
TEXT = ts.SOURCE_TEXT
LINES = "lines"                            # lines with instructions
HAS_TEXT = "has_text"                      # the trace holds the file's text
SIZE_BYTES = ts.SOURCE_SIZE_BYTES
WAIT_NS = "wait_ns"                        # summed evt_wait_time_ns: semaphore waits before the instructions
INSTRUCTION_SHARE = "instruction_share"    # instruction_ns / every instruction's in the window
ENGINES = "engines"                        # engines of the line's instructions, most time first
OPCODES = "opcodes"                        # its opcodes, most time first (at most 3)
DMA_TRANSFERS = "dma_transfers"            # DMA transfers its instructions triggered
DMA_BYTES = "dma_bytes"                    # bytes those transfers moved
DMA_NS = "dma_ns"                          # their summed durations (first packet start to last packet end)
CRITICAL_NS = "critical_ns"                # critical-path time in its instructions and the transfers they triggered

#: ``source_files``: the files instructions came from (or whose text the trace holds), most time first.
SOURCE_FILES = pa.schema([
    pa.field(FILE, pa.string(), nullable=False),
    pa.field(INSTRUCTIONS, pa.int64(), nullable=False),
    pa.field(INSTRUCTION_NS, pa.int64(), nullable=False),
    pa.field(INSTRUCTION_SHARE, pa.float64()),
    pa.field(LINES, pa.int64(), nullable=False),
    pa.field(HAS_TEXT, pa.bool_(), nullable=False),
    pa.field(SIZE_BYTES, pa.int64()),
])
#: ``source_listing``: one row per line of a file (its text when the trace holds it).
SOURCE_LINES = pa.schema([
    pa.field(LINE, pa.int64(), nullable=False),
    pa.field(TEXT, pa.string()),
    pa.field(INSTRUCTIONS, pa.int64(), nullable=False),
    pa.field(INSTRUCTION_NS, pa.int64(), nullable=False),
    pa.field(INSTRUCTION_SHARE, pa.float64()),
    pa.field(BUSY_NS, pa.int64(), nullable=False),
    pa.field(WAIT_NS, pa.int64(), nullable=False),
    pa.field(ENGINES, pa.string()),
    pa.field(OPCODES, pa.string()),
    pa.field(HBM_READ_BYTES, pa.int64(), nullable=False),
    pa.field(HBM_WRITE_BYTES, pa.int64(), nullable=False),
    pa.field(DMA_TRANSFERS, pa.int64(), nullable=False),
    pa.field(DMA_BYTES, pa.int64(), nullable=False),
    pa.field(DMA_NS, pa.int64(), nullable=False),
    pa.field(CRITICAL_NS, pa.int64()),                 # None unless asked for (it runs the critical path)
    pa.field(START_NS, pa.int64()),
    pa.field(END_NS, pa.int64()),
])

# ------------------------------------------------------------------------------------------------------------
# DMA efficiency
# ------------------------------------------------------------------------------------------------------------
SIZE_LO = "size_lo_bytes"                  # bin [lo, hi) of transfer_bytes
SIZE_HI = "size_hi_bytes"
PACKETS = "packets"
BUSY_FRACTION = "busy_fraction"
THROUGHPUT_GBPS = "throughput_gbps"        # bytes / busy time, GB/s (1e9 B/s)
LOADED_BYTES = "loaded_bytes"
DISTINCT_BYTES = "distinct_bytes"
STORED_BYTES = "stored_bytes"
RELOAD_FACTOR = "reload_factor"            # loaded / distinct loaded bytes
SMALL_PACKETS = "small_packets"
SMALL_FRACTION = "small_fraction"          # small packets' share of the DMA busy time in the region
MEAN_BYTES = "mean_bytes"

DMA_SIZE_HISTOGRAM = pa.schema([
    pa.field(SIZE_LO, pa.int64(), nullable=False),
    pa.field(SIZE_HI, pa.int64(), nullable=False),
    pa.field(PACKETS, pa.int64(), nullable=False),
    pa.field(BYTES, pa.int64(), nullable=False),
    pa.field(TOTAL_NS, pa.int64(), nullable=False),   # summed packet durations
    pa.field(FRACTION, pa.float64(), nullable=False),  # of all packets
])
DMA_QUEUES = pa.schema([
    pa.field(QUEUE, pa.string(), nullable=False),
    pa.field(PACKETS, pa.int64(), nullable=False),
    pa.field(BYTES, pa.int64(), nullable=False),
    pa.field(BUSY_NS, pa.int64(), nullable=False),
    pa.field(BUSY_FRACTION, pa.float64(), nullable=False),
    pa.field(THROUGHPUT_GBPS, pa.float64()),
    pa.field(MEAN_BYTES, pa.float64()),
])
DMA_TENSORS = pa.schema([
    pa.field(VARIABLE, pa.string()),
    pa.field(PACKETS, pa.int64(), nullable=False),
    pa.field(LOADED_BYTES, pa.int64(), nullable=False),
    pa.field(STORED_BYTES, pa.int64(), nullable=False),
    pa.field(DISTINCT_BYTES, pa.int64()),             # null when the trace does not say which region moved
    pa.field(RELOAD_FACTOR, pa.float64()),
])
#: Keys of :func:`profiler.analyses.dma.dma_efficiency`.
EFF_PACKETS = "packets"
EFF_BYTES = "bytes"
EFF_MEAN_BYTES = "mean_bytes"
EFF_SMALL_PACKETS = "small_packets"
EFF_SMALL_BYTES_FRACTION = "small_bytes_fraction"
EFF_ACTIVE_NS = "dma_active_ns"
EFF_THROUGHPUT_GBPS = "throughput_gbps"
EFF_PEAK_GBPS = "peak_gbps"
EFF_HISTOGRAM = "histogram"
EFF_QUEUES = "queues"
EFF_TENSORS = "tensors"
EFF_SMALL_REGIONS = "small_regions"

SMALL_DMA_REGIONS = pa.schema([
    pa.field(START_NS, pa.int64(), nullable=False),
    pa.field(END_NS, pa.int64(), nullable=False),
    pa.field(PACKETS, pa.int64(), nullable=False),
    pa.field(SMALL_PACKETS, pa.int64(), nullable=False),
    pa.field(SMALL_FRACTION, pa.float64(), nullable=False),
    pa.field(MEAN_BYTES, pa.float64(), nullable=False),
])

# ------------------------------------------------------------------------------------------------------------
# Recommendations
# ------------------------------------------------------------------------------------------------------------
RULE = "rule"
TITLE = "title"
MESSAGE = "message"
EVIDENCE = "evidence"                      # JSON object of the numbers that triggered the rule
IMPACT_NS = "impact_ns"                    # time at stake (the overhead the rule addresses)
SAVING_NS = "saving_ns"                    # bottleneck-aware: total - total / speedup (impact_ns without a speedup)
RECOMMENDATIONS = pa.schema([
    pa.field(RANK, pa.int64(), nullable=False),
    pa.field(RULE, pa.string(), nullable=False),
    pa.field(TITLE, pa.string(), nullable=False),
    pa.field(MESSAGE, pa.string(), nullable=False),
    pa.field(EVIDENCE, pa.string(), nullable=False),
    pa.field(IMPACT_NS, pa.float64(), nullable=False),
    pa.field(SPEEDUP, pa.float64()),
    pa.field(SAVING_NS, pa.float64(), nullable=False),
])

# ------------------------------------------------------------------------------------------------------------
# Comparison of two traces
# ------------------------------------------------------------------------------------------------------------
A = "a"
B = "b"
DELTA = "delta"
RATIO = "ratio"                            # b / a
A_NS = "a_ns"
B_NS = "b_ns"
DELTA_NS = "delta_ns"
A_COUNT = "a_count"
B_COUNT = "b_count"
METRIC = "metric"
PRESENCE = "presence"                      # both, only_a, only_b

#: Keys of the diff dict.
DIFF_TOTAL = "total_time"
DIFF_ENGINES = "engine_active"
DIFF_BOUNDS = "bounds"
DIFF_BOTTLENECK = "bottleneck"
DIFF_BY = "by"                             # {grouping: delta table}
DIFF_TRACES = "traces"
DIFF_MEMORY = "memory"                     # metric table: SBUF/PSUM peak live bytes (empty without memory maps)
SBUF_PEAK_LIVE_BYTES = "sbuf_peak_live_bytes"
PSUM_PEAK_LIVE_BYTES = "psum_peak_live_bytes"

#: One row per metric of the two traces (total time, engine active times, bounds).
DIFF_METRICS = pa.schema([
    pa.field(METRIC, pa.string(), nullable=False),
    pa.field(A, pa.float64()),
    pa.field(B, pa.float64()),
    pa.field(DELTA, pa.float64()),
    pa.field(RATIO, pa.float64()),
])
#: The same for whole numbers (engine active ns, peak live bytes): A, B and the delta as integers.
DIFF_COUNTS = pa.schema([
    pa.field(METRIC, pa.string(), nullable=False),
    pa.field(A, pa.int64()),
    pa.field(B, pa.int64()),
    pa.field(DELTA, pa.int64()),
    pa.field(RATIO, pa.float64()),
])


def diff_schema(by: str) -> pa.Schema:
    """Schema of a per-identity delta table: the grouping keys, both sides' time and count, the delta."""
    return pa.schema([pa.field(k, pa.string()) for k in GROUP_KEYS[by]] + [
        pa.field(PRESENCE, pa.string(), nullable=False),
        pa.field(A_COUNT, pa.int64(), nullable=False),
        pa.field(B_COUNT, pa.int64(), nullable=False),
        pa.field(A_NS, pa.int64(), nullable=False),
        pa.field(B_NS, pa.int64(), nullable=False),
        pa.field(DELTA_NS, pa.int64(), nullable=False),
        pa.field(RATIO, pa.float64()),
    ])

# ------------------------------------------------------------------------------------------------------------
# Memory map (profiler.analyses.memory_map)
# ------------------------------------------------------------------------------------------------------------
MEM = "mem"
CAPACITY_BYTES = "capacity_bytes"
PEAK_LIVE_BYTES = "peak_live_bytes"
PEAK_FRACTION = "peak_fraction"
PEAK_AT_NS = "peak_at_ns"
ACCESSED_BYTES = "accessed_bytes"
ACCESSES = "accesses"
LIVE_BYTES = "live_bytes"

MEMORY_SUMMARY_SCHEMA = pa.schema([
    pa.field(MEM, pa.string(), nullable=False),
    pa.field(CAPACITY_BYTES, pa.int64(), nullable=False),
    pa.field(PEAK_LIVE_BYTES, pa.int64(), nullable=False),
    pa.field(PEAK_FRACTION, pa.float64(), nullable=False),
    pa.field(PEAK_AT_NS, pa.int64()),
    pa.field(ACCESSED_BYTES, pa.int64(), nullable=False),
    pa.field(ACCESSES, pa.int64(), nullable=False),
])
ROLE = "role"
ACCESS = "access"
LO_BYTE = "lo_byte"
HI_BYTE = "hi_byte"
#: ``profiler.analyses.memory_cell.cell_accesses``: the accesses, then each one's instruction.
MEMORY_CELL_BASE_SCHEMA = pa.schema([
    pa.field(ROLE, pa.string(), nullable=False),
    pa.field(ID, pa.int64(), nullable=False),
    pa.field(ACCESS, pa.string(), nullable=False),
    pa.field(START_NS, pa.int64(), nullable=False),
    pa.field(END_NS, pa.int64(), nullable=False),
    pa.field(LO_BYTE, pa.int64(), nullable=False),
    pa.field(HI_BYTE, pa.int64(), nullable=False),
])
MEMORY_CELL_SCHEMA = pa.schema([*MEMORY_CELL_BASE_SCHEMA, pa.field(OPCODE, pa.string()), pa.field(ENGINE, pa.string()),
                                pa.field(SOURCE, pa.string())])
LIVE_SERIES_SCHEMA = pa.schema([
    pa.field(START_NS, pa.int64(), nullable=False),
    pa.field(END_NS, pa.int64(), nullable=False),
    pa.field(LIVE_BYTES, pa.int64(), nullable=False),
])

# ------------------------------------------------------------------------------------------------------------
# Call tree (profiler.analyses.call_tree): spans aggregated by their stack of enclosing span names
# ------------------------------------------------------------------------------------------------------------
NODE = "node"                              # the frame's index in the tree (rows in depth-first order)
PARENT = "parent"                          # the enclosing frame's node (null: a root)
DEPTH = ts.DEPTH                           # 0 for roots
FRAME_KIND = "kind"                        # FRAME_THREAD (a row's root) or FRAME_SPAN
FRAME_THREAD = "thread"
FRAME_SPAN = "span"
SELF_NS = "self_ns"                        # time in the frame's spans not covered by their child spans
PATH = "path"                              # the frame's names from its root, joined by PATH_SEPARATOR
PATH_SEPARATOR = " › "
#: ``call_tree``: one row per distinct stack (frame), depth first, children by descending time.
CALL_TREE = pa.schema([
    pa.field(NODE, pa.int64(), nullable=False),
    pa.field(PARENT, pa.int64()),
    pa.field(DEPTH, pa.int32(), nullable=False),
    pa.field(FRAME_KIND, pa.string(), nullable=False),
    pa.field(NAME, pa.string(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(TOTAL_NS, pa.int64(), nullable=False),
    pa.field(SELF_NS, pa.int64(), nullable=False),
    pa.field(PATH, pa.string(), nullable=False),
])
#: ``root_summary``: per root frame (a row, with rows split), its spans and their time, as a share of a duration.
ROOT_SUMMARY = pa.schema([
    pa.field(NAME, pa.string(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(TOTAL_NS, pa.int64(), nullable=False),
    pa.field(FRACTION, pa.float64(), nullable=False),
])
#: ``top_frames``: time per span name over every stack it appears in (a nested call of the same name counted once
#: in ``total_ns``).
TOP_FRAMES = pa.schema([
    pa.field(NAME, pa.string(), nullable=False),
    pa.field(COUNT, pa.int64(), nullable=False),
    pa.field(SELF_NS, pa.int64(), nullable=False),
    pa.field(TOTAL_NS, pa.int64(), nullable=False),
    pa.field(FRACTION, pa.float64(), nullable=False),   # self_ns over the window's span time
])

A_SELF_NS = "a_self_ns"
B_SELF_NS = "b_self_ns"
DELTA_SELF_NS = "delta_self_ns"
#: ``call_tree_diff.diff_stacks``: one row per stack of either tree (full outer join on ``path``), largest change of
#: total time first; times in ns, deltas B - A, ``ratio`` b_ns / a_ns of the totals.
CALL_TREE_DIFF = pa.schema([
    pa.field(PATH, pa.string(), nullable=False),
    pa.field(NAME, pa.string(), nullable=False),
    pa.field(DEPTH, pa.int32(), nullable=False),
    pa.field(PRESENCE, pa.string(), nullable=False),
    pa.field(A_COUNT, pa.int64(), nullable=False),
    pa.field(B_COUNT, pa.int64(), nullable=False),
    pa.field(A_NS, pa.int64(), nullable=False),
    pa.field(B_NS, pa.int64(), nullable=False),
    pa.field(DELTA_NS, pa.int64(), nullable=False),
    pa.field(A_SELF_NS, pa.int64(), nullable=False),
    pa.field(B_SELF_NS, pa.int64(), nullable=False),
    pa.field(DELTA_SELF_NS, pa.int64(), nullable=False),
    pa.field(RATIO, pa.float64()),
])
#: ``call_tree_diff.diff_names``: ``top_frames`` of both trees joined on ``name``, largest change of self time first
#: (``a_ns``/``b_ns``: the names' totals, a nested call of the same name counted once).
CALL_TREE_NAME_DIFF = pa.schema([
    pa.field(NAME, pa.string(), nullable=False),
    pa.field(PRESENCE, pa.string(), nullable=False),
    pa.field(A_COUNT, pa.int64(), nullable=False),
    pa.field(B_COUNT, pa.int64(), nullable=False),
    pa.field(A_SELF_NS, pa.int64(), nullable=False),
    pa.field(B_SELF_NS, pa.int64(), nullable=False),
    pa.field(DELTA_SELF_NS, pa.int64(), nullable=False),
    pa.field(A_NS, pa.int64(), nullable=False),
    pa.field(B_NS, pa.int64(), nullable=False),
    pa.field(DELTA_NS, pa.int64(), nullable=False),
    pa.field(RATIO, pa.float64()),
])

# ------------------------------------------------------------------------------------------------------------
# Trace columns the analyses read that tracer.schema declares without a constant (looked up, so a rename fails
# at import time instead of in a query)
# ------------------------------------------------------------------------------------------------------------
T_HBM_READ_BYTES = ts.INSTRUCTION.column("hbm_read_bytes").name
T_HBM_WRITE_BYTES = ts.INSTRUCTION.column("hbm_write_bytes").name
T_SPILL_RELOAD_BYTES = ts.INSTRUCTION.column("spill_reload_bytes").name
T_PACKET_AGGREGATION_ID = ts.DMA_PACKET.column("packet_aggregation_id").name
T_DMA_SOURCE = ts.DMA_PACKET.column("source").name
T_DMA_DEST = ts.DMA_PACKET.column("dest").name
