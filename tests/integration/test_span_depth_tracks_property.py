"""Span tracks split by depth, property-tested: random nested Chrome threads ingested, against a brute force.

Every slice lands on the track of its thread and depth (``track.span_depth`` = ``slice.depth``), no span track
holds two overlapping slices, and each thread's slices are exactly the input's.
"""

from __future__ import annotations

import itertools
import json
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profiler


@st.composite
def nested_threads(draw):
    """Per thread, X events that nest: children lie inside their parent, siblings do not overlap."""
    events = []
    for tid in range(draw(st.integers(1, 3))):
        def fill(start: int, end: int, level: int, tid: int = tid) -> None:
            t = start
            while t < end - 1 and level < 6 and ((level == 0 and t == start) or draw(st.booleans())):
                length = draw(st.integers(1, max(1, end - t - 1)))
                name = f"f{draw(st.integers(0, 4))}"
                events.append({"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": t, "dur": length})
                fill(t, t + length, level + 1)
                t += length + draw(st.integers(0, 3))
        fill(0, draw(st.integers(2, 200)), 0)
    return events


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nested_threads())
def test_span_tracks_by_depth_match_a_brute_force(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("nest") / "t.json"
    path.write_text(json.dumps(events))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = profiler.open(path)
    try:
        rows = trace.sql("SELECT k.name, k.span_depth, s.depth, s.name, s.start_ts, s.end_ts, s.track_id "
                         "FROM slice s JOIN track k USING (track_id)").fetchall()
        kinds = {r[0] for r in trace.sql("SELECT kind FROM track").fetchall()}
    finally:
        trace.close()
    assert kinds == {"span"}
    by_track: dict[int, list[tuple[int, int]]] = {}
    for _thread, span_depth, depth, _name, s, e, tid in rows:
        assert span_depth == depth
        by_track.setdefault(tid, []).append((s, e))
    for intervals in by_track.values():
        intervals.sort()
        assert all(e0 <= s1 for (_s0, e0), (s1, _e1) in itertools.pairwise(intervals))
    got = sorted((thread, name, s, e) for thread, _sd, _d, name, s, e, _t in rows)
    want = sorted((f"tid {ev['tid']}", ev["name"], ev["ts"] * 1000, (ev["ts"] + ev["dur"]) * 1000) for ev in events)
    assert got == want
    # the brute-force depth: how many of its thread's slices enclose a slice (the generator never repeats an
    # interval: a child is shorter than its parent)
    for thread, _sd, depth, name, s, e, _t in rows:
        tid = int(thread.split()[1])
        mine = [ev for ev in events if ev["tid"] == tid]
        enclosing = sum(1 for ev in mine if ev["ts"] * 1000 <= s and e <= (ev["ts"] + ev["dur"]) * 1000
                        and (ev["ts"] * 1000, (ev["ts"] + ev["dur"]) * 1000) != (s, e))
        assert depth == enclosing, (thread, name, s, e)
