"""The buffer pool of an opened trace is capped (bounded serving memory), settable by environment, not by SQL."""

from __future__ import annotations

import pytest

import profiler
from profiler.cli import main
from profiler.db.connection import MAX_DEFAULT_MEMORY_BYTES, MEMORY_LIMIT_ENV, default_memory_limit
from profiler.synth import synth_trace


@pytest.fixture(scope="module")
def db_path(tmp_path_factory):
    trace = synth_trace(tmp_path_factory.mktemp("memlimit") / "m.trace", events=400, tracks=2, seed=5)
    with profiler.open(trace) as t:
        return t.db_path

def _setting(t) -> str:
    return t.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]

def test_default_limit_is_a_quarter_of_ram_at_most_4_gib(monkeypatch):
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    mib = int(default_memory_limit().removesuffix("MiB"))
    assert 0 < mib <= MAX_DEFAULT_MEMORY_BYTES >> 20

def test_environment_sets_the_limit_and_sql_cannot_raise_it(db_path, monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "300MiB")
    with profiler.open(db_path) as t:
        assert _setting(t) == "300.0 MiB"
        with pytest.raises(profiler.QueryError, match="not allowed: SET statement"):
            t.sql("SET memory_limit = '100GB'")
        with pytest.raises(profiler.QueryError, match="not allowed: SET statement"):  # (the assignment form)
            t.sql("PRAGMA memory_limit = '100GB'")
        assert _setting(t) == "300.0 MiB"
        assert t.sql("SELECT count(*) FROM Instruction").fetchall()[0][0] > 0

def test_a_bad_limit_is_a_one_line_error_naming_the_variable(db_path, monkeypatch, capsys):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    assert main(["summary", str(db_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and MEMORY_LIMIT_ENV in err and "2GiB" in err, err
