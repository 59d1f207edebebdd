"""Ingest end to end: tables and order, any TraceSource (extra columns, unknown tables, interleaved runs),
atomicity when the source fails, the ingest cache, and one-line errors for bad inputs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import profiler
from profiler import db_schema as dbs
from profiler.db.cache import CACHE_DIR_ENV, cache_path
from profiler.db.ingest import ingest
from profiler.sources import TraceDirectorySource
from profiler.synth import synth_trace
from tests.conftest import instruction_columns
from tracer import schema as ts
from tracer import write_trace


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "s.trace"
    synth_trace(path, 30_000, tracks=42, seed=3, chunk_events=7_000)
    db = ingest(TraceDirectorySource(path), path.with_name("s.duckdb"))
    return path, db


def test_tables_rows_and_order(synth):
    _path, db = synth
    con = duckdb.connect(str(db), read_only=True)
    try:
        counts = dict(con.execute("SELECT table_name, estimated_size FROM duckdb_tables()").fetchall())
        for t in ("Instruction", "DmaPacket", "SemaphoreUpdate", "Flow", "Metadata", "Counter", "slice", "track",
                  "lod", "counter_lod", "trnprof_info"):
            assert t in counts
        n_inst = con.execute('SELECT count(*) FROM "Instruction"').fetchall()[0][0]
        n_dma = con.execute('SELECT count(*) FROM "DmaPacket"').fetchall()[0][0]
        assert n_inst + n_dma == 30_000
        # Stored in (track_id, start_ts) order within each chunk; these tables fit in one chunk.
        for table in ("Instruction", "DmaPacket", "slice"):
            rows = con.execute(f'SELECT track_id, start_ts FROM "{table}"').fetchnumpy()
            key = np.lexsort((rows["start_ts"], rows["track_id"]))
            assert np.array_equal(key, np.arange(len(key))), f"{table} is not stored sorted"
        types = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = "
                                 "'Instruction'").fetchall())
        assert types["opcode"] == "VARCHAR" and types["engine"] == "VARCHAR" and types["track_id"] == "BIGINT"
        tracks = con.execute("SELECT core, kind, count(*) FROM track GROUP BY ALL ORDER BY ALL").fetchall()
        assert tracks == [(0, "dma_queue", 16), (0, "engine", 5), (0, "span", 1), (1, "dma_queue", 16),
                          (1, "engine", 5), (1, "span", 1)]
        stats = con.execute("SELECT sum(event_count) FROM track WHERE kind <> 'span'").fetchall()[0][0]
        assert stats == 30_000
        meta = con.execute('SELECT arch, profile_name FROM "Metadata"').fetchall()
        assert meta == [("trn2", "synth-30000-42-3")]
    finally:
        con.close()


class _Source:
    """A TraceSource yielding tables interleaved, with an extra column and a table trnprof does not know."""

    format_name = "test-source"

    def __init__(self, path: Path, fail_after: int | None = None) -> None:
        self.path = path
        self.fail_after = fail_after

    def input_files(self):
        return [self.path]

    def input_size(self):
        return 100

    def read(self, progress=None):
        cols = instruction_columns(300)
        cols[ts.PCORE_IDX] = np.zeros(300, np.int64)
        batch = pa.RecordBatch.from_pydict({k: pa.array(v) for k, v in cols.items()})
        batch = batch.append_column("compiler_opcode", pa.array(["X"] * 300))
        parts = [batch.slice(200, 100), batch.slice(0, 100)]
        yield "Instruction", parts[0]
        if self.fail_after == 1:
            raise OSError("disk on fire")
        yield "ActiveTime", pa.RecordBatch.from_pydict({"start_ts": [1, 5], "end_ts": [3, 9], "engine": ["t", "t"]})
        yield "Instruction", parts[1]
        yield "Instruction", batch.slice(100, 100)
        yield "Metadata", pa.RecordBatch.from_pydict({"profile_schema_version": ["7.4.0"], "arch": ["trn1"]})
        if progress:
            progress(100)


def test_any_source_interleaved_extra_columns_and_unknown_tables(tmp_path):
    db = ingest(_Source(tmp_path / "src"), tmp_path / "x.duckdb")
    with profiler.open(db) as trace:
        rows = trace.sql("SELECT id, track_id, compiler_opcode FROM Instruction").to_arrow_table()
        assert sorted(rows.column("id").to_pylist()) == list(range(300))
        assert set(rows.column("compiler_opcode").to_pylist()) == {"X"}
        assert trace.sql("SELECT count(*) FROM ActiveTime").fetchall() == [(2,)]
        order = trace.sql("SELECT track_id, start_ts FROM Instruction").to_arrow_table()
        keys = list(zip(order.column(0).to_pylist(), order.column(1).to_pylist(), strict=True))
        assert keys == sorted(keys)
        assert trace.metadata["arch"] == "trn1"
        # Known columns the source did not yield exist (null), so Neuron Explorer queries run.
        assert trace.sql("SELECT count(hbm_read_bytes) FROM Instruction").fetchall() == [(0,)]
        w = trace.window(0, 3_000, 10_000)
        assert w.events.num_rows == 300


def test_failed_ingest_leaves_nothing_and_keeps_the_old_database(tmp_path):
    target = tmp_path / "x.duckdb"
    ingest(_Source(tmp_path / "src"), target)
    before = target.read_bytes()
    with pytest.raises(OSError, match="disk on fire"):
        ingest(_Source(tmp_path / "src", fail_after=1), target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]


def test_cache_is_reused_until_the_input_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace_dir = write_trace(tmp_path / "k.trace", {"Instruction": instruction_columns(500)})
    with profiler.open(trace_dir) as t:
        db = t.db_path
        assert db.parent == tmp_path / "cache" and db == cache_path(trace_dir)
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(500,)]
    first = db.stat().st_mtime_ns
    with profiler.open(trace_dir) as t:
        assert t.db_path == db
    assert db.stat().st_mtime_ns == first, "an unchanged input must not be re-ingested"
    time.sleep(0.01)
    write_trace(trace_dir, {"Instruction": instruction_columns(700)}, overwrite=True)
    with profiler.open(trace_dir) as t:
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(700,)]


def test_cache_beside_a_writable_input(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    trace_dir = write_trace(tmp_path / "k.trace", {"Instruction": instruction_columns(50)})
    with profiler.open(trace_dir) as t:
        assert t.db_path == tmp_path / "k.trace.trnprof.duckdb"


def _error(path) -> str:
    with pytest.raises(profiler.TrnprofError) as info:
        profiler.open(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bad_inputs_are_one_line_errors(tmp_path):
    assert "no such file" in _error(tmp_path / "missing")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "not a recognised trace" in _error(text)
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE t AS SELECT 1 x")
    con.close()
    assert "not one trnprof wrote" in _error(foreign)
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(b"\0" * 8 + b"DUCK" + os.urandom(5000))
    assert "cannot open the database" in _error(damaged)


def test_newer_database_format_asks_for_an_upgrade(tmp_path):
    db = ingest(_Source(tmp_path / "src"), tmp_path / "x.duckdb")
    con = duckdb.connect(str(db))
    con.execute(f"UPDATE {dbs.INFO_TABLE} SET value = '99.0' WHERE key = '{dbs.INFO_FORMAT_VERSION}'")
    con.close()
    assert "upgrade trnprof" in _error(db)


def test_timestamps_beyond_range_are_rejected(tmp_path):
    cols = instruction_columns(3)
    cols[ts.START_TS] = np.array([0, 1, 1 << 62], np.int64)
    cols[ts.END_TS] = cols[ts.START_TS] + 1
    trace_dir = write_trace(tmp_path / "k.trace", {"Instruction": cols})
    with pytest.raises(profiler.TraceFormatError, match="beyond"):
        ingest(TraceDirectorySource(trace_dir), tmp_path / "x.duckdb")
    assert not (tmp_path / "x.duckdb").exists()


def test_older_database_format_is_refused_and_its_cache_rebuilt(tmp_path, monkeypatch):
    """A database of an older major format (e.g. 1.x: no value sums, no counter index) is refused in one line
    when opened directly; as the cache of a trace it is re-ingested automatically."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace_dir = write_trace(tmp_path / "k.trace", {"Instruction": instruction_columns(40)})
    with profiler.open(trace_dir) as t:
        db = t.db_path
    con = duckdb.connect(str(db))
    con.execute(f"UPDATE {dbs.INFO_TABLE} SET value = '1.0' WHERE key = '{dbs.INFO_FORMAT_VERSION}'")
    con.execute(f"DROP TABLE {dbs.COUNTER_LOD_TABLE}")
    con.close()
    assert "re-run `trnprof ingest --force`" in _error(db)
    with profiler.open(trace_dir) as t:
        assert t.sql(f"SELECT value FROM {dbs.INFO_TABLE} WHERE key = '{dbs.INFO_FORMAT_VERSION}'").fetchall() == [
            (dbs.DB_FORMAT_VERSION,)]
        assert t.sql(f"SELECT count(*) FROM {dbs.COUNTER_LOD_TABLE}").fetchall() == [(0,)]


