"""``trnprof ingest`` on foreign formats end to end: detection, warnings as one line, errors without tracebacks."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import profiler
from profiler.cli import main
from tracer.errors import TruncatedTraceWarning

DATA = Path(__file__).resolve().parents[1] / "data" / "pytorch"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_ingest_real_pytorch_trace(tmp_path, capsys):
    src = tmp_path / "rank0.json.gz"
    shutil.copy(DATA / "sampled_rank-0.json.gz", src)
    db = tmp_path / "rank0.duckdb"
    assert main(["ingest", str(src), "-o", str(db), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    with profiler.open(db) as t:
        tracks: dict[tuple[str, str], dict[int, int]] = {}
        for r in t.tracks().to_pylist():
            tracks.setdefault((r["group_name"], r["name"]), {})[r["span_depth"]] = r["event_count"]
        assert tracks[("pyper:trainer:0:0 (GPU 0)", "stream 7")] == {0: 1052}
        # a thread's nesting levels are tracks of their own: one per depth, the same name
        thread = tracks[("pyper:trainer:0:0 (CPU)", "thread 4037 (python3.8)")]
        assert sorted(thread) == list(range(11)) and sum(thread.values()) == 1828
        per_depth = dict(t.sql("SELECT depth, count(*) FROM slice s JOIN track k USING (track_id) "
                               "WHERE k.name = 'thread 4037 (python3.8)' GROUP BY ALL").fetchall())
        assert per_depth == thread
        assert t.sql("SELECT count(*) FROM slice s JOIN track k USING (track_id) WHERE s.depth <> k.span_depth")\
            .fetchall() == [(0,)]
        assert not any(r["overlapping"] for r in t.tracks().to_pylist() if r["kind"] == "span")
        assert t.metadata["tool_version"].endswith("import of Chrome trace JSON")


def test_truncated_trace_is_ingested_with_one_warning_line(tmp_path):
    with gzip.open(DATA / "alexnet_flows.json.gz") as f:
        text = f.read()
    src = tmp_path / "cut.json"
    src.write_bytes(text[: len(text) * 2 // 3])
    run = subprocess.run([sys.executable, "-m", "profiler", "ingest", str(src), "-o", str(tmp_path / "cut.duckdb"),
                          "--quiet"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    err = run.stderr.strip().splitlines()
    assert all(line.startswith("trnprof: warning: ") for line in err), err
    assert any("cut.json: the file ends inside event 951 (truncated?)" in line for line in err)
    # the database keeps the ingest's warnings and gives them again whenever it is opened
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = profiler.open(tmp_path / "cut.duckdb")
    assert any(issubclass(w.category, TruncatedTraceWarning) and "cut.json: the file ends inside event 951"
               in str(w.message) for w in caught), [str(w.message) for w in caught]
    with t:
        assert 0 < t.sql("SELECT count(*) FROM slice").fetchall()[0][0] < 870
        assert t.metadata["recording_complete"] is False


def test_garbage_and_corrupt_inputs_fail_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not a trace")
    assert main(["ingest", str(bad), "-o", str(tmp_path / "x.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json: not a recognised trace" in err
    d = tmp_path / "neuron"
    d.mkdir()
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"]}), d / "Metadata.parquet")
    (d / "Instruction.parquet").write_bytes(b"PAR1" + b"\x00" * 100)
    assert main(["ingest", str(d), "-o", str(tmp_path / "n.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Instruction.parquet: unreadable Parquet file" in err
    assert not (tmp_path / "n.duckdb").exists()


def test_ingest_neuron_parquet_and_legacy_json(tmp_path):
    d = tmp_path / "prof"
    d.mkdir()
    pq.write_table(pa.table({"profile_schema_version": ["7.4.0"], "num_physical_cores": pa.array([1], pa.int32())}),
                   d / "Metadata.parquet")
    pq.write_table(pa.table({"id": [0, 1], "start_ts": [10, 30], "end_ts": [20, 40], "duration_ns": [10, 10],
                             "engine": ["tensor", "vector"], "opcode": ["MATMUL", "ACT"], "operands": ["", ""],
                             "pc": [0, 0], "pcore_idx": [0, 0], "bir_id": ["a", "b"]}), d / "Instruction.parquet")
    pq.write_table(pa.table({"total_time": [1e-6]}), d / "Summary.parquet")
    assert main(["ingest", str(d), "-o", str(tmp_path / "p.duckdb"), "--quiet"]) == 0
    with profiler.open(tmp_path / "p.duckdb") as t:
        assert t.sql("SELECT engine, bir_id FROM Instruction ORDER BY id").fetchall() == [("Tensor", "a"),
                                                                                         ("Vector", "b")]
        assert t.sql("SELECT total_time FROM Summary").fetchall() == [(1e-6,)]
    j = tmp_path / "legacy.json"
    j.write_text(json.dumps({"summary": [{"total_time": 1}], "instruction": [
        {"timestamp": 5, "duration": 3, "label": "TensorMatrix", "opcode": "MATMUL", "operands": "x"}]}))
    assert main(["ingest", str(j), "-o", str(tmp_path / "j.duckdb"), "--quiet"]) == 0
    with profiler.open(tmp_path / "j.duckdb") as t:
        assert t.sql("SELECT engine, timeline_track, start_ts, end_ts FROM Instruction").fetchall() == [
            ("Tensor", "TensorMatrix", 5, 8)]


def test_extra_columns_whose_names_the_database_cannot_hold_are_kept_renamed(tmp_path, capsys):
    # track_id (a column the database adds), a schema column in another case, an empty name, two names equal
    # ignoring case: before, a KeyError (exit 70) or DuckDB's binder error, and the profile could not be opened
    src = tmp_path / "clash.json"
    src.write_text(json.dumps({"instruction": [
        {"timestamp": 100, "duration": 10, "opcode": "MATMUL", "label": "TensorMatrix", "track_id": 7,
         "Opcode": "dup", "Extra": 1, "extra": 2, "": 9}]}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profiler.open(src) as t:
            row = t.sql("SELECT opcode, extra_track_id, extra_Opcode, Extra, extra_extra, extra_unnamed "
                        "FROM Instruction").fetchall()
    assert row == [("MATMUL", "7", "dup", "1", "2", "9")]  # (the empty key's value was lost)
    messages = [str(w.message) for w in caught]
    assert any("'track_id' -> 'extra_track_id'" in m and "clash.json" in m for m in messages), messages

    pq_dir = tmp_path / "pq"
    assert main(["export", str(SAMPLES / "mlp-trn2.trace"), "--format", "parquet", "-o", str(pq_dir)]) == 0
    path = pq_dir / "Instruction.parquet"
    table = pq.read_table(path)
    n = table.num_rows
    table = (table.append_column("track_id", pa.array([5] * n)).append_column("ID", pa.array(["x"] * n))
             .append_column("", pa.array([3] * n)))
    pq.write_table(table, path)
    capsys.readouterr()
    assert main(["sql", str(pq_dir), "SELECT count(*), min(extra_track_id), min(extra_ID), min(extra_unnamed), "
                 "count(DISTINCT id) FROM Instruction", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"{n},5,x,3,{n}"


def test_info_describes_a_neuron_parquet_directory(tmp_path, capsys):
    # it took any directory for a trnprof trace and refused the export: "not a trnprof trace (no Metadata.arrows)"
    pq_dir = tmp_path / "pq"
    assert main(["export", str(SAMPLES / "mlp-trn2.trace"), "--format", "parquet", "-o", str(pq_dir)]) == 0
    capsys.readouterr()
    assert main(["info", str(pq_dir), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["source_format"] == "neuron-parquet"
    assert info["tables"]["Instruction"] == pq.read_table(pq_dir / "Instruction.parquet").num_rows
    data = (pq_dir / "Instruction.parquet").read_bytes()
    (pq_dir / "Instruction.parquet").write_bytes(data[:len(data) // 2])
    assert main(["info", str(pq_dir)]) == 2
    assert "Instruction.parquet: unreadable Parquet file" in capsys.readouterr().err
