"""Track keys of Span rows: one track per thread and depth, a missing depth at the top, depths in numeric order."""

from __future__ import annotations

import pyarrow as pa

from profiler import db_schema as dbs
from profiler.db.tracks import TRACK_KEYS, TrackRegistry
from tracer import schema as ts


def _spans(names: list[str], depths: list[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        ts.TRACK_GROUP: ["proc"] * len(names), ts.TRACK_NAME: names,
        ts.DEPTH: pa.array(depths, pa.int32()), ts.PCORE_IDX: pa.nulls(len(names), pa.int64())})


def test_a_threads_depths_are_tracks_of_the_same_name_in_numeric_order():
    reg = TrackRegistry()
    spec = TRACK_KEYS[ts.SPAN.name]
    depths = [2, 10, 0, 1, None, 11, 3]
    ids = reg.assign(spec, _spans(["main"] * len(depths), depths))
    assert ids[2] == ids[4]  # a span without a depth is on the top level's track
    rows = sorted(reg.track_rows(), key=lambda r: r[dbs.SORT_ORDER])
    assert [r[dbs.SPAN_DEPTH] for r in rows] == [0, 1, 2, 3, 10, 11]
    assert {r[ts.NAME] for r in rows} == {"main"} and {r[dbs.KIND] for r in rows} == {"span"}
    # a second batch finds the same tracks, and another thread's come after (by name)
    again = reg.assign(spec, _spans(["main", "worker"], [10, 0]))
    assert again[0] == ids[1] and again[1] not in set(ids.tolist())
    rows = sorted(reg.track_rows(), key=lambda r: r[dbs.SORT_ORDER])
    assert [(r[ts.NAME], r[dbs.SPAN_DEPTH]) for r in rows][-1] == ("worker", 0)


def test_other_tracks_have_no_span_depth():
    reg = TrackRegistry()
    batch = pa.RecordBatch.from_pydict({ts.ENGINE: ["Tensor", "Vector"], ts.PCORE_IDX: [0, 0]})
    reg.assign(TRACK_KEYS[ts.INSTRUCTION.name], batch)
    assert [r[dbs.SPAN_DEPTH] for r in reg.track_rows()] == [None, None]


def test_dma_queues_are_ordered_by_their_number_and_odd_digits_do_not_break_ingest(tmp_path):
    """Queue names sort by the number in them (q9 before q10); a name with a character ``str.isdigit`` takes but
    ``int`` rejects (``²``) ingests (it failed with an internal error) and counts as no number."""
    import numpy as np

    import profiler
    from tracer import TraceWriter

    z = np.zeros(3, np.int64)
    with TraceWriter(tmp_path / "q.trace", metadata={"arch": "trn2"}) as w:
        w.append("DmaPacket", {"id": np.arange(3), "start_ts": np.array([0, 10, 20]),
                               "end_ts": np.array([5, 15, 25]), "duration_ns": np.full(3, 5), "read_bytes": z,
                               "write_bytes": z, "transfer_bytes": z, "queue_name": ["q10", "q²", "q9"],
                               "pcore_idx": z})
    with profiler.open(tmp_path / "q.trace") as t:
        assert [r["name"] for r in t.tracks().to_pylist()] == ["q²", "q9", "q10"]
