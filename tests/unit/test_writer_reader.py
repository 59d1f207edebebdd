"""TraceWriter and TraceReader: round trips, validation, refusal to overwrite, and every kind of bad file."""

import os
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyarrow import ipc

from tests.conftest import check_instruction_rows, instruction_columns
from tracer import TraceReader, TraceWriter, read_trace, schema, write_trace
from tracer.errors import TraceExistsError, TraceFormatError, TruncatedTraceWarning


def test_round_trip_keeps_every_value(small_trace):
    reader = TraceReader(small_trace)
    table = reader.read_table("Instruction")
    assert table.num_rows == 1000
    check_instruction_rows(table)
    assert reader.recording_complete
    assert reader.metadata["arch"] == "trn2"
    assert reader.metadata["is_simulation"] is True
    assert reader.metadata["trace_format_version"] == schema.TRACE_FORMAT_VERSION
    assert reader.metadata["first_hw_timestamp"] == 0
    assert reader.metadata["last_hw_timestamp"] == 999 * 10 + (999 % 7) + 1
    # 1000 rows in batches of at most 128 rows
    assert sum(1 for _ in reader.batches("Instruction")) == 8


def test_dictionary_codes_are_stable_across_batches(tmp_path):
    path = tmp_path / "t"
    with TraceWriter(path, batch_rows=4, background_flush=False) as w:
        w.append("Instruction", instruction_columns(4, 0))
        w.append("Instruction", instruction_columns(9, 4))
    table = TraceReader(path).read_table("Instruction")
    chunks = table.column("opcode").chunks
    assert len(chunks) == 4
    # every later dictionary extends the earlier one, so a code means the same string in every batch
    first = chunks[0].dictionary.to_pylist()
    for chunk in chunks[1:]:
        assert chunk.dictionary.to_pylist()[: len(first)] == first
    check_instruction_rows(table)


def test_dictionary_array_input_is_remapped(tmp_path):
    path = tmp_path / "t"
    cols = instruction_columns(3)
    cols["engine"] = pa.DictionaryArray.from_arrays(pa.array([1, 0, 1], pa.int32()), pa.array(["Vector", "Tensor"]))
    cols["hlo_name"] = pa.array(["a", None, "b"])
    write_trace(path, {"Instruction": cols})
    t = TraceReader(path).read_table("Instruction")
    assert t.column("engine").to_pylist() == ["Tensor", "Vector", "Tensor"]
    assert t.column("hlo_name").to_pylist() == ["a", None, "b"]
    assert t.column("layer").null_count == 3  # optional column not given -> nulls


def test_a_dictionary_sent_again_is_mapped_once_and_any_other_afresh(tmp_path, monkeypatch):
    """A producer that sends the same dictionary array with every batch (the simulator's emitter) has it mapped to
    the file's dictionary once; another dictionary of the same length, even one made after the first was dropped,
    is mapped on its own values."""
    from tracer import writer as writer_module

    mapped = []
    real = writer_module._DictionaryState._map
    monkeypatch.setattr(writer_module._DictionaryState, "_map",
                        lambda self, d: (mapped.append(d.to_pylist()), real(self, d))[1])
    engines = pa.array(["Vector", "Tensor"])
    batches = [(engines, [1, 0, 1]), (engines, [0, 0, 0]), (pa.array(["Sync", "Vector"]), [0, 1, 0]),
               (engines, [1, 1, 1])]
    opcodes = pa.array(["Nop"])
    path = tmp_path / "t"
    with TraceWriter(path, background_flush=False) as w:
        for i, (values, codes) in enumerate(batches):
            cols = instruction_columns(3, 3 * i)
            cols["engine"] = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), values)
            cols["opcode"] = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), opcodes)
            w.append("Instruction", cols)
        engines = None  # dropped: a new array may get its buffers
        cols = instruction_columns(3, 12)
        cols["engine"] = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["Scalar", "Tensor"]))
        cols["opcode"] = pa.DictionaryArray.from_arrays(pa.array([0, 0, 0], pa.int32()), opcodes)
        w.append("Instruction", cols)
    assert mapped == [["Vector", "Tensor"], ["Nop"], ["Sync", "Vector"], ["Scalar", "Tensor"]]
    got = TraceReader(path).read_table("Instruction").column("engine").to_pylist()
    assert got == ["Tensor", "Vector", "Tensor"] + ["Vector"] * 3 + ["Sync", "Vector", "Sync"] + ["Tensor"] * 3 + \
        ["Scalar", "Tensor", "Tensor"]


