"""A served trace's query tracks (``?query=`` on the timeline): one run per query, no lock held while one runs (a
slow query delayed every other request on its trace for minutes), timeouts not kept, results bounded in bytes."""

from __future__ import annotations

import threading
import time

import pytest

import profiler
from dashboard import timeline_logic as tl
from profiler.errors import QueryError
from profiler.query_track import query_tracks


class _FakeTrace:
    time_range = (0, 1000)


@pytest.fixture
def runs(monkeypatch):
    """Replace the query itself: "slow" blocks until ``gate`` is set; "timeout" times out on its first run."""
    calls: list[str] = []
    gate = threading.Event()

    def fake(trace, sql):
        calls.append(sql)
        if sql == "slow":
            assert gate.wait(10)
        if sql == "timeout" and calls.count("timeout") == 1:
            raise QueryError("query timed out after 60 s (raise timeout_s / --timeout, or narrow it ...)")
        if sql == "bad":
            raise QueryError("Catalog Error: Table with name nope does not exist!")
        return f"tracks of {sql}"

    monkeypatch.setattr(tl, "query_tracks", fake)
    return calls, gate


def test_a_slow_query_delays_neither_other_queries_nor_plain_timelines(runs):
    calls, gate = runs
    layout = tl.TraceLayout(_FakeTrace())
    results: list[object] = []
    first = threading.Thread(target=lambda: results.append(layout.query("slow")))
    second = threading.Thread(target=lambda: results.append(layout.query("slow")))
    first.start()
    while "slow" not in calls:
        time.sleep(0.005)
    second.start()
    t0 = time.monotonic()
    assert layout.query("fast") == "tracks of fast"      # another query runs beside the slow one
    assert layout.query("") is None                       # a timeline without a query never waits
    assert time.monotonic() - t0 < 2
    gate.set()
    first.join(10)
    second.join(10)
    assert results == ["tracks of slow", "tracks of slow"]
    assert calls.count("slow") == 1                       # the second request waited for the first run
    assert layout.query("slow") == "tracks of slow" and calls.count("slow") == 1  # kept


def test_a_timed_out_query_is_run_again_other_errors_are_kept(runs):
    calls, _gate = runs
    layout = tl.TraceLayout(_FakeTrace())
    assert layout.query("timeout") == "query timed out after 60 s (narrow it ...)"  # no knob it lacks
    assert layout.query("timeout") == "tracks of timeout"
    assert layout.query("bad").startswith("Catalog Error")
    assert layout.query("bad").startswith("Catalog Error")
    assert calls == ["timeout", "timeout", "bad"]


def test_the_least_recently_used_query_is_dropped(runs):
    calls, _gate = runs
    layout = tl.TraceLayout(_FakeTrace())
    for i in range(tl.MAX_CACHED_QUERIES):
        layout.query(f"q{i}")
    layout.query("q0")                                    # used again: q1 is now the oldest
    layout.query("new")
    layout.query("q0")
    layout.query("q1")
    assert calls.count("q0") == 1 and calls.count("q1") == 2


def test_a_query_track_result_is_bounded_in_bytes(mlp_sample):
    with profiler.open(mlp_sample) as trace:
        huge = "SELECT range AS start_ts, range + 1 AS end_ts, repeat('y', 10000) AS name FROM range(200)"
        with pytest.raises(QueryError, match=r"^the query returned more than 1 MiB; a query track keeps at most"):
            query_tracks(trace, huge, max_bytes=2**20)
        assert query_tracks(trace, huge.replace("10000", "10"), max_bytes=2**20).rows


def test_users_queries_take_the_servers_slots(mlp_sample):
    """Each served trace's memory limit binds only its own instance, so a server runs at most two users' queries at
    once, whichever traces they are on: a third waits for a slot up to its timeout, then says why."""
    from dashboard import sql_logic
    from dashboard.query_slots import UserQuerySlots

    slots = UserQuerySlots(2)
    held = [threading.Event(), threading.Event()]
    release = threading.Event()

    def hold(i: int) -> None:
        with slots.slot(None):
            held[i].set()
            release.wait(10)

    holders = [threading.Thread(target=hold, args=(i,)) for i in range(2)]
    for t in holders:
        t.start()
    try:
        assert all(h.wait(5) for h in held)
        with profiler.open(mlp_sample) as trace:
            t0 = time.monotonic()
            busy = sql_logic.run_query(trace, "SELECT 1", timeout_s=0.3, slots=slots)
            assert 0.25 < time.monotonic() - t0 < 5
            assert busy.error.startswith("the server is already running 2 SQL queries, the most it runs at once")
            release.set()
            for t in holders:
                t.join(10)
            assert sql_logic.run_query(trace, "SELECT 1", timeout_s=5, slots=slots).error is None
            layout = tl.TraceLayout(trace, slots)
            assert isinstance(layout.query("SELECT start_ts, end_ts FROM Instruction LIMIT 3"), tl.QueryTracks)
    finally:
        release.set()
