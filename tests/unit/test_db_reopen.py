"""Opening one trace database twice in a process: shared locked instance, sandbox intact, stale files refused."""

from __future__ import annotations

import json
import threading

import duckdb
import pytest

import profiler
from profiler.cli import main
from profiler.synth import synth_trace
from tracer.errors import TraceFormatError

HOSTILE = ["SELECT * FROM read_csv('/etc/passwd')", "SET enable_external_access = true",
           "SET lock_configuration = false", "ATTACH '/tmp/trnprof_other.duckdb' AS other",
           "CREATE TABLE evil AS SELECT 1"]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return synth_trace(tmp_path_factory.mktemp("reopen") / "r.trace", events=600, tracks=3, seed=3)


def _count(t):
    return t.sql("SELECT count(*) FROM Instruction").fetchall()[0][0]


def test_the_same_database_opens_twice_and_each_copy_stays_sandboxed(trace_dir):
    with profiler.open(trace_dir) as first:
        db = first.db_path
        mtime = db.stat().st_mtime_ns
        second = profiler.open(trace_dir)           # through the cache: not re-ingested
        third = profiler.open(db)                   # the database file itself
        assert db.stat().st_mtime_ns == mtime
        assert _count(first) == _count(second) == _count(third) > 0
        for t in (first, second, third):
            for query in HOSTILE:
                with pytest.raises(profiler.QueryError):
                    t.sql(query)
        second.close()
        third.close()
        assert _count(first) > 0                     # closing the other copies leaves this one working
        for query in HOSTILE:
            with pytest.raises(profiler.QueryError):
                first.sql(query)


def test_concurrent_opens_from_threads(trace_dir):
    with profiler.open(trace_dir) as held:
        results, errors = [], []

        def worker():
            try:
                with profiler.open(held.db_path) as t:
                    results.append(_count(t))
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors and results == [_count(held)] * 6


def test_a_file_replaced_while_the_old_one_is_open_is_a_one_line_error(tmp_path):
    path = synth_trace(tmp_path / "s.trace", events=300, tracks=2, seed=1)
    old = profiler.open(path)
    before = _count(old)
    synth_trace(path, events=500, tracks=2, seed=2, overwrite=True)   # the input changes: the cache is rebuilt
    with pytest.raises(TraceFormatError, match="replaced.*close it") as info:
        profiler.open(path)
    assert "\n" not in str(info.value)
    assert _count(old) == before                     # the open copy keeps reading the version it opened
    old.close()
    with profiler.open(path) as new:
        assert _count(new) != before                 # once closed, the new version opens


def test_a_foreign_connection_with_other_settings_is_named(tmp_path, trace_dir):
    with profiler.open(trace_dir) as t:
        db = tmp_path / "copy.duckdb"
        db.write_bytes(t.db_path.read_bytes())
    foreign = duckdb.connect(str(db))                # read-write, not sandboxed
    try:
        with pytest.raises(TraceFormatError, match="already open in this process") as info:
            profiler.open(db)
        assert "\n" not in str(info.value)
    finally:
        foreign.close()
    with profiler.open(db) as t:
        assert _count(t) > 0


def test_diff_of_a_trace_with_itself_compares_normally(trace_dir, capsys):
    assert main(["diff", str(trace_dir), str(trace_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total_time"]["delta"] == 0 and out["total_time"]["a"] == out["total_time"]["b"] > 0