def test_absent_table_reads_as_empty_with_schema(small_trace):
    t = TraceReader(small_trace).read_table("DmaPacket")
    assert t.num_rows == 0
    assert t.schema.names == list(schema.DMA_PACKET.names)


def test_append_rows_and_event_tables(tmp_path):
    path = tmp_path / "t"
    with TraceWriter(path) as w:
        w.append_rows("SemaphoreUpdate", [
            {"timestamp": 5, "id": "S[1]", "value": 1, "update_source": "Tensor"},
            {"timestamp": 9, "id": "S[1]", "value": 0},
        ])
        w.append_rows("Flow", [{"in_id": 2, "out_id": 1, "in_table": "Instruction", "out_table": "DmaPacket",
                                "dependency_type": "flow", "gap_time": 30}])
    tables = read_trace(path)
    assert tables["SemaphoreUpdate"].column("update_source").to_pylist() == ["Tensor", None]
    assert tables["Flow"].column("gap_time").to_pylist() == [30]
    assert TraceReader(path).metadata["first_hw_timestamp"] == 5


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"id": [1]}, "missing required column"),
        ({**instruction_columns(1), "bogus": [1]}, "no column"),
        ({**instruction_columns(2), "pc": [1]}, "has 1 rows, expected 2"),
        ({**instruction_columns(1), "start_ts": ["soon"]}, "cannot store values as int64"),
        ({**instruction_columns(1), "opcode": [None]}, "required column holds 1 null"),
        ({**instruction_columns(2), "engine": np.array([0, 1])}, "Instruction.engine: cannot store .*expected strings"),
    ],
)
def test_bad_rows_are_refused_with_the_column_named(tmp_path, columns, message):
    with TraceWriter(tmp_path / "t", background_flush=False) as w, pytest.raises(TraceFormatError, match=message):
        w.append("Instruction", columns)


def test_unknown_metadata_field_is_refused(tmp_path):
    with pytest.raises(TraceFormatError, match="no field 'colour'"):
        TraceWriter(tmp_path / "t", metadata={"colour": "red"})


def test_refuses_to_overwrite_unless_asked(small_trace):
    with pytest.raises(TraceExistsError, match="--force"):
        TraceWriter(small_trace)
    # the refused attempt changed nothing
    check_instruction_rows(TraceReader(small_trace).read_table("Instruction"))
    with TraceWriter(small_trace, overwrite=True) as w:
        w.append("Instruction", instruction_columns(5))
    assert TraceReader(small_trace).num_rows("Instruction") == 5


