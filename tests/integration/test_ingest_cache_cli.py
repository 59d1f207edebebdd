"""`trnprof ingest` and the cache other commands share: out-of-date entries, the lock, mistakes at the cache path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import profiler
from profiler.cli import main
from profiler.db.cache import cache_path
from profiler.errors import TraceFormatError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "traces" / "softmax.trace"


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "softmax.trace"
    shutil.copytree(GOLDEN, path)
    return path


def test_ingest_rebuilds_its_own_out_of_date_cache_entry_without_force(trace, capsys):
    assert main(["ingest", str(trace)]) == 0
    assert main(["ingest", str(trace)]) == 0 and "(up to date)" in capsys.readouterr().out
    meta = trace / "Metadata.arrows"
    os.utime(meta, ns=(meta.stat().st_atime_ns, meta.stat().st_mtime_ns + 10**9))   # the trace changed
    # it said "exists; pass --force to replace it" while `summary` rebuilt the same entry silently
    assert main(["ingest", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "up to date" not in out and str(cache_path(trace)) in out
    assert main(["ingest", str(trace)]) == 0 and "(up to date)" in capsys.readouterr().out


def test_a_directory_at_the_cache_entry_is_named_before_any_ingest(trace, capsys):
    cache_path(trace).mkdir()
    with pytest.raises(TraceFormatError, match=r"trnprof\.duckdb: the cache entry of .* is a directory; remove it"):
        profiler.open(trace)
    assert main(["ingest", str(trace)]) != 0
    assert "the trace's cache entry is a directory" in capsys.readouterr().err
    assert not [p for p in trace.parent.iterdir() if p.name.endswith(".tmp")]


def test_the_fix_named_for_a_damaged_database_works(trace, tmp_path, capsys):
    db = tmp_path / "t.duckdb"
    assert main(["ingest", str(trace), "-o", str(db)]) == 0
    data = bytearray(db.read_bytes())
    data[len(data) // 2:len(data) // 2 + 4096] = b"\x00" * 4096
    data[4096:4200] = b"\xff" * 104
    db.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["sql", str(db), "SELECT count(*) FROM Instruction"]) != 0
    err = capsys.readouterr().err
    assert f"delete it, then re-create it with `trnprof ingest TRACE -o {db}`" in err
    db.unlink()
    assert main(["ingest", str(trace), "-o", str(db)]) == 0
