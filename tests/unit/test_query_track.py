"""Query tracks (profiler.query_track): a SQL result drawn as timeline rows, checked against the database's own
windows of the same intervals and against brute-force oracles, and every bad query as a one-line QueryError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import profiler
from profiler import db_schema as dbs
from profiler.errors import QueryError
from profiler.query_track import MAX_QUERY_TRACKS, QUERY_GROUP, query_tracks
from tests.browser.trace_factory import write_kernel_trace
from tracer import schema as ts


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    with profiler.open(write_kernel_trace(tmp_path_factory.mktemp("qt") / "k.trace", iterations=200)) as t:
        yield t


def _track(trace, name: str, core: int = 0) -> dict:
    return next(r for r in trace.tracks().to_pylist() if r[ts.NAME] == name and r[dbs.CORE] == core)


def _values_sql(rows: list[tuple]) -> str:
    body = ", ".join("(" + ", ".join("NULL" if v is None else repr(v) for v in r) + ")" for r in rows)
    return f"SELECT * FROM (VALUES {body}) t(start_ts, end_ts, name)"


# -- the same intervals as a track of the trace draw the same window -------------------------------------------
@settings(max_examples=40, deadline=None)
@given(a=st.floats(0, 1), span=st.floats(1e-4, 1), width=st.integers(1, 3000), engine=st.sampled_from(
    ["Tensor", "Vector", "Sync"]))
def test_a_query_of_a_tracks_instructions_draws_what_the_database_draws(trace, a, span, width, engine):
    """Per window: exact events with the same times and lanes, or buckets with the same busy time, count and
    dominant name on the same grid (the representative's id is the result's row number instead)."""
    tr = _track(trace, engine)
    tracks = query_tracks(trace, f"SELECT start_ts, end_ts, opcode AS name FROM Instruction "
                                 f"WHERE track_id = {tr[dbs.TRACK_ID]}")
    t0, t1 = trace.time_range
    start = t0 + int(a * (t1 - t0))
    end = min(t1 + 1, start + max(1, int(span * (t1 - t0))))
    window = trace.window(start, end, width, tracks=[tr[dbs.TRACK_ID]])
    events, buckets = tracks.window_tables(window.start_ns, window.end_ns, width, window.resolution_ns)
    assert events.num_rows == window.events.num_rows and buckets.num_rows == window.buckets.num_rows
    for column in (ts.START_TS, ts.END_TS, ts.NAME, ts.DEPTH):
        assert events.column(column).to_pylist() == window.events.column(column).to_pylist()
    for column in (ts.START_TS, ts.END_TS, dbs.BUSY_NS, dbs.COUNT, dbs.TOP_NAME):
        assert buckets.column(column).to_pylist() == window.buckets.column(column).to_pylist()
    assert set(events.column(dbs.TRACK_ID).to_pylist()) <= {-1}
    assert set(events.column(dbs.TABLE).to_pylist()) <= {dbs.QUERY_TABLE}


INTERVALS = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 400), st.sampled_from(["a", "b", "c"])),
                     min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(intervals=INTERVALS, width=st.integers(1, 200), lo=st.integers(0, 5000), length=st.integers(1, 6000))
def test_buckets_and_events_match_brute_force(trace, intervals, width, lo, length):
    """Overlapping intervals of any shape: every bucket's busy time is the length of the union of the intervals
    clipped to it, its count the intervals starting in it; exact events are those overlapping the window, on lanes
    where no two overlap."""
    rows = [(s, s + d, n) for s, d, n in intervals]
    tracks = query_tracks(trace, _values_sql(rows))
    hi = lo + length
    k = max(1, length // width).bit_length() - 1
    events, buckets = tracks.window_tables(lo, hi, width, 1 << k)
    starts = np.array([r[0] for r in rows])
    ends = np.array([r[1] for r in rows])
    overlapping = [i for i, (s, e, _n) in enumerate(rows) if s < hi and (e > lo or s >= lo)]
    if not overlapping:
        assert events.num_rows == buckets.num_rows == 0
        return
    if events.num_rows:
        assert sorted(events.column(ts.ID).to_pylist()) == overlapping
        assert len(overlapping) <= width and buckets.num_rows == 0
        got = events.to_pylist()
        for x in got:
            assert (x[ts.START_TS], x[ts.END_TS], x[ts.NAME]) == rows[x[ts.ID]]
        held = [(x[ts.DEPTH], x[ts.START_TS], max(x[ts.END_TS], x[ts.START_TS] + 1)) for x in got]
        for i, (lane, s0, e0) in enumerate(held):      # (a zero-length interval holds its lane for 1 ns)
            for lane1, s1, e1 in held[i + 1:]:
                assert lane != lane1 or max(s0, s1) >= min(e0, e1), (held, i)
        return
    assert len(overlapping) > width
    covered = np.zeros(max(ends.max(), hi) + (1 << k) + 1, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        covered[s:e] = True
    for b in buckets.to_pylist():
        b0, b1 = b[ts.START_TS], b[ts.END_TS]
        assert b1 - b0 == 1 << k
        assert b[dbs.BUSY_NS] == int(covered[max(b0, 0):b1].sum()), b
        assert b[dbs.COUNT] == int(((starts >= b0) & (starts < b1)).sum())
    grid = buckets.column(ts.START_TS).to_pylist()
    assert grid == list(range((lo >> k) << k, (((hi - 1) >> k) + 1) << k, 1 << k))


# -- what a result's columns make -----------------------------------------------------------------------------
def test_columns_make_intervals_names_and_rows(trace):
    sql = ("SELECT * FROM (VALUES (10, 5, 'x', 'r2'), (30, NULL, 'y', 'r1'), (50, 7, NULL, 'r2'), (NULL, 1, 'z', 'r1'))"
           " t(start_ts, duration_ns, opcode, track)")
    tracks = query_tracks(trace, sql)
    assert [(r.label, r.track_id) for r in tracks.rows] == [("r2", -1), ("r1", -2)]   # first appearance order
    r2, r1 = tracks.rows
    assert r2.events.start.tolist() == [10, 50] and r2.events.end.tolist() == [15, 57]
    assert r1.events.start.tolist() == [30] and r1.events.end.tolist() == [30]      # no duration: an instant
    assert tracks.n_intervals == 3 and tracks.note == "1 rows without a start_ts left out"
    assert [r.group for r in tracks.timeline_rows()] == [QUERY_GROUP] * 2
    assert [r.label for r in tracks.timeline_rows()] == ["r2", "r1"]
    events, _ = tracks.window_tables(0, 100, 1000, 1)
    assert sorted(zip(events.column(ts.ID).to_pylist(), events.column(ts.NAME).to_pylist(), strict=True)) \
        == [(0, "x"), (1, "y"), (2, None)]
    # end_ts beats duration_ns; no name column: every interval is "query"; no track: one row
    plain = query_tracks(trace, "SELECT 5 AS start_ts, 9 AS end_ts, 100 AS duration_ns")
    assert [r.label for r in plain.rows] == ["query"] and plain.rows[0].events.end.tolist() == [9]
    assert plain.window_tables(0, 20, 100, 1)[0].column(ts.NAME).to_pylist() == ["query"]
    # times as floats are rounded; upper-case column names are found
    floats = query_tracks(trace, "SELECT 5.6::DOUBLE AS START_TS, 9.2::DOUBLE AS End_Ts")
    assert floats.rows[0].events.start.tolist() == [6] and floats.rows[0].events.end.tolist() == [9]
    # integer times are exact even where a float64 is not (epoch nanoseconds)
    epoch = query_tracks(trace, "SELECT 1700000000000000123 AS start_ts, 1700000000000000124 AS end_ts")
    assert epoch.rows[0].events.start.tolist() == [1700000000000000123]
    assert epoch.rows[0].events.end.tolist() == [1700000000000000124]


def test_a_click_picks_a_row_and_a_row_naming_an_event_links_to_it(trace):
    tensor = _track(trace, "Tensor")
    first = trace.sql(f"SELECT id, start_ts, end_ts FROM Instruction WHERE track_id = {tensor[dbs.TRACK_ID]} "
                      "ORDER BY start_ts LIMIT 1").fetchall()[0]
    tracks = query_tracks(trace, f"SELECT 'Instruction' AS table_name, id, start_ts, end_ts, opcode AS name "
                                 f"FROM Instruction WHERE track_id = {tensor[dbs.TRACK_ID]} ORDER BY start_ts")
    index = tracks.pick(-1, (first[1] + first[2]) // 2, 1)
    assert index == 0 and tracks.event_ref(index) == ("Instruction", first[0])
    assert tracks.row_fields(0)[ts.ID] == first[0]
    assert tracks.pick(-1, -10**12, 1) is None and tracks.pick(-7, first[1], 1) is None
    with pytest.raises(QueryError, match="has no row"):
        tracks.row_fields(10**9)
    loose = query_tracks(trace, "SELECT 1 AS start_ts, 2 AS end_ts, 'x' AS table_name")
    assert loose.event_ref(0) is None     # no id: the row itself


def test_merged_windows_draw_query_rows_beside_the_traces(trace):
    from profiler.figures.palette import CategoryPalette
    from profiler.figures.raster import rasterize, timeline_rows

    tracks = query_tracks(trace, "SELECT start_ts, end_ts, opcode AS name, engine AS track FROM Instruction "
                                 "WHERE opcode = 'MATMUL'")
    rows = tracks.timeline_rows() + timeline_rows(trace.tracks(), collapse_dma=True)
    t0, t1 = trace.time_range
    own = [t for r in rows for t in r.track_ids if t >= 0]
    window = tracks.merged(trace.window(t0, t1, 500, tracks=own))
    frame = rasterize(window, rows, CategoryPalette(), "opcode")
    tensor_row = next(i for i, r in enumerate(rows) if r.label == "Tensor" and r.group != QUERY_GROUP)
    query_row = next(i for i, r in enumerate(rows) if r.label == "Tensor" and r.group == QUERY_GROUP)
    # the query row of the Tensor MATMULs is drawn where the Tensor row has MATMULs
    assert (frame.codes[query_row] > 0).sum() > 0
    assert set(np.flatnonzero(frame.codes[query_row])) <= set(np.flatnonzero(frame.codes[tensor_row]))
    alone = tracks.empty_window(t0, t1, 500)
    assert alone.events.num_rows + alone.buckets.num_rows > 0


@pytest.mark.parametrize(("sql", "message"), [
    ("", "needs a SQL query"),
    (None, "needs a SQL query"),
    ("SELECT 1 AS a, 2 AS b", "needs a start_ts column .* the query's columns are: a, b"),
    ("SELECT 'x' AS start_ts", "column start_ts of the query holds string values"),
    ("SELECT 1 AS start_ts, 'late' AS end_ts", "column end_ts of the query holds string values"),
    (f"SELECT {2**62 + 5} AS start_ts", "beyond"),
    ("SELECT range AS start_ts, range::VARCHAR AS track FROM range(100)", f"at most {MAX_QUERY_TRACKS} rows"),
    ("DROP TABLE Instruction", "not allowed"),
    ("COPY Instruction TO '/tmp/trnprof-no.csv'", "not allowed"),
    ("SELECT * FROM read_csv('/etc/passwd')", None),
    ("SELECT 1 AS start_ts; SELECT 2", None),
    ("SELEC start_ts", None),
    ("SELECT 1 AS start_ts" + " " * 9000, "at most 8,000"),
    # (a raw ArrowNotImplementedError before)
    ("SELECT 1 AS start_ts, [1, 2] AS track", r"track column holds list<.*> values; a track is named by text"),
])
def test_bad_queries_are_one_line_query_errors(trace, sql, message):
    with pytest.raises(QueryError, match=message) as info:
        query_tracks(trace, sql)
    assert "\n" not in str(info.value)


def test_too_many_rows_are_refused_without_fetching_them_all(trace):
    with pytest.raises(QueryError, match="more than 100 rows"):
        query_tracks(trace, "SELECT range AS start_ts FROM range(10000000)", max_rows=100)


# -- counters: a value column -------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(a=st.floats(0, 1), span=st.floats(1e-4, 1.2), width=st.integers(1, 3000), which=st.integers(0, 10))
def test_a_query_of_a_counters_samples_draws_what_the_database_draws(trace, a, span, width, which):
    counters = [r for r in trace.tracks().to_pylist() if r[dbs.KIND] == "counter"]
    counter = counters[which % len(counters)]
    tracks = query_tracks(trace, f"SELECT timestamp AS start_ts, value FROM Counter "
                                 f"WHERE track_id = {counter[dbs.TRACK_ID]} ORDER BY timestamp")
    assert tracks.rows == [] and [c[dbs.TRACK_ID] for c in tracks.counter_tracks()] == [-1]
    t0, t1 = trace.time_range
    start = t0 - 1000 + int(a * (t1 - t0 + 2000))
    end = start + max(1, int(span * (t1 - t0)))
    want = trace.counter_window(start, end, width, tracks=[counter[dbs.TRACK_ID]])
    got = tracks.counter_window(start, end, width)
    for column in (ts.START_TS, ts.END_TS, dbs.COUNT, dbs.MIN_VALUE, dbs.MAX_VALUE, dbs.MEAN_VALUE, dbs.LAST_VALUE):
        assert got.column(column).to_pylist() == want.column(column).to_pylist(), column


def test_a_value_column_makes_counters_one_per_track(trace):
    sql = ("SELECT * FROM (VALUES (30, 1.5, 'b'), (10, 2, 'a'), (20, NULL, 'a'), (NULL, 4, 'a'), (40, 3, 'a')) "
           "t(start_ts, value, track)")
    tracks = query_tracks(trace, sql)
    assert [(c.label, c.track_id, c.t.tolist(), c.v.tolist()) for c in tracks.counters] == [
        ("b", -1, [30], [1.5]), ("a", -2, [10, 40], [2.0, 3.0])]          # sorted by time, nulls left out
    assert tracks.summary == "3 samples on 2 lanes (2 rows without a start_ts or a value left out)"
    track = tracks.counter_tracks()[1]
    assert track[ts.NAME] == "SQL · a" and track[dbs.GROUP_NAME] == QUERY_GROUP and track[ts.END_TS] == 40
    window = tracks.counter_window(0, 64, 64, tracks=[-2]).to_pylist()
    assert [w[dbs.LAST_VALUE] for w in window[9:12]] == [None, 2.0, 2.0]      # undefined before the first sample
    assert window[40][dbs.LAST_VALUE] == 3.0 and window[41][dbs.LAST_VALUE] is None   # ... and after the last
    with pytest.raises(QueryError, match="a counter's values must be numbers"):
        query_tracks(trace, "SELECT 1 AS start_ts, 'x' AS value")


def test_counter_lanes_draw_a_querys_counters_beside_the_traces(trace):
    from profiler.figures import lane_data

    own = lane_data.counter_tracks(trace.tracks())
    tracks = query_tracks(trace, f"SELECT timestamp AS start_ts, value * 2 AS value, 'twice' AS track FROM Counter "
                                 f"WHERE track_id = {own[0][dbs.TRACK_ID]} ORDER BY timestamp")
    t0, t1 = trace.time_range

    class Buffer:
        start_ns, end_ns = t0, t1

    lanes = lane_data.timeline_lanes(trace, [], Buffer, 400, [*own, *tracks.counter_tracks()], query=tracks)
    titles = [lane.title for lane in lanes]
    assert titles[-1] == "SQL · twice" and len(titles) == len(own) + 1
    first = next(lane for lane in lanes if lane.title.endswith(own[0][ts.NAME]))
    assert np.allclose(np.nan_to_num(lanes[-1].series["max"]), 2 * np.nan_to_num(first.series["max"]))
