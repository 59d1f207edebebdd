"""The ingest's index end to end: tracks interleaved row by row, a track delivered out of time order, counters,
slices, small chunks and feeds — the stored ``lod`` / ``counter_lod`` / ``track`` rows equal what the builders give
for each track's events taken alone, and the index is stored in long (track, level) runs."""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from profiler import db_schema as dbs
from profiler.db import index_build, lod, lod_build, staging
from profiler.db.ingest import ingest
from profiler.db.lod_counter import counter_levels
from tracer import schema as ts


class _Mixed:
    """Instructions of three engines interleaved row by row, two DMA queues (one delivered newest batch first),
    nested spans and two counters, in small batches."""

    format_name = "test-mixed"

    def __init__(self, path: Path) -> None:
        self.path = path

    def input_files(self):
        return [self.path]

    def input_size(self):
        return 1

    def read(self, progress=None):
        rng = np.random.default_rng(5)
        n = 2400
        start = np.cumsum(rng.integers(0, 40, n)) + 10**9
        dur = rng.choice([0, 3, 30, 300], n)
        engine = np.array(["Tensor", "Vector", "Scalar"])[np.arange(n) % 3]
        flops = pa.array([None if i % 7 == 0 else int(i * 10) for i in range(n)], pa.int64())
        inst = pa.RecordBatch.from_pydict({
            ts.ID: np.arange(n), ts.START_TS: start, ts.END_TS: start + dur, ts.DURATION_NS: dur,
            ts.ENGINE: pa.array(engine).dictionary_encode(), ts.OPCODE: np.array(["MM", "ACT", "CP", "X"])[dur % 4],
            ts.OPERANDS: ["o"] * n, ts.PC: np.arange(n), ts.PCORE_IDX: np.zeros(n, np.int64),
            ts.ADJUSTED_FLOPS: flops, ts.RAW_FLOPS: np.arange(n) * 3})
        for a in range(0, n, 500):
            yield "Instruction", inst.slice(a, 500)
        m = 1500
        q = np.arange(m) % 2
        pstart = 10**9 + np.cumsum(rng.integers(0, 25, m))
        pdur = rng.integers(0, 200, m)
        dma = pa.RecordBatch.from_pydict({
            ts.ID: np.arange(m), ts.START_TS: pstart, ts.END_TS: pstart + pdur, ts.DURATION_NS: pdur,
            ts.QUEUE_NAME: np.array(["qA", "qB"])[q], ts.READ_BYTES: pdur, ts.WRITE_BYTES: pdur,
            ts.TRANSFER_BYTES: pdur * 64 + 1, ts.PCORE_IDX: np.zeros(m, np.int64),
            ts.VARIABLE: pa.array([None if i % 5 == 0 else f"v{i % 3}" for i in range(m)], pa.string())})
        qa = dma.filter(pa.array(q == 0))
        qb = dma.filter(pa.array(q == 1))
        for a in range(0, qa.num_rows, 300):
            yield "DmaPacket", qa.slice(a, 300)
        for a in reversed(range(0, qb.num_rows, 300)):      # newest first: out of time order across chunks
            yield "DmaPacket", qb.slice(a, 300)
        s0 = 10**9 + np.arange(0, 40_000, 1000)
        yield "Span", pa.RecordBatch.from_pydict({
            ts.ID: np.arange(80), ts.START_TS: np.r_[s0, s0 + 100], ts.END_TS: np.r_[s0 + 900, s0 + 400],
            ts.DURATION_NS: np.r_[np.full(40, 900), np.full(40, 300)], ts.NAME: ["outer"] * 40 + ["inner"] * 40,
            ts.DEPTH: np.r_[np.zeros(40), np.ones(40)].astype(np.int32), ts.TRACK_NAME: ["spans"] * 80,
            ts.PCORE_IDX: np.zeros(80, np.int64)})
        c = 900
        ct = 10**9 + np.cumsum(rng.integers(0, 3, c))      # equal timestamps happen
        yield "Counter", pa.RecordBatch.from_pydict({
            ts.TIMESTAMP: ct, ts.NAME: np.array(["sbuf", "hbm"])[np.arange(c) % 2],
            ts.VALUE: rng.integers(0, 100, c).astype(np.float64), ts.PCORE_IDX: np.zeros(c, np.int64)})
        yield "Metadata", pa.RecordBatch.from_pydict({"arch": ["trn2"]})


@pytest.fixture(scope="module")
def mixed_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(staging, "CHUNK_ROWS", 700)
        mp.setattr(index_build, "FEED_EVENTS", 128)
        mp.setattr(index_build, "MAX_PENDING_EVENTS", 600)
        mp.setattr(index_build, "SCAN_BATCH_ROWS", 512)
        mp.setattr(index_build, "RUN_ROWS", 64)
        mp.setattr(index_build, "INSERT_ROWS", 300)
        mp.setattr(index_build, "MAX_BUFFERED_ROWS", 2000)
        db = ingest(_Mixed(path / "src"), path / "mixed.duckdb")
    con = duckdb.connect(str(db), read_only=True)
    yield con
    con.close()


def _levels_by_sql(con, table, tid):
    return con.sql(f'SELECT * FROM "{table}" WHERE track_id = {int(tid)} ORDER BY level, bucket').to_arrow_table()