def test_a_damaged_or_altered_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    """The cache of a trace that was cut short or lost a table is re-ingested, not refused (the user never made
    that file)."""
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    trace_dir = write_trace(tmp_path / "k.trace", {"Instruction": instruction_columns(40)})
    with profiler.open(trace_dir) as t:
        db = t.db_path
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE Instruction")
    con.close()
    with profiler.open(trace_dir) as t:
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(40,)]
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    with profiler.open(trace_dir) as t:
        assert t.sql("SELECT count(*) FROM Instruction").fetchall() == [(40,)]


def test_a_file_named_duckdb_that_is_not_one_says_what_it_is(tmp_path):
    fake = tmp_path / "notes.duckdb"
    fake.write_text("some notes")
    assert "not a DuckDB database (it is a text file)" in _error(fake)


def test_a_trace_directory_reports_its_bytes_batch_by_batch(tmp_path, monkeypatch):
    """Ingest progress moves with each batch read (DMA packets: each batch of transfers expanded), not a table at a
    time, and adds up to the input's size: the progress bar, and a followed recording's read given up at its next
    step (profiler.live)."""
    from tracer.sim import run_kernel

    path = tmp_path / "mm.trace"
    run_kernel("matmul_naive", {"M": 512, "N": 512, "K": 512}, arch="trn2", trace_path=path)
    from tracer import packets

    monkeypatch.setattr(packets, "MAX_BATCH_PACKETS", 256)   # a batch of transfers expands to several batches
    source = TraceDirectorySource(path)
    steps: list[tuple[str, int]] = []
    current = [""]

    def progress(n: int) -> None:
        steps.append((current[0], n))

    packet_batches = 0
    for name, _batch in source.read(progress):
        current[0] = name
        packet_batches += name == ts.DMA_PACKET.name
    assert sum(n for _t, n in steps) == source.input_size()
    assert all(n > 0 for _t, n in steps)
    packet_steps = [n for t, n in steps if t == ts.DMA_PACKET.name]
    assert len(packet_steps) >= 2          # the expansion reports as it goes
    # every batch of packets a batch of transfers expands to tells its share of the transfers' bytes (they were
    # told at once, before millions of packets: the bar stalled at 68%, then jumped)
    assert packet_batches > 2 and len(packet_steps) >= packet_batches - 1
    assert len(steps) > len(source.reader.table_names())
