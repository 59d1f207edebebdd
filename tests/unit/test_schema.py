"""The schema module: specs are consistent, Neuron names are kept, versions are checked."""

import pyarrow as pa
import pytest

from tracer import schema
from tracer.errors import TraceFormatError


def test_every_table_has_unique_columns_and_a_doc():
    for spec in schema.TABLES:
        assert spec.doc
        assert len(set(spec.names)) == len(spec.names)
        for col in spec.columns:
            assert col.doc, f"{spec.name}.{col.name} lacks a description"


def test_interval_tables_share_timing_columns():
    for spec in schema.TABLES:
        if spec.kind == "interval":
            for name in (schema.ID, schema.START_TS, schema.END_TS, schema.DURATION_NS):
                col = spec.column(name)
                assert col.required and col.type == pa.int64()


def test_neuron_explorer_names_are_kept():
    ins = schema.INSTRUCTION
    for name in ("start_ts", "end_ts", "duration_ns", "engine", "opcode", "operands", "pc", "evt_wait_time_ns",
                 "hlo_name", "nki_source_location", "hbm_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
                 "raw_flops", "adjusted_flops", "tensor_instruction_type"):
        assert name in ins
    dma = schema.DMA_PACKET
    for name in ("queue_name", "queue_idx", "queue_type", "engine_idx", "read_bytes", "write_bytes",
                 "transfer_bytes", "throughput", "variable", "pcore_idx"):
        assert name in dma
    assert {"in_id", "out_id", "in_table", "out_table", "dependency_type", "gap_time"} <= set(schema.FLOW.names)
    for name in ("profile_schema_version", "tensor_engine_num_rows", "dma_ddr_bandwidth", "is_simulation",
                 "tensor_engine_clock_freq", "trace_format_version", "tool_version"):
        assert name in schema.METADATA


def test_arrow_schema_is_tagged():
    s = schema.INSTRUCTION.arrow_schema()
    assert s.metadata[schema.META_KEY_TABLE] == b"Instruction"
    assert s.metadata[schema.META_KEY_FORMAT_VERSION] == schema.TRACE_FORMAT_VERSION.encode()
    assert not s.field("start_ts").nullable
    assert s.field("hlo_name").nullable


def test_unknown_table_names_the_known_ones():
    with pytest.raises(TraceFormatError, match="Instruction"):
        schema.table_spec("Instructions")
    with pytest.raises(KeyError, match="Instruction has no column 'foo'"):
        schema.INSTRUCTION.column("foo")


@pytest.mark.parametrize("text", ["3.0", "17.3"])
def test_newer_major_version_is_refused(text):
    with pytest.raises(TraceFormatError, match="upgrade trnprof"):
        schema.check_format_version(text, "x")


def test_same_major_newer_minor_is_accepted():
    schema.check_format_version(f"{schema.TRACE_FORMAT_MAJOR}.99", "x")
    schema.check_format_version("1.0", "x")  # format 1 (DmaPacket stored row by row) is still read
    with pytest.raises(TraceFormatError, match="re-record"):
        schema.check_format_version("0.9", "x")
    with pytest.raises(TraceFormatError, match="unreadable"):
        schema.check_format_version("banana", "x")