def test_interval_index_equals_the_builder_on_each_track_alone(mixed_db):
    con = mixed_db
    tracks = con.execute("SELECT track_id, table_name, name, lod_min_level, value_name FROM track "
                         "WHERE kind <> 'counter'").fetchall()
    assert len(tracks) == 7  # 3 engines, 2 queues, and the span row's two depths
    assert {t[1] for t in tracks} == {"Instruction", "DmaPacket", "slice"}
    for tid, table, name, k_min, value_name in tracks:
        label = {"Instruction": "opcode", "DmaPacket": "coalesce(variable, queue_name)", "slice": "name"}[table]
        value = {"Instruction": "coalesce(adjusted_flops, raw_flops, 0)", "DmaPacket": "transfer_bytes"}.get(table)
        rows = con.execute(f'SELECT start_ts, end_ts, id, {label}, {value or "NULL"} FROM "{table}" '
                           f"WHERE track_id = ?", [tid]).fetchall()
        s, e, ids, names, vals = (list(c) for c in zip(*rows, strict=True))
        expect_value = {"Tensor": "adjusted_flops", "qA": "transfer_bytes", "qB": "transfer_bytes"}.get(name)
        assert value_name == expect_value
        ev = lod.prepare(np.array(s), np.array(e), np.array(ids), pa.array(names, pa.string()),
                         np.array(vals, np.float64) if value_name else None)
        assert k_min == lod.finest_level(*ev.span(), ev.n)
        expected = pa.concat_tables(list(lod_build.track_levels(ev, tid, k_min)))
        stored = _levels_by_sql(con, dbs.LOD_TABLE, tid)
        assert stored.num_rows == expected.num_rows
        for col in dbs.LOD.names:
            if col == dbs.VALUE_SUM and value_name:
                np.testing.assert_allclose(stored.column(col).to_numpy(), expected.column(col).to_numpy(),
                                           rtol=1e-12, atol=1e-6)
            else:
                assert stored.column(col).to_pylist() == expected.column(col).to_pylist(), (name, col)


def test_counter_index_equals_the_builder_on_each_counter_alone(mixed_db):
    con = mixed_db
    counters = con.execute("SELECT track_id, event_count, start_ts, end_ts FROM track WHERE kind = 'counter'"
                           ).fetchall()
    assert len(counters) == 2
    for tid, n, first, last in counters:
        t, v = zip(*con.execute('SELECT timestamp, value FROM "Counter" WHERE track_id = ? ORDER BY rowid',
                                [tid]).fetchall(), strict=True)
        assert list(t) == sorted(t) and (n, first, last) == (len(t), t[0], t[-1])
        expected = pa.concat_tables(counter_levels(np.array(t), np.array(v), tid))
        stored = _levels_by_sql(con, dbs.COUNTER_LOD_TABLE, tid)
        assert stored.num_rows == expected.num_rows
        for col in dbs.COUNTER_LOD.names:
            np.testing.assert_allclose(np.asarray(stored.column(col).to_pylist(), float),
                                       np.asarray(expected.column(col).to_pylist(), float), rtol=1e-12)


def test_nested_spans_get_a_track_per_depth(mixed_db):
    """The outer and inner spans of one row overlap (each inner lies in an outer); each depth is a track of the
    same name, its depth in span_depth, so neither track overlaps itself and both are drawn in full."""
    rows = mixed_db.execute("SELECT t.name, t.span_depth, t.event_count, t.overlapping, min(s.name), max(s.name) "
                            "FROM track t JOIN slice s USING (track_id) GROUP BY ALL ORDER BY 2").fetchall()
    assert rows == [("spans", 0, 40, False, "outer", "outer"), ("spans", 1, 40, False, "inner", "inner")]
    kinds = dict(mixed_db.execute("SELECT kind, count(span_depth) FROM track GROUP BY ALL").fetchall())
    assert kinds == {"engine": 0, "dma_queue": 0, "counter": 0, "span": 2}


def test_track_statistics_and_storage_order(mixed_db):
    con = mixed_db
    stats = con.execute("""
        SELECT t.track_id, t.event_count, t.start_ts, t.end_ts, t.max_dur_ns, t.overlapping,
               x.n, x.s, x.e, x.d, x.ov
        FROM track t JOIN (
            SELECT track_id, count(*) n, min(start_ts) s, max(greatest(end_ts, start_ts)) e,
                   max(greatest(end_ts, start_ts) - start_ts) d,
                   bool_or(start_ts < prev_end) ov
            FROM (SELECT track_id, start_ts, end_ts, max(end_ts) OVER (PARTITION BY track_id ORDER BY start_ts, id
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) prev_end
                  FROM (SELECT track_id, start_ts, end_ts, id FROM Instruction UNION ALL
                        SELECT track_id, start_ts, end_ts, id FROM DmaPacket UNION ALL
                        SELECT track_id, start_ts, end_ts, id FROM slice))
            GROUP BY track_id) x USING (track_id)""").fetchall()
    assert len(stats) == 7
    for row in stats:
        assert row[1:5] == row[6:10] and bool(row[5]) == bool(row[10]), row
    # Rows are clustered: each chunk (here >= 700 rows) is stored in (track, start, id) order.
    keys = con.execute('SELECT track_id, start_ts, id FROM "Instruction"').fetchall()
    descents = sum(b < a for a, b in itertools.pairwise(keys))
    assert sorted(keys) != keys and descents <= len(keys) // 700
    # Index rows: each (track, level) in increasing buckets, in long runs.
    order = con.execute("SELECT track_id, level, bucket FROM lod").fetchnumpy()
    seen: dict[tuple[int, int], int] = {}
    runs = 0
    prev = None
    for tid, k, b in zip(order["track_id"].tolist(), order["level"].tolist(), order["bucket"].tolist(), strict=True):
        if (tid, k) in seen:
            assert b > seen[(tid, k)]
        seen[(tid, k)] = b
        runs += (tid, k) != prev
        prev = (tid, k)
    assert runs <= len(seen) + len(order["bucket"]) // 64