def test_refuses_non_empty_foreign_directory_and_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(TraceExistsError, match="not empty"):
        TraceWriter(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(TraceExistsError, match="not a directory"):
        TraceWriter(f)


def test_exception_in_body_keeps_rows_and_marks_incomplete(tmp_path):
    path = tmp_path / "t"
    with pytest.raises(RuntimeError), TraceWriter(path, background_flush=False) as w:
        w.append("Instruction", instruction_columns(10))
        raise RuntimeError("kernel crashed")
    reader = TraceReader(path)
    assert reader.num_rows("Instruction") == 10
    assert reader.recording_complete is False


def test_rows_are_on_disk_within_the_flush_interval_while_recording(tmp_path):
    path = tmp_path / "t"
    w = TraceWriter(path, flush_interval_s=0.2, batch_rows=1_000_000)
    try:
        w.append("Instruction", instruction_columns(10))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (path / "Instruction.arrows").exists():
            time.sleep(0.05)
        time.sleep(0.3)
        # readable while the writer is still open: the stream has no end marker yet
        assert TraceReader(path).num_rows("Instruction") == 10
        assert TraceReader(path).recording_complete is False
    finally:
        w.close()
    assert TraceReader(path).recording_complete


def test_memory_stays_bounded_by_batch_rows(tmp_path):
    with TraceWriter(tmp_path / "t", batch_rows=100, background_flush=False) as w:
        for first in range(0, 5000, 30):
            w.append("Instruction", instruction_columns(30, first))
            assert w._sinks["Instruction"].pending_rows < 100


def test_flush_one_table_or_only_big_buffers(tmp_path):
    path = tmp_path / "t"
    with TraceWriter(path, batch_rows=1_000_000, background_flush=False) as w:
        w.append("Instruction", instruction_columns(50))
        w.append("Counter", {"timestamp": [1, 2], "name": ["a", "a"], "value": [1.0, 2.0]})
        w.flush(min_rows=10)  # only Instruction holds >= 10 rows
        assert TraceReader(path).num_rows("Instruction") == 50 and not (path / "Counter.arrows").exists()
        w.append("Instruction", instruction_columns(5, 50))
        w.flush("Counter")
        assert TraceReader(path).num_rows("Counter") == 2 and TraceReader(path).num_rows("Instruction") == 50
        w.flush()
        assert TraceReader(path).num_rows("Instruction") == 55


# ---------------------------------------------------------------------------------------------- bad files
def _expect_format_error(path, match):
    with pytest.raises(TraceFormatError, match=match):
        TraceReader(path).read_table("Instruction")


def test_missing_and_wrong_kind_of_path(tmp_path):
    with pytest.raises(TraceFormatError, match="no such trace directory"):
        TraceReader(tmp_path / "nope")
    f = tmp_path / "f.json"
    f.write_text("{}")
    with pytest.raises(TraceFormatError, match="is a file, not a trace directory"):
        TraceReader(f)
    with pytest.raises(TraceFormatError, match="not a trnprof trace"):
        TraceReader(tmp_path)


def test_random_bytes_are_a_format_error_naming_the_file(small_trace):
    target = small_trace / "Instruction.arrows"
    target.write_bytes(os.urandom(5000))
    _expect_format_error(small_trace, "Instruction.arrows: not a valid Arrow IPC stream")


def test_a_table_file_that_is_a_directory_is_a_format_error_naming_it(small_trace):
    target = small_trace / "Instruction.arrows"
    target.unlink()
    target.mkdir()
    _expect_format_error(small_trace, "Instruction.arrows: is not a file .*record or export it again")


def test_random_bytes_in_metadata_fail_on_open(small_trace):
    (small_trace / "Metadata.arrows").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(TraceFormatError, match="Metadata.arrows"):
        TraceReader(small_trace)


def _write_stream(path, table):
    with ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)


def test_wrong_table_in_file(small_trace):
    meta = TraceReader(small_trace).read_table("Metadata")
    _write_stream(small_trace / "Instruction.arrows", meta)
    _expect_format_error(small_trace, "holds table 'Metadata', expected Instruction")


def test_foreign_arrow_file_and_wrong_types(small_trace):
    _write_stream(small_trace / "Instruction.arrows", pa.table({"x": [1]}))
    _expect_format_error(small_trace, "not written by trnprof")
    good = TraceReader(small_trace)
    fields = [f if f.name != "start_ts" else pa.field("start_ts", pa.float64())
              for f in schema.INSTRUCTION.arrow_schema()]
    bad_schema = pa.schema(fields, metadata=schema.INSTRUCTION.arrow_schema().metadata)
    _write_stream(good.path / "Instruction.arrows", bad_schema.empty_table())
    _expect_format_error(small_trace, "column 'start_ts' has type double, expected int64")


def test_newer_format_version_is_refused(tmp_path):
    path = tmp_path / "t"
    write_trace(path, {"Instruction": instruction_columns(3)})
    md = {**schema.INSTRUCTION.arrow_schema().metadata, schema.META_KEY_FORMAT_VERSION: b"9.0"}
    t = TraceReader(path).read_table("Instruction")
    _write_stream(path / "Instruction.arrows", t.replace_schema_metadata(md))
    _expect_format_error(path, r"format 9\.0, newer than this trnprof reads .*upgrade trnprof")


def _full_file(tmp_path, *, complete=False):
    """A trace of 400 instructions in batches of 50; ``complete=False`` marks it as an interrupted recording."""
    path = tmp_path / "full"
    w = TraceWriter(path, batch_rows=50, background_flush=False)
    w.append("Instruction", instruction_columns(400))
    w.close(complete=complete)
    return path, (path / "Instruction.arrows").read_bytes()


