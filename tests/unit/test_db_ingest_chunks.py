"""Chunk ordering of the ingest (profiler.db.staging) and per-track statistics (profiler.db.tracks) against
brute force: any interleaving of tracks, runs, ties and out-of-order rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from profiler import db_schema as dbs
from profiler.db import staging
from profiler.db.tracks import TrackStats
from tracer import schema as ts


@st.composite
def chunks(draw):
    """Batches of rows of a few tracks: runs of one track or rows interleaved, in or out of time order."""
    n_batches = draw(st.integers(1, 4))
    batches = []
    next_id = 0
    for _ in range(n_batches):
        n = draw(st.integers(0, 60))
        style = draw(st.sampled_from(["runs", "interleaved", "shuffled"]))
        tracks = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4))
        if style == "runs":
            tid = np.repeat(tracks, -(-n // len(tracks)))[:n]
        else:
            tid = np.array([tracks[i % len(tracks)] for i in range(n)], np.int64)
        start = np.array(sorted(draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))), np.int64)
        if style == "shuffled":
            start = np.array(draw(st.permutations(start.tolist())), np.int64)
        ids = np.arange(next_id, next_id + n, dtype=np.int64)
        if draw(st.booleans()):
            ids = ids[::-1].copy()      # ties on start then break on descending ids
        next_id += n
        end = start + np.array(draw(st.lists(st.integers(-3, 30), min_size=n, max_size=n)), np.int64)
        batches.append(pa.RecordBatch.from_pydict({
            dbs.TRACK_ID: pa.array(tid, pa.int64()), ts.ID: pa.array(ids), ts.START_TS: pa.array(start),
            ts.END_TS: pa.array(end),
            ts.OPCODE: pa.array([f"op{i % 3}" for i in range(n)], pa.string()).dictionary_encode()}))
    return batches


def _flush_all(orderer, batches):
    out = []
    for b in batches:
        out.append(orderer.add(b))
    out.append(orderer.flush())
    return out


@settings(max_examples=150, deadline=None)
@given(chunks(), st.integers(1, 200))
def test_every_chunk_is_stored_in_track_time_id_order_and_stats_are_exact(batches, chunk_rows):
    stats = TrackStats()
    orderer = staging.ChunkOrderer(ts.START_TS, ts.ID, ts.END_TS, stats, chunk_rows=chunk_rows)
    emitted = _flush_all(orderer, batches)
    rows_in = pa.Table.from_batches(batches).to_pylist() if batches else []
    rows_out = [r for part in emitted for b in part for r in pa.Table.from_batches([b]).to_pylist()]
    key = lambda r: (r[dbs.TRACK_ID], r[ts.START_TS], r[ts.ID])  # noqa: E731
    assert sorted(rows_in, key=key) == sorted(rows_out, key=key), "rows lost or changed"
    for part in emitted:
        rows = [r for b in part for r in pa.Table.from_batches([b]).to_pylist()]
        assert [key(r) for r in rows] == sorted(key(r) for r in rows), "a chunk is not in (track, time, id) order"
        assert all(b.num_rows <= staging.OUT_BATCH_ROWS for b in part)
    # Statistics per track, and whether the track's stored rows (chunk after chunk) are in time order.
    stored = [r for part in emitted for b in part for r in pa.Table.from_batches([b]).to_pylist()]
    for tid in {r[dbs.TRACK_ID] for r in rows_in}:
        mine = [r for r in stored if r[dbs.TRACK_ID] == tid]
        starts = [r[ts.START_TS] for r in mine]
        assert stats.count[tid] == len(mine)
        assert stats.min_start[tid] == min(starts) and stats.max_start[tid] == max(starts)
        assert stats.max_end[tid] == max(max(r[ts.END_TS], r[ts.START_TS]) for r in mine)
        assert stats.max_dur[tid] == max(max(r[ts.END_TS], r[ts.START_TS]) - r[ts.START_TS] for r in mine)
        keys = [(r[ts.START_TS], r[ts.ID]) for r in mine]
        assert bool(stats.in_order[tid]) == (keys == sorted(keys))


def test_runs_of_one_track_keep_their_dictionaries_and_arrive_in_row_group_batches():
    """The common recorder shape: batches holding runs of one track each, already in time order."""
    stats = TrackStats()
    orderer = staging.ChunkOrderer(ts.START_TS, ts.ID, ts.END_TS, stats)
    n = 50_000
    batches = []
    for b in range(4):
        tid = np.repeat([b % 2, 2 + b % 2], n // 2)
        start = np.tile(np.arange(n // 2), 2) + b * n
        batches.append(pa.RecordBatch.from_pydict({
            dbs.TRACK_ID: pa.array(tid), ts.ID: pa.array(np.arange(n) + b * n), ts.START_TS: pa.array(start),
            ts.END_TS: pa.array(start + 1),
            ts.OPCODE: pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([f"op{b}"]))}))
    for b in batches:
        assert orderer.add(b) == []
    out = orderer.flush()
    table = pa.Table.from_batches(out)
    tids = table.column(dbs.TRACK_ID).to_numpy()
    assert np.all(np.diff(tids) >= 0)
    assert [b.num_rows for b in out[:-1]] == [staging.OUT_BATCH_ROWS] * (len(out) - 1)
    assert table.column(ts.OPCODE).to_pylist()[:2] == ["op0", "op0"]
    assert bool(stats.in_order[:4].all())


def test_counters_keep_arrival_order_for_equal_timestamps():
    stats = TrackStats()
    orderer = staging.ChunkOrderer(ts.TIMESTAMP, None, None, stats)
    batch = pa.RecordBatch.from_pydict({dbs.TRACK_ID: pa.array([1, 0, 1, 0, 1]),
                                        ts.TIMESTAMP: pa.array([5, 3, 5, 3, 2]),
                                        ts.VALUE: pa.array([1.0, 2.0, 3.0, 4.0, 5.0])})
    orderer.add(batch)
    rows = pa.Table.from_batches(orderer.flush()).to_pylist()
    assert [(r[dbs.TRACK_ID], r[ts.TIMESTAMP], r[ts.VALUE]) for r in rows] == [
        (0, 3, 2.0), (0, 3, 4.0), (1, 2, 5.0), (1, 5, 1.0), (1, 5, 3.0)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=150, max_size=400), st.integers(2, 9), st.sampled_from([64, 100, 150]))
def test_aligned_chunks_store_whole_row_groups_of_one_track_and_lose_nothing(tracks, align, chunk_rows):
    """With align_rows, every chunk but the last stores a multiple of align_rows rows of each track (its earliest
    rows), so row groups never straddle two tracks; all rows arrive once, each track in time order overall."""
    n = len(tracks)
    tid = np.array(tracks, np.int64)
    start = np.arange(n, dtype=np.int64) // 3
    batches = [pa.RecordBatch.from_pydict({
        dbs.TRACK_ID: pa.array(tid[i:i + 25]), ts.ID: pa.array(np.arange(i, min(n, i + 25))),
        ts.START_TS: pa.array(start[i:i + 25]), ts.END_TS: pa.array(start[i:i + 25] + 2)}) for i in range(0, n, 25)]
    stats = TrackStats()
    orderer = staging.ChunkOrderer(ts.START_TS, ts.ID, ts.END_TS, stats, chunk_rows=chunk_rows, align_rows=align)
    parts = [orderer.add(b) for b in batches]
    parts.append(orderer.flush())
    for part in parts[:-1]:     # 4 tracks hold back at most 4 * (align - 1) <= chunk_rows // 2 rows
        if part:
            counts = np.bincount(pa.Table.from_batches(part).column(dbs.TRACK_ID).to_numpy(), minlength=4)
            assert all(c % align == 0 for c in counts.tolist()), counts
    stored = pa.Table.from_batches([b for part in parts for b in part])
    assert sorted(stored.column(ts.ID).to_pylist()) == list(range(n))
    for t in set(tracks):
        mine = stored.column(ts.ID).to_numpy()[stored.column(dbs.TRACK_ID).to_numpy() == t].tolist()
        assert mine == sorted(mine)
        assert bool(stats.in_order[t]) and stats.count[t] == len(mine)
