"""Trace.window / utilization / busy_ns against a brute-force oracle over the raw intervals (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler
from profiler import db_schema as dbs
from profiler.db.window_query import RAW_EVENTS_PER_PIXEL
from tests.unit.test_index_lod import oracle_bucket
from tracer import schema as ts
from tracer import write_trace

OPCODES = ("MATMUL", "ACT", "COPY")


@st.composite
def intervals(draw, max_n=50, base=0):
    n = draw(st.integers(0, max_n))
    s = sorted(base + draw(st.integers(0, 2_000)) for _ in range(n))
    d = [draw(st.one_of(st.just(0), st.integers(0, 40), st.integers(0, 600))) for _ in range(n)]
    names = [draw(st.sampled_from(OPCODES)) for _ in range(n)]
    return np.array(s, np.int64), np.array(s, np.int64) + np.array(d, np.int64), names


def _write(path, tensor, vector, dma, spans):
    tables = {}
    inst_rows = [(s, e, n, "Tensor") for s, e, n in zip(*tensor, strict=True)] + \
                [(s, e, n, "Vector") for s, e, n in zip(*vector, strict=True)]
    if inst_rows:
        s, e, n, eng = (list(c) for c in zip(*inst_rows, strict=True))
        tables["Instruction"] = {
            ts.ID: np.arange(len(s)) * 3 + 7, ts.START_TS: s, ts.END_TS: e,
            ts.DURATION_NS: np.array(e) - np.array(s), ts.ENGINE: eng, ts.OPCODE: n,
            ts.OPERANDS: ["x"] * len(s), ts.PC: np.arange(len(s)), ts.PCORE_IDX: [0] * len(s)}
    if len(dma[0]):
        m = len(dma[0])
        tables["DmaPacket"] = {
            ts.ID: np.arange(m) + 1000, ts.START_TS: dma[0], ts.END_TS: dma[1], ts.DURATION_NS: dma[1] - dma[0],
            ts.QUEUE_NAME: ["qSyncIO0"] * m, ts.VARIABLE: dma[2], ts.READ_BYTES: [64] * m, ts.WRITE_BYTES: [64] * m,
            ts.TRANSFER_BYTES: [64] * m, ts.PCORE_IDX: [0] * m}
    if len(spans[0]):
        m = len(spans[0])
        tables["Span"] = {
            ts.ID: np.arange(m) + 5000, ts.START_TS: spans[0], ts.END_TS: spans[1],
            ts.DURATION_NS: spans[1] - spans[0], ts.NAME: spans[2], ts.TRACK_NAME: ["operator"] * m,
            ts.PCORE_IDX: [0] * m}
    write_trace(path, tables, metadata={"arch": "trn2"}, overwrite=True)


def _truth(trace, tables):
    """track_id -> (start, end, ids, names) read straight from the database rows (no index involved)."""
    out = {}
    for row in trace.tracks().to_pylist():
        table = row[dbs.TABLE]
        name_col = {"Instruction": "opcode", "DmaPacket": "variable", "slice": "name"}[table]
        rows = trace.sql(f'SELECT start_ts, end_ts, id, {name_col} FROM "{table}" WHERE track_id = {row["track_id"]}'
                         ).to_arrow_table().to_pydict()
        out[row["track_id"]] = (rows["start_ts"], rows["end_ts"], rows["id"], rows[name_col])
    return out


def _check_window(trace, truth, start, end, width):
    w = trace.window(start, end, width)
    r = w.resolution_ns
    assert r & (r - 1) == 0 and r <= max(1, (end - start) // width)
    assert r * 2 > max(1, (end - start) // width)
    a, b = (start // r) * r, -(-end // r) * r
    assert (w.bucket_start_ns, w.bucket_end_ns) == (a, b)
    ev_tracks = set(w.events.column(dbs.TRACK_ID).to_pylist())
    bk_tracks = set(w.buckets.column(dbs.TRACK_ID).to_pylist())
    assert not ev_tracks & bk_tracks
    for tid, (s, e, ids, names) in truth.items():
        in_view = sorted(i for i, si, ei in zip(ids, s, e, strict=True) if si < end and (ei > start or si >= start))
        if tid in bk_tracks:
            rows = w.buckets.filter(np.asarray(w.buckets.column(dbs.TRACK_ID)) == tid).to_pylist()
            starts = [x[ts.START_TS] for x in rows]
            assert starts == list(range(a, b, r)), "buckets tile the snapped window"
            assert all(x[ts.END_TS] - x[ts.START_TS] == r for x in rows)
            for x in rows:
                expect = oracle_bucket((s, e, ids, names), x[ts.START_TS], x[ts.END_TS])
                assert (x[dbs.BUSY_NS], x[dbs.COUNT], x[dbs.LONGEST_ID], x[dbs.TOP_NAME]) == expect
            starting = sum(1 for si in s if a <= si < b)
            assert starting > RAW_EVENTS_PER_PIXEL * width or sum(1 for i in in_view) > RAW_EVENTS_PER_PIXEL * width
        else:
            got = sorted(w.events.filter(np.asarray(w.events.column(dbs.TRACK_ID)) == tid).column(ts.ID).to_pylist())
            assert got == in_view
            assert len(got) <= RAW_EVENTS_PER_PIXEL * width + len(s)  # raw only when few (carry-ins aside)
    util = trace.utilization(start, end, width)
    for tid, (s, e, ids, names) in truth.items():
        rows = util.filter(np.asarray(util.column(dbs.TRACK_ID)) == tid).to_pylist()
        assert [x[ts.START_TS] for x in rows] == list(range(a, b, r))
        for x in rows:
            busy = oracle_bucket((s, e, ids, names), x[ts.START_TS], x[ts.END_TS])[0]
            assert x[dbs.BUSY_FRACTION] == busy / r
        busy_exact = oracle_bucket((s, e, ids, names), start, end)[0]
        assert trace.busy_ns(tid, start, end) == busy_exact


WINDOWS = st.lists(st.tuples(st.integers(-500, 3_000), st.integers(1, 3_000), st.integers(1, 12)), min_size=1,
                   max_size=4)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.tuples(intervals(), intervals(max_n=20), intervals(), intervals(max_n=15)), WINDOWS)
def test_window_matches_the_oracle(tmp_path_factory, tracks, windows):
    tensor, vector, dma, spans = tracks
    path = tmp_path_factory.mktemp("w") / "t.trace"
    _write(path, tensor, vector, dma, spans)
    if not any(len(t[0]) for t in tracks):  # a trace without events is refused, in one line
        with pytest.raises(profiler.TrnprofError, match="holds no events"):
            profiler.open(path)
        return
    with profiler.open(path) as trace:
        truth = _truth(trace, None)
        assert sum(len(v[0]) for v in truth.values()) == len(tensor[0]) + len(vector[0]) + len(dma[0]) + len(spans[0])
        for start, length, width in windows:
            _check_window(trace, truth, start, start + length, width)
        # The whole trace at a coarse width reads the stored levels.
        lo, hi = trace.time_range
        if hi > lo:
            _check_window(trace, truth, lo, hi, 3)


def test_window_outside_the_trace_and_bad_arguments(tmp_path):
    s = np.array([100, 200], np.int64)
    _write(tmp_path / "t.trace", (s, s + 50, ["MATMUL", "ACT"]), (s[:0], s[:0], []), (s[:0], s[:0], []),
           (s[:0], s[:0], []))
    with profiler.open(tmp_path / "t.trace") as trace:
        w = trace.window(10_000, 20_000, 4)
        assert w.events.num_rows == 0 and w.buckets.num_rows == 0
        util = trace.utilization(10_000, 20_000, 4)
        assert util.num_rows > 0 and set(util.column(dbs.BUSY_FRACTION).to_pylist()) == {0.0}
        for bad in [(5, 5, 10), (0, 10, 0), (0, 10, 1 << 20), ("0", 10, 10), (0, 1 << 63, 10)]:
            try:
                trace.window(*bad)
            except profiler.QueryError:
                pass
            else:
                raise AssertionError(f"window{bad} should be a QueryError")
        try:
            trace.window(0, 10, 10, tracks=[99])
        except profiler.QueryError as exc:
            assert "no track 99" in str(exc)
        else:
            raise AssertionError("unknown track accepted")


def _peak(s, e):
    """Brute force: the largest number of events in progress at one instant (zero-length ones hold 1 ns)."""
    held = np.maximum(e, s + 1)
    return max((int(np.sum((s <= t) & (held > t))) for t in s.tolist()), default=0)


def _assert_valid_lanes(s, e, lanes):
    for lane in set(lanes.tolist()):
        idx = np.flatnonzero(lanes == lane)
        # Within a lane, each event starts at or after the previous one ends (zero-length events take 1 ns).
        assert np.all(s[idx][1:] >= np.maximum(e[idx], s[idx] + 1)[:-1])


@settings(max_examples=50, deadline=None)
@given(intervals(max_n=60))
def test_lanes_are_valid_and_as_few_as_the_peak_overlap(track):
    from profiler.db.lanes import lanes

    s, e, _ = track
    got = lanes(s, e)
    _assert_valid_lanes(s, e, got)
    # Exactly as many lanes as the peak number of events in progress at once (the fewest possible).
    assert got.max(initial=-1) + 1 == _peak(s, e)


@settings(max_examples=40, deadline=None)
@given(intervals(max_n=40), intervals(max_n=40))
def test_grouped_lanes_are_valid_within_each_group(a, b):
    from profiler.db.lanes import assign_lanes

    group = np.r_[np.zeros(len(a[0]), np.int64), np.ones(len(b[0]), np.int64)]
    start, end = np.r_[a[0], b[0]], np.r_[a[1], b[1]]
    got = assign_lanes(group, start, end)
    for g, (s, e, _) in enumerate((a, b)):
        _assert_valid_lanes(s, e, got[group == g])
        assert got[group == g].max(initial=-1) + 1 == _peak(s, e)


@settings(max_examples=25, deadline=None)
@given(intervals(max_n=30), intervals(max_n=30))
def test_grouped_lanes_with_times_too_far_apart_to_pack(a, b):
    # Group keys cannot share one int64 when the times span ~2^62 ns: the per-group fallback must agree.
    from profiler.db.lanes import assign_lanes

    shift = np.int64(1) << np.int64(61)
    group = np.r_[np.zeros(len(a[0]), np.int64), np.ones(len(b[0]), np.int64)]
    start, end = np.r_[a[0] - shift, b[0] + shift], np.r_[a[1] - shift, b[1] + shift]
    got = assign_lanes(group, start, end)
    for g, (s, e, _) in enumerate((a, b)):
        _assert_valid_lanes(s, e, got[group == g])
        assert got[group == g].max(initial=-1) + 1 == _peak(s, e)


def test_event_attributes_are_read_only_when_asked_for(tmp_path):
    n = 6
    tables = {"Instruction": {
        ts.ID: np.arange(n) + 1, ts.START_TS: np.arange(n) * 10, ts.END_TS: np.arange(n) * 10 + 8,
        ts.DURATION_NS: [8] * n, ts.ENGINE: ["Tensor"] * n, ts.OPCODE: ["MATMUL"] * n, ts.OPERANDS: ["x"] * n,
        ts.PC: np.arange(n), ts.PCORE_IDX: [0] * n, ts.LAYER: [f"layer{i % 2}" for i in range(n)],
        ts.HLO_NAME: [f"dot.{i}" for i in range(n)], ts.NKI_SOURCE_LOCATION: [f"k.py:{i}" for i in range(n)]}}
    write_trace(tmp_path / "a.trace", tables, metadata={"arch": "trn2"})
    with profiler.open(tmp_path / "a.trace") as trace:
        full = trace.window(0, 60, 600)
        bare = trace.window(0, 60, 600, attributes=False)
        assert full.events.schema == bare.events.schema == dbs.WINDOW_EVENTS
        assert full.events.column(ts.ID).to_pylist() == bare.events.column(ts.ID).to_pylist() == list(range(1, 7))
        assert full.events.column(ts.LAYER).to_pylist() == tables["Instruction"][ts.LAYER]
        assert full.events.column(dbs.OPERATOR).to_pylist() == tables["Instruction"][ts.HLO_NAME]
        assert full.events.column(dbs.SOURCE).to_pylist() == tables["Instruction"][ts.NKI_SOURCE_LOCATION]
        for col in (ts.LAYER, dbs.OPERATOR, dbs.SOURCE):
            assert bare.events.column(col).null_count == n
        assert bare.events.column(ts.NAME).to_pylist() == ["MATMUL"] * n


@settings(max_examples=40, deadline=None)
@given(st.lists(intervals(max_n=30, base=-300), min_size=2, max_size=4), st.integers(0, 4), st.integers(-200, 1500),
       st.integers(1, 60))
def test_bucketing_several_tracks_at_once_equals_one_at_a_time(tracks, k, b_lo, nb):
    # Tracks are packed into one bucketing, each shifted into a region of its own: the result per track must be
    # exactly what bucketing it alone gives (busy, count, longest, covering event, dominant name).
    import pyarrow as pa

    from profiler.db import lod
    from profiler.db.raw_rows import RawRows, bucketize_tracks

    tid, s, e, ids, names = [], [], [], [], []
    for j, (ts_, te_, nm) in enumerate(tracks):
        tid += [j] * len(ts_)
        s += ts_.tolist()
        e += te_.tolist()
        ids += list(range(100 * j, 100 * j + len(ts_)))
        names += nm
    values = [float((7 * i) % 13) for i in range(len(s))]          # per-event values (bytes, FLOPs)
    rr = RawRows(pa.table({dbs.TRACK_ID: pa.array(tid, pa.int64()), ts.ID: pa.array(ids, pa.int64()),
                            ts.START_TS: pa.array(s, pa.int64()), ts.END_TS: pa.array(e, pa.int64()),
                            ts.NAME: pa.array(names, pa.string()), ts.VALUE: pa.array(values, pa.float64())}))
    b_hi = b_lo + nb
    runs = []
    for j in range(len(tracks)):
        a, b = (int(x) for x in np.searchsorted(rr.tid, [j, j + 1]))
        if b > a:
            runs.append((j, a, b))
    got = dict(bucketize_tracks(rr, runs, k, b_lo, b_hi))
    for j, a, b in runs:
        ev = lod.prepare(rr.start[a:b], rr.end[a:b], rr.ids[a:b], rr.take(ts.NAME, np.arange(a, b)),
                         values=rr.values[a:b])
        alone = lod.bucketize(ev, k, b_lo, b_hi)
        cols = [dbs.BUSY_NS, dbs.COUNT, dbs.LONGEST_ID, dbs.TOP_NAME]
        assert got[j].select(cols).to_pylist() == alone.select(cols).to_pylist()
        # Value sums are float: equal to within rounding (the spread's running sums see other magnitudes).
        np.testing.assert_allclose(got[j].column(dbs.VALUE_SUM).to_numpy(), alone.column(dbs.VALUE_SUM).to_numpy(),
                                   rtol=1e-9, atol=1e-9)


def test_a_sparse_stored_track_between_raw_tracks_is_listed_once(tmp_path):
    # q0 and q2 are finer than their stored levels (raw scan over track ids 0..2); q1 has a stored level but
    # few events in view, so it is fetched raw afterwards: its rows must not come twice.
    q1 = [(100, 110), (120, 130), (150, 190)] + [(5000 + i, 5001 + i) for i in range(1000)]
    rows = [("q0", 0, 5), ("q0", 1_000_000, 1_000_005), *(("q1", s, e) for s, e in q1),
            ("q2", 40, 60), ("q2", 2_000_000, 2_000_001)]
    m = len(rows)
    write_trace(tmp_path / "q.trace", {"DmaPacket": {
        ts.ID: np.arange(m) + 1, ts.START_TS: [r[1] for r in rows], ts.END_TS: [r[2] for r in rows],
        ts.DURATION_NS: [r[2] - r[1] for r in rows], ts.QUEUE_NAME: [r[0] for r in rows],
        ts.READ_BYTES: [1] * m, ts.WRITE_BYTES: [1] * m, ts.TRANSFER_BYTES: [1] * m, ts.PCORE_IDX: [0] * m,
        ts.VARIABLE: ["v"] * m}}, metadata={"arch": "trn2"})
    with profiler.open(tmp_path / "q.trace") as trace:
        infos = {t["name"]: trace.track_info(t["track_id"]) for t in trace.tracks().to_pylist()}
        w = trace.window(0, 2000, 100)
        k = w.resolution_ns.bit_length() - 1
        assert k < infos["q0"].lod_min_level and k < infos["q2"].lod_min_level and k >= infos["q1"].lod_min_level
        assert w.buckets.num_rows == 0
        got = sorted(zip(w.events.column(dbs.TRACK_ID).to_pylist(), w.events.column(ts.START_TS).to_pylist(),
                         strict=True))
        ids = {n: infos[n].track_id for n in infos}
        assert got == sorted([(ids["q0"], 0), (ids["q1"], 100), (ids["q1"], 120), (ids["q1"], 150),
                              (ids["q2"], 40)])
