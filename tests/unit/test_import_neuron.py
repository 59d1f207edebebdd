"""Neuron Explorer Parquet directories and legacy neuron-profile JSON files, built from the documented fields."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from profiler.importers.common import TraceImportWarning
from profiler.importers.neuron_json import NeuronJsonSource
from profiler.importers.neuron_parquet import NeuronParquetSource
from profiler.sources import open_source
from tracer import schema
from tracer.errors import TraceFormatError

# Field lists of profile schema 7.4.0 (neuron-profiler.md section 1.3), a representative subset with types.
METADATA_74 = {"profile_schema_version": ["7.4.0"], "ntff_version": pa.array([3], pa.int32()),
               "num_physical_cores": pa.array([2], pa.int32()), "vnc_enabled": [True],
               "first_hw_timestamp": [100], "last_hw_timestamp": [900], "first_ts": ["1700000000"],
               "last_ts": ["1700000001"], "dma_ddr_bandwidth": pa.array([4.35e11], pa.float32()),
               "num_dma_engines_per_neuroncore": pa.array([16], pa.int32()),
               "hbm_ddr_bandwidth": pa.array([7.0e11], pa.float32()),
               "tensor_engine_num_rows": pa.array([128], pa.int32()),
               "tensor_engine_clock_freq": pa.array([2.4], pa.float32()), "ticks_per_nanosec": [1],
               "explorer_version": ["2.31.0"], "instance_type": ["trn2.48xlarge"]}


def instruction_part(ids: list[int], engine: list[str]) -> pa.Table:
    n = len(ids)
    return pa.table({
        "start_ts": [100 + 10 * i for i in ids], "end_ts": [105 + 10 * i for i in ids],
        "duration_ns": [5] * n, "engine": engine, "timeline_track": ["TensorMatrix"] * n,
        "pcore_idx": [0] * n, "opcode": ["MATMUL"] * n, "operands": ["S[5] (Tensor)++@complete"] * n,
        "compiler_opcode": ["MATMUL"] * n, "id": ids, "pc": ids, "bir_id": [f"sg0000:{i}" for i in ids],
        "hlo_name": ["dot.1"] * n, "nki_source_location": ["k.py:42"] * n, "raw_flops": [2 * 128 * 128] * n,
        "performance_mode": pa.array([None] * n, pa.string()), "crc_in": pa.array([7] * n, pa.int32()),
    })


@pytest.fixture
def neuron_dir(tmp_path) -> Path:
    d = tmp_path / "profile@latest"
    d.mkdir()
    pq.write_table(pa.table(METADATA_74), d / "Metadata.parquet")
    pq.write_table(instruction_part([0, 1, 2], ["tensor", "Tensor", "pool"]), d / "Instruction_0.parquet")
    pq.write_table(instruction_part([3, 4], ["act", "sp"]), d / "Instruction_1.parquet")
    pq.write_table(pa.table({
        "start_ts": [120], "end_ts": [180], "duration_ns": [60], "pcore_idx": [0], "id": [7],
        "packet_idx": pa.array([0], pa.int32()), "packet_aggregation_id": [1], "engine_idx": [3],
        "read_bytes": [2048], "write_bytes": [2048], "transfer_bytes": [2048],
        "throughput": pa.array([3.4e10], pa.float32()), "crc": [11], "queue_type": ["input"], "variable": ["x"],
        "queue_idx": [4]}), d / "DmaPacket.parquet")   # queue_name is optional in Neuron's schema
    pq.write_table(pa.table({"timestamp": [150], "id": ["S[5]"], "value": pa.array([1], pa.int32()),
                             "update_source": ["tensor"], "update_mode": pa.array([1], pa.int32())}),
                   d / "SemaphoreUpdate.parquet")
    pq.write_table(pa.table({"in_id": [1], "out_id": [0], "in_table": ["Instruction"], "out_table": ["Instruction"],
                             "dependency_type": ["flow"], "gap_time": [5]}), d / "Flow.parquet")
    pq.write_table(pa.table({"start_ts": [100], "end_ts": [140], "engine": ["tensor"], "pcore_idx": [0],
                             "duration_ns": [40]}), d / "ActiveTime.parquet")
    pq.write_table(pa.table({"total_time": [8e-7], "event_count": [6]}), d / "Summary.parquet")
    pq.write_table(pa.table({"table_name": ["Instruction", "Instruction"], "field_name": ["bir_id", "crc_out"],
                             "field_required": [True, True]}), d / "SchemaFields.parquet")
    return d


def read_all(source) -> dict[str, pa.Table]:
    batches: dict[str, list[pa.RecordBatch]] = {}
    for name, batch in source.read():
        batches.setdefault(name, []).append(batch)
    return {name: pa.Table.from_batches(b) for name, b in batches.items()}


def test_neuron_parquet_directory_is_detected_and_read(neuron_dir):
    src = open_source(neuron_dir)
    assert isinstance(src, NeuronParquetSource) and src.format_name == "neuron-parquet"
    assert len(src.input_files()) == 9 and src.input_size() > 0
    with pytest.warns(TraceImportWarning, match="crc_out"):   # SchemaFields says required, file lacks it
        t = read_all(src)
    inst = t["Instruction"]
    assert inst.column("id").to_pylist() == [0, 1, 2, 3, 4]            # both split parts, in order
    assert inst.column("engine").to_pylist() == ["Tensor", "Tensor", "GpSimd", "Scalar", "Sync"]
    assert inst.schema.field("engine").type == schema.INSTRUCTION.column("engine").type
    for extra in ("bir_id", "compiler_opcode", "crc_in"):                # unknown columns kept
        assert extra in inst.schema.names
    assert inst.column("crc_in").type == pa.int32()
    dma = t["DmaPacket"].to_pylist()[0]
    assert dma["queue_name"] == "input4" and dma["crc"] == 11
    assert t["SemaphoreUpdate"].column("update_source").to_pylist() == ["Tensor"]
    assert t["ActiveTime"].column("engine").to_pylist() == ["Tensor"]   # normalised in kept tables too
    assert t["Summary"].to_pylist() == [{"total_time": 8e-7, "event_count": 6}]
    assert "SchemaFields" in t
    meta = t["Metadata"].to_pylist()[0]
    assert meta["profile_schema_version"] == "7.4.0" and meta["recording_complete"] is True
    assert meta["num_physical_cores"] == 2 and meta["explorer_version"] == "2.31.0"
    assert meta["vnc_enabled"] is True and meta["instance_type"] == "trn2.48xlarge"


def test_unknown_schema_version_is_read_with_a_warning(neuron_dir):
    pq.write_table(pa.table({**METADATA_74, "profile_schema_version": ["31.0.0"]}), neuron_dir / "Metadata.parquet")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = read_all(NeuronParquetSource(neuron_dir))
    assert any("'31.0.0' is not one trnprof knows" in str(w.message) for w in caught)
    assert t["Instruction"].num_rows == 5


def test_missing_required_column_names_file_and_column(neuron_dir):
    pq.write_table(instruction_part([5], ["tensor"]).drop(["opcode"]), neuron_dir / "Instruction_2.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceImportWarning)
        with pytest.raises(TraceFormatError, match=r"Instruction_2\.parquet: required column 'opcode' is missing"):
            read_all(NeuronParquetSource(neuron_dir))


def test_wrong_column_type_is_a_clear_error(neuron_dir):
    bad = instruction_part([5], ["tensor"]).set_column(0, "start_ts", pa.array(["yesterday"]))
    pq.write_table(bad, neuron_dir / "Instruction_2.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceImportWarning)
        with pytest.raises(TraceFormatError, match=r"Instruction_2\.parquet: column 'start_ts' cannot be read"):
            read_all(NeuronParquetSource(neuron_dir))


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_parquet_fails_before_any_row(neuron_dir, damage):
    f = neuron_dir / "Instruction_1.parquet"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"PAR1" + b"\x00" * 64)
    src = NeuronParquetSource(neuron_dir)
    with pytest.raises(TraceFormatError, match=r"Instruction_1\.parquet: .*re-export"):
        next(iter(src.read()))


def test_a_directory_without_neuron_tables_is_not_detected(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "random.parquet")
    with pytest.raises(TraceFormatError, match="not a recognised trace"):
        open_source(tmp_path)


def test_legacy_json_instructions_and_summary(tmp_path):
    doc = {"summary": [{"total_time": 0.25, "event_count": 4}], "instruction": [
        {"timestamp": 2000, "duration": 50, "label": "TensorMatrix", "opcode": "MATMUL",
         "operands": "S[5] (Tensor)++@complete acc_flags=3", "hlo_name": "dot.1", "nki_source_location": "k.py:3"},
        {"timestamp": 1000, "duration": 20, "label": "TensorE", "opcode": "LDWEIGHTS", "operands": ""},
        {"timestamp": 1500, "duration": 10, "label": "qSyncIO0", "opcode": "DMA", "bytes": 4096},
        {"timestamp": 1200, "duration": -3, "label": "VectorE", "opcode": "TENSOR_TENSOR", "pc": 9},
        {"duration": 5, "label": "Vector", "opcode": "NOP"},
    ]}
    path = tmp_path / "profile.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    src = open_source(path)
    assert isinstance(src, NeuronJsonSource)
    with pytest.warns(TraceImportWarning, match="skipped 1 instructions"):
        t = read_all(src)
    rows = t["Instruction"].to_pylist()
    assert [r["opcode"] for r in rows] == ["MATMUL", "LDWEIGHTS", "DMA", "TENSOR_TENSOR"]
    assert [r["engine"] for r in rows] == ["Tensor", "Tensor", "qSyncIO0", "Vector"]
    assert [r["timeline_track"] for r in rows] == ["TensorMatrix", "TensorE", "qSyncIO0", "VectorE"]
    assert [r["pc"] for r in rows] == [1, 0, 0, 0]                 # order of start within each engine
    assert rows[0]["end_ts"] == 2050 and rows[3]["duration_ns"] == 0
    assert rows[0]["nki_source_location"] == "k.py:3" and rows[0]["hlo_name"] == "dot.1"
    assert rows[2]["bytes"] == "4096" and rows[3]["json_pc"] == "9"   # unmodelled fields kept
    assert t["Summary"].to_pylist() == [{"total_time": 0.25, "event_count": 4}]
    meta = t["Metadata"].to_pylist()[0]
    assert (meta["first_hw_timestamp"], meta["last_hw_timestamp"]) == (1000, 2050)


def test_legacy_json_with_summary_after_instructions_and_truncation(tmp_path):
    body = json.dumps({"instruction": [{"timestamp": i, "duration": 1, "label": "Vector", "opcode": "X"}
                                       for i in range(50)], "summary": [{"total_time": 1.0}]})
    path = tmp_path / "p.json"
    path.write_text(body)
    t = read_all(NeuronJsonSource(path, block_bytes=300))
    assert t["Instruction"].num_rows == 50 and t["Summary"].to_pylist() == [{"total_time": 1.0}]
    path.write_text(body[: body.index('"timestamp": 30')])
    with pytest.warns(Warning, match="ends inside instruction 30"):
        t = read_all(NeuronJsonSource(path, block_bytes=300))
    assert t["Instruction"].num_rows == 30 and t["Metadata"].to_pylist()[0]["recording_complete"] is False
