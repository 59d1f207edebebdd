"""The trace schema: every table, column name, Arrow type and format version of a trnprof trace.

This module is the single owner of the on-disk trace format.  A trace is a directory holding one Arrow IPC
*stream* file per table (``<Table>.arrows``).  Table and column names follow the Parquet output of AWS Neuron
Explorer (profile schema 7.4.0) so that queries written for Neuron Explorer run unchanged on trnprof data;
where trnprof needs more (framework spans, counters, format bookkeeping) the extra tables and columns are
declared here too, and nowhere else.  Other modules import the specs and the name constants from here; they
never invent a column name of their own.

Time is int64 nanoseconds everywhere.  Low-cardinality strings (engine, opcode, queue names, ...) are stored
dictionary-encoded, which keeps a typical Instruction row under 16 bytes on disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from tracer import trace_dir
from tracer.errors import TraceFormatError

#: Version of the trnprof trace directory format, ``MAJOR.MINOR``.  A reader accepts any file whose MAJOR it
#: knows (:data:`READABLE_MAJORS`); MINOR bumps only add optional tables or columns.  2.0 stores ``DmaPacket`` as
#: ``DmaTransfer`` + ``DmaPacketLayout`` (see :data:`STORAGE_TABLES`); 1.x traces store its rows.  2.1 adds the
#: optional ``SourceFile`` table.  2.2: the simulator's operand text gives each on-chip operand's elements per
#: partition (``bf16[512]@SBUF[0:128]+0x400``), which the memory map reads.  2.3: Metadata's ``table_rows``, the rows
#: of every table file a finished writer wrote (a completed recording missing a file, or rows, is damaged).  2.4:
#: Metadata's ``hbm_tensors``, each HBM tensor's kind as the kernel declared it (a scratch tensor is not necessary
#: traffic for the performance bounds).  2.5: DmaTransfer's ``split_packet`` / ``split_delay_ns``, a queue's share
#: moving in several runs around other queues' packets (its engine is never idle while one of its packets waits).
TRACE_FORMAT_VERSION = "2.5"
TRACE_FORMAT_MAJOR = int(TRACE_FORMAT_VERSION.split(".", maxsplit=1)[0])
#: Format majors this reader reads: 1 (``DmaPacket`` stored row by row) and 2.
READABLE_MAJORS: tuple[int, ...] = (1, 2)

#: The Neuron Explorer profile schema whose table and field names trnprof follows.
NEURON_PROFILE_SCHEMA_VERSION = "7.4.0"

#: File name suffix of one table's Arrow IPC stream file (the directory layout's: :mod:`tracer.trace_dir`).
TABLE_FILE_SUFFIX = trace_dir.TABLE_FILE_SUFFIX

#: Keys in each file's Arrow schema metadata.
META_KEY_TABLE = b"trnprof.table"
META_KEY_FORMAT_VERSION = b"trnprof.format_version"

#: The compute engines of a NeuronCore, in timeline order, as Neuron Explorer spells them.
ENGINES: tuple[str, ...] = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")

#: DMA queue types (Neuron's DmaQueueType enum).
DMA_QUEUE_TYPES: tuple[str, ...] = (
    "instruction",
    "input",
    "output",
    "data",
    "software_dynamic",
    "hardware_dynamic",
    "unknown",
)

#: Flow.dependency_type values: read-after-write, write-after-read, write-after-write.
DEPENDENCY_TYPES: tuple[str, ...] = ("flow", "anti", "output")

#: SemaphoreUpdate.update_operation_type values (decoded TPB update modes).
SEMAPHORE_OPERATIONS: tuple[str, ...] = (
    "none",
    "sem_inc",
    "sem_dec",
    "sem_add_imm",
    "sem_sub_imm",
    "sem_wr_imm",
    "evt_set",
    "evt_clr",
    "unknown",
)

_STR = pa.string()
_DICT = pa.dictionary(pa.int32(), pa.string())
_I64 = pa.int64()
_I32 = pa.int32()
_F32 = pa.float32()
_F64 = pa.float64()
_BOOL = pa.bool_()


@dataclass(frozen=True)
class Column:
    """One column of a trace table."""

    name: str
    type: pa.DataType
    required: bool = False
    unit: str = ""
    doc: str = ""

    @property
    def is_dictionary(self) -> bool:
        """True when the column is stored dictionary-encoded."""
        return pa.types.is_dictionary(self.type)

    def field(self) -> pa.Field:
        """The Arrow field of this column (required columns are non-nullable)."""
        return pa.field(self.name, self.type, nullable=not self.required)


@dataclass(frozen=True)
class TableSpec:
    """A trace table: its name, what it holds and its columns in on-disk order."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    #: ``interval`` (start_ts/end_ts rows), ``event`` (one timestamp), ``edge``, ``meta``, ``lookup``.
    kind: str
    #: Tables from Neuron Explorer keep its name; the others are trnprof extensions.
    neuron: bool = True
    _by_name: Mapping[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"duplicate column in table spec {self.name}")
        object.__setattr__(self, "_by_name", by_name)

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in on-disk order."""
        return tuple(c.name for c in self.columns)

    @property
    def required(self) -> tuple[str, ...]:
        """Names of the columns every row must have."""
        return tuple(c.name for c in self.columns if c.required)

    @property
    def file_name(self) -> str:
        """File name of this table inside a trace directory."""
        return self.name + TABLE_FILE_SUFFIX

    def column(self, name: str) -> Column:
        """The column called ``name``; raises KeyError naming the table when there is none."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"table {self.name} has no column {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema written to this table's file, tagged with the table name and format version."""
        return pa.schema(
            [c.field() for c in self.columns],
            metadata={META_KEY_TABLE: self.name.encode(), META_KEY_FORMAT_VERSION: TRACE_FORMAT_VERSION.encode()},
        )


def _c(name: str, type_: pa.DataType, doc: str, *, req: bool = False, unit: str = "") -> Column:
    return Column(name=name, type=type_, required=req, unit=unit, doc=doc)


# ----------------------------------------------------------------------------------------------------------
# Shared column names.  Code that needs a column name as a value imports it from here.
# ----------------------------------------------------------------------------------------------------------
ID = "id"
START_TS = "start_ts"
END_TS = "end_ts"
DURATION_NS = "duration_ns"
TIMESTAMP = "timestamp"
PCORE_IDX = "pcore_idx"
TABLE_ROWS = "table_rows"
SCALAR_ACTIVATION_FN = "scalar_activation_fn"
HBM_TENSORS = trace_dir.HBM_TENSORS
ENGINE = "engine"
OPCODE = "opcode"
OPERANDS = "operands"
PC = "pc"
EVT_WAIT_TIME_NS = "evt_wait_time_ns"
HLO_NAME = "hlo_name"
LAYER = "layer"
NKI_SOURCE_LOCATION = "nki_source_location"
#: SourceFile columns.
SOURCE_FILE_NAME = "file"
SOURCE_TEXT = "text"
SOURCE_SIZE_BYTES = "size_bytes"
TIMELINE_TRACK = "timeline_track"
RAW_FLOPS = "raw_flops"
ADJUSTED_FLOPS = "adjusted_flops"
TENSOR_INSTRUCTION_TYPE = "tensor_instruction_type"
PERFORMANCE_MODE = "performance_mode"
QUEUE_NAME = "queue_name"
QUEUE_IDX = "queue_idx"
QUEUE_TYPE = "queue_type"
ENGINE_IDX = "engine_idx"
READ_BYTES = "read_bytes"
WRITE_BYTES = "write_bytes"
TRANSFER_BYTES = "transfer_bytes"
THROUGHPUT = "throughput"
VARIABLE = "variable"
IN_ID = "in_id"
OUT_ID = "out_id"
IN_TABLE = "in_table"
OUT_TABLE = "out_table"
DEPENDENCY_TYPE = "dependency_type"
GAP_TIME = "gap_time"
NAME = "name"
CATEGORY = "category"
COST_MODEL = "cost_model"
DEPTH = "depth"
PARENT_ID = "parent_id"
TRACK_GROUP = "track_group"
TRACK_NAME = "track_name"
ARGS = "args"
VALUE = "value"
UNIT = "unit"
TRACK_ORDER = "track_order"

_BYTES_DOC = "bytes moved by this instruction"


def _interval_columns() -> tuple[Column, ...]:
    return (
        _c(ID, _I64, "unique id of the row within its table", req=True),
        _c(START_TS, _I64, "start time", req=True, unit="ns"),
        _c(END_TS, _I64, "end time (exclusive); end_ts >= start_ts", req=True, unit="ns"),
        _c(DURATION_NS, _I64, "end_ts - start_ts", req=True, unit="ns"),
    )


INSTRUCTION = TableSpec(
    name="Instruction",
    kind="interval",
    doc="One row per instruction executed on a compute engine (Tensor, Vector, Scalar, GpSimd, Sync).",
    columns=(
        *_interval_columns(),
        _c(ENGINE, _DICT, "engine that executed it: Tensor, Vector, Scalar, GpSimd or Sync", req=True),
        _c(OPCODE, _DICT, "instruction opcode, e.g. MATMUL, LDWEIGHTS, ACTIVATE, TENSOR_TENSOR", req=True),
        _c(OPERANDS, _STR, "operand text: semaphore waits/increments, sources, destination, sizes", req=True),
        _c(PC, _I64, "index of the instruction in its engine's instruction stream", req=True),
        _c(PCORE_IDX, _I64, "physical NeuronCore within the logical core (0 or 1 with LNC2)"),
        _c(TIMELINE_TRACK, _DICT, "UI row, e.g. TensorMatrix for MultiplyMoving, Tensor for LoadStationary"),
        _c(EVT_WAIT_TIME_NS, _I64, "time from ready-to-issue until its semaphore waits were met", unit="ns"),
        _c(HLO_NAME, _DICT, "operator (HLO instruction) this instruction belongs to"),
        _c(LAYER, _DICT, "framework layer this instruction belongs to"),
        _c(NKI_SOURCE_LOCATION, _DICT, "kernel source line, file.py:LINE"),
        _c("hbm_read_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("hbm_write_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("sbuf_read_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("sbuf_write_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("psum_read_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("psum_write_bytes", _I64, _BYTES_DOC, unit="B"),
        _c("spill_save_bytes", _I64, "SBUF spill written to HBM", unit="B"),
        _c("spill_reload_bytes", _I64, "SBUF spill read back from HBM", unit="B"),
        _c(RAW_FLOPS, _I64, "floating-point operations, one MAC = 2 FLOPs", unit="FLOP"),
        _c(ADJUSTED_FLOPS, _I64, "BF16-equivalent FLOPs (FP32 x4, FP8 x0.5 on Trn2)", unit="FLOP"),
        _c(TENSOR_INSTRUCTION_TYPE, _DICT, "Tensor engine only: REGULAR or TRANSPOSE"),
        _c(SCALAR_ACTIVATION_FN, _DICT, "Scalar engine only: activation function, e.g. EXP, COPY"),
        _c(PERFORMANCE_MODE, _DICT, "Vector/Scalar performance mode (2x, 4x), or double_row (FP8 matmul), when used"),
    ),
)

DMA_PACKET = TableSpec(
    name="DmaPacket",
    kind="interval",
    doc="One row per DMA packet: part of a tensor moving between HBM, SBUF and PSUM on one DMA queue.",
    columns=(
        *_interval_columns(),
        _c(QUEUE_NAME, _DICT, "DMA queue, e.g. qSyncIO0", req=True),
        _c(QUEUE_IDX, _I64, "queue index within its core"),
        _c(QUEUE_TYPE, _DICT, "DmaQueueType: instruction, input, output, data, software_dynamic, ..."),
        _c(ENGINE_IDX, _I64, "DMA engine (ring) index"),
        _c(READ_BYTES, _I64, "bytes read from the source", req=True, unit="B"),
        _c(WRITE_BYTES, _I64, "bytes written to the destination", req=True, unit="B"),
        _c(TRANSFER_BYTES, _I64, "bytes transferred", req=True, unit="B"),
        _c(THROUGHPUT, _F32, "transfer_bytes / duration", unit="B/s"),
        _c(VARIABLE, _DICT, "tensor the packet belongs to"),
        _c(PCORE_IDX, _I64, "physical NeuronCore"),
        _c("packet_idx", _I32, "packet index within its DMA descriptor"),
        _c("packet_aggregation_id", _I64, "id of the DMA transfer (descriptor) this packet is part of"),
        _c("source", _DICT, "source memory: HBM, SBUF or PSUM (from Neuron's DmaPacketAggregated)"),
        _c("dest", _DICT, "destination memory: HBM, SBUF or PSUM (from Neuron's DmaPacketAggregated)"),
    ),
)

SEMAPHORE_UPDATE = TableSpec(
    name="SemaphoreUpdate",
    kind="event",
    doc="One row per semaphore or event update.",
    columns=(
        _c(TIMESTAMP, _I64, "time of the update", req=True, unit="ns"),
        _c(ID, _DICT, "semaphore name, e.g. S[5] or qSyncIO0", req=True),
        _c(VALUE, _I32, "value after the update", req=True),
        _c("update_source", _DICT, "who updated it: Tensor, Vector, Scalar, GpSimd, Sync or AXI (DMA)"),
        _c("update_operation_type", _DICT, "none, sem_inc, sem_dec, sem_add_imm, sem_sub_imm, sem_wr_imm, ..."),
        _c("update_trigger_timing", _DICT, "read (when inputs start being read) or complete"),
        _c(PCORE_IDX, _I64, "physical NeuronCore"),
    ),
)

FLOW = TableSpec(
    name="Flow",
    kind="edge",
    doc=(
        "Dependency edges: the row out_id (in out_table) had to finish before in_id (in in_table) could start. "
        "As in Perfetto's flow table, 'out' is the predecessor and 'in' the dependent."
    ),
    columns=(
        _c(IN_ID, _I64, "id of the dependent row", req=True),
        _c(OUT_ID, _I64, "id of the predecessor row", req=True),
        _c(IN_TABLE, _DICT, "table of the dependent row: Instruction, DmaPacket or Span", req=True),
        _c(OUT_TABLE, _DICT, "table of the predecessor row", req=True),
        _c(DEPENDENCY_TYPE, _DICT, "flow (read-after-write), anti (write-after-read) or output (write-after-write)",
           req=True),
        _c(GAP_TIME, _I64, "dependent start minus predecessor end", unit="ns"),
    ),
)

METADATA = TableSpec(
    name=trace_dir.METADATA_TABLE,
    kind="meta",
    doc="One row describing the recording: versions, hardware parameters, time range.",
    columns=(
        _c("profile_schema_version", _STR, "Neuron profile schema whose names this trace follows", req=True),
        _c("trace_format_version", _STR, "trnprof trace format version, MAJOR.MINOR", req=True),
        _c("tool_version", _STR, "version of the program that wrote the trace", req=True),
        _c("is_simulation", _BOOL, "true when written by a simulator, not measured on hardware", req=True),
        _c("recording_complete", _BOOL, "false until the writer finished cleanly", req=True),
        _c("arch", _STR, "NeuronCore architecture preset, e.g. trn1 (NeuronCore-v2), trn2 (NeuronCore-v3)"),
        _c("instance_type", _STR, "EC2 instance type, e.g. trn1.2xlarge"),
        _c("profile_name", _STR, "name of the profile, e.g. the kernel name"),
        _c("kernel_params", _STR, "JSON object of the kernel's parameters"),
        _c(COST_MODEL, _STR, "JSON object of the simulator's cost-model constants"),
        _c("num_physical_cores", _I32, "physical NeuronCores in the trace"),
        _c("first_hw_timestamp", _I64, "earliest timestamp in the trace", unit="ns"),
        _c("last_hw_timestamp", _I64, "latest timestamp in the trace", unit="ns"),
        _c("dma_ddr_bandwidth", _F32, "peak DMA bandwidth of one physical core (all 16 queues)", unit="B/s"),
        _c("hbm_ddr_bandwidth", _F32, "peak bandwidth of one HBM stack", unit="B/s"),
        _c("num_dma_engines_per_neuroncore", _I32, "DMA engines (queues) per core"),
        _c("tensor_engine_num_rows", _I32, "PE array rows"),
        _c("tensor_engine_num_cols", _I32, "PE array columns"),
        _c("tensor_engine_clock_freq", _F32, "Tensor engine clock", unit="GHz"),
        _c("vector_engine_clock_freq", _F32, "Vector engine clock", unit="GHz"),
        _c("scalar_engine_clock_freq", _F32, "Scalar engine clock", unit="GHz"),
        _c("gpsimd_engine_clock_freq", _F32, "GpSimd engine clock", unit="GHz"),
        _c("neuroncore_clock_freq", _F32, "base NeuronCore clock", unit="GHz"),
        _c("vector_engine_num_channels", _I32, "Vector engine lanes"),
        _c("scalar_engine_num_channels", _I32, "Scalar engine lanes"),
        _c("gpsimd_engine_num_channels", _I32, "GpSimd engine lanes"),
        _c("ticks_per_nanosec", _I64, "hardware clock ticks per ns"),
        _c(TABLE_ROWS, _STR, "JSON object: the rows of each table file the writer wrote, set when it finished"),
        _c(HBM_TENSORS, _STR, "JSON object: each HBM tensor's kind as the kernel declared it (input, output, "
                              "scratch), set when the recording finished (simulator)"),
    ),
)

SPAN = TableSpec(
    name="Span",
    kind="interval",
    neuron=False,
    doc=(
        "Framework-level ranges (layer, operator, kernel call) and host-side slices from imported traces. "
        "track_group and track_name place a span on a timeline row (process and thread for Chrome traces)."
    ),
    columns=(
        *_interval_columns(),
        _c(NAME, _DICT, "span name, e.g. mlp.up_proj or aten::matmul", req=True),
        _c(CATEGORY, _DICT, "kind of span: layer, operator, kernel, or the Chrome 'cat' field"),
        _c(DEPTH, _I32, "nesting depth on its row, 0 = outermost; spans of one row and depth do not overlap (a "
           "recording puts its pipelined layers and operators on lanes: depth 1, 2, ... of their row)"),
        _c(PARENT_ID, _I64, "id of the enclosing span"),
        _c(TRACK_GROUP, _DICT, "row group, e.g. 'NeuronCore 0' or a process"),
        _c(TRACK_NAME, _DICT, "row, e.g. 'operator' or a thread"),
        _c(PCORE_IDX, _I64, "physical NeuronCore, when the span belongs to one"),
        _c(ARGS, _STR, "JSON object of further fields"),
        _c(TRACK_ORDER, _I64, "display position of the span's row among an imported trace's rows (from Chrome "
           "process/thread sort_index metadata), lower first"),
    ),
)

COUNTER = TableSpec(
    name="Counter",
    kind="event",
    neuron=False,
    doc="Samples of time series (SBUF usage, HBM bandwidth, ...): the value holds from its timestamp until the "
    "next sample of the same counter.",
    columns=(
        _c(TIMESTAMP, _I64, "sample time", req=True, unit="ns"),
        _c(NAME, _DICT, "counter name, e.g. sbuf_usage_bytes", req=True),
        _c(VALUE, _F64, "sample value", req=True),
        _c(UNIT, _DICT, "unit of the value, e.g. B, B/s, %"),
        _c(TRACK_GROUP, _DICT, "row group, e.g. 'NeuronCore 0' or a process"),
        _c(PCORE_IDX, _I64, "physical NeuronCore, when the counter belongs to one"),
    ),
)

DMA_QUEUES_INFO = TableSpec(
    name="DmaQueuesInfo",
    kind="lookup",
    doc="One row per DMA queue of a core.",
    columns=(
        _c(NAME, _STR, "queue name, e.g. qSyncIO0", req=True),
        _c("type", _STR, "DmaQueueType"),
        _c(PCORE_IDX, _I64, "physical NeuronCore"),
        _c("idx", _I64, "queue index"),
        _c(ENGINE_IDX, _I64, "DMA engine index"),
    ),
)

SOURCE_FILE = TableSpec(
    name="SourceFile",
    kind="lookup",
    neuron=False,
    doc=(
        "The text of the kernel source files the trace's nki_source_location values point into, as they were "
        "when recorded (format 2.1): one row per file. A simulator writes the kernel's own file when the "
        "recording starts and the other files its instructions came from when it ends."
    ),
    columns=(
        _c(SOURCE_FILE_NAME, _STR, "file name as nki_source_location spells it (file.py of file.py:LINE)",
           req=True),
        _c(SOURCE_TEXT, _STR, "the file's text, decoded as UTF-8 (undecodable bytes replaced)", req=True),
        _c(SOURCE_SIZE_BYTES, _I64, "size of the file when read", unit="B"),
    ),
)

DMA_TRANSFER = TableSpec(
    name="DmaTransfer",
    kind="storage",
    neuron=False,
    doc=(
        "How a simulator stores DmaPacket compactly (format 2.0): one row per DMA transfer (descriptor); its "
        "packets follow from DmaPacketLayout. Packet j (0 <= j < the layout's packets) of a transfer has id "
        "first_packet_id + j and runs on the layout row's queue from queue_start_ts[queue] (or the only value) "
        "plus the row's offset_ns, plus the split_delay_ns of every split_packet of its queue at or before j, "
        "and, when queue_start_ts holds one value, of every split_packet of another queue at or before j's "
        "place in its own queue (its k-th packet for the other's k-th: format 2.5). TraceReader reads it as "
        "DmaPacket rows; query DmaPacket, not this table."
    ),
    columns=(
        _c("packet_aggregation_id", _I64, "id of the transfer (DmaPacket.packet_aggregation_id)", req=True),
        _c("first_packet_id", _I64, "DmaPacket.id of the transfer's packet 0; its packets are numbered on", req=True),
        _c("packet_layout", _I32, "DmaPacketLayout.packet_layout of its packets", req=True),
        _c("rotation", _I32, "DmaPacketLayout.rotation: the queue of its packet 0", req=True),
        _c("queue_start_ts", pa.list_(_I64),
           "time each queue started its share, by queue index; one value when all queues started together",
           req=True, unit="ns"),
        _c("queue_group", _DICT, "queue name prefix, e.g. qSyncIO; a packet's queue_name is this + its queue index",
           req=True),
        _c("split_packet", pa.list_(_I32),
           "packets (indices within the transfer) that waited for their engine: each, and the later packets of its "
           "queue, start split_delay_ns later than back to back after the packet before it; with one "
           "queue_start_ts value, so do the packets in the same place and after it in every queue (null or "
           "empty: none)"),
        _c("split_delay_ns", pa.list_(_I64), "how long each split_packet waited, in the same order", unit="ns"),
        _c(QUEUE_TYPE, _DICT, "DmaQueueType of its queues"),
        _c(VARIABLE, _DICT, "tensor the transfer moves"),
        _c(PCORE_IDX, _I64, "physical NeuronCore"),
        _c("source", _DICT, "source memory: HBM, SBUF or PSUM"),
        _c("dest", _DICT, "destination memory: HBM, SBUF or PSUM"),
    ),
)

DMA_PACKET_LAYOUT = TableSpec(
    name="DmaPacketLayout",
    kind="storage",
    neuron=False,
    doc=(
        "The packets of a DmaTransfer, per packet layout and rotation: one row per packet, in packet order "
        "(format 2.0). Written before the first transfer that uses the layout."
    ),
    columns=(
        _c("packet_layout", _I32, "layout id", req=True),
        _c("rotation", _I32, "queue of packet 0", req=True),
        _c("packet", _I32, "packet index within the transfer (its id is first_packet_id + packet)", req=True),
        _c(QUEUE_IDX, _I32, "queue (and DMA engine) the packet runs on", req=True),
        _c("offset_ns", _I64, "start of the packet after its queue's queue_start_ts", req=True, unit="ns"),
        _c(DURATION_NS, _I64, "duration of the packet", req=True, unit="ns"),
        _c(TRANSFER_BYTES, _I64, "bytes the packet moves (read, written and transferred)", req=True, unit="B"),
        _c("packet_idx", _I32, "DmaPacket.packet_idx: packet index within its partition row's descriptor", req=True),
    ),
)

#: Tables a trace may store instead of a logical table: TraceReader reads them as that table.
STORAGE_TABLES: tuple[TableSpec, ...] = (DMA_TRANSFER, DMA_PACKET_LAYOUT)
#: The logical table each storage table stands for.
STORED_AS: Mapping[str, tuple[str, ...]] = {DMA_PACKET.name: (DMA_TRANSFER.name, DMA_PACKET_LAYOUT.name)}

#: Every table of the trace format, in the order they are documented and written.
TABLES: tuple[TableSpec, ...] = (
    INSTRUCTION,
    DMA_PACKET,
    SEMAPHORE_UPDATE,
    FLOW,
    METADATA,
    SPAN,
    COUNTER,
    DMA_QUEUES_INFO,
    SOURCE_FILE,
)
TABLES_BY_NAME: Mapping[str, TableSpec] = {t.name: t for t in TABLES}
_ALL_SPECS: Mapping[str, TableSpec] = {t.name: t for t in (*TABLES, *STORAGE_TABLES)}


def table_spec(name: str) -> TableSpec:
    """The spec of trace table ``name`` (a logical or a storage table); TraceFormatError listing the known tables
    otherwise."""
    spec = _ALL_SPECS.get(name) if isinstance(name, str) else None
    if spec is None:
        known = ", ".join(TABLES_BY_NAME)
        raise TraceFormatError(f"unknown trace table {str(name)[:60]!r} (known tables: {known})")
    return spec


def iter_columns() -> Iterator[tuple[TableSpec, Column]]:
    """Every (table, column) pair of the trace format."""
    for spec in TABLES:
        for col in spec.columns:
            yield spec, col


def parse_format_version(text: str) -> tuple[int, int]:
    """``"1.2"`` -> ``(1, 2)``; ValueError on anything else."""
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def check_format_version(text: str, where: str) -> None:
    """Raise TraceFormatError when ``text`` is not a format version this reader understands."""
    try:
        major, _minor = parse_format_version(text)
    except ValueError:
        raise TraceFormatError(f"{where}: unreadable trace format version {text!r}") from None
    if major > TRACE_FORMAT_MAJOR:
        raise TraceFormatError(
            f"{where}: written in trace format {text}, newer than this trnprof reads "
            f"({TRACE_FORMAT_VERSION}); upgrade trnprof"
        )
    if major not in READABLE_MAJORS:
        raise TraceFormatError(
            f"{where}: written in old trace format {text}; this trnprof reads {TRACE_FORMAT_VERSION}, "
            "re-record the trace"
        )