def test_truncation_at_every_length_keeps_a_clean_prefix(tmp_path):
    """Cut the file of an interrupted recording at many lengths: the reader returns whole batches of correct rows
    and at most warns."""
    path, data = _full_file(tmp_path)
    target = path / "Instruction.arrows"
    lengths = sorted(set(range(0, len(data), max(1, len(data) // 400))) | {len(data) - 8, len(data) - 1})
    seen_rows = set()
    for length in lengths:
        target.write_bytes(data[:length])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = TraceReader(path).read_table("Instruction")
        assert all(issubclass(w.category, TruncatedTraceWarning) for w in caught)
        assert len(caught) <= 1
        assert table.num_rows % 50 == 0  # only whole batches
        np.testing.assert_array_equal(np.asarray(table.column("id")), np.arange(table.num_rows))
        if table.num_rows:
            check_instruction_rows(table)
        seen_rows.add(table.num_rows)
    assert seen_rows == set(range(0, 400, 50)) | {400}


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0), junk=st.binary(max_size=64))
@example(cut=2895, junk=b"\x01" + b"\x00" * 16)  # a length field asking for an absurd allocation (ArrowMemoryError)
def test_truncated_then_garbage_tail_never_raises(tmp_path_factory, cut, junk):
    path, data = _full_file(tmp_path_factory.mktemp("trunc"))
    cut %= len(data) + 1
    (path / "Instruction.arrows").write_bytes(data[:cut] + junk)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            table = TraceReader(path).read_table("Instruction")
        except TraceFormatError as exc:
            # only junk where the schema should be may be called invalid, and the message names the file
            assert "Instruction.arrows" in str(exc)
            return
    if table.num_rows:
        check_instruction_rows(table)


def test_truncating_a_completed_recording_at_any_length_is_an_error_naming_the_file(tmp_path):
    """In a trace whose Metadata says the recording completed, a cut file is damage, never a silent loss of rows:
    at a batch boundary too (the end-of-stream marker is missing) and with stray bytes after the marker."""
    path, data = _full_file(tmp_path, complete=True)
    target = path / "Instruction.arrows"
    lengths = sorted(set(range(0, len(data), max(1, len(data) // 200))) | {len(data) - 8, len(data) - 1})
    for length in lengths:
        target.write_bytes(data[:length])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an error, not a warning
            with pytest.raises(TraceFormatError, match=r"Instruction\.arrows: .*completed recording.*record or export"):
                TraceReader(path).read_table("Instruction")
    target.write_bytes(data + b"\x00" * 16)
    with pytest.raises(TraceFormatError, match="16 stray bytes after its end-of-stream marker"):
        TraceReader(path).read_table("Instruction")
    target.write_bytes(data)
    assert TraceReader(path).read_table("Instruction").num_rows == 400


def _overwrite(path, offset, junk):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(junk)


def _uncompressed_trace(tmp_path, *, complete):
    """Two batches of Instruction rows written without compression, so overwritten bytes decode as garbage offsets
    and dictionary codes instead of failing decompression."""
    path = tmp_path / "plain"
    w = TraceWriter(path, batch_rows=200, background_flush=False, compression=None)
    w.append("Instruction", instruction_columns(400))
    w.close(complete=complete)
    return path, path / "Instruction.arrows"


def _batch_bodies(file):
    """(offset, size) of each record batch message's body in an Arrow IPC stream file."""
    source = pa.memory_map(str(file))
    reader = ipc.MessageReader.open_stream(source)
    out = []
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return out
        if message.type == "record batch":
            out.append((source.tell() - message.body.size, message.body.size))


@pytest.mark.parametrize("column", ["operands", "engine"])
def test_garbage_offsets_or_dictionary_codes_are_a_corrupt_batch_error_not_a_crash(tmp_path, column):
    """Bytes overwritten inside a batch whose framing is intact used to reach pyarrow kernels unvalidated
    (a segmentation fault in `take`, an IndexError): full validation reports the batch instead."""
    path, file = _uncompressed_trace(tmp_path, complete=True)
    table = TraceReader(path).read_table("Instruction")
    body, size = _batch_bodies(file)[0]
    # Overwrite the whole buffer region of the column: its offsets (string) or indices (dictionary).
    data = file.read_bytes()
    batch0 = table.to_batches()[0]
    col = batch0.column(column)
    buffers = [b for b in (col.indices if column == "engine" else col).buffers() if b is not None]
    target = buffers[-2] if column == "operands" else buffers[-1]  # string offsets / dictionary codes
    at = data.find(target.to_pybytes(), body, body + size)
    assert at > 0
    _overwrite(file, at + 8, b"A" * 64)
    with pytest.raises(TraceFormatError, match=r"Instruction\.arrows: corrupt record batch 1 \(.*\) in a completed "
                                               "recording .*record or export the trace again"):
        TraceReader(path).read_table("Instruction")


def test_a_damaged_last_batch_of_an_interrupted_recording_is_still_a_warning(tmp_path):
    path, file = _uncompressed_trace(tmp_path, complete=False)
    body, size = _batch_bodies(file)[-1]
    _overwrite(file, body, b"A" * size)  # the validity/offset buffers of the last batch
    with pytest.warns(TruncatedTraceWarning, match=r"damaged tail after 1 complete batch\(es\)"):
        table = TraceReader(path).read_table("Instruction")
    assert table.num_rows == 200
    check_instruction_rows(table)


def test_a_damaged_batch_followed_by_intact_ones_is_damage_even_when_interrupted(tmp_path):
    path, file = _uncompressed_trace(tmp_path, complete=False)
    body, size = _batch_bodies(file)[0]
    _overwrite(file, body, b"A" * size)
    with pytest.raises(TraceFormatError, match="corrupt record batch 1 .*intact batches follow it"):
        TraceReader(path).read_table("Instruction")


def test_nulls_in_a_required_column_are_a_corrupt_batch(small_trace):
    t = TraceReader(small_trace).read_table("Instruction")
    i = t.schema.get_field_index("start_ts")
    nullable = t.schema.set(i, pa.field("start_ts", pa.int64(), nullable=True))
    t = pa.Table.from_arrays([*t.columns[:i], pa.array([None] * t.num_rows, pa.int64()), *t.columns[i + 1:]],
                             schema=nullable)
    _write_stream(small_trace / "Instruction.arrows", t)
    _expect_format_error(small_trace, r"corrupt record batch 1 \(required column 'start_ts' holds 128 null value")


def _transfer_trace(path, *, complete, starts=((0,),), layout=0, rotation=0, layout_id=0):
    """DMA transfers (one per ``starts`` entry) of a two-packet layout ``layout_id`` over 4 queues."""
    from tracer import packets

    rot = [((q0 + np.arange(2)) % 4, np.zeros(2, np.int64)) for q0 in range(4)]
    w = TraceWriter(path, background_flush=False)
    w.append("DmaPacketLayout", packets.layout_columns(layout_id, rot, np.full(2, 5), np.full(2, 8),
                                                       np.zeros(2, np.int64)))
    w.append("DmaTransfer", {
        "packet_aggregation_id": list(range(len(starts))), "first_packet_id": [2 * i for i in range(len(starts))],
        "packet_layout": [layout] * len(starts), "rotation": [rotation] * len(starts),
        "queue_start_ts": pa.array([list(s) for s in starts], pa.list_(pa.int64())),
        "queue_group": ["qSyncIO"] * len(starts)})
    w.close(complete=complete)
    return path


def test_a_transfer_naming_a_missing_layout_in_a_completed_recording_is_called_corrupt(tmp_path):
    path = _transfer_trace(tmp_path / "t", complete=True, layout=1)
    with pytest.warns(TruncatedTraceWarning, match=r"packet layouts .* missing \(the trace is corrupt"):
        assert TraceReader(path).read_table("DmaPacket").num_rows == 0


@pytest.mark.parametrize(("starts", "message"), [
    (((),), "DMA transfers without queue start times"),
    # per-queue starts for 2 of 4 queues, the packets on queues 2 and 3: one transfer would read past the values,
    # several would read the next transfer's starts
    (((0, 1),), "DMA transfers with fewer queue start times than their packets' queues"),
    (((0, 1), (2, 3, 4, 5)), "DMA transfers with fewer queue start times than their packets' queues"),
])
def test_transfers_that_cannot_be_expanded_are_an_error_naming_the_file(tmp_path, starts, message):
    path = _transfer_trace(tmp_path / "t", complete=True, starts=starts, rotation=2)
    with pytest.raises(TraceFormatError, match=rf"DmaTransfer\.arrows: {message}"):
        TraceReader(path).read_table("DmaPacket")


def test_implausible_layout_ids_are_refused_before_any_allocation(tmp_path):
    path = _transfer_trace(tmp_path / "t", complete=True, layout=2**30, layout_id=2**30)
    with pytest.raises(TraceFormatError, match=r"DmaPacketLayout\.arrows: implausible packet_layout"):
        TraceReader(path).read_table("DmaPacket")


def test_a_truncated_metadata_is_one_error_not_a_warning_and_an_error(small_trace):
    data = (small_trace / "Metadata.arrows").read_bytes()
    (small_trace / "Metadata.arrows").write_bytes(data[:100])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no TruncatedTraceWarning before the error
        with pytest.raises(TraceFormatError, match=r"Metadata\.arrows: truncated, holds 0 rows, expected 1"):
            TraceReader(small_trace)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts the process's threads in /proc")
def test_compression_threads_off_writes_the_same_bytes_on_one_thread(tmp_path):
    """``compression_threads=False`` (the simulator's writers: the simulation needs the other CPU) compresses on the
    writing thread, starting none of pyarrow's pool threads, and writes the same file."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import os, sys
        import numpy as np
        from tracer import TraceWriter
        from tests.conftest import instruction_columns
        before = len(os.listdir("/proc/self/task"))
        with TraceWriter(sys.argv[1], compression_threads=sys.argv[2] == "1", background_flush=False,
                         batch_rows=4096) as w:
            for first in range(0, 40_000, 8_000):
                w.append("Instruction", instruction_columns(8_000, first))
            after = len(os.listdir("/proc/self/task"))
        print(after - before)
    """)
    root = str(Path(__file__).resolve().parents[2])
    extra = {}
    for threads in ("1", "0"):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / threads), threads], capture_output=True,
                              text=True, check=True, timeout=120, env={**os.environ, "PYTHONPATH": root})
        extra[threads] = int(done.stdout.strip().splitlines()[-1])
    if os.cpu_count() and os.cpu_count() > 1:
        assert extra["1"] > 0  # pyarrow compressed on its pool (so the switch below is what keeps it off)
    assert extra["0"] == 0
    assert (tmp_path / "1" / "Instruction.arrows").read_bytes() == (tmp_path / "0" / "Instruction.arrows").read_bytes()


def test_a_simulator_recording_without_its_instruction_file_is_damaged(tmp_path):
    # it read as a trace without instructions (0% busy engines, exit 0); other writers may leave tables out
    from tracer.sim import run_kernel

    path = tmp_path / "k.trace"
    run_kernel("softmax", {"rows": 128, "cols": 128}, trace_path=path)
    assert TraceReader(path).num_rows("Instruction") > 0
    (path / "Instruction.arrows").unlink()
    with pytest.raises(TraceFormatError, match=r"k.trace: Instruction.arrows is missing from a completed simulator "
                                               r"recording .* record it again"):
        TraceReader(path)
    # an interrupted recording may not have written it yet
    meta = pa.ipc.open_stream(path / "Metadata.arrows").read_all()
    flag = meta.schema.get_field_index("recording_complete")
    meta = meta.set_column(flag, meta.schema.field(flag), pa.array([False]))
    with pa.ipc.new_stream(path / "Metadata.arrows", meta.schema) as w:
        w.write_table(meta)
    assert TraceReader(path).num_rows("Instruction") == 0
    # a writer other than the simulator (no cost model) may write no Instruction table
    with TraceWriter(tmp_path / "other.trace", metadata={"is_simulation": True}) as w:
        w.append("Counter", {"timestamp": [1], "name": ["x"], "value": [1.0]})
    assert TraceReader(tmp_path / "other.trace").num_rows("Instruction") == 0


def test_a_column_given_as_one_string_or_as_inexact_floats_is_refused(tmp_path):
    # a string of 6 characters for 6 rows was stored as the engines 'T', 'e', ...; a list of floats was truncated
    cols = instruction_columns(6, 0)
    with TraceWriter(tmp_path / "a.trace", metadata={"is_simulation": True}) as w:
        with pytest.raises(TraceFormatError, match=r"Instruction.engine: expected a sequence of values .* 'Tensor'"):
            w.append("Instruction", {**cols, "engine": "Tensor"})
        with pytest.raises(TraceFormatError, match=r"Instruction.start_ts: cannot store values as int64"):
            w.append("Instruction", {**cols, "start_ts": [1.5, 2.7, 3.9, 4.0, 5.0, 6.0]})
        w.append("Instruction", {**cols, "start_ts": [float(x) for x in cols["start_ts"]]})  # exact: kept
    assert TraceReader(tmp_path / "a.trace").read_table("Instruction").column("start_ts").to_pylist() == \
        list(cols["start_ts"])


def test_a_refused_metadata_value_is_not_kept_and_a_closed_writer_refuses_more(tmp_path):
    w = TraceWriter(tmp_path / "m.trace", metadata={"arch": "trn2"})
    w.append("Instruction", instruction_columns(2, 0))
    with pytest.raises(TraceFormatError, match="Metadata.arch"):
        w.update_metadata(arch=5)
    assert w.metadata["arch"] == "trn2"
    w.close()  # it failed on the kept bad value, and the trace stayed marked incomplete
    assert TraceReader(tmp_path / "m.trace").recording_complete
    with pytest.raises(TraceFormatError, match="trace writer is closed"):
        w.update_metadata(arch="trn1")
    assert TraceReader(tmp_path / "m.trace").metadata["arch"] == "trn2"


def test_a_batch_that_does_not_decompress_followed_by_intact_ones_is_damage_even_when_interrupted(tmp_path):
    """A zstd body damaged in the middle of an interrupted recording's file raised on reading and was taken for the
    interrupted tail: every intact batch after it was dropped (18,304 of 200,128 rows) with a warning."""
    path = tmp_path / "z.trace"
    w = TraceWriter(path, batch_rows=100, background_flush=False)
    w.append("Instruction", instruction_columns(500))
    w.close(complete=False)
    file = path / "Instruction.arrows"
    body, size = _batch_bodies(file)[1]
    mid = body + size // 2
    _overwrite(file, mid, bytes(b ^ 0xFF for b in file.read_bytes()[mid:mid + 8]))
    with pytest.raises(TraceFormatError, match="corrupt record batch 2 .*intact batches follow it"):
        TraceReader(path).read_table("Instruction")


def test_a_completed_recording_missing_a_file_or_rows_is_damaged(tmp_path):
    path = tmp_path / "t.trace"
    with TraceWriter(path, batch_rows=100, background_flush=False) as w:
        w.append("Instruction", instruction_columns(300))
        w.append("Counter", {"timestamp": [1, 2, 3], "name": ["c"] * 3, "value": [1.0, 2.0, 3.0]})
    reader = TraceReader(path)
    assert reader.written_rows == {"Counter": 3, "Instruction": 300}
    (path / "Counter.arrows").unlink()          # it read as "no counters", exit 0
    with pytest.raises(TraceFormatError, match=r"Counter\.arrows: missing from a completed recording \(its writer "
                                               r"wrote 3 rows there\)"):
        TraceReader(path)
    # a file cut at a batch boundary, its end-of-stream marker put back: whole batches, fewer rows
    path2 = tmp_path / "u.trace"
    with TraceWriter(path2, batch_rows=100, background_flush=False, compression=None) as w:
        w.append("Instruction", instruction_columns(300))
    file = path2 / "Instruction.arrows"
    body, _size = _batch_bodies(file)[-1]
    data = file.read_bytes()
    start = data.rfind(b"\xff\xff\xff\xff", 0, body)       # the last batch message's continuation marker
    file.write_bytes(data[:start] + data[-8:])
    with pytest.raises(TraceFormatError, match=r"Instruction\.arrows: holds 200 rows where its writer wrote 300"):
        TraceReader(path2).read_table("Instruction")


def test_table_rows_is_the_writers_own(tmp_path):
    with pytest.raises(TraceFormatError, match="set by the writer when it finishes"):
        TraceWriter(tmp_path / "x.trace", metadata={"table_rows": "{}"})


def test_a_trace_without_its_metadata_is_called_damaged_by_every_command(small_trace, capsys):
    from profiler.cli import main

    (small_trace / "Metadata.arrows").unlink()
    _expect_format_error(small_trace, "holds trace table files but no Metadata.arrows: a damaged trnprof trace")
    for argv in (["info", str(small_trace)], ["summary", str(small_trace)], ["sql", str(small_trace), "SELECT 1"]):
        assert main(argv) != 0
        assert "holds trace table files but no Metadata.arrows: a damaged trnprof trace" in capsys.readouterr().err
